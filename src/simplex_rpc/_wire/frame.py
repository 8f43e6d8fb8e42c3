"""The frame of a service request or response (wire.md section 4), pure Python.

This is simplex-rpc's own frame, in the SMP agent's encoding style, so that a
service request can be carried, stored, verified and measured outside the
core. It is not the agent's wire format.

::

    frame   = version body            ; version: 2 bytes big-endian, = 1
    body    = "R" signer payload      ; request
            / "S" payload             ; response
    signer  = "0"                     ; unsigned
            / "1" %d44 key %d64 sig   ; signed: SPKI DER key, signature
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ..errors import FrameError
from .keys import SIGNATURE_LENGTH, SPKI_LENGTH, SPKI_PREFIX, PublicKey

FRAME_VERSION: Final = 1
REQUEST_TAG: Final = ord("R")
RESPONSE_TAG: Final = ord("S")
UNSIGNED: Final = ord("0")
SIGNED: Final = ord("1")

UNSIGNED_REQUEST_OVERHEAD: Final = 4
SIGNED_REQUEST_OVERHEAD: Final = 4 + 1 + SPKI_LENGTH + 1 + SIGNATURE_LENGTH  # 114
RESPONSE_OVERHEAD: Final = 3

_HEAD_REQUEST_UNSIGNED: Final = b"\x00\x01R0"
_HEAD_REQUEST_SIGNED: Final = b"\x00\x01R1" + bytes([SPKI_LENGTH])
_HEAD_RESPONSE: Final = b"\x00\x01S"

Kind = Literal["request", "response"]
Buffer = bytes | bytearray | memoryview

_SIG_LENGTH_AT: Final = 5 + SPKI_LENGTH  # 49: the signature length, after the key at 5


# -- error messages ------------------------------------------------------------------
# Each decoding message is worded once, here: ``decode_frame`` raises these, and the C
# backend (``_cbackend._error``) builds the same ones from a C status and its details.
# Offsets count from the frame's first byte. They are only called on the error path.


def ends_in_version_error(size: int) -> FrameError:
    """A frame of ``size`` (< 2) bytes: it ends inside its version."""
    return FrameError(f"frame: ends at offset {size}, inside its 2-byte version")


def version_error(version: int) -> FrameError:
    """A version other than ``FRAME_VERSION``."""
    return FrameError(f"frame: unknown version {version} at offset 0")


def ends_before_tag_error() -> FrameError:
    """A frame that ends after its version."""
    return FrameError("frame: ends before its tag at offset 2")


def tag_error(tag: int) -> FrameError:
    """A tag byte that is neither ``R`` nor ``S``."""
    return FrameError(f"frame: unknown tag 0x{tag:02x} at offset 2")


def ends_before_signer_error() -> FrameError:
    """A request that ends after its tag."""
    return FrameError("frame: request ends before its signer byte at offset 3")


def signer_error(signer: int) -> FrameError:
    """A signer byte that is neither ``0`` nor ``1``."""
    return FrameError(f"frame: signer byte 0x{signer:02x} at offset 3 is not '0' or '1'")


def ends_before_key_length_error() -> FrameError:
    """A signed request that ends after its signer byte."""
    return FrameError("frame: signed request ends before its key length at offset 4")


def key_length_error(value: int, expected: int) -> FrameError:
    """A key length byte of ``value`` where ``expected`` (44) is required."""
    return FrameError(f"frame: key length {value} at offset 4 is not {expected}")


def key_prefix_error(offset: int) -> FrameError:
    """The key's byte at ``offset`` is off the Ed25519 SPKI DER prefix."""
    return FrameError(f"frame: key at offset 5 is not Ed25519 SPKI DER (byte {offset})")


def ends_in_key_error(size: int, key_end: int) -> FrameError:
    """A signed request of ``size`` bytes that ends inside its key (offsets 5 to key_end - 1)."""
    return FrameError(
        f"frame: signed request ends at offset {size}, inside its key (offsets 5 to {key_end - 1})"
    )


def ends_before_sig_length_error(offset: int) -> FrameError:
    """A signed request that ends at ``offset``, right after its key."""
    return FrameError(f"frame: signed request ends before its signature length at offset {offset}")


def sig_length_error(value: int, offset: int, expected: int) -> FrameError:
    """A signature length byte of ``value`` at ``offset`` where ``expected`` is required."""
    return FrameError(f"frame: signature length {value} at offset {offset} is not {expected}")


def ends_in_signature_error(size: int, sig_end: int) -> FrameError:
    """A signed request of ``size`` bytes that ends inside its signature (up to sig_end - 1)."""
    return FrameError(
        f"frame: signed request ends at offset {size}, inside its signature"
        f" (offsets {_SIG_LENGTH_AT + 1} to {sig_end - 1})"
    )


# -- frames --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """A decoded frame. ``key`` and ``signature`` are set for a signed request only."""

    kind: Kind
    payload: bytes
    key: PublicKey | None = None
    signature: bytes | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("request", "response"):
            raise FrameError(f"frame: kind {self.kind!r} is not 'request' or 'response'")
        if self.key is not None and not isinstance(self.key, PublicKey):
            raise TypeError(f"frame: key: expected PublicKey, got {type(self.key).__name__}")
        if (self.key is None) != (self.signature is None):
            raise FrameError("frame: a signed request needs both key and signature")
        if self.key is not None and self.kind != "request":
            raise FrameError("frame: only a request can be signed")
        if self.signature is not None and len(self.signature) != SIGNATURE_LENGTH:
            raise FrameError(
                f"frame: signature of {len(self.signature)} bytes where"
                f" {SIGNATURE_LENGTH} are required"
            )

    @property
    def signed(self) -> bool:
        """True for a signed request."""
        return self.key is not None


def frame_head(kind: Kind, key: PublicKey | None, signature: bytes | None) -> bytes:
    """The bytes of a frame before its payload, after checking the combination."""
    Frame(kind=kind, payload=b"", key=key, signature=signature)  # validates
    if kind == "response":
        return _HEAD_RESPONSE
    if key is None:
        return _HEAD_REQUEST_UNSIGNED
    assert signature is not None
    return _HEAD_REQUEST_SIGNED + key.der + bytes([SIGNATURE_LENGTH]) + bytes(signature)


def encode_frame(
    kind: Kind,
    payload: Buffer,
    *,
    key: PublicKey | None = None,
    signature: bytes | None = None,
) -> bytes:
    """Encode a frame. A signed request takes both ``key`` and ``signature``."""
    # memoryview, not bytes(): bytes(5) would be five zero bytes, bytes([1, 2]) two.
    return frame_head(kind, key, signature) + memoryview(payload).tobytes()


def decode_frame(frame: Buffer) -> Frame:
    """Decode a frame strictly; an error names the offset of the first bad byte.

    Fields are checked in the order of their offsets, so a frame that is both
    wrong and cut short is blamed on its first wrong byte; a frame that is
    only cut short is blamed on the offset where it ends.
    """
    view = memoryview(frame).cast("B")
    size = len(view)
    if size < 2:
        raise ends_in_version_error(size)
    version = (view[0] << 8) | view[1]
    if version != FRAME_VERSION:
        raise version_error(version)
    if size < 3:
        raise ends_before_tag_error()
    tag = view[2]
    if tag == RESPONSE_TAG:
        return Frame(kind="response", payload=bytes(view[3:]))
    if tag != REQUEST_TAG:
        raise tag_error(tag)
    if size < 4:
        raise ends_before_signer_error()
    signer = view[3]
    if signer == UNSIGNED:
        return Frame(kind="request", payload=bytes(view[4:]))
    if signer != SIGNED:
        raise signer_error(signer)
    if size < 5:
        raise ends_before_key_length_error()
    if view[4] != SPKI_LENGTH:
        raise key_length_error(view[4], SPKI_LENGTH)
    key_der = view[5 : 5 + SPKI_LENGTH]
    for i in range(min(len(SPKI_PREFIX), len(key_der))):
        if key_der[i] != SPKI_PREFIX[i]:
            raise key_prefix_error(5 + i)
    sig_at = _SIG_LENGTH_AT
    if size < sig_at:
        raise ends_in_key_error(size, sig_at)
    if size == sig_at:
        raise ends_before_sig_length_error(sig_at)
    if view[sig_at] != SIGNATURE_LENGTH:
        raise sig_length_error(view[sig_at], sig_at, SIGNATURE_LENGTH)
    if size < SIGNED_REQUEST_OVERHEAD:
        raise ends_in_signature_error(size, SIGNED_REQUEST_OVERHEAD)
    return Frame(
        kind="request",
        payload=bytes(view[SIGNED_REQUEST_OVERHEAD:]),
        key=PublicKey(bytes(key_der[len(SPKI_PREFIX) :])),
        signature=bytes(view[sig_at + 1 : SIGNED_REQUEST_OVERHEAD]),
    )

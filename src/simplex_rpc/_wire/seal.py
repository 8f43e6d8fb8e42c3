"""Sealing and opening service blocks: frame, sign, pad (pure Python).

Sealing and opening work on payload bytes and never parse them: envelope
parsing is a separate, explicit step (``Request.parse``), so a tool can carry
or verify any payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..errors import FrameError, PayloadTooLarge
from .frame import (
    RESPONSE_OVERHEAD,
    SIGNED_REQUEST_OVERHEAD,
    UNSIGNED_REQUEST_OVERHEAD,
    Buffer,
    Kind,
    decode_frame,
    frame_head,
)
from .keys import PublicKey, SigningKey, session_tag
from .padding import PADDED_LENGTH, pad, unpad

MAX_SIGNED_REQUEST: Final = PADDED_LENGTH - 2 - SIGNED_REQUEST_OVERHEAD  # 10990
MAX_UNSIGNED_REQUEST: Final = PADDED_LENGTH - 2 - UNSIGNED_REQUEST_OVERHEAD  # 11100
MAX_RESPONSE: Final = PADDED_LENGTH - 2 - RESPONSE_OVERHEAD  # 11101


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenedRequest:
    """An opened request block: the payload bytes, and the verified signer or None."""

    payload: bytes
    signer: PublicKey | None


def check_request_size(size: int, signed: bool) -> None:
    """Raise :class:`PayloadTooLarge` if a request payload cannot fit the block."""
    limit = MAX_SIGNED_REQUEST if signed else MAX_UNSIGNED_REQUEST
    if size > limit:
        kind = "a signed request" if signed else "an unsigned request"
        raise PayloadTooLarge(
            f"payload of {size} bytes is too large: at most {limit} bytes fit {kind}",
            size=size,
            limit=limit,
        )


def check_response_size(size: int) -> None:
    """Raise :class:`PayloadTooLarge` if a response payload cannot fit the block."""
    if size > MAX_RESPONSE:
        raise PayloadTooLarge(
            f"payload of {size} bytes is too large: at most {MAX_RESPONSE} bytes fit a response",
            size=size,
            limit=MAX_RESPONSE,
        )


def check_signing_key(signing_key: object) -> None:
    """Raise TypeError unless ``signing_key`` is None or a :class:`SigningKey`."""
    if signing_key is not None and not isinstance(signing_key, SigningKey):
        raise TypeError(f"signing_key: expected SigningKey, got {type(signing_key).__name__}")


def wrong_kind_error(expected: Kind) -> FrameError:
    """A block whose frame is not of the ``expected`` kind (the tag at offset 2).

    The one wording of this error: the pure openers below raise it, and the C
    backend builds it from its status.
    """
    found = "response" if expected == "request" else "request"
    return FrameError(f"frame: a {found} where a {expected} was expected (offset 2)")


def seal_request(
    payload: Buffer, ad: bytes, signing_key: SigningKey | None = None
) -> bytes:
    """Frame, optionally sign (bound to ``ad``), and pad a request payload."""
    check_signing_key(signing_key)
    # nbytes, not len(): a memoryview's len() counts items, not bytes.
    check_request_size(memoryview(payload).nbytes, signing_key is not None)
    tag = session_tag(ad)  # validates the AD even for an unsigned request
    payload = bytes(payload)
    if signing_key is None:
        head = frame_head("request", None, None)
    else:
        signature = signing_key.sign(tag + payload)
        head = frame_head("request", signing_key.public_key, signature)
    return pad(head + payload)


def open_request(block: Buffer, ad: bytes, *, strict: bool = False) -> OpenedRequest:
    """Unpad and decode a request block; verify its signature if it is signed.

    Raises :class:`BadSignature` for a signed block that does not verify under
    ``ad``; ``strict`` requires every fill byte to be ``#``.
    """
    tag = session_tag(ad)
    frame = decode_frame(unpad(block, length=PADDED_LENGTH, strict=strict))
    if frame.kind != "request":
        raise wrong_kind_error("request")
    if frame.key is not None:
        assert frame.signature is not None
        frame.key._verify_tagged(tag, frame.payload, frame.signature)
    return OpenedRequest(payload=frame.payload, signer=frame.key)


def seal_response(payload: Buffer) -> bytes:
    """Frame and pad a response payload."""
    check_response_size(memoryview(payload).nbytes)
    return pad(frame_head("response", None, None) + bytes(payload))


def open_response(block: Buffer, *, strict: bool = False) -> bytes:
    """Unpad and decode a response block; return its payload."""
    frame = decode_frame(unpad(block, length=PADDED_LENGTH, strict=strict))
    if frame.kind != "response":
        raise wrong_kind_error("response")
    return frame.payload

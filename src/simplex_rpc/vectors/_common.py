"""What every kind of vector shares: the document format, the error classes, the checker."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Final

from .._wire import b64 as _b64
from .._wire.backend import Backend
from ..errors import (
    AgentCryptoError,
    BadSignature,
    EnvelopeError,
    FrameError,
    KeyFormatError,
    PaddingError,
    PayloadTooLarge,
    SimplexRpcError,
)

FORMAT: Final = "simplex-rpc-vectors"


VERSION: Final = 1


KINDS: Final = ("keys", "signatures", "padding", "agent_messages", "envelopes", "agent_crypto")


#: Fields that hold bytes: lowercase hex in JSON, byte strings in CBOR.
HEX_FIELDS: Final = frozenset(
    {
        "ad",
        "auth_seed",
        "block",
        "box_key",
        "der",
        "dh_public_key",
        "e2e_k1",
        "e2e_k2",
        "e2e_key",
        "encoded",
        "inner_padded_sha256",
        "json_hex",
        "k1",
        "k2",
        "kem_ciphertext",
        "kem_public",
        "kem_secret",
        "kem_shared",
        "key_hash",
        "key_id",
        "message",
        "nonce",
        "padded_head",
        "padded_sha256",
        "payload",
        "private_key_der",
        "public_key_der",
        "public_key_raw",
        "queue_dh",
        "ratchet_key",
        "rc_ad",
        "reason",
        "reply_dh",
        "request_key_raw",
        "response_message",
        "response_payload",
        "seed",
        "sender_id",
        "session_tag",
        "signature",
    }
)


#: Error kinds a negative case may name: the library's error class names.
ERROR_CLASSES: Final[dict[str, type[SimplexRpcError]]] = {
    cls.__name__: cls
    for cls in (
        SimplexRpcError,
        KeyFormatError,
        BadSignature,
        PaddingError,
        PayloadTooLarge,
        FrameError,
        EnvelopeError,
        AgentCryptoError,
    )
}


Case = dict[str, Any]


Document = dict[str, Any]


class VectorError(SimplexRpcError):
    """The generator's cases and the library disagree: no file is written."""


#: RFC 8032 section 7.1, TESTS 1 to 3: seed and the public key it must give.
RFC8032_KEYS: Final = (
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
    ),
)


# The group order of Ed25519 (RFC 8032): a signature's S must be below it.
_L: Final = 2**252 + 27742317777372353535851937790883648493


# Encodings of small-order points: the identity, and the point of order 2.
_IDENTITY: Final = bytes([1]) + bytes(31)


_ORDER_2: Final = bytes([0xEC]) + b"\xff" * 30 + bytes([0x7F])


# y = p + 3 (p = 2^255 - 19): the non-canonical encoding of the point with y = 3, which
# is on the curve and not of small order, so no small-order list names it.
_NON_CANONICAL_Y: Final = (2**255 - 19 + 3).to_bytes(32, "little")


def _derived(label: str, size: int = 32) -> bytes:
    """Fixed bytes for ``label``: SHAKE-256 of ``simplex-rpc vectors: <label>``."""
    return hashlib.shake_256(f"simplex-rpc vectors: {label}".encode()).digest(size)


def _seed(n: int) -> bytes:
    return _derived(f"key {n}")


def _ad(label: str) -> bytes:
    """A 112-byte AD, the shape of the agent's: two 56-byte X448 keys."""
    return _derived(f"ad {label}", 112)


def _compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode()


def _pattern(size: int, label: str) -> bytes:
    """``size`` bytes of a repeating printable pattern (readable in hex, compresses well)."""
    unit = f"<{label}>".encode()
    return (unit * (size // len(unit) + 1))[:size]


def _b64_text(data: bytes) -> str:
    return _b64.encode(data)


_DESCRIPTIONS: Final = {
    "keys": "Ed25519 keys in the SimpleX core's encodings (wire.md section 1).",
    "signatures": "Session-bound request signatures (wire.md section 2).",
    "padding": "SimpleX padding to a fixed block (wire.md section 5).",
    "agent_messages": "The SimpleX agent's Service RPC messages (agent v8) and reply queues,"
    " padded as the agent pads them (wire.md section 4).",
    "envelopes": "Service RPC request and response envelopes, strict JSON (wire.md section 3).",
    "agent_crypto": "Service RPC messages as they cross an SMP server (agent v8): X3DH,"
    " the double ratchet's first message, the crypto_box envelopes, both ways (wire.md,"
    " the agent's cryptography).",
}


def _document(kind: str, cases: list[Case]) -> Document:
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "description": _DESCRIPTIONS[kind],
        "cases": cases,
    }


class _Checker:
    """Collects problems for one document; ``where`` names file and case."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.problems: list[str] = []

    def fail(self, case: Case, message: str, backend: Backend | None = None) -> None:
        on = f" [{backend.name} backend]" if backend is not None else ""
        self.problems.append(f"{self.file_name}: case {case.get('name')!r}{on}: {message}")

    def expect(
        self,
        case: Case,
        ok: bool,
        message: str,
        backend: Backend | None = None,
    ) -> None:
        if not ok:
            self.fail(case, message, backend)

    def raises(
        self,
        case: Case,
        action: Callable[[], object],
        backend: Backend | None = None,
        what: str = "",
    ) -> None:
        """Run ``action``; it must raise exactly the class named by ``case['error']``."""
        want = case.get("error")
        prefix = f"{what}: " if what else ""
        try:
            action()
        except SimplexRpcError as exc:
            if type(exc).__name__ != want:
                self.fail(case, f"{prefix}raised {type(exc).__name__}, not {want}", backend)
            return
        except Exception as exc:
            self.fail(case, f"{prefix}raised {type(exc).__name__}: {exc}", backend)
            return
        self.fail(case, f"{prefix}succeeded where {want} is expected", backend)

    def run(self, case: Case, action: Callable[[], None], backend: Backend | None = None) -> None:
        """Run a positive check; any exception is reported, not raised."""
        try:
            action()
        except Exception as exc:
            self.fail(case, f"{type(exc).__name__}: {exc}", backend)


def _h(case: Case, field: str) -> bytes:
    value = case[field]
    if not isinstance(value, str):
        raise ValueError(f"field {field!r} is not a hex string")
    return bytes.fromhex(value)


def _is_hex(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) % 2 == 0
        and all(c in "0123456789abcdef" for c in value)
    )

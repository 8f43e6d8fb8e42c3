"""Test vectors for independent implementations (wire.md section 7).

:func:`build_documents` builds five documents deterministically: ``keys``,
``signatures``, ``padding``, ``frames`` and ``envelopes``, each
``{"format": "simplex-rpc-vectors", "version": 1, "kind": ..., "cases": [...]}``.
Every key comes from a fixed seed and Ed25519 signing is deterministic, so a
second run gives byte-identical files. :func:`render_files` turns them into
``<kind>.json`` (bytes as lowercase hex), ``<kind>.cbor`` (canonical CBOR, the
same cases with every hex field as a byte string) and a ``README.md``.

Every negative case names the library error class it must raise in
``error``. The expectations are written here by hand, not read back from the
library: :func:`verify_document` checks each case against the library (on
every backend), generation refuses to write files the library disagrees
with, and :func:`check_vectors` checks files on disk both ways: byte for byte
against a fresh generation, and case by case against the library.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import cbor2

from . import _b64, _backend
from ._backend import Backend
from ._envelope import Request, Response
from ._examples import (
    A2A_SEND_MESSAGE_REQUEST_TEXT,
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_CALL_RESPONSE_TEXT,
    mcp_tools_call_request,
)
from ._keys import PKCS8_PREFIX, SPKI_PREFIX, PublicKey, SigningKey, session_tag
from ._padding import PADDED_LENGTH
from ._seal import MAX_RESPONSE, MAX_SIGNED_REQUEST, MAX_UNSIGNED_REQUEST
from .errors import (
    BadSignature,
    EnvelopeError,
    FrameError,
    KeyFormatError,
    PaddingError,
    PayloadTooLarge,
    SimplexRpcError,
)

__all__ = [
    "FORMAT",
    "HEX_FIELDS",
    "KINDS",
    "VERSION",
    "VectorError",
    "build_documents",
    "check_vectors",
    "from_cbor_document",
    "generate",
    "render_files",
    "to_cbor_document",
    "verify_document",
]

FORMAT: Final = "simplex-rpc-vectors"
VERSION: Final = 1
KINDS: Final = ("keys", "signatures", "padding", "frames", "envelopes")

#: Fields that hold bytes: lowercase hex in JSON, byte strings in CBOR.
HEX_FIELDS: Final = frozenset(
    {
        "ad",
        "block",
        "der",
        "frame",
        "json_hex",
        "message",
        "padded_head",
        "padded_sha256",
        "payload",
        "private_key_der",
        "public_key_der",
        "public_key_raw",
        "request_key_raw",
        "seed",
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
    )
}

Case = dict[str, Any]
Document = dict[str, Any]


class VectorError(SimplexRpcError):
    """The generator's cases and the library disagree: no file is written."""


# -- fixed inputs --------------------------------------------------------------

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


# -- keys ------------------------------------------------------------------------


def _key_case(name: str, seed: bytes) -> Case:
    key = SigningKey.from_seed(seed)
    pk = key.public_key
    return {
        "name": name,
        "seed": seed.hex(),
        "public_key_raw": pk.raw.hex(),
        "public_key_der": pk.der.hex(),
        "public_key": pk.encode(),
        "private_key_der": key.der.hex(),
        "private_key": key.encode(),
    }


def _find_key_with(chars: str) -> SigningKey:
    """The first derived key whose public text contains every character of ``chars``."""
    for n in range(1000):
        key = SigningKey.from_seed(_seed(n))
        if all(c in key.public_key.encode() for c in chars):
            return key
    raise VectorError(f"no derived key has {chars!r} in its text")  # pragma: no cover


def _find_private_with(chars: str) -> SigningKey:
    for n in range(1000):
        key = SigningKey.from_seed(_seed(n))
        if all(c in key.encode() for c in chars):
            return key
    raise VectorError(f"no derived key has {chars!r} in its private text")  # pragma: no cover


def _set_trailing_bits(text: str) -> str:
    """``text`` (padded base64url) with non-zero trailing bits in its last data character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    body = text.rstrip("=")
    pad = len(text) - len(body)
    unused = {1: 2, 2: 4}[pad]  # bits of the last character that carry no data
    index = alphabet.index(body[-1])
    changed = alphabet[index | ((1 << unused) - 1)]
    return body[:-1] + changed + "=" * pad


#: SPKI DER of the RSA and P-256 keys of the negative key cases, as
#: ``_foreign_der_from_numbers`` builds them with cryptography from fixed numbers.
#: Stored so that ``vectors check`` runs on a plain install (cryptography is the
#: ``crypto`` extra); tests/test_distribution.py rebuilds them and compares.
_FOREIGN_DER: Final = {
    "p256": bytes.fromhex(
        "3059301306072a8648ce3d020106082a8648ce3d03010703420004ea7a823a6795c755cbd139ab6dc5"
        "e8e70b8375c02ef638abeca14c3d8fe8dc40d875e54d99c48e3ea36b2bc043c50fab1347b11716d4bb"
        "fe6be8d13a0fba6003"
    ),
    "rsa": bytes.fromhex(
        "30819f300d06092a864886f70d010101050003818d0030818902818100e982a62383fe126918adbbcf"
        "0e6b680742fe8cc19819dd044272a2725619062eba0d8e2b779ec5298ee07368d10c849fa13c244529"
        "28a1666fef773b2da3c9b4b20c8261303b82a10a2a54e453f1bd5ef7c25699cf8540c00fb312d87c48"
        "1435b0749e9cdbbdda8da0058276f154c04840e4483449a839d9833e8f8796197c230203010001"
    ),
}


def _foreign_der_from_numbers() -> dict[str, bytes]:
    """The RSA and P-256 SPKI DER of ``_FOREIGN_DER``, built from fixed numbers."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
    except ImportError:
        raise VectorError(
            "vectors: building RSA and P-256 keys needs cryptography:"
            " pip install 'simplex-rpc[crypto]'"
        ) from None

    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    modulus = int.from_bytes(_derived("rsa modulus", 128), "big") | (1 << 1023) | 1
    rsa_der = rsa.RSAPublicNumbers(65537, modulus).public_key().public_bytes(*spki)
    p256 = int.from_bytes(_derived("p-256 scalar"), "big") % (2**255)
    p256_der = ec.derive_private_key(p256, ec.SECP256R1()).public_key().public_bytes(*spki)
    return {"p256": p256_der, "rsa": rsa_der}


def _other_der() -> dict[str, bytes]:
    """SPKI DER of keys that are not Ed25519, all from fixed numbers."""
    raw = _derived("other curve point")
    return {
        "x25519": bytes.fromhex("302a300506032b656e032100") + raw,
        "ed448": bytes.fromhex("3043300506032b6571033a00") + _derived("ed448 point", 57),
        **_FOREIGN_DER,
    }


def _keys_document() -> Document:
    cases: list[Case] = []
    for i, (seed_hex, public_hex) in enumerate(RFC8032_KEYS, 1):
        case = _key_case(f"RFC 8032 section 7.1 TEST {i} key", bytes.fromhex(seed_hex))
        if case["public_key_raw"] != public_hex:
            raise VectorError(f"RFC 8032 TEST {i}: the seed gives another public key")
        cases.append(case)
    cases.append(_key_case("all-zero seed", bytes(32)))
    cases.append(_key_case("all-0xff seed", b"\xff" * 32))
    for n in range(3):
        cases.append(_key_case(f"derived seed {n}", _seed(n)))

    public = _find_key_with("-_")
    text = public.public_key.encode()
    raw = public.public_key.raw.hex()
    cases.append(
        {
            "name": "public key text without its padding names the same key",
            "key_type": "public",
            "text": text.rstrip("="),
            "public_key_raw": raw,
        }
    )
    private = _find_private_with("-_")
    ptext = private.encode()
    cases.append(
        {
            "name": "private key text (48 bytes: never padded) from a seed",
            "key_type": "private",
            "text": ptext,
            "seed": private.seed().hex(),
            "public_key_raw": private.public_key.raw.hex(),
        }
    )

    def bad(name: str, key_type: str, bad_text: str, der: bytes | None = None) -> None:
        case: Case = {"name": name, "key_type": key_type, "text": bad_text}
        if der is not None:
            case["der"] = der.hex()
        case["error"] = "KeyFormatError"
        cases.append(case)

    spki = public.public_key.der
    other = _other_der()
    bad("public: empty text", "public", "")
    bad("public: '!' is not in the alphabet", "public", text[:10] + "!" + text[11:])
    bad("public: '.' is not in the alphabet", "public", text[:10] + "." + text[11:])
    bad("public: '+' of the standard alphabet", "public", text.replace("-", "+"))
    bad("public: '/' of the standard alphabet", "public", text.replace("_", "/"))
    bad("public: space inside", "public", text[:20] + " " + text[20:])
    bad("public: leading space", "public", " " + text)
    bad("public: trailing newline", "public", text + "\n")
    bad("public: line break inside (MIME style)", "public", text[:30] + "\r\n" + text[30:])
    bad("public: tab inside", "public", text[:20] + "\t" + text[20:])
    bad("public: non-ASCII character", "public", text[:5] + "\u00e9" + text[6:])
    bad("public: two padding characters where one is required", "public", text + "=")
    bad("public: padding character inside", "public", text[:20] + "=" + text[20:])
    bad("public: non-zero trailing bits", "public", _set_trailing_bits(text))
    bad(
        "public: non-zero trailing bits, unpadded",
        "public",
        _set_trailing_bits(text).rstrip("="),
    )
    bad("public: a length of 1 modulo 4", "public", text.rstrip("=")[:57])
    bad("public: DER one byte short", "public", _b64_text(spki[:-1]), spki[:-1])
    bad("public: DER with a trailing byte", "public", _b64_text(spki + b"\x00"), spki + b"\x00")
    bad("public: raw 32-byte key without DER", "public", _b64_text(spki[12:]), spki[12:])
    wrong_len = bytes([0x30, 0x2B]) + spki[2:]
    bad("public: DER with a wrong outer length", "public", _b64_text(wrong_len), wrong_len)
    bitstring = spki[:11] + b"\x01" + spki[12:]
    bad(
        "public: DER with unused bits in the BIT STRING",
        "public",
        _b64_text(bitstring),
        bitstring,
    )
    long_form = bytes([0x30, 0x81, 0x2A]) + spki[2:]
    bad(
        "public: BER long-form length (not DER)",
        "public",
        _b64_text(long_form),
        long_form,
    )
    x25519 = other["x25519"]
    bad("public: X25519 key (other curve, same size)", "public", _b64_text(x25519), x25519)
    bad("public: Ed448 key", "public", _b64_text(other["ed448"]), other["ed448"])
    bad("public: P-256 key", "public", _b64_text(other["p256"]), other["p256"])
    bad("public: RSA key", "public", _b64_text(other["rsa"]), other["rsa"])
    bad("public: a private key's text", "public", ptext, private.der)
    bad(
        "public: PEM text",
        "public",
        public.public_key.to_pem(),
    )

    pkcs8 = private.der
    x25519_private = bytes.fromhex("302e020100300506032b656e04220420") + private.seed()
    v2 = (
        bytes.fromhex("3051020101300506032b657004220420")
        + private.seed()
        + bytes.fromhex("812100")
        + private.public_key.raw
    )
    bad("private: empty text", "private", "")
    bad("private: padding where none is required", "private", ptext + "=")
    bad("private: '+' of the standard alphabet", "private", ptext.replace("-", "+"))
    bad("private: '/' of the standard alphabet", "private", ptext.replace("_", "/"))
    bad("private: trailing newline", "private", ptext + "\n")
    bad("private: space inside", "private", ptext[:20] + " " + ptext[20:])
    bad("private: DER one byte short", "private", _b64_text(pkcs8[:-1]), pkcs8[:-1])
    wrong_version = pkcs8[:4] + b"\x01" + pkcs8[5:]
    bad(
        "private: PKCS#8 version field 1 (v2) without the public key",
        "private",
        _b64_text(wrong_version),
        wrong_version,
    )
    bad(
        "private: PKCS#8 v2 with the public key (OneAsymmetricKey)",
        "private",
        _b64_text(v2),
        v2,
    )
    bad("private: X25519 private key", "private", _b64_text(x25519_private), x25519_private)
    bad("private: a public key's text", "private", text, spki)
    bad("private: the raw 32-byte seed", "private", _b64_text(private.seed()), private.seed())
    return _document("keys", cases)


# -- signatures --------------------------------------------------------------------


def _sig_case(
    name: str,
    *,
    seed: bytes | None,
    ad: bytes,
    payload: bytes,
    signature: bytes,
    public_key: PublicKey,
    valid: bool,
    error: str | None = None,
) -> Case:
    case: Case = {
        "name": name,
        "seed": None if seed is None else seed.hex(),
        "ad": ad.hex(),
        "payload": payload.hex(),
        "session_tag": session_tag(ad).hex() if ad else None,
        "signature": signature.hex(),
        "public_key": public_key.encode(),
        "public_key_raw": public_key.raw.hex(),
        "valid": valid,
    }
    if not valid:
        case["error"] = error or "BadSignature"
    return case


def _signatures_document() -> Document:
    cases: list[Case] = []
    seed = _seed(10)
    key = SigningKey.from_seed(seed)
    pk = key.public_key
    ad = _ad("alice-bob")
    payload = _compact(MCP_TOOLS_CALL_REQUEST_TEXT)
    sig = key.sign_request(ad, payload)

    def good(name: str, s: bytes, a: bytes, p: bytes) -> None:
        k = SigningKey.from_seed(s)
        cases.append(
            _sig_case(
                name,
                seed=s,
                ad=a,
                payload=p,
                signature=k.sign_request(a, p),
                public_key=k.public_key,
                valid=True,
            )
        )

    good("MCP tools/call request, 112-byte AD", seed, ad, payload)
    a2a = _compact(A2A_SEND_MESSAGE_REQUEST_TEXT)
    good("A2A SendMessage request, 112-byte AD", _seed(11), _ad("carol-dave"), a2a)
    good("empty payload", seed, ad, b"")
    good("one-byte AD", seed, b"\x00", b"{}")
    good("non-ASCII UTF-8 payload", seed, ad, '{"protocol":"x","request":"żółw 🐢"}'.encode())
    good("binary payload (sealing does not parse)", seed, ad, bytes(range(256)))
    good("RFC 8032 TEST 1 key", bytes.fromhex(RFC8032_KEYS[0][0]), ad, payload)
    good(
        "largest signed payload (10990 bytes)",
        _seed(12),
        ad,
        _pattern(MAX_SIGNED_REQUEST, "signed"),
    )

    def tampered(
        name: str,
        *,
        a: bytes = ad,
        p: bytes = payload,
        s: bytes = sig,
        k: PublicKey = pk,
        signer_seed: bytes | None = seed,
        error: str = "BadSignature",
    ) -> None:
        cases.append(
            _sig_case(
                name,
                seed=signer_seed,
                ad=a,
                payload=p,
                signature=s,
                public_key=k,
                valid=False,
                error=error,
            )
        )

    tampered("signature copied into another session (other AD)", a=_ad("alice-eve"))
    tampered("AD with the two keys in the other order", a=ad[56:] + ad[:56])
    tampered("AD one byte longer", a=ad + b"\x00")
    tampered("AD one bit different", a=bytes([ad[0] ^ 1]) + ad[1:])
    other_payload = payload.replace(b'"anvil"', b'"Anvil"')
    tampered("other payload (one byte different)", p=other_payload)
    tampered("payload differing only in trailing '#' fill", p=payload + b"#")
    tampered("payload one byte shorter", p=payload[:-1])
    tampered("flipped bit in R", s=bytes([sig[0] ^ 1]) + sig[1:])
    tampered("flipped bit in S", s=sig[:32] + bytes([sig[32] ^ 1]) + sig[33:])
    s_plus_l = (int.from_bytes(sig[32:], "little") + _L).to_bytes(32, "little")
    tampered("S + L (non-canonical S >= L, malleated)", s=sig[:32] + s_plus_l)
    tampered("S = L", s=sig[:32] + _L.to_bytes(32, "little"))
    tampered(
        "signature by another key",
        k=SigningKey.from_seed(_seed(13)).public_key,
    )
    tampered("raw Ed25519 signature of the payload alone (no session tag)", s=key.sign(payload))
    tampered(
        "signature over the AD, not its session tag",
        s=key.sign(ad + payload),
    )
    tampered(
        "small-order public key (identity) with R = identity, S = 0",
        k=PublicKey(_IDENTITY),
        s=_IDENTITY + bytes(32),
        signer_seed=None,
    )
    tampered(
        "small-order public key (order 2) with R = identity, S = 0",
        k=PublicKey(_ORDER_2),
        s=_IDENTITY + bytes(32),
        signer_seed=None,
    )
    tampered("small-order R (identity)", s=_IDENTITY + sig[32:])
    tampered("63-byte signature", s=sig[:63])
    tampered("all-zero signature", s=bytes(64))
    tampered("empty AD is refused", a=b"", error="SimplexRpcError")
    tampered(
        "non-canonical public key (y = p + 3 >= p, a point not of small order)",
        k=PublicKey(_NON_CANONICAL_Y),
        signer_seed=None,
    )
    return _document("signatures", cases)


# -- padding -------------------------------------------------------------------------


def _pad_case(name: str, message: bytes, length: int = PADDED_LENGTH) -> Case:
    padded = (
        len(message).to_bytes(2, "big") + message + b"#" * (length - 2 - len(message))
    )  # simplexmq's pad, written out independently of the library
    return {
        "name": name,
        "op": "pad",
        "message": message.hex(),
        "length": length,
        "padded_sha256": hashlib.sha256(padded).hexdigest(),
        "padded_head": padded[:64].hex(),
    }


def _padding_document() -> Document:
    cases: list[Case] = [
        _pad_case("empty message", b""),
        _pad_case("short message", b"hello"),
        _pad_case("message ending in '#'", b"ab##"),
        _pad_case("message of only '#'", b"#" * 10),
        _pad_case("MCP tools/call request", _compact(MCP_TOOLS_CALL_REQUEST_TEXT)),
        _pad_case("largest message for 11106 (11104 bytes)", _pattern(11104, "max")),
        _pad_case("empty message in the smallest block (2)", b"", 2),
        _pad_case("three bytes in a block of 5, no fill", b"abc", 5),
        _pad_case("message of 256 bytes (length field 0x0100)", _pattern(256, "x"), 300),
        _pad_case(
            "largest message (65533 bytes, simplexmq maxMsgLen), no fill",
            _pattern(65533, "maxMsgLen"),
            65535,
        ),
    ]

    def pad_error(name: str, size: int, length: int) -> None:
        cases.append(
            {
                "name": name,
                "op": "pad",
                "message_length": size,
                "length": length,
                "error": "PaddingError",
            }
        )

    pad_error("11105 bytes do not fit 11106", 11105, PADDED_LENGTH)
    pad_error("11106 bytes do not fit 11106", 11106, PADDED_LENGTH)
    pad_error("65534 bytes exceed maxMsgLen though the block has room", 65534, 65536)
    pad_error("65534 bytes exceed maxMsgLen", 65534, 65537)
    pad_error("empty message does not fit a block of 1", 0, 1)
    pad_error("empty message does not fit a block of 0", 0, 0)
    pad_error("4 bytes do not fit a block of 5", 4, 5)

    msg = b"hello"
    block = len(msg).to_bytes(2, "big") + msg + b"#" * (PADDED_LENGTH - 7)

    def unpad_case(
        name: str,
        blk: bytes,
        *,
        length: int | None = None,
        strict: bool = False,
        message: bytes | None = None,
        error: str | None = None,
    ) -> None:
        case: Case = {
            "name": name,
            "op": "unpad",
            "block": blk.hex(),
            "length": length,
            "strict": strict,
        }
        if error is None:
            assert message is not None
            case["message"] = message.hex()
        else:
            case["error"] = error
        cases.append(case)

    small = block[:16]  # "hello" padded to a 16-byte block: the same rules, short hex
    unpad_case("unpad: 11106-byte block", block, length=PADDED_LENGTH, strict=True, message=msg)
    unpad_case("unpad: 16-byte block", small, length=16, strict=True, message=msg)
    unpad_case("unpad: the smallest block", b"\x00\x00", length=2, strict=True, message=b"")
    nohash = small[:-1] + b"\x00"
    unpad_case("unpad: fill not '#' is accepted when not strict", nohash, message=msg)
    unpad_case("unpad: fill not '#' refused when strict", nohash, strict=True, error="PaddingError")
    unpad_case(
        "unpad: first fill byte not '#', strict",
        small[:7] + b"\x00" + small[8:],
        strict=True,
        error="PaddingError",
    )
    unpad_case("unpad: no fill at all, strict", small[:7], strict=True, message=msg)
    unpad_case(
        "unpad: block one byte short of the required length",
        small[:-1],
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: block one byte over the required length",
        small + b"#",
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: 11105-byte block where 11106 are required",
        block[:-1],
        length=PADDED_LENGTH,
        error="PaddingError",
    )
    unpad_case("unpad: empty block", b"", error="PaddingError")
    unpad_case("unpad: one-byte block", b"\x00", error="PaddingError")
    unpad_case(
        "unpad: length field one more than the bytes that follow",
        b"\x00\x04abc",
        error="PaddingError",
    )
    unpad_case(
        "unpad: length field 0xffff in a 16-byte block",
        b"\xff\xff" + small[2:],
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: length field exactly the bytes that follow",
        b"\x00\x03abc",
        strict=True,
        message=b"abc",
    )
    return _document("padding", cases)


# -- frames --------------------------------------------------------------------------


def _frame_case(
    name: str,
    kind: str,
    payload: bytes,
    key: SigningKey | None = None,
    ad: bytes | None = None,
) -> Case:
    case: Case = {"name": name, "kind": kind, "payload": payload.hex()}
    if key is None:
        head = b"\x00\x01S" if kind == "response" else b"\x00\x01R0"
        frame = head + payload
    else:
        assert ad is not None
        sig = key.sign_request(ad, payload)
        frame = b"\x00\x01R1" + bytes([44]) + key.public_key.der + bytes([64]) + sig + payload
        case |= {
            "seed": key.seed().hex(),
            "ad": ad.hex(),
            "public_key": key.public_key.encode(),
            "signature": sig.hex(),
        }
    padded = len(frame).to_bytes(2, "big") + frame + b"#" * (PADDED_LENGTH - 2 - len(frame))
    case |= {"frame": frame.hex(), "padded_sha256": hashlib.sha256(padded).hexdigest()}
    return case


def _frames_document() -> Document:
    key = SigningKey.from_seed(_seed(20))
    ad = _ad("frames")
    request = Request.parse(MCP_TOOLS_CALL_REQUEST_TEXT)
    signed_payload = Request(
        protocol=request.protocol, request=request.request, request_key=key.public_key
    ).to_json()
    cases: list[Case] = [
        _frame_case("unsigned MCP request", "request", _compact(MCP_TOOLS_CALL_REQUEST_TEXT)),
        _frame_case("signed MCP request with requestKey", "request", signed_payload, key, ad),
        _frame_case("MCP response", "response", _compact(MCP_TOOLS_CALL_RESPONSE_TEXT)),
        _frame_case("unsigned request, empty payload", "request", b""),
        _frame_case("signed request, empty payload", "request", b"", key, ad),
        _frame_case("response, empty payload", "response", b""),
        _frame_case("signed request, binary payload", "request", bytes(range(256)), key, ad),
        _frame_case(
            "largest signed request payload (10990)",
            "request",
            _pattern(MAX_SIGNED_REQUEST, "signed"),
            key,
            ad,
        ),
        _frame_case(
            "largest unsigned request payload (11100)",
            "request",
            _pattern(MAX_UNSIGNED_REQUEST, "unsigned"),
        ),
        _frame_case("largest response payload (11101)", "response", _pattern(MAX_RESPONSE, "resp")),
    ]
    signed = bytes.fromhex(cases[1]["frame"])
    unsigned = bytes.fromhex(cases[0]["frame"])
    response = bytes.fromhex(cases[2]["frame"])

    def bad(name: str, frame: bytes, error: str = "FrameError", **extra: Any) -> None:
        case: Case = {"name": name, "frame": frame.hex()}
        for field, value in extra.items():
            case[field] = value.hex() if isinstance(value, bytes) else value
        case["error"] = error
        cases.append(case)

    bad("empty frame", b"")
    bad("two bytes", b"\x00\x01")
    bad("version 0", b"\x00\x00" + response[2:])
    bad("version 2", b"\x00\x02" + response[2:])
    bad("version 256 (byte order)", b"\x01\x00" + response[2:])
    bad("unknown tag 'Q'", b"\x00\x01Q" + response[3:])
    bad("lowercase tag 'r'", b"\x00\x01r0" + unsigned[4:])
    bad("request ends before its signer byte", b"\x00\x01R")
    bad("signer byte '2'", b"\x00\x01R2" + unsigned[4:])
    bad("signer byte 0x01 (not the character '1')", b"\x00\x01R\x01" + signed[4:])
    bad("signer byte 0x00 (not the character '0')", b"\x00\x01R\x00" + unsigned[4:])
    bad("signed: key length 43", signed[:4] + bytes([43]) + signed[5:])
    bad("signed: key length 32 (raw key)", signed[:4] + bytes([32]) + signed[5:])
    x25519 = signed[:13] + bytes([0x6E]) + signed[14:]  # OID 1.3.101.110 at DER byte 8
    bad("signed: X25519 key DER (not Ed25519)", x25519)
    bad("signed: key DER with a wrong first byte", signed[:5] + b"\x31" + signed[6:])
    bad("signed: signature length 63", signed[:49] + bytes([63]) + signed[50:])
    bad("signed: signature length 65", signed[:49] + bytes([65]) + signed[50:])
    bad("signed: ends inside the key", signed[:30])
    bad("signed: ends one byte before the end of the signature", signed[:113])
    bad(
        "response where a request is expected",
        response,
        expect="request",
        ad=ad,
    )
    bad("unsigned request where a response is expected", unsigned, expect="response")
    bad("signed request where a response is expected", signed, expect="response")
    bad(
        "signed request opened in another session (other AD)",
        signed,
        "BadSignature",
        expect="request",
        ad=_ad("frames, another session"),
    )
    tampered = bytearray(signed)
    tampered[-5] ^= 0x20
    bad(
        "signed request with one payload byte flipped",
        bytes(tampered),
        "BadSignature",
        expect="request",
        ad=ad,
    )
    other_key = SigningKey.from_seed(_seed(21)).public_key
    bad(
        "signed request with the key replaced",
        signed[:5] + other_key.der + signed[49:],
        "BadSignature",
        expect="request",
        ad=ad,
    )

    def too_large(name: str, kind: str, size: int, signed_: bool) -> None:
        cases.append(
            {
                "name": name,
                "kind": kind,
                "signed": signed_,
                "payload_length": size,
                "error": "PayloadTooLarge",
            }
        )

    too_large("signed request payload of 10991 bytes", "request", MAX_SIGNED_REQUEST + 1, True)
    too_large("unsigned request payload of 11101 bytes", "request", MAX_UNSIGNED_REQUEST + 1, False)
    too_large("response payload of 11102 bytes", "response", MAX_RESPONSE + 1, False)
    return _document("frames", cases)


# -- envelopes -----------------------------------------------------------------------


def _envelopes_document() -> Document:
    cases: list[Case] = []
    key = _find_key_with("-_").public_key
    key_text = key.encode()
    mcp = mcp_tools_call_request()["request"]
    mcp_json = json.dumps(mcp, separators=(",", ":"))

    def request(name: str, text: str, *, request_key: PublicKey | None = None) -> None:
        parsed = json.loads(text)
        case: Case = {
            "name": name,
            "envelope": "request",
            "json": text,
            "valid": True,
            "protocol": parsed["protocol"],
            "request_key_raw": None if request_key is None else request_key.raw.hex(),
        }
        cases.append(case)

    def response(name: str, text: str) -> None:
        parsed = json.loads(text)
        error = parsed.get("error")
        case: Case = {
            "name": name,
            "envelope": "response",
            "json": text,
            "valid": True,
            "ok": error is None,
            "error_code": None if error is None else error["code"],
            "retry_after": None if error is None else error.get("retryAfter"),
            "final": None if error is None else "retryAfter" not in error,
        }
        if isinstance(case["retry_after"], float):
            case["retry_after"] = int(case["retry_after"])
        cases.append(case)

    def invalid(name: str, envelope: str, text: str | bytes) -> None:
        case: Case = {"name": name, "envelope": envelope}
        if isinstance(text, bytes):
            case |= {"json": None, "json_hex": text.hex()}
        else:
            case["json"] = text
        case |= {"valid": False, "error": "EnvelopeError", "code": "bad_request"}
        cases.append(case)

    request("protocol text: MCP tools/call over Service RPC", MCP_TOOLS_CALL_REQUEST_TEXT)
    request("protocol text: A2A one-shot SendMessage", A2A_SEND_MESSAGE_REQUEST_TEXT)
    request(
        "MCP request with requestKey",
        f'{{"protocol":"mcp","request":{mcp_json},"requestKey":"{key_text}"}}',
        request_key=key,
    )
    request(
        "requestKey without padding names the same key",
        f'{{"protocol":"mcp","request":{mcp_json},"requestKey":"{key_text.rstrip("=")}"}}',
        request_key=key,
    )
    request("version as a string", '{"protocol":"x","version":"1.2","request":{}}')
    request("version as a number", '{"protocol":"x","version":2,"request":{}}')
    request("version null", '{"protocol":"x","version":null,"request":{}}')
    request("request null (any JSON value)", '{"protocol":"x","request":null}')
    request("request a string", '{"protocol":"x","request":"ping"}')
    request("members in another order", '{"request":[1,2],"protocol":"x"}')
    request(
        "unknown members are allowed and kept",
        '{"protocol":"x","request":{},"trace":{"id":"t-1"},"z":[true,false,null]}',
    )
    request("protocol name with digits and hyphens", '{"protocol":"a2a-v2-0","request":{}}')
    request("whitespace around the value", ' \n\t{"protocol":"x","request":{}}\r\n ')
    request("non-ASCII text", '{"protocol":"x","request":"\u017c\u00f3\u0142w \U0001f422"}')
    request("escaped surrogate pair", '{"protocol":"x","request":"\\ud83d\\udc22"}')
    depth_ok = "[" * 63 + "]" * 63
    request("nesting of 64 levels (the limit)", f'{{"protocol":"x","request":{depth_ok}}}')
    request("integer of 64 digits", '{"protocol":"x","request":' + "9" * 64 + "}")
    objects_ok = '{"a":' * 62 + "[]" + "}" * 62
    request("nesting of 64 levels of objects", f'{{"protocol":"x","request":{objects_ok}}}')
    request("negative integer of 64 digits", '{"protocol":"x","request":-' + "9" * 64 + "}")

    response("protocol text: MCP tools/call response", MCP_TOOLS_CALL_RESPONSE_TEXT)
    response("response null", '{"response":null}')
    response("response with unknown members", '{"response":1,"meta":{"a":1}}')
    response("error with a code only", '{"error":{"code":"unsupported_protocol"}}')
    response(
        "error with message and retryAfter",
        '{"error":{"code":"rate_limited","message":"slow down","retryAfter":30}}',
    )
    response("unknown code without retryAfter is final", '{"error":{"code":"teapot"}}')
    response(
        "unknown code with retryAfter is not final",
        '{"error":{"code":"teapot","retryAfter":5}}',
    )
    response("retryAfter 0", '{"error":{"code":"internal","retryAfter":0}}')
    response(
        "retryAfter 4294967295 (uint32 max)",
        '{"error":{"code":"internal","retryAfter":4294967295}}',
    )
    response("retryAfter 5.0 (zero fraction)", '{"error":{"code":"internal","retryAfter":5.0}}')
    response(
        "error with unknown members",
        '{"error":{"code":"too_large","detail":{"limit":10000}},"x":1}',
    )
    for code in (
        "unsupported_version",
        "bad_request",
        "conversation_required",
        "too_large",
    ):
        response(f"error code {code}", f'{{"error":{{"code":"{code}"}}}}')

    invalid(
        "duplicate member 'protocol'",
        "request",
        '{"protocol":"x","protocol":"y","request":{}}',
    )
    invalid(
        "duplicate member inside request",
        "request",
        '{"protocol":"x","request":{"id":1,"id":2}}',
    )
    invalid("duplicate member 'response'", "response", '{"response":1,"response":2}')
    depth_bad = "[" * 64 + "]" * 64
    invalid("nesting of 65 levels", "request", f'{{"protocol":"x","request":{depth_bad}}}')
    invalid("NaN", "request", '{"protocol":"x","request":NaN}')
    invalid("Infinity", "request", '{"protocol":"x","request":Infinity}')
    invalid("-Infinity", "response", '{"response":-Infinity}')
    invalid("number overflowing to infinity", "response", '{"response":1e400}')
    invalid("integer of 65 digits", "request", '{"protocol":"x","request":' + "9" * 65 + "}")
    invalid("lone high surrogate escape", "request", '{"protocol":"x","request":"\\ud800"}')
    invalid("lone low surrogate escape", "request", '{"protocol":"x","request":"\\udc00"}')
    invalid(
        "lone surrogate escape in a member name",
        "response",
        '{"response":{"\\ud800":1}}',
    )
    invalid("invalid UTF-8 byte 0xff", "request", b'{"protocol":"x","request":"\xff"}')
    invalid("overlong UTF-8 encoding", "request", b'{"protocol":"x","request":"\xc0\xaf"}')
    invalid(
        "UTF-8-encoded surrogate (CESU-8)",
        "request",
        b'{"protocol":"x","request":"\xed\xa0\x80"}',
    )
    invalid("truncated UTF-8 sequence", "response", b'{"response":"\xe2\x82"}')
    invalid("UTF-16 text", "request", '{"protocol":"x","request":1}'.encode("utf-16-le"))
    invalid("byte-order mark", "request", b'\xef\xbb\xbf{"protocol":"x","request":{}}')
    invalid(
        "duplicate member name after unescaping",
        "request",
        '{"protocol":"x","request":{"a":1,"\\u0061":2}}',
    )
    invalid(
        "lone high surrogate escape before an escaped letter",
        "request",
        '{"protocol":"x","request":"\\ud800\\u0041"}',
    )
    invalid("raw control character in a string", "request", '{"protocol":"x","request":"a\x01b"}')
    invalid("number with a leading zero", "request", '{"protocol":"x","request":01}')
    invalid("number '1.' without fraction digits", "request", '{"protocol":"x","request":1.}')
    invalid("a lone minus sign", "response", '{"response":-}')
    invalid("byte-order mark before a response", "response", b'\xef\xbb\xbf{"response":1}')
    objects_bad = '{"a":' * 63 + "[]" + "}" * 63
    invalid(
        "nesting of 65 levels of objects", "request", f'{{"protocol":"x","request":{objects_bad}}}'
    )
    invalid(
        "negative integer of 65 digits", "request", '{"protocol":"x","request":-' + "9" * 65 + "}"
    )
    invalid("empty input", "request", "")
    invalid("not JSON", "request", "protocol=mcp")
    invalid("trailing data", "request", '{"protocol":"x","request":{}}{}')
    invalid("trailing comma", "request", '{"protocol":"x","request":{},}')
    invalid("single quotes", "request", "{'protocol':'x','request':{}}")
    invalid("an array, not an object", "request", '[{"protocol":"x","request":{}}]')
    invalid("a string, not an object", "response", '"ok"')
    invalid("null, not an object", "response", "null")
    invalid("missing protocol", "request", '{"request":{}}')
    invalid("missing request", "request", '{"protocol":"x"}')
    invalid("protocol not a string", "request", '{"protocol":1,"request":{}}')
    invalid("protocol null", "request", '{"protocol":null,"request":{}}')
    invalid("protocol name empty", "request", '{"protocol":"","request":{}}')
    invalid("protocol name uppercase", "request", '{"protocol":"MCP","request":{}}')
    invalid("protocol name with underscore", "request", '{"protocol":"my_proto","request":{}}')
    invalid("protocol name with a dot", "request", '{"protocol":"a.b","request":{}}')
    invalid("protocol name with a space", "request", '{"protocol":"mcp ","request":{}}')
    invalid("protocol name non-ASCII", "request", '{"protocol":"\u043ccp","request":{}}')
    invalid("requestKey not a string", "request", '{"protocol":"x","request":{},"requestKey":1}')
    invalid("requestKey null", "request", '{"protocol":"x","request":{},"requestKey":null}')
    invalid(
        "requestKey with '+' (standard base64)",
        "request",
        '{"protocol":"x","request":{},"requestKey":"'
        + key_text.replace("-", "+").replace("_", "/")
        + '"}',
    )
    invalid(
        "requestKey is a raw 32-byte key",
        "request",
        '{"protocol":"x","request":{},"requestKey":"' + _b64_text(key.raw) + '"}',
    )
    x25519 = _other_der()["x25519"]
    invalid(
        "requestKey is an X25519 key",
        "request",
        '{"protocol":"x","request":{},"requestKey":"' + _b64_text(x25519) + '"}',
    )
    invalid("requestKey empty", "request", '{"protocol":"x","request":{},"requestKey":""}')
    invalid("both response and error", "response", '{"response":1,"error":{"code":"internal"}}')
    invalid("both, with response null", "response", '{"response":null,"error":{"code":"internal"}}')
    invalid("neither response nor error", "response", "{}")
    invalid("neither, with unknown members", "response", '{"result":1}')
    invalid("error not an object", "response", '{"error":"internal"}')
    invalid("error null", "response", '{"error":null}')
    invalid("error without code", "response", '{"error":{"message":"x"}}')
    invalid("error code not a string", "response", '{"error":{"code":500}}')
    invalid("error message not a string", "response", '{"error":{"code":"internal","message":1}}')
    for bad_retry in ("-1", "4294967296", "1.5", '"10"', "true", "null", "1e10"):
        invalid(
            f"retryAfter {bad_retry}",
            "response",
            '{"error":{"code":"rate_limited","retryAfter":' + bad_retry + "}}",
        )
    return _document("envelopes", cases)


# -- documents and files -------------------------------------------------------------

_DESCRIPTIONS: Final = {
    "keys": "Ed25519 keys in the SimpleX core's encodings (wire.md section 1).",
    "signatures": "Session-bound request signatures (wire.md section 2).",
    "padding": "SimpleX padding to a fixed block (wire.md section 5).",
    "frames": "simplex-rpc's request and response frame (wire.md section 4).",
    "envelopes": "Service RPC request and response envelopes, strict JSON (wire.md section 3).",
}


def _document(kind: str, cases: list[Case]) -> Document:
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "description": _DESCRIPTIONS[kind],
        "cases": cases,
    }


_BUILDERS: Final[dict[str, Callable[[], Document]]] = {
    "keys": _keys_document,
    "signatures": _signatures_document,
    "padding": _padding_document,
    "frames": _frames_document,
    "envelopes": _envelopes_document,
}


def build_documents() -> dict[str, Document]:
    """Build every vector document, checked against the library on every backend.

    Raises :class:`VectorError` when a case and the library disagree.
    """
    docs = {kind: _BUILDERS[kind]() for kind in KINDS}
    problems = [p for kind, doc in docs.items() for p in verify_document(kind, doc)]
    if problems:
        raise VectorError(
            f"{len(problems)} generated cases disagree with the library; first: {problems[0]}"
        )
    return docs


def render_json(doc: Document) -> bytes:
    """The JSON file of a document: sorted keys, two-space indent, ASCII, final newline."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def to_cbor_document(value: Any, field: str | None = None) -> Any:
    """The CBOR data model of a JSON document: every ``HEX_FIELDS`` string as bytes."""
    if isinstance(value, dict):
        return {k: to_cbor_document(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [to_cbor_document(v, field) for v in value]
    if field in HEX_FIELDS and isinstance(value, str):
        return bytes.fromhex(value)
    return value


def from_cbor_document(value: Any) -> Any:
    """The inverse of :func:`to_cbor_document`: byte strings back to lowercase hex."""
    if isinstance(value, dict):
        return {k: from_cbor_document(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_cbor_document(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def render_cbor(doc: Document) -> bytes:
    """The canonical CBOR file of a document (RFC 7049 canonical, as cbor2 writes it)."""
    return cbor2.dumps(to_cbor_document(doc), canonical=True)


def render_files(docs: dict[str, Document] | None = None) -> dict[str, bytes]:
    """Every file of ``vectors/``, by name: ``<kind>.json``, ``<kind>.cbor``, ``README.md``."""
    if docs is None:
        docs = build_documents()
    files: dict[str, bytes] = {"README.md": _README.encode("utf-8")}
    for kind in KINDS:
        files[f"{kind}.json"] = render_json(docs[kind])
        files[f"{kind}.cbor"] = render_cbor(docs[kind])
    return files


def generate(directory: str | os.PathLike[str]) -> list[tuple[str, bool]]:
    """Write the vector files into ``directory`` (created if needed).

    Returns ``(file name, changed)`` for every file; an unchanged file is not
    rewritten.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in render_files().items():
        target = path / name
        changed = not target.is_file() or target.read_bytes() != data
        if changed:
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        out.append((name, changed))
    return out


def check_vectors(directory: str | os.PathLike[str]) -> list[str]:
    """Check the files in ``directory``; return the problems (empty when all is well).

    Each file must equal, byte for byte, what the generator writes now, and
    every case of every JSON file must hold against the library on every
    backend. A message names the file and, where it can, the case.
    """
    path = Path(directory)
    if not path.is_dir():
        return [f"{path}: not a directory"]
    problems: list[str] = []
    expected = render_files()
    for name, data in expected.items():
        target = path / name
        if not target.is_file():
            problems.append(f"{name}: missing (run `simplex-rpc vectors generate {path}`)")
            continue
        actual = target.read_bytes()
        if actual != data:
            problems.extend(_describe_difference(name, actual, data))
    for extra in sorted(path.glob("*.json")) + sorted(path.glob("*.cbor")):
        if extra.name not in expected:
            problems.append(f"{extra.name}: not a file the generator writes")
    for kind in KINDS:
        target = path / f"{kind}.json"
        if not target.is_file():
            continue
        try:
            doc = json.loads(target.read_bytes())
        except ValueError as exc:
            problems.append(f"{kind}.json: not JSON ({exc})")
            continue
        problems.extend(verify_document(kind, doc, file_name=f"{kind}.json"))
    return problems


def _load_any(name: str, data: bytes) -> Any:
    if name.endswith(".cbor"):
        return from_cbor_document(cbor2.loads(data))
    return json.loads(data)


def _describe_difference(name: str, actual: bytes, expected: bytes) -> list[str]:
    """Say which cases of a file differ from the generator's, by name."""
    if not name.endswith((".json", ".cbor")):
        return [f"{name}: differs from what the generator writes"]
    try:
        got = _load_any(name, actual)
    except Exception as exc:  # any decoder failure: the file is damaged
        return [f"{name}: differs from the generator and cannot be read ({exc})"]
    want = _load_any(name, expected)
    if not isinstance(got, dict) or not isinstance(got.get("cases"), list):
        return [f"{name}: differs from the generator: not a vector document"]
    out = []
    for field in sorted(set(got) | set(want)):
        if field != "cases" and got.get(field) != want.get(field):
            out.append(f"{name}: top-level field {field!r} differs from the generator")
    got_cases = {c.get("name"): c for c in got["cases"] if isinstance(c, dict)}
    want_cases = {c["name"]: c for c in want["cases"]}
    for case_name, case in want_cases.items():
        if case_name not in got_cases:
            out.append(f"{name}: case {case_name!r} is missing")
        elif got_cases[case_name] != case:
            fields = sorted(
                k
                for k in set(case) | set(got_cases[case_name])
                if case.get(k) != got_cases[case_name].get(k)
            )
            out.append(f"{name}: case {case_name!r} differs in {', '.join(fields)}")
    for case_name in got_cases:
        if case_name not in want_cases:
            out.append(f"{name}: case {case_name!r} is not one the generator writes")
    if not out and [c.get("name") for c in got["cases"] if isinstance(c, dict)] != list(want_cases):
        out.append(f"{name}: cases are in a different order than the generator's")
    if not out:
        out.append(f"{name}: same cases, but the bytes differ from the generator's formatting")
    return out


# -- verification against the library ------------------------------------------------


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


def verify_document(
    kind: str,
    doc: Any,
    *,
    file_name: str | None = None,
    backends: Iterable[Backend] | None = None,
) -> list[str]:
    """Check every case of a vector document against the library.

    Returns the problems found (empty when every case holds). Framing and
    padding cases run on every backend (or those given).
    """
    name = file_name or f"{kind}.json"
    if not isinstance(doc, dict):
        return [f"{name}: not a JSON object"]
    head = [
        f"{name}: field {field!r} is {doc.get(field)!r}, not {value!r}"
        for field, value in (("format", FORMAT), ("version", VERSION), ("kind", kind))
        if doc.get(field) != value
    ]
    cases = doc.get("cases")
    if not isinstance(cases, list) or not cases:
        return [*head, f"{name}: 'cases' is not a non-empty list"]
    checker = _Checker(name)
    seen: set[str] = set()
    impls = list(backends) if backends is not None else list(_backend.backends.values())
    verify = _VERIFIERS[kind]
    for case in cases:
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            checker.problems.append(f"{name}: a case without a name: {str(case)[:60]}")
            continue
        if case["name"] in seen:
            checker.fail(case, "duplicate case name")
        seen.add(case["name"])
        if "error" in case and case["error"] not in ERROR_CLASSES:
            checker.fail(case, f"unknown error kind {case['error']!r}")
            continue
        for field, value in case.items():
            if field in HEX_FIELDS and value is not None and not _is_hex(value):
                checker.fail(case, f"field {field!r} is not lowercase hex")
        try:
            verify(checker, case, impls)
        except (KeyError, TypeError, ValueError) as exc:
            checker.fail(case, f"malformed case ({type(exc).__name__}: {exc})")
    return head + checker.problems


def _is_hex(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) % 2 == 0
        and all(c in "0123456789abcdef" for c in value)
    )


def _verify_key(c: _Checker, case: Case, impls: list[Backend]) -> None:
    if "seed" in case and "private_key" in case:
        seed = _h(case, "seed")
        key = SigningKey.from_seed(seed)
        pk = key.public_key
        c.expect(case, pk.raw == _h(case, "public_key_raw"), "public_key_raw is not the seed's")
        c.expect(case, pk.der == _h(case, "public_key_der"), "public_key_der differs")
        c.expect(case, pk.der == SPKI_PREFIX + pk.raw, "public_key_der is not prefix + raw")
        c.expect(case, pk.encode() == case["public_key"], "public_key text differs")
        c.expect(case, key.der == _h(case, "private_key_der"), "private_key_der differs")
        c.expect(case, key.der == PKCS8_PREFIX + seed, "private_key_der is not prefix + seed")
        c.expect(case, key.encode() == case["private_key"], "private_key text differs")

        def decode_back() -> None:
            c.expect(case, PublicKey.decode(case["public_key"]) == pk, "public text decodes wrong")
            c.expect(case, PublicKey.from_der(_h(case, "public_key_der")) == pk, "from_der wrong")
            c.expect(
                case, SigningKey.decode(case["private_key"]).seed() == seed, "private text wrong"
            )
            c.expect(
                case,
                SigningKey.from_der(_h(case, "private_key_der")).seed() == seed,
                "private from_der wrong",
            )

        c.run(case, decode_back)
        return
    key_type = case["key_type"]
    if key_type not in ("public", "private"):
        raise ValueError(f"key_type {key_type!r}")
    text = case["text"]
    if "error" in case:
        if key_type == "public":
            c.raises(case, lambda: PublicKey.decode(text), what="decode")
            if "der" in case:
                c.raises(case, lambda: PublicKey.from_der(_h(case, "der")), what="from_der")
        else:
            c.raises(case, lambda: SigningKey.decode(text), what="decode")
            if "der" in case:
                c.raises(case, lambda: SigningKey.from_der(_h(case, "der")), what="from_der")
        return

    def decode_ok() -> None:
        if key_type == "public":
            got = PublicKey.decode(text)
        else:
            sk = SigningKey.decode(text)
            c.expect(case, sk.seed() == _h(case, "seed"), "decodes to another seed")
            got = sk.public_key
        c.expect(case, got.raw == _h(case, "public_key_raw"), "decodes to another key")

    c.run(case, decode_ok)


def _verify_signature(c: _Checker, case: Case, impls: list[Backend]) -> None:
    ad = _h(case, "ad")
    payload = _h(case, "payload")
    signature = _h(case, "signature")
    pk = PublicKey.decode(case["public_key"])
    c.expect(case, pk.raw == _h(case, "public_key_raw"), "public_key and public_key_raw differ")
    if case.get("error") == "SimplexRpcError":
        c.expect(case, case["session_tag"] is None, "session_tag of a refused AD must be null")
        c.raises(case, lambda: session_tag(ad), what="session_tag")
        c.raises(case, lambda: pk.verify_request(ad, payload, signature), what="verify_request")
        return
    tag = session_tag(ad)
    c.expect(case, tag == _h(case, "session_tag"), "session_tag differs")
    expected = hashlib.sha3_256(b"SimpleXService" + ad).digest()
    c.expect(case, tag == expected, "session_tag is not SHA3-256('SimpleXService' || ad)")
    if case["valid"] is True:
        if case.get("seed") is not None:
            key = SigningKey.from_seed(_h(case, "seed"))
            c.expect(case, key.public_key == pk, "public_key is not the seed's")
            c.expect(case, key.sign_request(ad, payload) == signature, "signature differs")
        c.run(case, lambda: pk.verify_request(ad, payload, signature))
        c.run(case, lambda: pk.verify(tag + payload, signature))
        c.expect(case, "error" not in case, "a valid case carries an error")
    elif case["valid"] is False:
        c.expect(
            case,
            case.get("error") == "BadSignature",
            "'valid' is false but 'error' is not 'BadSignature'",
        )
        c.raises(case, lambda: pk.verify_request(ad, payload, signature), what="verify_request")
        c.raises(case, lambda: pk.verify(tag + payload, signature), what="verify")
    else:
        raise ValueError("'valid' is not a boolean")


def _verify_padding(c: _Checker, case: Case, impls: list[Backend]) -> None:
    for b in impls:
        _verify_padding_on(c, case, b)


def _verify_padding_on(c: _Checker, case: Case, b: Backend) -> None:
    op = case["op"]
    length = case["length"]
    if op == "pad" and "error" in case:
        zeros = bytes(case["message_length"])
        c.raises(case, lambda: b.pad(zeros, length), b, "pad")
        c.raises(case, lambda: b.pad_many([zeros], length), b, "pad_many")
    elif op == "pad":
        message = _h(case, "message")

        def pad_ok() -> None:
            padded = b.pad(message, length)
            c.expect(case, len(padded) == length, "padded length differs", b)
            digest = hashlib.sha256(padded).digest()
            c.expect(case, digest == _h(case, "padded_sha256"), "padded_sha256 differs", b)
            c.expect(case, padded[:64] == _h(case, "padded_head"), "padded_head differs", b)
            back = b.unpad(padded, length=length, strict=True)
            c.expect(case, back == message, "unpad does not give the message back", b)
            c.expect(case, b.pad_many([message], length) == padded, "pad_many differs", b)
            many = b.unpad_many(padded, length, strict=True)
            c.expect(case, many == [message], "unpad_many differs", b)

        c.run(case, pad_ok, b)
    elif op == "unpad":
        block = _h(case, "block")
        strict = case["strict"]
        if not isinstance(strict, bool) or not (length is None or isinstance(length, int)):
            raise ValueError("'strict' or 'length' has the wrong type")
        if "error" in case:
            c.raises(case, lambda: b.unpad(block, length=length, strict=strict), b, "unpad")
        else:
            message = _h(case, "message")

            def unpad_ok() -> None:
                got = b.unpad(block, length=length, strict=strict)
                c.expect(case, got == message, "unpad gives another message", b)

            c.run(case, unpad_ok, b)
    else:
        raise ValueError(f"op {op!r}")


_UNSIGNED_CHECK_AD: Final = b"any AD: an unsigned request does not depend on it"


def _verify_frame(c: _Checker, case: Case, impls: list[Backend]) -> None:
    for b in impls:
        _verify_frame_on(c, case, b)


def _verify_frame_on(c: _Checker, case: Case, b: Backend) -> None:
    if "payload_length" in case:
        payload = bytes(case["payload_length"])
        if case["kind"] == "request":
            key = SigningKey.from_seed(bytes(32)) if case["signed"] else None
            c.raises(
                case, lambda: b.seal_request(payload, _UNSIGNED_CHECK_AD, key), b, "seal_request"
            )
        else:
            c.raises(case, lambda: b.seal_response(payload), b, "seal_response")
        return
    frame = _h(case, "frame")
    if "error" not in case:
        c.run(case, lambda: _frame_ok(c, case, b, frame), b)
        return
    expect = case.get("expect")
    if expect is None:
        c.raises(case, lambda: b.decode_frame(frame), b, "decode_frame")
    elif expect == "request":
        ad = _h(case, "ad")
        c.raises(case, lambda: b.open_request(b.pad(frame), ad), b, "open_request")
    elif expect == "response":
        c.raises(case, lambda: b.open_response(b.pad(frame)), b, "open_response")
    else:
        raise ValueError(f"expect {expect!r}")


def _frame_ok(c: _Checker, case: Case, b: Backend, frame: bytes) -> None:
    kind = case["kind"]
    payload = _h(case, "payload")
    decoded = b.decode_frame(frame)
    c.expect(case, decoded.kind == kind, "decodes to another kind", b)
    c.expect(case, decoded.payload == payload, "decodes to another payload", b)
    padded = b.pad(frame)
    c.expect(
        case,
        hashlib.sha256(padded).digest() == _h(case, "padded_sha256"),
        "padded_sha256 differs",
        b,
    )
    if "seed" in case:
        key = SigningKey.from_seed(_h(case, "seed"))
        ad = _h(case, "ad")
        signature = key.sign_request(ad, payload)
        c.expect(case, signature == _h(case, "signature"), "signature differs", b)
        c.expect(case, key.public_key.encode() == case["public_key"], "public_key differs", b)
        c.expect(case, decoded.key == key.public_key, "decodes to another key", b)
        c.expect(case, decoded.signature == signature, "decodes to another signature", b)
        encoded = b.encode_frame(kind, payload, key=key.public_key, signature=signature)
        c.expect(case, encoded == frame, "encode_frame differs", b)
        block = b.seal_request(payload, ad, key)
        c.expect(case, block == padded, "seal_request differs from pad(frame)", b)
        opened = b.open_request(block, ad, strict=True)
        c.expect(case, opened.payload == payload, "open_request gives another payload", b)
        c.expect(case, opened.signer == key.public_key, "open_request gives another signer", b)
    elif kind == "request":
        c.expect(case, decoded.key is None and decoded.signature is None, "decodes as signed", b)
        c.expect(case, b.encode_frame(kind, payload) == frame, "encode_frame differs", b)
        block = b.seal_request(payload, _UNSIGNED_CHECK_AD)
        c.expect(case, block == padded, "seal_request differs from pad(frame)", b)
        opened = b.open_request(block, _UNSIGNED_CHECK_AD, strict=True)
        c.expect(case, opened.payload == payload and opened.signer is None, "open_request", b)
    else:
        c.expect(case, b.encode_frame(kind, payload) == frame, "encode_frame differs", b)
        block = b.seal_response(payload)
        c.expect(case, block == padded, "seal_response differs from pad(frame)", b)
        opened_payload = b.open_response(block, strict=True)
        c.expect(case, opened_payload == payload, "open_response gives another payload", b)


def _verify_envelope(c: _Checker, case: Case, impls: list[Backend]) -> None:
    envelope = case["envelope"]
    if case["json"] is None:
        data = _h(case, "json_hex")
    else:
        data = case["json"].encode("utf-8")
    parser: Callable[[bytes], Request | Response]
    if envelope == "request":
        parser = Request.parse
    elif envelope == "response":
        parser = Response.parse
    else:
        raise ValueError(f"envelope {envelope!r}")
    if case["valid"] is False:
        try:
            parser(data)
        except EnvelopeError as exc:
            c.expect(case, type(exc).__name__ == case["error"], f"raised {type(exc).__name__}")
            c.expect(case, exc.code == case["code"], f"error code {exc.code!r}")
        except Exception as exc:
            c.fail(case, f"raised {type(exc).__name__}: {exc}")
        else:
            c.fail(case, f"parsed where {case['error']} is expected")
        return
    if case["valid"] is not True:
        raise ValueError("'valid' is not a boolean")

    def parse_ok() -> None:
        value = parser(data)
        again = parser(value.to_json())
        c.expect(case, again == value, "does not survive a parse/serialize round trip")
        if isinstance(value, Request):
            c.expect(case, value.protocol == case["protocol"], "protocol differs")
            raw = None if value.request_key is None else value.request_key.raw.hex()
            c.expect(case, raw == case["request_key_raw"], "requestKey differs")
        else:
            assert isinstance(value, Response)
            c.expect(case, value.ok == case["ok"], "ok differs")
            err = value.error
            c.expect(case, (err and err.code) == case["error_code"], "error code differs")
            c.expect(case, (err and err.retry_after) == case["retry_after"], "retryAfter differs")
            c.expect(case, (err and err.is_final()) == case["final"], "final differs")

    c.run(case, parse_ok)


_VERIFIERS: Final[dict[str, Callable[[_Checker, Case, list[Backend]], None]]] = {
    "keys": _verify_key,
    "signatures": _verify_signature,
    "padding": _verify_padding,
    "frames": _verify_frame,
    "envelopes": _verify_envelope,
}


_README: Final = """\
# simplex-rpc test vectors

Generated by `simplex-rpc vectors generate`; checked by `simplex-rpc vectors check`
(regenerates in memory, compares byte for byte, and re-verifies every case against
the library). Do not edit by hand. The byte contract is wire.md; the file format is
described in full in docs/core-cli.md ("Vector file format").

Each `<kind>.json` is `{"format": "simplex-rpc-vectors", "version": 1, "kind": ...,
"description": ..., "cases": [...]}`, written with sorted keys, two-space indent,
ASCII only and a final newline. Bytes are lowercase hex. Every case has a unique
`name`; a negative case has `"error"`, the name of the library error class that
must be raised (`KeyFormatError`, `BadSignature`, `PaddingError`,
`PayloadTooLarge`, `FrameError`, `EnvelopeError`, or `SimplexRpcError` for a
refused argument such as an empty AD). `<kind>.cbor` holds the same document as
canonical CBOR, with every hex field as a byte string instead.

Fields, positive cases first, then negative ones:

- keys: `seed`, `public_key_raw`, `public_key_der`, `public_key`, `private_key_der`,
  `private_key`; or `key_type` and a `text` that decodes to `public_key_raw` (and
  `seed`). Negative: `key_type`, `text`, optional `der` (what the text decodes to),
  `error`.
- signatures: `seed` (null when no seed exists), `ad`, `payload`, `session_tag`,
  `signature`, `public_key`, `public_key_raw`, `valid`; `error` when not valid.
- padding: `op: "pad"` with `message`, `length`, `padded_sha256`, `padded_head`
  (first 64 bytes), or `message_length`, `length`, `error`; `op: "unpad"` with
  `block`, `length` (the exact size required, or null), `strict`, and `message` or
  `error`.
- frames: `kind`, `payload`, `frame`, `padded_sha256` (the frame padded to 11,106
  bytes), and for a signed request `seed`, `ad`, `public_key`, `signature`.
  Negative: `frame` and `error`, with `expect` (and `ad`) when the frame is opened as
  a request or a response; or `kind`, `signed`, `payload_length`, `error` for a
  payload too large to seal.
- envelopes: `envelope` (`request` or `response`), `json` (the input's text, or null
  with `json_hex` when the input is not UTF-8), `valid`; what the parse gives when
  valid (`protocol`, `request_key_raw`; `ok`, `error_code`, `retry_after`, `final`),
  and `error`, `code` when not.
"""

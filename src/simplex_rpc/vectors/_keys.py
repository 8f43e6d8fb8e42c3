"""The ``keys`` vectors: Ed25519 keys in the SimpleX core's encodings (wire.md section 1)."""

from __future__ import annotations

from typing import Final

from .._wire.backend import Backend
from .._wire.keys import PKCS8_PREFIX, SPKI_PREFIX, PublicKey, SigningKey
from ..errors import install_hint
from ._common import (
    RFC8032_KEYS,
    Case,
    Document,
    VectorError,
    _b64_text,
    _Checker,
    _derived,
    _document,
    _h,
    _seed,
)


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
#: ``crypto`` extra); tests/project/test_distribution.py rebuilds them and compares.
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
            "vectors: building RSA and P-256 keys needs cryptography: " + install_hint("crypto")
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

"""The ``signatures`` vectors: session-bound request signatures (wire.md section 2)."""

from __future__ import annotations

import hashlib

from .._wire.backend import Backend
from .._wire.keys import PublicKey, SigningKey, session_tag
from ._common import (
    _IDENTITY,
    _L,
    _NON_CANONICAL_Y,
    _ORDER_2,
    RFC8032_KEYS,
    Case,
    Document,
    _ad,
    _Checker,
    _compact,
    _document,
    _h,
    _pattern,
    _seed,
)
from ._examples import (
    A2A_SEND_MESSAGE_REQUEST_TEXT,
    MCP_TOOLS_CALL_REQUEST_TEXT,
)


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
        "large payload (10990 bytes)",
        _seed(12),
        ad,
        _pattern(10990, "signed"),
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

"""The ``frames`` vectors: simplex-rpc's request and response frame (wire.md section 4)."""

from __future__ import annotations

import hashlib
from typing import Any, Final

from .._wire.backend import Backend
from .._wire.envelope import Request
from .._wire.keys import SigningKey
from .._wire.padding import PADDED_LENGTH
from .._wire.seal import MAX_RESPONSE, MAX_SIGNED_REQUEST, MAX_UNSIGNED_REQUEST
from ._common import Case, Document, _ad, _Checker, _compact, _document, _h, _pattern, _seed
from ._examples import (
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_CALL_RESPONSE_TEXT,
)


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

"""Frames: wire.md section 4, every byte, both ways, on every backend.

::

    frame   = version body            ; 2 bytes big-endian, version 1
    body    = "R" signer payload      ; a request
            / "S" payload             ; a response
    signer  = "0"                     ; unsigned
            / "1" keylen key siglen sig  ; 44, SPKI DER, 64, signature

Offsets of a signed request: 0-1 version, 2 tag, 3 signer, 4 keylen,
5-48 key, 49 siglen, 50-113 signature, 114- payload.
"""

from __future__ import annotations

import re

import pytest

from simplex_rpc import Frame, FrameError, PublicKey, SigningKey, SimplexRpcError
from simplex_rpc._wire.backend import Backend
from simplex_rpc._wire.frame import (
    RESPONSE_OVERHEAD,
    SIGNED_REQUEST_OVERHEAD,
    UNSIGNED_REQUEST_OVERHEAD,
)

KEY = SigningKey.from_seed(bytes(range(32)))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
SIGNATURE = KEY.sign_request(b"ad", PAYLOAD)


def _signed(backend: Backend, payload: bytes = PAYLOAD) -> bytes:
    result: bytes = backend.encode_frame(
        "request", payload, key=KEY.public_key, signature=SIGNATURE
    )
    return result


def _offset_in(message: str) -> int:
    found = re.search(r"offset (\d+)", message)
    assert found, f"the error does not name an offset: {message!r}"
    return int(found.group(1))


# -- encoding: every byte ---------------------------------------------------------


def test_rule_overheads_4_114_3() -> None:
    """§4: overheads: unsigned request 4 bytes, signed request 114, response 3."""
    assert UNSIGNED_REQUEST_OVERHEAD == 4
    assert SIGNED_REQUEST_OVERHEAD == 2 + 1 + 1 + 1 + 44 + 1 + 64 == 114
    assert RESPONSE_OVERHEAD == 3


def test_rule_unsigned_request_bytes(backend: Backend) -> None:
    """§4: version 00 01, tag 'R', signer '0', then the payload."""
    frame = backend.encode_frame("request", PAYLOAD)
    assert frame == b"\x00\x01" + b"R" + b"0" + PAYLOAD
    assert len(frame) - len(PAYLOAD) == 4


def test_rule_response_bytes(backend: Backend) -> None:
    """§4: version 00 01, tag 'S', then the payload."""
    frame = backend.encode_frame("response", PAYLOAD)
    assert frame == b"\x00\x01S" + PAYLOAD
    assert len(frame) - len(PAYLOAD) == 3


def test_rule_signed_request_every_byte(backend: Backend) -> None:
    """§4: 00 01 'R' '1' 44 key(SPKI DER) 64 sig payload, at the documented offsets."""
    frame = _signed(backend)
    assert frame[0:2] == b"\x00\x01"
    assert frame[2] == ord("R") == 0x52
    assert frame[3] == ord("1") == 0x31
    assert frame[4] == 44
    assert frame[5:49] == KEY.public_key.der
    assert frame[5:17] == bytes.fromhex("302a300506032b6570032100")
    assert frame[49] == 64
    assert frame[50:114] == SIGNATURE
    assert frame[114:] == PAYLOAD
    assert len(frame) - len(PAYLOAD) == 114


def test_rule_empty_payloads(backend: Backend) -> None:
    """§4: the payload is the rest of the frame, which may be empty."""
    assert backend.encode_frame("response", b"") == b"\x00\x01S"
    assert backend.encode_frame("request", b"") == b"\x00\x01R0"
    assert len(_signed(backend, b"")) == 114
    for frame in (b"\x00\x01S", b"\x00\x01R0", _signed(backend, b"")):
        assert backend.decode_frame(frame).payload == b""


# -- decoding ---------------------------------------------------------------------


def test_rule_decode_each_kind(backend: Backend) -> None:
    """§4 decode: kind, payload, key and signature of each kind of frame."""
    response = backend.decode_frame(b"\x00\x01S" + PAYLOAD)
    assert response == Frame(kind="response", payload=PAYLOAD)
    assert response.key is None and response.signature is None and not response.signed
    unsigned = backend.decode_frame(b"\x00\x01R0" + PAYLOAD)
    assert unsigned == Frame(kind="request", payload=PAYLOAD)
    assert not unsigned.signed
    signed = backend.decode_frame(_signed(backend))
    assert signed.kind == "request"
    assert signed.payload == PAYLOAD
    assert signed.key == KEY.public_key and isinstance(signed.key, PublicKey)
    assert signed.signature == SIGNATURE
    assert signed.signed
    assert type(signed.payload) is bytes and type(signed.signature) is bytes


def test_rule_decode_does_not_verify(backend: Backend) -> None:
    """§4: decoding checks the framing only; verification is open_request's job (§2)."""
    frame = backend.encode_frame("request", b"x", key=KEY.public_key, signature=bytes(64))
    assert backend.decode_frame(frame).signature == bytes(64)


def test_rule_trailing_bytes_are_payload(backend: Backend) -> None:
    """§4: payload = the rest of the frame: bytes appended to a frame are payload bytes."""
    for frame, head in (
        (b"\x00\x01S" + PAYLOAD, 3),
        (b"\x00\x01R0" + PAYLOAD, 4),
        (_signed(backend), 114),
    ):
        for extra in (b"\x00", b"#" * 10, b"\xff\xfe"):
            decoded = backend.decode_frame(frame + extra)
            assert decoded.payload == frame[head:] + extra


def test_rule_decode_takes_bytes_like(backend: Backend) -> None:
    """§4: the decoder takes bytes, bytearray and memoryview."""
    frame = _signed(backend)
    expected = backend.decode_frame(frame)
    assert backend.decode_frame(bytearray(frame)) == expected
    assert backend.decode_frame(memoryview(frame)) == expected
    assert backend.decode_frame(memoryview(b"__" + frame)[2:]) == expected


# -- negative cases: each names the offset --------------------------------------


@pytest.mark.parametrize("version", [0, 2, 3, 0x0100, 0x0101, 0xFFFF])
def test_rule_unknown_version_names_offset_0(backend: Backend, version: int) -> None:
    """§4: version is 2 bytes big-endian = 1; any other is an error at offset 0."""
    for rest in (b"S" + PAYLOAD, b"R0" + PAYLOAD, _signed(backend)[2:]):
        with pytest.raises(FrameError, match=rf"unknown version {version} at offset 0"):
            backend.decode_frame(version.to_bytes(2, "big") + rest)


def test_rule_unknown_tag_names_offset_2(backend: Backend) -> None:
    """§4: the tag is 'R' or 'S'; every other byte value is an error at offset 2."""
    for tag in range(256):
        if tag in (ord("R"), ord("S")):
            continue
        with pytest.raises(FrameError, match=rf"unknown tag 0x{tag:02x} at offset 2"):
            backend.decode_frame(b"\x00\x01" + bytes([tag]) + b"0" + PAYLOAD)
    for lower in (b"r", b"s"):
        with pytest.raises(FrameError, match=r"offset 2"):
            backend.decode_frame(b"\x00\x01" + lower + b"0")


def test_rule_unknown_signer_byte_names_offset_3(backend: Backend) -> None:
    """§4: the Maybe byte is '0' or '1'; every other value is an error at offset 3."""
    for byte in range(256):
        if byte in (ord("0"), ord("1")):
            continue
        with pytest.raises(FrameError, match=rf"signer byte 0x{byte:02x} at offset 3"):
            backend.decode_frame(b"\x00\x01R" + bytes([byte]) + PAYLOAD)


@pytest.mark.parametrize("keylen", [0, 32, 43, 45, 48, 255])
def test_rule_key_length_byte_names_offset_4(backend: Backend, keylen: int) -> None:
    """§4: keylen is 1 byte = 44; any other value is an error at offset 4."""
    frame = bytearray(_signed(backend))
    frame[4] = keylen
    with pytest.raises(FrameError, match=rf"key length {keylen} at offset 4"):
        backend.decode_frame(bytes(frame))


@pytest.mark.parametrize("index", range(12))
def test_rule_key_must_be_ed25519_spki_names_the_offset(backend: Backend, index: int) -> None:
    """§4: key = the X.509 SPKI DER of an Ed25519 key: each prefix byte is checked."""
    frame = bytearray(_signed(backend))
    frame[5 + index] ^= 0x80
    with pytest.raises(FrameError) as info:
        backend.decode_frame(bytes(frame))
    message = str(info.value)
    assert "offset 5" in message
    assert f"byte {5 + index}" in message


@pytest.mark.parametrize("siglen", [0, 32, 63, 65, 128, 255])
def test_rule_signature_length_byte_names_offset_49(backend: Backend, siglen: int) -> None:
    """§4: siglen is 1 byte = 64; any other value is an error at offset 49."""
    frame = bytearray(_signed(backend))
    frame[49] = siglen
    with pytest.raises(FrameError, match=rf"signature length {siglen} at offset 49"):
        backend.decode_frame(bytes(frame))


def test_rule_truncation_at_every_offset_of_a_signed_frame(backend: Backend) -> None:
    """§4: a signed frame cut short anywhere before its payload is an error naming the offset."""
    frame = _signed(backend)
    for size in range(114):
        with pytest.raises(FrameError) as info:
            backend.decode_frame(frame[:size])
        # The named offset is where the frame ended: the first missing byte.
        assert _offset_in(str(info.value)) == size, (size, str(info.value))
    for size in range(114, len(frame) + 1):
        assert backend.decode_frame(frame[:size]).payload == PAYLOAD[: size - 114]


def test_rule_truncation_of_unsigned_request_and_response(backend: Backend) -> None:
    """§4: an unsigned request needs 4 bytes, a response 3; shorter names the offset."""
    for frame, head in ((b"\x00\x01R0", 4), (b"\x00\x01S", 3)):
        for size in range(head):
            with pytest.raises(FrameError) as info:
                backend.decode_frame(frame[:size])
            assert _offset_in(str(info.value)) == size


def test_rule_first_bad_byte_is_named_even_when_truncated(backend: Backend) -> None:
    """§4: a wrong length byte or key byte is named even when the frame is also cut short."""
    frame = bytearray(_signed(backend))
    frame[4] = 45
    with pytest.raises(FrameError, match=r"key length 45 at offset 4"):
        backend.decode_frame(bytes(frame[:20]))
    frame[4] = 44
    frame[8] = 0
    with pytest.raises(FrameError, match=r"byte 8\b"):
        backend.decode_frame(bytes(frame[:20]))
    frame[8] = _signed(backend)[8]
    frame[49] = 65
    with pytest.raises(FrameError, match=r"signature length 65 at offset 49"):
        backend.decode_frame(bytes(frame[:60]))


def test_rule_every_decode_error_is_a_frame_error(backend: Backend) -> None:
    """§4: decode errors are FrameError, a SimplexRpcError and a ValueError."""
    with pytest.raises(FrameError) as info:
        backend.decode_frame(b"")
    assert isinstance(info.value, SimplexRpcError) and isinstance(info.value, ValueError)


# -- encoding: invalid combinations -----------------------------------------------


def test_rule_encode_invalid_combinations(backend: Backend) -> None:
    """§4: only a request is signed, and a signed one has both key and a 64-byte signature."""
    key = KEY.public_key
    cases = [
        dict(kind="request", payload=b"", key=key),
        dict(kind="request", payload=b"", signature=SIGNATURE),
        dict(kind="response", payload=b"", key=key, signature=SIGNATURE),
        dict(kind="request", payload=b"", key=key, signature=SIGNATURE[:63]),
        dict(kind="request", payload=b"", key=key, signature=SIGNATURE + b"\x00"),
        dict(kind="notice", payload=b""),
        dict(kind="Request", payload=b""),
    ]
    for case in cases:
        kind = case.pop("kind")
        payload = case.pop("payload")
        with pytest.raises(FrameError):
            backend.encode_frame(kind, payload, **case)


def test_frame_value_validates() -> None:
    """§4: a Frame value validates the same combinations on construction."""
    with pytest.raises(FrameError, match=r"needs both"):
        Frame(kind="request", payload=b"", key=KEY.public_key)
    with pytest.raises(FrameError, match=r"only a request"):
        Frame(kind="response", payload=b"", key=KEY.public_key, signature=SIGNATURE)
    with pytest.raises(FrameError, match=r"63 bytes where 64"):
        Frame(kind="request", payload=b"", key=KEY.public_key, signature=SIGNATURE[:63])
    with pytest.raises(FrameError, match=r"kind"):
        Frame(kind="other", payload=b"")  # type: ignore[arg-type]


def test_encode_rejects_a_key_that_is_not_a_public_key(backend: Backend) -> None:
    """§4: key is a PublicKey; raw bytes or text are a TypeError, not a malformed frame."""
    for key in (KEY.public_key.raw, KEY.public_key.der, KEY.public_key.encode()):
        with pytest.raises(TypeError):
            backend.encode_frame("request", b"", key=key, signature=SIGNATURE)


def test_rule_round_trip_each_kind(backend: Backend) -> None:
    """§4 both ways: decode(encode(x)) == x for each kind, including binary payloads."""
    for payload in (b"", b"\x00", bytes(range(256)), PAYLOAD * 10):
        for frame in (
            Frame(kind="response", payload=payload),
            Frame(kind="request", payload=payload),
            Frame(kind="request", payload=payload, key=KEY.public_key, signature=SIGNATURE),
        ):
            encoded = backend.encode_frame(
                frame.kind, frame.payload, key=frame.key, signature=frame.signature
            )
            assert backend.decode_frame(encoded) == frame


@pytest.mark.parametrize("not_a_buffer", [5, "text", None, [1, 2]])
@pytest.mark.parametrize("kind", ["request", "response"])
def test_encode_takes_only_buffers(backend: Backend, kind: str, not_a_buffer: object) -> None:
    """§4: payload is the envelope's bytes; ``5`` is not five zero bytes, nor text its UTF-8."""
    with pytest.raises(TypeError):
        backend.encode_frame(kind, not_a_buffer)
    if kind == "request":
        with pytest.raises(TypeError):
            backend.encode_frame(kind, not_a_buffer, key=KEY.public_key, signature=SIGNATURE)

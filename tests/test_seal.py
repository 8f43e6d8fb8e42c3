"""Sealing and opening blocks: frame (§4), sign (§2) and pad (§5) together.

The limits of wire.md section 5: the largest payload is 10,990 bytes signed,
11,100 unsigned and 11,101 for a response; one byte more raises
``PayloadTooLarge`` (a ``PaddingError``) that states the limit, before any
work is done. Every test runs on every backend.
"""

from __future__ import annotations

import array
import sys
from typing import Any

import nacl.bindings
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from simplex_rpc import (
    MAX_RESPONSE,
    MAX_SIGNED_REQUEST,
    MAX_UNSIGNED_REQUEST,
    BadSignature,
    FrameError,
    OpenedRequest,
    PaddingError,
    PayloadTooLarge,
    SigningKey,
    SimplexRpcError,
    session_tag,
)
from simplex_rpc._wire.backend import Backend

AD = bytes(range(56)) + bytes(range(100, 156))
OTHER_AD = bytes(range(100, 156)) + bytes(range(56))  # the same keys, receiver's first
KEY = SigningKey.from_seed(bytes(range(32)))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'


def test_rule_limits_10990_11100_11101() -> None:
    """§5: the largest payload is 10,990 bytes signed, 11,100 unsigned, 11,101 for a response."""
    assert MAX_SIGNED_REQUEST == 11106 - 2 - 114 == 10990
    assert MAX_UNSIGNED_REQUEST == 11106 - 2 - 4 == 11100
    assert MAX_RESPONSE == 11106 - 2 - 3 == 11101


# -- the blocks, byte for byte -------------------------------------------------


def test_rule_sealed_unsigned_request_is_pad_of_frame(backend: Backend) -> None:
    """§4 + §5: seal_request = pad(frame); unsigned: 00 01 'R' '0' payload."""
    block = backend.seal_request(PAYLOAD, AD)
    assert len(block) == 11106
    assert block == backend.pad(b"\x00\x01R0" + PAYLOAD)
    opened = backend.open_request(block, AD)
    assert opened == OpenedRequest(payload=PAYLOAD, signer=None)


def test_rule_sealed_signed_request_is_pad_of_signed_frame(backend: Backend) -> None:
    """§2 + §4 + §5: the frame carries the key's DER and sign_request(AD, payload)."""
    block = backend.seal_request(PAYLOAD, AD, KEY)
    signature = KEY.sign_request(AD, PAYLOAD)
    frame = b"\x00\x01R1" + bytes([44]) + KEY.public_key.der + bytes([64]) + signature + PAYLOAD
    assert block == backend.pad(frame)
    # The signature is plain Ed25519 over session_tag(AD) || payload (cryptography agrees).
    ed25519.Ed25519PublicKey.from_public_bytes(KEY.public_key.raw).verify(
        block[2 + 50 : 2 + 114], session_tag(AD) + PAYLOAD
    )
    opened = backend.open_request(block, AD)
    assert opened.payload == PAYLOAD
    assert opened.signer == KEY.public_key


def test_rule_sealed_response_is_pad_of_frame(backend: Backend) -> None:
    """§4 + §5: seal_response = pad(00 01 'S' payload)."""
    block = backend.seal_response(PAYLOAD)
    assert block == backend.pad(b"\x00\x01S" + PAYLOAD)
    assert backend.open_response(block) == PAYLOAD


def test_sealing_does_not_parse_payloads(backend: Backend) -> None:
    """Sealing and opening carry any payload bytes; envelope parsing is a separate step."""
    for payload in (b"", b"\xff\xfe not JSON", bytes(range(256))):
        assert backend.open_request(backend.seal_request(payload, AD), AD).payload == payload
        assert backend.open_request(backend.seal_request(payload, AD, KEY), AD).payload == payload
        assert backend.open_response(backend.seal_response(payload)) == payload


def test_sealing_takes_bytes_like(backend: Backend) -> None:
    """Payloads, AD and blocks may be bytearray or memoryview; results are bytes."""
    block = backend.seal_request(bytearray(PAYLOAD), memoryview(AD), KEY)
    assert type(block) is bytes
    opened = backend.open_request(memoryview(block), bytearray(AD))
    assert opened.payload == PAYLOAD and type(opened.payload) is bytes
    assert backend.open_response(bytearray(backend.seal_response(memoryview(PAYLOAD)))) == PAYLOAD


def test_sealing_counts_bytes_of_wide_buffers(backend: Backend) -> None:
    """A payload of wider items (array('I')) is sealed as its bytes, and its size is in bytes."""
    wide = array.array("I", range(3000))  # 12,000 bytes in 3,000 items
    with pytest.raises(PayloadTooLarge):
        backend.seal_response(memoryview(wide))
    small = array.array("I", range(10))
    block = backend.seal_request(memoryview(small), AD, KEY)
    assert backend.open_request(block, AD).payload == small.tobytes()


def test_rule_payload_is_the_request_exactly_as_sent(backend: Backend) -> None:
    """§2: the payload is the envelope's JSON bytes as sent: opened byte for byte, never
    re-serialized, and the signature covers exactly those bytes."""
    sent = b'{ "request" : {"id" : 1.0},\n  "protocol":"mcp" , "x":"\\u00e9"}'
    opened = backend.open_request(backend.seal_request(sent, AD, KEY), AD)
    assert opened.payload == sent
    envelope = sx.Request.parse(opened.payload)
    assert envelope.to_json() != sent  # a re-serialization is other bytes...
    with pytest.raises(BadSignature):  # ...which the signature does not cover
        KEY.public_key.verify_request(AD, envelope.to_json(), KEY.sign_request(AD, sent))


def test_rule_size_hard_limit_is_the_block_not_10000(backend: Backend) -> None:
    """§3 size: 10,000 bytes is a SHOULD; a JSON envelope up to the block's limit is sealed."""
    filler = "a" * (MAX_SIGNED_REQUEST - len(b'{"protocol":"p","request":""}'))
    envelope = sx.Request(protocol="p", request=filler).to_json()
    assert len(envelope) == MAX_SIGNED_REQUEST > 10000
    opened = backend.open_request(backend.seal_request(envelope, AD, KEY), AD)
    assert sx.Request.parse(opened.payload).request == filler


# -- size limits ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "limit"),
    [("signed", 10990), ("unsigned", 11100), ("response", 11101)],
)
def test_rule_largest_payload_fits_and_one_more_raises(
    backend: Backend, kind: str, limit: int
) -> None:
    """§5: the largest payload fits with no fill; one byte more raises PayloadTooLarge."""

    def seal(payload: bytes) -> bytes:
        if kind == "response":
            return backend.seal_response(payload)  # type: ignore[no-any-return]
        return backend.seal_request(payload, AD, KEY if kind == "signed" else None)  # type: ignore[no-any-return]

    block = seal(b"p" * limit)
    assert len(block) == 11106
    assert block[-1:] == b"p"  # the frame fills the block: no '#'
    assert block[:2] == (11104).to_bytes(2, "big")
    with pytest.raises(PayloadTooLarge) as info:
        seal(b"p" * (limit + 1))
    exc = info.value
    assert isinstance(exc, PaddingError) and isinstance(exc, SimplexRpcError)
    assert exc.limit == limit
    assert exc.size == limit + 1
    assert f"at most {limit} bytes" in str(exc)
    assert f"{limit + 1} bytes" in str(exc)


def test_rule_payload_too_large_is_raised_before_any_signing(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§5 / issue: a payload too large raises before any work is done: nothing is signed.

    Spies wrap every path by which a backend signs: SigningKey.sign, PyNaCl's
    crypto_sign, and the backend module's own signing helper if it has one.
    A normal seal afterwards shows that the spies do see signing.
    """
    calls: list[str] = []

    def spy(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(SigningKey, "sign", spy("SigningKey.sign", SigningKey.sign))
    monkeypatch.setattr(nacl.bindings, "crypto_sign", spy("crypto_sign", nacl.bindings.crypto_sign))
    module = sys.modules[backend.seal_request.__module__]
    if hasattr(module, "_sign"):
        monkeypatch.setattr(module, "_sign", spy("backend._sign", module._sign))
    with pytest.raises(PayloadTooLarge):
        backend.seal_request(b"x" * (MAX_SIGNED_REQUEST + 1), AD, KEY)
    assert calls == []
    backend.seal_request(b"x", AD, KEY)  # the spies see a normal seal
    assert calls


def test_rule_payload_too_large_comes_before_the_ad_check(backend: Backend) -> None:
    """§5: the size is the first thing checked, even before the AD."""
    with pytest.raises(PayloadTooLarge):
        backend.seal_request(b"x" * (MAX_UNSIGNED_REQUEST + 1), b"")
    with pytest.raises(SimplexRpcError, match=r"must not be empty"):
        backend.seal_request(b"x", b"")


# -- opening: verification and kinds --------------------------------------------


def test_rule_open_request_verifies_the_signature(backend: Backend) -> None:
    """§2: a signed frame is verified on opening; a bad signature raises BadSignature."""
    frame = bytearray(
        backend.encode_frame(
            "request", PAYLOAD, key=KEY.public_key, signature=KEY.sign_request(AD, PAYLOAD)
        )
    )
    backend.open_request(backend.pad(bytes(frame)), AD)
    frame[60] ^= 0x01  # inside the signature
    with pytest.raises(BadSignature):
        backend.open_request(backend.pad(bytes(frame)), AD)


def test_rule_signature_copied_to_another_ad_fails(backend: Backend) -> None:
    """§2: a block signed for one session does not open in another (AD differs)."""
    block = backend.seal_request(PAYLOAD, AD, KEY)
    for ad in (OTHER_AD, AD[:-1], AD + b"\x00", b"x"):
        with pytest.raises(BadSignature):
            backend.open_request(block, ad)
    # The same signature and key, framed anew for the other session, still fail.
    signature = KEY.sign_request(AD, PAYLOAD)
    copied = backend.pad(
        backend.encode_frame("request", PAYLOAD, key=KEY.public_key, signature=signature)
    )
    assert copied == block
    with pytest.raises(BadSignature):
        backend.open_request(copied, OTHER_AD)


def test_rule_signature_under_another_key_fails(backend: Backend) -> None:
    """§2: swapping the key in the frame for another one breaks verification."""
    other = SigningKey.from_seed(b"\x07" * 32)
    frame = backend.encode_frame(
        "request", PAYLOAD, key=other.public_key, signature=KEY.sign_request(AD, PAYLOAD)
    )
    with pytest.raises(BadSignature):
        backend.open_request(backend.pad(frame), AD)


def test_rule_request_block_opened_as_response_fails(backend: Backend) -> None:
    """§4: the tag says which kind a block is: a request does not open as a response."""
    for block in (backend.seal_request(PAYLOAD, AD), backend.seal_request(PAYLOAD, AD, KEY)):
        with pytest.raises(FrameError, match=r"offset 2"):
            backend.open_response(block)


def test_rule_response_block_opened_as_request_fails(backend: Backend) -> None:
    """§4: a response does not open as a request."""
    with pytest.raises(FrameError, match=r"offset 2"):
        backend.open_request(backend.seal_response(PAYLOAD), AD)


def test_rule_open_requires_the_exact_block_size(backend: Backend) -> None:
    """§5 option: open_* require exactly 11,106 bytes."""
    block = backend.seal_request(PAYLOAD, AD)
    response = backend.seal_response(PAYLOAD)
    for bad in (block[:-1], block + b"#", b"", backend.pad(b"\x00\x01R0", 11107)):
        with pytest.raises(PaddingError, match=r"exactly 11106"):
            backend.open_request(bad, AD)
    for bad in (response[:-1], response + b"#"):
        with pytest.raises(PaddingError, match=r"exactly 11106"):
            backend.open_response(bad)


def test_rule_open_strict_fill(backend: Backend) -> None:
    """§5 strict option: a changed fill byte is accepted by default and refused with strict."""
    for block, opener in (
        (backend.seal_request(PAYLOAD, AD, KEY), lambda b, **kw: backend.open_request(b, AD, **kw)),
        (backend.seal_request(PAYLOAD, AD), lambda b, **kw: backend.open_request(b, AD, **kw)),
        (backend.seal_response(PAYLOAD), lambda b, **kw: backend.open_response(b, **kw)),
    ):
        tampered = bytearray(block)
        tampered[-1] = ord("*")
        opener(bytes(tampered))  # the fill is not signed and not looked at
        with pytest.raises(PaddingError, match=r"fill byte at offset 11105"):
            opener(bytes(tampered), strict=True)
        opener(block, strict=True)


def test_rule_open_damaged_frames_raise_frame_errors(backend: Backend) -> None:
    """§4 inside §5: a well-padded block with a bad frame raises FrameError naming the offset."""
    for frame, offset in (
        (b"\x00\x02R0", 0),
        (b"\x00\x01X0", 2),
        (b"\x00\x01R2", 3),
        (b"\x00\x01R1\x2b", 4),
        (b"\x00\x01", 2),
    ):
        with pytest.raises(FrameError, match=rf"offset {offset}\b"):
            backend.open_request(backend.pad(frame), AD)


def test_seal_request_rejects_a_non_signing_key(backend: Backend) -> None:
    """seal_request's signing_key is a SigningKey or None; anything else is a TypeError."""
    for bad in (KEY.public_key, KEY.encode(), KEY.seed()):
        with pytest.raises(TypeError):
            backend.seal_request(PAYLOAD, AD, bad)


# -- tamper: one byte anywhere in a signed block ----------------------------------
#
# One change is not refused by open_request itself: the signer byte '1' (0x31)
# turned into '0' (0x30) at block offset 5 makes a well-formed *unsigned*
# request, as wire.md section 4 defines it. Its payload then begins with the
# key length byte 44 (','), which no JSON text begins with, so the envelope
# parser refuses it (bad_request) and the requester's payload is never taken
# for an unsigned request. The tests pin exactly that.

SIGNED_BLOCK = sx.seal_request(PAYLOAD, AD, KEY)
SIGNER_BYTE = 2 + 3  # block offset of the frame's signer byte


def _refused(backend: Backend, block: bytes, position: int, mask: int) -> None:
    if (position, mask) == (SIGNER_BYTE, 0x01):
        opened = backend.open_request(block, AD, strict=True)
        assert opened.signer is None
        assert opened.payload[:1] == b","
        assert opened.payload.endswith(PAYLOAD) and opened.payload != PAYLOAD
        with pytest.raises(sx.EnvelopeError) as info:
            sx.Request.parse(opened.payload)
        assert info.value.code == "bad_request"
        return
    with pytest.raises(SimplexRpcError):
        backend.open_request(block, AD, strict=True)


def test_rule_tamper_every_byte_of_the_frame(backend: Backend) -> None:
    """§2 + §4 + §5: changing any one byte of a signed block's length field or frame is refused."""
    frame_end = 2 + 114 + len(PAYLOAD)
    for position in range(frame_end + 2):
        for mask in (0x01, 0x80, 0xFF):
            tampered = bytearray(SIGNED_BLOCK)
            tampered[position] ^= mask
            _refused(backend, bytes(tampered), position, mask)


def test_rule_signer_byte_downgrade_never_yields_the_original_payload(backend: Backend) -> None:
    """§4: '1' -> '0' gives an unsigned request whose payload is not the signed one."""
    tampered = bytearray(SIGNED_BLOCK)
    tampered[SIGNER_BYTE] = ord("0")
    opened = backend.open_request(bytes(tampered), AD)
    assert opened.payload == SIGNED_BLOCK[6 : 2 + 114 + len(PAYLOAD)]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    position=st.integers(min_value=0, max_value=11105),
    mask=st.integers(min_value=1, max_value=255),
)
def test_rule_tamper_any_byte_anywhere_is_refused(
    backend: Backend, position: int, mask: int
) -> None:
    """§2 + §5 strict: a one-byte change anywhere in a signed block is refused on opening."""
    tampered = bytearray(SIGNED_BLOCK)
    tampered[position] ^= mask
    _refused(backend, bytes(tampered), position, mask)


# -- the documented examples run ---------------------------------------------------


def test_core_api_doc_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/core-api.md: every Python example runs as written and prints what it says."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "core-api.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})
        printed = capsys.readouterr().out
        # Each "print(...)  # text" comment states what the line prints.
        for expected in re.findall(r"print\(.*\)[ \t]+# (.+)", block):
            assert expected.strip() in printed


def test_too_large_unsigned_request_message_reads_well(backend: Backend) -> None:
    """The PayloadTooLarge message names the limit for the kind of request, in plain English."""
    with pytest.raises(sx.PayloadTooLarge) as info:
        backend.seal_request(b"x" * (sx.MAX_UNSIGNED_REQUEST + 1), b"ad")
    assert str(info.value) == (
        f"payload of {sx.MAX_UNSIGNED_REQUEST + 1} bytes is too large:"
        f" at most {sx.MAX_UNSIGNED_REQUEST} bytes fit an unsigned request"
    )

"""Sealing and opening the agent's block: encode (§4), sign (§2) and pad (§5) together.

The block is the SimpleX agent's own (V8 Agent/Protocol.hs ``AgentMessage``): a
request is ``'A' ‖ reply queues ‖ Maybe RequestSignature ‖ payload`` padded to
11,106 bytes; a response ``'P' ‖ payload`` padded to 11,106, or to 14,832 when
the address has PQ support off; a rejection ``'J' ‖ reason`` likewise. The
largest payload depends on the reply queue (``max_request_payload``); one byte
more raises ``PayloadTooLarge`` before any work is done. Every test runs on
every backend.
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
from _hypothesis import examples
from _queues import QUEUE, THREE_HOSTS
from simplex_rpc import (
    MAX_RESPONSE,
    BadSignature,
    FrameError,
    OpenedRequest,
    PaddingError,
    PayloadTooLarge,
    ServiceRejected,
    SigningKey,
    SimplexRpcError,
    max_request_payload,
    max_response_payload,
    session_tag,
)
from simplex_rpc._wire.backend import Backend

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

AD = bytes(range(56)) + bytes(range(100, 156))
OTHER_AD = bytes(range(100, 156)) + bytes(range(56))  # the same keys, the other order
KEY = SigningKey.from_seed(bytes(range(32)))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
Q = QUEUE.encode()
SIG_AT = 2 + 1 + 1 + len(Q)  # the block offset of the signature's Maybe tag
PAYLOAD_AT = SIG_AT + 111  # of a signed request's payload


def _head(signature: bytes | None = None, key: SigningKey = KEY) -> bytes:
    if signature is None:
        return b"A\x01" + Q + b"0"
    return b"A\x01" + Q + b"1" + bytes([44]) + key.public_key.der + bytes([64]) + signature


def test_rule_limits_follow_the_reply_queue() -> None:
    """§5: 11,106 - 2 - 'A' - count - queue - (111 signed, 1 unsigned); a response 11,103,
    or 14,829 without PQ."""
    assert len(Q) == 124  # one 15-byte host, no port, 32-byte key hash: client version 4
    assert max_request_payload(QUEUE) == 11106 - 2 - 2 - 124 - 111 == 10867
    assert max_request_payload(QUEUE, signed=False) == 11106 - 2 - 2 - 124 - 1 == 10977
    assert max_request_payload(THREE_HOSTS) == 11106 - 4 - len(THREE_HOSTS.encode()) - 111
    assert max_response_payload() == MAX_RESPONSE == 11103
    assert max_response_payload(pq_support=False) == 14829


# -- the blocks, byte for byte -------------------------------------------------


def test_rule_sealed_unsigned_request_is_pad_of_the_agents_message(backend: Backend) -> None:
    """§4 + §5: seal_request = pad('A' 1 queue '0' payload, 11106) (AgentServiceRequest)."""
    block = backend.seal_request(PAYLOAD, AD, reply_queue=QUEUE)
    assert len(block) == 11106
    assert block == backend.pad(_head() + PAYLOAD)
    opened = backend.open_request(block, AD)
    assert opened == OpenedRequest(payload=PAYLOAD, signer=None, reply_queues=(QUEUE,))
    assert opened.reply_queue == QUEUE


def test_rule_sealed_signed_request_carries_key_and_signature(backend: Backend) -> None:
    """§2 + §4: '1' ‖ 44 ‖ SPKI key ‖ 64 ‖ Ed25519 over
    SHA3-256("SimpleXService" ‖ AD) ‖ payload."""
    block = backend.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)
    signature = KEY.sign_request(AD, PAYLOAD)
    assert block == backend.pad(_head(signature) + PAYLOAD)
    ed25519.Ed25519PublicKey.from_public_bytes(KEY.public_key.raw).verify(
        block[PAYLOAD_AT - 64 : PAYLOAD_AT], session_tag(AD) + PAYLOAD
    )
    opened = backend.open_request(block, AD)
    assert (opened.payload, opened.signer, opened.reply_queues) == (
        PAYLOAD,
        KEY.public_key,
        (QUEUE,),
    )


def test_rule_sealed_response_pads_to_11106_or_14832(backend: Backend) -> None:
    """§4 + §5: 'P' ‖ payload, padded to e2eEncConnInfoLength of the address's PQ support."""
    on = backend.seal_response(PAYLOAD)
    off = backend.seal_response(PAYLOAD, pq_support=False)
    assert on == backend.pad(b"P" + PAYLOAD, 11106)
    assert off == backend.pad(b"P" + PAYLOAD, 14832)
    assert backend.open_response(on) == backend.open_response(off) == PAYLOAD


def test_rule_rejection_raises_service_rejected_with_its_reason(backend: Backend) -> None:
    """§4: 'J' ‖ reason (AgentRejection); open_response raises ServiceRejected carrying it."""
    for pq in (True, False):
        block = backend.seal_rejection(b"busy", pq_support=pq)
        assert block == backend.pad(b"Jbusy", 11106 if pq else 14832)
        with pytest.raises(ServiceRejected) as info:
            backend.open_response(block, strict=True)
        assert info.value.reason == b"busy"
        assert "busy" in str(info.value)


def test_sealing_does_not_parse_payloads(backend: Backend) -> None:
    """Sealing and opening carry any payload bytes; envelope parsing is a separate step."""
    for payload in (b"", b"\xff\xfe not JSON", bytes(range(256))):
        for key in (None, KEY):
            block = backend.seal_request(payload, AD, key, reply_queue=QUEUE)
            assert backend.open_request(block, AD).payload == payload
        assert backend.open_response(backend.seal_response(payload)) == payload


def test_sealing_takes_bytes_like(backend: Backend) -> None:
    """Payloads, AD and blocks may be bytearray or memoryview; results are bytes."""
    block = backend.seal_request(bytearray(PAYLOAD), memoryview(AD), KEY, reply_queue=QUEUE)
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
    block = backend.seal_request(memoryview(small), AD, KEY, reply_queue=QUEUE)
    assert backend.open_request(block, AD).payload == small.tobytes()


def test_rule_payload_is_the_request_exactly_as_sent(backend: Backend) -> None:
    """§2: the payload is opened byte for byte, and the signature covers exactly those bytes."""
    sent = b'{ "request" : {"id" : 1.0},\n  "protocol":"mcp" , "x":"\\u00e9"}'
    opened = backend.open_request(backend.seal_request(sent, AD, KEY, reply_queue=QUEUE), AD)
    assert opened.payload == sent
    envelope = sx.Request.parse(opened.payload)
    assert envelope.to_json() != sent
    with pytest.raises(BadSignature):
        KEY.public_key.verify_request(AD, envelope.to_json(), KEY.sign_request(AD, sent))


# -- size limits ---------------------------------------------------------------


@pytest.mark.parametrize("queue", [QUEUE, THREE_HOSTS], ids=["one host", "three hosts"])
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_rule_largest_request_fits_and_one_more_raises(
    backend: Backend, queue: Any, signed: bool
) -> None:
    """§5: at the queue's limit the message fills the block (no '#'); one byte more raises
    PayloadTooLarge naming the limit (a one-host and a three-host reply queue)."""
    limit = max_request_payload(queue, signed)
    key = KEY if signed else None
    block = backend.seal_request(b"p" * limit, AD, key, reply_queue=queue)
    assert block[:2] == (11104).to_bytes(2, "big") and block[-1:] == b"p"
    assert backend.open_request(block, AD, strict=True).payload == b"p" * limit
    with pytest.raises(PayloadTooLarge) as info:
        backend.seal_request(b"p" * (limit + 1), AD, key, reply_queue=queue)
    assert (info.value.limit, info.value.size) == (limit, limit + 1)
    assert f"at most {limit} bytes" in str(info.value)


@pytest.mark.parametrize("pq", [True, False])
def test_rule_largest_response_fits_and_one_more_raises(backend: Backend, pq: bool) -> None:
    """§5: 11,103 bytes fit a response (14,829 without PQ); one more raises PayloadTooLarge."""
    limit = max_response_payload(pq)
    block = backend.seal_response(b"r" * limit, pq_support=pq)
    assert block[-1:] == b"r"
    with pytest.raises(PayloadTooLarge) as info:
        backend.seal_response(b"r" * (limit + 1), pq_support=pq)
    assert info.value.limit == limit
    assert isinstance(info.value, PaddingError) and isinstance(info.value, SimplexRpcError)


def test_rule_payload_too_large_is_raised_before_any_signing(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§5: a payload too large raises before any work is done: nothing is signed."""
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
        backend.seal_request(b"x" * (max_request_payload(QUEUE) + 1), AD, KEY, reply_queue=QUEUE)
    assert calls == []
    backend.seal_request(b"x", AD, KEY, reply_queue=QUEUE)
    assert calls


def test_rule_payload_too_large_comes_before_the_ad_check(backend: Backend) -> None:
    """§5: the size is checked before the AD."""
    too_big = b"x" * (max_request_payload(QUEUE, signed=False) + 1)
    with pytest.raises(PayloadTooLarge):
        backend.seal_request(too_big, b"", reply_queue=QUEUE)
    with pytest.raises(SimplexRpcError, match=r"must not be empty"):
        backend.seal_request(b"x", b"", reply_queue=QUEUE)


def test_seal_request_requires_a_reply_queue(backend: Backend) -> None:
    """The agent always sends a reply queue: reply_queue is required and must be an
    SMPQueueInfo; the signing key a SigningKey or None."""
    with pytest.raises(TypeError):
        backend.seal_request(PAYLOAD, AD)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        backend.seal_request(PAYLOAD, AD, reply_queue=QUEUE.uri())  # type: ignore[arg-type]
    for bad in (KEY.public_key, KEY.encode(), KEY.seed()):
        with pytest.raises(TypeError):
            backend.seal_request(PAYLOAD, AD, bad, reply_queue=QUEUE)  # type: ignore[arg-type]


# -- opening: verification and kinds --------------------------------------------


def test_rule_open_request_verifies_the_signature(backend: Backend) -> None:
    """§2: a signed request is verified on opening; a bad signature raises BadSignature."""
    message = bytearray(_head(KEY.sign_request(AD, PAYLOAD)) + PAYLOAD)
    backend.open_request(backend.pad(bytes(message)), AD)
    message[PAYLOAD_AT - 2 - 10] ^= 0x01  # inside the signature
    with pytest.raises(BadSignature):
        backend.open_request(backend.pad(bytes(message)), AD)


def test_rule_signature_copied_to_another_ad_fails(backend: Backend) -> None:
    """§2: a block signed for one session does not open in another (AD differs)."""
    block = backend.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)
    for ad in (OTHER_AD, AD[:-1], AD + b"\x00", b"x"):
        with pytest.raises(BadSignature):
            backend.open_request(block, ad)


def test_rule_signature_under_another_key_fails(backend: Backend) -> None:
    """§2: swapping the key in the message for another one breaks verification."""
    other = SigningKey.from_seed(b"\x07" * 32)
    message = _head(KEY.sign_request(AD, PAYLOAD), key=other) + PAYLOAD
    with pytest.raises(BadSignature):
        backend.open_request(backend.pad(message), AD)


def test_rule_the_reply_queue_is_not_signed(backend: Backend) -> None:
    """V8 Agent.hs signServiceReq: the signature covers the binding and the payload only; the
    reply queue travels inside the ratchet's AEAD, not under the signature. Another valid
    queue in the same signed block still verifies (and is the queue that is returned)."""
    other = THREE_HOSTS
    message = b"A\x01" + other.encode() + _head(KEY.sign_request(AD, PAYLOAD))[2 + len(Q) :]
    opened = backend.open_request(backend.pad(message + PAYLOAD), AD)
    assert opened.signer == KEY.public_key and opened.reply_queues == (other,)


def test_rule_request_block_opened_as_response_fails(backend: Backend) -> None:
    """§4: the tag says which message a block holds: a request does not open as a response."""
    for key in (None, KEY):
        block = backend.seal_request(PAYLOAD, AD, key, reply_queue=QUEUE)
        with pytest.raises(FrameError, match=r"a request \('A'\) where .* expected \(offset 0\)"):
            backend.open_response(block)


def test_rule_response_and_rejection_opened_as_request_fail(backend: Backend) -> None:
    """§4: a response or a rejection does not open as a request."""
    for block in (backend.seal_response(PAYLOAD), backend.seal_rejection(b"no")):
        with pytest.raises(FrameError, match=r"offset 0"):
            backend.open_request(block, AD)


def test_rule_open_requires_the_exact_block_size(backend: Backend) -> None:
    """§5 option: open_request requires exactly 11,106 bytes; open_response 11,106 or 14,832."""
    block = backend.seal_request(PAYLOAD, AD, reply_queue=QUEUE)
    for bad in (block[:-1], block + b"#", b""):
        with pytest.raises(PaddingError, match=r"exactly 11106"):
            backend.open_request(bad, AD)
    response = backend.seal_response(PAYLOAD)
    for bad in (response[:-1], response + b"#", response + b"#" * 3725):
        with pytest.raises(PaddingError, match=r"exactly 11106"):
            backend.open_response(bad)
    off = backend.seal_response(PAYLOAD, pq_support=False)
    assert backend.open_response(off) == PAYLOAD


def test_rule_open_strict_fill(backend: Backend) -> None:
    """§5 strict option: a changed fill byte is accepted by default and refused with strict."""
    for block, opener in (
        (backend.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE),
         lambda b, **kw: backend.open_request(b, AD, **kw)),
        (backend.seal_request(PAYLOAD, AD, reply_queue=QUEUE),
         lambda b, **kw: backend.open_request(b, AD, **kw)),
        (backend.seal_response(PAYLOAD), lambda b, **kw: backend.open_response(b, **kw)),
    ):  # fmt: skip
        tampered = bytearray(block)
        tampered[-1] = ord("*")
        opener(bytes(tampered))
        with pytest.raises(PaddingError, match=r"fill byte at offset 11105"):
            opener(bytes(tampered), strict=True)
        opener(block, strict=True)


def test_rule_open_damaged_messages_raise_frame_errors(backend: Backend) -> None:
    """§4 inside §5: a well-padded block with a bad message raises FrameError naming the offset
    (from the message's first byte)."""
    for message, offset in (
        (b"", 0),
        (b"X", 0),
        (b"A", 1),
        (b"A\x00", 1),
        (b"A\x01" + Q, len(Q) + 2),
        (b"A\x01" + Q + b"2", len(Q) + 2),
        (b"A\x01" + Q + b"1\x2b", len(Q) + 3),
    ):
        with pytest.raises(FrameError, match=rf"offset {offset}\b"):
            backend.open_request(backend.pad(message), AD)


# -- tamper: one byte anywhere in a signed block ----------------------------------
#
# Two kinds of change are not refused by open_request itself, both by the agent's
# design: (1) a change inside the reply queue that leaves a valid queue (the queue
# is not signed; the ratchet's AEAD protects it on the wire), which opens with that
# queue; (2) the Maybe tag '1' (0x31) turned into '0' (0x30): a well-formed
# *unsigned* request whose payload begins with the key length byte 44 (','), which
# no JSON text begins with, so the envelope parser refuses it.

SIGNED_BLOCK = sx.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)


def _refused(backend: Backend, block: bytes, position: int) -> None:
    try:
        opened = backend.open_request(block, AD, strict=True)
    except SimplexRpcError:
        return
    if 4 <= position < SIG_AT:  # inside the queue: still a valid queue
        assert opened.payload == PAYLOAD and opened.reply_queue != QUEUE
        return
    assert position == SIG_AT and opened.signer is None and opened.payload[:1] == b","
    with pytest.raises(sx.EnvelopeError) as info:
        sx.Request.parse(opened.payload)
    assert info.value.code == "bad_request"


def test_rule_tamper_every_byte_of_the_message(backend: Backend) -> None:
    """§2 + §4 + §5: changing one byte of a signed block's length field, tag, count,
    signature or payload is refused (the queue: see above)."""
    end = PAYLOAD_AT + len(PAYLOAD)
    for position in range(end + 2):
        for mask in (0x01, 0x80, 0xFF):
            tampered = bytearray(SIGNED_BLOCK)
            tampered[position] ^= mask
            _refused(backend, bytes(tampered), position)


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
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
    _refused(backend, bytes(tampered), position)


# -- the documented examples run ---------------------------------------------------


def test_core_api_doc_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/core-api.md: every Python example runs as written and prints what it says."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "core-api.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})
        printed = capsys.readouterr().out
        for expected in re.findall(r"print\(.*\)[ \t]+# (.+)", block):
            assert expected.strip() in printed


def test_too_large_request_message_reads_well(backend: Backend) -> None:
    """The PayloadTooLarge message names the limit for the kind of request and its queue."""
    limit = max_request_payload(QUEUE, signed=False)
    with pytest.raises(sx.PayloadTooLarge) as info:
        backend.seal_request(b"x" * (limit + 1), b"ad", reply_queue=QUEUE)
    assert str(info.value) == (
        f"payload of {limit + 1} bytes is too large: at most {limit} bytes fit an unsigned"
        " request with this reply queue"
    )

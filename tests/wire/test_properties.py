"""Property tests (hypothesis): round trips of wire.md sections 1 to 5 and one-byte tampering.

Each property runs on every backend; example counts are modest so that the
whole file stays fast.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from _queues import QUEUE, X25519_SPKI_PREFIX
from simplex_rpc import (
    MAX_RESPONSE,
    UNSET,
    BadSignature,
    ErrorInfo,
    PublicKey,
    Request,
    Response,
    SigningKey,
    SimplexRpcError,
)
from simplex_rpc._wire.backend import Backend
from simplex_rpc._wire.strict_json import dumps, loads
from simplex_rpc.agent import (
    AgentServiceRequest,
    RequestSignature,
    SMPQueueInfo,
    SMPServer,
    decode_message,
    max_request_payload,
)

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

SETTINGS = settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

KEY = SigningKey.from_seed(bytes(range(32)))

seeds = st.binary(min_size=32, max_size=32)
ads = st.binary(min_size=1, max_size=200)
small_payloads = st.binary(max_size=600)

# JSON values as this library reads them: finite floats, bounded ints, text
# without lone surrogates, bounded nesting.
json_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=12,
)
protocol_names = st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True)
extra_members = st.dictionaries(
    json_text.filter(
        lambda k: k not in ("protocol", "request", "version", "requestKey", "response", "error")
    ),
    json_values,
    max_size=3,
)


# -- section 1: keys ------------------------------------------------------------------


@SETTINGS
@given(seed=seeds)
def test_property_key_encodings_match_cryptography(seed: bytes) -> None:
    """§1: for any seed, DER and text forms are cryptography's, and they round-trip."""
    key = SigningKey.from_seed(seed)
    theirs = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    spki = theirs.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pkcs8 = theirs.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    assert key.public_key.der == spki
    assert key.der == pkcs8
    text = key.public_key.encode()
    assert text == base64.urlsafe_b64encode(spki).decode()
    assert PublicKey.decode(text) == PublicKey.decode(text.rstrip("=")) == key.public_key
    assert SigningKey.decode(key.encode()) == key


@SETTINGS
@given(seed=seeds, position=st.integers(min_value=0, max_value=59), char=st.characters())
def test_property_public_text_one_character_changed(seed: bytes, position: int, char: str) -> None:
    """§1: changing one character of a key text gives another key or a KeyFormatError, never
    the same key (one text, one byte string)."""
    text = SigningKey.from_seed(seed).public_key.encode()
    changed = text[:position] + char + text[position + 1 :]
    if changed == text:
        return
    try:
        decoded = PublicKey.decode(changed)
    except SimplexRpcError:
        return
    # Dropping the final '=' is the one change allowed to keep the key.
    assert decoded != SigningKey.from_seed(seed).public_key or changed == text[:-1]


# -- section 2: signatures ------------------------------------------------------------


@SETTINGS
@given(seed=seeds, ad=ads, payload=small_payloads, other_ad=ads)
def test_property_session_bound_signature(
    seed: bytes, ad: bytes, payload: bytes, other_ad: bytes
) -> None:
    """§2: sign_request verifies for its AD and payload and for no other AD."""
    key = SigningKey.from_seed(seed)
    signature = key.sign_request(ad, payload)
    key.public_key.verify_request(ad, payload, signature)
    if other_ad != ad:
        with pytest.raises(BadSignature):
            key.public_key.verify_request(other_ad, payload, signature)


# -- section 5: padding ---------------------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_property_pad_unpad_round_trip(backend: Backend, data: st.DataObject) -> None:
    """§5 both ways: unpad(pad(m, N), length=N, strict=True) == m for every m that fits."""
    length = data.draw(st.integers(min_value=2, max_value=3000), label="length")
    message = data.draw(st.binary(max_size=length - 2), label="message")
    block = backend.pad(message, length)
    assert len(block) == length
    assert int.from_bytes(block[:2], "big") == len(message)
    assert backend.unpad(block, length=length, strict=True) == message


@SETTINGS
@given(message=st.binary(max_size=11104))
def test_property_pad_default_block(backend: Backend, message: bytes) -> None:
    """§5: at N = 11,106 every message of at most 11,104 bytes round-trips."""
    assert backend.unpad(backend.pad(message), length=11106, strict=True) == message


@SETTINGS
@given(block=st.binary(max_size=300))
def test_property_unpad_never_fails_outside_its_error(backend: Backend, block: bytes) -> None:
    """§5: unpad of arbitrary bytes returns a message or raises PaddingError, nothing else."""
    try:
        message = backend.unpad(block)
    except SimplexRpcError:
        return
    assert message == block[2 : 2 + int.from_bytes(block[:2], "big")]


# -- section 4: the agent's messages ----------------------------------------------------

hosts = st.sampled_from(
    ["smp.example.com", "a.example", "192.0.2.1", "2001:db8::7", "abcdefghijklmnop.onion",
     "x-1.example.org", "198.51.100.255"]
)
queues = st.builds(
    lambda hs, port, kh, sid, raw, version, mode: SMPQueueInfo(
        version, SMPServer(tuple(hs), port, kh), sid, X25519_SPKI_PREFIX + raw,
        mode if version >= 4 else ("M" if version == 3 and mode else None),
    ),
    st.lists(hosts, min_size=1, max_size=4),
    st.sampled_from(["", "5223", "443", "1"]),
    st.binary(min_size=1, max_size=40),
    st.binary(min_size=1, max_size=32),
    st.binary(min_size=32, max_size=32),
    st.integers(min_value=2, max_value=4),
    st.sampled_from(["M", "C", None]),
)


@SETTINGS
@given(queue=queues)
def test_property_queue_round_trip(queue: SMPQueueInfo) -> None:
    """§4 both ways: SMPQueueInfo.decode(encode(q)) == q; from_uri(uri(q)) == q (without an
    IPv6 host and a port, which simplexmq's printed form cannot carry)."""
    assert SMPQueueInfo.decode(queue.encode()) == queue
    if not (queue.server.port and any(":" in h for h in queue.server.hosts)):
        assert SMPQueueInfo.from_uri(queue.uri()) == queue


@SETTINGS
@given(
    queue=queues,
    payload=small_payloads,
    signed=st.booleans(),
    sig=st.binary(min_size=64, max_size=64),
)
def test_property_request_round_trip(
    queue: SMPQueueInfo, payload: bytes, signed: bool, sig: bytes
) -> None:
    """§4: decode_message(encode(request)) == request, whatever its queue and signature."""
    signature = RequestSignature(KEY.public_key, sig) if signed else None
    request = AgentServiceRequest((queue,), signature, payload)
    assert decode_message(request.encode()) == request


@SETTINGS
@given(data=st.binary(max_size=200))
def test_property_decode_message_never_fails_outside_its_error(data: bytes) -> None:
    """§4: decoding arbitrary bytes gives a message that re-encodes to them, or a FrameError
    naming an offset."""
    try:
        message = decode_message(data)
    except SimplexRpcError as exc:
        assert "offset" in str(exc)
        return
    assert message.encode() == data


# -- seal and open --------------------------------------------------------------------


@SETTINGS
@given(payload=st.binary(max_size=max_request_payload(QUEUE)), ad=ads, signed=st.booleans())
def test_property_seal_open_request(
    backend: Backend, payload: bytes, ad: bytes, signed: bool
) -> None:
    """§2 + §4 + §5: open_request(seal_request(p, ad, key, reply_queue=q), ad) gives p,
    the signer and the queue."""
    block = backend.seal_request(payload, ad, KEY if signed else None, reply_queue=QUEUE)
    assert len(block) == 11106
    opened = backend.open_request(block, ad, strict=True)
    assert opened.payload == payload
    assert opened.signer == (KEY.public_key if signed else None)
    assert opened.reply_queues == (QUEUE,)


@SETTINGS
@given(payload=st.binary(max_size=MAX_RESPONSE))
def test_property_seal_open_response(backend: Backend, payload: bytes) -> None:
    """§4 + §5: open_response(seal_response(p)) == p."""
    assert backend.open_response(backend.seal_response(payload), strict=True) == payload


@SETTINGS
@given(extra=st.integers(min_value=1, max_value=2000), kind=st.sampled_from(["s", "u", "r"]))
def test_property_too_large_states_the_limit(backend: Backend, extra: int, kind: str) -> None:
    """§5: every payload above the limit raises PayloadTooLarge stating that limit."""
    limit = {
        "s": max_request_payload(QUEUE),
        "u": max_request_payload(QUEUE, signed=False),
        "r": MAX_RESPONSE,
    }[kind]
    payload = bytes(limit + extra)
    with pytest.raises(SimplexRpcError) as info:
        if kind == "r":
            backend.seal_response(payload)
        else:
            backend.seal_request(payload, b"ad", KEY if kind == "s" else None, reply_queue=QUEUE)
    assert getattr(info.value, "limit", None) == limit
    assert str(limit) in str(info.value)


@SETTINGS
@given(
    payload=st.binary(min_size=1, max_size=300),
    ad=ads,
    data=st.data(),
)
def test_property_one_byte_tamper_of_a_signed_request(
    backend: Backend, payload: bytes, ad: bytes, data: st.DataObject
) -> None:
    """§2: one changed byte in a signed request's key, signature or payload is refused."""
    block = bytearray(backend.seal_request(payload, ad, KEY, reply_queue=QUEUE))
    # Offsets past the Maybe tag: the key, the lengths, the signature, the payload.
    sig_at = 2 + 2 + len(QUEUE.encode())
    end = sig_at + 111 + len(payload) - 1
    position = data.draw(st.integers(min_value=sig_at + 1, max_value=end))
    mask = data.draw(st.integers(min_value=1, max_value=255))
    block[position] ^= mask
    with pytest.raises(SimplexRpcError):
        backend.open_request(bytes(block), ad)


@SETTINGS
@given(payload=st.binary(min_size=1, max_size=300), data=st.data())
def test_property_one_byte_tamper_of_a_response_is_not_silent_in_the_frame(
    backend: Backend, payload: bytes, data: st.DataObject
) -> None:
    """§4: a response is not signed: a changed payload byte opens as the changed payload."""
    block = bytearray(backend.seal_response(payload))
    position = data.draw(st.integers(min_value=3, max_value=3 + len(payload) - 1))
    block[position] ^= data.draw(st.integers(min_value=1, max_value=255))
    opened = backend.open_response(bytes(block))
    assert opened != payload and len(opened) == len(payload)


# -- section 3: envelopes -------------------------------------------------------------


@SETTINGS
@given(value=json_values)
def test_property_strict_json_round_trip(value: Any) -> None:
    """§3: strict loads reads back what dumps writes, exactly."""
    assert loads(dumps(value)) == value
    assert dumps(loads(dumps(value))) == dumps(value)


@SETTINGS
@given(
    protocol=protocol_names,
    request=json_values,
    version=st.one_of(st.just(UNSET), json_values),
    keyed=st.booleans(),
    extra=extra_members,
)
def test_property_request_envelope_round_trip(
    protocol: str, request: Any, version: Any, keyed: bool, extra: dict[str, Any]
) -> None:
    """§3: Request.parse(r.to_json()) == r, unknown members included."""
    envelope = Request(
        protocol=protocol,
        request=request,
        version=version,
        request_key=KEY.public_key if keyed else None,
        extra=extra,
    )
    text = envelope.to_json()
    assert Request.parse(text) == envelope
    assert Request.parse(text).to_json() == text


@SETTINGS
@given(
    value=json_values,
    code=json_text,
    message=st.one_of(st.none(), json_text),
    retry=st.one_of(st.none(), st.integers(min_value=0, max_value=2**32 - 1)),
    error_extra=extra_members,
    extra=extra_members,
    failure=st.booleans(),
)
def test_property_response_envelope_round_trip(
    value: Any,
    code: str,
    message: str | None,
    retry: int | None,
    error_extra: dict[str, Any],
    extra: dict[str, Any],
    failure: bool,
) -> None:
    """§3: Response.parse(r.to_json()) == r, for successes and failures, extras included."""
    error_extra = {
        k: v for k, v in error_extra.items() if k not in ("code", "message", "retryAfter")
    }
    if failure:
        envelope = Response(
            error=ErrorInfo(code=code, message=message, retry_after=retry, extra=error_extra),
            extra=extra,
        )
    else:
        envelope = Response(response=value, extra=extra)
    text = envelope.to_json()
    parsed = Response.parse(text)
    assert parsed == envelope
    assert parsed.to_json() == text
    if failure:
        assert parsed.error is not None
        assert parsed.error.is_final() == (retry is None)


@SETTINGS
@given(data=st.binary(max_size=200))
def test_property_envelope_parsers_raise_only_envelope_errors(data: bytes) -> None:
    """§3: any bytes give an envelope or an EnvelopeError with code bad_request."""
    for parse in (Request.parse, Response.parse):
        try:
            parse(data)
        except SimplexRpcError as exc:
            assert getattr(exc, "code", None) == "bad_request"

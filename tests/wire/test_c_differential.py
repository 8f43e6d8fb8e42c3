"""Differential tests: the C backend against the pure one (wire.md section 6).

Rule pinned: "Every function of §4 and §5, and their batch forms, has two
implementations with identical results and errors." Random and mutated inputs
(bit flips, truncations, wrong length fields, wrong tags and length bytes,
trailing bytes, odd buffer types) go through both backends in one process;
each must return byte-identical values, or raise the same error class with
the same message.
"""

from __future__ import annotations

import array
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from _hypothesis import examples
from _queues import QUEUE, THREE_HOSTS
from simplex_rpc._wire import backend as _backend
from simplex_rpc.agent import AgentServiceRequest, RequestSignature

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

PURE = sx.backends["python"]
SIG_AT = 2 + 2 + len(QUEUE.encode())  # a padded block's Maybe tag
HEAD_BYTES = [SIG_AT - 2, SIG_AT - 1, SIG_AT, SIG_AT + 1, SIG_AT + 46]
KEYS = [sx.SigningKey.from_seed(bytes([i]) * 32) for i in (1, 2)]
AD = bytes(range(112))
N = sx.PADDED_LENGTH

SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SIGNED_SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def normal(value: Any) -> Any:
    """A comparable form of a result: views become bytes, sequences lists."""
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """("ok", value) or ("error", class, message)."""
    try:
        return ("ok", normal(function(*args, **kwargs)))
    except Exception as exc:
        return ("error", type(exc), str(exc))


def same(c: _backend.Backend, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """Run ``name`` on both backends; assert identical outcomes; return it."""
    want = outcome(getattr(PURE, name), *args, **kwargs)
    got = outcome(getattr(c, name), *args, **kwargs)
    assert got == want, f"{name}: C gave {got!r:.300}, pure gave {want!r:.300}"
    if want[0] == "error":
        # TypeError only for a view both backends refuse (a non-contiguous one)
        assert issubclass(want[1], (sx.SimplexRpcError, TypeError)), want
    return want


# -- strategies -----------------------------------------------------------------------


def as_buffer(data: bytes, kind: str) -> Any:
    """``data`` as the buffer type ``kind``; every view shows exactly ``data``."""
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(b"<>" + data + b"<>")[2:-2]  # a view with an offset
    if kind == "strided":
        spread = bytearray(2 * len(data))
        spread[::2] = data
        return memoryview(spread)[::2]  # not contiguous
    assert kind == "wide" and len(data) % 2 == 0
    return memoryview(array.array("H", data))  # len() counts 2-byte items


@st.composite
def buffers(draw: st.DrawFn, data: bytes) -> Any:
    kinds = ["bytes", "bytearray", "memoryview", "strided"]
    if len(data) % 2 == 0:
        kinds.append("wide")
    return as_buffer(data, draw(st.sampled_from(kinds)))


@st.composite
def mutated(draw: st.DrawFn, base: bytes, hot: int = 120) -> bytes:
    """``base`` with up to four mutations, most of them in the first ``hot`` bytes."""
    data = bytearray(base)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "set", "length", "truncate", "append", "key"]))
        if op == "flip" and data:
            at = draw(st.integers(0, min(len(data), hot) - 1) | st.integers(0, len(data) - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            # tag, count, version, host count and lengths, Maybe byte, key and
            # signature length bytes live in the head
            at = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, *HEAD_BYTES]))
            if at < len(data):
                data[at] = draw(st.integers(0, 255))
        elif op == "length" and len(data) >= 2:
            n = draw(st.integers(0, 0xFFFF) | st.integers(max(0, len(data) - 5), len(data) + 2))
            data[0:2] = min(n, 0xFFFF).to_bytes(2, "big")
        elif op == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif op == "append":
            data += draw(st.binary(min_size=1, max_size=8))
        elif op == "key" and len(data) > SIG_AT + 20:
            at = draw(st.integers(SIG_AT + 4, SIG_AT + 15))  # in a block's signer SPKI prefix
            if at < len(data):
                data[at] ^= 0xFF
    return bytes(data)


lengths = st.integers(-3, 40) | st.integers(60, 400) | st.just(N) | st.integers(65530, 65540)
payloads = st.binary(max_size=300)


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """An agent message: a response, a rejection, or a request (unsigned or signed)."""
    kind = draw(st.sampled_from(["response", "rejection", "unsigned", "signed"]))
    payload = draw(payloads)
    if kind == "response":
        return b"P" + payload
    if kind == "rejection":
        return b"J" + payload
    if kind == "unsigned":
        return AgentServiceRequest((QUEUE,), None, payload).encode()
    key = draw(st.sampled_from(KEYS))
    signature = RequestSignature(key.public_key, key.sign_request(AD, payload))
    return AgentServiceRequest((QUEUE,), signature, payload).encode()


# -- padding ------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), message=st.binary(max_size=500), length=lengths)
def test_rule_pad_identical(
    c_backend: _backend.Backend, data: st.DataObject, message: bytes, length: int
) -> None:
    same(c_backend, "pad", data.draw(buffers(message)), length)


@SETTINGS
@given(data=st.data(), message=st.binary(max_size=200), length=st.integers(2, 260))
def test_rule_unpad_identical_on_mutated_blocks(
    c_backend: _backend.Backend, data: st.DataObject, message: bytes, length: int
) -> None:
    block = PURE.pad(message[: length - 2], length)
    bad = data.draw(mutated(block, hot=length))
    option = data.draw(st.sampled_from([None, length, len(bad), data.draw(lengths)]))
    strict = data.draw(st.booleans())
    same(c_backend, "unpad", data.draw(buffers(bad)), length=option, strict=strict)


@SETTINGS
@given(data=st.data(), raw=st.binary(max_size=40))
def test_rule_unpad_identical_on_random_bytes(
    c_backend: _backend.Backend, data: st.DataObject, raw: bytes
) -> None:
    same(c_backend, "unpad", data.draw(buffers(raw)), strict=data.draw(st.booleans()))


@SETTINGS
@given(
    data=st.data(),
    messages=st.lists(st.binary(max_size=60), max_size=12),
    length=st.integers(-2, 70),
)
def test_rule_pad_many_identical(
    c_backend: _backend.Backend, data: st.DataObject, messages: list[bytes], length: int
) -> None:
    items = [data.draw(buffers(m)) for m in messages]
    same(c_backend, "pad_many", items, length)


@SETTINGS
@given(
    data=st.data(),
    messages=st.lists(st.binary(max_size=30), max_size=10),
    length=st.integers(2, 40),
)
def test_rule_unpad_many_identical_on_mutated_buffers(
    c_backend: _backend.Backend, data: st.DataObject, messages: list[bytes], length: int
) -> None:
    buffer = PURE.pad_many([m[: length - 2] for m in messages], length)
    bad = data.draw(mutated(buffer, hot=len(buffer) or 1))
    option = data.draw(st.sampled_from([length, data.draw(st.integers(-1, 45))]))
    strict = data.draw(st.booleans())
    views = data.draw(st.booleans())
    same(c_backend, "unpad_many", data.draw(buffers(bad)), option, strict=strict, views=views)


# -- the agent's messages, inside valid padding ------------------------------------------


@SETTINGS
@given(data=st.data(), message=messages())
def test_rule_open_identical_on_mutated_messages(
    c_backend: _backend.Backend, data: st.DataObject, message: bytes
) -> None:
    """A message mutated under valid padding: both backends open (or refuse) it alike."""
    bad = data.draw(mutated(message))[: N - 2]
    block = PURE.pad(bad)
    same(c_backend, "open_request", data.draw(buffers(block)), AD)
    same(c_backend, "open_response", data.draw(buffers(block)))


@SETTINGS
@given(data=st.data(), raw=st.binary(max_size=200))
def test_rule_open_identical_on_random_messages(
    c_backend: _backend.Backend, data: st.DataObject, raw: bytes
) -> None:
    head = data.draw(st.sampled_from([b"", b"A\x01", b"A\x01" + QUEUE.encode(), b"P", b"J"]))
    block = PURE.pad(head + raw)
    same(c_backend, "open_request", block, AD)
    same(c_backend, "open_response", block)


# -- sealing and opening ----------------------------------------------------------------


@SIGNED_SETTINGS
@given(
    data=st.data(),
    payload=st.binary(max_size=400) | st.integers(10700, 11105).map(b"p".__mul__),
    signer=st.sampled_from([None, 0, 1]),
)
def test_rule_seal_request_identical(
    c_backend: _backend.Backend, data: st.DataObject, payload: bytes, signer: int | None
) -> None:
    key = None if signer is None else KEYS[signer]
    ad = data.draw(st.sampled_from([AD, b"x", b""]))
    queue = data.draw(st.sampled_from([QUEUE, THREE_HOSTS]))
    same(c_backend, "seal_request", data.draw(buffers(payload)), ad, key, reply_queue=queue)


@SIGNED_SETTINGS
@given(data=st.data(), payload=payloads, signer=st.sampled_from([None, 0, 1]))
def test_rule_open_request_identical_on_mutated_blocks(
    c_backend: _backend.Backend, data: st.DataObject, payload: bytes, signer: int | None
) -> None:
    key = None if signer is None else KEYS[signer]
    block = PURE.seal_request(payload, AD, key, reply_queue=QUEUE)
    bad = data.draw(mutated(block))
    ad = data.draw(st.sampled_from([AD, AD[:-1] + b"?", b""]))
    strict = data.draw(st.booleans())
    same(c_backend, "open_request", data.draw(buffers(bad)), ad, strict=strict)


@SIGNED_SETTINGS
@given(data=st.data(), payload=payloads, response=st.booleans())
def test_rule_seal_and_open_response_identical(
    c_backend: _backend.Backend, data: st.DataObject, payload: bytes, response: bool
) -> None:
    pq = data.draw(st.booleans())
    same(c_backend, "seal_response", data.draw(buffers(payload)), pq_support=pq)
    same(c_backend, "seal_rejection", data.draw(buffers(payload)), pq_support=pq)
    if response:
        block = PURE.seal_response(payload)
    else:
        block = PURE.seal_request(payload, AD, reply_queue=QUEUE)
    bad = data.draw(mutated(block))
    same(c_backend, "open_response", data.draw(buffers(bad)), strict=data.draw(st.booleans()))


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.data(),
    items=st.lists(st.tuples(payloads, st.sampled_from([None, 0, 1])), max_size=6),
)
def test_rule_batch_open_requests_identical(
    c_backend: _backend.Backend, data: st.DataObject, items: list[tuple[bytes, int | None]]
) -> None:
    blocks = [
        data.draw(
            mutated(PURE.seal_request(p, AD, None if k is None else KEYS[k], reply_queue=QUEUE))
        )
        for p, k in items
    ]
    ads = data.draw(st.sampled_from([AD, [AD] * len(blocks), [b"other"] * len(blocks)]))
    workers = data.draw(st.sampled_from([1, 2]))
    same(c_backend, "open_requests", blocks, ads, workers=workers)
    if all(len(b) == N for b in blocks):
        same(c_backend, "open_requests", b"".join(blocks), ads, workers=workers)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    payloads_=st.lists(payloads | st.integers(10860, 10980).map(b"x".__mul__), max_size=5),
    signer=st.sampled_from([None, 0]),
)
def test_rule_batch_seal_requests_identical(
    c_backend: _backend.Backend, payloads_: list[bytes], signer: int | None
) -> None:
    key = None if signer is None else KEYS[signer]
    same(c_backend, "seal_requests", payloads_, AD, key, reply_queue=QUEUE)
    out = bytearray(N * len(payloads_))
    same(c_backend, "seal_requests", payloads_, AD, key, reply_queue=QUEUE, out=out)


def test_rule_every_status_reached_by_the_differential_inputs(c_backend: _backend.Backend) -> None:
    """Each C failure status has at least one input here that gives the pure error."""
    signed = PURE.seal_request(b"{}", AD, KEYS[0], reply_queue=QUEUE)
    cases: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("pad", (b"abc", 1), {}),
        ("pad", (b"a" * 65534, 70000), {}),
        ("pad", (b"abc", 4), {}),
        ("unpad", (b"\x00\x00##",), {"length": 5}),
        ("unpad", (b"\x00",), {}),
        ("unpad", (b"\x00\x05ab",), {}),
        ("unpad", (b"\x00\x01ab",), {"strict": True}),
        ("unpad_many", (b"", 1), {}),
        ("unpad_many", (b"\x00\x00#", 2), {}),
        ("open_request", (PURE.seal_response(b"{}"), AD), {}),
        ("open_response", (signed,), {}),
        ("open_response", (PURE.seal_rejection(b"no"),), {}),
        ("open_request", (PURE.pad(b"A\x00"), AD), {}),
        ("seal_requests", ([b"x" * 11000], AD), {"reply_queue": QUEUE, "out": bytearray(N)}),
        ("seal_requests", ([b"x"], AD), {"reply_queue": QUEUE, "out": bytearray(N - 1)}),
    ]
    for name, args, kwargs in cases:
        result = same(c_backend, name, *args, **kwargs)
        assert result[0] == "error", (name, args)
    messages = {same(c_backend, n, *a, **k)[2] for n, a, k in cases}
    assert len(messages) == len(cases), "each case reaches a different error"


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "strided", "wide"])
def test_rule_every_buffer_type_gives_the_same_bytes(
    c_backend: _backend.Backend, kind: str
) -> None:
    """bytes, bytearray and memoryview (with an offset, wide items) are all accepted.

    A non-contiguous view is read by the encoders (as ``bytes(view)``) and
    refused with TypeError by the decoders, on both backends.
    """
    message = bytes(range(200))
    block = PURE.pad(message)
    sealed = PURE.seal_request(message, AD, KEYS[0], reply_queue=QUEUE)
    assert c_backend.pad(as_buffer(message, kind)) == block
    resealed = c_backend.seal_request(as_buffer(message, kind), AD, KEYS[0], reply_queue=QUEUE)
    assert resealed == sealed
    for backend in (PURE, c_backend):
        if kind == "strided":
            with pytest.raises(TypeError, match="C-contiguous"):
                backend.unpad(as_buffer(block, kind))
            with pytest.raises(TypeError, match="C-contiguous"):
                backend.open_request(as_buffer(sealed, kind), AD)
        else:
            assert backend.unpad(as_buffer(block, kind)) == message
            assert backend.open_request(as_buffer(sealed, kind), AD).payload == message

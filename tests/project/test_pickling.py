"""Everything public pickles and copies; errors cross process boundaries (issue 13).

The rules pinned here:

* every exception class keeps its class, message and attributes (``size``,
  ``limit``, ``code``, ``chat_error``; the A2A client's ``ServiceRpcError``
  its ``code``, ``retry_after`` and ``data``) through ``pickle`` and ``copy``, so an
  error raised in a worker process reaches the parent intact;
* every value object (envelopes, the agent's messages and reply queues, opened
  requests, ``OpenedRequests``,
  ``BlockFailure``, keys, ``BackendInfo``) pickles to an equal value;
* ``SigningKey`` refuses to be pickled: private key material is never
  serialized implicitly;
* ``open_request`` and ``open_requests`` map over a ``ProcessPoolExecutor``
  with both start methods, and every result and every error comes back.
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

import simplex_rpc as sx
from _queues import QUEUE
from simplex_rpc import chat, declarations, errors
from simplex_rpc._bindings import BindingError
from simplex_rpc.adapter import ChatCoreClosed, ChatCoreTimeout, RateLimit, ServiceAddress
from simplex_rpc.agent import decode_message
from simplex_rpc.vectors import VectorError

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

AD = bytes(range(56)) + bytes(range(100, 156))
OTHER_AD = bytes(112)
KEY = sx.SigningKey.from_seed(bytes(range(32)))


def _roundtrips(value: object) -> list[Any]:
    """``value`` through pickle (every protocol), copy and deepcopy."""
    out = [pickle.loads(pickle.dumps(value, protocol)) for protocol in range(2, 6)]
    return [*out, copy.copy(value), copy.deepcopy(value)]


EXCEPTIONS: list[tuple[BaseException, dict[str, object]]] = [
    (
        sx.PayloadTooLarge("payload of 9 bytes is too large", size=9, limit=8),
        {"size": 9, "limit": 8},
    ),
    (
        sx.EnvelopeError("request envelope: bad", code="unsupported_version"),
        {"code": "unsupported_version"},
    ),
    (
        errors.ChatCoreError("refused", chat_error={"type": "error", "x": {"type": "y"}}),
        {"chat_error": {"type": "error", "x": {"type": "y"}}, "type_path": "error/y"},
    ),
    (ChatCoreTimeout("no answer", chat_error=None), {"chat_error": None}),
    (ChatCoreClosed("closed"), {"chat_error": None}),
    (sx.SimplexRpcError("base"), {}),
    (
        errors.AgentCryptoError("request box: bad", layer="request box", offset=3),
        {"layer": "request box", "offset": 3},
    ),
    (sx.KeyFormatError("public key DER: 3 bytes"), {}),
    (sx.BadSignature("signature: does not verify"), {}),
    (sx.PaddingError("unpad: block of 3 bytes"), {}),
    (sx.FrameError("agent message: offset 0"), {}),
    (sx.ServiceRejected(b"busy"), {"reason": b"busy"}),
    (errors.CallSyntaxError("call: no protocol"), {}),
    (errors.CollectorError("collector: twice"), {}),
    (errors.DeclarationError("protocols: not an object"), {}),
    (errors.LlmsTxtError("llms.txt: bad line"), {}),
    (BindingError("jsonrpc: missing"), {}),
    (VectorError("vectors: disagree"), {}),
]


@pytest.mark.parametrize(("error", "attributes"), EXCEPTIONS, ids=lambda v: type(v).__name__)
def test_rule_every_exception_pickles_and_copies_with_its_attributes(
    error: BaseException, attributes: dict[str, object]
) -> None:
    for back in _roundtrips(error):
        assert type(back) is type(error)
        assert str(back) == str(error) and back.args == error.args
        for name, value in attributes.items():
            assert getattr(back, name) == value, name


def test_rule_the_a2a_clients_service_rpc_error_pickles_and_copies() -> None:
    """The A2A client's ServiceRpcError (an a2a-sdk ``A2AClientError``) too; it needs the
    ``a2a`` extra, which an installed wheel without extras does not have."""
    pytest.importorskip("a2a", reason="the a2a-sdk (the 'a2a' extra) is not installed")
    from simplex_rpc.a2a import ServiceRpcError

    error = ServiceRpcError(
        sx.ErrorInfo(code="rate_limited", message="slow", retry_after=3), "wait"
    )
    for back in _roundtrips(error):
        assert type(back) is ServiceRpcError
        assert str(back) == str(error) and back.args == error.args
        assert (back.code, back.retry_after) == ("rate_limited", 3)
        assert back.data == {"code": "rate_limited", "message": "slow", "retryAfter": 3}


def test_rule_a_pickled_error_keeps_notes_and_extra_attributes() -> None:
    error = sx.PayloadTooLarge("too large", size=2, limit=1)
    error.add_note("block 7")
    back = pickle.loads(pickle.dumps(error))
    assert back.__notes__ == ["block 7"] and (back.size, back.limit) == (2, 1)


def test_rule_every_error_class_of_the_library_is_covered() -> None:
    """No exception class of ``simplex_rpc.errors`` is left out of the table above."""
    covered = {type(e) for e, _ in EXCEPTIONS}
    public = {getattr(errors, name) for name in errors.__all__}
    assert public <= covered


def _values() -> list[object]:
    signed = sx.seal_request(b'{"a":1}', AD, KEY, reply_queue=QUEUE)
    other = sx.seal_request(b"x", AD, KEY, reply_queue=QUEUE)
    opened = sx.open_requests([signed, b"short", other], OTHER_AD)
    return [
        sx.Request(protocol="mcp", request={"id": 1}, version="1", request_key=KEY.public_key),
        sx.Request(protocol="mcp", request=None),
        sx.Response(response={"ok": True}),
        sx.Response(error=sx.ErrorInfo(code="bad_request", message="no", retry_after=3)),
        sx.ErrorCode.BAD_REQUEST,
        sx.UNSET,
        decode_message(sx.unpad(signed)),
        QUEUE,
        QUEUE.server,
        sx.open_request(signed, AD),
        sx.open_request(sx.seal_request(b"x", AD, reply_queue=QUEUE), AD),
        opened,
        *opened.failures,
        KEY.public_key,
        sx.backend_info(),
        ServiceAddress(full_link="https://simplex.chat/contact#/?v=2-7&smp=x"),
        RateLimit(requests=5, per=1.0),
        chat.parse_call(chat.format_call("mcp", {"id": 1})),
        *declarations.parse_protocols(
            {"protocols": {"mcp": {"versions": ["1"], "transports": {"chat": True}}}}
        ).values(),
    ]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_rule_every_value_object_pickles_and_copies_to_an_equal_value(value: object) -> None:
    for back in _roundtrips(value):
        assert type(back) is type(value)
        assert back == value


def test_rule_block_failures_keep_their_error_across_pickle() -> None:
    sealed = sx.seal_request(b"x", AD, KEY, reply_queue=QUEUE)
    opened = sx.open_requests([b"short", sealed], OTHER_AD)
    back = pickle.loads(pickle.dumps(opened))
    assert [f.index for f in back.failures] == [0, 1]
    assert isinstance(back.failures[0].error, sx.PaddingError)
    assert isinstance(back.failures[1].error, sx.BadSignature)
    with pytest.raises(sx.PaddingError, match=r"^block 0: "):
        back.unwrap()


def test_rule_signing_key_refuses_pickle_and_copy() -> None:
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="SigningKey is not picklable"):
            attempt(KEY)


def test_rule_public_functions_pickle_by_reference() -> None:
    """What a process pool sends for ``submit(sx.open_requests, ...)``: the function's name."""
    for function in (sx.open_request, sx.open_requests, sx.seal_request, sx.seal_requests):
        assert pickle.loads(pickle.dumps(function)) is function


# -- a process pool: results and errors both come back ---------------------------------


def _blocks() -> tuple[list[bytes], list[type[sx.SimplexRpcError] | None]]:
    """Good blocks mixed with ones that raise in the worker, and what each must give."""
    good = sx.seal_request(b'{"n":1}', AD, KEY, reply_queue=QUEUE)
    unsigned = sx.seal_request(b'{"n":2}', AD, reply_queue=QUEUE)
    tampered = bytearray(good)
    tampered[-1] ^= 1  # a fill byte: only a strict open refuses it
    elsewhere = sx.seal_request(b"x", OTHER_AD, KEY, reply_queue=QUEUE)
    blocks = [good, b"short", unsigned, elsewhere, bytes(tampered)]
    expected = [None, sx.PaddingError, None, sx.BadSignature, None]
    return blocks, expected


def _open_one(block: bytes) -> tuple[str, sx.OpenedRequest]:
    """The worker: the backend it ran on, and the opened request (or its exception)."""
    return sx.backend(), sx.open_request(block, AD)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_rule_open_request_over_a_process_pool_returns_every_result_and_error(
    method: str,
) -> None:
    blocks, expected = _blocks()
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        futures = [pool.submit(_open_one, block) for block in blocks]
        outcomes = [(f.exception(), None if f.exception() else f.result()) for f in futures]
    for block, want, (error, result) in zip(blocks, expected, outcomes, strict=True):
        if want is None:
            assert error is None and result is not None
            name, opened = result
            assert name == sx.backend()
            assert opened == sx.open_request(block, AD)
        else:
            assert type(error) is want
            with pytest.raises(want) as local:
                sx.open_request(block, AD)
            assert str(error) == str(local.value)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_rule_open_requests_over_a_process_pool_partitions(method: str) -> None:
    """The pattern of docs/examples.md (README's before issue 17): ``open_requests`` per
    partition, failures kept per block."""
    blocks, expected = _blocks()
    partitions = [blocks[:2], blocks[2:]]
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        results = list(pool.map(sx.open_requests, partitions, [AD, AD]))
    merged = [entry for part in results for entry in part]
    assert len(merged) == len(blocks)
    for entry, want in zip(merged, expected, strict=True):
        if want is None:
            assert isinstance(entry, sx.OpenedRequest)
        else:
            assert isinstance(entry, sx.BlockFailure) and type(entry.error) is want
    assert results == [sx.open_requests(part, AD) for part in partitions]


def test_rule_payload_too_large_in_a_worker_does_not_hang_the_pool() -> None:
    """The report of issue 13: a worker raising PayloadTooLarge used to kill the pool."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        limit = sx.max_request_payload(QUEUE, signed=False)
        pending = pool.apply_async(sx.seal_request, (bytes(limit + 1), AD), {"reply_queue": QUEUE})
        with pytest.raises(sx.PayloadTooLarge) as raised:
            pending.get(timeout=120)
    assert (raised.value.size, raised.value.limit) == (limit + 1, limit)

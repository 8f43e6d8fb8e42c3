"""The responder's promise under the faults a review found (issue 14, review).

The rule pinned throughout is the protocol text's ("Service RPC transport",
Requirements) and cone-agent-protocol's "nothing lost, each request answered
exactly once": every request ends in exactly one answer or one logged reason,
also while ``serve`` stops and while the core is slow to take answers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from _scripted_core import request_event, responder_of, scripted_serving, taken
from _waiting import until
from simplex_rpc.adapter import ServiceRequest

ADAPTER_LOG = "simplex_rpc.adapter"


def answer_code(envelope: dict[str, Any]) -> str | None:
    error = envelope.get("error")
    return error["code"] if isinstance(error, dict) else None


@pytest.mark.anyio
async def test_a_handler_raising_cancelled_error_during_the_stop_is_still_answered() -> None:
    """Exactly once, while stopping: a handler that raises CancelledError of its own (it
    awaited a future someone else cancelled) during the grace period is a failure like any
    other, answered internal; only the responder's own cancellation of it is not."""

    shared: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    started = asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        started.set()
        return await shared

    async with scripted_serving(handler, grace=30.0) as (fake, _, task):
        await fake.event(request_event("r1"))
        await started.wait()
        task.cancel()
        await asyncio.sleep(0.2)  # the behaviour under test: the grace holds the stop
        assert not task.done()
        shared.cancel()  # someone else's future: the handler raises CancelledError
        with pytest.raises(asyncio.CancelledError):
            await task
        (answer,) = fake.answers["r1"]
        assert answer_code(answer) == "internal"


class _PipeCore:
    """A core as the responder's writer uses it: ``_post_command`` writes an answer (it
    blocks while ``blocked`` is set: a core that stops reading its socket) and returns the
    future of its acknowledgement, which the test resolves; ``_pause_reading`` and
    ``_resume_reading`` are recorded."""

    _event_buffer = 10_000

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.acks: list[asyncio.Future[dict[str, Any]]] = []
        self.unblocked = asyncio.Event()
        self.unblocked.set()
        self.reading: list[str] = []

    async def _post_command(self, cmd: str, timeout: Any, on_answer: Any) -> Any:
        await self.unblocked.wait()
        self.sent.append(cmd.split(" ", 3)[2])
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        future.add_done_callback(on_answer)
        self.acks.append(future)
        return future

    def _pause_reading(self, who: object) -> None:
        self.reading.append("paused")

    def _resume_reading(self, who: object) -> None:
        self.reading.append("resumed")


def _responder(core: Any, **options: Any) -> Any:
    from simplex_rpc.adapter._service import _Responder

    defaults: dict[str, Any] = {
        "concurrency": 1,
        "handler_timeout": 170.0,
        "rate_limit": None,
        "max_response_bytes": 10_000,
        "max_queue": 0,
        "grace": 0.0,
    }
    return _Responder(core, 1, lambda r: {"response": "ok"}, **{**defaults, **options})


@pytest.mark.anyio
async def test_an_answer_posted_as_the_writer_finishes_is_still_sent() -> None:
    """Exactly once: an answer queued in the very step in which the writer has found the
    outbox empty is written (by a writer of its own), not left in the outbox for ever."""
    from simplex_rpc import ErrorCode, Response

    core = _PipeCore()
    responder = _responder(core)
    shed = Response.failure(ErrorCode.RATE_LIMITED, "busy", retry_after=1)
    for n in range(16):
        responder._post(f"r{n}", shed.to_dict(), "shed")
    # Runs right after the writer's steps that empty the outbox.
    asyncio.get_running_loop().call_soon(responder._post, "late", shed.to_dict(), "shed")
    await until(lambda: len(core.sent) >= 17, "the seventeen answers written")
    assert core.sent == [*(f"r{n}" for n in range(16)), "late"]
    assert not responder.outbox and responder.writer is None
    for future in core.acks:
        future.set_result({"type": "serviceReplyAccepted"})
    await until(responder.drained.is_set, "the acknowledgements read")
    assert responder.drained.is_set() and responder.unacked == 0


@pytest.mark.anyio
async def test_at_the_outbox_bound_reading_pauses_and_nothing_is_dropped(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21, "Overload must never lose an answer": against a core that takes no
    answers, the answers waiting to be written reach the bound, the responder stops
    reading the core's frames (one overload line says so), none is counted as
    unanswered; once the core takes them again, every one is written and reading goes on."""
    from simplex_rpc import ErrorCode, Response
    from simplex_rpc.adapter import _service

    monkeypatch.setattr(_service, "_MAX_OUTBOX", 5)

    core = _PipeCore()
    core.unblocked.clear()  # the core does not read: the first write blocks
    responder = _responder(core)
    shed = Response.failure(ErrorCode.RATE_LIMITED, "busy", retry_after=1)
    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        for n in range(12):
            responder._post(f"r{n}", shed.to_dict(), "shed")
            await asyncio.sleep(0)  # the behaviour under test: the writer runs between
        assert core.reading == ["paused"]
        assert responder.outcome.unanswered == 0
        responder.overload.flush()
        core.unblocked.set()
        await until(lambda: len(core.sent) >= 12 and len(core.reading) >= 2, "every answer written")
    assert core.sent == [f"r{n}" for n in range(12)]
    assert core.reading == ["paused", "resumed"]
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all("reading paused" in line for line in lines), lines
    for future in core.acks:
        future.cancel()


@pytest.mark.anyio
async def test_answers_still_unsent_when_the_stop_ends_are_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One logged reason: answers of the responder's own that the core has not taken when
    the stop's time is up are not dropped silently: one line counts them, and the summary
    does not call them shed and answered."""

    async def handler(request: ServiceRequest) -> str:
        await asyncio.Event().wait()
        return "never"

    with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
        async with scripted_serving(handler, concurrency=1, max_queue=0, grace=0.2) as (
            fake,
            _,
            task,
        ):
            fake.raw["/_service_response"] = lambda corr_id, cmd: None  # never acknowledged
            await fake.event(request_event("busy"))
            for n in range(30):
                await fake.event(request_event(f"s{n}"))
            await fake.wait_answers(16)  # the senders took their first answers
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                async with asyncio.timeout(20):
                    await task
    lines = [r.getMessage() for r in caplog.records]
    unsent = [line for line in lines if "still waiting for the core when the stop ended" in line]
    assert len(unsent) == 1, lines
    summary = [line for line in lines if line.startswith("stopped serving")]
    assert len(summary) == 1, summary


@pytest.mark.anyio
async def test_a_slow_rate_limit_answers_rate_limited_with_a_uint32_retry_after() -> None:
    """The envelope's rule: retryAfter is a uint32. A rate limit whose next token is further
    away than that (one request per 10^10 s) still answers rate_limited, with the largest
    retryAfter the envelope allows, not internal."""
    from simplex_rpc.adapter import RateLimit

    limit = RateLimit(requests=1, per=1e10)
    async with scripted_serving(lambda r: "ok", rate_limit=limit) as (fake, _, _task):
        await fake.event(request_event("first"))
        await fake.event(request_event("second"))
        await fake.wait_answers(2)
        assert fake.answers["first"] == [{"response": "ok"}]
        (answer,) = fake.answers["second"]
        assert answer_code(answer) == "rate_limited"
        assert answer["error"]["retryAfter"] == 2**32 - 1


_released: list[bool] = []


async def _stubborn(request: ServiceRequest) -> str:
    """A handler that ignores cancellation (it swallows every CancelledError) until the
    test releases it (so that the test's event loop can end)."""
    while not _released:
        try:
            await asyncio.sleep(0.05)  # the behaviour under test: it swallows cancellation
        except asyncio.CancelledError:
            continue
    return "released"


@pytest.mark.anyio
async def test_serve_ends_after_a_lost_connection_even_if_a_handler_ignores_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fail fast: serve() ends soon after the connection closes, whatever runs; a handler
    that swallows its cancellation cannot hold it, and is named in one line."""
    from simplex_rpc.adapter import ChatCoreClosed

    _released.clear()
    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        async with scripted_serving(_stubborn) as (fake, core, task):
            await fake.event(request_event("stuck"))
            await until(lambda: responder_of(core).running, "the stuck handler running")
            await fake.close_connection()
            try:
                # Generous: the rule is about a second.
                await asyncio.wait({task}, timeout=15)
                assert task.done(), "serve() still runs 15 s after the connection closed"
                with pytest.raises(ChatCoreClosed):
                    await task
            finally:
                _released.append(True)
    assert any("ignored" in r.getMessage() for r in caplog.records), caplog.records


@pytest.mark.anyio
async def test_the_graceful_stop_ends_even_if_a_handler_ignores_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Graceful stop: after ``grace``, the handlers still running are cancelled; one that
    ignores its cancellation cannot hold the stop for ever, and is named in one line."""

    _released.clear()
    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        async with scripted_serving(_stubborn, grace=0.2) as (fake, core, task):
            await fake.event(request_event("stuck"))
            await until(lambda: responder_of(core).running, "the stuck handler running")
            task.cancel()
            try:
                await asyncio.wait({task}, timeout=15)
                assert task.done(), "the stop still runs 15 s after its grace of 0.2 s"
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                _released.append(True)
    assert any("ignored" in r.getMessage() for r in caplog.records), caplog.records


@pytest.mark.anyio
async def test_a_request_nested_deeper_than_the_json_module_can_follow_is_answered_bad_request() -> None:  # noqa: E501
    """Strict frames, every request answered: a requestData nested 3,000 levels deep (past
    the json module's recursion limit, far past the envelope's 64 levels) is still cut out
    of its frame, so that its requestId is read and it is answered bad_request at once."""
    import json

    async with scripted_serving(lambda r: "ok") as (fake, _, _task):
        deep = "[" * 3000 + "]" * 3000
        frame = json.dumps({"resp": request_event("deep")})
        frame = frame.replace('"request": {}', f'"request": {deep}')
        assert deep in frame
        await fake.send_raw(frame)
        await fake.event(request_event("plain"))
        await fake.wait_answers(2)
        (answer,) = fake.answers["deep"]
        assert answer_code(answer) == "bad_request"
        assert "64" in answer["error"]["message"]
        assert fake.answers["plain"] == [{"response": "ok"}]


@pytest.mark.anyio
async def test_a_connection_lost_during_the_graceful_stop_ends_it_at_once() -> None:
    """Fail fast, also while stopping: the connection closing during the grace given to the
    handlers in flight ends serve soon, not after the whole grace (no answer can be sent)."""

    started = asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with scripted_serving(handler, grace=120.0) as (fake, _, task):
        await fake.event(request_event("busy"))
        await started.wait()
        task.cancel()
        await asyncio.sleep(0.3)  # the behaviour under test: the grace holds the stop
        assert not task.done()
        await fake.close_connection()
        await asyncio.wait({task}, timeout=15)  # generous: the rule is about a second
        assert task.done(), "the stop still waits 15 s after the connection closed"


@pytest.mark.anyio
async def test_a_serve_whose_declaration_is_refused_leaves_no_responder_behind() -> None:
    """Exactly once: serve(declare=True) refused before anything is written (no versions to
    declare) takes no requests afterwards; the serve started next is the only responder,
    and each request gets one answer, not one from each."""
    from simplex_rpc import SimplexRpcError

    async with scripted_serving(lambda r: "ok") as (fake, core, task):
        with pytest.raises(SimplexRpcError, match="versions"):
            await core.serve(1, lambda r: "zombie", protocols=["mcp"], declare=True)
        await fake.event(request_event("r1"))
        await fake.wait_answers(1)
        await asyncio.sleep(0.3)  # the behaviour under test: no second answer comes
        assert fake.answers["r1"] == [{"response": "ok"}]
        assert not task.done()


@pytest.mark.anyio
async def test_a_second_cancellation_during_the_stop_logs_what_it_leaves_unanswered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One logged reason, even when stopping at once: a second cancellation ends serve
    without waiting, and one line counts the requests in flight and the answers of the
    responder's own it leaves unanswered."""

    started = asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        async with scripted_serving(handler, concurrency=1, grace=120.0) as (
            fake,
            core,
            task,
        ):
            fake.raw["/_service_response"] = lambda corr_id, cmd: None  # never acknowledged
            await fake.event(request_event("busy"))
            await started.wait()
            for n in range(3):
                await fake.event(request_event(f"q{n}"))
            await until(lambda: taken(core) >= 4, "the queued requests read")
            task.cancel()
            await fake.wait_answers(3)  # the queued ones were sent, never acknowledged
            task.cancel()  # the second cancellation: at once
            await asyncio.wait({task}, timeout=15)
            assert task.done()
    lines = [r.getMessage() for r in caplog.records if "stopped at once" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert "1 requests in flight" in lines[0] and "3 answers" in lines[0], lines

"""``serve`` says when it is ready and returns what it did (issue 28).

"``serve()`` signals when it is ready (no ``asyncio.sleep(0)`` in callers) and
returns its outcome (no counts passed through a log record)." The graceful stop's
rules are serve's docstring (issue 21): queued requests answered ``rate_limited``,
handlers in flight given ``grace``, then cancelled and answered ``internal``.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from _scripted_core import ScriptedCore, request_event
from simplex_rpc.adapter import ChatCore, ServeOutcome, ServiceRequest


async def _echo(request: ServiceRequest) -> str:
    return "ok"


@pytest.mark.anyio
async def test_ready_is_set_once_requests_are_taken_and_stop_returns_the_outcome(
    scripted_core: ScriptedCore,
) -> None:
    async with ChatCore.connect(scripted_core.url) as core:
        ready, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(core.serve(1, _echo, protocols=["mcp"], ready=ready, stop=stop))
        assert not ready.is_set()  # the task has not run yet
        await ready.wait()
        for name in ("a", "b", "c"):
            await scripted_core.event(request_event(name))
        await scripted_core.wait_answers(3)
        await scripted_core.event(request_event("a"))  # a repeat: not handled again
        await scripted_core.event(request_event("d"))
        await scripted_core.wait_answers(4)
        stop.set()
        outcome = await task
        assert outcome == ServeOutcome(answered=4, repeats=1)


@pytest.mark.anyio
async def test_the_stop_sheds_what_waits_and_cancels_what_outlives_the_grace(
    scripted_core: ScriptedCore,
) -> None:
    """One handler hangs (it holds the only slot), two requests wait behind it: the stop
    answers the waiting ones rate_limited (shed) and, after the grace, cancels the hung
    one and answers it internal (cancelled); the outcome counts each."""
    started = asyncio.Event()

    async def hang(request: ServiceRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with ChatCore.connect(scripted_core.url) as core:
        ready, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(
            core.serve(
                1, hang, protocols=["mcp"], concurrency=1, grace=0.05, ready=ready, stop=stop
            )
        )
        await ready.wait()
        for name in ("h", "w1", "w2"):
            await scripted_core.event(request_event(name))
        await started.wait()
        stop.set()
        outcome = await task
        assert outcome == ServeOutcome(shed=2, cancelled=1)
        assert set(await scripted_core.wait_answers(3)) == {"h", "w1", "w2"}
        assert scripted_core.answers["w1"][0]["error"]["code"] == "rate_limited"
        assert scripted_core.answers["h"][0]["error"]["code"] == "internal"


@pytest.mark.anyio
async def test_the_summary_log_record_carries_no_counts_as_data() -> None:
    """The counts go to the caller as the return value; the log line is for people."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.INFO)
    logger = logging.getLogger("simplex_rpc.adapter")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)

    try:
        async with ScriptedCore() as fake, ChatCore.connect(fake.url) as core:
            ready, stop = asyncio.Event(), asyncio.Event()
            task = asyncio.create_task(
                core.serve(1, _echo, protocols=["mcp"], ready=ready, stop=stop)
            )
            await ready.wait()
            stop.set()
            assert await task == ServeOutcome()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    (summary,) = [r for r in records if r.getMessage().startswith("stopped serving user 1")]
    assert not hasattr(summary, "outcome")


@pytest.mark.anyio
async def test_an_answer_acknowledged_cmd_ok_counts_as_answered() -> None:
    """The first cores acknowledge /_service_response with cmdOk, current ones with
    serviceReplyAccepted {user, connectionId} (plans/2026-07-22-service-rpc-chat.md):
    both are an acceptance; the simulator's ack="cmdOk" is the first kind."""
    from simplex_rpc import Request
    from simplex_rpc.testing import CoreSimulator

    async with (
        CoreSimulator(ack="cmdOk") as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        link = (await bob.service_address(1)).link
        ready, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(bob.serve(1, _echo, protocols=["mcp"], ready=ready, stop=stop))
        await ready.wait()
        for n in range(3):
            response = await alice.service_request(1, link, Request(protocol="mcp", request=n))
            assert response.response == "ok"
        stop.set()
        assert await task == ServeOutcome(answered=3)

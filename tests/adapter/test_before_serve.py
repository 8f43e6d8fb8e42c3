"""The I/O edge, issue 21 item 2: nothing is lost before ``serve`` or ``serve_calls`` starts.

The rules pinned (issue 21): "Events that a later ``serve`` or ``serve_calls``
would take must wait for it, for a bounded time. Past that bound, each is
logged at WARNING by its request id and answered if it can be." And: "Events
with a ``corrId`` that match no pending command are logged at WARNING, not
DEBUG." The README's order is ``start(service_requests=True)``,
``service_address()``, then ``serve()``: a request that arrives in between is
the responder's.

The bound is the core's ``event_hold`` (seconds, 10 by default): the tests set
it small where they wait it out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import pytest

from _fixtures import CorePair
from _scripted_core import ScriptedCore, request_event
from _waiting import until
from simplex_rpc import Request, Response
from simplex_rpc.adapter import ChatCore, IncomingCall, ReplySink, ServiceRequest
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.edge

ADAPTER_LOG = "simplex_rpc.adapter"


async def echo(request: ServiceRequest) -> Any:
    return {"echo": request.request.request}


def chat_started(corr_id: str, cmd: str) -> str:
    """The core's answer to /_start: chatStarted (COMMANDS.md, StartChat)."""
    return json.dumps({"corrId": corr_id, "resp": {"type": "chatStarted"}})


async def start_requests(fake: ScriptedCore, core: ChatCore) -> None:
    """The README's first step: start(service_requests=True)."""
    fake.raw["/_start"] = chat_started
    assert await core.start(service_requests=True)


@pytest.mark.anyio
async def test_a_request_between_start_and_serve_is_answered_by_serve() -> None:
    """The README's order: start, service_address, a request arrives, then serve(): the
    handler answers it (it waited for serve, its deadline counting from its arrival)."""

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        assert await bob.start(service_requests=True)
        link = (await bob.service_address(1)).link
        assert await alice.start(service_requests=False)
        asking = asyncio.create_task(
            alice.service_request(1, link, Request(protocol="mcp", request={"n": 1}))
        )
        # the request reached bob, nobody serving yet, and bob's connection has read it
        await until(lambda: sim.stats.delivered >= 1, "the request at bob")
        await until(lambda: len(bob._held_requests) >= 1, "the request held for serve")
        serving = asyncio.create_task(bob.serve(1, echo, protocols=["mcp"]))
        try:
            response = await asyncio.wait_for(asking, 20)
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        assert isinstance(response, Response)
        assert response.response == {"echo": {"n": 1}}


@pytest.mark.anyio
async def test_requests_held_for_serve_keep_their_order_and_are_answered_once(
    scripted_core: ScriptedCore,
) -> None:
    """Ten requests before serve(): each answered once by the handler, none dropped."""

    async with ChatCore.connect(scripted_core.url) as core:
        await start_requests(scripted_core, core)
        for n in range(10):
            await scripted_core.event(request_event(f"early{n}", {"n": n}))
        # read by the core before serve starts
        await until(lambda: len(core._held_requests) >= 10, "ten requests held for serve")
        serving = asyncio.create_task(core.serve(1, echo, protocols=["mcp"]))
        try:
            order = await scripted_core.wait_answers(10)
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        assert order == [f"early{n}" for n in range(10)]
        for n in range(10):
            assert scripted_core.answers[f"early{n}"] == [{"response": {"echo": {"n": n}}}]


@pytest.mark.anyio
async def test_a_request_nobody_serves_is_answered_and_logged_past_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past the bound, a request no serve() took is logged at WARNING by its request id,
    and answered (rate_limited with retryAfter: the requester may repeat it)."""

    async with ScriptedCore() as fake, ChatCore.connect(fake.url, event_hold=0.5) as core:
        await start_requests(fake, core)
        with caplog.at_level(logging.DEBUG, logger=ADAPTER_LOG):
            await fake.event(request_event("orphan-7"))
            await fake.wait_answers(1, within=15)
        (answer,) = fake.answers["orphan-7"]
        assert answer["error"]["code"] == "rate_limited"
        assert answer["error"]["retryAfter"] >= 1
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith(ADAPTER_LOG) and r.levelno == logging.WARNING
    ]
    assert any("orphan-7" in line for line in warnings), warnings


@pytest.mark.anyio
async def test_a_request_given_to_a_chat_core_that_serves_none_is_answered_not_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 28, item 2: the core gives each event to one client (Server.hs: every
    client's ``output`` thread reads the core's one ``outputQ``). A ChatCore that never
    started service requests nor serves (a requester, a monitor on the bot's core) and
    is given a serviceRequest is the only client that will ever see it: it answers it
    rate_limited at once (the requester may retry) and logs a WARNING naming the
    one-client-per-core rule; it does not hold it, nor drop it silently."""

    async with ScriptedCore() as fake, ChatCore.connect(fake.url, event_hold=0.2) as core:
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            await fake.event(request_event("not-mine"))
            (answer,) = [await fake.wait_answers(1)]
        assert answer == ["not-mine"]
        envelope = fake.answers["not-mine"][0]
        assert envelope["error"]["code"] == "rate_limited"
        assert envelope["error"]["retryAfter"] >= 1
        await core.command("/ping")
    (line,) = [r.getMessage() for r in caplog.records if "not-mine" in r.getMessage()]
    assert "serves no requests" in line and "one client per core" in line, line


@pytest.mark.anyio
async def test_a_call_before_serve_calls_is_answered_by_serve_calls(core_pair: CorePair) -> None:
    """serve_calls has the same gap for newChatItems: a /_call that reaches the bot before
    serve_calls starts waits for it, and is answered with a reply quoting it."""

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": "late"})

    sim, alice, bot, direct = core_pair.sim, core_pair.alice, core_pair.bot, core_pair.direct
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    calling = asyncio.create_task(alice.call(f"@{direct}", "mcp", ping, wait=20))
    # the /_call reached the bot, nobody serving yet, and the bot's connection read it
    await until(lambda: sim.stats.messages >= 1, "the /_call at the bot")
    await until(lambda: len(bot._held_calls) >= 1, "the /_call held for serve_calls")
    serving = asyncio.create_task(bot.serve_calls(1, {"mcp": handler}))
    try:
        replies = await calling
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    assert [r.message for r in replies] == [{"jsonrpc": "2.0", "id": 1, "result": "late"}]


@pytest.mark.anyio
async def test_an_answer_to_no_pending_command_is_logged_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A frame with a corrId that matches no pending command: a WARNING naming the corrId."""

    async with ScriptedCore() as fake, ChatCore.connect(fake.url) as core:
        with caplog.at_level(logging.DEBUG, logger=ADAPTER_LOG):
            await fake.send_raw(json.dumps({"corrId": "9999", "resp": {"type": "cmdOk"}}))
            await core.command("/ping")  # ordered after the stray frame on the socket
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith(ADAPTER_LOG) and r.levelno == logging.WARNING
    ]
    assert any("9999" in line for line in warnings), warnings

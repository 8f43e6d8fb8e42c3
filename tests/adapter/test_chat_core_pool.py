"""``ChatCore`` owns the core's connection model (issue 28): a pool of connections.

The chat core (simplex-chat ``apps/simplex-chat/Server.hs``) runs one command at a time
per WebSocket connection (``clientQSize = 1``) and gives each event to one connection
(every client's ``output`` thread reads the core's one ``outputQ``); a
``/_service_request`` holds its connection until the response or the timeout. So:

* a blocking ``/_service_request`` never runs on the connection that carries ``serve``'s
  answers: a bot that calls and serves keeps answering while its calls wait;
* the events of every pooled connection are read as one stream;
* requests in flight are bounded by the pool (``connections - 2``), more wait in order;
* another program on the same core takes events too (one client per core): what it
  takes it answers ``rate_limited`` with a WARNING, never a silent loss;
* the keepalive never closes a connection whose command runs.

All against the simulator, which follows Server.hs
(tests/testing/test_simulator_connection_model.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from _support import Held
from _waiting import until
from simplex_rpc import Request, Response
from simplex_rpc.adapter import ChatCore, ChatCoreTimeout, ServiceRequest, _transports
from simplex_rpc.testing import CoreSimulator

ADAPTER_LOG = "simplex_rpc.adapter"


async def _echo(request: ServiceRequest) -> Any:
    return request.request.request


@contextlib.asynccontextmanager
async def serving(core: ChatCore, handler: Any) -> AsyncIterator[asyncio.Task[Any]]:
    ready = asyncio.Event()
    task = asyncio.create_task(core.serve(1, handler, protocols=["mcp"], ready=ready))
    await ready.wait()
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _request(n: int) -> Request:
    return Request(protocol="mcp", request={"n": n})


@pytest.mark.anyio
async def test_a_bot_that_calls_and_serves_answers_while_32_of_its_calls_wait() -> None:
    """Issue 28, "Done when": serve and 32 concurrent service_requests through one
    ChatCore; every request is answered, and no answer waits behind a call: while all 32
    calls to carol are held by carol, bob answers every one of alice's requests."""

    held = Held({"from": "carol"})
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("carol")) as carol,
        ChatCore.connect(sim.url_for("bob"), connections=34) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        assert await carol.start(service_requests=True)
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        carol_link = (await carol.service_address(1)).link
        bob_link = (await bob.service_address(1)).link
        async with serving(carol, held), serving(bob, _echo):
            calls = [
                asyncio.create_task(bob.service_request(1, carol_link, _request(n)))
                for n in range(32)
            ]
            await until(lambda: sim.stats.delivered >= 32, "all 32 at carol's handler")
            for n in range(20):
                response = await alice.service_request(1, bob_link, _request(n))
                assert response.response == {"n": n}
            assert not any(call.done() for call in calls)  # answered behind no call
            held.release.set()
            responses = await asyncio.gather(*calls)
        assert [r.response for r in responses] == [{"from": "carol"}] * 32
        assert sim.stats.duplicate_responses == 0


@pytest.mark.anyio
async def test_with_one_connection_a_call_holds_the_answers_behind_it() -> None:
    """The rule the pool exists for, shown on a pool of one: a /_service_request holds its
    connection (Server.hs), so bob's answer to alice waits until bob's own call ends."""

    held = Held({"from": "carol"})
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("carol")) as carol,
        ChatCore.connect(sim.url_for("bob"), connections=1) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        for core, on in ((carol, True), (bob, True), (alice, False)):
            assert await core.start(service_requests=on)
        carol_link = (await carol.service_address(1)).link
        bob_link = (await bob.service_address(1)).link
        async with serving(carol, held), serving(bob, _echo):
            call = asyncio.create_task(bob.service_request(1, carol_link, _request(0)))
            await until(lambda: sim.stats.delivered >= 1, "bob's call at carol")
            answer = asyncio.create_task(alice.service_request(1, bob_link, _request(1)))
            # bob has the request, its answer is queued
            await until(lambda: sim.stats.delivered >= 2, "alice's request at bob")
            await asyncio.sleep(0.3)  # the behaviour under test: the answer stays queued
            assert not answer.done()
            held.release.set()
            assert (await answer).response == {"n": 1}
            assert (await call).response == {"from": "carol"}


@pytest.mark.anyio
async def test_events_reach_their_consumer_whichever_pooled_connection_carries_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One ChatCore, several connections to bob's core: the core gives each event to one
    of them; every serviceRequest reaches serve and is answered exactly once."""
    carried: collections.Counter[int] = collections.Counter()
    original = _transports._WebSocketTransport._read

    async def counting_read(self: Any, core: Any) -> None:
        class Counting:
            def _receive(self_, message: str | bytes) -> None:
                if isinstance(message, str) and '"corrId"' not in message:
                    carried[id(self)] += 1
                core._receive(message)

            def __getattr__(self_, name: str) -> Any:
                return getattr(core, name)

        await original(self, Counting())

    monkeypatch.setattr(_transports._WebSocketTransport, "_read", counting_read)

    held = Held({"from": "carol"})
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("carol")) as carol,
        ChatCore.connect(sim.url_for("bob"), connections=6) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=42) as alice,
    ):
        for core, on in ((carol, True), (bob, True), (alice, False)):
            assert await core.start(service_requests=on)
        carol_link = (await carol.service_address(1)).link
        bob_link = (await bob.service_address(1)).link
        async with serving(carol, held), serving(bob, _echo):
            # Four calls open four more connections of bob's, held by carol meanwhile.
            calls = [
                asyncio.create_task(bob.service_request(1, carol_link, _request(n)))
                for n in range(4)
            ]
            await until(lambda: sim.stats.delivered >= 4, "bob's four calls at carol")
            bob_connections = {id(t) for t in bob._transports()}
            assert len(bob_connections) == 6  # commands, answers, four calls
            carried.clear()
            responses = await asyncio.gather(
                *(alice.service_request(1, bob_link, _request(n)) for n in range(40))
            )
            assert [r.response for r in responses] == [{"n": n} for n in range(40)]
            on_bob = {key: n for key, n in carried.items() if key in bob_connections}
            assert sum(on_bob.values()) >= 40
            assert len([n for n in on_bob.values() if n]) >= 2, on_bob
            held.release.set()
            await asyncio.gather(*calls)
        assert sim.stats.duplicate_responses == 0


@pytest.mark.anyio
async def test_two_chat_cores_on_one_core_a_request_the_other_takes_is_answered_not_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 28, item 2: with two clients on bob's core (bob serving, and a monitor that
    serves nothing), the core gives each serviceRequest to one of them. The ones the
    monitor takes are answered rate_limited at once, each with a WARNING naming the
    one-client-per-core rule; every requester gets an answer, none times out."""
    refused: list[Response] = []

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob"), connections=1) as bob,
        ChatCore.connect(sim.url_for("bob"), connections=1) as monitor,
        ChatCore.connect(sim.url_for("alice"), connections=22) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        bob_link = (await bob.service_address(1)).link
        with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
            async with serving(bob, _echo):
                responses: list[Response] = await asyncio.gather(
                    *(
                        alice.service_request(1, bob_link, _request(n), timeout=20)
                        for n in range(20)
                    )
                )
        await monitor.command("/user")
        assert sim.stats.requester_timeouts == 0
        answered = [r for r in responses if r.error is None]
        refused.extend(r for r in responses if r.error is not None)
        assert all(r.error.code == "rate_limited" for r in refused if r.error)
        assert len(answered) + len(refused) == 20
        # The simulator's core hands events to its connections in turn: both got some.
        assert answered and refused
    lines = [r.getMessage() for r in caplog.records if "one client per core" in r.getMessage()]
    # One line each, for the first ten (then at every power of ten: a flood stays short).
    assert len(lines) == min(len(refused), 10), lines


@pytest.mark.anyio
async def test_requests_in_flight_are_bounded_by_the_pool_and_wait_in_order() -> None:
    """connections=4: two lanes (the others carry commands and serve's answers). Five
    held requests: two reach the responder, three wait
    for a lane; each lane is freed by its answer and the next request goes."""

    held = Held("ok")
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=4) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        link = (await bob.service_address(1)).link
        async with serving(bob, held):
            calls = [
                asyncio.create_task(alice.service_request(1, link, _request(n)))
                for n in range(5)
            ]
            await until(lambda: sim.stats.delivered >= 2, "two requests at bob")
            await asyncio.sleep(0.3)  # the behaviour under test: no third one goes
            assert sim.stats.delivered == 2  # the pool's bound: two in flight
            assert alice._lanes is not None and alice._lanes.busy == 2
            held.release.set()
            responses = await asyncio.gather(*calls)
        assert [r.response for r in responses] == ["ok"] * 5
        assert len(alice._transports()) == 3  # alice serves nothing: no answers' connection


@pytest.mark.anyio
async def test_the_keepalive_never_closes_a_connection_whose_command_runs() -> None:
    """The core reads no frame while its queue is full (Server.hs: receive waits while
    rcvQ is full), so a ping is not answered then: a 0.2-second keepalive must not close
    the one connection while its /_service_request waits a second and a half with five
    commands queued behind it (the simulator then answers no ping either)."""

    held = Held("late")
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=1, ping_interval=0.2) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        link = (await bob.service_address(1)).link
        async with serving(bob, held):
            call = asyncio.create_task(alice.service_request(1, link, _request(0)))
            await until(lambda: sim.stats.delivered >= 1, "alice's request at bob")
            queued = [asyncio.create_task(alice.command("/user")) for _ in range(5)]
            await asyncio.sleep(1.5)  # the behaviour under test: busy past 7 keepalives
            held.release.set()
            assert (await call).response == "late"
            for command in queued:
                assert (await command)["type"] == "activeUser"
            await asyncio.sleep(0.5)  # the behaviour under test: idle, pinged, answered
            assert not alice.closed
            assert (await alice.command("/user"))["type"] == "activeUser"


@pytest.mark.anyio
async def test_a_lane_stays_taken_past_the_callers_wait_until_the_core_answers() -> None:
    """A request whose caller stopped waiting still holds its connection at the core
    (Server.hs runs nothing else on it until the response): its lane is not given to the
    next request until the core's late answer comes, so no request queues unseen behind
    it at the core."""

    held = Held("late")
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=2) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        link = (await bob.service_address(1)).link
        async with serving(bob, held):
            cmd = f'/_service_request 1 {link} timeout=30 {{"protocol":"mcp","request":1}}'
            with pytest.raises(ChatCoreTimeout):
                await alice.command(cmd, timeout=0.3)
            assert alice._lanes is not None and alice._lanes.busy == 1
            second = asyncio.create_task(alice.service_request(1, link, _request(2)))
            await asyncio.sleep(0.3)  # the behaviour under test: it waits for the lane
            assert sim.stats.delivered == 1 and not second.done()  # waits for the lane
            held.release.set()
            assert (await second).response == "late"
            assert alice._lanes.busy == 0


@pytest.mark.parametrize("connections", [8, 2])
@pytest.mark.anyio
async def test_serves_answers_never_wait_behind_a_slow_command(connections: int) -> None:
    """Issue 28: "serve answers on connections of their own". The core runs one command at
    a time per connection (Server.hs), so an answer sent on the connection of a command the
    core takes long on (here /_connect, held by the simulator) would wait for
    it. With 3 connections or more the answers have a connection of their own: while bob's
    slow command runs, every one of alice's 20 requests is answered. With 2 (commands and
    answers share the first, the other is for calls) an answer waits behind it."""

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob"), connections=connections) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=22) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        bob_link = (await bob.service_address(1)).link
        # A minute; two seconds where the simulator's close must wait for it.
        sim.set_command_delay(60 if connections >= 3 else 2, "/_connect")
        async with serving(bob, _echo):
            slow = asyncio.create_task(bob.command(f"/_connect 1 plan {bob_link}"))
            # sent: the core holds its connection
            await until(lambda: bob._transport.in_flight >= 1, "the slow command sent")
            calls = [
                asyncio.create_task(alice.service_request(1, bob_link, _request(n)))
                for n in range(20)
            ]
            if connections >= 3:
                responses = await asyncio.gather(*calls)
                assert [r.response for r in responses] == [{"n": n} for n in range(20)]
                assert not slow.done()  # every answer went while the slow command ran
            else:
                done, _ = await asyncio.wait(calls, timeout=0.5)
                assert not done and not slow.done()  # the answers wait behind it
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
            await bob.close()  # the core would hold the slow command a minute more
            await asyncio.gather(slow, return_exceptions=True)

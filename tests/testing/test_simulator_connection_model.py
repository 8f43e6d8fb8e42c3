"""The simulator runs connections as the chat core's WebSocket server does.

Pinned over raw WebSockets (``tests/_raw_core.py``: ``websockets`` alone, no
adapter), each test names the code it follows (simplex-chat/simplex-chat):

* ``apps/simplex-chat/Server.hs`` (commit 00cde8a4): per connection, ``receive``
  queues a parsed command in ``rcvQ`` (``clientQSize = 1``) and answers a frame or a
  command that does not parse itself; ``client`` runs one command at a time
  (``forever $ readTBQueue rcvQ >>= processCommand >>= writeTBQueue sndQ``);
  ``output`` reads the core's one ``outputQ``, so each event goes to one connection;
* ``src/Simplex/Chat/Core.hs`` (commit 00402ac4): ``runSimplexChat`` starts the chat
  unless in maintenance mode (``-m``); ``StartChat`` in
  ``src/Simplex/Chat/Library/Commands.hs`` answers ``CRChatRunning`` on a running
  chat and changes nothing;
* ``/_service_request`` blocks until the response or the timeout
  (``plans/2026-07-22-service-rpc-chat.md``, D1).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from _raw_core import RawCore, raw_core
from _waiting import until
from simplex_rpc.testing import CoreSimulator

REQUEST = json.dumps({"protocol": "mcp", "request": {"n": 1}})


@asynccontextmanager
async def responder(
    sim: CoreSimulator, connections: int = 1
) -> AsyncIterator[tuple[str, list[RawCore]]]:
    """Bob's core started with service requests on and given an address with ratchet keys;
    ``connections`` raw connections to it. Yields bob's short link and the connections."""
    async with AsyncExitStack() as stack:
        bobs = [
            await stack.enter_async_context(raw_core(sim.url_for("bob"), f"bob{i}"))
            for i in range(connections)
        ]
        await bobs[0].ok("/_start main=on service_requests=on", "chatStarted")
        created = await bobs[0].ok("/_address 1 pq_ratchet=on", "userContactLinkCreated")
        yield created["connLinkContact"]["connShortLink"], bobs


async def requester(stack: AsyncExitStack, sim: CoreSimulator, name: str = "alice") -> RawCore:
    core = await stack.enter_async_context(raw_core(sim.url_for("alice"), name))
    resp = await core.cmd("/_start main=on")
    assert resp["type"] in ("chatStarted", "chatRunning")
    return core


def send(core: RawCore, command: str) -> asyncio.Task[dict[str, Any]]:
    return asyncio.create_task(core.cmd(command))


@pytest.mark.anyio
async def test_a_second_command_on_a_connection_waits_for_the_first() -> None:
    """Server.hs: ``client`` runs one command at a time, so a command sent while a
    ``/_service_request`` waits is answered after it; a command the parser refuses is
    answered by ``receive`` (``Left e -> sendError (Just corrId) ...``) and overtakes both."""

    async with CoreSimulator() as sim, responder(sim) as (link, (bob,)), AsyncExitStack() as s:
        alice = await requester(s, sim)
        first = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")  # the first command is in progress
        # Two more frames, in this order: a command, then one the parser refuses.
        await alice.ws.send(json.dumps({"corrId": "second", "cmd": "/user"}))
        await alice.ws.send(json.dumps({"corrId": "third", "cmd": "/_nonsense"}))
        refused = await alice.events.get()  # answers without a waiting cmd() are queued
        assert refused["chatError"]["errorType"]["message"] == "Failed reading: empty"
        # receive read "second" before "third": it waits behind the first command.
        assert not first.done()
        assert [f.get("corrId") for _, f in alice.frames][-1] == "third"
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await first)["type"] == "serviceResponse"
        assert (await alice.events.get())["type"] == "activeUser"
        answers = [f["corrId"] for _, f in alice.frames if "corrId" in f]
        assert answers[-3:] == ["third", "alice-2", "second"]


@pytest.mark.anyio
async def test_a_frame_that_is_not_a_request_is_answered_while_a_command_runs() -> None:
    """Server.hs: ``Nothing -> sendError Nothing Nothing "invalid request"``, from ``receive``."""

    async with CoreSimulator() as sim, responder(sim) as (link, (bob,)), AsyncExitStack() as s:
        alice = await requester(s, sim)
        first = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")
        await alice.ws.send("not json")
        error = await alice.event("chatCmdError")
        assert error["chatError"]["errorType"]["message"] == "invalid request"
        assert not first.done()
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await first)["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_a_blocked_service_request_delays_only_its_own_connection() -> None:
    """A ``/_service_request`` holds its connection until the response; another connection
    of the same core runs its commands meanwhile."""

    async with CoreSimulator() as sim, responder(sim) as (link, (bob,)), AsyncExitStack() as s:
        alice1 = await requester(s, sim, "alice1")
        alice2 = await requester(s, sim, "alice2")
        call = send(alice1, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")
        assert (await alice2.cmd("/user"))["type"] == "activeUser"
        assert not call.done()
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await call)["responseData"] == {"n": 2}


@pytest.mark.anyio
async def test_a_command_delay_holds_its_connection_only() -> None:
    """``set_command_delay``: the core takes that long to process a command, on the
    command's connection; the core's other connections are not held."""

    async with CoreSimulator() as sim, AsyncExitStack() as s:
        slow = await requester(s, sim, "slow")
        other = await requester(s, sim, "other")
        sim.set_command_delay(3600, "/_contacts")
        held = send(slow, "/_contacts 1")
        # two /_start and the delayed /_contacts began
        await until(lambda: sim.stats.commands >= 3, "the delayed /_contacts begun")
        assert (await other.cmd("/user"))["type"] == "activeUser"
        assert not held.done()
        held.cancel()


@pytest.mark.anyio
async def test_each_event_reaches_exactly_one_connection() -> None:
    """Server.hs: every connection's ``output`` reads the core's one ``outputQ``: an event
    goes to whichever connection takes it, never to two."""

    async with CoreSimulator() as sim, AsyncExitStack() as s:
        bobs = [
            await s.enter_async_context(raw_core(sim.url_for("bob"), f"bob{i}")) for i in range(3)
        ]
        count = 60
        for n in range(count):
            await sim.send_event("bob", {"type": "probe", "n": n})
        seen: list[int] = []

        def all_seen() -> bool:
            for bob in bobs:
                while not bob.events.empty():
                    seen.append(bob.events.get_nowait()["n"])
            return len(set(seen)) >= count

        await until(all_seen, f"all {count} events read", within=20)
        assert sorted(seen) == list(range(count))  # each once: no event went to two
        assert sim.waiting_events("bob") == 0
        for bob in bobs:  # nothing more arrives
            assert (await bob.cmd("/user"))["type"] == "activeUser"
            assert bob.events.empty()


@pytest.mark.anyio
async def test_a_service_request_event_goes_to_one_connection_of_the_responder() -> None:
    """With two connections to the responder's core, a ``serviceRequest`` reaches one of
    them; the other does not see it."""

    async with CoreSimulator() as sim, responder(sim, 2) as (link, bobs):
        async with AsyncExitStack() as s:
            alice = await requester(s, sim)
            call = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
            await until(
                lambda: any(not b.events.empty() for b in bobs),
                "the serviceRequest at one of bob's connections",
                within=20,
            )
            taker = next(b for b in bobs if not b.events.empty())
            request = await taker.event("serviceRequest")
            await taker.ok(
                f'/_service_response 1 {request["requestId"]} {{"n":2}}',
                "serviceReplyAccepted",
            )
            assert (await call)["type"] == "serviceResponse"
            # serviceReplySent is an event of bob's core too: one connection gets it.
            seen: list[dict[str, Any]] = [request]

            def both_seen() -> bool:
                for bob in bobs:
                    while not bob.events.empty():
                        seen.append(bob.events.get_nowait())
                return len(seen) >= 2

            await until(both_seen, "serviceReplySent read", within=20)
            for bob in bobs:
                assert (await bob.cmd("/user"))["type"] == "activeUser"
                assert bob.events.empty()
            assert [e["type"] for e in seen] == ["serviceRequest", "serviceReplySent"]


@pytest.mark.anyio
async def test_an_event_a_connection_took_is_lost_when_it_closes() -> None:
    """The event a closed connection took is not given to another connection."""

    async with CoreSimulator() as sim:
        async with raw_core(sim.url_for("bob"), "first") as first:
            await sim.send_event("bob", {"type": "probe", "n": 1})
            assert (await first.event("probe"))["n"] == 1
        async with raw_core(sim.url_for("bob"), "second") as second:
            await sim.send_event("bob", {"type": "probe", "n": 2})
            assert (await second.events.get())["n"] == 2


@pytest.mark.anyio
async def test_events_wait_for_a_reader_and_the_output_queue_is_bounded() -> None:
    """With no client reading, events wait in ``outputQ`` (1,024 by default; here 4), and
    the core's writers wait once it is full: nothing is dropped, and the first client
    to connect reads every event in order."""

    async with CoreSimulator(output_size=4) as sim:
        for n in range(10):
            await sim.send_event("bob", {"type": "probe", "n": n})
        queue = sim._model.core("bob").output.queue
        await until(lambda: queue.qsize() >= 4, "the writer filled the queue")
        assert sim._model.core("bob").output.queue.qsize() == 4  # the bound
        assert sim.waiting_events("bob") == 10
        async with raw_core(sim.url_for("bob"), "bob") as bob:
            got = [(await bob.events.get())["n"] for _ in range(10)]
        assert got == list(range(10))


@pytest.mark.anyio
async def test_start_on_a_running_chat_answers_chat_running_and_changes_nothing() -> None:
    """Core.hs: without ``-m`` the CLI starts the chat itself, service requests off;
    ``/_start ... service_requests=on`` then answers ``chatRunning`` (Commands.hs,
    StartChat) and requests to the address are still dropped."""

    async with CoreSimulator(maintenance=False) as sim, AsyncExitStack() as s:
        bob = await s.enter_async_context(raw_core(sim.url_for("bob"), "bob"))
        assert (await bob.cmd("/_start main=on service_requests=on"))["type"] == "chatRunning"
        created = await bob.ok("/_address 1 pq_ratchet=on", "userContactLinkCreated")
        link = created["connLinkContact"]["connShortLink"]
        alice = await requester(s, sim)
        failed = await alice.cmd(f"/_service_request 1 {link} timeout=1 {REQUEST}")
        service = failed["chatError"]["agentError"]["agentErr"]["serviceError"]
        assert service["type"] == "ASETimeout"
        assert sim.stats.dropped == 1 and sim.stats.delivered == 0


@pytest.mark.anyio
async def test_stop_then_start_turns_service_requests_on() -> None:
    """The second way out of a running chat: ``/_stop`` (``chatStopped``), then
    ``/_start main=on service_requests=on`` (``chatStarted``)."""

    async with CoreSimulator(maintenance=False) as sim, AsyncExitStack() as s:
        bob = await s.enter_async_context(raw_core(sim.url_for("bob"), "bob"))
        created = await bob.ok("/_address 1 pq_ratchet=on", "userContactLinkCreated")
        link = created["connLinkContact"]["connShortLink"]
        await bob.ok("/_stop", "chatStopped")
        await bob.ok("/_start main=on service_requests=on", "chatStarted")
        alice = await requester(s, sim)
        call = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await call)["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_maintenance_mode_starts_with_service_requests_on() -> None:
    """Core.hs: with ``-m`` (``maintenance=True``) ``runSimplexChat`` does not start the
    chat, so the first ``/_start main=on service_requests=on`` starts it with requests on;
    a second ``/_start`` answers ``chatRunning``."""

    async with CoreSimulator(maintenance=True) as sim, AsyncExitStack() as s:
        bob = await s.enter_async_context(raw_core(sim.url_for("bob"), "bob"))
        created = await bob.ok("/_address 1 pq_ratchet=on", "userContactLinkCreated")
        link = created["connLinkContact"]["connShortLink"]
        refused = await bob.cmd('/_service_response 1 x {"n":1}')
        assert refused["chatError"]["errorType"]["type"] == "chatNotStarted"
        await bob.ok("/_start main=on service_requests=on", "chatStarted")
        await bob.ok("/_start main=on service_requests=on", "chatRunning")
        alice = await requester(s, sim)
        call = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await call)["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_a_native_handle_reads_the_same_output_queue() -> None:
    """The native API's ``chat_recv_msg_wait`` reads the core's one ``outputQ`` too: with a
    native handle and a WebSocket connection on one core, each event reaches one of them."""

    async with CoreSimulator() as sim, raw_core(sim.url_for("bob"), "bob") as bob:
        handle = sim.native_handle("bob")
        try:
            count = 40
            for n in range(count):
                await sim.send_event("bob", {"type": "probe", "n": n})
            native: list[int] = []
            remote: list[int] = []
            async with asyncio.timeout(20):
                while len(native) + len(remote) < count:
                    text = await asyncio.to_thread(handle.chat_recv_msg_wait, 10_000)
                    if text:
                        native.append(json.loads(text)["result"]["n"])
                    while not bob.events.empty():
                        remote.append(bob.events.get_nowait()["n"])
            assert sorted(native + remote) == list(range(count))
            assert sim.waiting_events("bob") == 0
        finally:
            await asyncio.to_thread(handle.close)


@pytest.mark.anyio
async def test_service_requests_on_one_connection_run_one_after_the_other() -> None:
    """Two ``/_service_request``s sent at once on one connection: the second starts only
    when the first has its response (Server.hs ``client``; the plan's D1: the command
    blocks)."""

    async with CoreSimulator() as sim, responder(sim) as (link, (bob,)), AsyncExitStack() as s:
        alice = await requester(s, sim)
        first = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
        request = await bob.event("serviceRequest")
        await alice.ws.send(
            json.dumps({"corrId": "second", "cmd": f"/_service_request 1 {link} {REQUEST}"})
        )
        await alice.cmd("/_nonsense")  # answered once "second" was read, and queued
        assert sim.stats.requests == 1  # the second has not started
        await bob.ok(
            f'/_service_response 1 {request["requestId"]} {{"n":1}}', "serviceReplyAccepted"
        )
        assert (await first)["responseData"] == {"n": 1}
        second = await bob.event("serviceRequest")
        assert sim.stats.requests == 2
        await bob.ok(
            f'/_service_response 1 {second["requestId"]} {{"n":2}}', "serviceReplyAccepted"
        )
        assert (await alice.events.get())["responseData"] == {"n": 2}


@pytest.mark.anyio
async def test_a_request_waits_in_the_output_queue_for_a_responder_connection() -> None:
    """A core with service requests on takes a request while no client is connected: its
    ``serviceRequest`` waits in ``outputQ`` for the next connection (Server.hs ``output``)."""

    async with CoreSimulator() as sim:
        async with responder(sim) as (link, _):
            pass  # bob's core is started with service requests on; its client is gone
        async with AsyncExitStack() as s:
            alice = await requester(s, sim)
            call = send(alice, f"/_service_request 1 {link} timeout=30 {REQUEST}")
            await until(lambda: sim.stats.delivered >= 1, "the request delivered", within=20)
            assert sim.waiting_events("bob") == 1
            async with raw_core(sim.url_for("bob"), "bob-again") as bob:
                request = await bob.event("serviceRequest")
                await bob.ok(
                    f'/_service_response 1 {request["requestId"]} {{"n":3}}',
                    "serviceReplyAccepted",
                )
                assert (await call)["responseData"] == {"n": 3}


@pytest.mark.anyio
async def test_closing_the_simulator_does_not_wait_behind_a_held_command(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closing the simulator stops its cores: a connection whose command is held, and whose
    further frames wait unread behind it (Server.hs reads nothing while ``rcvQ`` is full),
    is closed with 1001 (going away) at once. The simulator reads the client's close frame
    through the unread ones, so the closing handshake completes instead of waiting out
    websockets' close timeout; the held command is never answered."""

    caplog.set_level(logging.DEBUG, logger="websockets.server")
    sim = CoreSimulator()
    await sim.start()
    async with raw_core(sim.url_for("bob"), "slow") as slow:
        sim.set_command_delay(3600, "/_contacts")
        held = send(slow, "/_contacts 1")
        await until(lambda: sim.stats.commands >= 1, "the held /_contacts begun")
        for n in range(4):  # rcvQ full, receive waiting, websockets' read-ahead full
            await slow.ws.send(json.dumps({"corrId": f"behind-{n}", "cmd": "/user"}))
        with anyio.fail_after(30):  # a hang guard, not a bound: the close is prompt
            await sim.close()
        await slow.ws.wait_closed()
        assert slow.ws.close_code == 1001
        assert not held.done()
        held.cancel()
    read = [r.getMessage() for r in caplog.records if r.name == "websockets.server"]
    assert "< CLOSE 1001 (going away) [2 bytes]" in read  # the client's close frame, read

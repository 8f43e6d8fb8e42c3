"""A broadcast collects until its wait ends (issue 20, item 2).

The protocol text, "Chat transport", Replies: "A caller collects every reply
until its wait ends, each with its sender, in arrival order. In a group, a
broadcast receives the answers of every member that serves the protocol." And
"Profile declarations": "Other members can serve a protocol in a group without
a declaration, because the core removes preferences from member profiles in
groups." So the owners' declaration does not end a broadcast; a caller who
wants to stop early says so (``until=``, or by leaving ``call_stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from simplex_rpc.adapter import ChatCore, IncomingCall, ReplySink
from simplex_rpc.chat import Reply
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.conformance

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
DECLARED = {"protocols": {"mcp": {"versions": ["2026-07-28"], "transports": {"chat": True}}}}


def answering(name: str, delay: float = 0.0) -> Any:
    async def handler(call: IncomingCall, send: ReplySink) -> str:
        await asyncio.sleep(delay)  # the behaviour under test: a slower answerer
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": name})

    return handler


@contextlib.asynccontextmanager
async def shop() -> AsyncIterator[tuple[ChatCore, str]]:
    """The group of the issue: the owner ``bot`` declares mcp; the member ``carol``
    serves mcp without a declaration and answers after 0.3 s; ``alice`` calls."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
        ChatCore.connect(sim.url_for("carol")) as carol,
    ):
        for core in (alice, bot, carol):
            await core.start(service_requests=False)
        ids = sim.create_group("shop", "bot", ["alice", "carol"], preferences=DECLARED)
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(bot.serve_calls(1, {"mcp": answering("bot")}, ready=ready[0])),
            asyncio.create_task(
                carol.serve_calls(1, {"mcp": answering("carol", 0.3)}, ready=ready[1])
            ),
        ]
        for event in ready:
            await event.wait()
        try:
            yield alice, f"#{ids[('alice', 1)]}"
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


@pytest.mark.anyio
async def test_a_broadcast_collects_every_reply_until_its_wait_ends() -> None:
    """ "A caller collects every reply until its wait ends ... a broadcast receives the
    answers of every member that serves the protocol": the declared owner's answer
    does not end the broadcast; carol, who serves without a declaration, is heard."""

    async with shop() as (alice, group):
        replies = await alice.call(group, "mcp", PING, wait=3)
        assert sorted(r.sender for r in replies) == ["bot", "carol"]
        assert all(r.ends for r in replies)


@pytest.mark.anyio
async def test_a_caller_stops_a_broadcast_early_only_when_it_says_so() -> None:
    """A caller who wants to stop early says so explicitly: ``until`` (a predicate of the
    replies so far) ends the collection at once, long before a wait of 600 s."""

    def both_answered(replies: Sequence[Reply]) -> bool:
        return {r.sender for r in replies if r.ends} >= {"bot", "carol"}

    async with shop() as (alice, group):
        async with asyncio.timeout(60):  # fails clearly if until= is not honoured
            replies = await alice.call(group, "mcp", PING, wait=600, until=both_answered)
        assert sorted(r.sender for r in replies) == ["bot", "carol"]
        async with asyncio.timeout(60):
            stream = alice.call_stream(group, "mcp", PING, wait=600, until=both_answered)
            seen = [r.sender async for r in stream]
        assert sorted(seen) == ["bot", "carol"]
        # Leaving call_stream is the other explicit stop.
        async with asyncio.timeout(60):
            senders = []
            async for reply in alice.call_stream(group, "mcp", PING, wait=600):
                senders.append(reply.sender)
                break
        assert len(senders) == 1 and senders[0] in ("bot", "carol")

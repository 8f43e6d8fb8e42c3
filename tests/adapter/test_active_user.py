"""The chat transport acts as the core's active user only.

simplex-chat ``bots/api/COMMANDS.md``: APISendMessages is ``/_send <chatRef>
json [ComposedMessage]`` and APIListMembers ``/_members #<groupId>``; neither
names a user, so the core resolves the chat among its active user's chats
(ShowActiveUser, ``/user``) and sends as that user. ``serve_calls`` and
``call`` refuse any other user before anything is sent, and the simulator's
``/_send`` and ``/_members`` act for the active user only, as the core does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from simplex_rpc.adapter import CallRefused, ChatCore, IncomingCall, ReplySink
from simplex_rpc.errors import ChatCoreError, SimplexRpcError
from simplex_rpc.testing import CoreSimulator

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
TEXT = json.dumps([{"msgContent": {"type": "text", "text": "hello"}}])


async def _answer(call: IncomingCall, send: ReplySink) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {}})


@contextlib.asynccontextmanager
async def two_users() -> AsyncIterator[tuple[CoreSimulator, ChatCore, ChatCore]]:
    """Cores ``alice`` and ``bot``, each with users 1 (active) and 2; both started."""
    async with (
        CoreSimulator(users=(1, 2)) as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        for core in (alice, bot):
            await core.start(service_requests=False)
        yield sim, alice, bot


@pytest.mark.anyio
async def test_the_simulator_sends_in_a_chat_of_the_active_user_only() -> None:
    """APISendMessages names no user: a contact of user 2 is not found while user 1 is
    active (contactNotFound, as the core answers), and nothing is sent."""

    async with two_users() as (sim, _alice, bot):
        _, bot_contact = sim.connect("alice", ("bot", 2))
        with pytest.raises(ChatCoreError, match="contactNotFound"):
            await bot.command(f"/_send @{bot_contact} json {TEXT}")
        assert sim.stats.messages == 0
        resp = await bot.command("/user")
        assert resp["user"]["userId"] == 1


@pytest.mark.anyio
async def test_the_simulator_lists_members_of_a_group_of_the_active_user_only() -> None:
    """APIListMembers names no user: a group of user 2 is not found while user 1 is active."""

    async with two_users() as (sim, alice, bot):
        ids = sim.create_group("team", ("bot", 2), ["alice"])
        with pytest.raises(ChatCoreError, match="groupNotFound"):
            await bot.command(f"/_members #{ids[('bot', 2)]}")
        members = await alice.command(f"/_members #{ids[('alice', 1)]}")
        assert members["type"] == "groupMembers"


@pytest.mark.anyio
async def test_serve_calls_for_a_user_that_is_not_active_is_refused_before_it_serves() -> None:
    """serve_calls(user_id) answers as the active user (its replies are /_send): another
    user is refused with the library's error naming user_id, and nothing is declared."""

    async with two_users() as (sim, _alice, bot):
        before = sim.profile(("bot", 2))
        with pytest.raises(SimplexRpcError, match=r"user_id: user 2 is not .*active user \(1\)"):
            await bot.serve_calls(
                2, {"mcp": _answer}, declare=True, versions={"mcp": ["2026-07-28"]}
            )
        assert sim.profile(("bot", 2)) == before
        assert bot._subscribers == set()


@pytest.mark.anyio
async def test_a_call_as_a_user_that_is_not_active_is_refused_before_anything_is_sent() -> None:
    """call(user_id=2) on a core whose active user is 1 would send as user 1 and wait for
    replies to user 2 in vain: refused with CallRefused, and no message goes out."""

    async with two_users() as (sim, alice, _bot):
        direct, _ = sim.connect("alice", "bot")
        with pytest.raises(CallRefused, match=r"user_id: user 2 is not .*active user"):
            await alice.call(f"@{direct}", "mcp", PING, wait=5, user_id=2)
        assert sim.stats.messages == 0


@pytest.mark.anyio
async def test_a_call_as_the_active_user_named_explicitly_is_answered() -> None:
    """user_id equal to the active user is the same as the default."""

    async with two_users() as (sim, alice, bot):
        direct, _ = sim.connect("alice", "bot")
        ready = asyncio.Event()
        task = asyncio.create_task(bot.serve_calls(1, {"mcp": _answer}, ready=ready))
        await ready.wait()
        try:
            replies = await alice.call(f"@{direct}", "mcp", PING, wait=30, user_id=1)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert [r.message for r in replies] == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


@pytest.mark.anyio
async def test_a_call_the_core_sent_as_another_user_is_a_core_error() -> None:
    """Should the active user change between /user and /_send, the core sends as the
    new one: the call says so instead of waiting for replies that cannot come."""

    async with two_users() as (sim, alice, _bot):
        direct, _ = sim.connect("alice", "bot")
        command = alice.command

        async def switched(cmd: str, **options: Any) -> dict[str, Any]:
            resp = await command(cmd, **options)
            if cmd == "/user":
                resp = {**resp, "user": {**resp["user"], "userId": 2}}
            return resp

        alice.command = switched  # type: ignore[method-assign]
        with pytest.raises(ChatCoreError, match="sent the /_call as user 1, not user 2"):
            await alice.call(f"@{direct}", "mcp", PING, wait=5)

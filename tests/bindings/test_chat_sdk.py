"""The real SDKs over ``/_call`` in a simulated group of three cores.

``mcpbot`` serves the ``mcp`` SDK server of examples/mcp_two_tools.py through
``McpBridge``; ``a2abot`` serves an a2a-sdk agent through ``A2aBridge``;
``alice`` calls both in the group ``team``, with mentions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("mcp.server")
pytest.importorskip("a2a.server")

from _a2a import MESSAGE, make_bot
from _mcp import two_tools
from simplex_rpc import a2a, chat, mcp
from simplex_rpc.adapter import ChatCore
from simplex_rpc.mcp import McpBridge
from simplex_rpc.testing import CoreSimulator


@contextlib.asynccontextmanager
async def team() -> AsyncIterator[tuple[CoreSimulator, dict[str, ChatCore], int]]:
    """Three cores in one group; the bots serving; alice's id of the group."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("mcpbot")) as mcpbot,
        ChatCore.connect(sim.url_for("a2abot")) as a2abot,
    ):
        cores = {"alice": alice, "mcpbot": mcpbot, "a2abot": a2abot}
        for core in cores.values():
            await core.start(service_requests=False)
        ids = sim.create_group("team", "alice", ["mcpbot", "a2abot"])
        async with McpBridge(two_tools.build_server()) as bridge:
            ready = [asyncio.Event(), asyncio.Event()]
            tasks = [
                asyncio.create_task(mcpbot.serve_calls(1, {"mcp": bridge}, ready=ready[0])),
                asyncio.create_task(
                    a2abot.serve_calls(1, {"a2a": make_bot().bridge}, ready=ready[1])
                ),
            ]
            for event in ready:
                await event.wait()
            try:
                yield sim, cores, ids[("alice", 1)]
            finally:
                for task in tasks:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task


@pytest.mark.anyio
async def test_mcp_sdk_server_answers_with_a_progress_notification_then_the_result() -> None:
    """MCP binding: notifications for the request before the response, each a quoting
    reply; the response ends the answer."""

    async with team() as (_, cores, group):
        request = mcp.make_request(
            "tools/call",
            {"name": "catalog", "arguments": {"lines": 2}, "_meta": {"progressToken": "p"}},
            id=3,
        )
        replies = await cores["alice"].call(f"#{group}", "mcp", request, member="mcpbot", wait=20)
        assert [r.sender for r in replies] == ["mcpbot", "mcpbot"]
        note, answer = (r.message for r in replies)
        assert note is not None and note["method"] == "notifications/progress"
        assert answer is not None and answer["id"] == 3 and "result" in answer
        assert replies[-1].ends and not replies[0].ends


@pytest.mark.anyio
async def test_a2a_streaming_message_ends_at_the_terminal_state() -> None:
    """A2A binding: each StreamResponse is one quoting reply, in stream order; the stream
    ends with the reply whose task is in a terminal state."""

    async with team() as (_, cores, group):
        request = a2a.make_request("SendStreamingMessage", {"message": MESSAGE}, id=5)
        seen = [
            r
            async for r in cores["alice"].call_stream(
                f"#{group}", "a2a", request, member="a2abot", wait=20
            )
        ]
        assert seen and all(r.sender == "a2abot" and r.message for r in seen)
        assert [r.ends for r in seen] == [False] * (len(seen) - 1) + [True]
        last = seen[-1].message
        assert last is not None and last["id"] == 5
        update = last["result"].get("statusUpdate") or last["result"].get("task")
        assert update["status"]["state"] == "TASK_STATE_COMPLETED"
        assert update["status"]["state"] in chat.A2A_TERMINAL_STATES


@pytest.mark.anyio
async def test_a2a_tasks_are_scoped_to_the_member_that_created_them() -> None:
    """A context and its tasks are available only to their caller: in a group, to the
    member who created them; another member's GetTask is an unknown task."""

    async with team() as (_, cores, group):
        send = a2a.make_request("SendMessage", {"message": MESSAGE}, id=1)
        (reply,) = await cores["alice"].call(f"#{group}", "a2a", send, member="a2abot", wait=20)
        assert reply.message is not None
        task_id = reply.message["result"]["task"]["id"]
        get = a2a.make_request("GetTask", {"id": task_id}, id=2)
        (own,) = await cores["alice"].call(f"#{group}", "a2a", get, member="a2abot", wait=20)
        assert own.message is not None and own.message["result"]["id"] == task_id
        groups: list[dict[str, Any]] = (await cores["mcpbot"].command("/_groups 1"))["groups"]
        mcpbot_group = groups[0]["groupId"]
        (other,) = await cores["mcpbot"].call(
            f"#{mcpbot_group}", "a2a", get, member="a2abot", wait=20
        )
        assert other.message is not None and other.message["error"]["code"] == -32001
        assert json.dumps(task_id) not in json.dumps(other.message.get("result", {}))

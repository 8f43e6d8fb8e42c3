"""``serve_calls`` under the faults issue 14 found in ``serve`` (the chat transport side).

Rules pinned (protocol text, "Chat transport"): each command is answered exactly
once; a failing handler gets the binding's internal error (-32603). A handler
that raises ``CancelledError`` itself is such a failure; the connection's loss
ends ``serve_calls`` at once.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from _chat import PING, World, serving, world
from _waiting import until
from simplex_rpc.adapter import ChatCoreClosed, IncomingCall
from simplex_rpc.adapter._chat import ReplySink


@pytest.mark.anyio
async def test_a_handler_raising_cancelled_error_gets_the_internal_error() -> None:
    """Problem 3 of issue 14, over /_call: a handler that awaited a future someone else
    cancelled is answered -32603, and the bot goes on answering."""
    calls = 0

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            future.cancel()
            return await future
        return '{"jsonrpc":"2.0","id":1,"result":{}}'

    async with world() as w, serving(w.bot, {"mcp": handler}):
        (first,) = await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
        assert first.message is not None and first.message["error"]["code"] == -32603
        (second,) = await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
        assert second.message is not None and second.message["result"] == {}


@pytest.mark.anyio
async def test_serve_calls_ends_at_once_when_the_connection_is_lost(world: World) -> None:
    """Problem 4 of issue 14, over /_call: the lost connection ends serve_calls with
    ChatCoreClosed at once, while a handler holds the only slot and more commands wait."""

    started, never = asyncio.Event(), asyncio.Event()

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        started.set()
        await never.wait()
        return ""

    ready = asyncio.Event()
    task = asyncio.create_task(
        world.bot.serve_calls(1, {"mcp": handler}, concurrency=1, ready=ready)
    )
    await ready.wait()
    callers = [
        asyncio.create_task(world.alice.call(f"@{world.direct}", "mcp", PING, wait=30))
        for _ in range(3)
    ]
    await started.wait()
    # the other commands reach the bot and wait for the slot
    await until(lambda: world.sim.stats.messages >= 3, "the three calls at the bot")
    assert await world.sim.drop_connections("bot") == 1
    with pytest.raises(ChatCoreClosed):
        async with asyncio.timeout(10):  # generous: the rule is "at once"
            await task
    for caller in callers:
        caller.cancel()
    await asyncio.gather(*callers, return_exceptions=True)


@pytest.mark.anyio
async def test_serve_calls_ends_after_a_lost_connection_even_if_a_handler_ignores_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The lost connection ends serve_calls soon, whatever runs: a handler that swallows
    its cancellation cannot hold it, and is named in one line."""
    released, entered = asyncio.Event(), asyncio.Event()

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        entered.set()
        while not released.is_set():
            try:
                await asyncio.sleep(0.05)  # the behaviour under test: cancellation swallowed
            except asyncio.CancelledError:
                continue
        return ""

    with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
        async with world() as w:
            ready = asyncio.Event()
            task = asyncio.create_task(w.bot.serve_calls(1, {"mcp": handler}, ready=ready))
            await ready.wait()
            caller = asyncio.create_task(w.alice.call(f"@{w.direct}", "mcp", PING, wait=30))
            try:
                await until(entered.is_set, "the command at the bot's handler")
                assert await w.sim.drop_connections("bot") == 1
                await asyncio.wait({task}, timeout=15)  # generous: the rule is "at once"
                assert task.done(), "serve_calls still runs 15 s after the connection closed"
                with pytest.raises(ChatCoreClosed):
                    await task
            finally:
                released.set()
                caller.cancel()
                await asyncio.gather(caller, return_exceptions=True)
    assert any("ignored their cancellation" in r.getMessage() for r in caplog.records)

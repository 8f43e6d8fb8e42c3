"""The chat tests' shared pieces: a ping, a world of two cores, a core serving calls.

No tests here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from simplex_rpc.adapter import ChatCore
from simplex_rpc.testing import CoreSimulator

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@contextlib.asynccontextmanager
async def world() -> AsyncIterator[World]:
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
        ChatCore.connect(sim.url_for("carol")) as carol,
    ):
        for core in (alice, bot, carol):
            await core.start(service_requests=False)
        direct, _ = sim.connect("alice", "bot")
        ids = sim.create_group("team", "alice", ["bot", "carol"])
        raw = alice.events()
        try:
            yield World(sim, alice, bot, carol, direct, ids[("alice", 1)], raw)
        finally:
            raw.close()


@contextlib.asynccontextmanager
async def serving(core: ChatCore, handlers: dict[str, Any], **options: Any) -> AsyncIterator[None]:
    ready = asyncio.Event()
    task = asyncio.create_task(core.serve_calls(1, handlers, ready=ready, **options))
    await ready.wait()  # the bot serves
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class World:
    sim: CoreSimulator
    alice: ChatCore
    bot: ChatCore
    carol: ChatCore
    direct: int  # alice's contact id of bot
    group: int  # alice's id of the group (alice owner; bot, carol members)
    raw: Any  # alice's event stream

"""A client of the chat core's WebSocket API written with ``websockets`` alone.

It sends ``{"corrId", "cmd"}``, matches each ``{"corrId", "resp"}`` to its
command, queues each event (a frame without ``corrId``), and keeps every frame
it received, decoded, in ``frames``, so a test can check all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class RawCore:
    """One WebSocket connection to a (simulated) chat core."""

    def __init__(self, ws: ClientConnection, name: str, frames: list[tuple[str, Any]]) -> None:
        self.ws = ws
        self.name = name
        self.frames = frames
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(Exception):
            async for text in self.ws:
                frame = json.loads(text)
                self.frames.append((self.name, frame))
                corr = frame.get("corrId") if isinstance(frame, dict) else None
                if corr is not None and corr in self._waiting:
                    self._waiting.pop(corr).set_result(frame["resp"])
                else:
                    await self.events.put(frame["resp"])

    async def cmd(self, command: str) -> dict[str, Any]:
        """Send ``command``; return its ``resp``."""
        self._next += 1
        corr = f"{self.name}-{self._next}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[corr] = future
        await self.ws.send(json.dumps({"corrId": corr, "cmd": command}))
        return await asyncio.wait_for(future, 20)

    async def ok(self, command: str, expected: str) -> dict[str, Any]:
        """Send ``command``; return its ``resp``, which must be of type ``expected``."""
        resp = await self.cmd(command)
        assert resp["type"] == expected, (command, resp)
        return resp

    async def event(self, kind: str, timeout: float = 20) -> dict[str, Any]:
        """The next event of type ``kind`` (earlier events of other types are dropped)."""
        async with asyncio.timeout(timeout):
            while True:
                event = await self.events.get()
                if event["type"] == kind:
                    return event

    async def events_until(self, kind: str, timeout: float = 20) -> list[dict[str, Any]]:
        """Every event up to and including the next one of type ``kind``."""
        seen = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self.events.get()
                seen.append(event)
                if event["type"] == kind:
                    return seen

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def raw_core(
    url: str, name: str, frames: list[tuple[str, Any]] | None = None
) -> AsyncIterator[RawCore]:
    """A :class:`RawCore` on ``url``; ``frames`` collects what it receives (shared or its own)."""
    async with connect(url, max_size=None) as ws:
        core = RawCore(ws, name, frames if frames is not None else [])
        try:
            yield core
        finally:
            await core.close()


__all__ = ["RawCore", "raw_core"]

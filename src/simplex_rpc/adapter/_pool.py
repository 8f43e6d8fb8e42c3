"""The connections a blocking ``/_service_request`` runs on: one request at a time each.

The chat core runs one command at a time per connection: ``apps/simplex-chat/Server.hs``
(simplex-chat) gives each WebSocket client a ``client`` thread, ``forever $ readTBQueue
rcvQ >>= processCommand >>= writeTBQueue sndQ``, with ``clientQSize = 1``. A
``/_service_request`` holds its connection until the response or the timeout (30 s by
default). So :class:`ChatCore <simplex_rpc.adapter.ChatCore>` never sends one on the
connection its other commands use, nor on the one ``serve``'s answers use: each runs on
a lane of its own, opened when first needed, at most ``size`` of them; a request finds a
free lane or waits, in order, for one.

A lane is free again only when the core has answered its request, not when the
caller stopped waiting (the core may still be working on it: a request sent behind
it would wait for it). Every lane's events are read with the others' (the core gives
each event to one connection, whichever takes it), so closing one would lose what
it took: lanes stay open until the core is closed, or until a request the core never
answers has held one past its own timeout and a margin (:meth:`_Lanes.retire`: the lane is
dropped, and another opened in its place when a request needs one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

from ._errors import ChatCoreClosed
from ._transports import _Transport

#: Blocking commands: each holds its connection until the core answers it (Server.hs).
BLOCKING_COMMANDS: Final = frozenset({"/_service_request"})


class _Lanes:
    """At most ``size`` connections for blocking commands, opened by ``open_lane``."""

    def __init__(self, open_lane: Callable[[], Awaitable[_Transport]], size: int) -> None:
        if size < 1:
            raise ValueError("size: expected a positive number of connections")
        self._open_lane = open_lane
        self.size = size
        self.lanes: list[_Transport] = []
        self._free: deque[_Transport] = deque()
        self._waiters: deque[asyncio.Future[_Transport]] = deque()
        self._opening = 0
        self._failure: ChatCoreClosed | None = None
        self._replacing: set[asyncio.Task[None]] = set()

    @property
    def busy(self) -> int:
        """Lanes whose command has not been answered yet."""
        return len(self.lanes) - len(self._free)

    async def take(self) -> _Transport:
        """A lane for one blocking command: a free one, a new one while fewer than
        ``size`` are open, else the next one freed (requests wait in order)."""
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        if self._free:
            return self._free.popleft()
        if len(self.lanes) + self._opening < self.size:
            self._opening += 1
            try:
                lane = await self._open_lane()
            finally:
                self._opening -= 1
            self.lanes.append(lane)
            return lane
        waiter: asyncio.Future[_Transport] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.give_back(waiter.result())  # handed over as the caller was cancelled
            else:
                waiter.cancel()
            raise

    def give_back(self, lane: _Transport) -> None:
        """``lane``'s command was answered (or never sent): the next waiter takes it."""
        if lane not in self.lanes or self._failure is not None:
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(lane)
                return
        self._free.append(lane)

    def retire(self, lane: _Transport) -> None:
        """``lane`` is dropped (its command was never answered): it is no lane any more, and
        the oldest waiter, if any, gets a new one opened in its place."""
        if lane not in self.lanes:
            return
        self.lanes.remove(lane)
        with contextlib.suppress(ValueError):
            self._free.remove(lane)
        if self._waiters and self._failure is None:
            task = asyncio.create_task(self._replace(), name="simplex-rpc-lane-replace")
            self._replacing.add(task)
            task.add_done_callback(self._replacing.discard)

    async def _replace(self) -> None:
        self._opening += 1
        try:
            lane = await self._open_lane()
        except ChatCoreClosed as exc:
            # The oldest waiter learns it; the others wait for a lane given back.
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(ChatCoreClosed(str(exc)))
                    return
            return
        finally:
            self._opening -= 1
        self.lanes.append(lane)
        self.give_back(lane)

    def lost(self, failure: ChatCoreClosed) -> None:
        """The core is gone: every waiter fails."""
        self._failure = failure
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ChatCoreClosed(str(failure)))
        self._free.clear()
        for task in self._replacing:
            task.cancel()

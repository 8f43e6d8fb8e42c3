"""One reconnecting keeper: a connection held, and made again after its loss, with backoff.

Both bindings keep a connection that may go away: the MCP proxy its SDK client
to the bot (through a chat core), the MCP gateway its SDK client to the
upstream server (a child process or a URL). This module is the one loop that
keeps such a connection, written in two halves, h11's way:

* :class:`Backoff` (:mod:`simplex_rpc._backoff`, which needs no anyio), the policy,
  with no clock and no I/O: told how long an
  attempt lasted, it says how long to wait before the next (``first``, then
  doubled up to ``cap``; a connection that held ``stable_after`` seconds starts
  the sequence again), or ``None`` once stopped;
* :class:`Keeper`, a small anyio driver: it makes the connection (an async
  context manager from ``open``), holds it until it ends (``held``) or is
  dropped on purpose (:meth:`Keeper.drop`, made again at once), asks the policy
  how long to wait, and tries again: after that wait, or, with ``on_demand``,
  when the next user asks (:meth:`Keeper.settle`) once the wait is over (a user
  who asks before is answered at once that there is no connection).

The keeper knows nothing of what it keeps: what a connection is, how its end
is noticed and what is logged are the user's, through ``held`` and the
``on_attempt``, ``on_up`` and ``on_down`` callbacks.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
import anyio.abc

from ._backoff import Backoff

__all__ = ["Backoff", "Ended", "Keeper"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Ended(Generic[_T]):
    """How one attempt ended, for the keeper's user (``on_down``)."""

    value: _T | None
    """The connection the attempt made, or ``None`` when it was not made."""
    error: Exception | None
    """What the attempt raised: the connection could not be made, or failed on its way."""
    timed_out: bool
    """The connection was not made within the keeper's ``attempt_timeout``."""
    dropped: bool
    """Ended on purpose (:meth:`Keeper.drop`): made again at once, not counted as a failure."""
    delay: float | None
    """Seconds before the next attempt (with ``on_demand``: before a user may ask for it);
    ``None`` when the keeper stops."""


async def _forever(_value: object) -> None:
    await anyio.sleep_forever()


def _ignore(_value: object) -> None:
    pass


class Keeper(Generic[_T]):
    """The anyio driver of :class:`Backoff`: holds what ``open`` makes, and makes it again.

    :meth:`run` (in a task of the user's task group) makes attempts, one at a
    time, until :meth:`stop` or cancellation. An attempt enters ``open()``; the
    connection is made once the context is entered (within ``attempt_timeout``
    seconds, else the attempt is cut), and held while ``held(value)`` runs
    (by default, until :meth:`drop`). When it ends, the policy says how long to
    wait; without ``on_demand`` the next attempt follows that wait, with it the
    next attempt waits for a user's :meth:`settle` after that wait.
    ``on_attempt(n)`` is called as the n-th attempt (from 1) begins,
    ``on_up(value)`` once it is made, ``on_down(ended)`` once it has ended.
    """

    def __init__(
        self,
        open: Callable[[], AbstractAsyncContextManager[_T]],
        *,
        backoff: Backoff | None = None,
        held: Callable[[_T], Awaitable[object]] = _forever,
        attempt_timeout: float = math.inf,
        on_demand: bool = False,
        on_attempt: Callable[[int], object] = _ignore,
        on_up: Callable[[_T], object] = _ignore,
        on_down: Callable[[Ended[_T]], object] = _ignore,
    ) -> None:
        self.backoff = backoff if backoff is not None else Backoff()
        self._open, self._held, self._on_demand = open, held, on_demand
        self._attempt_timeout = attempt_timeout
        # What the user hears of: an attempt begins, its connection is made, it ended.
        self._on_attempt, self._on_up, self._on_down = on_attempt, on_up, on_down
        self.current: _T | None = None
        """The connection while it is held, else ``None``."""
        self.attempts = 0
        self._settled = anyio.Event()
        self._wanted = anyio.Event()
        self._resume = -math.inf  # when the wait after the last attempt is over
        self._stopping = anyio.Event()
        self._hold: anyio.CancelScope | None = None

    def __repr__(self) -> str:
        state = "up" if self.current is not None else "down"
        return f"Keeper({state}, attempts={self.attempts}, {self.backoff!r})"

    @property
    def settled(self) -> bool:
        """Whether no attempt is under way or asked for (the connection is up, or waiting)."""
        return self._settled.is_set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep the connection until :meth:`stop` (or cancellation); ``task_status`` is
        started once the first attempt has ended one way or the other."""
        started = False
        while not self.backoff.stopped:
            if self._settled.is_set():
                self._settled = anyio.Event()
            self.attempts += 1
            self._on_attempt(self.attempts)
            began = anyio.current_time()
            error: Exception | None = None
            timed_out = dropped = False
            value: _T | None = None
            try:
                # The attempt (making the connection) is bounded; a held connection is not.
                with anyio.CancelScope(deadline=began + self._attempt_timeout) as attempt:
                    async with self._open() as value:
                        attempt.deadline = math.inf
                        self.current = value
                        self._on_up(value)
                        self._settled.set()
                        if not started:
                            started = True
                            task_status.started()
                        with anyio.CancelScope() as hold:
                            self._hold = hold
                            if not self._stopping.is_set():
                                await self._held(value)
                        dropped = hold.cancelled_caught
                        self._hold = None
                timed_out = attempt.cancelled_caught
            except Exception as exc:
                error = exc
            finally:
                self.current = None
                self._hold = None
            if dropped and not self.backoff.stopped:
                self.backoff.reset()
                delay: float | None = 0.0
            else:
                delay = self.backoff.ended(anyio.current_time() - began)
            self._on_down(Ended(value, error, timed_out, dropped, delay))
            if delay is None:
                break
            if dropped:
                continue  # at once; whoever dropped it waits for this next attempt
            self._resume = anyio.current_time() + delay
            if self._on_demand:
                self._wanted = anyio.Event()
            self._settled.set()
            if not started:
                started = True
                task_status.started()
            if self._on_demand:
                await self._until(self._wanted)  # asked for only once the wait is over
            else:
                await self._until(None, self._resume - anyio.current_time())
        self._settled.set()
        if not started:
            task_status.started()

    async def _until(self, event: anyio.Event | None, seconds: float = math.inf) -> None:
        """Wait for ``event`` (or ``seconds``), or until the keeper stops."""
        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as tg:

                async def stopping() -> None:
                    await self._stopping.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stopping)
                if event is not None:
                    await event.wait()
                else:
                    await anyio.sleep_forever()
                tg.cancel_scope.cancel()

    async def settle(self) -> _T | None:
        """The connection once the attempt under way (or asked for) has ended: ``None``
        when it was not made. With ``on_demand``, a keeper whose wait after a failure is
        over is asked for its next attempt, which this waits for; while the wait lasts
        the answer is ``None`` at once (a burst of users is not a burst of attempts)."""
        if self.current is None and self._settled.is_set() and self._on_demand:
            over = anyio.current_time() >= self._resume
            if over and not self._wanted.is_set() and not self.backoff.stopped:
                self._settled = anyio.Event()
                self._wanted.set()
        await self._settled.wait()
        return self.current

    def drop(self) -> None:
        """End the held connection on purpose (it went stale): it is made again at once,
        and :meth:`settle` waits for that attempt."""
        if self._hold is not None and not self._hold.cancel_called:
            self._settled = anyio.Event()
            self._hold.cancel()

    def stop(self) -> None:
        """End the held connection, if any, and make no more attempts: :meth:`run` returns."""
        self.backoff.stop()
        self._stopping.set()
        if self._hold is not None:
            self._hold.cancel()

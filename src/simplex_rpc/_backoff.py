"""The reconnecting keeper's policy: when to try again, with no clock, no I/O and no anyio.

:class:`Backoff` is the half of the one reconnecting keeper (:mod:`simplex_rpc._keeper`)
that decides; the keeper's anyio driver acts on it. It lives apart so that what needs
only the decision (``simplex-rpc serve``, reconnecting to the chat core on asyncio)
imports nothing a plain install does not have: anyio comes with the SDK extras.
"""

from __future__ import annotations

import math
from typing import Final

from .errors import SimplexRpcError

__all__ = ["Backoff"]

BACKOFF_FIRST: Final = 0.5
"""Seconds before the first attempt after a loss."""
BACKOFF_CAP: Final = 30.0
"""The longest wait between two attempts."""
BACKOFF_FACTOR: Final = 2.0
"""Each wait in a row is this many times the one before (until the cap)."""
STABLE_AFTER: Final = 10.0
"""An attempt that lasted this long (a connection that held) resets the waits to ``first``."""

def _seconds(value: object, name: str, *, zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SimplexRpcError(f"Backoff: {name} must be a number of seconds")
    if value < 0 or (value == 0 and not zero) or value == math.inf:
        raise SimplexRpcError(f"Backoff: {name} must be a positive, finite number of seconds")
    return float(value)


class Backoff:
    """When to try again after a connection ended or could not be made; no clock, no I/O.

    :meth:`ended` is told how long the attempt lasted (from its start to its end,
    the time held included) and answers the seconds to wait before the next one:
    ``first``, then ``factor`` times the wait before, never more than ``cap``.
    An attempt that lasted at least ``stable_after`` seconds was a connection
    that held: the waits start again at ``first``, as after :meth:`reset`.
    After :meth:`stop` there is no next attempt: :meth:`ended` answers ``None``.
    """

    def __init__(
        self,
        *,
        first: float = BACKOFF_FIRST,
        cap: float = BACKOFF_CAP,
        factor: float = BACKOFF_FACTOR,
        stable_after: float = STABLE_AFTER,
    ) -> None:
        self.first = _seconds(first, "first", zero=True)
        self.cap = _seconds(cap, "cap", zero=True)
        if self.cap < self.first:
            raise SimplexRpcError("Backoff: cap must be at least first")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1:
            raise SimplexRpcError("Backoff: factor must be a number of at least 1")
        if factor == math.inf:
            raise SimplexRpcError("Backoff: factor must be finite")
        self.factor = float(factor)
        self.stable_after = _seconds(stable_after, "stable_after")
        self._next = self.first
        self._stopped = False

    def __repr__(self) -> str:
        return (
            f"Backoff(first={self.first:g}, cap={self.cap:g}, factor={self.factor:g},"
            f" stable_after={self.stable_after:g}, next={self._next:g})"
        )

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called: no attempt follows."""
        return self._stopped

    def ended(self, lasted: float) -> float | None:
        """An attempt ended after ``lasted`` seconds: the seconds to wait before the next
        (``None`` after :meth:`stop`)."""
        if self._stopped:
            return None
        if lasted >= self.stable_after:
            self._next = self.first
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return delay

    def reset(self) -> None:
        """The next wait is ``first`` again (a connection ended on purpose, not a failure)."""
        self._next = self.first

    def stop(self) -> None:
        """No more attempts."""
        self._stopped = True

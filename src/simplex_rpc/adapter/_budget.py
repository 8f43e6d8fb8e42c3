"""Budgets: token buckets per signer, for all requests, and for unsigned requests.

Keys are cheap to make, so a per-signer limit alone is weak. The badge service
(simplex-chat ``plans/2026-07-20-supporter-badges-v2-implementation.md``)
keeps a bucket per signer that counts failures, one global bucket for
failures, and one for unsigned calls, and answers ``retryAfter``: the seconds
to the next token. :class:`RateLimit` describes one bucket (or one per
signer); :class:`Budget` holds the buckets of a sequence of them, with an
injected clock and no I/O (h11's way): the responder asks :meth:`Budget.check`
before a request runs and tells :meth:`Budget.settle` how it ended.

The rules:

* every limit that applies must have a token, or the request is refused and
  takes none (a refused flood does not drain the other buckets);
* ``retryAfter`` is the seconds until the request would pass them all: the
  longest of their waits for a token, rounded up to whole seconds;
* a ``failures_only`` limit is checked the same way, but a request takes its
  token only when its answer is an error (:meth:`Budget.settle`). Requests
  in flight together can each pass the check and then each fail: the bucket
  goes below zero, and the wait grows by each failure's token. A request
  refused by the budget itself is not counted as a failure (a flood refused
  by a signer's bucket would otherwise empty a global one for everyone).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Final, Literal

from .._wire.envelope import MAX_UINT32
from .._wire.keys import PublicKey
from ..errors import SimplexRpcError

__all__ = ["SCOPES", "Budget", "RateLimit"]

Scope = Literal["signer", "global", "unsigned"]
SCOPES: Final = ("signer", "global", "unsigned")
"""The scopes of a :class:`RateLimit`."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: ``requests`` requests per ``per`` seconds, refilled evenly.

    ``scope`` says which requests share a bucket:

    * ``"signer"`` (the default): one bucket per signer's key; the unsigned
      requests share one bucket. At most ``max_signers`` buckets are kept;
      the least recently used is forgotten first (so memory stays bounded
      however many keys requesters make; a forgotten signer starts full);
    * ``"global"``: one bucket for all requests;
    * ``"unsigned"``: one bucket for the unsigned requests only.

    With ``failures_only=True`` only requests whose answer is an error take a
    token (a handler's error answer, or an envelope error). A bucket starts
    full: ``requests`` requests pass at once.
    """

    requests: int
    per: float
    _: KW_ONLY
    scope: Scope = "signer"
    failures_only: bool = False
    max_signers: int = 10_000

    def __post_init__(self) -> None:
        if (
            isinstance(self.requests, bool)
            or not isinstance(self.requests, int)
            or self.requests < 1
        ):
            raise SimplexRpcError("rate limit: requests must be a positive integer")
        if (
            isinstance(self.per, bool)
            or not isinstance(self.per, (int, float))
            or not self.per > 0
            or math.isinf(self.per)
        ):
            raise SimplexRpcError("rate limit: per must be a positive number of seconds")
        if self.scope not in SCOPES:
            raise SimplexRpcError(
                f"rate limit: scope must be one of {', '.join(SCOPES)}, not {self.scope!r}"
            )
        if not isinstance(self.failures_only, bool):
            raise SimplexRpcError("rate limit: failures_only must be True or False")
        if (
            isinstance(self.max_signers, bool)
            or not isinstance(self.max_signers, int)
            or self.max_signers < 1
        ):
            raise SimplexRpcError("rate limit: max_signers must be a positive integer")


class _Buckets:
    """The state of one :class:`RateLimit`: its buckets, each ``(tokens, when)``."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.capacity = float(limit.requests)
        self.rate = limit.requests / float(limit.per)  # tokens a second
        self.buckets: OrderedDict[bytes, tuple[float, float]] = OrderedDict()

    def applies(self, signer: bytes) -> bool:
        return self.limit.scope != "unsigned" or not signer

    def key(self, signer: bytes) -> bytes:
        return signer if self.limit.scope == "signer" else b""

    def tokens(self, key: bytes, now: float) -> float:
        """The tokens of ``key``'s bucket at ``now`` (a bucket not kept is full)."""
        tokens, when = self.buckets.get(key, (self.capacity, now))
        # A clock that steps back refills nothing (and takes nothing back).
        return min(self.capacity, tokens + max(0.0, now - when) * self.rate)

    def wait(self, tokens: float) -> float:
        """Seconds until a bucket holding ``tokens`` has one."""
        # Within a billionth of a token is a token: the float error of a refill
        # (30 s at 1/30 a second can come to 0.9999999999999999) is not a refusal.
        return 0.0 if tokens >= 1.0 - 1e-9 else (1.0 - tokens) / self.rate

    def put(self, key: bytes, tokens: float, now: float) -> None:
        self.buckets.pop(key, None)
        self.buckets[key] = (tokens, now)
        while len(self.buckets) > self.limit.max_signers:
            self.buckets.popitem(last=False)


def retry_after(wait: float) -> int:
    """``wait`` seconds as a ``retryAfter``: whole seconds rounded up, at least 1, and at
    most the envelope's uint32 (a token further away is announced as the longest wait)."""
    # Less a nanosecond: the float error of a refill (20 s of 1/30 a second is
    # 0.666..., whose wait comes out as 10.000000000000002) is not a second more.
    return min(MAX_UINT32, max(1, math.ceil(wait - 1e-9)))


class Budget:
    """The buckets of one or more :class:`RateLimit`, with an injected clock; no I/O.

    :meth:`check` admits a request or says how long until it would pass
    every limit; :meth:`settle` counts a finished request's failure in the
    ``failures_only`` limits. See the module's text for the rules.
    """

    def __init__(
        self,
        limits: RateLimit | Sequence[RateLimit],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        items: Iterable[object]
        if isinstance(limits, RateLimit):
            items = (limits,)
        elif isinstance(limits, Sequence) and not isinstance(limits, (str, bytes)):
            items = limits
        else:
            raise SimplexRpcError(
                "rate_limit: expected a RateLimit or a sequence of them, got"
                f" {type(limits).__name__}"
            )
        checked: list[RateLimit] = []
        for index, item in enumerate(items):
            if not isinstance(item, RateLimit):
                raise SimplexRpcError(
                    f"rate_limit[{index}]: expected a RateLimit, got {type(item).__name__}"
                )
            checked.append(item)
        if not checked:
            raise SimplexRpcError("rate_limit: an empty sequence (give None for no limit)")
        if not callable(clock):
            raise SimplexRpcError("clock: expected a callable returning seconds")
        self.limits: tuple[RateLimit, ...] = tuple(checked)
        self._states = [_Buckets(limit) for limit in checked]
        self._clock = clock

    def __repr__(self) -> str:
        return f"Budget({list(self.limits)!r})"

    @property
    def failures_counted(self) -> bool:
        """Whether a limit counts failures only (then :meth:`settle` matters)."""
        return any(limit.failures_only for limit in self.limits)

    def wait(self, signer: PublicKey | None) -> float:
        """Seconds until a request of ``signer`` would pass every limit (0: it would now).

        Takes nothing.
        """
        raw = _raw(signer)
        now = self._clock()
        return max(
            (s.wait(s.tokens(s.key(raw), now)) for s in self._states if s.applies(raw)),
            default=0.0,
        )

    def check(self, signer: PublicKey | None) -> int | None:
        """Admit a request of ``signer`` (None: unsigned): None when every limit has a
        token (the limits that count every request take theirs), else its
        ``retryAfter`` (:func:`retry_after` of the longest wait) and nothing is taken."""
        raw = _raw(signer)
        now = self._clock()
        found: list[tuple[_Buckets, bytes, float]] = []
        longest = 0.0
        for state in self._states:
            if state.applies(raw):
                key = state.key(raw)
                tokens = state.tokens(key, now)
                longest = max(longest, state.wait(tokens))
                found.append((state, key, tokens))
        if longest > 0.0:
            return retry_after(longest)
        for state, key, tokens in found:
            if not state.limit.failures_only:
                state.put(key, tokens - 1.0, now)
        return None

    def settle(self, signer: PublicKey | None, *, failed: bool) -> None:
        """A request of ``signer`` that :meth:`check` admitted has its answer: when
        ``failed`` (an error answer), each ``failures_only`` limit takes a token."""
        if not failed:
            return
        raw = _raw(signer)
        now = self._clock()
        for state in self._states:
            if state.limit.failures_only and state.applies(raw):
                key = state.key(raw)
                state.put(key, state.tokens(key, now) - 1.0, now)


class _Limiter(Budget):
    """The responder's budget (its earlier name), with the first limit's buckets in view."""

    @property
    def _buckets(self) -> OrderedDict[bytes, tuple[float, float]]:
        return self._states[0].buckets


def _raw(signer: PublicKey | None) -> bytes:
    if signer is None:
        return b""
    if not isinstance(signer, PublicKey):
        raise TypeError(f"signer: expected a PublicKey or None, got {type(signer).__name__}")
    return signer.raw

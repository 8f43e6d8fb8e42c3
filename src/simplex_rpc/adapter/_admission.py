"""Request admission, without I/O: which request runs, waits, repeats or is shed.

Both of the adapter's servers take requests the same way: the responder of
``serve`` (``serviceRequest`` events, :mod:`._service`) and the bot of
``serve_calls`` (``/_call`` chat messages, :mod:`._chat`). Each request is
remembered by a key (a ``requestId``; a chat and a chat item id) so that one
the core reports again is not handled twice; at most ``slots`` handlers run,
at most ``backlog`` requests wait for a slot, and the rest are shed at once.
A request's deadline counts from its arrival (the moment its frame was read),
not from when a slot freed up, and covers its time in the backlog. A stop
sheds what waits and takes nothing new.

:class:`Admission` is that policy as a state machine in h11's way: events in
(:meth:`~Admission.arrive`, :meth:`~Admission.finish`, :meth:`~Admission.expire`,
:meth:`~Admission.stop`), decisions out (:class:`Decision`). It does no I/O,
starts no task and sets no timer; time comes from an injected ``clock`` (the
driver passes the event loop's ``time``, a test a counter). The asyncio code
of the two servers does what the decisions say: start a handler, answer
``rate_limited``, log a repeat, set a timer for :meth:`~Admission.next_due`.

The memory of keys is a :class:`SeenStore`; :class:`WindowSeen` forgets a key
after a window and past a count. Another store (one that also remembers the
answers, to send a repeat the same answer) plugs in through the same protocol:
a REPEAT decision carries the ticket's key for the driver to look the answer up.
A budget (a rate per signer, a cost per protocol) is not the policy's: its key is
known only once the request is read, after admission; the responder applies it
there (``RateLimit``), and a budget object with the same injected clock plugs in
at that point.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from typing import Final, Generic, Protocol, TypeVar

__all__ = ["Admission", "Decision", "SeenStore", "Ticket", "Verdict", "WindowSeen"]

P = TypeVar("P")

#: The longest ``retryAfter`` a shed request is told: the core's response window
#: (180 s, the protocol text, "Service RPC transport"): a requester told to wait
#: longer would have given up.
MAX_RETRY_AFTER: Final = 180


class Verdict(enum.Enum):
    """What the driver does with a request."""

    #: Run its handler now (a slot is taken until :meth:`Admission.finish`).
    START = "start"
    #: It waits in the backlog for a slot; a later decision starts or sheds it.
    QUEUED = "queued"
    #: Its key was seen within the memory: not handled again (log it, count it).
    REPEAT = "repeat"
    #: Every slot busy and the backlog full: shed at once.
    SHED_FULL = "shed_full"
    #: Its deadline came while it waited for a slot (or before it was offered).
    SHED_LATE = "shed_late"
    #: The server is stopping: shed, with the short ``stop_retry_after``.
    SHED_STOPPING = "shed_stopping"
    #: Its handler still runs at the deadline: answer now, cancel the handler. The slot
    #: stays taken until the handler ends (:meth:`Admission.finish`).
    TIMED_OUT = "timed_out"

    @property
    def shed(self) -> bool:
        """Whether the request is answered by the server itself, its handler never run."""
        return self in (Verdict.SHED_FULL, Verdict.SHED_LATE, Verdict.SHED_STOPPING)


class _State(enum.Enum):
    QUEUED = 1
    RUNNING = 2
    TIMED_OUT = 3  # running past its deadline: answered, its handler cancelled
    DONE = 4


class Ticket(Generic[P]):
    """One admitted request: its key, arrival, deadline and the driver's ``payload``."""

    __slots__ = ("arrival", "deadline", "key", "payload", "state")

    def __init__(self, key: Hashable, payload: P, arrival: float, deadline: float) -> None:
        self.key = key
        self.payload = payload
        self.arrival = arrival
        self.deadline = deadline  # math.inf: none
        self.state = _State.QUEUED

    @property
    def timed_out(self) -> bool:
        """Answered at its deadline: whatever its handler returns later is dropped."""
        return self.state is _State.TIMED_OUT

    def __repr__(self) -> str:
        return f"<Ticket {self.state.name.lower()} arrival={self.arrival:g}>"


class Decision(Generic[P]):
    """A verdict on one ticket; ``retry_after`` (seconds) with a shed verdict."""

    __slots__ = ("retry_after", "ticket", "verdict")

    def __init__(self, verdict: Verdict, ticket: Ticket[P], retry_after: int | None = None):
        self.verdict = verdict
        self.ticket = ticket
        self.retry_after = retry_after

    def __repr__(self) -> str:
        extra = f" retry_after={self.retry_after}" if self.retry_after is not None else ""
        return f"<Decision {self.verdict.value}{extra}>"


class SeenStore(Protocol):
    """The memory of request keys: :meth:`Admission.arrive` asks it of each request."""

    def seen(self, key: Hashable, now: float) -> bool:
        """Whether ``key`` was remembered (and not yet forgotten) by ``now``; if not,
        remember it from ``now`` on."""
        ...


class WindowSeen:
    """Keys remembered for ``window`` seconds from their arrival, at most ``limit`` of them
    (the oldest forgotten first: memory stays bounded whatever the peers send).

    ``window`` may be ``math.inf``: then only the count bounds the memory.
    """

    __slots__ = ("_keys", "limit", "window")

    def __init__(self, window: float, limit: int) -> None:
        if not window > 0:
            raise ValueError("window: expected a positive number of seconds")
        if limit < 1:
            raise ValueError("limit: expected a positive integer")
        self.window = window
        self.limit = limit
        self._keys: OrderedDict[Hashable, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def seen(self, key: Hashable, now: float) -> bool:
        keys = self._keys
        while keys:
            # Keys come in arrival order (a held request's arrival is older than a later
            # one's): the first is the oldest.
            oldest = next(iter(keys.values()))
            if now - oldest < self.window and len(keys) < self.limit:
                break
            keys.popitem(last=False)
        if key in keys:
            return True
        keys[key] = now
        return False


class Admission(Generic[P]):
    """The admission policy of one server: slots, backlog, deadlines, repeats, the stop.

    ``slots`` handlers run at once; ``backlog`` requests at most wait for a slot
    (0: none wait); ``deadline`` seconds from its arrival a request is answered
    whatever happens (None: no deadline; the driver bounds its handlers itself).
    ``seen`` remembers keys (None: no deduplication). ``clock`` gives the time
    in the same unit and origin as the arrivals. ``stop_retry_after`` is the
    ``retryAfter`` of what a stop sheds: short, so that requesters retry.

    Invariants (pinned by tests/adapter/test_admission.py): every ticket gets exactly
    one final verdict (START then finish, or a shed one, or TIMED_OUT) besides
    QUEUED; at most ``slots`` tickets hold a slot; the backlog starts in
    arrival order; nothing is started once stopping.
    """

    def __init__(
        self,
        *,
        slots: int,
        backlog: int,
        deadline: float | None,
        clock: Callable[[], float],
        seen: SeenStore | None = None,
        stop_retry_after: int = 3,
    ) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError("slots: expected a positive integer")
        if isinstance(backlog, bool) or not isinstance(backlog, int) or backlog < 0:
            raise ValueError("backlog: expected a non-negative integer")
        if deadline is not None and not deadline > 0:
            raise ValueError("deadline: expected a positive number of seconds or None")
        self.slots = slots
        self.backlog_limit = backlog
        self.deadline = math.inf if deadline is None else float(deadline)
        self.clock = clock
        self.seen = seen
        self.stop_retry_after = stop_retry_after
        self._queue: deque[Ticket[P]] = deque()
        self._running: dict[Ticket[P], None] = {}  # in start order
        self.stopping = False
        #: A running mean of the handlers' time, slow to move: the estimate behind
        #: ``retryAfter``.
        self.service_time = 1.0

    # -- what the driver reads ---------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Requests in the backlog."""
        return len(self._queue)

    @property
    def busy(self) -> int:
        """Slots taken (handlers running, timed out ones until they end)."""
        return len(self._running)

    def running(self) -> Iterator[Ticket[P]]:
        """The tickets holding a slot, oldest start first."""
        return iter(list(self._running))

    def next_due(self) -> float | None:
        """When :meth:`expire` has something to do next (the earliest deadline of a
        request waiting or running, not yet answered), or None."""
        due = math.inf
        if self._queue:
            due = self._queue[0].deadline  # the backlog is in arrival order
        for ticket in self._running:
            if ticket.state is _State.RUNNING and ticket.deadline < due:
                due = ticket.deadline
        return None if due == math.inf else due

    def retry_after(self) -> int:
        """Seconds until a slot is likely free for a new request: the requests ahead of
        it, at the handlers' mean time, over the slots (1 to ``MAX_RETRY_AFTER``)."""
        ahead = len(self._queue) + len(self._running) + 1
        estimate = self.service_time * ahead / self.slots
        return int(min(MAX_RETRY_AFTER, max(1, math.ceil(estimate))))

    # -- events -------------------------------------------------------------------------

    def arrive(self, key: Hashable, payload: P, arrival: float | None = None) -> Decision[P]:
        """A request came (at ``arrival``, by default now): its verdict.

        A key the store remembers is a REPEAT (whatever the state: a repeat is never a
        second request). While stopping: SHED_STOPPING. A request whose deadline has
        passed (one held before the server started): SHED_LATE. A free slot and no
        backlog: START. Else QUEUED, or SHED_FULL past the backlog's bound.
        """
        now = self.clock()
        when = now if arrival is None else arrival
        ticket: Ticket[P] = Ticket(key, payload, when, when + self.deadline)
        if self.seen is not None and self.seen.seen(key, when):
            ticket.state = _State.DONE
            return Decision(Verdict.REPEAT, ticket)
        if self.stopping:
            return self._shed(ticket, Verdict.SHED_STOPPING, self.stop_retry_after)
        if ticket.deadline <= now:
            return self._shed(ticket, Verdict.SHED_LATE, self.retry_after())
        if len(self._running) < self.slots and not self._queue:
            return self._start(ticket)
        if len(self._queue) >= self.backlog_limit:
            return self._shed(ticket, Verdict.SHED_FULL, self.retry_after())
        self._queue.append(ticket)
        return Decision(Verdict.QUEUED, ticket)

    def finish(self, ticket: Ticket[P], seconds: float | None = None) -> list[Decision[P]]:
        """A handler ended (its task is done, however): its slot is free. ``seconds``, its
        running time, moves the mean behind ``retryAfter``. Returns the decisions it
        makes possible: waiting requests started (and those past their deadline shed)."""
        if ticket in self._running:
            del self._running[ticket]
            if ticket.state is _State.RUNNING:
                ticket.state = _State.DONE
            if seconds is not None:
                self.service_time += (seconds - self.service_time) / 16
        return self._fill()

    def expire(self) -> list[Decision[P]]:
        """Time passed: waiting requests past their deadline are SHED_LATE, running ones
        TIMED_OUT (each once); freed slots are filled. Call it at :meth:`next_due`."""
        now = self.clock()
        out: list[Decision[P]] = []
        for ticket in self._running:
            if ticket.state is _State.RUNNING and ticket.deadline <= now:
                ticket.state = _State.TIMED_OUT
                out.append(Decision(Verdict.TIMED_OUT, ticket))
        out.extend(self._fill())
        return out

    def answering(self, ticket: Ticket[P]) -> bool:
        """The handler returned and its answer goes out: True, unless the ticket was
        answered at its deadline already (then the result is dropped). From now on
        its deadline no longer applies."""
        if ticket.state is not _State.RUNNING:
            return False
        ticket.state = _State.DONE
        return True

    def stop(self) -> list[Decision[P]]:
        """Stop taking requests: every waiting one is SHED_STOPPING (in arrival order);
        the running ones go on (the driver gives them their grace)."""
        self.stopping = True
        out: list[Decision[P]] = []
        while self._queue:
            out.append(
                self._shed(self._queue.popleft(), Verdict.SHED_STOPPING, self.stop_retry_after)
            )
        return out

    def clear(self) -> list[Ticket[P]]:
        """Forget what waits (the connection is lost: nothing can be answered); the
        tickets dropped, for the driver's count."""
        dropped = list(self._queue)
        self._queue.clear()
        for ticket in dropped:
            ticket.state = _State.DONE
        return dropped

    # -- internals ----------------------------------------------------------------------

    def _fill(self) -> list[Decision[P]]:
        out: list[Decision[P]] = []
        if self.stopping:
            return out
        now = self.clock()
        queue = self._queue
        while queue and queue[0].deadline <= now:
            out.append(self._shed(queue.popleft(), Verdict.SHED_LATE, self.retry_after()))
        while queue and len(self._running) < self.slots:
            ticket = queue.popleft()
            if ticket.deadline <= now:
                out.append(self._shed(ticket, Verdict.SHED_LATE, self.retry_after()))
            else:
                out.append(self._start(ticket))
        return out

    def _start(self, ticket: Ticket[P]) -> Decision[P]:
        ticket.state = _State.RUNNING
        self._running[ticket] = None
        return Decision(Verdict.START, ticket)

    @staticmethod
    def _shed(ticket: Ticket[P], verdict: Verdict, retry_after: int) -> Decision[P]:
        ticket.state = _State.DONE
        return Decision(verdict, ticket, retry_after)

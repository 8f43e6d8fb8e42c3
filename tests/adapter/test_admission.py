"""The admission policy alone (adapter/_admission.py): events in, decisions out, no I/O.

The rules it pins are the responder's (``serve``'s docstring, issue 21 and issue 28) and
the chat bot's (``serve_calls``): at most ``slots`` handlers run; at most ``backlog``
requests wait; past that a request is shed at once; a deadline counts from the request's
arrival, its time in the backlog included; a key seen within the memory is not handled
again; a stop sheds what waits and takes nothing new. Time is a counter the test moves.
"""

from __future__ import annotations

import math
import random

import pytest

from simplex_rpc.adapter._admission import (
    MAX_RETRY_AFTER,
    Admission,
    Decision,
    Ticket,
    Verdict,
    WindowSeen,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def policy(
    clock: Clock, *, slots: int = 2, backlog: int = 2, deadline: float | None = 10.0
) -> Admission[str]:
    return Admission(
        slots=slots,
        backlog=backlog,
        deadline=deadline,
        clock=clock,
        seen=WindowSeen(190.0, 1000),
        stop_retry_after=3,
    )


def verdicts(decisions: list[Decision[str]]) -> list[tuple[str, Verdict]]:
    return [(d.ticket.payload, d.verdict) for d in decisions]


def test_free_slots_start_then_the_backlog_fills_then_requests_are_shed_at_once() -> None:
    clock = Clock()
    a = policy(clock)
    got = [a.arrive(f"r{n}", f"r{n}") for n in range(6)]
    assert [d.verdict for d in got] == [
        Verdict.START,
        Verdict.START,
        Verdict.QUEUED,
        Verdict.QUEUED,
        Verdict.SHED_FULL,
        Verdict.SHED_FULL,
    ]
    assert (a.busy, a.waiting) == (2, 2)
    shed = got[4]
    assert shed.retry_after is not None and 1 <= shed.retry_after <= MAX_RETRY_AFTER


def test_a_freed_slot_starts_the_oldest_waiting_request() -> None:
    clock = Clock()
    a = policy(clock)
    first = a.arrive("r0", "r0").ticket
    a.arrive("r1", "r1")
    a.arrive("r2", "r2")
    a.arrive("r3", "r3")
    assert verdicts(a.finish(first, 0.5)) == [("r2", Verdict.START)]
    assert (a.busy, a.waiting) == (2, 1)


def test_a_request_never_jumps_the_backlog_even_when_a_slot_is_free() -> None:
    """A slot freed while requests wait goes to the oldest: arrival order is kept (a new
    arrival while something waits is queued, not started)."""
    clock = Clock()
    a = policy(clock, slots=1, backlog=5)
    running = a.arrive("r0", "r0").ticket
    assert a.arrive("r1", "r1").verdict is Verdict.QUEUED
    a.finish(running)  # r1 starts
    assert a.arrive("r2", "r2").verdict is Verdict.QUEUED


def test_the_deadline_counts_from_arrival_and_covers_the_wait_for_a_slot() -> None:
    """issue 21: "the deadline counts from the moment the request's frame is read"."""
    clock = Clock()
    a = policy(clock, slots=1, backlog=5, deadline=10.0)
    running = a.arrive("r0", "r0").ticket
    waiting = a.arrive("r1", "r1").ticket
    assert waiting.deadline == clock.now + 10.0
    assert a.next_due() == clock.now + 10.0
    clock.now += 10.0
    out = verdicts(a.expire())
    # Both came at the same moment: the running one is answered at its deadline, the
    # waiting one shed (it never got a slot in time).
    assert ("r0", Verdict.TIMED_OUT) in out and ("r1", Verdict.SHED_LATE) in out
    assert running.timed_out
    # The timed out handler keeps its slot until it really ends.
    assert a.busy == 1
    a.finish(running)
    assert a.busy == 0


def test_a_request_offered_after_its_deadline_is_shed_late_not_started() -> None:
    """A request held for a later serve arrives at the policy with its old arrival time."""
    clock = Clock()
    a = policy(clock, deadline=10.0)
    d = a.arrive("old", "old", arrival=clock.now - 11.0)
    assert d.verdict is Verdict.SHED_LATE
    d = a.arrive("recent", "recent", arrival=clock.now - 9.0)
    assert d.verdict is Verdict.START
    assert d.ticket.deadline == clock.now + 1.0


def test_a_waiting_request_past_its_deadline_is_shed_when_a_slot_frees() -> None:
    clock = Clock()
    a = policy(clock, slots=1, backlog=5, deadline=10.0)
    first = a.arrive("r0", "r0").ticket
    clock.now += 5
    a.arrive("r1", "r1")
    clock.now += 6  # r0 timed out, ... but suppose the driver did not call expire yet
    out = verdicts(a.finish(first))
    assert out == [("r1", Verdict.START)]  # r1's deadline (t+15) has not passed
    second = a.running().__next__()
    clock.now += 5  # now past r1's deadline
    a.arrive("r2", "r2")  # queued behind r1
    clock.now += 20
    out = verdicts(a.finish(second))
    assert out == [("r2", Verdict.SHED_LATE)]


def test_a_handler_that_returned_is_not_timed_out_later() -> None:
    clock = Clock()
    a = policy(clock, deadline=10.0)
    ticket = a.arrive("r0", "r0").ticket
    assert a.answering(ticket)
    clock.now += 100
    assert a.expire() == []
    assert a.next_due() is None


def test_a_timed_out_handler_that_returns_late_is_not_answered_twice() -> None:
    clock = Clock()
    a = policy(clock, deadline=10.0)
    ticket = a.arrive("r0", "r0").ticket
    clock.now += 10
    assert verdicts(a.expire()) == [("r0", Verdict.TIMED_OUT)]
    assert not a.answering(ticket)
    assert a.expire() == []  # TIMED_OUT once


def test_a_repeated_key_is_not_handled_again_within_the_memory() -> None:
    """serve's docstring: "A requestId the core reports again (within the core's
    180-second window) is not handled again"."""
    clock = Clock()
    a = policy(clock)
    assert a.arrive("r0", "r0").verdict is Verdict.START
    clock.now += 100
    assert a.arrive("r0", "r0").verdict is Verdict.REPEAT
    clock.now += 100  # past the 190 s memory from its first arrival
    assert a.arrive("r0", "r0").verdict is Verdict.START


def test_the_memory_is_bounded_by_count_the_oldest_forgotten_first() -> None:
    seen = WindowSeen(math.inf, 3)
    for key in "abcd":
        assert not seen.seen(key, 0.0)
    assert len(seen) <= 3
    assert seen.seen("d", 0.0)
    assert not seen.seen("a", 0.0)  # forgotten: the bound


def test_a_repeat_is_a_repeat_even_while_stopping() -> None:
    clock = Clock()
    a = policy(clock)
    a.arrive("r0", "r0")
    a.stop()
    assert a.arrive("r0", "r0").verdict is Verdict.REPEAT
    d = a.arrive("r1", "r1")
    assert (d.verdict, d.retry_after) == (Verdict.SHED_STOPPING, 3)


def test_the_stop_sheds_what_waits_in_arrival_order_and_starts_nothing() -> None:
    clock = Clock()
    a = policy(clock, slots=1, backlog=5)
    running = a.arrive("r0", "r0").ticket
    for n in range(1, 4):
        a.arrive(f"r{n}", f"r{n}")
    out = a.stop()
    assert verdicts(out) == [(f"r{n}", Verdict.SHED_STOPPING) for n in range(1, 4)]
    assert all(d.retry_after == 3 for d in out)
    assert a.finish(running) == []  # nothing is started once stopping
    assert (a.busy, a.waiting) == (0, 0)


def test_retry_after_grows_with_the_requests_ahead_and_is_capped_by_the_window() -> None:
    clock = Clock()
    a = policy(clock, slots=1, backlog=1000, deadline=None)
    a.service_time = 2.0
    assert a.retry_after() == 2  # the one request itself
    for n in range(10):
        a.arrive(f"r{n}", f"r{n}")
    assert a.retry_after() == 22
    a.service_time = 1e6
    assert a.retry_after() == MAX_RETRY_AFTER


def test_the_handlers_time_moves_the_estimate_slowly() -> None:
    clock = Clock()
    a = policy(clock)
    ticket = a.arrive("r0", "r0").ticket
    a.finish(ticket, 17.0)
    assert a.service_time == pytest.approx(2.0)


def test_no_deadline_means_no_timeout_and_nothing_due() -> None:
    """serve_calls' policy: a conversation has no response window."""
    clock = Clock()
    a = policy(clock, slots=1, backlog=1, deadline=None)
    a.arrive("r0", "r0")
    a.arrive("r1", "r1")
    clock.now += 1e9
    assert a.next_due() is None and a.expire() == []


def test_clear_forgets_what_waits_for_the_drivers_count() -> None:
    clock = Clock()
    a = policy(clock, slots=1, backlog=5)
    a.arrive("r0", "r0")
    a.arrive("r1", "r1")
    a.arrive("r2", "r2")
    assert [t.payload for t in a.clear()] == ["r1", "r2"]
    assert a.waiting == 0


@pytest.mark.parametrize("bad", [{"slots": 0}, {"backlog": -1}, {"deadline": 0.0}])
def test_a_policy_that_cannot_admit_is_refused(bad: dict[str, object]) -> None:
    options: dict[str, object] = {"slots": 1, "backlog": 0, "deadline": None, **bad}
    with pytest.raises(ValueError):
        Admission(clock=Clock(), **options)  # type: ignore[arg-type]


def test_exactly_one_final_verdict_per_request_under_random_events() -> None:
    """The policy's invariants under a random mix of arrivals, ends, repeats, time and a
    stop: each ticket is decided once finally (started then finished, or shed, or a
    repeat); no more than ``slots`` hold a slot; the backlog is bounded."""
    rng = random.Random(28)
    for trial in range(50):
        clock = Clock()
        a = policy(clock, slots=rng.randint(1, 4), backlog=rng.randint(0, 5), deadline=5.0)
        final: dict[str, list[Verdict]] = {}
        started: list[Ticket[str]] = []
        keys: list[str] = []

        def take(
            decisions: list[Decision[str]],
            final: dict[str, list[Verdict]] = final,
            started: list[Ticket[str]] = started,
        ) -> None:
            for d in decisions:
                if d.verdict is Verdict.QUEUED:
                    continue
                final.setdefault(d.ticket.payload, []).append(d.verdict)
                if d.verdict is Verdict.START:
                    started.append(d.ticket)

        stopped = False
        for step in range(200):
            roll = rng.random()
            if roll < 0.35 or (roll < 0.45 and not keys):
                key = f"k{len(keys)}"
                keys.append(key)
                take([a.arrive(key, key)])
            elif roll < 0.45:
                # A key the core reports again, well within the memory: a repeat.
                key = rng.choice(keys)
                assert a.arrive(key, key).verdict is Verdict.REPEAT
            elif roll < 0.75 and started:
                ticket = started.pop(rng.randrange(len(started)))
                take(a.finish(ticket, rng.random()))
            elif roll < 0.95:
                clock.now += rng.random() * 3
                take(a.expire())
            elif not stopped and step > 100:
                stopped = True
                take(a.stop())
            assert a.busy <= a.slots
            assert a.waiting <= a.backlog_limit
        assert set(final) <= set(keys)
        for key, got in final.items():
            # A START may be followed by TIMED_OUT; nothing else is ever decided twice.
            assert got in (
                [Verdict.START],
                [Verdict.START, Verdict.TIMED_OUT],
                [Verdict.SHED_FULL],
                [Verdict.SHED_LATE],
                [Verdict.SHED_STOPPING],
            ), (trial, key, got)

"""The one reconnecting keeper (``simplex_rpc._keeper``): its backoff policy, and its driver.

The policy is pure: told how long an attempt lasted, it says how long to wait.
The driver is checked with connections made in memory, whose end the test
decides; every wait is on a condition, and the policies here wait no time at
all unless the test is about a wait.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator

import anyio
import pytest

from simplex_rpc._keeper import Backoff, Ended, Keeper
from simplex_rpc.errors import SimplexRpcError

# -- the policy: no clock, no I/O -----------------------------------------------------------


def test_the_waits_start_at_first_and_double_up_to_the_cap() -> None:
    policy = Backoff(first=0.5, cap=4.0, factor=2.0, stable_after=10.0)
    assert [policy.ended(0.0) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_the_defaults_are_half_a_second_doubling_to_thirty() -> None:
    policy = Backoff()
    waits = [policy.ended(1.0) for _ in range(9)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_connection_that_held_starts_the_waits_again() -> None:
    """An attempt that lasted ``stable_after`` (a connection that held) is not a failure in a
    row: the next wait is ``first`` again; a short one goes on doubling."""
    policy = Backoff(first=1.0, cap=60.0, stable_after=10.0)
    assert [policy.ended(0.1) for _ in range(3)] == [1.0, 2.0, 4.0]
    assert policy.ended(10.0) == 1.0
    assert policy.ended(9.9) == 2.0


def test_reset_makes_the_next_wait_first() -> None:
    policy = Backoff(first=0.25, cap=8.0)
    policy.ended(0.0)
    policy.ended(0.0)
    policy.reset()
    assert policy.ended(0.0) == 0.25


def test_after_stop_there_is_no_next_attempt() -> None:
    policy = Backoff()
    assert policy.ended(0.0) == 0.5
    policy.stop()
    assert policy.stopped
    assert policy.ended(0.0) is None
    assert policy.ended(100.0) is None


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"first": -1}, "first"),
        ({"first": math.nan}, "first"),
        ({"cap": math.inf}, "cap"),
        ({"first": 2.0, "cap": 1.0}, "cap must be at least first"),
        ({"factor": 0.5}, "factor"),
        ({"factor": True}, "factor"),
        ({"stable_after": 0}, "stable_after"),
        ({"first": "1"}, "first"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused_naming_the_argument(
    arguments: dict[str, object], named: str
) -> None:
    with pytest.raises(SimplexRpcError, match=named):
        Backoff(**arguments)  # type: ignore[arg-type]


# -- the driver ------------------------------------------------------------------------------


class Connection:
    """A connection made in memory: ``lost`` ends it, ``closed`` says it was left."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.lost = anyio.Event()
        self.closed = False


class Remote:
    """What the keeper connects to: each attempt fails while ``failing`` holds, or hangs
    while ``hanging`` does, and is counted."""

    def __init__(self) -> None:
        self.attempts = 0
        self.failing = False
        self.hanging = False
        self.made: list[Connection] = []

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Connection]:
        self.attempts += 1
        if self.hanging:
            await anyio.sleep_forever()
        if self.failing:
            raise OSError(f"refused (attempt {self.attempts})")
        conn = Connection(self.attempts)
        self.made.append(conn)
        try:
            yield conn
        finally:
            conn.closed = True


def no_wait() -> Backoff:
    return Backoff(first=0.0, cap=0.0, factor=1.0)


async def lost(conn: Connection) -> None:
    await conn.lost.wait()


@pytest.mark.anyio
async def test_a_connection_that_ends_is_made_again() -> None:
    remote = Remote()
    ends: list[Ended[Connection]] = []
    made = anyio.Event()

    def up(conn: Connection) -> None:
        if conn.number == 2:
            made.set()

    keeper = Keeper(remote.open, backoff=no_wait(), held=lost, on_up=up, on_down=ends.append)
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        first = keeper.current
        assert first is not None and first.number == 1
        first.lost.set()
        await made.wait()
        assert keeper.current is remote.made[1]
        assert first.closed
        tg.cancel_scope.cancel()
    assert len(ends) == 1
    assert ends[0].value is first and ends[0].error is None and not ends[0].dropped
    assert ends[0].delay == 0.0


@pytest.mark.anyio
async def test_a_failed_attempt_is_reported_and_tried_again_after_the_wait() -> None:
    """``run`` is started once the first attempt ended, made or not; the failure reaches
    ``on_down`` with the wait the policy chose; the next attempt follows it."""
    remote = Remote()
    remote.failing = True
    ends: list[Ended[Connection]] = []
    second_failure = anyio.Event()

    def down(ended: Ended[Connection]) -> None:
        ends.append(ended)
        if len(ends) == 2:
            remote.failing = False
            second_failure.set()

    made = anyio.Event()
    keeper = Keeper(
        remote.open, backoff=no_wait(), held=lost, on_up=lambda _: made.set(), on_down=down
    )
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        assert keeper.current is None and keeper.settled
        assert isinstance(ends[0].error, OSError) and "attempt 1" in str(ends[0].error)
        await second_failure.wait()
        await made.wait()
        conn = await keeper.settle()
        assert conn is not None and conn.number == 3 and keeper.attempts == 3
        tg.cancel_scope.cancel()
    assert [e.value for e in ends] == [None, None]


@pytest.mark.anyio
async def test_on_demand_the_next_attempt_waits_for_a_user() -> None:
    """With ``on_demand`` a failure is not tried again on its own: the next ``settle`` asks
    for the attempt and gets its outcome."""
    remote = Remote()
    remote.failing = True
    keeper = Keeper(remote.open, backoff=no_wait(), held=lost, on_demand=True)
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        assert remote.attempts == 1
        await anyio.wait_all_tasks_blocked()
        assert remote.attempts == 1  # nobody asked
        assert await keeper.settle() is None
        assert remote.attempts == 2
        remote.failing = False
        conn = await keeper.settle()
        assert conn is not None and conn.number == 3
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_on_demand_a_user_during_the_wait_gets_no_connection_and_no_attempt() -> None:
    """A user who asks before the policy's wait is over is answered at once (``None``) and
    asks for nothing: a stream of requests to a server that is down does not become a
    stream of attempts."""
    remote = Remote()
    remote.failing = True
    keeper = Keeper(
        remote.open, backoff=Backoff(first=3600.0, cap=3600.0), held=lost, on_demand=True
    )
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        assert await keeper.settle() is None
        assert await keeper.settle() is None
        await anyio.wait_all_tasks_blocked()
        assert keeper.settled and remote.attempts == 1
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_dropped_connection_is_made_again_at_once_and_settle_waits_for_it() -> None:
    remote = Remote()
    ends: list[Ended[Connection]] = []
    # A wait of an hour after a failure: only a drop, not the policy, can let this pass.
    keeper = Keeper(remote.open, backoff=Backoff(first=3600.0, cap=3600.0), on_down=ends.append)
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        first = keeper.current
        assert first is not None
        keeper.drop()
        assert not keeper.settled
        second = await keeper.settle()
        assert second is not None and second.number == 2
        assert first.closed and not second.closed
        tg.cancel_scope.cancel()
    assert ends[0].dropped and ends[0].delay == 0.0


@pytest.mark.anyio
async def test_an_attempt_that_takes_too_long_is_cut() -> None:
    remote = Remote()
    remote.hanging = True
    ends: list[Ended[Connection]] = []
    keeper = Keeper(
        remote.open,
        backoff=Backoff(first=3600.0, cap=3600.0),
        attempt_timeout=0.05,
        on_down=ends.append,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        assert ends[0].timed_out and ends[0].error is None and ends[0].value is None
        assert ends[0].delay == 3600.0
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_stop_leaves_the_connection_and_ends_run() -> None:
    remote = Remote()
    attempts: list[int] = []
    ends: list[Ended[Connection]] = []
    keeper = Keeper(
        remote.open,
        backoff=no_wait(),
        held=lost,
        on_attempt=attempts.append,
        on_down=ends.append,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        conn = keeper.current
        assert conn is not None
        keeper.stop()
    # The task group ended: run returned by itself.
    assert conn.closed and keeper.current is None
    assert attempts == [1]
    assert ends[0].delay is None
    assert keeper.backoff.stopped


@pytest.mark.anyio
async def test_stop_during_the_wait_ends_run() -> None:
    remote = Remote()
    remote.failing = True
    keeper = Keeper(remote.open, backoff=Backoff(first=3600.0, cap=3600.0))
    async with anyio.create_task_group() as tg:
        await tg.start(keeper.run)
        keeper.stop()
    assert remote.attempts == 1

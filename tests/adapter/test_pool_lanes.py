"""The lanes of a ChatCore's pool alone (adapter/_pool.py): the connections blocking
commands run on, one at a time each (Server.hs: one command at a time per connection).

Rules pinned: at most ``size`` lanes are opened, and only when needed; a request takes
a free lane, else opens one, else waits in order; a lane given back goes to the oldest
waiter; a waiter cancelled as its lane was handed over gives the lane back; a lane
dropped because its request went unanswered (``retire``) is replaced for the oldest
waiter; when the core is lost every waiter fails with ChatCoreClosed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _waiting import until
from simplex_rpc.adapter import ChatCoreClosed
from simplex_rpc.adapter._pool import BLOCKING_COMMANDS, _Lanes


class Lane:
    def __init__(self, n: int) -> None:
        self.n = n
        self.in_flight = 0
        self.description = f"lane {n}"

    def __repr__(self) -> str:
        return f"Lane({self.n})"


def lanes(size: int) -> tuple[_Lanes, list[Any]]:
    opened: list[Any] = []

    async def open_lane() -> Any:
        lane = Lane(len(opened))
        opened.append(lane)
        return lane

    return _Lanes(open_lane, size), opened


def test_only_the_service_request_is_a_blocking_command() -> None:
    assert BLOCKING_COMMANDS == {"/_service_request"}


@pytest.mark.anyio
async def test_lanes_open_when_needed_up_to_the_size_then_requests_wait_in_order() -> None:
    pool, opened = lanes(2)
    first, second = await pool.take(), await pool.take()
    assert (first, second) == (opened[0], opened[1]) and pool.busy == 2
    waiters = [asyncio.create_task(pool.take()) for _ in range(3)]
    await until(lambda: len(pool._waiters) == 3, "the 3 takers waiting")
    assert len(opened) == 2 and not any(w.done() for w in waiters)
    pool.give_back(second)
    assert await waiters[0] is second  # the oldest waiter first
    pool.give_back(first)
    assert await waiters[1] is first
    pool.give_back(second)
    assert await waiters[2] is second
    pool.give_back(first)
    pool.give_back(second)
    assert pool.busy == 0
    assert await pool.take() is first  # a free lane before a new one
    assert len(opened) == 2


@pytest.mark.anyio
async def test_a_waiter_cancelled_as_its_lane_is_handed_over_gives_it_back() -> None:
    pool, _ = lanes(1)
    lane = await pool.take()
    waiter = asyncio.create_task(pool.take())
    await until(lambda: len(pool._waiters) == 1, "the taker waiting")
    pool.give_back(lane)  # handed to the waiter ...
    waiter.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pool.busy == 0
    assert await pool.take() is lane


@pytest.mark.anyio
async def test_when_the_core_is_lost_every_waiter_fails() -> None:
    pool, _ = lanes(1)
    await pool.take()
    waiters = [asyncio.create_task(pool.take()) for _ in range(2)]
    await until(lambda: len(pool._waiters) == 2, "the 2 takers waiting")
    pool.lost(ChatCoreClosed("the connection to the chat core closed"))
    for waiter in waiters:
        with pytest.raises(ChatCoreClosed):
            await waiter
    with pytest.raises(ChatCoreClosed):
        await pool.take()


def test_a_pool_without_lanes_is_refused() -> None:
    async def never() -> Any:
        raise AssertionError("not opened")

    with pytest.raises(ValueError):
        _Lanes(never, 0)


@pytest.mark.anyio
async def test_a_retired_lane_is_no_lane_and_the_oldest_waiter_gets_a_new_one() -> None:
    """A lane whose request the core never answered is dropped (``retire``): it is not
    given to anyone again, and the oldest waiter gets a lane opened in its place."""

    pool, opened = lanes(1)
    stuck = await pool.take()
    waiters = [asyncio.create_task(pool.take()) for _ in range(2)]
    await until(lambda: len(pool._waiters) == 2, "the 2 takers waiting")
    pool.retire(stuck)
    assert stuck not in pool.lanes
    fresh = await waiters[0]
    assert fresh is opened[1] and fresh is not stuck
    assert not waiters[1].done()  # the pool's size still holds: one lane
    pool.give_back(stuck)  # a late answer on the dropped lane gives nothing back
    await asyncio.sleep(0)  # the behaviour under test: nothing is handed over
    assert not waiters[1].done()
    pool.give_back(fresh)
    assert await waiters[1] is fresh


@pytest.mark.anyio
async def test_a_lane_that_cannot_be_replaced_fails_the_oldest_waiter() -> None:
    opened: list[Any] = []

    async def open_lane() -> Any:
        if opened:
            raise ChatCoreClosed("cannot connect to the chat core")
        opened.append(Lane(0))
        return opened[0]

    pool = _Lanes(open_lane, 1)
    stuck = await pool.take()
    waiter = asyncio.create_task(pool.take())
    await until(lambda: len(pool._waiters) == 1, "the taker waiting")
    pool.retire(stuck)
    with pytest.raises(ChatCoreClosed, match="cannot connect"):
        await waiter
    assert pool.lanes == [] and pool.busy == 0

"""Waiting on a condition, bounded: the tests' one way to wait for something to happen.

A test that needs a state of the system under test (a request delivered, a
connection opened, a declaration published) waits for that state with
:func:`until`, not for a length of time: on a loaded machine a sleep is either too
short (a flaky test) or longer than needed (a slow one). The deadline only ends a
test that would otherwise hang; it is no timing claim, so it is generous.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WITHIN = 30.0
"""The default bound in seconds: a hung test's end, not a timing claim."""
EVERY = 0.01
"""Seconds between two looks at the condition."""


async def until(
    condition: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    within: float = WITHIN,
    every: float = EVERY,
) -> T:
    """Wait until ``condition()`` (a function or a coroutine function) returns a truthy value.

    Returns that value (``replies = await until(lambda: [...], "the reply")``). Fails
    with an ``AssertionError`` naming ``what`` when the condition does not hold within
    ``within`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not within {within} s")
        await asyncio.sleep(every)  # a poll's step: the deadline above bounds the wait

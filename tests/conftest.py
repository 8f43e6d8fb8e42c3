"""Shared fixtures.

``backend`` runs a test on every backend (the cbor2 ``impl`` pattern). When the
C backend did not load, its cases are skipped with the real reason, unless
``SIMPLEX_RPC_BUILD_C=1`` says it must be there, which makes them fail.
``c_backend`` is the C backend alone, under the same rule, for tests that
compare the two backends in one process.

The short summary folds skips by reason alone (``pytest_runtest_logreport``
below): the pure-backend run of ``make test`` says "C backend unavailable"
once, with the count, instead of once per test line (issue 22).

Every ``@pytest.mark.anyio`` test is bounded in time (``pytest_pyfunc_call``
below): a hung one fails after 60 s, or after ``@pytest.mark.time_limit(N)``
seconds, with an AssertionError naming the test, instead of hanging the run.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import pytest

import simplex_rpc as sx
from simplex_rpc._wire import backend as _backend


def _require(name: str) -> _backend.Backend:
    """The backend ``name``; skip (or fail, under SIMPLEX_RPC_BUILD_C=1) when it is missing."""
    if name not in sx.backends:
        reason = f"C backend unavailable: {_backend.c_unavailable_reason}"
        if os.environ.get("SIMPLEX_RPC_BUILD_C") == "1" and not _backend.FORCE_PURE:
            pytest.fail(reason + " (SIMPLEX_RPC_BUILD_C=1 requires it)")
        pytest.skip(reason)
    return sx.backends[name]


@pytest.fixture(params=["python", "c"])
def backend(request: pytest.FixtureRequest) -> _backend.Backend:
    return _require(request.param)


@pytest.fixture
def c_backend() -> _backend.Backend:
    return _require("c")


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio alone.

    The library is asyncio code (the adapter, the bridges, the listeners); trio is
    not a backend it claims.
    """
    return "asyncio"


@pytest.fixture(scope="session")
def ad() -> bytes:
    """A 112-byte AD, the shape of the agent's: two X448 keys, sender's first."""
    return bytes(range(56)) + bytes(range(100, 156))


#: How long an async test may run unless ``@pytest.mark.time_limit(N)`` says otherwise.
TIME_LIMIT = 60.0


def _bounded(
    test: Callable[..., Coroutine[Any, Any, Any]], limit: float, name: str
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``test`` cancelled after ``limit`` seconds, failing with a message that says so."""

    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> Any:
        with anyio.move_on_after(limit) as scope:
            return await test(*args, **kwargs)
        if scope.cancelled_caught:
            raise AssertionError(f"{name}: not finished within {limit} s (a hung test?)")
        return None

    return bounded


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """Bound each ``@pytest.mark.anyio`` test in time, then let anyio's plugin run it."""
    if pyfuncitem.get_closest_marker("anyio") is None:
        return
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return
    marker = pyfuncitem.get_closest_marker("time_limit")
    limit = float(marker.args[0]) if marker is not None else TIME_LIMIT
    pyfuncitem.obj = _bounded(pyfuncitem.obj, limit, pyfuncitem.nodeid)


_CONFTEST = str(Path(__file__).resolve())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Fold the short summary's skips by reason: one ``SKIPPED [N]`` line per reason.

    pytest folds skips by (file, line, reason); a skip's place is the test's, so one
    reason gives a line per test function. The place is set to this file with no
    line, leaving the reason and the count; ``-v`` still names each skipped test.
    """
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        _path, _line, reason = report.longrepr
        report.longrepr = (_CONFTEST, None, reason)  # type: ignore[assignment]

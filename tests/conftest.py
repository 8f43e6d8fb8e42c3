"""Shared fixtures.

``backend`` runs a test on every backend (the cbor2 ``impl`` pattern). When the
C backend did not load, its cases are skipped with the real reason, unless
``SIMPLEX_RPC_BUILD_C=1`` says it must be there, which makes them fail.
``c_backend`` is the C backend alone, under the same rule, for tests that
compare the two backends in one process.

The short summary folds skips by reason alone (``pytest_runtest_logreport``
below): the pure-backend run of ``make test`` says "C backend unavailable"
once, with the count, instead of once per test line (issue 22).

Property tests try a share of the examples each is written for: half by default,
all with ``SIMPLEX_RPC_HYPOTHESIS=full``, ten times with ``deep``
(tests/_hypothesis.py).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import settings

import simplex_rpc as sx
from _hypothesis import MODE, examples
from simplex_rpc._wire import backend as _backend

# The set-ups as fixtures: simulator, core_pair, scripted_core, world, process.
pytest_plugins = ["_fixtures"]


def _require(name: str) -> _backend.Backend:
    """The backend ``name``; skip (or fail, under SIMPLEX_RPC_BUILD_C=1) when it is missing."""
    if name not in sx.backends:
        reason = f"C backend unavailable: {_backend.c_unavailable_reason}"
        if os.environ.get("SIMPLEX_RPC_BUILD_C") == "1" and not _backend.FORCE_PURE:
            pytest.fail(reason + " (SIMPLEX_RPC_BUILD_C=1 requires it)")
        pytest.skip(reason)
    return sx.backends[name]


# Property tests with no count of their own: 100 examples at SIMPLEX_RPC_HYPOTHESIS=full,
# the share the mode gives otherwise (tests/_hypothesis.py).
settings.register_profile(MODE, max_examples=examples(100))
settings.load_profile(MODE)


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


#: Every async test's time limit, in seconds, unless ``@pytest.mark.time_limit(N)`` gives
#: more: a hang fails the test with anyio's TimeoutError instead of stalling the run.
ASYNC_TEST_LIMIT = 60.0


def _limited(test: Callable[..., Awaitable[Any]], seconds: float) -> Callable[..., Any]:
    @functools.wraps(test)
    async def limited(**kwargs: Any) -> None:
        with anyio.fail_after(seconds):
            await test(**kwargs)

    return limited


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each ``@pytest.mark.anyio`` test under a time limit (anyio's plugin calls
    ``item.obj``, so the limit is a wrapper around it; fixtures are resolved from the
    wrapped signature, which ``functools.wraps`` keeps)."""
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("anyio") is None:
            continue
        if not inspect.iscoroutinefunction(item.obj):
            continue
        marker = item.get_closest_marker("time_limit")
        seconds = float(marker.args[0]) if marker is not None else ASYNC_TEST_LIMIT
        item.obj = _limited(item.obj, seconds)


@pytest.fixture(scope="session")
def ad() -> bytes:
    """A 112-byte AD, the shape of the agent's: two X448 keys, sender's first."""
    return bytes(range(56)) + bytes(range(100, 156))


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

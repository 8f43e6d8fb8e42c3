"""Shared fixtures.

``backend`` runs a test on every backend (the cbor2 ``impl`` pattern). When the
C backend did not load, its cases are skipped with the real reason, unless
``SIMPLEX_RPC_BUILD_C=1`` says it must be there, which makes them fail.
``c_backend`` is the C backend alone, under the same rule, for tests that
compare the two backends in one process.

The short summary folds skips by reason alone (``pytest_runtest_logreport``
below): the pure-backend run of ``make test`` says "C backend unavailable"
once, with the count, instead of once per test line (issue 22).
"""

from __future__ import annotations

import os
from pathlib import Path

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

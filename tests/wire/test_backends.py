"""Backend selection (wire.md section 6, issue 3 "The C backend").

Rules pinned: the C backend is used when its extension loads;
``SIMPLEX_RPC_PURE=1`` forces the pure backend at import; ``backend()`` says
which runs; ``simplex_rpc.backends`` reaches both in one process, each with the
same functions; when C does not load, ``_backend.c_unavailable_reason`` holds
the real error, the test fixture skips with it, and ``SIMPLEX_RPC_BUILD_C=1``
turns that skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import simplex_rpc as sx
from simplex_rpc._wire import backend as _backend

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

FUNCTIONS = (
    "pad",
    "unpad",
    "pad_many",
    "unpad_many",
    "seal_request",
    "open_request",
    "seal_response",
    "seal_rejection",
    "open_response",
    "seal_requests",
    "open_requests",
)
TESTS = Path(__file__).resolve().parents[1]
BROKEN_C = "import sys; sys.modules['simplex_rpc._wire._simplex_rpc_c'] = None\n"


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SIMPLEX_RPC_")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )


def test_rule_every_backend_has_every_function(backend: _backend.Backend) -> None:
    for name in FUNCTIONS:
        assert callable(getattr(backend, name)), name
    assert repr(backend) == f"<simplex_rpc backend {backend.name!r}>"


def test_rule_python_is_always_there() -> None:
    assert sx.backends["python"].name == "python"
    assert set(sx.backends) <= {"python", "c"}


def test_rule_top_level_functions_are_the_active_backends() -> None:
    active = sx.backends[sx.backend()]
    for name in FUNCTIONS:
        assert getattr(sx, name) is getattr(active, name), name
    assert sx.backend() == ("python" if _backend.FORCE_PURE else active.name)


def test_rule_c_is_the_default_when_it_loads(c_backend: _backend.Backend) -> None:
    result = run_python(
        "import simplex_rpc as sx, simplex_rpc._wire.backend as b;"
        " print(sx.backend(), b.c_unavailable_reason)"
    )
    assert result.stdout.split() == ["c", "None"], result.stderr


def test_rule_pure_env_forces_python_at_import() -> None:
    code = (
        "import simplex_rpc as sx, simplex_rpc._wire.backend as b;"
        " print(sx.backend(), sorted(sx.backends), b.c_unavailable_reason, sep='|')"
    )
    result = run_python(code, SIMPLEX_RPC_PURE="1")
    name, names, reason = result.stdout.strip().split("|")
    assert (name, names) == ("python", "['python']"), result.stderr
    assert "SIMPLEX_RPC_PURE=1" in reason
    # the C extension is not even imported
    result = run_python(
        "import sys, simplex_rpc; print('simplex_rpc._wire._simplex_rpc_c' in sys.modules)",
        SIMPLEX_RPC_PURE="1",
    )
    assert result.stdout.strip() == "False"
    # "0" and "" do not force anything
    result = run_python(
        "import simplex_rpc._wire.backend as b; print(b.FORCE_PURE)", SIMPLEX_RPC_PURE="0"
    )
    assert result.stdout.strip() == "False"


def test_rule_a_broken_extension_falls_back_with_the_real_reason() -> None:
    code = BROKEN_C + (
        "import simplex_rpc as sx, simplex_rpc._wire.backend as b\n"
        "print(sx.backend(), sorted(sx.backends), b.c_unavailable_reason, sep='|')\n"
        "print(sx.unpad(sx.pad(b'still works')))\n"
    )
    result = run_python(code)
    first, second = result.stdout.strip().splitlines()
    name, names, reason = first.split("|")
    assert (name, names) == ("python", "['python']"), result.stderr
    assert reason.startswith("ModuleNotFoundError: ")
    assert "simplex_rpc._wire._simplex_rpc_c" in reason
    assert second == "b'still works'"


@pytest.mark.parametrize(("build_c", "outcome"), [("1", "1 error"), ("", "1 skipped")])
def test_rule_fixture_skips_with_the_reason_or_fails_when_c_is_required(
    build_c: str, outcome: str
) -> None:
    """Without C, the fixture's C case is skipped with the load error, or fails under BUILD_C=1."""
    code = BROKEN_C + (
        "import pytest\n"
        f"sys.exit(pytest.main(['-q', '-rsf', '-p', 'no:cacheprovider', {str(TESTS)!r}"
        " + '/wire/test_backends.py::test_rule_every_backend_has_every_function[c]']))\n"
    )
    result = run_python(code, SIMPLEX_RPC_BUILD_C=build_c)
    assert outcome in result.stdout, result.stdout[-2000:]
    assert "C backend unavailable: ModuleNotFoundError" in result.stdout
    if build_c:
        assert "SIMPLEX_RPC_BUILD_C=1 requires it" in result.stdout


def test_rule_pure_env_with_build_c_skips_rather_than_fails() -> None:
    code = (
        "import sys, pytest\n"
        f"sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', {str(TESTS)!r}"
        " + '/wire/test_backends.py::test_rule_every_backend_has_every_function[c]']))\n"
    )
    result = run_python(code, SIMPLEX_RPC_BUILD_C="1", SIMPLEX_RPC_PURE="1")
    assert "1 skipped" in result.stdout, result.stdout[-2000:]
    assert "SIMPLEX_RPC_PURE=1 forces the pure-Python backend" in result.stdout

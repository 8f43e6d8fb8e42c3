"""The ``backend`` marker selects every test module that reaches the wire backend (issue 31).

``make test`` runs the whole suite once on the default (C) backend, then only the
modules marked ``pytestmark = pytest.mark.backend`` again under
``SIMPLEX_RPC_PURE=1``. The second run is only honest if every module whose
outcome can depend on the active backend is marked. This test reads each test
module (ast, no import) and fails on a module that reaches the backend but is not
marked. A module reaches the backend when it

* imports a ``simplex_rpc._wire`` module that dispatches through the backend seam
  (``backend``, ``cbackend``, the compiled ``_simplex_rpc_c``, or any ``_wire``
  module that imports ``backend``: strict JSON, the agent's crypto);
* uses one of the top-level names bound to the active backend
  (``simplex_rpc.pad``, ``seal_request``... and ``backend``, ``backends``,
  ``backend_info``), as ``from simplex_rpc import name`` or ``alias.name``;
* or asks for the ``backend`` or ``c_backend`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WIRE = ROOT / "src" / "simplex_rpc" / "_wire"
FIXTURES = {"backend", "c_backend"}


def _sibling_imports(module: ast.Module) -> set[str]:
    """The ``_wire`` modules a ``_wire`` module imports (``from . import x``, ``from .x``)."""
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                names.update(a.name for a in node.names)
            else:
                names.add(node.module.split(".")[0])
    return names


def seam_modules() -> set[str]:
    """The ``_wire`` modules whose results depend on the active backend.

    The seam itself, and every ``_wire`` module that imports it, directly or through
    another ``_wire`` module (strict JSON, then whatever decodes with it).
    """
    imports = {
        path.stem: _sibling_imports(ast.parse(path.read_text(encoding="utf-8")))
        for path in WIRE.glob("*.py")
    }
    names = {"backend", "cbackend", "_simplex_rpc_c"}
    grew = True
    while grew:
        more = {name for name, deps in imports.items() if deps & names} - names
        names |= more
        grew = bool(more)
    return {f"simplex_rpc._wire.{name}" for name in names}


def dispatched_names() -> set[str]:
    """The names of ``simplex_rpc`` bound to the active backend (``x = _backend.active.x``)."""
    init = ast.parse((ROOT / "src" / "simplex_rpc" / "__init__.py").read_text(encoding="utf-8"))
    names = {"backend", "backends", "backend_info"}
    for node in init.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Attribute)
            and node.value.value.attr == "active"
        ):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def reaches_backend(source: str, seam: set[str], dispatched: set[str]) -> list[str]:
    """Why a test module's source reaches the wire backend (empty: it does not)."""
    tree = ast.parse(source)
    why: list[str] = []
    aliases: set[str] = set()  # local names of the simplex_rpc package
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in seam:
                    why.append(f"imports {alias.name}")
                if alias.name == "simplex_rpc":
                    aliases.add(alias.asname or "simplex_rpc")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if node.module in seam or full in seam:
                    why.append(f"imports {full}")
                if node.module == "simplex_rpc" and alias.name in dispatched:
                    why.append(f"imports simplex_rpc.{alias.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for arg in args:
                if arg.arg in FIXTURES and node.name.startswith("test"):
                    why.append(f"{node.name} uses the {arg.arg} fixture")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr in dispatched
        ):
            why.append(f"uses simplex_rpc.{node.attr}")
    return sorted(set(why))


def is_marked(source: str) -> bool:
    """Whether the module sets ``pytestmark`` to (a list holding) ``pytest.mark.backend``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            for sub in ast.walk(node.value):
                if (
                    isinstance(sub, ast.Attribute)
                    and sub.attr == "backend"
                    and isinstance(sub.value, ast.Attribute)
                    and sub.value.attr == "mark"
                ):
                    return True
    return False


def module_paths() -> list[Path]:
    """Every test module of the suite."""
    return sorted((ROOT / "tests").rglob("test_*.py"))


def test_every_module_that_reaches_the_backend_is_marked_backend() -> None:
    seam, dispatched = seam_modules(), dispatched_names()
    unmarked = {}
    for path in module_paths():
        source = path.read_text(encoding="utf-8")
        why = reaches_backend(source, seam, dispatched)
        if why and not is_marked(source):
            unmarked[path.name] = why
    assert not unmarked, (
        "these modules reach the wire backend but lack `pytestmark = pytest.mark.backend`, "
        f"so the pure run of `make test` would skip them: {unmarked}"
    )


def test_the_guard_sees_each_way_of_reaching_the_backend() -> None:
    """The scan itself: each way in the module docstring is found, an unrelated module is not."""
    seam, dispatched = seam_modules(), dispatched_names()
    assert {"simplex_rpc._wire.strict_json", "simplex_rpc._wire.backend"} <= seam
    assert "simplex_rpc._wire.redact" not in seam
    assert {"seal_request", "open_requests", "pad", "backend"} <= dispatched
    ways = [
        "from simplex_rpc._wire import strict_json\n",
        "import simplex_rpc._wire.cbackend\n",
        "from simplex_rpc._wire.backend import active\n",
        "from simplex_rpc import seal_request\n",
        "import simplex_rpc as sx\nx = sx.open_response\n",
        "def test_x(backend):\n    pass\n",
        "async def test_y(c_backend):\n    pass\n",
    ]
    for source in ways:
        assert reaches_backend(source, seam, dispatched), source
    for source in (
        "from simplex_rpc._wire.redact import redact\n",
        "import simplex_rpc as sx\nx = sx.SigningKey\n",
        "def helper(backend):\n    pass\n",
    ):
        assert not reaches_backend(source, seam, dispatched), source
    assert is_marked("import pytest\npytestmark = pytest.mark.backend\n")
    assert is_marked("import pytest\npytestmark = [pytest.mark.slow, pytest.mark.backend]\n")
    assert not is_marked("import pytest\npytestmark = pytest.mark.slow\n")


def test_the_backend_marker_is_registered(pytestconfig: pytest.Config) -> None:
    """An unregistered marker would only warn; ``-m backend`` would then select on a typo."""
    markers = pytestconfig.getini("markers")
    assert any(str(line).startswith("backend:") for line in markers), markers

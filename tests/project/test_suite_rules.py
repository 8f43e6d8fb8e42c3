"""Rules the test suite keeps about itself (issue 31), read from the source (ast, no import).

* A test module imports no other test module: what two modules share lives in a
  helper module (``tests/_*.py``) or a fixture (``tests/conftest.py``), so each test
  module can move, be renamed or be deleted alone.
* No ``asyncio.sleep`` waits for something to happen: a test waits on a condition
  (``tests/_waiting.py`` ``until``, an event, a future). A sleep that remains is the
  behaviour under test (a slow handler, a slow upstream) and says so on its line,
  ``# the behaviour under test: ...``; the one other kind is the step of a poll
  bounded by a deadline (``until`` itself, a server with no started event), labelled
  ``# a poll's step: ...``.
* Test modules live in one folder per layer of the package (``tests/wire/``,
  ``tests/adapter/``...), never at the top of tests/, with file names unique across
  folders (the folders are not packages); what a test checks across layers is a
  marker (``conformance``, ``hostile``, ``edge``, ``security``), not a file-name prefix.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LABELS = ("# the behaviour under test:", "# a poll's step:")


def python_files() -> list[Path]:
    """Every Python file of the suite, in any folder below tests/."""
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def names_of_test_modules() -> set[str]:
    """The names test modules are imported by (their file names without ``.py``)."""
    return {p.stem for p in python_files() if p.stem.startswith("test_")}


def imported_modules(tree: ast.Module) -> list[tuple[int, str]]:
    """Each module an ``import`` or ``from ... import`` names, anywhere in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_test_module_imports_another() -> None:
    """``from test_x import helper`` ties two test modules together: the helper goes to a
    ``tests/_*.py`` module instead."""
    tests = names_of_test_modules()
    offenders = [
        f"{path.relative_to(TESTS)}:{line}: imports {name}"
        for path in python_files()
        for line, name in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if name.split(".")[0] in tests
    ]
    assert not offenders, "\n".join(offenders)


def sleep_calls(tree: ast.Module) -> list[ast.Call]:
    """The calls of ``asyncio.sleep`` (or of ``sleep`` imported from asyncio)."""
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio"
        for alias in node.names
        if alias.name == "sleep"
    }
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "sleep"
            and isinstance(func.value, ast.Name)
            and func.value.id == "asyncio"
        ) or (isinstance(func, ast.Name) and func.id in bare):
            calls.append(node)
    return calls


def test_every_asyncio_sleep_is_labelled() -> None:
    """A sleep that stands in for a condition ("the task reaches its wait") fails under
    load and slows the suite: each remaining one is labelled on its line."""
    offenders = []
    for path in python_files():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for call in sleep_calls(ast.parse(text)):
            span = lines[call.lineno - 1 : (call.end_lineno or call.lineno)]
            if not any(label in line for line in span for label in LABELS):
                offenders.append(f"{path.relative_to(TESTS)}:{call.lineno}: {span[0].strip()}")
    assert not offenders, "unlabelled asyncio.sleep:\n" + "\n".join(offenders)


def test_the_rules_see_what_they_forbid() -> None:
    """The checks above find a cross-import and an unlabelled sleep in a sample."""
    sample = ast.parse(
        "import asyncio\nfrom asyncio import sleep as nap\nfrom test_a2a import MESSAGE\n"
        "async def f():\n    await asyncio.sleep(1)\n    await nap(0)\n"
    )
    assert (3, "test_a2a") in imported_modules(sample)
    assert [call.lineno for call in sleep_calls(sample)] == [5, 6]


#: The layers' folders (docs/development.md, "Tests").
FOLDERS = {
    "wire", "agent", "chat", "adapter", "testing", "bindings", "mcp_binding", "a2a_binding",
    "listeners",
    "cli", "bench", "docs", "project",
}
#: Prefixes that named a kind of test before the kinds were markers.
OLD_PREFIXES = ("test_conformance_", "test_hostile_", "test_edge_", "test_security_")


def test_every_test_module_is_in_a_layers_folder_with_a_unique_name() -> None:
    modules = [p for p in python_files() if p.stem.startswith("test_")]
    assert modules
    misplaced = [str(p.relative_to(TESTS)) for p in modules if p.parent.name not in FOLDERS
                 or p.parent.parent != TESTS]
    assert misplaced == [], f"test modules outside the layers' folders: {misplaced}"
    stems = [p.stem for p in modules]
    assert sorted(set(stems)) == sorted(stems), "two test modules share a file name"


def test_kinds_of_test_are_markers_not_file_name_prefixes() -> None:
    files = python_files()
    prefixed = [str(p.relative_to(TESTS)) for p in files if p.name.startswith(OLD_PREFIXES)]
    assert prefixed == [], f"name the layer's unit, mark the kind: {prefixed}"


def test_no_folder_of_the_suite_takes_the_name_of_a_module_the_tests_import() -> None:
    """tests/ is on sys.path (the helpers import by name), so a folder ``tests/mcp/``
    would be imported as ``mcp`` (a namespace package) where the SDK is not installed,
    and ``pytest.importorskip("mcp")`` would not skip (dist-check's venv found this):
    no folder is named as a top-level module any test imports, which is why the
    bindings' folders are ``mcp_binding`` and ``a2a_binding``."""
    imported: set[str] = set()
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported.update(name.split(".")[0] for _, name in imported_modules(tree))
        for call in ast.walk(tree):  # pytest.importorskip("name")
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "importorskip"
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)
            ):
                imported.add(call.args[0].value.split(".")[0])
    # The standard library is always there to win over a namespace package (tests/typing/).
    folders = {p.name for p in TESTS.iterdir() if p.is_dir()} - sys.stdlib_module_names
    assert {"mcp", "a2a"} <= imported
    assert folders & imported == set()

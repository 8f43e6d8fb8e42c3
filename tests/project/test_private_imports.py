"""No module in src/ imports a private module of a third-party package (issue 31).

A private module (a dotted name with a part starting with ``_``, dunder names such as
``__future__`` aside) is its package's to change in any release; the project uses the
package's public API or its own definitions instead. The one exception is PyNaCl's
``nacl._sodium`` in the C backend's hot path, documented where it is imported
(src/simplex_rpc/_wire/cbackend.py). Imports of the project's own modules are its own
business and are not checked.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

ALLOWED = {("simplex_rpc/_wire/cbackend.py", "nacl._sodium")}
"""(module, import) pairs allowed to reach a private module: the documented exception."""


def is_private(dotted: str) -> bool:
    """Whether a dotted module name has a private part (``_x``, not ``__x__``)."""
    return any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in dotted.split(".")
    )


def private_imports(source: str) -> list[str]:
    """The third-party private modules a source imports (relative, own and stdlib aside)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from pkg import _mod` reaches a private module as surely as `import pkg._mod`.
            names = [node.module] + [
                f"{node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top != "simplex_rpc" and top not in sys.stdlib_module_names and is_private(name):
                found.append(name)
    return found


def test_no_module_in_src_imports_a_private_third_party_module() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        for name in private_imports(path.read_text(encoding="utf-8")):
            if (module, name) not in ALLOWED:
                offenders.append(f"{module}: {name}")
    assert not offenders, offenders


def test_the_one_exception_is_still_made_and_documented() -> None:
    """An exception nobody uses any more would be a hole left open: drop it instead."""
    for module, name in ALLOWED:
        source = (SRC / module).read_text(encoding="utf-8")
        assert name in private_imports(source), (module, name)
        assert "issue 31" in source and "test_private_imports.py" in source, module


def test_the_scan_sees_each_form_of_import() -> None:
    assert private_imports("from mcp.shared._httpx_utils import X\n") == ["mcp.shared._httpx_utils"]
    assert private_imports("import mcp.client._transport\n") == ["mcp.client._transport"]
    assert private_imports("from nacl import _sodium\n") == ["nacl._sodium"]
    assert private_imports("def f():\n    from a._b import c\n") == ["a._b"]
    for fine in (
        "from __future__ import annotations\n",
        "from mcp.client import Transport\n",
        "from simplex_rpc._wire import backend\n",
        "from . import _binding\n",
        "from mcp import __version__\n",
    ):
        assert private_imports(fine) == [], fine

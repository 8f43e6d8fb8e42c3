"""The package's shape (issue "Layers you can see"): imports point down, with no circles.

import-linter's contracts in pyproject.toml (`make lint` runs ``lint-imports``)
keep the layers in order; this test finds any import cycle inside
``simplex_rpc``, function-level and ``TYPE_CHECKING`` imports included, with
grimp, the graph import-linter is built on.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "simplex_rpc"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_inside_the_package() -> None:
    """"No import circles, lazy imports included": grimp sees every import statement."""
    graph = grimp.build_graph("simplex_rpc", include_external_packages=False)
    assert len(graph.modules) > 40  # the whole package was read, not an empty graph
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The finder itself: a two-module loop and a three-module loop are both reported."""

    class Graph:
        modules: ClassVar = {"a", "b", "c", "d", "e"}
        edges: ClassVar = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.edges.get(module, set())

    assert sorted(_cycles(Graph())) == [["a", "b"], ["c", "d", "e"]]  # type: ignore[arg-type]


def test_the_adapter_knows_no_binding() -> None:
    """"The adapter knows no binding": nothing under adapter/ imports mcp or a2a."""
    graph = grimp.build_graph("simplex_rpc", include_external_packages=False)
    adapter = {m for m in graph.modules if m.split(".")[:2] == ["simplex_rpc", "adapter"]}
    for module in sorted(adapter):
        imported = graph.find_modules_directly_imported_by(module)
        bindings = sorted(m for m in imported if m.split(".")[1:2] in (["mcp"], ["a2a"]))
        assert bindings == [], f"{module} imports {bindings}"


def test_at_most_twelve_files_stand_in_the_package_folder() -> None:
    """"At most 12 files stand directly in src/simplex_rpc/" (build products aside)."""
    built = (".so", ".c", ".pyd")
    files = [p.name for p in PACKAGE.iterdir() if p.is_file() and not p.name.endswith(built)]
    assert len(files) <= 12, sorted(files)

"""The fuzz corpus and every fuzz regression, replayed in ``make test`` (issue 7).

``make fuzz`` runs the harnesses of ``fuzz/`` for a bounded time; this test
keeps them honest between runs: every seed of ``fuzz/corpus/<target>/`` and
every input of ``fuzz/regressions/<target>/`` (an input that once broke a
guarantee, after its fix) goes through the same target function, with the
same checks, on every backend. The C harness's regressions are replayed by
``make fuzz`` (under valgrind).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.hostile]

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "fuzz"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_decoders", FUZZ / "fuzz_decoders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HARNESS = _harness()


def _inputs(kind: str) -> list[tuple[str, Path]]:
    out = []
    for target in sorted(HARNESS.TARGETS):
        directory = FUZZ / kind / target
        for path in sorted(directory.iterdir()) if directory.is_dir() else []:
            if not path.name.startswith("."):
                out.append((target, path))
    return out


SEEDS = _inputs("corpus")
REGRESSIONS = _inputs("regressions")


def test_every_target_has_seeds() -> None:
    """The seed corpus (from vectors/) covers every Python target and the C harness."""
    assert {t for t, _ in SEEDS} == set(HARNESS.TARGETS)
    assert any((FUZZ / "corpus" / "c").iterdir())


@pytest.mark.parametrize("target", sorted(HARNESS.TARGETS))
def test_seed_corpus_holds(target: str) -> None:
    run = HARNESS.TARGETS[target]
    for name, path in SEEDS:
        if name == target:
            run(path.read_bytes())


@pytest.mark.parametrize(("target", "path"), REGRESSIONS, ids=[f"{t}/{p.name}" for t, p in
                                                                 REGRESSIONS])
def test_regression_input_holds(target: str, path: Path) -> None:
    HARNESS.TARGETS[target](path.read_bytes())


def test_harness_fails_on_a_foreign_exception() -> None:
    """The harness's own check: an exception other than the decoder's error propagates."""
    with pytest.raises(ZeroDivisionError):
        HARNESS._outcome(lambda: 1 // 0, (ValueError,))
    with pytest.raises(AssertionError):
        HARNESS._outcome(lambda: (_ for _ in ()).throw(ValueError("x" * 600)), (ValueError,))

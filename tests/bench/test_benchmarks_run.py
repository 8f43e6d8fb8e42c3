"""benchmarks/run.py leaves the checkout clean unless asked to save (issue 22, item 7).

"`benchmarks/run.py` overwrites the tracked `benchmarks/results/latest.{md,json}`.
Write results to an untracked path, or only with `--save`." A run writes its report
to ``build/benchmarks/`` (ignored by git) or to ``--out DIR``; only ``--save`` writes
the tracked files that docs/c-backend.md quotes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "run.py"
TRACKED = [
    ROOT / "benchmarks" / "results" / "latest.md",
    ROOT / "benchmarks" / "results" / "latest.json",
]
QUICK = ["--quick", "--only", "pad", "--rounds", "3"]


def digests() -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "" for p in TRACKED]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def test_a_run_writes_an_untracked_path_and_leaves_the_tracked_results(tmp_path: Path) -> None:
    before = digests()
    done = run(*QUICK, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert digests() == before, "benchmarks/run.py changed the tracked results"
    assert "pad" in (tmp_path / "latest.md").read_text()
    assert json.loads((tmp_path / "latest.json").read_text())


def test_the_default_output_is_ignored_by_git() -> None:
    """The default place (build/benchmarks/) is one git ignores: the checkout stays clean."""
    before = digests()
    done = run(*QUICK)
    assert done.returncode == 0, done.stderr
    assert digests() == before
    written = ROOT / "build" / "benchmarks" / "latest.md"
    assert written.exists()
    ignored = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", str(written)], timeout=60
    )
    assert ignored.returncode == 0, f"{written} is not ignored by git"


def test_only_save_writes_the_tracked_results() -> None:
    """--save is documented as the one way to update the quoted table."""
    done = run("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--save" in text and "benchmarks/results" in text

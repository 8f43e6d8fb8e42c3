"""`make test` and `make dist` are quiet on success and loud on failure (issue 30, item 6).

Each step of the two recipes runs through the Makefile's QUIET: on success one line, the
step's last (pytest's "N passed ...", which CI reads); on failure the whole log and the
step's exit status. Checked here on the macro itself, with `make --eval`, and on the
recipes, which run every command through it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make_probe(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "--eval",
         f"probe: ; @printf 'step: '; $(QUIET) sh -c '{command}'", "probe"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_passing_step_shows_only_its_last_line() -> None:
    done = make_probe("echo SKIPPED a; echo SKIPPED b; echo 12 passed, 3 skipped in 1.0s")
    assert done.returncode == 0
    assert done.stdout == "step: 12 passed, 3 skipped in 1.0s\n"


def test_a_failing_step_shows_everything_and_fails() -> None:
    done = make_probe("echo first; echo FAILED tests/x.py::y; exit 3")
    assert done.returncode != 0
    assert done.stdout == "step: first\nFAILED tests/x.py::y\n"


def recipe(target: str) -> list[str]:
    text = (ROOT / "Makefile").read_text()
    body = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert body is not None
    lines = body.group(1).replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines]


@pytest.mark.parametrize("target", ["test", "lint", "typecheck", "dist"])
def test_every_loud_command_of_the_recipes_runs_quietly(target: str) -> None:
    quiet_free = ("rm -rf", "mkdir -p", "cp ", "ls dist")
    for line in recipe(target):
        if line.startswith("@") and any(line[1:].startswith(q) for q in quiet_free):
            continue
        assert line.startswith("@printf") and "$(QUIET)" in line, line

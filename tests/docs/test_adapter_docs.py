"""docs/adapter.md: the ten-line responder and the ten-line caller run against the simulator.

The two Python blocks are taken from the page as they are, their simulator URL
pointed at a simulator on a free port, and run as separate programs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from _simulator_thread import SimulatorThread

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapter.md"
DOC_URL = "ws://127.0.0.1:5225"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def code_lines(block: str) -> int:
    return sum(1 for line in block.splitlines() if line.strip())


def test_the_examples_are_ten_lines_each() -> None:
    responder, caller = python_blocks()[:2]
    assert "core.serve(" in responder and "core.service_request(" in caller
    assert code_lines(responder) <= 10
    assert code_lines(caller) <= 10


def test_the_responder_and_the_caller_run_against_the_simulator() -> None:
    responder_code, caller_code = python_blocks()[:2]
    with SimulatorThread() as sim:
        responder = subprocess.Popen(
            [sys.executable, "-c", responder_code.replace(DOC_URL, sim.url)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert responder.stdout is not None
            link = responder.stdout.readline().strip()
            assert link.startswith("simplex:/"), responder.stderr.read() if not link else link
            caller = subprocess.run(
                [sys.executable, "-c", caller_code.replace(DOC_URL, sim.url), link],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert caller.returncode == 0, caller.stderr
            assert caller.stdout.strip() == "{'response': {'echo': {'q': 1}, 'signed': True}}"
        finally:
            responder.kill()
            responder.wait(10)


def test_the_tour_shows_the_same_responder_and_caller() -> None:
    """docs/examples.md repeats the pair (README.md showed it before issue 17): the run
    above covers it only while the two pages agree."""
    tour = DOC.parent / "examples.md"
    blocks = re.findall(r"```python\n(.*?)```", tour.read_text(encoding="utf-8"), re.DOTALL)
    pair = [b for b in blocks if "core.serve(" in b or "core.service_request(" in b]
    assert pair == python_blocks()[:2]


@pytest.mark.parametrize("block", python_blocks()[2:])
def test_other_blocks_compile(block: str) -> None:
    compile(block, str(DOC), "exec")


def test_the_adapter_docstring_names_each_of_its_parts() -> None:
    """The package docstring lists its parts: every private module, none that is gone."""
    import pkgutil

    import simplex_rpc.adapter as adapter

    parts = {m.name for m in pkgutil.iter_modules(adapter.__path__)}
    named = set(re.findall(r":mod:`\.(_\w+)`", adapter.__doc__ or ""))
    assert named == parts

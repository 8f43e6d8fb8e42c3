"""docs/adapter.md and the tour: the /_call bot and caller run as written against the simulator.

The tour (docs/examples.md) holds the examples README.md showed before it
became a front page (issue 17), so it is the page compared with docs/adapter.md.

The blocks are taken from the pages as they are, their simulator URL pointed at
a simulator on a free port where alice has the bot as contact 1, and run as
separate programs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _simulator_thread import SimulatorThread

ROOT = Path(__file__).resolve().parents[2]
DOC_URL = "ws://127.0.0.1:5225"


def chat_blocks(page: Path) -> tuple[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    bot = next(b for b in blocks if "serve_calls(" in b)
    caller = next(b for b in blocks if "core.call(" in b)
    return bot, caller


def test_the_tour_shows_the_same_bot_and_caller_as_the_docs() -> None:
    assert chat_blocks(ROOT / "docs" / "examples.md") == chat_blocks(ROOT / "docs" / "adapter.md")
    bot, caller = chat_blocks(ROOT / "docs" / "adapter.md")
    assert sum(1 for line in bot.splitlines() if line.strip()) <= 12
    assert sum(1 for line in caller.splitlines() if line.strip()) <= 10


@pytest.mark.parametrize("page", ["docs/examples.md", "docs/adapter.md"])
def test_the_bot_and_the_caller_run_against_the_simulator(page: str) -> None:
    bot_code, caller_code = chat_blocks(ROOT / page)
    with SimulatorThread(contacts=("alice", "bot")) as sim:
        bot = subprocess.Popen(
            [sys.executable, "-c", bot_code.replace(DOC_URL, sim.url)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert bot.stdout is not None
            assert bot.stdout.readline().strip() == "ready", bot.stderr.read()
            caller = subprocess.run(
                [sys.executable, "-c", caller_code.replace(DOC_URL, sim.url)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert caller.returncode == 0, caller.stderr
            lines = caller.stdout.strip().splitlines()
            assert len(lines) == 2
            note, answer = (json.loads(line.split(" ", 2)[2]) for line in lines)
            assert [line.split(" ", 2)[:2] for line in lines] == [["bot", "False"], ["bot", "True"]]
            assert note["method"] == "notifications/progress"
            assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"hello": "alice"}}
            assert sim.sim is not None
            protocols = sim.sim.profile("bot")["preferences"]["protocols"]
            # versions: required, the versions the bot serves (declared as given).
            assert protocols == {"mcp": {"versions": ["2026-07-28"], "transports": {"chat": True}}}
        finally:
            bot.kill()
            bot.wait(10)

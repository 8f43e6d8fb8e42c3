"""README's examples, and the tour they point to, run as written (from the repository root).

Issue 17 made README.md a front page: it keeps one short example of each
kind, and the rest of its examples moved, unchanged, to docs/examples.md (the
tour) and docs/install.md (installing). The standalone examples of the three
pages together are the ones README.md held before, and each runs as a
program. The responder and caller examples talk to a chat core that the reader
starts on port 5225: ``test_the_front_page_bot_and_caller_run_against_the_simulator``
runs the front page's bot and caller against a simulator of its own, and
``tests/docs/test_adapter_docs.py`` and ``tests/docs/test_chat_docs.py`` run the tour's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from _simulator_thread import SimulatorThread

ROOT = Path(__file__).resolve().parents[2]
#: The front page, and the pages its examples moved to.
PAGES = ("README.md", "docs/examples.md", "docs/install.md")
DOC_URL = "ws://127.0.0.1:5225"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text("utf-8"), re.S)


BLOCKS = [(page, block) for page in PAGES for block in python_blocks(page)]
STANDALONE = [(page, block) for page, block in BLOCKS if DOC_URL not in block]


def test_readme_has_examples() -> None:
    assert len(STANDALONE) >= 8
    # The front page itself keeps runnable examples: seal and open, the backend.
    assert sum(1 for page, _ in STANDALONE if page == "README.md") >= 2


@pytest.mark.parametrize(
    "index", range(len(STANDALONE)), ids=[f"{p}-{i}" for i, (p, _) in enumerate(STANDALONE)]
)
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"readme_{index}.py"
    script.write_text(STANDALONE[index][1], "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def front_page_bot_and_caller() -> tuple[str, str]:
    blocks = python_blocks("README.md")
    (bot,) = [b for b in blocks if "serve_calls(" in b]
    (caller,) = [b for b in blocks if "SimplexTransport(" in b]
    return bot, caller


def test_the_front_page_bot_and_caller_run_against_the_simulator() -> None:
    """Issue 17: "one short example each: ... a bot on both transports, a caller".

    The bot serves one MCP SDK server over Service RPC (``serve``) and over
    ``/_call`` (``serve_calls``) and declares both transports in its profile
    (protocol text, "transports.chat", "transports.rpc"); the caller reaches
    it both ways through the MCP SDK's own client.
    """
    pytest.importorskip("mcp")
    bot_code, caller_code = front_page_bot_and_caller()
    with SimulatorThread(contacts=("alice", "bot")) as sim:
        bot = subprocess.Popen(
            [sys.executable, "-c", bot_code.replace(DOC_URL, sim.url)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert bot.stdout is not None and bot.stderr is not None
            link = bot.stdout.readline().strip()
            assert link.startswith("simplex:/"), bot.stderr.read() if not link else link
            # Issue 30: with the link alone the caller needs no conversation (a plain
            # simulator works); with alice's contact with the bot, @1, it also calls there.
            for extra, expected in (
                ((), ["rpc One anvil: 120 EUR."]),
                (("@1",), ["rpc One anvil: 120 EUR.", "chat One anvil: 120 EUR."]),
            ):
                caller = subprocess.run(
                    [sys.executable, "-c", caller_code.replace(DOC_URL, sim.url), link, *extra],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert caller.returncode == 0, caller.stderr[-2000:]
                assert caller.stdout.splitlines() == expected
            assert sim.sim is not None
            protocols = sim.sim.profile("bot")["preferences"]["protocols"]
            assert protocols["mcp"]["transports"] == {"chat": True, "rpc": True}
            assert protocols["mcp"]["versions"]  # "versions: required"
        finally:
            bot.kill()
            bot.wait(10)

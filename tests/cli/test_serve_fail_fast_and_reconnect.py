"""Fail fast, then stay up (issue 30, item 8).

* An upstream that never answered once (the command is not found, the child exits
  before the MCP handshake, the URL does not answer) is one line and exit status 2,
  before serve's ready lines: a typo no longer looks like a healthy bot.
* Once serving, a chat core that goes away is connected to again with backoff; serve
  keeps its address and its handlers, and logs each loss and recovery.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from _programs import CLI, Running
from _simulator_thread import SimulatorThread as Sim

pytest.importorskip("mcp.server")


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with Sim() as s:
        yield s


def serve(sim: Sim, core: str, *upstream: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "serve", "--core", f"{sim.url}/{core}", "--start", "restart", *upstream],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    ("core", "upstream", "needle"),
    [
        ("nocmd", ("--mcp-stdio", "--", "no-such-mcp-server-30"), "No such file"),
        ("exits", ("--mcp-stdio", "--", sys.executable, "-c", "print('hi')"), "npx needs -y"),
        ("deadurl", ("--mcp-url", "http://127.0.0.1:1/mcp"), "check the URL"),
    ],
)
def test_an_upstream_that_never_answered_is_one_line_and_exit_2(
    sim: Sim, core: str, upstream: tuple[str, ...], needle: str
) -> None:
    done = serve(sim, core, *upstream)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # no ready lines: it never served
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("simplex-rpc serve: --mcp-") and "never answered" in last, last
    assert needle in last, last
    assert "Traceback" not in done.stderr


def test_serve_reconnects_to_a_core_that_went_away_and_keeps_its_address(sim: Sim) -> None:
    bot = Running.__new__(Running)
    bot.process = subprocess.Popen(
        [*CLI, "serve", "--core", f"{sim.url}/bob", "--start", "restart", "--echo", "--address"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        link = bot.line().removeprefix("address: ")
        assert bot.line().startswith("serving: ")

        def call() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*CLI, "call", "--core", f"{sim.url}/alice", "--timeout", "20", link, "echo",
                 '{"n": 1}'],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        assert call().returncode == 0
        sim.drop("bob")
        answered = call()  # serve is back within its backoff: the same address answers
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout) == {"response": {"n": 1}}
        status, out, err = bot.stop(signal.SIGTERM)
    finally:
        bot.kill()
    assert status == 0, err
    assert out == ""  # the ready lines were printed once
    assert "lost the chat core" in err and "connecting again in 0.5 s" in err, err
    assert "serving again: the chat core is back" in err, err
    assert "Traceback" not in err

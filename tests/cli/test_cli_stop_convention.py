"""One stop convention for every long-running command (issue 30, item 3).

docs/cli.md, "Stopping": SIGTERM and Ctrl-C (SIGINT) run the command's graceful
stop, print one summary line on stderr and exit 0; never a traceback. A stdio
``mcp-proxy`` answers every request it has read before it exits, and stops
within a bound when its stdin is an open pipe with nothing written.

Every command runs as a real ``simplex-rpc`` subprocess against a simulator in
this process; every wait is bounded and fails with what the process said.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from _programs import CLI, Running
from _simulator_thread import SimulatorThread
from simplex_rpc.testing import CoreSimulator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_two_tools.py"
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


class World(SimulatorThread):
    """A simulator in a thread: alice and bob are contacts; ``silent`` is carol's address
    (ratchet keys), whose core never serves, so a request to it waits out its timeout."""

    def __init__(self) -> None:
        super().__init__(("alice", "bob"), setup=_carol_silent)

    @property
    def silent(self) -> str:
        return str(self.facts["silent"])


def _carol_silent(sim: CoreSimulator) -> dict[str, Any]:
    return {"silent": sim.create_address("carol", pq_ratchet=True)["connShortLink"]}


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World() as w:
        yield w


@contextmanager
def started(*args: str, stdin: int | None = subprocess.DEVNULL) -> Iterator[Running]:
    run = Running.__new__(Running)
    run.process = subprocess.Popen(
        [*CLI, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield run
    finally:
        run.kill()


def stopped_cleanly(run: Running, how: int, name: str) -> str:
    """Send ``how``; exit status 0, the last stderr line the summary, no traceback."""
    status, _, err = run.stop(how, within=60)
    lines = err.strip().splitlines()
    assert status == 0, err
    assert "Traceback" not in err and "never retrieved" not in err, err
    assert lines and lines[-1].startswith(f"simplex-rpc {name}: stopped"), err
    return lines[-1]


def wait_stderr(run: Running, needle: str, within: float = 60.0) -> None:
    """Read stderr lines until one holds ``needle`` (the command is under way)."""
    assert run.process.stderr is not None
    deadline = time.monotonic() + within
    got: list[str] = []

    def read() -> None:
        for line in run.process.stderr:  # type: ignore[union-attr]
            got.append(line)
            if needle in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    assert any(needle in line for line in got), f"no {needle!r} on stderr: {''.join(got)}"


@pytest.mark.parametrize("how", SIGNALS)
def test_simulator(how: int) -> None:
    with started("simulator", "--port", "0") as run:
        assert run.line().startswith("listening: ")
        assert "closed" in stopped_cleanly(run, how, "simulator")


@pytest.mark.parametrize("how", SIGNALS)
def test_serve(world: World, how: int) -> None:
    with started("serve", "--core", f"{world.url}/bob", "--echo", "--start", "restart") as run:
        assert run.line().startswith("serving: ")
        assert "answered" in stopped_cleanly(run, how, "serve")


@pytest.mark.parametrize("how", SIGNALS)
def test_a2a_proxy(world: World, how: int) -> None:
    with started("a2a-proxy", "--core", f"{world.url}/alice", world.silent) as run:
        assert run.line().startswith("listening: http://127.0.0.1:")
        assert "no longer listening" in stopped_cleanly(run, how, "a2a-proxy")


@pytest.mark.parametrize("how", SIGNALS)
def test_mcp_proxy_http(world: World, how: int) -> None:
    args = ("mcp-proxy", "--core", f"{world.url}/alice", "--listen", "127.0.0.1:0")
    with started(*args, world.silent) as run:
        assert run.line().startswith("listening: http://127.0.0.1:")
        assert "no longer listening" in stopped_cleanly(run, how, "mcp-proxy")


@pytest.mark.parametrize("how", SIGNALS)
def test_mcp_proxy_stdio_with_an_open_pipe_stops(world: World, how: int) -> None:
    """stdin is a pipe nobody writes to: the stop does not wait for a line that never comes."""
    args = ("mcp-proxy", "--core", f"{world.url}/alice", "--log-level", "info", world.silent)
    with started(*args, stdin=subprocess.PIPE) as run:
        wait_stderr(run, "connected to the chat core", within=30)
        line = stopped_cleanly(run, how, "mcp-proxy")
        assert line == "simplex-rpc mcp-proxy: stopped: 0 answered, 0 unanswered"


def test_mcp_proxy_stdio_answers_what_it_read_before_stdin_closed(world: World) -> None:
    """A piped batch gets every answer: the last request is in flight when stdin closes."""
    with started(
        "serve", "--core", f"{world.url}/bob", "--start", "restart", "--address", "--mcp-module",
        f"{EXAMPLE}:build_server",
    ) as bot:  # fmt: skip
        link = bot.line().removeprefix("address: ")
        batch = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "batch", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "availability", "arguments": {"item": "anvil"}},
            },
        ]
        text = "".join(json.dumps(m) + "\n" for m in batch)
        done = subprocess.run(
            [*CLI, "mcp-proxy", "--core", f"{world.url}/alice", link],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
        assert done.returncode == 0, done.stderr
        assert set(answers) == {1, 2}, done.stdout + done.stderr
        content = answers[2]["result"]["content"]
        assert content[0]["text"] == "12 anvils are in stock."


@pytest.mark.parametrize("how", SIGNALS)
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("call", ("call", "{core}", "--timeout", "600", "{silent}", "echo", "1")),
        ("call-chat", ("call-chat", "{core}", "--wait", "600", "@1", "echo", "{{}}")),
        ("mcp call", ("mcp", "call", "{core}", "--timeout", "600", "{silent}", "t")),
        ("a2a send", ("a2a", "send", "{core}", "--timeout", "600", "{silent}", "hi")),
    ],
)
def test_calls_waiting_for_an_answer(
    world: World, how: int, name: str, args: tuple[str, ...]
) -> None:
    """A call stopped while it waits: one line, exit 0. (Alice's contact bob serves nothing;
    carol's address never answers.)"""
    argv = [a.format(core=f"--core={world.url}/alice", silent=world.silent) for a in args]
    with started(*argv, "--log-level", "info") as run:
        wait_stderr(run, "connected to the chat core", within=30)
        time.sleep(0.5)  # not a timing assertion: let the request leave
        stopped_cleanly(run, how, name)


@pytest.mark.parametrize("how", SIGNALS)
def test_bench(how: int) -> None:
    with started("bench", "--rounds", "100000", "--only", "pad") as run:
        time.sleep(2)  # not a timing assertion: the run is under way (it takes minutes)
        stopped_cleanly(run, how, "bench")


@pytest.mark.parametrize("how", SIGNALS)
def test_bench_adapter_stops_without_a_traceback(how: int) -> None:
    """The issue's case: Ctrl-C during bench adapter printed 'Task exception was never
    retrieved ... ChatCoreClosed'."""
    with started("bench", "adapter", "--only", "unsigned,signed,faults") as run:
        wait_stderr(run, "unsigned:")
        time.sleep(0.5)  # not a timing assertion: requests are in flight
        stopped_cleanly(run, how, "bench adapter")


def test_every_long_running_command_is_in_the_table_of_docs_cli() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = text.split("## Stopping", 1)[1].split("\n## ", 1)[0]
    for name in (
        "serve", "simulator", "mcp-proxy", "a2a-proxy", "bench", "call", "call-chat",
        "mcp call", "a2a send",
    ):  # fmt: skip
        assert f"`{name}`" in section, name

"""Ready lines on stdout, logs on stderr, SIGTERM as a graceful stop (issue 22, items 4 and 5).

Item 4: "`serve`, `simulator`, and the proxies print their ready lines on stdout, one
`key: value` per line, once they serve: `address: LINK`, `serving: PROTOCOLS`,
`listening: URL`. Human logs go to stderr. `--json` makes the ready lines one JSON
object." So `LINK=$(simplex-rpc serve ... --address | ...)` captures the link.

Item 5: "SIGTERM and SIGINT both run the graceful stop, then exit 0. The stop prints
one summary line: answered, shed, refused, unanswered." Done when: "A test sends
SIGTERM to `serve` and sees a graceful stop and exit 0."

Every process here is a real ``simplex-rpc`` subprocess against a simulator on a free
loopback port; every wait is bounded and fails with what the process said.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from _programs import CLI, Running
from _simulator_thread import SimulatorThread


@contextmanager
def running(*args: str) -> Iterator[Running]:
    proc = Running(*args)
    try:
        yield proc
    finally:
        proc.kill()


def test_serve_prints_its_ready_lines_on_stdout() -> None:
    """`address: LINK` and `serving: PROTOCOLS`, one `key: value` per line, on stdout."""
    with SimulatorThread() as sim, running(
        "serve", "--core", sim.url + "/bob", "--echo", "--protocol", "echo", "--protocol", "mcp",
        "--address",
    ) as serve:  # fmt: skip
        address = serve.line()
        serving = serve.line()
        assert re.fullmatch(r"address: simplex:/\S+", address), address
        assert serving == "serving: echo, mcp", serving


def test_serve_json_makes_the_ready_lines_one_json_object() -> None:
    with SimulatorThread() as sim, running(
        "serve", "--core", sim.url + "/bob", "--echo", "--address", "--json"
    ) as serve:  # fmt: skip
        ready = json.loads(serve.line())
        assert set(ready) == {"address", "serving"}
        assert ready["address"].startswith("simplex:/")
        assert ready["serving"] == ["echo"]


def test_simulator_prints_listening_on_stdout_and_its_note_on_stderr() -> None:
    with running("simulator", "--port", "0") as sim:
        line = sim.line()
        assert re.fullmatch(r"listening: ws://127\.0\.0\.1:\d+", line), line
        status, out, err = sim.stop(signal.SIGTERM)
        assert status == 0, err
        assert out == ""  # nothing else for programs
        assert "simulator" in err  # the human note went to stderr


def test_simulator_json_ready_line() -> None:
    with running("simulator", "--port", "0", "--json") as sim:
        ready = json.loads(sim.line())
        assert set(ready) == {"listening"} and ready["listening"].startswith("ws://127.0.0.1:")


def _call(url: str, link: str) -> None:
    done = subprocess.run(
        [*CLI, "call", "--core", url, link, "echo", '{"q": 1}'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"response": {"q": 1}}


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_runs_the_graceful_stop_and_exits_0_with_one_summary_line(how: int) -> None:
    """ "SIGTERM and SIGINT both run the graceful stop, then exit 0. The stop prints one
    summary line: answered, shed, refused, unanswered.\""""
    with SimulatorThread() as sim, running(
        "serve", "--core", sim.url + "/bob", "--echo", "--address"
    ) as serve:  # fmt: skip
        link = serve.line().removeprefix("address: ")
        assert serve.line() == "serving: echo"
        _call(sim.url + "/alice", link)
        status, out, err = serve.stop(how)
    assert status == 0, err
    assert out == ""
    assert "Traceback" not in err
    summary = [line for line in err.splitlines() if "answered" in line]
    assert len(summary) == 1, err
    assert re.search(r"\b1 answered, 0 shed, 0 refused, 0 unanswered\b", summary[0]), summary


async def _start_chat_without_requests(url: str) -> None:
    """What `simplex-chat -p PORT` does at start (runSimplexChat starts the chat itself):
    the chat runs, with service requests off."""
    from simplex_rpc.adapter import ChatCore

    async with ChatCore.connect(url) as core:
        assert await core.start(service_requests=False)


@pytest.mark.anyio
async def test_serve_on_a_running_chat_fails_naming_both_ways_out() -> None:
    """Issue 28, item 3: `/_start … service_requests=on` on a running chat answers
    chatRunning and changes nothing; serve says so, exit 2, and names `-m` and
    `--start restart`, instead of serving requests that never come."""
    with SimulatorThread() as sim:
        await _start_chat_without_requests(sim.url + "/bob")
        done = subprocess.run(
            [*CLI, "serve", "--core", sim.url + "/bob", "--echo"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "-m" in done.stderr and "restart" in done.stderr, done.stderr


@pytest.mark.anyio
async def test_serve_start_restart_restarts_a_running_chat_with_service_requests_on() -> None:
    with SimulatorThread() as sim:
        await _start_chat_without_requests(sim.url + "/bob")
        with running(
            "serve", "--core", sim.url + "/bob", "--echo", "--address", "--start", "restart"
        ) as serve:  # fmt: skip
            link = serve.line().removeprefix("address: ")
            assert serve.line() == "serving: echo"
            _call(sim.url + "/alice", link)
            status, _, err = serve.stop(signal.SIGTERM)
    assert status == 0, err
    assert re.search(r"\b1 answered\b", err), err

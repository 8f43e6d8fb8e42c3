"""``simplex-rpc call`` and ``simplex-rpc serve`` against the simulator.

The simulator and the responder run in a background thread with their own
event loop; the command line runs in the test's thread, as a user runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import simplex_rpc as sx
from _cli_serving import EXAMPLE, Background, call, serving
from _waiting import until
from simplex_rpc.adapter import ServiceRequest
from simplex_rpc.cli import CliError, build_parser, main
from simplex_rpc.cli import _serve as _cli_serve
from simplex_rpc.cli import _simulator as _cli_simulator
from simplex_rpc.testing import CoreSimulator
from simplex_rpc.vectors._examples import mcp_tools_call_request


def test_call_prints_the_response(capsys: pytest.CaptureFixture[str]) -> None:
    with serving("--echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call(bg, "echo", '{"q": [1, 2]}')) == 0
    assert json.loads(capsys.readouterr().out) == {"response": {"q": [1, 2]}}


def test_call_signed_with_a_key_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = sx.SigningKey.generate()
    key_file = tmp_path / "key.txt"
    key_file.write_text(key.encode() + "\n")
    key_file.chmod(0o600)  # a key file others can read is refused, as ssh does
    with serving("--echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        status = main(call(bg, "echo", "7", "--sign-key", f"@{key_file}", "--request-key"))
    out, err = capsys.readouterr()
    assert status == 0 and json.loads(out) == {"response": 7}
    assert key.encode() not in out + err


def test_call_exit_status_1_for_an_error_response(capsys: pytest.CaptureFixture[str]) -> None:
    with serving("--echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call(bg, "mcp", "{}")) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "unsupported_protocol"


def test_call_reports_refusals_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with serving("--echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        target = "simplex:/nowhere"
        assert main(["call", "--core", bg.url, "--timeout", "2", target, "echo", "{}"]) == 2
        err = capsys.readouterr().err.splitlines()[-1]  # the responder printed its address before
        assert err.startswith("simplex-rpc call: chat core refused /_service_request")
        assert "invalidConnReq" in err and "Traceback" not in err
        # A bare name fails in the core too (the plan's target resolution): refused here.
        assert main(["call", "--core", bg.url, "--timeout", "2", "nowhere", "echo", "{}"]) == 2
        err = capsys.readouterr().err.splitlines()[-1]
        assert "@name.simplex" in err and "Traceback" not in err
        assert main(call(bg, "echo", "{not json")) == 2
        assert "JSON" in capsys.readouterr().err
        bad_key = tmp_path / "bad"
        bad_key.write_text("AAAA")
        assert main(call(bg, "echo", "1", "--sign-key", f"@{bad_key}")) == 2
        assert "--sign-key" in capsys.readouterr().err
        assert main(call(bg, "echo", "1", "--request-key")) == 2
        assert "needs --sign-key" in capsys.readouterr().err
        assert main(call(bg, "Not-A-Name", "1")) == 2
        assert "protocol name" in capsys.readouterr().err


def test_call_with_a_version(capsys: pytest.CaptureFixture[str]) -> None:
    with serving("--echo", "--protocol", "echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call(bg, "echo", "1", "--version", '"1.0"', "--retries", "1")) == 0
    assert json.loads(capsys.readouterr().out) == {"response": 1}


def test_serve_an_mcp_server_module(capsys: pytest.CaptureFixture[str]) -> None:
    """--mcp-module: an MCP SDK server behind McpBridge (the protocol text's MCP example)."""
    request: dict[str, Any] = mcp_tools_call_request()["request"]
    with serving("--mcp-module", f"{EXAMPLE}:build_server", "--conversation-tool", "catalog") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call(bg, "mcp", json.dumps(request))) == 0
        answer = json.loads(capsys.readouterr().out)["response"]
        assert answer["id"] == 1
        assert answer["result"]["content"][0]["text"] == "12 anvils are in stock."
        request["params"] = {**request["params"], "name": "catalog", "arguments": {}}
        assert main(call(bg, "mcp", json.dumps(request))) == 1
        assert json.loads(capsys.readouterr().out)["error"]["code"] == "conversation_required"


def test_echo_handler_returns_the_request_value() -> None:
    request = ServiceRequest(
        request_id="r", signer=None, request=sx.Request(protocol="x", request=[1]), user_id=1
    )
    assert _cli_serve.echo_handler(request) == [1]


def test_load_object() -> None:
    assert _cli_serve.load_object("json:dumps") is json.dumps
    assert callable(_cli_serve.load_object(f"{EXAMPLE}:build_server"))
    for spec in ("nocolon", "json:", ":x", "no_such_module_xyz:x", "json:no_such_name"):
        with pytest.raises(CliError):
            _cli_serve.load_object(spec)
    with pytest.raises(CliError):
        _cli_serve.load_object("/nonexistent/file.py:x")


SECONDS_OPTIONS = [
    ["call", "--core", "ws://x", "t", "p", "1", "--max-retry-after"],
    ["serve", "--core", "ws://x", "--echo", "--deadline"],
    ["call-chat", "--core", "ws://x", "@1", "p", "1", "--wait"],
    ["simulator", "--response-window"],
    ["mcp-proxy", "--core", "ws://x", "simplex:/a#x", "--timeout"],
]


@pytest.mark.parametrize("option", SECONDS_OPTIONS, ids=lambda o: f"{o[0]} {o[-1]}")
@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "soon"])
def test_every_seconds_option_takes_a_positive_finite_number(
    option: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One check for every option in seconds: a usage error naming the option."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*option, text])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert option[-1] in err and "Traceback" not in err
    want = "is not a number" if text == "soon" else "must be a positive number of seconds"
    assert want in err
    assert build_parser().parse_args([*option, "2.5"]) is not None


def test_serve_arguments() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--core", "ws://x"])  # --echo or --mcp-module
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--core", "ws://x", "--echo", "--rate-limit", "x/y"])
    args = parser.parse_args(
        ["serve", "--core", "ws://x", "--echo", "--rate-limit", "5/10", "--deadline", "3"]
    )
    assert args.rate_limit.requests == 5 and args.rate_limit.per == 10.0
    assert args.deadline == 3.0 and args.start == "on"
    assert parser.parse_args(["serve", "--core", "ws://x", "--echo", "--no-start"]).start == "off"
    restart = parser.parse_args(["serve", "--core", "ws://x", "--echo", "--start", "restart"])
    assert restart.start == "restart"
    with pytest.raises(SystemExit):
        parser.parse_args(["call", "--core", "ws://x", "t", "p", "1", "--timeout", "0"])
    with pytest.raises(SystemExit):
        parser.parse_args(["call", "--core", "ws://x", "t", "p", "1", "--retries", "-1"])


def test_serve_until_the_core_goes_away(capsys: pytest.CaptureFixture[str]) -> None:
    """serve ends with a one-line error when the connection is lost."""
    finished = threading.Event()
    status: list[int] = []

    async def responder(bg: Background) -> None:
        assert bg.sim is not None

        async def drop_soon() -> None:
            assert bg.sim is not None
            await until(lambda: bg.sim.drop_connections("bob"), "bob's connection dropped")

        dropper = asyncio.create_task(drop_soon())
        bg.ready.set()
        argv = ["serve", "--core", bg.sim.url_for("bob"), "--echo"]
        status.append(await asyncio.to_thread(main, argv))
        await dropper
        finished.set()

    with Background(responder):
        assert finished.wait(20)
    assert status == [2]
    assert "connection to the chat core" in capsys.readouterr().err


def test_connecting_to_a_closed_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["call", "--core", f"ws://127.0.0.1:{port}", "t", "echo", "1"]) == 2
    assert "cannot connect" in capsys.readouterr().err


@pytest.mark.anyio
async def test_simulator_flags_set_the_core_model() -> None:
    """``-m`` (as simplex-chat -m), ``--ack`` and ``--command-delay`` reach the simulator;
    without ``-m`` each core's chat runs from the start and ``/_start`` answers chatRunning
    (src/Simplex/Chat/Core.hs: runSimplexChat starts the chat unless in maintenance)."""
    from simplex_rpc.adapter import ChatCore
    from simplex_rpc.testing import CoreSimulator

    made: list[CoreSimulator] = []

    async def scenario(argv: list[str], expected_start: str) -> None:
        args = build_parser().parse_args(["simulator", "--port", "0", *argv])
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        real = _cli_simulator.run_simulator
        task = asyncio.create_task(real(args, on_ready=ready.set_result))
        url = await ready
        async with ChatCore.connect(url + "/x") as core:
            assert (await core.command("/_start main=on"))["type"] == expected_start
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    original = CoreSimulator.__init__

    def recording(self: CoreSimulator, **kwargs: Any) -> None:
        original(self, **kwargs)
        made.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CoreSimulator, "__init__", recording)
        await scenario([], "chatRunning")
        await scenario(
            ["-m", "--ack", "cmdOk", "--command-delay", "0", "--command-delay", "/_send=0.25"],
            "chatStarted",
        )
    assert not made[0].maintenance and made[0].ack == "serviceReplyAccepted"
    assert made[1].maintenance and made[1].ack == "cmdOk"
    delays = made[1]._model  # the model behind the simulator holds the delays
    assert delays.command_delay == 0 and delays.command_delays == {"/_send": 0.25}


@pytest.mark.anyio
async def test_simulator_subcommand_serves_until_cancelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """simplex-rpc simulator -m: a CoreSimulator users can test their bots against, its
    chats not started until /_start (as simplex-chat -m); without -m the chat runs from
    the start, and start(service_requests=True) names the two ways out, restart=True
    taking one."""
    from simplex_rpc.adapter import ChatCore, ChatCoreError

    for maintenance in (True, False):
        argv = ["simulator", *(["-m"] if maintenance else []), "--port", "0"]
        args = build_parser().parse_args([*argv, "--response-window", "5"])
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(_cli_simulator.run_simulator(args, on_ready=ready.set_result))
        url = await ready
        async with ChatCore.connect(url + "/x") as core:
            if maintenance:
                assert await core.start()
            else:
                with pytest.raises(ChatCoreError, match="-m"):
                    await core.start()
                assert await core.start(restart=True)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # The ready line is for programs (stdout); the note for people goes to stderr.
    out, err = capsys.readouterr()
    assert out.startswith("listening: ws://127.0.0.1:")
    assert "one simulated core per URL path" in err

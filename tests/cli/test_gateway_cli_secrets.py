"""Secrets stay off the command line and out of the logs (issue 32, item 9).

``simplex-rpc serve`` runs in its own process, as a user runs it, against the
simulator (a thread of the test) and the MCP fixture server
(tests/mcp_upstreams/server.py, over stdio or under uvicorn):

* ``--header @FILE`` and ``--env-file FILE``: the credential reaches the upstream
  (it answers the SHA-256 of what it got) and is on no command line;
* a credential in the ``--mcp-url`` URL (user part and query) and in a header is in
  no line of the log at ``--log-level debug``, httpx's and the MCP client's included;
* ``--log-level`` is an option of every command, and decides what stderr shows.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client

from _programs import Program, serving
from _simulator_thread import SimulatorThread
from _upstream import SERVER, http_server, text_of
from simplex_rpc.adapter import ChatCore
from simplex_rpc.cli import main
from simplex_rpc.cli._common import forget_log_choices
from simplex_rpc.cli._main import build_parser
from simplex_rpc.mcp import SimplexTransport


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def call_tool(sim: SimulatorThread, link: str, name: str, arguments: dict[str, str]) -> str:
    """alice calls one tool of the bot over Service RPC; its text."""
    async with ChatCore.connect(f"{sim.url}/alice") as alice:
        await alice.start(service_requests=False)
        async with Client(SimplexTransport(alice, 1, link, via="rpc", timeout=30)) as client:
            return text_of(await client.call_tool(name, arguments))


def command_lines(program: Program) -> list[str]:
    """The command lines of ``program`` and of its children, as ``ps`` shows them."""
    out = []
    pids = [program.proc.pid]
    while pids:
        pid = pids.pop()
        proc = Path(f"/proc/{pid}")
        try:
            out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            for task in (proc / "task").iterdir():
                children = (task / "children").read_text().split()
                pids += [int(c) for c in children]
        except OSError:
            continue
    return out


@pytest.mark.anyio
async def test_header_from_a_file_reaches_the_upstream_and_no_command_line(tmp_path: Path) -> None:
    """`--header @FILE`: "Name: value" lines, a comment and a blank line; the value goes
    to the upstream with each request, and is on no command line and in no log line."""
    secret = "file-token-9b1d7e"
    headers = tmp_path / "headers"
    headers.write_text(f"# the upstream's key\n\nX-Api-Key: {secret}\nX-Other: 2\n")
    headers.chmod(0o600)
    with http_server() as (url, _), SimulatorThread() as sim:
        options = ("--mcp-url", url, "--header", f"@{headers}", "--log-level", "debug")
        with serving(sim, *options) as (prog, link):
            answer = await call_tool(sim, link, "seen_header", {"name": "x-api-key"})
            assert answer == digest(secret)
            assert all(secret not in line for line in command_lines(prog))
        assert all(secret not in line for line in prog.seen["err"] + prog.seen["out"])


@pytest.mark.anyio
async def test_env_file_sets_the_childs_environment_off_the_command_line(tmp_path: Path) -> None:
    """`--env-file FILE` with --mcp-stdio: NAME=VALUE lines (quotes removed, `export`
    allowed) reach the child's environment, on no command line and in no log line
    (at --log-level debug)."""
    secret = "env-key-4c2a90"
    env = tmp_path / "env"
    env.write_text(f'# keys\nexport API_KEY="{secret}"\nOTHER=plain value\n')
    with SimulatorThread() as sim:
        options = (
            *("--env-file", str(env), "--log-level", "debug"),
            *("--mcp-stdio", "--", sys.executable, str(SERVER), "--stdio"),
        )
        with serving(sim, *options) as (prog, link):
            assert (await call_tool(sim, link, "env", {"name": "API_KEY"})) == digest(secret)
            other = await call_tool(sim, link, "env", {"name": "OTHER"})
            assert other == digest("plain value")
            assert all(secret not in line for line in command_lines(prog))
        assert all(secret not in line for line in prog.seen["err"] + prog.seen["out"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("NOT A PAIR\n", "line 1: expected NAME=VALUE"),
        ("1BAD=x\n", "line 1: expected NAME=VALUE"),
        (None, "cannot read"),
    ],
)
def test_a_bad_env_file_is_a_usage_error_without_its_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    env = tmp_path / "env"
    if content is not None:
        env.write_text("SECRET=do-not-echo-7f\n" + content.replace("line 1", "line 2"))
        message = message.replace("line 1", "line 2")
    argv = ["serve", "--core", "ws://127.0.0.1:1", "--env-file", str(env), "--mcp-stdio"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--", "true"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "do-not-echo-7f" not in err


def test_a_bad_header_file_is_a_usage_error_without_its_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    headers = tmp_path / "headers"
    headers.write_text("X-Api-Key: hidden-value-31\nno colon hidden-value-32\n")
    argv = ["serve", "--core", "ws://127.0.0.1:1", "--mcp-url", "http://127.0.0.1:1/mcp"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--header", f"@{headers}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "hidden-value" not in err


@pytest.mark.anyio
async def test_a_credential_in_the_url_is_in_no_log_line_at_debug() -> None:
    """The probe: credentials inside a --mcp-url URL appeared in httpx's INFO lines and
    the MCP client's DEBUG lines. Now, at --log-level debug, where those lines are
    shown (the check that they are), no line has the URL's user part, its query value
    or the --header value."""
    user_secret = "pw-url-83ad"
    query_secret = "q-token-55e1"
    header_secret = "hdr-token-c07b"
    with http_server() as (url, _), SimulatorThread() as sim:
        credentialed = url.replace("http://", f"http://op:{user_secret}@")
        credentialed += f"?token={query_secret}"
        options = (
            *("--mcp-url", credentialed, "--header", f"Authorization: Bearer {header_secret}"),
            *("--log-level", "debug"),
        )
        with serving(sim, *options) as (prog, link):
            assert (await call_tool(sim, link, "echo", {"text": "hi"})) == "hi"
    log = prog.seen["err"]
    assert any("HTTP Request:" in line for line in log), log[:20]  # httpx's INFO lines
    assert any("token=<redacted>" in line for line in log), log[:20]
    for secret in (user_secret, query_secret, header_secret):
        assert all(secret not in line for line in log + prog.seen["out"]), secret


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                out += _parsers(child)
    return out


def test_every_command_has_log_level() -> None:
    """ "No command has --log-level, so an operator cannot get DEBUG without code": now
    every command and subcommand of the parser takes it."""
    parsers = _parsers(build_parser())
    assert len(parsers) > 20
    for parser in parsers:
        options = {s for a in parser._actions for s in a.option_strings}
        assert "--log-level" in options, parser.prog


@pytest.mark.anyio
async def test_log_level_decides_what_serve_writes_on_stderr(tmp_path: Path) -> None:
    """At --log-level error the upstream's INFO line ("running") is not written; at
    --log-level debug the DEBUG lines of the libraries underneath are."""
    upstream = ("--mcp-stdio", "--", sys.executable, str(SERVER), "--stdio")
    with SimulatorThread() as sim:
        with serving(sim, "--log-level", "error", *upstream) as (quiet, link):
            assert (await call_tool(sim, link, "echo", {"text": "q"})) == "q"
        # The chat now runs with service requests on: a second serve starts nothing
        # (a running chat answers chatRunning to /_start: Commands.hs StartChat).
        debug = ("--log-level", "debug", "--start", "off")
        with serving(sim, *debug, *upstream) as (loud, link):
            assert (await call_tool(sim, link, "echo", {"text": "l"})) == "l"
    assert not any("running (revision" in line for line in quiet.seen["err"])
    assert any("running (revision" in line for line in loud.seen["err"])
    assert len(loud.seen["err"]) > len(quiet.seen["err"]) + 10


def test_a_bad_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["keygen", "--log-level", "loud"])
    assert exited.value.code == 2
    assert "--log-level" in capsys.readouterr().err


def test_a_secrets_file_others_can_read_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for a key file (ssh's rule): a --header or --env-file file that group or others
    can read is named in a warning, with its mode; its content never is."""
    headers = tmp_path / "headers"
    headers.write_text("X-Api-Key: never-shown-1a\n")
    headers.chmod(0o644)
    env = tmp_path / "env"
    env.write_text("KEY=never-shown-2b\n")
    env.chmod(0o600)
    parser = build_parser()
    upstream = ["--mcp-url", "http://127.0.0.1:1/mcp", "--header", f"@{headers}"]
    try:
        args = parser.parse_args(
            ["serve", "--core", "ws://127.0.0.1:1", *upstream, "--env-file", str(env)]
        )
    finally:
        forget_log_choices()  # what main() does at its end: the values are forgotten
    assert args.headers == [("X-Api-Key", "never-shown-1a")]
    assert args.env_file == {"KEY": "never-shown-2b"}
    err = capsys.readouterr().err
    assert f"--header file {str(headers)!r} is readable by others (mode 0644)" in err
    assert "--env-file" not in err and "never-shown" not in err

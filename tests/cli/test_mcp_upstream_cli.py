"""The command line of the MCP gateway and of the HTTP proxy (issue "Across the process
boundary", sections 1 and 4): ``simplex-rpc serve --mcp-stdio -- COMMAND``, ``serve
--mcp-url URL --header 'Name: value'`` and ``simplex-rpc mcp-proxy --listen HOST:PORT``.

Every program runs in its own process, as a user runs it: the simulator (in a thread of
the test), ``simplex-rpc serve`` and ``simplex-rpc mcp-proxy`` (``python -m simplex_rpc``),
and the upstream MCP server (tests/mcp_upstreams/server.py, the official SDK, over stdio
or under uvicorn). The callers are the SDK's ``mcp.Client``: over ``SimplexTransport``,
and over the SDK's own Streamable HTTP client to the proxy. Loopback only.
"""

from __future__ import annotations

import hashlib
import signal
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client

from _programs import Program, serving
from _simulator_thread import SimulatorThread
from _upstream import SERVER, alive, http_server, pids, text_of
from simplex_rpc.adapter import ChatCore
from simplex_rpc.cli import main
from simplex_rpc.mcp import SimplexTransport


def stdio_upstream(marks: Path | None = None) -> tuple[str, ...]:
    """``--mcp-stdio -- [env UPSTREAM_MARKS=FILE] python server.py --stdio``.

    The SDK's stdio client gives the child a small default environment, so a variable
    the server needs goes on its command line through ``env``.
    """
    env = ("env", f"UPSTREAM_MARKS={marks}") if marks is not None else ()
    return ("--mcp-stdio", "--", *env, sys.executable, str(SERVER), "--stdio")


async def call_echo(sim: SimulatorThread, link: str, text: str) -> list[str]:
    """alice lists the bot's tools and calls echo over Service RPC; the answers."""
    async with ChatCore.connect(f"{sim.url}/alice") as alice:
        await alice.start(service_requests=False)
        async with Client(SimplexTransport(alice, 1, link, via="rpc", timeout=30)) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            return [",".join(names), text_of(await client.call_tool("echo", {"text": text}))]


@pytest.mark.anyio
async def test_serve_mcp_stdio_serves_a_command_and_stops_its_child(tmp_path: Path) -> None:
    """`simplex-rpc serve --core URL ... --mcp-stdio -- COMMAND [ARG...]` "starts the
    server as a child process"; on Ctrl-C serve stops, and "a child still runs after serve
    stops: never"."""
    marks = tmp_path / "marks"
    with SimulatorThread() as sim:
        with serving(sim, "--chat", "--declare", *stdio_upstream(marks)) as (prog, link):
            names, echoed = await call_echo(sim, link, "over the wire")
            assert "echo" in names.split(",") and echoed == "over the wire"

            # --declare: the revisions served toward SimpleX, over both transports.
            async with ChatCore.connect(f"{sim.url}/alice") as alice:
                mcp_declared = (await alice.link_declarations(1, link)).protocols["mcp"]
            assert mcp_declared.versions == ("2026-07-28",)
            assert mcp_declared.rpc and mcp_declared.chat
            (pid,) = pids(marks)
            assert alive(pid)
            prog.stop(signal.SIGINT)
        assert not alive(pid)
        # The upstream's state is the operator's log, on standard error.
        assert any("running (revision 2026-07-28)" in line for line in prog.seen["err"])


@pytest.mark.anyio
async def test_serve_mcp_url_with_headers(tmp_path: Path) -> None:
    """`serve ... --mcp-url URL [--header 'Name: value']...`: the header reaches the
    upstream with each request; its value is in no line serve writes."""
    secret = "tok-5531-secret"
    with http_server() as (url, _), SimulatorThread() as sim:
        upstream = ("--mcp-url", url, "--header", f"X-Api-Key: {secret}", "--header", "X-B: 2")
        with serving(sim, *upstream) as (prog, link):
            async with ChatCore.connect(f"{sim.url}/alice") as alice:
                await alice.start(service_requests=False)
                transport = SimplexTransport(alice, 1, link, via="rpc", timeout=30)
                async with Client(transport) as client:
                    result = await client.call_tool("seen_header", {"name": "x-api-key"})
            assert text_of(result) == hashlib.sha256(secret.encode()).hexdigest()
        assert all(secret not in line for line in prog.seen["err"] + prog.seen["out"])


@pytest.mark.anyio
async def test_mcp_proxy_listen_serves_streamable_http() -> None:
    """`simplex-rpc mcp-proxy ... --listen HOST:PORT` "serves the same proxy as a Streamable
    HTTP MCP server instead of stdio. It prints listening: http://HOST:PORT/mcp on stdout
    once ready": mcp.Client over the SDK's Streamable HTTP client lists and calls."""
    with SimulatorThread() as sim, serving(sim, *stdio_upstream()) as (_, link):
        proxy = Program("mcp-proxy", "--core", f"{sim.url}/alice", "--listen", "127.0.0.1:0", link)
        try:
            url = proxy.wait_for("out", "listening: ")
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            assert int(url.split(":")[2].split("/")[0]) > 0  # port 0 picked one
            async with Client(url) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                echoed = text_of(await client.call_tool("echo", {"text": "via http"}))
            assert "echo" in names and echoed == "via http"
        finally:
            proxy.stop(signal.SIGINT)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--core", "ws://127.0.0.1:9", "--mcp-stdio"], "give the server's command"),
        (["serve", "--core", "ws://127.0.0.1:9", "--echo", "--", "x"], "unexpected arguments"),
        (["serve", "--core", "ws://127.0.0.1:9", "--mcp-url", "ftp://h/mcp"], "http:// or"),
        (
            ["serve", "--core", "ws://127.0.0.1:9", "--echo", "--header", "A: b"],
            "goes with an HTTP upstream",
        ),
    ],
)
def test_upstream_argument_errors_are_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--header", "no colon"], "expected 'Name: value'"),
        (["--header", "Bad Name: v"], "is not a header name"),
        (["--header", "X-Key: a\x01secret"], "not a valid header field value"),
    ],
)
def test_a_bad_header_is_a_usage_error_without_its_value(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["serve", "--core", "ws://127.0.0.1:9", "--mcp-url", "http://127.0.0.1:9/mcp"]
    with pytest.raises(SystemExit) as caught:
        main([*base, *argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert "secret" not in err


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1:99999", "127.0.0.1:x", ":80"])
def test_a_bad_listen_address_is_a_usage_error(
    listen: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["mcp-proxy", "--core", "ws://127.0.0.1:9", "--listen", listen, "target"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_listen_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = ["mcp-proxy", "--core", "ws://127.0.0.1:9", "--listen", f"127.0.0.1:{port}", "t"]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("simplex-rpc mcp-proxy: --listen 127.0.0.1:") and err.count("\n") == 1

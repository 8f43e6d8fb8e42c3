"""Any MCP server behind a SimpleX bot: ``simplex_rpc.mcp.Upstream`` (issue "Across the
process boundary", section 1).

The upstream is a real MCP server in its own process (tests/mcp_upstreams/server.py,
built with the official SDK), run as a command over stdio or reached at a Streamable
HTTP URL under uvicorn. Nothing here imports it: the gateway must work for a server in
any language. The bot serves it with ``ChatCore.serve`` and ``ChatCore.serve_calls`` on
the simulator; the caller is the SDK's ``mcp.Client`` over ``SimplexTransport``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from _upstream import (
    SERVER,
    alive,
    free_port,
    http_server,
    pids,
    scene,
    stdio,
    text_of,
    transport,
)
from _waiting import until
from simplex_rpc import Request, Response
from simplex_rpc import mcp as mcp_binding
from simplex_rpc.adapter import ChatCore
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.mcp import SERVICE_RPC_ERROR, Upstream
from simplex_rpc.testing import CoreSimulator

REVISION = "2026-07-28"
LEGACY = "2025-11-25"


def hanging(marks: Path) -> bool:
    """Whether a ``hang`` call has reached the fixture server's tool."""
    return marks.exists() and "hanging" in marks.read_text().splitlines()


# -- listed and called, both transports ---------------------------------------------------


@pytest.mark.parametrize("via", ["rpc", "chat"])
@pytest.mark.anyio
async def test_a_stdio_server_is_listed_and_called_on_both_transports(via: str) -> None:
    """`serve ... --mcp-stdio -- COMMAND` in Python: "starts the server as a child process
    and talks to it with the mcp SDK's stdio client"; the SDK client over SimplexTransport
    discovers, lists and calls, at the binding's revision."""

    async with scene(stdio()) as s, Client(transport(s, via)) as client:
        assert client.protocol_version == REVISION
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"echo", "slow", "hang", "crash", "ask", "revision"} <= names
        assert text_of(await client.call_tool("echo", {"text": "über"})) == "über"
        # The upstream's capabilities, as the gateway serves them (no listChanged: no
        # subscriptions/listen over SimpleX).
        tools = client.server_capabilities.tools
        assert tools is not None and not tools.list_changed


@pytest.mark.parametrize("via", ["rpc", "chat"])
@pytest.mark.anyio
async def test_a_streamable_http_server_is_listed_and_called_on_both_transports(via: str) -> None:
    """`serve ... --mcp-url URL`: "reaches a Streamable HTTP server with the SDK's HTTP
    client"; the server runs under uvicorn in its own process."""
    with http_server() as (url, _):
        async with scene(Upstream.http(url)) as s, Client(transport(s, via)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "echo" in names
            assert text_of(await client.call_tool("echo", {"text": "http"})) == "http"


@pytest.mark.anyio
async def test_headers_go_to_the_http_server_and_never_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`--header 'Name: value'`: each header goes with every request to the URL; a
    credential never reaches a log."""
    caplog.set_level(logging.DEBUG)
    with http_server() as (url, _):
        up = Upstream.http(url, headers=[("X-Api-Key", "sekrit-7781")])
        async with scene(up) as s, Client(transport(s, "rpc")) as client:
            result = await client.call_tool("seen_header", {"name": "x-api-key"})
            assert text_of(result) == hashlib.sha256(b"sekrit-7781").hexdigest()
    assert "sekrit-7781" not in caplog.text


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.anyio
async def test_a_server_in_another_language_is_served() -> None:
    """ "Nothing about the upstream may be specific to Python. The gateway must work for a
    server in any language": a hand-written JavaScript server (no SDK) that speaks the
    2025-06-18 handshake, listed and called on both transports."""

    node = shutil.which("node")
    assert node is not None
    up = Upstream.stdio(node, [str(SERVER.with_name("server.js"))])
    async with scene(up) as s:
        for via in ("rpc", "chat"):
            async with Client(transport(s, via)) as client:
                assert client.protocol_version == REVISION
                assert [t.name for t in (await client.list_tools()).tools] == ["shout"]
                result = await client.call_tool("shout", {"text": "quiet"})
                assert text_of(result) == "QUIET"


# -- revisions ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_upstream_of_an_older_revision_is_reached_with_the_initialize_handshake() -> None:
    """ "Toward the upstream it speaks whatever revision the upstream speaks, including the
    initialize handshake of revisions before 2026-07-28": the caller speaks 2026-07-28, the
    upstream (pinned to the handshake loop) sees a 2025-11-25 connection."""

    async with scene(stdio(None, "--legacy")) as s:
        for via in ("rpc", "chat"):
            async with Client(transport(s, via)) as client:
                assert client.protocol_version == REVISION
                assert text_of(await client.call_tool("revision", {})) == LEGACY
                assert text_of(await client.call_tool("echo", {"text": "old"})) == "old"


@pytest.mark.anyio
async def test_server_discover_is_answered_from_the_upstreams_capabilities() -> None:
    """ "server/discover is answered from the upstream's capabilities": the fixture serves
    tools, prompts and resources (MCPServer registers all three), and no completions."""

    async with stdio() as up:
        response = await up.handle(mcp_binding.make_request("server/discover", id=1))
        result = response["result"]
        assert result["supportedVersions"] == list(MODERN_PROTOCOL_VERSIONS)
        assert set(result["capabilities"]) == {"tools", "prompts", "resources"}
        assert result["capabilities"]["resources"] == {"listChanged": False, "subscribe": False}


@pytest.mark.anyio
async def test_declared_versions_are_the_served_ones() -> None:
    """Declarations hold as for McpBridge: the versions a bridge declares are its
    ``supported``, the revisions served toward SimpleX; an unserved revision is -32022."""

    async with stdio() as up:
        assert up.supported == tuple(MODERN_PROTOCOL_VERSIONS)
        old = mcp_binding.make_request("tools/list", id=1)
        old["params"]["_meta"][mcp_binding.PROTOCOL_VERSION_KEY] = "2099-01-01"
        refused = await up.handle(old)
        assert refused["error"]["code"] == mcp_binding.UNSUPPORTED_PROTOCOL_VERSION
        assert refused["error"]["data"]["supported"] == list(up.supported)
        handshake = {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}
        assert (await up.handle(handshake))["error"]["code"] == -32022


@pytest.mark.anyio
async def test_serve_and_serve_calls_declare_the_upstreams_served_versions() -> None:
    """The brief: "declared versions == served". With declare=True, both loops declare the revisions
    the gateway serves toward SimpleX (``upstream.supported``), over both transports."""

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bot")) as bot,
        stdio() as up,
    ):
        await bot.start(service_requests=True)
        tasks = [
            asyncio.create_task(bot.serve_calls(1, {"mcp": up}, declare=True)),
            asyncio.create_task(
                bot.serve(
                    1,
                    up.rpc_handler,
                    protocols=["mcp"],
                    declare=True,
                    versions={"mcp": list(up.supported)},
                )
            ),
        ]

        def both(declared: dict[str, Any]) -> bool:
            d = declared.get("mcp")
            return d is not None and d.chat and d.rpc

        async def declared_both() -> dict[str, Any]:
            found = await bot.declared(1)
            return found if both(found) else {}

        try:
            declared = await until(declared_both, "both parts declared", within=10)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        assert declared["mcp"].versions == up.supported == tuple(MODERN_PROTOCOL_VERSIONS)


# -- requests -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_two_callers_with_the_same_id_never_collide() -> None:
    """ "Each SimpleX request becomes one upstream request in the gateway's own id space,
    so two callers' ids never collide": both ask with id 1 at once, each gets its answer."""

    async with stdio() as up:

        def echo(text: str) -> dict[str, Any]:
            params = {"name": "echo", "arguments": {"text": text}}
            return mcp_binding.make_request("tools/call", params, id=1)

        answers = await asyncio.gather(*(up.handle(echo(t)) for t in ("a", "b", "c")))
        assert [a["id"] for a in answers] == [1, 1, 1]
        assert [a["result"]["content"][0]["text"] for a in answers] == ["a", "b", "c"]


@pytest.mark.anyio
async def test_progress_is_a_reply_in_a_conversation_and_dropped_over_rpc() -> None:
    """ "In a conversation, the upstream's notifications for that request (progress, ...)
    go back as replies. Over Service RPC they are dropped.\""""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with scene(stdio()) as s:
        async with Client(transport(s, "chat")) as client:
            result = await client.call_tool("slow", {"steps": 2}, progress_callback=on_progress)
            assert text_of(result) == "done"
        assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
        progress.clear()
        async with Client(transport(s, "rpc")) as client:
            result = await client.call_tool("slow", {"steps": 2}, progress_callback=on_progress)
            assert text_of(result) == "done"
        assert progress == []


@pytest.mark.anyio
async def test_a_log_message_of_an_http_upstream_is_a_reply_to_the_caller_who_opted_in() -> None:
    """ "In a conversation, the upstream's notifications for that request (..., logging) go
    back as replies. Over Service RPC they are dropped." The SDK's HTTP client delivers the
    upstream's notifications/message with the request it rode with; the caller's own
    opt-in (its log level in _meta) decides."""
    logged: list[Any] = []

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    with http_server() as (url, _):
        async with scene(Upstream.http(url)) as s:
            t = transport(s, "chat")
            async with Client(t, logging_callback=on_log, log_level="info") as client:
                assert text_of(await client.call_tool("chatty", {})) == "said"
            assert logged == ["thinking about it"]
            logged.clear()
            async with Client(t, logging_callback=on_log) as client:  # not opted in
                assert text_of(await client.call_tool("chatty", {})) == "said"
            async with Client(
                transport(s, "rpc"), logging_callback=on_log, log_level="info"
            ) as client:
                assert text_of(await client.call_tool("chatty", {})) == "said"
            assert logged == []


@pytest.mark.anyio
async def test_a_log_message_of_a_stdio_upstream_goes_to_nobody() -> None:
    """Over stdio nothing on the wire says which request a log message belongs to: it is
    dropped, never sent to another caller; the call is answered as usual."""
    logged: list[Any] = []

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    async with scene(stdio(None, "--legacy")) as s:
        t = transport(s, "chat")
        async with Client(t, logging_callback=on_log, log_level="debug") as client:
            assert text_of(await client.call_tool("chatty", {})) == "said"
    assert logged == []


@pytest.mark.anyio
async def test_the_deadline_cancels_the_upstream_request(tmp_path: Path) -> None:
    """ "When a caller's deadline passes, the upstream request is cancelled
    (notifications/cancelled)" and "a hung upstream request is cut at the handler
    deadline": the call is answered, and the upstream's tool sees its cancellation."""
    marks = tmp_path / "marks"

    async with scene(stdio(marks), call_timeout=1.5) as s:
        async with Client(transport(s, "chat")) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("hang", {})
            assert caught.value.error.code == INTERNAL_ERROR
        await until(lambda: "cancelled" in marks.read_text(), "the upstream's cancellation")
        async with Client(transport(s, "rpc")) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("hang", {})
            assert caught.value.error.code == SERVICE_RPC_ERROR
            assert "internal" in caught.value.error.message
        await until(lambda: marks.read_text().count("cancelled") == 2, "the second cancellation")
        async with Client(transport(s, "rpc")) as client:
            assert text_of(await client.call_tool("echo", {"text": "still"})) == "still"


@pytest.mark.anyio
async def test_an_older_upstreams_elicitation_is_answered_as_without_the_capability() -> None:
    """ "An older upstream's request to the client (elicitation, sampling, roots) is answered
    as a client without that capability answers": the gateway declares none, so the SDK's
    client refuses it; the caller sees the tool's own answer to that refusal."""

    async with scene(stdio(None, "--legacy")) as s, Client(transport(s, "chat")) as client:
        assert text_of(await client.call_tool("ask", {})) == ("no input: Elicitation not supported")


# -- faults -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_upstream_killed_mid_request_is_answered_restarted_and_serving_again(
    tmp_path: Path,
) -> None:
    """ "If the child exits ..., every request in flight is answered: -32603 in a
    conversation, internal over Service RPC. The child is restarted with backoff.\""""
    marks = tmp_path / "marks"

    async with scene(stdio(marks)) as s:
        async with Client(transport(s, "chat")) as chat, Client(transport(s, "rpc")) as rpc:
            # A request in flight (hang) and the one that kills the child (crash).
            hung = asyncio.create_task(rpc.call_tool("hang", {}))
            await until(lambda: hanging(marks), "the hang call at the tool")
            with pytest.raises(MCPError) as caught:
                await chat.call_tool("crash", {})
            assert caught.value.error.code == INTERNAL_ERROR
            with pytest.raises(MCPError) as in_flight:
                await hung
            assert in_flight.value.error.code == SERVICE_RPC_ERROR
            assert "internal" in in_flight.value.error.message
            # Restarted: a new child, serving again.
            await until(lambda: len(pids(marks)) == 2, "the restart")

            async def echo() -> str | None:
                try:
                    return text_of(await chat.call_tool("echo", {"text": "again"}))
                except MCPError:
                    return None  # not serving yet

            assert await until(echo, "serving again", within=20, every=0.2) == "again"


@pytest.mark.anyio
async def test_a_request_while_the_upstream_is_down_is_answered_at_once() -> None:
    """A request that comes while no connection is up is answered -32603 in a
    conversation's terms (``handle``) and ``internal`` over Service RPC, with the reason."""

    up = Upstream.stdio(sys.executable, ["-c", "import sys; sys.exit(4)"])
    async with up:
        await until(lambda: up.state == "restarting", "the failed start")
        request = mcp_binding.make_request("tools/list", id=7)
        answer = await up.handle(request)
        assert answer["id"] == 7 and answer["error"]["code"] == INTERNAL_ERROR
        assert "not running" in answer["error"]["message"]
        response = await up.rpc_handler(Request(protocol="mcp", request=request))
        assert isinstance(response, Response) and response.error is not None
        assert response.error.code == "internal"


@pytest.mark.anyio
async def test_each_change_of_state_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ "The child is restarted with backoff, and each change of state is logged once": a
    command that fails the same way three times is one warning, not three."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")
    marks = tmp_path / "marks"
    code = f"open({str(marks)!r}, 'a').write('x\\n'); raise SystemExit(5)"

    async with Upstream.stdio(sys.executable, ["-c", code]):
        await until(
            lambda: marks.exists() and marks.read_text().count("x") >= 3,
            "three attempts (after 0.5 s and 1 s of backoff)",
        )
    stopped = [r for r in caplog.records if "stopped (" in r.getMessage()]
    assert len(stopped) == 1, [r.getMessage() for r in stopped]


@pytest.mark.anyio
async def test_no_child_runs_after_the_upstream_stops(tmp_path: Path) -> None:
    """ "A child still runs after serve stops: never\": leaving ``async with`` stops it,
    even with a request in flight."""
    marks = tmp_path / "marks"

    up = stdio(marks)
    async with up:
        call = mcp_binding.make_request("tools/call", {"name": "hang", "arguments": {}}, id=1)
        task = asyncio.create_task(up.handle(call))
        await until(lambda: hanging(marks), "the hang call at the tool")
    (pid,) = pids(marks)
    assert not alive(pid)
    answer = await task
    assert answer["error"]["code"] == INTERNAL_ERROR


@pytest.mark.anyio
async def test_the_childs_stderr_goes_to_the_log_bounded(caplog: pytest.LogCaptureFixture) -> None:
    """ "The child's stderr goes to the log, bounded": at most 50 lines a minute, the rest
    counted in one line."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")

    async with stdio() as up:
        params = {"name": "noise", "arguments": {"lines": 120}}
        answer = await up.handle(mcp_binding.make_request("tools/call", params, id=1))
        assert answer["result"]["content"][0]["text"] == "noisy"
        await until(lambda: "noise line 49" in caplog.text, "the child's stderr in the log")
    await until(lambda: "lines of standard error dropped" in caplog.text, "the count")
    lines = [r.getMessage() for r in caplog.records if "stderr: noise line" in r.getMessage()]
    assert len(lines) == 50
    assert any("70 lines of standard error dropped" in r.getMessage() for r in caplog.records)


@pytest.mark.time_limit(90)
@pytest.mark.anyio
async def test_an_http_upstream_that_refuses_is_answered_and_reached_again(tmp_path: Path) -> None:
    """ "If ... the URL refuses, every request in flight is answered": the server goes away
    in the middle of a request; when it is back on its port, the gateway serves again."""
    port = free_port()
    marks = tmp_path / "marks"

    with http_server(port, marks) as (url, proc):
        up = Upstream.http(url)
        async with scene(up) as s, Client(transport(s, "chat")) as client:
            hung = asyncio.create_task(client.call_tool("hang", {}))
            await until(lambda: hanging(marks), "the hang call at the tool")
            proc.kill()
            proc.wait(10)
            with pytest.raises(MCPError) as caught:
                await hung
            assert caught.value.error.code == INTERNAL_ERROR
            with http_server(port):

                async def echo() -> str | None:
                    try:
                        return text_of(await client.call_tool("echo", {"text": "back"}))
                    except MCPError:
                        return None  # not reached yet

                assert await until(echo, "reached again", within=30, every=0.3) == "back"


# -- the bridge rules ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_bridge_rules_hold() -> None:
    """ "The bridge rules hold as for McpBridge: sizes, -32603 and too_large, -32022,
    --conversation-tool\"."""

    up = stdio(None, conversation_tools={"slow"}, rpc_limit=2000)
    async with up:
        slow = mcp_binding.make_request("tools/call", {"name": "slow", "arguments": {}}, id=1)
        refused = await up.rpc_handler(Request(protocol="mcp", request=slow))
        assert refused.error is not None and refused.error.code == "conversation_required"
        big = {"name": "echo", "arguments": {"text": "x" * 5000}}
        request = mcp_binding.make_request("tools/call", big, id=2)
        too_large = await up.rpc_handler(Request(protocol="mcp", request=request))
        assert too_large.error is not None and too_large.error.code == "too_large"
        huge = {"name": "echo", "arguments": {"text": "y" * 16000}}
        text = await up.chat_handler(mcp_binding.make_request("tools/call", huge, id=3))
        assert '"code":-32603' in text and "Response too large" in text


def test_wrong_arguments_are_the_librarys_errors() -> None:
    with pytest.raises(SimplexRpcError, match="command"):
        Upstream.stdio("")
    with pytest.raises(SimplexRpcError, match="args"):
        Upstream.stdio("server", "--stdio")  # type: ignore[arg-type]
    with pytest.raises(SimplexRpcError, match="url"):
        Upstream.http("ftp://example.org/mcp")
    with pytest.raises(SimplexRpcError, match="no host"):
        Upstream.http("http:///mcp")
    with pytest.raises(SimplexRpcError, match="env"):
        Upstream.stdio("server", env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(SimplexRpcError, match="header name"):
        Upstream.http("http://127.0.0.1:9/mcp", headers=[("Bad Name", "v")])
    with pytest.raises(SimplexRpcError, match="not a valid header field value") as caught:
        Upstream.http("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer a\nb"})
    assert "Bearer" not in str(caught.value)


@pytest.mark.anyio
async def test_a_request_before_the_upstream_starts_is_answered() -> None:
    answer = await stdio().handle(mcp_binding.make_request("tools/list", id=1))
    assert answer["error"]["code"] == INTERNAL_ERROR
    assert "not started" in answer["error"]["message"]

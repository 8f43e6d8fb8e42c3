"""A stdio MCP upstream that misbehaves: the gateway holds (issue 32, items 1, 7 and 8).

Each test first does what the probe did to ``serve --mcp-stdio``: a child that
writes invalid UTF-8, a 50 MB line or an answer too long for SimpleX, or that
stops (SIGSTOP) and so reads and answers nothing. Each then checks that the
request is answered, the fault is logged, and the gateway answers its other
callers. The upstream is tests/mcp_upstreams/server.py in its own process;
the callers are the SDK's ``mcp.Client`` over ``SimplexTransport``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from _upstream import alive, http_server, pids, scene, stdio, text_of, transport
from _waiting import until
from simplex_rpc import mcp as mcp_binding
from simplex_rpc.mcp import SERVICE_RPC_ERROR, Upstream
from simplex_rpc.mcp._gateway_stdio import EXCERPT, LINE_LIMIT, Dropped, LineSplitter


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# -- item 1: invalid UTF-8 ------------------------------------------------------------------


@pytest.mark.parametrize("via", ["rpc", "chat"])
@pytest.mark.anyio
async def test_invalid_utf8_from_the_server_is_replaced_logged_once_and_never_a_wedge(
    via: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe: after the child writes ``b"\\xff\\n"``, every later request waited its whole
    deadline. Now the line is replaced (and, not being JSON-RPC, ignored), the request
    that caused it is answered, and so is every later one; the cause is logged once per
    run, however often it happens."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")

    # A short deadline: a wedge would answer `internal` after it, not the tool's text.
    async with scene(stdio(), call_timeout=20) as s, Client(transport(s, via)) as client:
        assert text_of(await client.call_tool("garble", {})) == "garbled"
        for i in range(3):
            assert text_of(await client.call_tool("echo", {"text": f"after {i}"})) == (
                f"after {i}"
            )
        assert text_of(await client.call_tool("garble", {})) == "garbled"
        assert text_of(await client.call_tool("echo", {"text": "still"})) == "still"
    assert len(messages(caplog, "invalid UTF-8")) == 1, messages(caplog, "invalid UTF-8")
    assert not messages(caplog, "stopped (")  # never restarted: the server is fine


# -- item 8: long lines ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_50_mb_line_is_dropped_in_bounded_memory_and_other_requests_are_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The probe: 50 MB took 14.5 s of CPU in the SDK's reader (quadratic) and its memory.
    Now the line is dropped as it streams by, logged with its size, and the tool's own
    answer after it arrives. Bound stated and checked: the Python memory allocated while
    the 50 MB pass (tracemalloc's peak over the start) stays under 8 MiB, that is the
    line limit (256 KiB) plus reads and the simulated network, far from the 50 MB."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")

    async with scene(stdio(), call_timeout=120) as s, Client(transport(s, "rpc")) as client:
        assert text_of(await client.call_tool("echo", {"text": "before"})) == "before"
        tracemalloc.start()
        try:
            start, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            assert text_of(await client.call_tool("long_line", {"mb": 50})) == "long"
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak - start < 8 * 2**20, f"peak {peak - start} bytes over the start"
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
    (line,) = messages(caplog, "dropped (the limit")
    assert f"a line of {50 * 2**20} bytes" in line and str(LINE_LIMIT) in line


@pytest.mark.parametrize("via", ["rpc", "chat"])
@pytest.mark.anyio
async def test_an_answer_over_the_line_limit_is_an_error_at_once(
    via: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer longer than the limit could not reach a SimpleX caller: its line is
    dropped, and its request (the ``id`` is the response's first member) is answered
    with an error naming the sizes at once, not at the deadline."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")

    async with scene(stdio(), call_timeout=60) as s, Client(transport(s, via)) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("big", {"size": LINE_LIMIT + 10})
        if via == "chat":
            assert caught.value.error.code == INTERNAL_ERROR
            assert "over the gateway's limit" in caught.value.error.message
        else:
            # Over Service RPC the upstream's error is the JSON-RPC response's error.
            assert caught.value.error.code in (INTERNAL_ERROR, SERVICE_RPC_ERROR)
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"
    (line,) = messages(caplog, "dropped (the limit")
    assert "is answered" in line


def test_the_line_splitter_keeps_at_most_its_limit_and_finds_a_responses_id() -> None:
    """The reader's splitter, alone: lines up to the limit come out whole (without CR LF);
    a longer one is dropped, whatever the chunking, and only its head and tail are kept;
    the buffer never holds more than the limit."""
    splitter = LineSplitter(limit=10)
    out: list[object] = []
    for chunk in [b"abc\r\n0123456789\n", b"x" * 7, b"y" * 7, b"z" * 1000, b"\nok\n"]:
        out += splitter.feed(chunk)
        assert splitter.buffered <= 10
    assert out[:2] == [b"abc", b"0123456789"]
    dropped = out[2]
    assert isinstance(dropped, Dropped) and dropped.size == 1014
    assert len(dropped.head) <= EXCERPT and len(dropped.tail) <= EXCERPT
    assert out[3:] == [b"ok"]

    first = Dropped(100, b'{"jsonrpc":"2.0","id":7,"result":{"content":[', b"]}}")
    last = Dropped(100, b'{"result":{"id":3,"x":"', b'"}},"jsonrpc":"2.0","id":"a-9"}')
    nested = Dropped(100, b'{"result":{"id":3,"x":"', b'"}}}')
    assert first.request_id() == 7
    assert last.request_id() == "a-9"
    assert nested.request_id() is None  # an "id" inside the result is not the response's
    # The server's own request (elicitation) has an id of the server's: never answered.
    request = Dropped(100, b'{"jsonrpc":"2.0","id":0,"method":"elicitation/create",', b"}}")
    notification = Dropped(100, b'{"method":"notifications/message","params":', b',"id":4}')
    assert request.request_id() is None and notification.request_id() is None
    errored = Dropped(100, b'{"error":{"code":1,"message":"', b'"},"id":12}')
    assert errored.request_id() == 12


# -- item 7: a server that stops answering ----------------------------------------------------


@pytest.mark.anyio
async def test_a_blocked_server_fails_its_ping_and_is_restarted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe: a child that stops reading and answering was never detected; every
    request failed at its deadline, indefinitely. Now the first request cut by its
    deadline makes the gateway ping the child; unanswered, the child is restarted (the
    restart logged) and the gateway serves again. The restart comes from the ping:
    restart_after is too high to be reached here."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")
    marks = tmp_path / "marks"

    up = stdio(marks, restart_after=100, ping_timeout=2)
    async with scene(up, call_timeout=2) as s, Client(transport(s, "rpc")) as client:
        assert text_of(await client.call_tool("echo", {"text": "before"})) == "before"
        first = pids(marks)
        with pytest.raises(MCPError) as caught:
            await client.call_tool("freeze", {})
        assert "internal" in caught.value.error.message
        await until(lambda: len(pids(marks)) == 2, "the restart", within=60)
        await until(lambda: up.state == "running", "running again", within=60)
        assert pids(marks)[0] == first[0]
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
    (line,) = messages(caplog, "no answer to a ping")
    assert "stopped (" in line and "starting again" in line


@pytest.mark.anyio
async def test_requests_cut_by_their_deadline_n_times_in_a_row_restart_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that answers ``ping`` but no request: after ``restart_after`` requests in a
    row cut by their deadline it is restarted, and the restart is logged. An answered
    request in between starts the count again."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")
    marks = tmp_path / "marks"

    up = stdio(marks, restart_after=2)
    async with scene(up, call_timeout=1.5) as s, Client(transport(s, "rpc")) as client:
        with pytest.raises(MCPError):
            await client.call_tool("hang", {})
        assert text_of(await client.call_tool("echo", {"text": "between"})) == "between"
        with pytest.raises(MCPError):
            await client.call_tool("hang", {})
        assert len(pids(marks)) == 1  # one miss, one answer, one miss: not in a row
        with pytest.raises(MCPError):
            await client.call_tool("hang", {})
        await until(lambda: len(pids(marks)) == 2, "the restart", within=60)
        await until(lambda: up.state == "running", "running again", within=60)
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
    (line,) = messages(caplog, "in a row were cut by their deadline")
    assert line.startswith("MCP server") and "2 requests" in line


# -- item 9: what a remote caller reads --------------------------------------------------------


@pytest.mark.anyio
async def test_a_failing_url_upstream_is_answered_without_its_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An MCP URL that answers 404: the caller's error says the server is not running
    and could not be reached, and names nothing of the way to it (the text of a failure
    to connect may name a URL, a host or a redirect target); the operator's log has the
    reason."""
    caplog.set_level(logging.INFO, logger="simplex_rpc")

    with http_server() as (url, _):
        wrong = url.replace("/mcp", "/internal-path-7c")
        up = Upstream.http(wrong)
        async with up:
            await until(lambda: up.state == "restarting", "the failed start")
            request = mcp_binding.make_request("tools/list", id=3)
            answer = await up.handle(request)
    message = answer["error"]["message"]
    assert message == "the MCP server is not running: stopped (it could not be reached)"
    (stopped,) = messages(caplog, "stopped (")
    assert "(Not Found)" in stopped, stopped  # the server's own reason, for the operator


@pytest.mark.anyio
async def test_a_blocked_server_with_a_full_stdin_pipe_is_still_stopped(tmp_path: Path) -> None:
    """A stopped child reads nothing: requests fill its stdin pipe (12 of 8 KB, over the
    64 KiB a pipe holds) and the gateway's writes wait. Leaving ``async with`` still
    stops it, each wait bounded, and no process is left."""
    marks = tmp_path / "marks"

    up = stdio(marks, restart_after=100, ping_timeout=60)
    async with up:
        freeze = mcp_binding.make_request("tools/call", {"name": "freeze"}, id=1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(up.handle(freeze), 2)
        await until(lambda: "frozen" in marks.read_text(), "the freeze")

        async def echo(i: int) -> None:
            call = mcp_binding.make_request(
                "tools/call", {"name": "echo", "arguments": {"text": "z" * 8000}}, id=10 + i
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(up.handle(call), 2)

        await asyncio.gather(*(echo(i) for i in range(12)))
        (pid,) = pids(marks)
    assert not alive(pid)

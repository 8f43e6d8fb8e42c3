"""An MCP server in its own process, built with the official SDK, for the gateway's tests.

The gateway must work for a server in any language: the tests only run this
script as a command (``--stdio``) or reach it at a URL (``--http PORT``); they
never import it. Its tools:

* ``echo(text)``: the text back;
* ``revision()``: the revision of the gateway's connection to this server;
* ``slow(steps)``: one progress notification per step, then ``done``;
* ``chatty()``: logs one message at info (``notifications/message``), then ``said``;
* ``hang()``: writes ``hanging`` to ``$UPSTREAM_MARKS``, waits until cancelled, then
  writes ``cancelled`` there;
* ``crash()``: the process exits in the middle of the request (exit status 3);
* ``ask()``: asks the client for input (elicitation), says how it was answered;
* ``noise(lines)``: writes that many lines to standard error;
* ``seen_header(name)``: the SHA-256 of an HTTP header of this request (over HTTP);
* ``garble()``: writes the line ``b"\\xff"`` (invalid UTF-8) on standard output, then
  answers ``garbled``;
* ``long_line(mb)``: writes one line of ``mb`` megabytes (not JSON) on standard output,
  then answers ``long``;
* ``big(size)``: answers with a text of ``size`` characters (one long JSON-RPC line);
* ``freeze()``: stops its own process (SIGSTOP): it reads and answers nothing more;
* ``env(name)``: the SHA-256 of an environment variable (``(none)`` when unset).

``--legacy`` pins the server to a revision before 2026-07-28: it serves only
the ``initialize`` handshake loop (no ``server/discover``). The server's pid
is appended to ``$UPSTREAM_MARKS`` (a file) as ``pid <n>`` at start.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel

# The protocol's standard output, kept before the SDK's stdio server diverts fd 1 to
# standard error (so that a print cannot corrupt the wire): the raw writes go here.
WIRE = os.dup(1)


def mark(line: str) -> None:
    path = os.environ.get("UPSTREAM_MARKS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class Answer(BaseModel):
    answer: str


def build_server() -> MCPServer:
    server = MCPServer("upstream-fixture", version="1.0")

    @server.tool(description="The text back", structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(description="The revision of this connection", structured_output=False)
    def revision(ctx: Context) -> str:
        return str(ctx.protocol_version)

    @server.tool(description="Progress, then done", structured_output=False)
    async def slow(ctx: Context, steps: int = 2) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @server.tool(description="Logs a message, then answers", structured_output=False)
    async def chatty(ctx: Context) -> str:
        await ctx.info("thinking about it")
        return "said"

    @server.tool(description="Waits until cancelled", structured_output=False)
    async def hang() -> str:
        mark("hanging")  # the request is in flight: tests wait for this line
        try:
            await anyio.sleep(3600)  # the behaviour under test: a tool that never ends
        except anyio.get_cancelled_exc_class():
            mark("cancelled")
            raise
        return "never"

    @server.tool(description="Exits in the middle of the request", structured_output=False)
    def crash() -> str:
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(description="Asks the client for input", structured_output=False)
    async def ask(ctx: Context) -> str:
        try:
            result = await ctx.elicit("Which one?", Answer)
        except Exception as exc:  # the client has no elicitation capability
            return f"no input: {exc}"
        return f"input: {result.action}"

    @server.tool(
        description="The SHA-256 of an HTTP header of this request", structured_output=False
    )
    def seen_header(ctx: Context, name: str) -> str:
        # A digest, not the value: the value may be a credential, and answers are logged.
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        if headers is None or name not in headers:
            return "(none)"
        return hashlib.sha256(headers[name].encode()).hexdigest()

    @server.tool(description="Invalid UTF-8 on standard output", structured_output=False)
    def garble() -> str:
        # Between two messages of the SDK's writer: this tool runs before its answer is written.
        os.write(WIRE, b"\xff\n")
        return "garbled"

    @server.tool(description="One long line on standard output", structured_output=False)
    def long_line(mb: int = 50) -> str:
        block = b"x" * (1 << 20)
        for _ in range(mb):
            view = memoryview(block)
            while view:
                view = view[os.write(WIRE, view) :]
        os.write(WIRE, b"\n")
        return "long"

    @server.tool(description="An answer of size characters", structured_output=False)
    def big(size: int) -> str:
        return "y" * size

    @server.tool(description="Stops this process (SIGSTOP)", structured_output=False)
    def freeze() -> str:
        mark("frozen")
        os.kill(os.getpid(), signal.SIGSTOP)
        return "thawed"

    @server.tool(description="The SHA-256 of an environment variable", structured_output=False)
    def env(name: str) -> str:
        value = os.environ.get(name)
        return "(none)" if value is None else hashlib.sha256(value.encode()).hexdigest()

    @server.tool(description="Lines on standard error", structured_output=False)
    def noise(lines: int = 10) -> str:
        for i in range(lines):
            sys.stderr.write(f"noise line {i}\n")
        sys.stderr.flush()
        return "noisy"

    return server


async def run_legacy_stdio(server: MCPServer) -> None:
    """Only the initialize handshake: the SDK's handshake loop, without server/discover."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    low._request_handlers.pop("server/discover", None)
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(
            low, read, write, lifespan_state=state, init_options=low.create_initialization_options()
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--legacy", action="store_true")
    args = parser.parse_args()
    mark(f"pid {os.getpid()}")
    server = build_server()
    if args.http is not None:
        import uvicorn

        app = server.streamable_http_app()
        config = uvicorn.Config(app, host="127.0.0.1", port=args.http, log_level="warning")
        uvicorn.Server(config).run()
    elif args.legacy:
        anyio.run(run_legacy_stdio, server)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()

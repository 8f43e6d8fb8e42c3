"""``simplex-rpc bench gateway``: an MCP ``tools/call`` through the gateway against the direct call.

One stdio MCP server (an SDK ``MCPServer`` with one ``echo`` tool, written to a
temporary file and run by this Python) is called the same way three ways,
interleaved call by call in one run so that the machine's noise falls on all
alike:

* ``direct``: the SDK's ``mcp.Client`` straight to the server over stdio;
* ``rpc``: ``mcp.Client`` over ``SimplexTransport`` (Service RPC) to a bot run
  by ``simplex-rpc serve --mcp-stdio -- python server.py`` in its own process,
  through the in-process :class:`~simplex_rpc.testing.CoreSimulator`;
* ``chat``: the same bot, through ``/_call mcp`` in a direct chat.

The target is a median of at most 3x the direct call's, for each way through
the gateway. It is reported, not asserted: the exit status is 0 when every call
was answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from ...adapter import ChatCore
from ...testing import CoreSimulator
from .._common import EXIT_INVALID, EXIT_OK, emit_json, fail, install_hint
from ._machine import machine

__all__ = ["TARGET", "WAYS", "handle", "run_gateway_bench"]

WAYS: Final = ("direct", "rpc", "chat")
TARGET: Final = 3.0
"""A call through the gateway: at most this many times the direct call's median."""
FULL_CALLS: Final = 200
QUICK_CALLS: Final = 20
WARMUP: Final = 5

SERVER_SCRIPT: Final = """\
from mcp.server import MCPServer

server = MCPServer("bench-echo")


@server.tool(description="The text back", structured_output=False)
def echo(text: str) -> str:
    return text


server.run("stdio")
"""


async def _lines_until(stream: asyncio.StreamReader, prefix: str, limit: float) -> str:
    """The rest of the first line of ``stream`` that starts with ``prefix``, within ``limit``."""
    async with asyncio.timeout(limit):
        while True:
            raw = await stream.readline()
            if not raw:
                raise RuntimeError(f"the bot exited before printing {prefix!r}")
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith(prefix):
                return line[len(prefix) :]


@contextlib.asynccontextmanager
async def _bot(core_url: str, script: Path) -> AsyncIterator[str]:
    """``simplex-rpc serve --mcp-stdio`` in its own process; its address link."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simplex_rpc",
        "serve",
        "--core",
        core_url,
        "--address",
        "--chat",
        "--mcp-stdio",
        "--",
        sys.executable,
        str(script),
        stdout=asyncio.subprocess.PIPE,  # the ready lines (address: LINK) are on stdout
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        link = await _lines_until(proc.stdout, "address: ", 60)

        async def drain() -> None:
            assert proc.stdout is not None
            while await proc.stdout.readline():
                pass

        drainer = asyncio.create_task(drain())
        try:
            yield link
        finally:
            drainer.cancel()
    finally:
        if proc.returncode is None:
            proc.send_signal(2)  # Ctrl-C: serve stops its child on the way out
            try:
                async with asyncio.timeout(20):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def run_gateway_bench(calls: int) -> dict[str, Any]:
    """Time ``calls`` interleaved ``tools/call`` of each way; the report."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from ...mcp import SimplexTransport

    times: dict[str, list[float]] = {way: [] for way in WAYS}
    failures: dict[str, int] = dict.fromkeys(WAYS, 0)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench_echo_server.py"
        script.write_text(SERVER_SCRIPT, encoding="utf-8")
        params = StdioServerParameters(command=sys.executable, args=[str(script)])
        async with CoreSimulator() as sim:
            at_alice, _ = sim.connect("alice", "bot")
            async with (
                _bot(sim.url_for("bot"), script) as link,
                ChatCore.connect(sim.url_for("alice")) as alice,
            ):
                await alice.start(service_requests=False)
                rpc = SimplexTransport(alice, 1, link, via="rpc", timeout=30)
                chat = SimplexTransport(alice, 1, f"@{at_alice}", via="chat", timeout=30)
                async with (
                    Client(params) as direct_client,
                    Client(rpc, cache=None) as rpc_client,
                    Client(chat, cache=None) as chat_client,
                ):
                    clients = {"direct": direct_client, "rpc": rpc_client, "chat": chat_client}
                    for i in range(WARMUP + calls):
                        for way in WAYS:
                            client = clients[way]
                            started = time.perf_counter()
                            try:
                                await client.call_tool("echo", {"text": f"call {i}"})
                            except Exception:
                                failures[way] += 1
                                continue
                            if i >= WARMUP:
                                times[way].append(time.perf_counter() - started)
    medians = {way: statistics.median(t) if t else None for way, t in times.items()}
    direct = medians["direct"]
    ratios: dict[str, float | None] = {}
    for way in ("rpc", "chat"):
        median = medians[way]
        ratios[way] = median / direct if median is not None and direct else None
    return {
        "machine": machine(),
        "calls": calls,
        "target": TARGET,
        "median_ms": {w: None if m is None else round(m * 1000, 3) for w, m in medians.items()},
        "p90_ms": {
            w: round(statistics.quantiles(t, n=10)[8] * 1000, 3) if len(t) >= 10 else None
            for w, t in times.items()
        },
        "ratio": {w: None if r is None else round(r, 2) for w, r in ratios.items()},
        "met": {w: r is not None and r <= TARGET for w, r in ratios.items()},
        "failures": failures,
    }


def report_text(report: dict[str, Any]) -> str:
    lines = [
        f"MCP gateway: tools/call, {report['calls']} calls of each way, interleaved",
        f"{'way':<8}{'median':>12}{'p90':>12}{'x direct':>10}  target <= {TARGET:g}x",
    ]
    names = {
        "direct": "the SDK client straight to the stdio server",
        "rpc": "serve --mcp-stdio, Service RPC via the simulator",
        "chat": "serve --mcp-stdio, /_call in a chat via the simulator",
    }
    for way in WAYS:
        median = report["median_ms"][way]
        p90 = report["p90_ms"][way]
        ratio = report["ratio"].get(way)
        verdict = "" if way == "direct" else ("met" if report["met"][way] else "MISSED")
        lines.append(
            f"{way:<8}{'-' if median is None else f'{median:.2f} ms':>12}"
            f"{'-' if p90 is None else f'{p90:.2f} ms':>12}"
            f"{'' if ratio is None else f'{ratio:.1f}x':>10}  {verdict}  ({names[way]})"
        )
    failed = {w: n for w, n in report["failures"].items() if n}
    if failed:
        lines.append(f"failed calls: {failed}")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    """``simplex-rpc bench gateway``: run, print (or JSON); 1 if a call failed."""
    if args.rounds is not None or args.only:
        fail("--rounds and --only apply to the backend benchmark, not to bench gateway")
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        fail(f"needs the mcp SDK: {install_hint('mcp')} ({exc})")
    calls = QUICK_CALLS if args.quick else FULL_CALLS
    report = asyncio.run(run_gateway_bench(calls))
    if args.json:
        emit_json(report)
    else:
        sys.stdout.write(report_text(report) + "\n")
    return EXIT_INVALID if any(report["failures"].values()) else EXIT_OK

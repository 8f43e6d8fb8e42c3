"""The MCP upstream tests' shared pieces: an upstream SDK server over stdio or HTTP,
a scene of cores, the processes it starts.

No tests here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_types import TextContent

from simplex_rpc.adapter import ChatCore
from simplex_rpc.mcp import SimplexTransport, Upstream
from simplex_rpc.testing import CoreSimulator

SERVER = Path(__file__).parent / "mcp_upstreams" / "server.py"


def stdio(marks: Path | None = None, *extra: str, **options: Any) -> Upstream:
    """The fixture server as a child process (``python server.py --stdio``)."""
    env = {"UPSTREAM_MARKS": str(marks)} if marks is not None else None
    return Upstream.stdio(sys.executable, [str(SERVER), "--stdio", *extra], env=env, **options)


@contextlib.contextmanager
def http_server(
    port: int | None = None, marks: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The fixture server under uvicorn in its own process; its URL once it answers.

    ``marks``: the file its tools write their marks to (``$UPSTREAM_MARKS``).
    """
    port = port or free_port()
    env = dict(os.environ)
    if marks is not None:
        env["UPSTREAM_MARKS"] = str(marks)
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None, "the HTTP upstream exited at start"
            assert time.monotonic() < deadline, "the HTTP upstream did not listen within 30 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait(10)


@contextlib.asynccontextmanager
async def scene(upstream: Upstream, *, call_timeout: float = 60.0) -> AsyncIterator[Scene]:
    """A bot serving ``upstream`` over Service RPC and in conversations; alice to call it."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
        upstream,
    ):
        await bot.start(service_requests=True)
        await alice.start(service_requests=False)
        link = (await bot.service_address(1)).link
        at_alice, _ = sim.connect("alice", "bot")
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(
                bot.serve_calls(1, {"mcp": upstream}, handler_timeout=call_timeout, ready=ready[0])
            ),
            asyncio.create_task(
                bot.serve(
                    1,
                    upstream.rpc_handler,
                    protocols=["mcp"],
                    handler_timeout=call_timeout,
                    ready=ready[1],
                )
            ),
        ]
        for event in ready:
            await event.wait()
        try:
            yield Scene(sim=sim, alice=alice, contact=f"@{at_alice}", link=link)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def transport(s: Scene, via: str) -> SimplexTransport:
    if via == "chat":
        return SimplexTransport(s.alice, 1, s.contact, via="chat", timeout=30)
    return SimplexTransport(s.alice, 1, s.link, via="rpc", timeout=30)


def text_of(result: Any) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


def pids(marks: Path) -> list[int]:
    if not marks.exists():
        return []
    return [
        int(line.split()[1]) for line in marks.read_text().splitlines() if line.startswith("pid ")
    ]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not running: the SDK's stdio client reaps its children.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        return state != "Z"
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Scene:
    sim: CoreSimulator
    alice: ChatCore
    contact: str  # alice's ChatRef of the bot
    link: str  # the bot's address

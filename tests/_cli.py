"""The CLI tests' shared pieces: the simulator and ``simplex-rpc serve``'s async body on
a background thread, and the arguments that call it.

No tests here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simplex_rpc.cli import _adapter as _cli_adapter
from simplex_rpc.cli import build_parser
from simplex_rpc.testing import CoreSimulator

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mcp_two_tools.py"


class Background:
    """The simulator, and optionally a responder, on an event loop in another thread."""

    def __init__(self, responder: Callable[[CoreSimulator], Any] | None) -> None:
        self.responder = responder
        self.ready = threading.Event()
        self.url = ""
        self.sim: CoreSimulator | None = None
        self.link = ""
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the test thread
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with CoreSimulator() as sim:
            self.sim = sim
            self.url = sim.url
            task = None
            if self.responder is not None:
                task = asyncio.create_task(self.responder(self))
            else:
                self.ready.set()
            await self._stop.wait()
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def __enter__(self) -> Background:
        self._thread.start()
        assert self.ready.wait(20), "the background simulator did not start"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)


def serve_args(sim: CoreSimulator, *extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", "--core", sim.url_for("bob"), "--address", *extra])


@contextlib.contextmanager
def serving(*extra: str) -> Iterator[Background]:
    """A simulator with ``simplex-rpc serve`` (its async body) answering on core bob."""

    async def responder(bg: Background) -> None:
        assert bg.sim is not None

        def ready(link: str) -> None:
            bg.link = link
            bg.ready.set()

        await _cli_adapter.run_serve(serve_args(bg.sim, *extra), on_ready=ready)

    with Background(responder) as bg:
        yield bg


def call(bg: Background, *args: str) -> list[str]:
    return ["call", "--core", f"{bg.url}/alice", "--timeout", "5", bg.link, *args]


@contextmanager
def bot(*serve: str) -> Iterator[Background]:
    """Core bob runs ``serve --address --chat ...``; alice has bob as contact @1."""

    async def responder(bg: Background) -> None:
        assert bg.sim is not None
        bg.sim.connect("alice", "bob")
        args = build_parser().parse_args(
            ["serve", "--core", bg.sim.url_for("bob"), "--address", "--chat", *serve]
        )

        def ready(link: str) -> None:
            bg.link = link
            bg.ready.set()

        await _cli_adapter.run_serve(args, on_ready=ready)

    with Background(responder) as bg:
        yield bg


def core(bg: Background) -> list[str]:
    return ["--core", f"{bg.url}/alice", "--timeout", "10"]

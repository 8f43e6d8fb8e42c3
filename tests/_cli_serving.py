"""The CLI tests' serving pieces: the simulator and ``simplex-rpc serve``'s async body on
a background thread, and the arguments that call it.

No tests here.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _simulator_thread import SimulatorThread
from simplex_rpc.cli import _serve as _cli_serve
from simplex_rpc.cli import build_parser
from simplex_rpc.testing import CoreSimulator

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mcp_two_tools.py"


class Background(SimulatorThread):
    """The simulator, and optionally a responder, on an event loop in another thread;
    ``link`` is the responder's address once it is ready."""

    def __init__(self, responder: Callable[[Background], Awaitable[Any]] | None) -> None:
        super().__init__(responder=responder)
        self.link = ""


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

        await _cli_serve.run_serve(serve_args(bg.sim, *extra), on_ready=ready)

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

        await _cli_serve.run_serve(args, on_ready=ready)

    with Background(responder) as bg:
        yield bg


def core(bg: Background) -> list[str]:
    return ["--core", f"{bg.url}/alice", "--timeout", "10"]

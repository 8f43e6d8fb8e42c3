"""The suite's set-ups as fixtures (a pytest plugin: conftest's ``pytest_plugins``).

Each async fixture runs in the test's event loop (anyio's plugin runs async fixtures
for ``@pytest.mark.anyio`` tests) and is torn down when the test ends, however it ends:

* ``simulator``: an entered :class:`~simplex_rpc.testing.CoreSimulator`;
* ``core_pair``: a simulator with two connected ``ChatCore`` (a caller ``alice`` and a
  ``bot``), started with service requests off, that know each other as contacts
  (:class:`CorePair`);
* ``scripted_core``: an entered :class:`~simplex_rpc.testing.ScriptedCore`;
* ``world``: the chat tests' world (tests/_chat.py): alice, bot and carol, alice and
  bot contacts, a group of the three;
* ``process``: a factory of ``simplex-rpc`` processes (tests/_programs.py ``Program``, or
  ``Running`` with ``lines=True``); every one still running is stopped at teardown.

No tests here.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import _chat
from _programs import Program, Running
from simplex_rpc.adapter import ChatCore
from simplex_rpc.testing import CoreSimulator, ScriptedCore


@dataclass
class CorePair:
    """Two started cores of one simulator that know each other as contacts."""

    sim: CoreSimulator
    alice: ChatCore
    bot: ChatCore
    direct: int  # alice's contact id of bot: she sends to ``@<id>``
    back: int  # bot's contact id of alice


@pytest.fixture
async def simulator() -> AsyncIterator[CoreSimulator]:
    """An entered ``CoreSimulator`` with its defaults."""
    async with CoreSimulator() as sim:
        yield sim


@pytest.fixture
async def core_pair(simulator: CoreSimulator) -> AsyncIterator[CorePair]:
    """alice and bot on ``simulator``, started (service requests off), each the other's
    contact (``CoreSimulator.connect``)."""
    async with (
        ChatCore.connect(simulator.url_for("alice")) as alice,
        ChatCore.connect(simulator.url_for("bot")) as bot,
    ):
        for core in (alice, bot):
            await core.start(service_requests=False)
        direct, back = simulator.connect("alice", "bot")
        yield CorePair(simulator, alice, bot, direct, back)


@pytest.fixture
async def scripted_core() -> AsyncIterator[ScriptedCore]:
    """An entered ``ScriptedCore`` (any frame limit: ``max_size=None``)."""
    async with ScriptedCore() as fake:
        yield fake


@pytest.fixture
async def world() -> AsyncIterator[_chat.World]:
    """The chat tests' world: alice, bot and carol started, alice and bot contacts, the
    group ``team`` of alice (owner), bot and carol; ``raw`` is alice's event stream."""
    async with _chat.world() as w:
        yield w


ProcessFactory = Callable[..., Any]


@pytest.fixture
def process() -> Iterator[ProcessFactory]:
    """``process(*args, env=None)`` starts ``python -m simplex_rpc *args`` as a ``Program``;
    ``process(*args, lines=True)`` as a ``Running`` (stdout read line by line with a
    bound). Each one still running when the test ends is stopped (SIGTERM, then killed)."""
    started: list[Program | Running] = []

    def start(*args: str, env: dict[str, str] | None = None, lines: bool = False) -> Any:
        if lines:
            if env is not None:
                raise ValueError("process: env is for a Program, not a Running")
            proc: Program | Running = Running(*args)
        else:
            proc = Program(*args, env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        popen = proc.proc if isinstance(proc, Program) else proc.process
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(30)

"""A CoreSimulator on its own thread and event loop, for tests whose other side blocks:
a ``simplex-rpc`` process, the CLI's ``main`` called in this thread, a doc example run
as a program (no tests here).

This is the suite's one such harness: ``SimulatorThread`` takes what the tests used
to write each time (contacts made first, a ``setup`` that builds a world and returns
its facts, a ``responder`` coroutine run beside the simulator), and lets the test
thread act on the simulator (:meth:`call`, :meth:`connect`, :meth:`drop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

from simplex_rpc.testing import CoreSimulator

T = TypeVar("T")


class SimulatorThread:
    """A simulator on a free port, served from its own thread and event loop.

    ``contacts`` (two display names) are made contacts of each other, then ``setup``
    (if given) runs with the simulator and its result is ``facts``; then ``url`` is
    set and the ``with`` block starts. With a ``responder``, the coroutine
    ``responder(self)`` runs beside the simulator and says when the block may start
    (``self.ready.set()``); an exception before that is raised in the test's thread.
    ``sim`` is the simulator, for reading its state afterwards.
    """

    def __init__(
        self,
        contacts: tuple[str, str] | None = None,
        *,
        setup: Callable[[CoreSimulator], dict[str, Any]] | None = None,
        responder: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> None:
        self.url = ""
        self.sim: CoreSimulator | None = None
        self.facts: dict[str, Any] = {}
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._contacts = contacts
        self._setup = setup
        self.responder = responder
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the test thread
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with CoreSimulator() as sim:
            if self._contacts is not None:
                sim.connect(*self._contacts)
            if self._setup is not None:
                self.facts = self._setup(sim)
            self.sim, self.url = sim, sim.url
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

    def call(self, make: Callable[[], Awaitable[T]], within: float = 20) -> T:
        """Run ``make()`` on the simulator's loop; its result (from the test's thread)."""
        assert self.loop is not None

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(within)

    def connect(self, a: str, b: str) -> tuple[int, int]:
        """Make ``a`` and ``b`` contacts (``CoreSimulator.connect``), from the test's thread."""
        sim = self.sim
        assert sim is not None

        async def make() -> tuple[int, int]:
            return sim.connect(a, b)

        return self.call(make)

    def drop(self, core: str) -> None:
        """Close ``core``'s connections abnormally, from the test's thread."""
        sim = self.sim
        assert sim is not None
        self.call(lambda: sim.drop_connections(core))

    def __enter__(self) -> Self:
        self._thread.start()
        assert self.ready.wait(20), "the simulator thread did not start"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None and self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

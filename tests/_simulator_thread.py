"""A CoreSimulator running in a thread, for tests that run doc examples as programs."""

from __future__ import annotations

import asyncio
import threading

from simplex_rpc.testing import CoreSimulator


class SimulatorThread:
    """A simulator on a free port, served from its own thread and event loop.

    ``contacts`` (two display names) are made contacts of each other before
    ``url`` is set; ``sim`` is the simulator, for reading its state afterwards.
    """

    def __init__(self, contacts: tuple[str, str] | None = None) -> None:
        self.url = ""
        self.sim: CoreSimulator | None = None
        self.ready = threading.Event()
        self._contacts = contacts
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with CoreSimulator() as sim:
            if self._contacts is not None:
                sim.connect(*self._contacts)
            self.sim, self.url = sim, sim.url
            self.ready.set()
            await self._stop.wait()

    def __enter__(self) -> SimulatorThread:
        self._thread.start()
        assert self.ready.wait(20)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

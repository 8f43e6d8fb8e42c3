"""The simulator behind the native API (``chat_send_cmd`` / ``chat_recv_msg_wait``).

The native library has no connection and no ``clientQSize``: ``chat_send_cmd``
parses and runs a command in the calling thread, so commands from several
threads run side by side, and ``chat_recv_msg_wait`` reads the core's one
``outputQ``, the same queue every WebSocket client of that core reads: an event
goes to one reader. Results are ``{"result"}`` or ``{"error"}``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from typing import Any

from ._model import CoreModel
from ._server import frame


class NativeHandle:
    """A native-library handle on one simulated core; use it from threads other than
    the simulator's event loop."""

    def __init__(self, model: CoreModel, core: str, loop: asyncio.AbstractEventLoop) -> None:
        self._model = model
        self._loop = loop
        self._closed = threading.Event()
        self._session = model.open_session(core)

    def __repr__(self) -> str:
        return f"<simulator native handle on core {self._session.core.name}>"

    def chat_send_cmd(self, cmd: str) -> str:
        if self._closed.is_set():
            return json.dumps({"error": {"type": "error", "errorType": {"type": "chatNotStarted"}}})
        future = asyncio.run_coroutine_threadsafe(
            self._model.run_command(self._session, cmd), self._loop
        )
        resp = future.result()
        if resp.get("type") == "chatCmdError":
            return frame({"error": resp["chatError"]})
        return frame({"result": resp})

    def chat_recv_msg_wait(self, wait_us: int) -> str:
        if self._closed.is_set():
            return ""
        seconds = max(wait_us, 0) / 1e6
        future = asyncio.run_coroutine_threadsafe(self._take(seconds), self._loop)
        try:
            event = future.result(timeout=seconds + 5.0)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            future.cancel()
            return ""
        return "" if event is None else frame({"result": event})

    async def _take(self, seconds: float) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(seconds):
                return await self._session.core.output.get()
        except TimeoutError:
            return None

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._model.close_session, self._session)

"""The MCP host's standard input as lines that a stop can end at once.

The SDK's ``stdio_server`` reads its default stdin with a worker thread per
line that cannot be abandoned: a proxy whose stdin is a pipe with nothing
written waits for the next line before it can exit. :class:`StdinLines` reads
a duplicate of the descriptor with ``os.read`` in a daemon thread (no Python
buffer lock that could stall the interpreter's exit), hands the lines over
with back-pressure, and :meth:`StdinLines.close` ends the iteration at once.
The SDK takes it as its ``stdin`` (``stdio_server(stdin=...)``): it only
iterates the lines.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Final

MAX_WAITING: Final = 64
"""Lines read ahead of the server at most: the reader waits beyond this."""

_CHUNK: Final = 1 << 16


class StdinLines:
    """An async iterator of the text lines of descriptor ``fd`` (UTF-8, bad bytes replaced).

    Create it inside the event loop that iterates it. The iteration ends at end
    of file or at :meth:`close`, whichever comes first.
    """

    def __init__(self, fd: int = 0) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._room = threading.Semaphore(MAX_WAITING)
        self._closed = False
        self._fd = os.dup(fd)  # the thread's own: closing the proxy never closes fd 0 under it
        self._thread = threading.Thread(
            target=self._read, name="simplex-rpc-mcp-proxy-stdin", daemon=True
        )
        self._thread.start()

    def _post(self, item: str | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the proxy has ended
            pass

    def _read(self) -> None:
        pending = b""
        try:
            while not self._closed:
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._room.acquire()
                    if self._closed:
                        return
                    self._post(line.decode("utf-8", "replace") + "\n")
            if pending and not self._closed:
                self._post(pending.decode("utf-8", "replace"))
        finally:
            self._post(None)
            os.close(self._fd)

    def close(self) -> None:
        """End the iteration now: lines not yet taken are dropped, as after end of file."""
        self._closed = True
        self._queue.put_nowait(None)
        self._room.release()  # a reader waiting for room sees the close

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._closed:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            self._closed = True
            raise StopAsyncIteration
        self._room.release()
        return item


__all__ = ["MAX_WAITING", "StdinLines"]

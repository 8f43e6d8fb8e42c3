"""The two ways to reach a chat core: the CLI's WebSocket API and the native library.

Both deliver into a :class:`CoreSink` (the adapter's ``_CoreBase``) through its
``_receive*``, ``_fail_command`` and ``_lost`` methods, so the rest of the
adapter never knows which one it runs over.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future as ConcurrentFuture
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .._wire.redact import RedactingLogger, redact, redact_tree, show
from ..errors import ChatCoreError, install_hint
from ._errors import ChatCoreClosed, _loads_core
from ._explain import connection_failure

#: The json module's string encoder without ASCII escaping (what json.dumps uses for a str).
_encode_string = json.JSONEncoder(ensure_ascii=False).encode

_ws_log = RedactingLogger(logging.getLogger("websockets.client"))


class CoreSink(Protocol):
    """What a transport delivers into: the adapter's core (``_CoreBase``).

    A protocol here, so that the transports need not import the core that
    imports them.
    """

    def _receive(self, message: str | bytes) -> None: ...

    def _receive_native_event(self, text: str) -> None: ...

    def _receive_native_result(self, corr_id: str, text: str) -> None: ...

    def _fail_command(self, corr_id: str, reason: str) -> None: ...

    def _lost(self, reason: str) -> None: ...


class _Transport(Protocol):
    description: str
    #: Commands sent on this connection and not answered yet (kept by the core): the
    #: keepalive never closes a connection while one runs.
    in_flight: int
    #: Set when the core drops this connection on purpose (a command it never answered):
    #: its end is then no loss of the core.
    retired: bool

    async def open(self, core: CoreSink) -> None: ...

    async def send(self, core: CoreSink, corr_id: str, cmd: str) -> None: ...

    def pause_reading(self) -> None:
        """Stop handing frames to the core until :meth:`resume_reading`."""

    def resume_reading(self) -> None: ...

    async def close(self) -> None: ...


class _WebSocketTransport:
    """The CLI's WebSocket API (simplex-chat ``bots/README.md``)."""

    def __init__(
        self,
        url: str,
        *,
        open_timeout: float | None,
        max_size: int | None,
        ping_interval: float | None,
        proxy: str | None,
    ) -> None:
        self.url = url
        self.description = redact(url)
        # websockets' own keepalive is off: it would close a connection whose command runs
        # long. The core reads no frame while a command runs (Server.hs: ``receive`` waits
        # while ``rcvQ``, of size 1, is full), so a ping is not answered then; the
        # keepalive here pings only an idle connection (see _keepalive).
        self._options: dict[str, Any] = {
            "open_timeout": open_timeout,
            "max_size": max_size,
            "ping_interval": None,
            "proxy": proxy,
        }
        self.ping_interval = ping_interval
        self.in_flight = 0
        self.retired = False
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        # Set while frames are read; cleared for back-pressure: the reader stops taking
        # messages, websockets' queue fills and stops reading the socket, the core's
        # writes wait.
        self._reading = asyncio.Event()
        self._reading.set()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    async def open(self, core: CoreSink) -> None:
        from websockets.asyncio.client import connect

        try:
            self._ws = await connect(self.url, logger=_ws_log, **self._options)
        except Exception as exc:  # OSError, TimeoutError, ssl and websockets' handshake errors
            # What was found at the address, and what to do (the one table: _explain).
            raise ChatCoreClosed(
                redact(connection_failure(self.url, self.description, exc))
            ) from None
        self._reader = asyncio.create_task(self._read(core), name="simplex-rpc-core-reader")
        if self.ping_interval is not None:
            self._keeper = asyncio.create_task(
                self._keepalive(self.ping_interval), name="simplex-rpc-core-keepalive"
            )

    async def _keepalive(self, interval: float) -> None:
        """Ping every ``interval`` seconds while no command of this connection runs; close
        the connection when a ping is not answered within ``interval`` and still no
        command runs (a command that runs has its own timeout; the core answers no ping
        meanwhile)."""
        from websockets.exceptions import ConnectionClosed

        ws = self._ws
        with contextlib.suppress(ConnectionClosed, asyncio.CancelledError):
            while True:
                await asyncio.sleep(interval)
                if self.in_flight:
                    continue
                pong = await ws.ping()
                try:
                    async with asyncio.timeout(interval):
                        await pong
                except TimeoutError:
                    if self.in_flight:
                        continue  # a command started meanwhile: the core is busy, not gone
                    _ws_log.warning(
                        "the chat core at %s did not answer a ping within %g s: closing",
                        self.description,
                        interval,
                    )
                    await ws.close(1011, "keepalive ping timeout")
                    return

    async def _read(self, core: CoreSink) -> None:
        from websockets.exceptions import ConnectionClosed

        reason = "closed"
        try:
            reading = self._reading
            async for message in self._ws:
                core._receive(message)
                if not reading.is_set():
                    await reading.wait()
        except ConnectionClosed as exc:
            reason = f"closed (code {exc.rcvd.code if exc.rcvd else 1006})"
        except Exception as exc:  # pragma: no cover - defensive: keep failing pending commands
            reason = f"lost: reading failed ({type(exc).__name__})"
        else:
            code = getattr(self._ws, "close_code", None)
            if code is not None:
                reason = f"closed (code {code})"
        if not self.retired:
            core._lost(reason)

    async def send(self, core: CoreSink, corr_id: str, cmd: str) -> None:
        from websockets.exceptions import ConnectionClosed

        # {"corrId", "cmd"} written directly: the command is the only text to escape
        # (the json module's string encoder), the corrId one of ours (JSON-escaped too).
        message = f'{{"corrId":{_encode_string(corr_id)},"cmd":{_encode_string(cmd)}}}'
        if not message.isascii():
            try:
                message.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: only the escaped form can go
                message = json.dumps({"corrId": corr_id, "cmd": cmd})
        try:
            await self._ws.send(message)
        except ConnectionClosed:
            raise ChatCoreClosed(
                f"the connection to the chat core at {self.description} is closed"
            ) from None

    async def close(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


class NativeHandle(Protocol):
    """The native chat library as the adapter uses it (the shape of libsimplex's C API).

    ``chat_send_cmd`` runs one command and returns ``{"result": resp}`` or
    ``{"error": chatError}`` as JSON text. ``chat_recv_msg_wait`` waits up to
    ``wait_us`` microseconds for an event and returns it the same way, or an
    empty string. Both block; the adapter calls them from worker threads.
    """

    def chat_send_cmd(self, cmd: str) -> str: ...

    def chat_recv_msg_wait(self, wait_us: int) -> str: ...

    def close(self) -> None: ...


class _NativeTransport:
    def __init__(self, handle: NativeHandle, *, workers: int, poll_us: int) -> None:
        self.description = f"native library ({type(handle).__name__})"
        self.in_flight = 0
        self.retired = False
        self._handle = handle
        self._workers = workers
        self._poll_us = poll_us
        self._executor: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = threading.Event()  # cleared for back-pressure: no event is polled
        self._reading.set()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    async def open(self, core: CoreSink) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="simplex-rpc-cmd")
        self._thread = threading.Thread(
            target=self._read, args=(core,), name="simplex-rpc-events", daemon=True
        )
        self._thread.start()

    def _post(self, callback: Callable[..., None], *args: object) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(callback, *args)

    def _read(self, core: CoreSink) -> None:
        while not self._stop.is_set():
            if not self._reading.wait(self._poll_us / 1e6):
                continue  # paused: the library keeps the events meanwhile
            try:
                text = self._handle.chat_recv_msg_wait(self._poll_us)
            except Exception as exc:
                self._post(core._lost, f"lost: chat_recv_msg_wait failed ({type(exc).__name__})")
                return
            if text:
                self._post(core._receive_native_event, text)

    async def send(self, core: CoreSink, corr_id: str, cmd: str) -> None:
        if self._executor is None or self._stop.is_set():
            raise ChatCoreClosed(f"the {self.description} is closed")
        handle = self._handle

        def done(fut: ConcurrentFuture[str]) -> None:
            exc = fut.exception()
            if exc is not None:
                self._post(
                    core._fail_command, corr_id, f"chat_send_cmd failed ({type(exc).__name__})"
                )
            else:
                self._post(core._receive_native_result, corr_id, fut.result())

        try:
            future = self._executor.submit(handle.chat_send_cmd, cmd)
        except RuntimeError:
            raise ChatCoreClosed(f"the {self.description} is closed") from None
        future.add_done_callback(done)

    async def close(self) -> None:
        self._stop.set()
        self._reading.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._executor is not None:
            # Commands already in the library finish before it is closed.
            await asyncio.to_thread(self._executor.shutdown, True, cancel_futures=True)
        await asyncio.to_thread(self._handle.close)


class LibsimplexHandle:
    """A :class:`NativeHandle` over libsimplex, as the ``simplex-chat`` package loads it.

    Install the ``native`` extra (docs/install.md). That package downloads
    its native library at run time, from outside the package registries (its
    ``simplex_chat._native`` fetches a release archive on first use and
    caches it; ``SIMPLEX_LIBS_DIR`` points it at a local copy instead).

    The C functions are used as that package declares them (its
    ``_native._setup_signatures``): each returns a string the caller frees.
    """

    def __init__(self, lib: Any, free: Callable[[Any], object], ctrl: int) -> None:
        self._lib = lib
        self._free = free
        self._ctrl = ctrl
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"<LibsimplexHandle {'closed' if self._closed else 'open'}>"

    @classmethod
    def open(
        cls,
        db_prefix: str,
        *,
        db_key: str = "",
        confirm: str = "yesUp",
        backend: str = "sqlite",
    ) -> LibsimplexHandle:
        """Load the library (downloading it on first use) and open the chat database.

        Blocks; call it from a worker thread in async code.
        """
        try:
            native = importlib.import_module("simplex_chat._native")
        except ImportError:
            raise ChatCoreError(
                "the native transport needs the simplex-chat package: " + install_hint("native")
            ) from None
        lib = native.lib_for(backend)
        free = native.libc().free
        ctrl = ctypes.c_void_p()
        ptr = lib.chat_migrate_init(
            db_prefix.encode("utf-8"),
            db_key.encode("utf-8"),
            confirm.encode("utf-8"),
            ctypes.byref(ctrl),
        )
        text = _take_string(ptr, free)
        try:
            result = _loads_core(text)
        except ValueError:
            result = None
        if not isinstance(result, dict) or result.get("type") != "ok" or not ctrl.value:
            kind = result.get("type") if isinstance(result, dict) else "invalid result"
            raise ChatCoreError(
                f"chat_migrate_init failed: {show(kind, 60)}",
                chat_error=redact_tree(result) if isinstance(result, dict) else None,
            )
        return cls(lib, free, int(ctrl.value))

    def chat_send_cmd(self, cmd: str) -> str:
        if self._closed:
            raise ChatCoreClosed("the native chat library is closed")
        return _take_string(self._lib.chat_send_cmd(self._ctrl, cmd.encode("utf-8")), self._free)

    def chat_recv_msg_wait(self, wait_us: int) -> str:
        if self._closed:
            return ""
        return _take_string(self._lib.chat_recv_msg_wait(self._ctrl, int(wait_us)), self._free)

    def close(self) -> None:
        """Stop the chat and close its database (the order the package's ``ChatApi.close`` uses)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _take_string(self._lib.chat_send_cmd(self._ctrl, b"/_stop"), self._free)
        _take_string(self._lib.chat_close_store(self._ctrl), self._free)


def _take_string(ptr: Any, free: Callable[[Any], object]) -> str:
    """Copy a NUL-terminated UTF-8 string returned by the library, then free it."""
    if not ptr:
        raise ChatCoreError("the native chat library returned a null pointer")
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ctypes.c_void_p(ptr))

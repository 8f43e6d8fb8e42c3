"""A thin asyncio adapter to the SimpleX chat core: Service RPC requester and responder.

The chat core does the work: it opens the connection to the address, runs the
double ratchet, signs with ``sign_key=``, pads, verifies, and reports the
verified ``signerKey``. This module drives it through its command API and is
the only module of the library that does I/O.

Transports
    * :meth:`ChatCore.connect`: the WebSocket API of the SimpleX CLI
      (``simplex-chat -p PORT``). A command is ``{"corrId", "cmd"}``, its
      answer ``{"corrId", "resp"}``, an event ``{"resp"}`` without a
      ``corrId`` (simplex-chat ``bots/README.md``, "Sending commands" and
      "Processing events").
    * :meth:`ChatCore.native`: the native library of the ``simplex-chat``
      Python package (``chat_send_cmd``, ``chat_recv_msg_wait``; results
      ``{"result": ...}`` or ``{"error": ...}``), behind the same interface.

Secrets: the private key given as ``sign_key`` never appears in a log line, an
exception message or a repr; everything logged passes through
:func:`simplex_rpc._redact.redact`. What a peer sent is data: it is parsed
strictly, never interpreted, and logged escaped and truncated.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import inspect
import itertools
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from concurrent.futures import Future as ConcurrentFuture
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol

from . import _json
from ._envelope import (
    UNSET,
    ErrorCode,
    Request,
    Response,
    check_protocol_name,
    check_request_key,
)
from ._keys import PublicKey, SigningKey
from ._redact import RedactingLogger, redact, redact_tree, show
from ._seal import MAX_RESPONSE
from .errors import ChatCoreError, EnvelopeError, KeyFormatError, SimplexRpcError

__all__ = [
    "DEFAULT_HANDLER_TIMEOUT",
    "RESPONSE_WINDOW",
    "ChatCore",
    "ChatCoreClosed",
    "ChatCoreError",
    "ChatCoreTimeout",
    "EventStream",
    "LibsimplexHandle",
    "NativeHandle",
    "RateLimit",
    "ServiceAddress",
    "ServiceRequest",
    "service_request_command",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.adapter"))
_ws_log = RedactingLogger(logging.getLogger("websockets.client"))

#: The core accepts a response within 180 seconds of receiving the request
#: (the protocol text, "Service RPC transport", Requirements).
RESPONSE_WINDOW: Final = 180.0
#: The responder's default handler deadline: below the core's window, so that
#: the error answer still reaches the requester.
DEFAULT_HANDLER_TIMEOUT: Final = 170.0
#: The requester's default wait (the protocol's default ``timeout``).
DEFAULT_REQUEST_TIMEOUT: Final = 30
#: How long a plain command may take before the adapter gives up on it.
DEFAULT_COMMAND_TIMEOUT: Final = 60.0
#: Extra time given to the core, beyond ``timeout``, to answer a service request.
_REQUEST_GRACE: Final = 15.0

# A request id is put into a command as one token: it must be one.
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9_=+/.:-]{1,512}")
_OPTION_NAMES: Final = ("timeout=", "sign_key=")


class ChatCoreClosed(ChatCoreError):
    """The connection to the chat core is closed or was lost; pending commands fail with it."""


class ChatCoreTimeout(ChatCoreError):
    """The chat core did not answer a command in time."""


# ---------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceAddress:
    """A contact address with ratchet keys: the target of Service RPC requests."""

    full_link: str
    short_link: str | None = None

    @property
    def link(self) -> str:
        """The short link when there is one, else the full link."""
        return self.short_link or self.full_link

    @classmethod
    def from_created_link(cls, obj: object) -> ServiceAddress:
        """Build from the core's ``CreatedConnLink`` (``connFullLink``, ``connShortLink``)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("connFullLink"), str):
            raise ChatCoreError("the chat core's answer has no contact link (connLinkContact)")
        short = obj.get("connShortLink")
        return cls(
            full_link=obj["connFullLink"], short_link=short if isinstance(short, str) else None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceRequest:
    """One request as the responder's handler sees it.

    ``signer`` is the key the core verified the signature with, or None for an
    unsigned request; ``request`` is the parsed envelope (its ``request`` is
    the protocol's message). The content is the peer's data: never code.
    """

    request_id: str
    signer: PublicKey | None
    request: Request
    user_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """A per-signer token bucket: ``requests`` requests per ``per`` seconds.

    Unsigned requests share one bucket. At most ``max_signers`` buckets are
    kept; the least recently used is forgotten first (so memory stays bounded
    however many keys requesters make).
    """

    requests: int
    per: float
    max_signers: int = 10_000

    def __post_init__(self) -> None:
        if (
            isinstance(self.requests, bool)
            or not isinstance(self.requests, int)
            or self.requests < 1
        ):
            raise ValueError("rate limit: requests must be a positive integer")
        if not isinstance(self.per, (int, float)) or not self.per > 0 or math.isinf(self.per):
            raise ValueError("rate limit: per must be a positive number of seconds")
        if self.max_signers < 1:
            raise ValueError("rate limit: max_signers must be positive")


class _Limiter:
    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = float(limit.requests)
        self._rate = limit.requests / float(limit.per)
        self._max = limit.max_signers
        self._clock = clock
        self._buckets: OrderedDict[bytes, tuple[float, float]] = OrderedDict()

    def check(self, signer: PublicKey | None) -> int | None:
        """Take a token for ``signer``; return None, or the seconds until one is free."""
        key = signer.raw if signer is not None else b""
        now = self._clock()
        tokens, last = self._buckets.pop(key, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        wait: int | None = None
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = max(1, math.ceil((1.0 - tokens) / self._rate))
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return wait


Handler = Callable[[ServiceRequest], Any]
"""A responder's handler: returns (or, if async, resolves to) a Response or a JSON value."""


# ---------------------------------------------------------------------------
# Commands


def _check_user_id(user_id: object) -> int:
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 1:
        raise SimplexRpcError(f"user_id: expected a positive integer, got {show(user_id, 40)}")
    return user_id


def _check_target(target: object) -> str:
    if not isinstance(target, str) or not target:
        raise SimplexRpcError("target: expected a contact address link or a SimpleX name")
    if any(ch.isspace() or not ch.isprintable() for ch in target):
        raise SimplexRpcError("target: must not contain white space or control characters")
    if target.startswith(_OPTION_NAMES):
        raise SimplexRpcError("target: must not begin with an option name (timeout=, sign_key=)")
    return target


def service_request_command(
    user_id: int,
    target: str,
    request: Request,
    *,
    timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
    sign_key: SigningKey | None = None,
) -> str:
    """The exact command text of a service request.

    ``/_service_request <userId> <target> [timeout=<s>] [sign_key=<key>] <json>``,
    with ``<json>`` the compact envelope.

    The text holds the private key when ``sign_key`` is given: it goes to the
    core and nowhere else (never log it unredacted).
    """
    _check_user_id(user_id)
    _check_target(target)
    if not isinstance(request, Request):
        raise TypeError(f"request: expected a Request, got {type(request).__name__}")
    parts = ["/_service_request", str(user_id), target]
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise SimplexRpcError("timeout: expected a positive whole number of seconds")
        parts.append(f"timeout={timeout}")
    if sign_key is not None:
        if not isinstance(sign_key, SigningKey):
            raise TypeError(f"sign_key: expected a SigningKey, got {type(sign_key).__name__}")
        parts.append(f"sign_key={sign_key.encode()}")
    parts.append(request.to_json().decode("utf-8"))
    return " ".join(parts)


def _command_name(cmd: str) -> str:
    return cmd.split(" ", 1)[0][:40]


def _loads_core(text: str | bytes) -> Any:
    """Parse a message of the local chat core (stdlib JSON, no NaN, bounded by its size)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {type(exc).__name__}") from None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _dump_command_json(value: Any) -> str:
    """Compact JSON for a command argument; one line, so it cannot inject another command."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _core_error(what: str, chat_error: object) -> ChatCoreError:
    safe = redact_tree(chat_error) if isinstance(chat_error, dict) else None
    err = ChatCoreError("", chat_error=safe)
    path = err.type_path or "unknown error"
    message = f"chat core refused {what}: {path}"
    detail = _error_detail(safe)
    if detail:
        message += f" ({detail})"
    err.args = (redact(message),)
    return err


def _error_detail(chat_error: object) -> str:
    """A short human text from the innermost ``message``-like field, if any."""
    node = chat_error
    found = ""
    for _ in range(16):
        if not isinstance(node, dict):
            break
        for key in ("message", "rejectReason", "internalErr", "respErr"):
            value = node.get(key)
            if isinstance(value, str) and value:
                found = value
        node = next((v for k, v in node.items() if k != "type" and isinstance(v, dict)), None)
    return found[:200]


def _envelope_json(data: object, kind: str, member: str) -> str | bytes:
    """The JSON text of the ``kind`` envelope the core reported as ``member``.

    The core reports an envelope as a JSON object (encoded again here) or as
    its JSON text (returned as it is, for the envelope parser to check);
    anything else, or an object that is not JSON, raises :class:`EnvelopeError`.
    """
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        try:
            return _json.dumps(data)
        except _json.JsonError as exc:
            raise EnvelopeError(f"{kind} envelope: {exc}") from None
    raise EnvelopeError(f"{kind} envelope: {member} is neither a JSON object nor a string")


def _parse_response_data(data: object) -> Response:
    """The response envelope from a ``serviceResponse``'s ``responseData``."""
    return Response.parse(_envelope_json(data, "response", "responseData"))


def _parse_request_data(data: object) -> Request:
    """The request envelope from a ``serviceRequest``'s ``requestData``."""
    return Request.parse(_envelope_json(data, "request", "requestData"))


# ---------------------------------------------------------------------------
# Events


_END: Final = object()


class EventStream:
    """The core's events from the moment of subscription, as an async iterator.

    Iteration ends when the core is closed by this side, and raises
    :class:`ChatCoreClosed` when the connection is lost. At most ``limit``
    events wait in the stream; more are dropped with a warning (a stalled
    reader must not stall command answers).
    """

    def __init__(self, core: ChatCore, limit: int) -> None:
        self._core = core
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._limit = limit
        self.dropped = 0

    def _put(self, event: dict[str, Any]) -> None:
        if self._queue.qsize() >= self._limit:
            self.dropped += 1
            log.warning("event stream full: dropped a %s event", show(event.get("type"), 40))
            return
        self._queue.put_nowait(event)

    def _end(self) -> None:
        self._queue.put_nowait(_END)

    def close(self) -> None:
        """Stop receiving events."""
        self._core._subscribers.discard(self)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)
            failure = self._core._failure
            if failure is not None and not self._core._closing:
                raise ChatCoreClosed(str(failure))
            raise StopAsyncIteration
        assert isinstance(item, dict)
        return item

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# Transports


class _Transport(Protocol):
    description: str

    async def open(self, core: ChatCore) -> None: ...

    async def send(self, core: ChatCore, corr_id: str, cmd: str) -> None: ...

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
        self._options: dict[str, Any] = {
            "open_timeout": open_timeout,
            "max_size": max_size,
            "ping_interval": ping_interval,
            "proxy": proxy,
        }
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self, core: ChatCore) -> None:
        from websockets.asyncio.client import connect

        try:
            self._ws = await connect(self.url, logger=_ws_log, **self._options)
        except (OSError, TimeoutError) as exc:
            raise ChatCoreClosed(
                f"cannot connect to the chat core at {self.description}: {type(exc).__name__}"
            ) from None
        except Exception as exc:  # websockets' handshake errors
            raise ChatCoreClosed(
                f"cannot connect to the chat core at {self.description}: {type(exc).__name__}"
            ) from None
        self._reader = asyncio.create_task(self._read(core), name="simplex-rpc-core-reader")

    async def _read(self, core: ChatCore) -> None:
        from websockets.exceptions import ConnectionClosed

        reason = "closed"
        try:
            async for message in self._ws:
                core._receive(message)
        except ConnectionClosed as exc:
            reason = f"closed (code {exc.rcvd.code if exc.rcvd else 1006})"
        except Exception as exc:  # pragma: no cover - defensive: keep failing pending commands
            reason = f"lost: reading failed ({type(exc).__name__})"
        else:
            code = getattr(self._ws, "close_code", None)
            if code is not None:
                reason = f"closed (code {code})"
        core._lost(reason)

    async def send(self, core: ChatCore, corr_id: str, cmd: str) -> None:
        from websockets.exceptions import ConnectionClosed

        message = json.dumps({"corrId": corr_id, "cmd": cmd}, ensure_ascii=False)
        try:
            await self._ws.send(message)
        except ConnectionClosed:
            raise ChatCoreClosed(
                f"the connection to the chat core at {self.description} is closed"
            ) from None

    async def close(self) -> None:
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
        self._handle = handle
        self._workers = workers
        self._poll_us = poll_us
        self._executor: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def open(self, core: ChatCore) -> None:
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

    def _read(self, core: ChatCore) -> None:
        while not self._stop.is_set():
            try:
                text = self._handle.chat_recv_msg_wait(self._poll_us)
            except Exception as exc:
                self._post(core._lost, f"lost: chat_recv_msg_wait failed ({type(exc).__name__})")
                return
            if text:
                self._post(core._receive_native_event, text)

    async def send(self, core: ChatCore, corr_id: str, cmd: str) -> None:
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
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._executor is not None:
            # Commands already in the library finish before it is closed.
            await asyncio.to_thread(self._executor.shutdown, True, cancel_futures=True)
        await asyncio.to_thread(self._handle.close)


class LibsimplexHandle:
    """A :class:`NativeHandle` over libsimplex, as the ``simplex-chat`` package loads it.

    Install with ``pip install 'simplex-rpc[native]'``. That package downloads
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
                "the native transport needs the simplex-chat package:"
                " pip install 'simplex-rpc[native]'"
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


# ---------------------------------------------------------------------------
# The core


class ChatCore:
    """A connection to a SimpleX chat core, for Service RPC.

    Use :meth:`connect` (WebSocket) or :meth:`native` as an async context
    manager. Commands may run concurrently; answers are matched by
    ``corrId``. When the connection drops, every pending command fails with
    :class:`ChatCoreClosed`.
    """

    def __init__(self, transport: _Transport, *, event_buffer: int = 10_000) -> None:
        """Wrap a transport; use :meth:`connect` or :meth:`native` instead of calling this."""
        self._transport = transport
        self._event_buffer = event_buffer
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._subscribers: set[EventStream] = set()
        self._failure: ChatCoreClosed | None = None
        self._closing = False
        self._counter = itertools.count(1)

    def __repr__(self) -> str:
        state = "closed" if self._failure is not None else "open"
        return f"<ChatCore {self._transport.description} {state}>"

    # -- opening and closing -------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        open_timeout: float | None = 10.0,
        max_size: int | None = 16 * 2**20,
        ping_interval: float | None = 20.0,
        proxy: str | None = None,
        event_buffer: int = 10_000,
    ) -> AsyncIterator[ChatCore]:
        """Connect to the CLI's WebSocket API (``simplex-chat -p PORT``): ``async with``.

        ``proxy`` is None by default: the CLI listens on the local host.
        """
        transport = _WebSocketTransport(
            url,
            open_timeout=open_timeout,
            max_size=max_size,
            ping_interval=ping_interval,
            proxy=proxy,
        )
        async with cls._opened(transport, event_buffer) as core:
            log.info("connected to the chat core at %s", transport.description)
            yield core

    @classmethod
    @contextlib.asynccontextmanager
    async def native(
        cls,
        handle: NativeHandle,
        *,
        workers: int = 64,
        poll_us: int = 200_000,
        event_buffer: int = 10_000,
    ) -> AsyncIterator[ChatCore]:
        """Drive a native chat library through a :class:`NativeHandle`: ``async with``.

        ``workers`` bounds the commands running at once (a service request
        blocks its worker until the answer); ``poll_us`` is the event wait.
        """
        transport = _NativeTransport(handle, workers=workers, poll_us=poll_us)
        async with cls._opened(transport, event_buffer) as core:
            yield core

    @classmethod
    @contextlib.asynccontextmanager
    async def _opened(cls, transport: _Transport, event_buffer: int) -> AsyncIterator[ChatCore]:
        """A core over ``transport``, opened; closed when the block ends, however it ends."""
        core = cls(transport, event_buffer=event_buffer)
        await transport.open(core)
        try:
            yield core
        finally:
            await core.close()

    @classmethod
    @contextlib.asynccontextmanager
    async def libsimplex(
        cls, db_prefix: str, *, db_key: str = "", backend: str = "sqlite", workers: int = 64
    ) -> AsyncIterator[ChatCore]:
        """Open a chat database with the ``simplex-chat`` package's native library.

        See :class:`LibsimplexHandle`: the package downloads the library at run
        time from outside the registries.
        """
        handle = await asyncio.to_thread(
            LibsimplexHandle.open, db_prefix, db_key=db_key, backend=backend
        )
        async with cls.native(handle, workers=workers) as core:
            yield core

    @property
    def closed(self) -> bool:
        """True once the connection is closed or lost."""
        return self._failure is not None

    async def close(self) -> None:
        """Close the connection; pending commands fail with :class:`ChatCoreClosed`."""
        if self._failure is None:
            self._closing = True
            self._lost("closed by this side")
        await self._transport.close()

    # -- input from transports -------------------------------------------------

    def _receive(self, message: str | bytes) -> None:
        if not isinstance(message, str):
            log.warning("chat core sent a binary message (%d bytes); ignored", len(message))
            return
        try:
            msg = _loads_core(message)
        except ValueError:
            log.warning("chat core sent a message that is not JSON: %s", show(message))
            return
        resp = msg.get("resp") if isinstance(msg, dict) else None
        if not isinstance(resp, dict) or not isinstance(resp.get("type"), str):
            log.warning("chat core sent a message without resp.type: %s", show(message))
            return
        corr = msg.get("corrId")
        if isinstance(corr, int) and not isinstance(corr, bool):
            corr = str(corr)
        if isinstance(corr, str) and corr:
            self._deliver(corr, resp)
        else:
            self._event(resp)

    def _receive_native_result(self, corr_id: str, text: str) -> None:
        try:
            result = _loads_core(text)
        except ValueError:
            result = None
        if isinstance(result, dict) and isinstance(result.get("result"), dict):
            self._deliver(corr_id, result["result"])
        elif isinstance(result, dict) and "error" in result:
            self._deliver(corr_id, {"type": "chatCmdError", "chatError": result["error"]})
        else:
            self._fail_command(corr_id, f"invalid chat_send_cmd result {show(text, 80)}")

    def _receive_native_event(self, text: str) -> None:
        try:
            result = _loads_core(text)
        except ValueError:
            result = None
        if isinstance(result, dict) and isinstance(result.get("result"), dict):
            event = result["result"]
            if isinstance(event.get("type"), str):
                self._event(event)
                return
        elif isinstance(result, dict) and "error" in result:
            self._event({"type": "chatError", "chatError": result["error"]})
            return
        log.warning("native library sent an invalid event: %s", show(text))

    def _deliver(self, corr_id: str, resp: dict[str, Any]) -> None:
        future = self._pending.get(corr_id)
        if future is None or future.done():
            log.debug("answer to a command no longer waited for (corrId %s)", show(corr_id, 40))
            return
        future.set_result(resp)

    def _fail_command(self, corr_id: str, reason: str) -> None:
        future = self._pending.get(corr_id)
        if future is not None and not future.done():
            future.set_exception(ChatCoreError(f"the chat core command failed: {reason}"))

    def _event(self, event: dict[str, Any]) -> None:
        log.debug("event %s", show(event.get("type"), 60))
        for stream in list(self._subscribers):
            stream._put(event)

    def _lost(self, reason: str) -> None:
        if self._failure is not None:
            return
        text = f"connection to the chat core ({self._transport.description}) {reason}"
        self._failure = ChatCoreClosed(redact(text))
        if not self._closing:
            log.warning("%s; %d commands were pending", text, len(self._pending))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(
                    ChatCoreClosed(redact(f"{text} before the command was answered"))
                )
        for stream in list(self._subscribers):
            stream._end()

    # -- commands -------------------------------------------------------------

    async def command(
        self, cmd: str, *, timeout: float | None = DEFAULT_COMMAND_TIMEOUT
    ) -> dict[str, Any]:
        """Send one command and return the core's ``resp`` object.

        Raises :class:`ChatCoreError` (with the core's error object) for a
        ``chatCmdError``, :class:`ChatCoreClosed` when the connection is or
        gets closed, and :class:`ChatCoreTimeout` when no answer comes in
        ``timeout`` seconds.
        """
        if not isinstance(cmd, str) or "\n" in cmd or "\r" in cmd:
            raise SimplexRpcError("command: expected one line of text")
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        name = _command_name(cmd)
        corr_id = str(next(self._counter))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[corr_id] = future
        log.debug("command %s: %s", corr_id, show(cmd, 300))
        try:
            await self._transport.send(self, corr_id, cmd)
            try:
                async with asyncio.timeout(timeout):
                    resp = await future
            except TimeoutError:
                raise ChatCoreTimeout(
                    f"the chat core did not answer {name} within {timeout:g} s"
                ) from None
        finally:
            self._pending.pop(corr_id, None)
        if resp.get("type") == "chatCmdError":
            raise _core_error(name, resp.get("chatError"))
        log.debug("answer %s: %s", corr_id, show(resp.get("type"), 60))
        return resp

    def events(self) -> EventStream:
        """Subscribe to the core's events (from now on); iterate the result."""
        stream = EventStream(self, self._event_buffer)
        if self._failure is not None:
            stream._end()
        else:
            self._subscribers.add(stream)
        return stream

    async def start(self, service_requests: bool = True, *, main: bool = True) -> bool:
        """Start the chat, with service requests enabled or not; True if it was started now.

        Sends ``/_start main=on service_requests=on``: the syntax of simplex-chat
        ``bots/api/COMMANDS.md`` (StartChat, ``/_start main=on|off[ snd_files=off]
        [ service_requests=on]``), where the bare ``/_start`` takes no options.
        A chat already running answers ``chatRunning`` and keeps its settings:
        then False is returned and a warning logged.
        """
        cmd = "/_start main=" + ("on" if main else "off")
        if service_requests:
            cmd += " service_requests=on"
        resp = await self.command(cmd)
        kind = resp.get("type")
        if kind == "chatStarted":
            log.info("chat started (service requests %s)", "on" if service_requests else "off")
            return True
        if kind == "chatRunning":
            if service_requests:
                log.warning(
                    "chat was already running: service_requests=on may not be in effect;"
                    " start the core with service requests enabled"
                )
            return False
        raise ChatCoreError(f"unexpected answer {show(kind, 60)} to /_start")

    async def service_address(self, user_id: int, pq_ratchet: bool = True) -> ServiceAddress:
        """Make sure ``user_id``'s contact address exists and has ratchet keys; return it.

        Creates it with ``/_address <userId> pq_ratchet=on|off``, or updates the
        existing one with ``/_address_settings <userId> pq_ratchet=on|off
        <settings>`` keeping its settings (simplex-chat ``bots/api/COMMANDS.md``,
        APICreateMyAddress and APISetAddressSettings; the protocol text: the
        core adds ratchet keys to an address created or updated with either
        option).
        """
        _check_user_id(user_id)
        option = f"pq_ratchet={'on' if pq_ratchet else 'off'}"
        try:
            shown = await self.command(f"/_show_address {user_id}")
        except ChatCoreError as exc:
            if "userContactLinkNotFound" not in exc.type_path:
                raise
            created = await self.command(f"/_address {user_id} {option}")
            address = ServiceAddress.from_created_link(created.get("connLinkContact"))
            log.info("created a contact address with ratchet keys for user %d", user_id)
            return address
        contact_link = shown.get("contactLink")
        settings = contact_link.get("addressSettings") if isinstance(contact_link, dict) else None
        if not isinstance(settings, dict):
            settings = {"businessAddress": False}
        updated = await self.command(
            f"/_address_settings {user_id} {option} {_dump_command_json(settings)}"
        )
        link = updated.get("contactLink")
        address = ServiceAddress.from_created_link(
            link.get("connLinkContact") if isinstance(link, dict) else None
        )
        log.info("updated the contact address of user %d with ratchet keys", user_id)
        return address

    async def service_request(
        self,
        user_id: int,
        target: str,
        request: Request,
        *,
        timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
        sign_key: SigningKey | None = None,
        retries: int = 0,
        max_retry_after: float | None = None,
    ) -> Response:
        """Send one request and return the response envelope.

        Sends ``/_service_request <userId> <target> [timeout=<s>]
        [sign_key=<key>] <json>`` and parses ``responseData`` (a JSON value or
        a JSON string) as the response. A response whose error has
        ``retryAfter`` is repeated after that many seconds, at most
        ``retries`` times, and not when ``retryAfter`` exceeds
        ``max_retry_after``; an error without ``retryAfter`` (any code, known
        or not) is final. Errors of the core raise :class:`ChatCoreError`.
        """
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SimplexRpcError("retries: expected a non-negative integer")
        cmd = service_request_command(user_id, target, request, timeout=timeout, sign_key=sign_key)
        wait_for = (
            float(timeout if timeout is not None else DEFAULT_REQUEST_TIMEOUT) + _REQUEST_GRACE
        )
        attempt = 0
        while True:
            resp = await self.command(cmd, timeout=wait_for)
            if resp.get("type") != "serviceResponse":
                raise ChatCoreError(
                    f"unexpected answer {show(resp.get('type'), 60)} to /_service_request"
                )
            response = _parse_response_data(resp.get("responseData"))
            error = response.error
            if error is None or error.is_final() or attempt >= retries:
                return response
            assert error.retry_after is not None
            if max_retry_after is not None and error.retry_after > max_retry_after:
                return response
            attempt += 1
            log.info(
                "service request answered %s with retryAfter %d: repeating (%d of %d)",
                show(error.code, 40),
                error.retry_after,
                attempt,
                retries,
            )
            await asyncio.sleep(error.retry_after)

    async def serve(
        self,
        user_id: int,
        handler: Handler,
        *,
        protocols: Iterable[str],
        versions: Mapping[str, Collection[Any]] | None = None,
        concurrency: int = 32,
        handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
        rate_limit: RateLimit | None = None,
        max_response_bytes: int = MAX_RESPONSE,
    ) -> NoReturn:
        """Answer every ``serviceRequest`` event for ``user_id``; run until cancelled.

        For each request: an invalid envelope (or a ``signerKey`` that is not
        an Ed25519 key) is answered ``bad_request``; ``requestKey`` must match
        the verified signer (``check_request_key``); a protocol not in
        ``protocols`` is answered ``unsupported_protocol``, and a version not
        in ``versions[protocol]`` (where given) ``unsupported_version``; the
        optional ``rate_limit`` answers ``rate_limited`` with ``retryAfter``.
        Then ``handler`` is called with a :class:`ServiceRequest` and returns
        a :class:`Response` or a JSON value (a success). A handler that raises
        is answered ``internal`` (without its text); one still running
        ``handler_timeout`` seconds after the request arrived (time spent
        waiting for a concurrency slot included) is cancelled and answered
        ``conversation_required`` for ``a2a`` and ``internal`` otherwise. A
        response longer than ``max_response_bytes`` (at most the block's
        ``MAX_RESPONSE``) is answered ``too_large``. At most ``concurrency``
        requests run at once, and each is answered exactly once.

        Raises :class:`ChatCoreClosed` when the connection ends.
        """
        responder = _Responder(
            self,
            _check_user_id(user_id),
            handler,
            protocols=protocols,
            versions=versions,
            concurrency=concurrency,
            handler_timeout=handler_timeout,
            rate_limit=rate_limit,
            max_response_bytes=max_response_bytes,
        )
        await responder.run()
        raise AssertionError("unreachable")  # pragma: no cover


# ---------------------------------------------------------------------------
# The responder


def _version_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class _Incoming:
    request_id: str
    signer_key: object
    data: object
    received: float  # the event loop's time when the event arrived


class _Responder:
    def __init__(
        self,
        core: ChatCore,
        user_id: int,
        handler: Handler,
        *,
        protocols: Iterable[str],
        versions: Mapping[str, Collection[Any]] | None,
        concurrency: int,
        handler_timeout: float,
        rate_limit: RateLimit | None,
        max_response_bytes: int,
    ) -> None:
        if not callable(handler):
            raise TypeError("handler: expected a callable")
        if isinstance(protocols, str):
            raise TypeError("protocols: expected a collection of protocol names, not one string")
        self.protocols = frozenset(check_protocol_name(p, "protocols") for p in protocols)
        if not self.protocols:
            raise SimplexRpcError("protocols: at least one protocol must be served")
        self.versions: dict[str, frozenset[str]] = {}
        for name, served in (versions or {}).items():
            check_protocol_name(name, "versions")
            if name not in self.protocols:
                raise SimplexRpcError(f"versions: {name!r} is not among the served protocols")
            if isinstance(served, (str, bytes)):
                raise TypeError(f"versions[{name!r}]: expected a collection of versions")
            self.versions[name] = frozenset(_version_key(v) for v in served)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise SimplexRpcError("concurrency: expected a positive integer")
        if not isinstance(handler_timeout, (int, float)) or not handler_timeout > 0:
            raise SimplexRpcError("handler_timeout: expected a positive number of seconds")
        if handler_timeout >= RESPONSE_WINDOW:
            log.warning(
                "handler_timeout %g s is not below the core's %g s window:"
                " late answers will be refused",
                handler_timeout,
                RESPONSE_WINDOW,
            )
        if not isinstance(max_response_bytes, int) or not 1 <= max_response_bytes <= MAX_RESPONSE:
            raise SimplexRpcError(f"max_response_bytes: expected 1 to {MAX_RESPONSE}")
        self.core = core
        self.user_id = user_id
        self.handler = handler
        self.handler_timeout = float(handler_timeout)
        self.max_response_bytes = max_response_bytes
        self.limiter = _Limiter(rate_limit) if rate_limit is not None else None
        self.slots = asyncio.Semaphore(concurrency)
        self.inflight: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> NoReturn:
        stream = self.core.events()
        log.info("serving %s for user %d", ", ".join(sorted(self.protocols)), self.user_id)
        try:
            async for event in stream:
                if event.get("type") != "serviceRequest":
                    continue
                incoming = self._accept(event)
                if incoming is None:
                    continue
                await self.slots.acquire()
                self.inflight.add(incoming.request_id)
                task = asyncio.create_task(self._answer(incoming))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            raise ChatCoreClosed("the connection to the chat core was closed")
        finally:
            stream.close()
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)

    def _accept(self, event: dict[str, Any]) -> _Incoming | None:
        user = event.get("user")
        if not isinstance(user, dict) or user.get("userId") != self.user_id:
            return None
        request_id = event.get("requestId")
        if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
            log.warning(
                "serviceRequest with an unusable requestId %s: ignored", show(request_id, 80)
            )
            return None
        if request_id in self.inflight:
            log.warning(
                "serviceRequest %s is already being answered: ignored", show(request_id, 80)
            )
            return None
        return _Incoming(
            request_id=request_id,
            signer_key=event.get("signerKey"),
            data=event.get("requestData"),
            received=asyncio.get_running_loop().time(),
        )

    async def _answer(self, incoming: _Incoming) -> None:
        try:
            response, protocol = await self._respond(incoming)
            await self._send(incoming.request_id, response, protocol)
        except asyncio.CancelledError:
            raise
        except ChatCoreClosed as exc:
            log.warning("request %s not answered: %s", show(incoming.request_id, 80), exc)
        except Exception:  # pragma: no cover - defensive: one request never stops the loop
            log.error("answering request %s failed", show(incoming.request_id, 80), exc_info=True)
        finally:
            self.inflight.discard(incoming.request_id)
            self.slots.release()

    async def _respond(self, incoming: _Incoming) -> tuple[Response, str | None]:
        rid = show(incoming.request_id, 80)
        signer: PublicKey | None = None
        if incoming.signer_key is not None:
            if not isinstance(incoming.signer_key, str):
                return _failure(ErrorCode.BAD_REQUEST, "the signer key is not a key"), None
            try:
                signer = PublicKey.decode(incoming.signer_key)
            except KeyFormatError:
                return _failure(ErrorCode.BAD_REQUEST, "the signer key is not an Ed25519 key"), None
        try:
            request = _parse_request_data(incoming.data)
        except EnvelopeError as exc:
            log.info("request %s: bad envelope: %s", rid, show(str(exc), 200))
            return _failure(ErrorCode.BAD_REQUEST, str(exc)[:300]), None
        protocol = request.protocol
        key_error = check_request_key(request, signer)
        if key_error is not None:
            return Response(error=key_error), protocol
        if protocol not in self.protocols:
            return (
                _failure(
                    ErrorCode.UNSUPPORTED_PROTOCOL,
                    "this responder does not serve the protocol over Service RPC",
                ),
                protocol,
            )
        served = self.versions.get(protocol)
        if served is not None and request.version is not UNSET:
            try:
                key = _version_key(request.version)
            except (TypeError, ValueError):
                key = ""
            if key not in served:
                return (
                    _failure(
                        ErrorCode.UNSUPPORTED_VERSION, "this responder does not serve the version"
                    ),
                    protocol,
                )
        if self.limiter is not None:
            wait = self.limiter.check(signer)
            if wait is not None:
                return (
                    Response.failure(ErrorCode.RATE_LIMITED, "too many requests", retry_after=wait),
                    protocol,
                )
        log.debug(
            "request %s: protocol %s, signer %s",
            rid,
            show(protocol, 40),
            signer.encode() if signer else "none",
        )
        service_request = ServiceRequest(
            request_id=incoming.request_id, signer=signer, request=request, user_id=self.user_id
        )
        try:
            # The core's window runs from the request's arrival, not from when a
            # concurrency slot freed up: so does the deadline.
            async with asyncio.timeout_at(incoming.received + self.handler_timeout) as deadline:
                result = self.handler(service_request)
                if inspect.isawaitable(result):
                    result = await result
        except TimeoutError:
            if not deadline.expired():
                log.error("request %s: the handler raised TimeoutError", rid)
                return _failure(ErrorCode.INTERNAL, "the responder failed"), protocol
            code = ErrorCode.CONVERSATION_REQUIRED if protocol == "a2a" else ErrorCode.INTERNAL
            log.warning(
                "request %s: the handler did not finish within %g s: answering %s",
                rid,
                self.handler_timeout,
                code.value,
            )
            return _failure(code, "the responder did not finish in time"), protocol
        except Exception as exc:
            log.error("request %s: the handler raised %s", rid, type(exc).__name__, exc_info=True)
            return _failure(ErrorCode.INTERNAL, "the responder failed"), protocol
        response = result if isinstance(result, Response) else None
        if response is None:
            try:
                response = Response.success(result)
            except EnvelopeError:  # pragma: no cover - Response.success accepts any value
                return _failure(ErrorCode.INTERNAL, "the responder failed"), protocol
        return response, protocol

    async def _send(self, request_id: str, response: Response, protocol: str | None) -> None:
        rid = show(request_id, 80)
        try:
            payload = response.to_json()
        except EnvelopeError:
            log.error("request %s: the handler's result is not JSON: answering internal", rid)
            response = _failure(ErrorCode.INTERNAL, "the responder failed")
            payload = response.to_json()
        if len(payload) > self.max_response_bytes:
            log.warning(
                "request %s: response of %d bytes exceeds %d: answering too_large",
                rid,
                len(payload),
                self.max_response_bytes,
            )
            response = _failure(
                ErrorCode.TOO_LARGE,
                f"the response exceeds the size limit of {self.max_response_bytes} bytes",
            )
            payload = response.to_json()
        try:
            await self._command(request_id, payload)
        except ChatCoreClosed:
            raise
        except ChatCoreError as exc:
            # The core's padded block is the final word on size: an answer it
            # cannot pad is replaced by too_large, once.
            if response.error is None and exc.type_path.endswith("/LARGE"):
                log.warning("request %s: the core found the response too large", rid)
                response = _failure(ErrorCode.TOO_LARGE, "the response exceeds the size limit")
                try:
                    await self._command(request_id, response.to_json())
                except ChatCoreClosed:
                    raise
                except ChatCoreError as again:
                    log.warning("request %s: the core refused the answer: %s", rid, again)
                    return
            else:
                log.warning("request %s: the core refused the answer: %s", rid, exc)
                return
        outcome = "response" if response.error is None else f"error {response.error.code}"
        log.info("request %s (%s): answered with %s", rid, show(protocol, 40), show(outcome, 60))

    async def _command(self, request_id: str, payload: bytes) -> None:
        await self.core.command(
            f"/_service_response {self.user_id} {request_id} {payload.decode('utf-8')}"
        )


def _failure(code: ErrorCode, message: str) -> Response:
    return Response.failure(code, message)

"""``ChatCore``'s commands and events: the plumbing under every part of the adapter.

One connection to the chat core (over a transport of :mod:`._transports`),
commands matched to answers by ``corrId``, events fanned out to every
:class:`EventStream`. Service RPC (:mod:`._service`), the chat transport
(:mod:`._chat`) and the declarations (:mod:`._declare`) are built on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol, Self

from .._wire import strict_json as _json
from .._wire.redact import RedactingLogger, redact, redact_tree, show
from ..errors import ChatCoreError, SimplexRpcError
from ._errors import ChatCoreClosed, ChatCoreTimeout, _AnswerLost
from ._frames import Frame, read_frame
from ._transports import (
    LibsimplexHandle,
    NativeHandle,
    _NativeTransport,
    _Transport,
    _WebSocketTransport,
)

# One logger for the whole adapter package: the name users configure.
log = RedactingLogger(logging.getLogger("simplex_rpc.adapter"))

#: How long a plain command may take before the adapter gives up on it.
DEFAULT_COMMAND_TIMEOUT: Final = 60.0


# ---------------------------------------------------------------------------
# Commands


def _check_user_id(user_id: object) -> int:
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 1:
        raise SimplexRpcError(f"user_id: expected a positive integer, got {show(user_id, 40)}")
    return user_id


def _command_name(cmd: str) -> str:
    return cmd.split(" ", 1)[0][:40]


def _dump_command_json(value: Any, where: str) -> str:
    """Compact JSON for a command argument; one line, so it cannot inject another command.

    Raises :class:`SimplexRpcError` naming ``where`` for a value JSON cannot
    carry to the core (NaN, a lone surrogate, nesting too deep, a type JSON
    does not have): the library's :func:`simplex_rpc._wire.strict_json.dumps` rules.
    """
    try:
        return _json.dumps(value).decode("utf-8")
    except (_json.JsonError, TypeError) as exc:
        raise SimplexRpcError(f"{where}: cannot be sent as JSON: {exc}") from None


def check_seconds(value: object, name: str) -> float:
    """``value`` as seconds: a positive, finite number; else :class:`SimplexRpcError`.

    The library's one check of a duration, shared by the adapter and the SDK
    client transports (through :mod:`._client`).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SimplexRpcError(f"{name}: expected a number of seconds, got {type(value).__name__}")
    if not value > 0 or math.isinf(value):
        raise SimplexRpcError(f"{name}: expected a positive, finite number of seconds")
    return float(value)


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


# ---------------------------------------------------------------------------
# Events


_END: Final = object()


class EventStream:
    """The core's events from the moment of subscription, as an async iterator.

    Iteration ends when the core is closed by this side (after the events
    already received), and raises :class:`ChatCoreClosed` as soon as the
    connection is lost (events still waiting are dropped: nothing can be
    answered any more). At most ``limit`` events wait in the stream; more are
    dropped (a stalled reader must not stall command answers), counted in
    ``dropped`` and logged at the 1st, 10th, 100th, ... drop. ``serve``
    does not read its requests from a stream: it never loses one this way.
    """

    def __init__(self, core: _CoreBase, limit: int) -> None:
        self._core = core
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._limit = limit
        self._lost = False
        self.dropped = 0

    def _put(self, event: dict[str, Any]) -> None:
        if self._queue.qsize() >= self._limit:
            self.dropped += 1
            if _power_of_ten(self.dropped):
                log.warning(
                    "event stream full (%d events): %d events dropped so far, the last a %s",
                    self._limit,
                    self.dropped,
                    show(event.get("type"), 40),
                )
            return
        self._queue.put_nowait(event)

    def _end(self) -> None:
        core = self._core
        self._lost = core._failure is not None and not core._closing
        self._queue.put_nowait(_END)

    def close(self) -> None:
        """Stop receiving events."""
        self._core._subscribers.discard(self)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        item = await self._queue.get()
        if self._lost:
            item = _END
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


def _power_of_ten(n: int) -> bool:
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


class _RequestSink(Protocol):
    """Where the core hands each ``serviceRequest`` event, as its frame is read.

    ``envelope`` is the text of ``requestData`` as the frame carried it (None
    when it came as a JSON string, or not at all); ``error`` says why the
    frame is not strict JSON (the event is then a lenient reading);
    ``arrival`` is the event loop's time when the frame was read.
    """

    def offer(
        self, event: dict[str, Any], envelope: str | None, error: str | None, arrival: float
    ) -> None: ...

    def lost(self, failure: ChatCoreClosed) -> None: ...


# ---------------------------------------------------------------------------
# The core


class _CoreBase:
    """The connection, its commands and its events (see :class:`simplex_rpc.adapter.ChatCore`)."""

    def __init__(self, transport: _Transport, *, event_buffer: int = 10_000) -> None:
        """Wrap a transport; use :meth:`connect` or :meth:`native` instead of calling this."""
        self._transport = transport
        self._event_buffer = event_buffer
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._subscribers: set[EventStream] = set()
        self._request_sinks: set[_RequestSink] = set()
        self._sent: set[str] = set()  # commands sent and not yet answered, by corrId
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
    ) -> AsyncIterator[Self]:
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
    ) -> AsyncIterator[Self]:
        """Drive a native chat library through a :class:`NativeHandle`: ``async with``.

        ``workers`` bounds the commands running at once (a service request
        blocks its worker until the answer); ``poll_us`` is the event wait.
        """
        transport = _NativeTransport(handle, workers=workers, poll_us=poll_us)
        async with cls._opened(transport, event_buffer) as core:
            yield core

    @classmethod
    @contextlib.asynccontextmanager
    async def _opened(cls, transport: _Transport, event_buffer: int) -> AsyncIterator[Self]:
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
    ) -> AsyncIterator[Self]:
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
        frame = read_frame(message)
        resp = frame.value.get("resp") if isinstance(frame.value, dict) else None
        if frame.error is not None:
            self._unreadable(frame, resp, message)
            return
        if not isinstance(resp, dict) or not isinstance(resp.get("type"), str):
            log.warning("chat core sent a message without resp.type: %s", show(message))
            return
        corr = frame.value.get("corrId")
        if isinstance(corr, int) and not isinstance(corr, bool):
            corr = str(corr)
        if isinstance(corr, str) and corr:
            self._deliver(corr, resp)
        else:
            self._event(resp, frame.envelopes.get(("resp", "requestData")))

    def _unreadable(self, frame: Frame, event: Any, text: str) -> None:
        """A frame that is not strict JSON: fail its command, or hand a service request to
        the responder (which answers bad_request), or log it; never drop it silently."""
        assert frame.error is not None
        if frame.corr_id is not None and frame.corr_id in self._pending:
            self._fail_command(frame.corr_id, f"its answer is not strict JSON ({frame.error})")
            return
        if (
            isinstance(event, dict)
            and event.get("type") == "serviceRequest"
            and self._request_sinks
        ):
            # The responder answers it bad_request (naming the rule) if it is its user's.
            log.warning(
                "chat core sent a serviceRequest that is not strict JSON: %s",
                show(frame.error, 120),
            )
            self._event(event, None, frame.error)
            return
        log.warning(
            "chat core sent a message that is not strict JSON (%s): %s",
            show(frame.error, 120),
            show(text),
        )

    def _receive_native_result(self, corr_id: str, text: str) -> None:
        frame = read_frame(text)
        result = frame.value if frame.error is None else None
        if isinstance(result, dict) and isinstance(result.get("result"), dict):
            self._deliver(corr_id, result["result"])
        elif isinstance(result, dict) and "error" in result:
            self._deliver(corr_id, {"type": "chatCmdError", "chatError": result["error"]})
        elif frame.error is not None:
            self._fail_command(
                corr_id, f"invalid chat_send_cmd result, not strict JSON ({frame.error})"
            )
        else:
            self._fail_command(corr_id, f"invalid chat_send_cmd result {show(text, 80)}")

    def _receive_native_event(self, text: str) -> None:
        frame = read_frame(text)
        result = frame.value if isinstance(frame.value, dict) else None
        event = result.get("result") if result is not None else None
        if frame.error is not None:
            self._unreadable(frame, event, text)
            return
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            self._event(event, frame.envelopes.get(("result", "requestData")))
            return
        if result is not None and "error" in result:
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

    def _event(
        self, event: dict[str, Any], envelope: str | None = None, error: str | None = None
    ) -> None:
        log.debug("event %s", show(event.get("type"), 60))
        if event.get("type") == "serviceRequest" and self._request_sinks:
            # Stamped here, as the frame is read: the core's window runs from now.
            arrival = asyncio.get_running_loop().time()
            for sink in list(self._request_sinks):
                try:
                    sink.offer(event, envelope, error, arrival)
                except Exception:  # pragma: no cover - defensive: the reader must go on
                    log.error("taking a serviceRequest failed", exc_info=True)
        if error is not None:
            return  # a lenient reading is for the responder's bad_request only
        for stream in list(self._subscribers):
            stream._put(event)

    def _lost(self, reason: str) -> None:
        if self._failure is not None:
            return
        text = f"connection to the chat core ({self._transport.description}) {reason}"
        self._failure = ChatCoreClosed(redact(text))
        if not self._closing:
            log.warning("%s; %d commands were pending", text, len(self._pending))
        for corr_id, future in self._pending.items():
            if not future.done():
                # A command already sent may have run: say so (_AnswerLost).
                lost = _AnswerLost if corr_id in self._sent else ChatCoreClosed
                future.set_exception(lost(redact(f"{text} before the command was answered")))
        for stream in list(self._subscribers):
            stream._end()
        for sink in list(self._request_sinks):
            sink.lost(self._failure)

    # -- commands -------------------------------------------------------------

    async def command(
        self, cmd: str, *, timeout: float | None = DEFAULT_COMMAND_TIMEOUT
    ) -> dict[str, Any]:
        """Send one command and return the core's ``resp`` object.

        Raises :class:`ChatCoreError` (with the core's error object) for a
        ``chatCmdError``, :class:`ChatCoreClosed` when the connection is or
        gets closed, and :class:`ChatCoreTimeout` when no answer comes in
        ``timeout`` seconds (None: no limit). A ``timeout`` that is not a
        positive, finite number of seconds raises :class:`SimplexRpcError`
        before anything is sent.
        """
        if not isinstance(cmd, str) or "\n" in cmd or "\r" in cmd:
            raise SimplexRpcError("command: expected one line of text")
        if timeout is not None:
            timeout = check_seconds(timeout, "timeout")
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        name = _command_name(cmd)
        corr_id = str(next(self._counter))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[corr_id] = future
        log.debug("command %s: %s", corr_id, show(cmd, 300))
        try:
            await self._transport.send(self, corr_id, cmd)
            self._sent.add(corr_id)
            try:
                async with asyncio.timeout(timeout):
                    resp = await future
            except TimeoutError:
                raise ChatCoreTimeout(
                    f"the chat core did not answer {name} within {timeout:g} s"
                ) from None
            except ChatCoreClosed:
                raise
            except ChatCoreError as exc:
                raise ChatCoreError(f"{name}: {exc}") from None
        finally:
            self._pending.pop(corr_id, None)
            self._sent.discard(corr_id)
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

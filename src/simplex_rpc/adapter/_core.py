"""``ChatCore``'s commands and events: the plumbing under every part of the adapter.

The connections to one chat core (over the transports of :mod:`._transports`: the
first for commands, one for ``serve``'s answers, the lanes of :mod:`._pool` for
blocking ``/_service_request`` commands), commands matched to answers by ``corrId``, the
events of every connection read as one stream and fanned out to every
:class:`EventStream` and request sink. Service RPC (:mod:`._service`), the chat
transport (:mod:`._chat`) and the declarations (:mod:`._declare`) are parts built on
it, composed by ``ChatCore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol, Self

from .._wire import strict_json as _json
from .._wire.redact import RedactingLogger, redact, redact_tree, show
from ..errors import ChatCoreError, SimplexRpcError
from ._errors import ChatCoreClosed, ChatCoreTimeout, _AnswerLost
from ._explain import explain_core_error
from ._frames import Frame, read_frame
from ._pool import BLOCKING_COMMANDS, _Lanes
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
#: The connections of a ``ChatCore`` over WebSocket, at most: one for commands, one for
#: ``serve``'s answers (from 3 connections on), the others for blocking
#: ``/_service_request`` commands, one each.
DEFAULT_CONNECTIONS: Final = 8
#: How long past its own timeout a command the core has not answered may keep its
#: connection, in seconds. The core runs one command at a time per connection
#: (Server.hs), so one it never answers would hold the connection, and every command
#: sent behind it, until the core closes: past this margin the connection is dropped
#: and another opened in its place (logged at WARNING).
OVERDUE_MARGIN: Final = 30.0
#: The command ``serve``'s answers are: it runs on the answers' connection.
_ANSWER_COMMAND: Final = "/_service_response "
#: How long an event that a later ``serve`` or ``serve_calls`` would take waits for it
#: (a ``serviceRequest`` no responder took, a ``newChatItems`` with a ``/_call`` no
#: ``serve_calls`` took), in seconds.
DEFAULT_EVENT_HOLD: Final = 10.0


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
    # One sentence and a hint for the errors a user meets (the one table: _explain).
    message = explain_core_error(what, err.type_path, _error_detail(safe))
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
        # The user whose /_call commands this stream takes (serve_calls' stream), or None.
        self.calls_user: int | None = None

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


def _is_bad_signature(event: dict[str, Any]) -> bool:
    """A ``chatError`` event carrying the agent's ``A_SERVICE ASEBadSignature``."""
    node: object = event.get("chatError")
    for _ in range(8):
        if not isinstance(node, dict):
            return False
        service = node.get("serviceError")
        if isinstance(service, dict) and service.get("type") == "ASEBadSignature":
            return True
        node = next((v for k, v in node.items() if k != "type" and isinstance(v, dict)), None)
    return False


def _power_of_ten(n: int) -> bool:
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


class _RequestSink(Protocol):
    """Where the core hands each ``serviceRequest`` event, as its frame is read.

    ``envelope`` is the text of ``requestData`` as the frame carried it when
    the frame had to be cut (None when the frame was read strictly whole, the
    event then holding requestData's strict value; when it came as a JSON
    string; or not at all); ``error`` says why the
    frame is not strict JSON (the event is then a lenient reading);
    ``arrival`` is the event loop's time when the frame was read. Returns
    whether the sink took the event (it is its user's): one no sink takes is
    held for a later ``serve``.
    """

    def offer(
        self, event: dict[str, Any], envelope: str | None, error: str | None, arrival: float
    ) -> bool: ...

    @property
    def user_id(self) -> int: ...

    def lost(self, failure: ChatCoreClosed) -> None: ...


# ---------------------------------------------------------------------------
# The core


class _CoreBase:
    """The connection, its commands and its events (see :class:`simplex_rpc.adapter.ChatCore`)."""

    def __init__(
        self,
        transport: _Transport,
        *,
        event_buffer: int = 10_000,
        event_hold: float = DEFAULT_EVENT_HOLD,
    ) -> None:
        """Wrap a transport; use :meth:`connect` or :meth:`native` instead of calling this."""
        if (
            isinstance(event_hold, bool)
            or not isinstance(event_hold, (int, float))
            or not 0 <= event_hold < math.inf
        ):
            raise SimplexRpcError("event_hold: expected a non-negative number of seconds")
        self._transport = transport
        # The connections blocking commands run on (WebSocket only: the native library
        # runs commands on worker threads of its own), set by _opened.
        self._lanes: _Lanes | None = None
        # The connection serve's answers go on, opened when a responder first takes
        # requests (WebSocket with 3 connections or more: _opens_answers), so that no
        # command or call ever runs in front of an answer; else the first connection.
        self._answers: _Transport | None = None
        self._answers_opening: asyncio.Task[None] | None = None
        # Opens one more connection to the core (keepalive or not); set by connect.
        self._open_connection: Callable[[bool], Awaitable[_Transport]] | None = None
        self._opens_answers = False
        self._overdue_margin = OVERDUE_MARGIN
        self._background: set[asyncio.Task[None]] = set()
        # Each command sent and not answered yet, by corrId: the connection it went on.
        # Kept past a timeout, until the core's late answer: the core still works on it,
        # and the connection runs nothing else meanwhile (Server.hs).
        self._route: dict[str, _Transport] = {}
        self._event_buffer = event_buffer
        self._event_hold = float(event_hold)
        # Events a later serve / serve_calls would take, in arrival order (see _hold).
        self._held_requests: deque[_Held] = deque()
        self._held_calls: deque[_Held] = deque()
        self._hold_timer: asyncio.TimerHandle | None = None
        # Who asked the transport to stop reading (the responders at their outbox bound).
        self._pausers: set[object] = set()
        self._stray_answers = 0
        self._stray_requests = 0  # serviceRequests given to this ChatCore, which serves none
        # What answers a request no serve takes (set by ChatCore: its Service RPC part).
        self._on_unserved: Callable[[_Held, float, bool], None] | None = None
        # Whether serviceRequests are this connection's to answer: it started them
        # (start(service_requests=True)) or has served; only then are they held.
        self._expects_requests = False
        self._pending: dict[str, asyncio.Future[dict[str, Any]] | _Reply] = {}
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
        event_hold: float = DEFAULT_EVENT_HOLD,
        connections: int = DEFAULT_CONNECTIONS,
    ) -> AsyncIterator[Self]:
        """Connect to the CLI's WebSocket API (``simplex-chat -p PORT -m``): ``async with``.

        The core runs one command at a time per connection, and gives each event
        to one connection (``apps/simplex-chat/Server.hs``). So a ``ChatCore`` is
        a small pool of at most ``connections`` connections to one core, whose
        events are read as one stream (each reaches its consumer whichever
        connection carried it): the first carries the commands; ``serve``'s
        answers get one of their own when ``serve`` starts, so that no command
        and no call ever runs in front of an answer; each blocking
        ``/_service_request`` runs on another, opened when first needed, one
        request at a time. So at most ``connections - 2`` service requests are in
        flight at once (more wait, in order, for a free connection), and a bot
        that calls and serves keeps answering while its calls and its slow
        commands wait. With ``connections=2`` the answers share the first
        connection with the commands; with ``connections=1`` every command
        shares one connection (a request then waits behind the others, as in the
        core). A command the core leaves unanswered ``OVERDUE_MARGIN`` (30)
        seconds past its own timeout has its connection dropped and replaced,
        with a WARNING.

        One client per core: another program connected to the same core (a
        second ``ChatCore``, ``simplex-rpc call`` against the bot's own core, a
        monitoring tool) takes events too, and the library cannot see that: a
        ``serviceRequest`` it takes is not this ``ChatCore``'s to answer.

        ``ping_interval`` is the keepalive: an idle connection is pinged, and
        closed when the ping is not answered in as long; a connection whose
        command runs is never pinged (the core reads no frame meanwhile).

        ``proxy`` is None by default: the CLI listens on the local host.
        ``event_hold`` is how long a ``serviceRequest`` (or a ``/_call``) that
        no ``serve`` (``serve_calls``) takes yet waits for one; past it, it is
        logged at WARNING by its id, and a request is answered ``rate_limited``.
        """
        if isinstance(connections, bool) or not isinstance(connections, int) or connections < 1:
            raise SimplexRpcError("connections: expected a positive integer")
        options: dict[str, Any] = {
            "open_timeout": open_timeout,
            "max_size": max_size,
            "proxy": proxy,
        }
        transport = _WebSocketTransport(url, ping_interval=ping_interval, **options)
        async with cls._opened(transport, event_buffer, event_hold) as core:

            async def open_connection(keepalive: bool) -> _Transport:
                connection = _WebSocketTransport(
                    url, ping_interval=ping_interval if keepalive else None, **options
                )
                await connection.open(core)
                if core._failure is not None:  # pragma: no cover - lost meanwhile
                    await connection.close()
                    raise ChatCoreClosed(str(core._failure))
                if core._pausers:
                    connection.pause_reading()  # the responders' back-pressure holds
                return connection

            async def open_lane() -> _Transport:
                # No keepalive on a lane: its connection is busy whenever it is used.
                lane = await open_connection(False)
                log.debug("opened a connection for service requests to %s", lane.description)
                return lane

            core._open_connection = open_connection
            core._opens_answers = connections >= 3
            lanes = connections - 1 - core._opens_answers
            if lanes:
                core._lanes = _Lanes(open_lane, lanes)
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
        event_hold: float = DEFAULT_EVENT_HOLD,
    ) -> AsyncIterator[Self]:
        """Drive a native chat library through a :class:`NativeHandle`: ``async with``.

        ``workers`` bounds the commands running at once (a service request
        blocks its worker until the answer); ``poll_us`` is the event wait.
        """
        transport = _NativeTransport(handle, workers=workers, poll_us=poll_us)
        async with cls._opened(transport, event_buffer, event_hold) as core:
            yield core

    @classmethod
    @contextlib.asynccontextmanager
    async def _opened(
        cls, transport: _Transport, event_buffer: int, event_hold: float
    ) -> AsyncIterator[Self]:
        """A core over ``transport``, opened; closed when the block ends, however it ends."""
        core = cls(transport, event_buffer=event_buffer, event_hold=event_hold)
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
        """Close the connections; pending commands fail with :class:`ChatCoreClosed`."""
        if self._failure is None:
            self._closing = True
            self._lost("closed by this side")
        for transport in self._transports():
            await transport.close()

    def _transports(self) -> list[_Transport]:
        """Every connection of this core: the first, the answers', then the lanes."""
        lanes = self._lanes.lanes if self._lanes is not None else []
        answers = [self._answers] if self._answers is not None else []
        return [self._transport, *answers, *lanes]

    # -- the answers' connection ------------------------------------------------------

    def _want_answer_lane(self) -> None:
        """A responder takes requests: open the connection its answers go on (once)."""
        if (
            self._opens_answers
            and self._answers is None
            and self._answers_opening is None
            and self._failure is None
        ):
            self._answers_opening = asyncio.create_task(
                self._open_answer_lane(), name="simplex-rpc-answers-open"
            )

    async def _open_answer_lane(self) -> None:
        assert self._open_connection is not None
        try:
            lane = await self._open_connection(True)
        except ChatCoreClosed as exc:
            if self._failure is None:
                log.warning(
                    "cannot open a connection for serve's answers (%s): they share the"
                    " first connection with the commands",
                    exc,
                )
            return
        if self._failure is not None:  # pragma: no cover - closed meanwhile
            await lane.close()
            return
        self._answers = lane
        log.debug("opened a connection for serve's answers to %s", lane.description)

    async def _answers_connection(self) -> _Transport:
        """The connection for ``/_service_response``: the answers' own once open (waited
        for while it opens), else the first."""
        opening = self._answers_opening
        if opening is not None and not opening.done():
            await asyncio.wait([opening])  # its end, however it ends (closed: cancelled)
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        return self._answers if self._answers is not None else self._transport

    # -- a command the core never answers ------------------------------------------

    def _late(self, corr_id: str, name: str) -> None:
        """``corr_id``'s wait ended unanswered: if the core has still not answered it
        ``_overdue_margin`` seconds later, its connection is dropped and replaced."""
        if corr_id in self._route and self._failure is None:
            loop = asyncio.get_running_loop()
            loop.call_later(self._overdue_margin, self._overdue, corr_id, name)

    def _overdue(self, corr_id: str, name: str) -> None:
        transport = self._route.get(corr_id)
        if transport is None or self._failure is not None or transport.retired:
            return  # answered meanwhile, or already replaced
        if self._open_connection is None:
            return  # the native library runs each command on a worker of its own
        log.warning(
            "the chat core has not answered %s (command %s) %g s after its wait ended: its"
            " connection to %s is dropped and another opened (an event that connection"
            " had taken is lost with it)",
            name,
            show(corr_id, 40),
            self._overdue_margin,
            transport.description,
        )
        task = asyncio.create_task(self._replace(transport), name="simplex-rpc-replace")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _replace(self, old: _Transport) -> None:
        """Drop ``old`` (a command on it was never answered): its commands fail with
        :class:`_AnswerLost` (each may have run); a lane is replaced when a request needs
        one, the first connection and the answers' at once."""
        assert self._open_connection is not None
        old.retired = True
        try:
            if self._lanes is not None and old in self._lanes.lanes:
                self._lanes.retire(old)
            elif old is self._answers:
                self._answers = None
                self._answers_opening = None
                self._want_answer_lane()
            elif old is self._transport:
                try:
                    self._transport = await self._open_connection(True)
                except ChatCoreClosed as exc:
                    self._lost(f"could not be replaced after a command went unanswered ({exc})")
                    return
            reason = redact(
                f"the connection to the chat core ({old.description}) was dropped: a command"
                " on it went unanswered"
            )
            for corr_id, transport in list(self._route.items()):
                if transport is old:
                    del self._route[corr_id]
                    future = self._pending.get(corr_id)
                    if future is not None and not future.done():
                        future.set_exception(_AnswerLost(reason))
        finally:
            await old.close()  # also when the core is closed meanwhile

    # -- input from transports -------------------------------------------------

    def _receive(self, message: str | bytes) -> None:
        if not isinstance(message, str):
            log.warning("chat core sent a binary message (%d bytes); ignored", len(message))
            return
        # Each frame's JSON is read once: a strict frame whole (the responder takes
        # requestData's value from that reading); otherwise its envelopes are cut out and
        # stay text until someone needs their value (the responder parses the text).
        frame = read_frame(message, decode_envelopes=False, envelope_texts=False)
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
            frame.decode_envelopes()
            self._deliver(corr, resp)
        else:
            self._event(resp, frame.envelopes.get(("resp", "requestData")), None, frame)

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
        frame = read_frame(text)  # an answer: its envelope's value is wanted
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
        frame = read_frame(text, decode_envelopes=False, envelope_texts=False)
        result = frame.value if isinstance(frame.value, dict) else None
        event = result.get("result") if result is not None else None
        if frame.error is not None:
            self._unreadable(frame, event, text)
            return
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            self._event(event, frame.envelopes.get(("result", "requestData")), None, frame)
            return
        if result is not None and "error" in result:
            self._event({"type": "chatError", "chatError": result["error"]})
            return
        log.warning("native library sent an invalid event: %s", show(text))

    def _answered(self, corr_id: str) -> bool:
        """The core answered ``corr_id`` (in time or not): its connection runs the next.
        False for a ``corr_id`` this core did not send (or had its answer already)."""
        transport = self._route.pop(corr_id, None)
        if transport is None:
            return False
        transport.in_flight -= 1
        if self._lanes is not None and transport is not self._transport and not transport.in_flight:
            self._lanes.give_back(transport)
        return True

    def _deliver(self, corr_id: str, resp: dict[str, Any]) -> None:
        sent = self._answered(corr_id)
        future = self._pending.get(corr_id)
        if sent and future is None:
            # The answer to a command whose wait ended (its caller got ChatCoreTimeout):
            # expected, since the core went on with it; its connection is free again.
            log.info(
                "chat core answered command %s (%s) after its wait ended: ignored",
                show(corr_id, 40),
                show(resp.get("type"), 60),
            )
            return
        if future is None or future.done():
            # A core answering a command twice, or too late, or one never sent: worth a
            # line each (the first ten, then every power of ten), not a silent drop.
            self._stray_answers += 1
            if self._stray_answers <= 10 or _power_of_ten(self._stray_answers):
                log.warning(
                    "chat core sent an answer (corrId %s, %s) to no pending command:"
                    " ignored (%d so far)",
                    show(corr_id, 40),
                    show(resp.get("type"), 60),
                    self._stray_answers,
                )
            return
        future.set_result(resp)

    def _fail_command(self, corr_id: str, reason: str) -> None:
        self._answered(corr_id)
        future = self._pending.get(corr_id)
        if future is not None and not future.done():
            future.set_exception(ChatCoreError(f"the chat core command failed: {reason}"))

    def _event(
        self,
        event: dict[str, Any],
        envelope: str | None = None,
        error: str | None = None,
        frame: Frame | None = None,
    ) -> None:
        kind = event.get("type")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("event %s", show(kind, 60))
        if kind == "serviceRequest":
            # Stamped here, as the frame is read: the core's window runs from now.
            arrival = asyncio.get_running_loop().time()
            taken = False
            for sink in list(self._request_sinks):
                try:
                    taken = sink.offer(event, envelope, error, arrival) or taken
                except Exception:  # pragma: no cover - defensive: the reader must go on
                    log.error("taking a serviceRequest failed", exc_info=True)
            if not taken and self._expects_requests:
                # Not lost: held for a later serve (the README's order: start, address,
                # serve), for event_hold seconds.
                self._hold(self._held_requests, _Held(event, envelope, error, arrival))
            elif not taken and self._subscribers:
                # No serve, but a program reads this ChatCore's events: it may answer the
                # request itself (/_service_response through command()): left to it.
                log.info(
                    "serviceRequest %s: no serve() on this ChatCore: passed to its event"
                    " streams alone",
                    show(event.get("requestId"), 80),
                )
            elif not taken:
                # This ChatCore never asked for service requests and nothing reads its
                # events, yet the core gave it one: the core gives each event to one
                # client (Server.hs), so no other client gets it. Answered rate_limited at
                # once (the requester may retry and reach the client that serves), never
                # dropped silently.
                self._stray_requests += 1
                self._unserved_request(_Held(event, envelope, error, arrival), arrival, stray=True)
        elif kind == "chatError" and _is_bad_signature(event):
            # The responder's agent refused a signed request whose signature does not
            # verify: the core delivers nothing, and the requester only times out
            # (A_SERVICE ASEBadSignature, plans/2026-07-22-service-rpc-chat.md). Said here,
            # since no serviceRequest ever shows it.
            log.warning(
                "the chat core refused a signed service request whose signature does not"
                " verify (ASEBadSignature): it is not delivered, its requester will time out"
            )
        if error is not None:
            return  # a lenient reading is for the responder's bad_request only
        if frame is not None:
            frame.decode_envelopes()  # the streams get the event's values
        if kind == "newChatItems" and _has_call(event) and not self._calls_taken(event):
            arrival = asyncio.get_running_loop().time()
            self._hold(self._held_calls, _Held(event, None, None, arrival))
        for stream in list(self._subscribers):
            stream._put(event)

    # -- events held for a later serve / serve_calls ------------------------------

    def _calls_taken(self, event: dict[str, Any]) -> bool:
        user = _event_user(event)
        return any(stream.calls_user == user for stream in self._subscribers)

    def _hold(self, held: deque[_Held], item: _Held) -> None:
        if self._failure is not None:
            return
        held.append(item)
        if len(held) > self._event_buffer or self._event_hold == 0:
            self._expire_held(force=held)
        else:
            self._schedule_hold()

    def _schedule_hold(self) -> None:
        if self._hold_timer is not None:
            return
        firsts = [q[0].arrival for q in (self._held_requests, self._held_calls) if q]
        if firsts:
            loop = asyncio.get_running_loop()
            self._hold_timer = loop.call_at(min(firsts) + self._event_hold, self._expire_held)

    def _expire_held(self, force: deque[_Held] | None = None) -> None:
        """Give up on held events older than ``event_hold`` (and on the oldest of a queue
        past its bound): each logged at WARNING by its id, a request answered."""
        if self._hold_timer is not None and force is None:
            self._hold_timer = None
        now = asyncio.get_running_loop().time()
        for held, give_up in (
            (self._held_requests, self._unserved_request),
            (self._held_calls, self._unserved_call),
        ):
            while held and (
                held[0].arrival + self._event_hold <= now
                or (held is force and len(held) > self._event_buffer)
            ):
                give_up(held.popleft(), now)
        self._schedule_hold()

    def _attach_requests(self, sink: _RequestSink) -> None:
        r"""``sink`` (a responder starting) takes this core's ``serviceRequest``\ s from now
        on, the held ones first, oldest first; from now on they are this core's to answer
        (held for a later ``serve`` when no sink takes them). Raises
        :class:`ChatCoreClosed` once the connection is lost."""
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        self._expects_requests = True
        self._want_answer_lane()
        if sink not in self._request_sinks:
            self._request_sinks.add(sink)
            self._take_held_requests(sink)

    def _detach_requests(self, sink: _RequestSink) -> None:
        """``sink`` takes no more requests."""
        self._request_sinks.discard(sink)

    def _take_held_requests(self, sink: _RequestSink) -> None:
        """Offer ``sink`` (a responder starting) the held requests, oldest first; those it
        takes are no longer held."""
        kept: deque[_Held] = deque()
        while self._held_requests:
            item = self._held_requests.popleft()
            if not sink.offer(item.event, item.envelope, item.error, item.arrival):
                kept.append(item)
        self._held_requests = kept

    def _take_held_calls(self, stream: EventStream, user_id: int) -> None:
        """Make ``stream`` serve_calls' stream for ``user_id`` and put the held
        ``newChatItems`` of that user into it first, in the order they came."""
        stream.calls_user = user_id
        kept: deque[_Held] = deque()
        for item in self._held_calls:
            if _event_user(item.event) == user_id:
                stream._put(item.event)
            else:
                kept.append(item)
        self._held_calls = kept

    def _unserved_request(self, item: _Held, now: float, *, stray: bool = False) -> None:
        """A held request no responder took in time, or (``stray``) a request given to this
        ChatCore, which serves none: handed to ``_on_unserved`` (Service RPC's part, which
        answers it), else logged."""
        if self._on_unserved is not None:
            self._on_unserved(item, now, stray)
            return
        log.warning(
            "serviceRequest %s waited %.1f s and no serve() took it: not answered",
            show(item.event.get("requestId"), 80),
            now - item.arrival,
        )

    def _unserved_call(self, item: _Held, now: float) -> None:
        event = item.event
        items = event.get("chatItems")
        refs = [
            _item_ref(entry)
            for entry in (items if isinstance(items, list) else ())
            if _is_call(entry)
        ]
        # A direct chat's /_call was sent to this user: WARNING. A group's may be meant for
        # another member (a client that is no bot sees them all): INFO.
        direct = any(
            isinstance(entry, dict) and _path_type(entry) == "direct"
            for entry in (items if isinstance(items, list) else ())
        )
        log.log(
            logging.WARNING if direct else logging.INFO,
            "/_call (chat item %s of user %s) waited %.1f s and no serve_calls() took it:"
            " not answered",
            ", ".join(refs[:5]) or "?",
            show(_event_user(event), 20),
            now - item.arrival,
        )

    def _drop_held(self) -> None:
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        if self._held_requests:
            log.warning(
                "%d serviceRequests held for a serve() cannot be answered (the first: %s)",
                len(self._held_requests),
                show(self._held_requests[0].event.get("requestId"), 80),
            )
        self._held_requests.clear()
        self._held_calls.clear()

    # -- back-pressure ------------------------------------------------------------

    def _pause_reading(self, who: object) -> None:
        """Stop reading the core's frames until every ``who`` resumes (the socket and
        the core then carry the back-pressure)."""
        if not self._pausers and self._failure is None:
            for transport in self._transports():
                transport.pause_reading()
        self._pausers.add(who)

    def _resume_reading(self, who: object) -> None:
        if who in self._pausers:
            self._pausers.discard(who)
            if not self._pausers:
                for transport in self._transports():
                    transport.resume_reading()

    def _lost(self, reason: str) -> None:
        if self._failure is not None:
            return
        text = f"connection to the chat core ({self._transport.description}) {reason}"
        self._failure = ChatCoreClosed(redact(text))
        if not self._closing:
            log.warning("%s; %d commands were pending", text, len(self._pending))
        replies: list[tuple[_Reply, ChatCoreClosed]] = []
        for corr_id, future in list(self._pending.items()):
            if not future.done():
                # A command already sent may have run: say so (_AnswerLost).
                lost = _AnswerLost if corr_id in self._sent else ChatCoreClosed
                error = lost(redact(f"{text} before the command was answered"))
                if isinstance(future, _Reply):
                    replies.append((future, error))  # its callback runs below, as a
                else:  # future's would: after the streams and the sinks are told
                    future.set_exception(error)
        for stream in list(self._subscribers):
            stream._end()
        for sink in list(self._request_sinks):
            sink.lost(self._failure)
        for reply, reply_error in replies:
            reply.set_exception(reply_error)
        self._drop_held()
        if self._answers_opening is not None:
            self._answers_opening.cancel()
        for task in list(self._background):
            task.cancel()
        if self._lanes is not None:
            self._lanes.lost(self._failure)
        self._route.clear()
        if self._pausers:
            self._pausers.clear()
            for transport in self._transports():
                transport.resume_reading()  # so that the readers see the end

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
        name = _command_name(cmd)
        lane: _Transport | None = None
        if name in BLOCKING_COMMANDS and self._lanes is not None:
            # A connection of its own: the core runs nothing else on it until the answer.
            lane = await self._lanes.take()
        try:
            future = await self._post_command(cmd, timeout, transport=lane)
        except BaseException:
            if lane is not None:
                self._lanes.give_back(lane)  # type: ignore[union-attr]  # never sent
            raise
        assert isinstance(future, asyncio.Future)  # no on_answer: a future
        try:
            resp = await future
        except ChatCoreClosed:
            raise
        except ChatCoreTimeout:
            raise ChatCoreTimeout(
                f"the chat core did not answer {name} within {timeout:g} s"
            ) from None
        except ChatCoreError as exc:
            raise ChatCoreError(f"{name}: {exc}") from None
        if resp.get("type") == "chatCmdError":
            raise _core_error(name, resp.get("chatError"))
        return resp

    async def _post_command(
        self,
        cmd: str,
        timeout: float | None,
        on_answer: Callable[[Pending], None] | None = None,
        *,
        transport: _Transport | None = None,
    ) -> Pending:
        """Send one command (checked by the caller) and return the future of its ``resp``,
        without waiting for it: answers can be pipelined, their acknowledgements tracked.

        The future fails with :class:`ChatCoreTimeout` when no answer comes in
        ``timeout`` seconds (None: no limit), :class:`ChatCoreClosed` (or, once
        sent, :class:`_AnswerLost`) when the connection ends, and
        :class:`ChatCoreError` for an answer that cannot be read; a
        ``chatCmdError`` is a result, for the caller to raise. ``on_answer`` is
        called with the future once it is done; with ``on_answer`` and no
        ``timeout``, the "future" is a :class:`_Reply`, and ``on_answer`` is called
        in the very step the answer is read (or the connection lost). ``transport`` is
        the connection to send on (by default the first).
        """
        if self._failure is not None:
            raise ChatCoreClosed(str(self._failure))
        corr_id = str(next(self._counter))
        if on_answer is not None and timeout is None:
            return await self._post_reply(cmd, corr_id, on_answer)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[corr_id] = future
        debug = log.isEnabledFor(logging.DEBUG)
        if debug:
            log.debug("command %s: %s", corr_id, show(cmd, 300))
        if transport is not None:
            connection = transport
        elif cmd.startswith(_ANSWER_COMMAND):
            connection = await self._answers_connection()
        else:
            connection = self._transport
        try:
            await connection.send(self, corr_id, cmd)
        except BaseException:
            self._pending.pop(corr_id, None)
            future.cancel()
            raise
        self._sent.add(corr_id)
        if not future.done():
            connection.in_flight += 1
            self._route[corr_id] = connection
        timer = (
            loop.call_later(timeout, self._time_out, future, corr_id, cmd)
            if timeout is not None and not future.done()
            else None
        )

        def done(_: asyncio.Future[dict[str, Any]]) -> None:
            if timer is not None:
                timer.cancel()
            self._pending.pop(corr_id, None)
            self._sent.discard(corr_id)
            if debug and not future.cancelled():
                error = future.exception()
                what = type(error).__name__ if error else show(future.result().get("type"), 60)
                log.debug("answer %s: %s", corr_id, what)
            if on_answer is not None:
                on_answer(future)

        future.add_done_callback(done)
        return future

    async def _post_reply(
        self, cmd: str, corr_id: str, on_answer: Callable[[_Reply], None]
    ) -> _Reply:
        """:meth:`_post_command` without a timeout, its answer handed to ``on_answer`` as
        it is read (a :class:`_Reply`: no future, no step of the loop per answer)."""
        connection = (
            await self._answers_connection() if cmd.startswith(_ANSWER_COMMAND) else self._transport
        )
        reply = _Reply(self, corr_id, on_answer, _command_name(cmd))
        self._pending[corr_id] = reply
        if reply.debug:
            log.debug("command %s: %s", corr_id, show(cmd, 300))
        try:
            await connection.send(self, corr_id, cmd)
        except BaseException:
            self._pending.pop(corr_id, None)  # never sent: never called back
            raise
        if not reply.done():
            self._sent.add(corr_id)
            connection.in_flight += 1
            self._route[corr_id] = connection
        return reply

    def _time_out(self, future: asyncio.Future[dict[str, Any]], corr_id: str, cmd: str) -> None:
        if not future.done():
            future.set_exception(ChatCoreTimeout("no answer in time"))
            self._late(corr_id, _command_name(cmd))

    def events(self) -> EventStream:
        """Subscribe to the core's events (from now on); iterate the result."""
        stream = EventStream(self, self._event_buffer)
        if self._failure is not None:
            stream._end()
        else:
            self._subscribers.add(stream)
        return stream

    async def start(
        self,
        service_requests: bool = True,
        *,
        main: bool = True,
        restart: bool = False,
        timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
    ) -> bool:
        """Start the chat, with service requests enabled or not; True if it was started now.

        Sends ``/_start main=on service_requests=on``: the syntax of simplex-chat
        ``bots/api/COMMANDS.md`` (StartChat, ``/_start main=on|off[ snd_files=off]
        [ service_requests=on]``), where the bare ``/_start`` takes no options.
        ``timeout`` bounds the wait for each answer, as for :meth:`command`.

        A chat already running answers ``chatRunning`` and keeps its settings
        (StartChat in the core's ``Commands.hs``). A CLI started the usual way
        (``simplex-chat -p PORT``) runs its chat from the start, with service
        requests off (``runSimplexChat`` calls ``startChatController``). So:

        * without ``service_requests``, ``chatRunning`` is fine: False is returned;
        * with ``service_requests`` and a running chat, :class:`ChatCoreError` is
          raised naming the two ways out: run the CLI in maintenance mode
          (``simplex-chat -p PORT -m``: it does not start the chat, and this
          ``/_start`` does, with requests on), or pass ``restart=True``;
        * with ``restart=True``, a running chat is stopped (``/_stop``, answered
          ``chatStopped``) and started again with the same ``/_start``, which must
          answer ``chatStarted``; True is returned. Everything in flight on the
          core is interrupted by the stop: do it before serving.
        """
        cmd = "/_start main=" + ("on" if main else "off")
        if service_requests:
            cmd += " service_requests=on"
            # Requests that come before serve are held for it from now on.
            self._expects_requests = True
        resp = await self.command(cmd, timeout=timeout)
        kind = resp.get("type")
        if kind == "chatRunning" and service_requests and restart:
            stopped = await self.command("/_stop", timeout=timeout)
            if stopped.get("type") != "chatStopped":
                raise ChatCoreError(
                    f"unexpected answer {show(stopped.get('type'), 60)} to /_stop"
                    " (restarting the chat with service requests on)"
                )
            resp = await self.command(cmd, timeout=timeout)
            kind = resp.get("type")
            if kind != "chatStarted":
                raise ChatCoreError(
                    f"the chat did not start again after /_stop: {cmd} answered"
                    f" {show(kind, 60)}, not chatStarted"
                )
            log.info("chat restarted with service requests on")
        if kind == "chatStarted":
            log.info("chat started (service requests %s)", "on" if service_requests else "off")
            return True
        if kind == "chatRunning":
            if service_requests:
                raise ChatCoreError(
                    "the chat core's chat is already running, so service_requests=on was"
                    " not applied (a running chat answers chatRunning and keeps its settings)."
                    " Either run the CLI in maintenance mode, `simplex-chat -p PORT -m`, so"
                    " that start() starts the chat with service requests on, or pass"
                    " restart=True (serve --start restart) to stop and start it again"
                )
            return False
        raise ChatCoreError(f"unexpected answer {show(kind, 60)} to /_start")


# ---------------------------------------------------------------------------
# Pipelined answers


class _Reply:
    """The answer to a command sent by :meth:`_CoreBase._post_reply`: what the caller
    reads of a future (``done``, ``cancelled``, ``result``, ``exception``), delivered to
    its callback at once, in the step that reads the answer (or fails it): a responder
    pipelining thousands of answers a second pays no future and no step of the loop
    for each acknowledgement. The callback must not raise (what it raises is logged)."""

    __slots__ = ("_callback", "_core", "_done", "_error", "_result", "corr_id", "debug", "name")

    def __init__(
        self, core: _CoreBase, corr_id: str, callback: Callable[[_Reply], None], name: str
    ) -> None:
        self._core = core
        self.corr_id = corr_id
        self.name = name
        self._callback = callback
        self._done = False
        self._result: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self.debug = log.isEnabledFor(logging.DEBUG)

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False  # nothing cancels an answer on its way: it is answered or failed

    def result(self) -> dict[str, Any]:
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise asyncio.InvalidStateError("the answer has not come yet")
        return self._result

    def exception(self) -> BaseException | None:
        if not self._done:
            raise asyncio.InvalidStateError("the answer has not come yet")
        return self._error

    def set_result(self, result: dict[str, Any]) -> None:
        if not self._done:
            self._result = result
            self._finish()

    def set_exception(self, error: BaseException) -> None:
        if not self._done:
            self._error = error
            self._finish()
            if isinstance(error, ChatCoreTimeout):  # its caller stopped waiting for it
                self._core._late(self.corr_id, self.name)

    def _finish(self) -> None:
        self._done = True
        core = self._core
        core._pending.pop(self.corr_id, None)
        core._sent.discard(self.corr_id)
        if self.debug:
            what = (
                type(self._error).__name__ if self._error else show(self.result().get("type"), 60)
            )
            log.debug("answer %s: %s", self.corr_id, what)
        try:
            self._callback(self)
        except Exception:  # pragma: no cover - defensive: the reader must go on
            log.error("handling the answer to command %s failed", self.corr_id, exc_info=True)


#: What :meth:`_CoreBase._post_command` returns: a future, or a :class:`_Reply`.
Pending = asyncio.Future[dict[str, Any]] | _Reply


# ---------------------------------------------------------------------------
# Held events


class _Held:
    """An event held for a later ``serve`` or ``serve_calls``, with its arrival time."""

    __slots__ = ("arrival", "envelope", "error", "event")

    def __init__(
        self, event: dict[str, Any], envelope: str | None, error: str | None, arrival: float
    ) -> None:
        self.event = event
        self.envelope = envelope
        self.error = error
        self.arrival = arrival


def _event_user(event: dict[str, Any]) -> object:
    user = event.get("user")
    return user.get("userId") if isinstance(user, dict) else None


def _is_call(entry: object) -> bool:
    """An ``AChatItem`` (TYPES.md) that is a received text starting with ``/_call ``."""
    if not isinstance(entry, dict):
        return False
    item = entry.get("chatItem")
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(content, dict) or content.get("type") != "rcvMsgContent":
        return False
    message = content.get("msgContent")
    text = message.get("text") if isinstance(message, dict) else None
    return isinstance(text, str) and text.startswith("/_call ")


def _path_type(entry: dict[str, Any]) -> object:
    info = entry.get("chatInfo")
    return info.get("type") if isinstance(info, dict) else None


def _has_call(event: dict[str, Any]) -> bool:
    items = event.get("chatItems")
    return isinstance(items, list) and any(_is_call(entry) for entry in items)


def _item_ref(entry: dict[str, Any]) -> str:
    """``<chat>/<itemId>`` of an ``AChatItem``, for a log line."""
    info = entry.get("chatInfo")
    chat = "?"
    if isinstance(info, dict):
        record = info.get("contact") if info.get("type") == "direct" else info.get("groupInfo")
        key = "contactId" if info.get("type") == "direct" else "groupId"
        ident = record.get(key) if isinstance(record, dict) else None
        chat = ("@" if info.get("type") == "direct" else "#") + show(ident, 20)
    item = entry.get("chatItem")
    meta = item.get("meta") if isinstance(item, dict) else None
    item_id = meta.get("itemId") if isinstance(meta, dict) else None
    return f"{chat}/{show(item_id, 20)}"

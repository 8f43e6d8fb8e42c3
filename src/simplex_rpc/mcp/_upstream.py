"""Upstream: any MCP server, a child process or a URL, behind a SimpleX bot.

The server may be written in any language: the gateway reaches it with the
official SDK's own clients, ``stdio_client`` for a command and
``streamable_http_client`` for a URL, and ``mcp.Client`` negotiates the
server's revision (``server/discover``, or the ``initialize`` handshake of
revisions before 2026-07-28).

Toward SimpleX the gateway is an SDK ``Server`` whose handlers forward each
request through that client (the same forwards as ``mcp-proxy``), served by
:class:`McpBridge`: the binding's rules (sizes, ``-32022``, conversation
tools, declarations) are the bridge's, and the SDK shapes each result for the
caller's revision. What this module adds:

* one client session per upstream connection, whose request ids are its own
  (a caller's id never reaches the upstream, so two callers never collide);
* ``server/discover`` from the upstream's capabilities;
* the faults: a child that exits or a URL that refuses fails every request in
  flight (``-32603`` in a conversation, ``internal`` over Service RPC); the
  connection is made again with backoff, and each change of state is logged
  once; the child's standard error goes to the log, bounded; no child
  outlives the context;
* a server that stops answering (issue 32, item 7): a request cut by its
  deadline is a *miss*; after a miss the gateway pings the server, and
  restarts it when the ping is not answered within ``ping_timeout`` or when
  ``restart_after`` requests in a row were misses;
* the child's standard output is read by the gateway's own transport
  (``_stdio``): lines capped at ``line_limit`` bytes, invalid UTF-8 replaced.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from .._bindings import RPC_JSON_LIMIT, BindingError, ServiceRequestLike, header_field
from .._wire.envelope import ErrorCode, Response
from .._wire.redact import RedactingLogger, redact
from ._bridge import McpBridge, NotificationSink, ReplySink
from ._proxy import build_server
from ._stdio import LINE_LIMIT, StdioOptions, stdio_streams

__all__ = ["Upstream"]

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp.upstream"))

GATEWAY_NAME: Final = "simplex-rpc-mcp-gateway"

# The HTTP timeouts of the SDK's own client (mcp.shared._httpx_utils, mcp 2.3:
# create_mcp_http_client), the project's copy because that module is private and its
# factory takes no transport, which the gateway needs to notice a server's loss.
HTTP_TIMEOUT: Final[float] = 30.0
"""Seconds to connect, write and wait for the pool, as the SDK's client."""
HTTP_STREAM_READ_TIMEOUT: Final[float] = 300.0
"""Seconds to wait between two reads of a response stream (a server may hold it open)."""

BACKOFF_MIN: Final = 0.5
"""Seconds before the first restart after a failure; doubled after each failure."""
BACKOFF_MAX: Final = 30.0
"""The longest wait between two restarts."""
STABLE_AFTER: Final = 10.0
"""A connection that lasted this long resets the backoff: the next failure restarts soon."""
CONNECT_TIMEOUT: Final = 120.0
"""Seconds a connection attempt (spawn, negotiation) may take before it counts as failed:
room for a first ``npx -y`` or ``uvx`` that downloads the server."""

RESTART_AFTER: Final = 3
"""Requests in a row cut by their deadline (misses) after which the upstream is restarted."""
PING_TIMEOUT: Final = 10.0
"""Seconds the upstream has to answer the ``ping`` sent after a miss, before it is restarted."""

STDERR_LINE_CHARS: Final = 500
"""A line of the child's standard error is cut to this many characters in the log."""
STDERR_LINES_PER_WINDOW: Final = 50
STDERR_WINDOW: Final = 60.0
"""At most STDERR_LINES_PER_WINDOW lines of standard error per STDERR_WINDOW seconds reach the
log; the rest are counted, and the count is logged when the window ends."""


class _Unavailable(MCPError):
    """The upstream cannot be asked: not running, restarting, or not started."""


@dataclass
class _Outcome:
    """What one SimpleX request met on its way: set when the upstream failed it."""

    failure: str | None = None


LogSink = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]

_REQUEST_LOG: contextvars.ContextVar[LogSink | None] = contextvars.ContextVar(
    "simplex_rpc_mcp_upstream_request_log", default=None
)
"""Where a log message of the upstream goes: the caller of the request being forwarded."""

_OUTCOME: contextvars.ContextVar[_Outcome | None] = contextvars.ContextVar(
    "simplex_rpc_mcp_upstream_outcome", default=None
)


class _WatchedReadStream:
    """The transport's read stream, with ``ended`` set when it ends (the upstream went away).

    The SDK's dispatcher fails every request in flight with ``CONNECTION_CLOSED``
    when its read stream ends; ``ended`` is set first, so that those failures
    are known as the upstream's loss, not as an answer of the upstream.
    """

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self.ended = ended
        self.heard = 0  # messages received: a ping is answered when this moves

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise
        self.heard += 1
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_LOSS: Final = (httpx2.NetworkError, httpx2.RemoteProtocolError)
"""The failures that mean the server is gone: refused, reset, cut mid-stream (not a timeout)."""


class _WatchedBody(httpx2.AsyncByteStream):
    """A response body that sets ``lost`` when the connection breaks while it is read."""

    def __init__(self, inner: httpx2.AsyncByteStream, lost: anyio.Event) -> None:
        self._inner = inner
        self._lost = lost

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except _LOSS:
            self._lost.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class _LossTransport(httpx2.AsyncBaseTransport):
    """httpx's transport, setting ``lost`` when the URL refuses or the connection breaks.

    The SDK's HTTP client has no read stream that ends: a refused connection
    fails only the request that met it. The gateway treats it as the loss of
    the upstream, so that every request in flight is answered and the
    connection is made again. A timeout is not a loss: a slow request is cut
    by its own deadline.
    """

    def __init__(self, lost: anyio.Event) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._lost = lost

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except _LOSS:
            self._lost.set()
            raise
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        response.stream = _WatchedBody(body, self._lost)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _StderrPump:
    """The child's standard error, read by a thread and logged line by line, bounded.

    Each line is cut to STDERR_LINE_CHARS characters and redacted; at most
    STDERR_LINES_PER_WINDOW lines per STDERR_WINDOW seconds are logged, and the
    lines dropped beyond are counted in one line when the window ends.
    """

    def __init__(self, label: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._read_fd = read_fd
        self._label = label
        self._thread = threading.Thread(target=self._run, name="mcp-upstream-stderr", daemon=True)
        self._thread.start()

    def close_writer(self) -> None:
        """Close this process's copy of the write end (the child holds its own)."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def _run(self) -> None:
        window_start = time.monotonic()
        logged = dropped = 0
        pending = b""
        with os.fdopen(self._read_fd, "rb", buffering=0) as pipe:
            while True:
                try:
                    chunk = pipe.read(65536)
                except OSError:
                    chunk = b""
                lines = (pending + chunk).split(b"\n") if chunk else [pending]
                pending = lines.pop() if chunk else b""
                if len(pending) > STDERR_LINE_CHARS * 4:
                    lines.append(pending)  # a line without end is cut, not buffered forever
                    pending = b""
                for raw in lines:
                    if not raw.strip():
                        continue
                    now = time.monotonic()
                    if now - window_start >= STDERR_WINDOW:
                        if dropped:
                            log.warning(
                                "%s: %d lines of standard error dropped", self._label, dropped
                            )
                        window_start, logged, dropped = now, 0, 0
                    if logged >= STDERR_LINES_PER_WINDOW:
                        dropped += 1
                        continue
                    logged += 1
                    text = raw.decode("utf-8", "replace").rstrip("\r")
                    if len(text) > STDERR_LINE_CHARS:
                        text = text[:STDERR_LINE_CHARS] + "..."
                    log.info("%s stderr: %s", self._label, redact(text))
                if not chunk:
                    break
        if dropped:
            log.warning("%s: %d lines of standard error dropped", self._label, dropped)


def _describe(exc: BaseException) -> str:
    """A short text for a failure, without key material (the first error of a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        text = exc.error.message
    else:
        text = str(exc) or type(exc).__name__
    return redact(text)[:300]


def _served_capabilities(upstream: types.ServerCapabilities) -> types.ServerCapabilities:
    """The upstream's capabilities as the gateway serves them to a SimpleX caller.

    The binding serves request-response methods: change notifications
    (``listChanged``, resource subscriptions) would ride ``subscriptions/listen``,
    which is not carried, so they are not offered. Experimental methods and
    extensions are not forwarded.
    """
    return types.ServerCapabilities(
        tools=types.ToolsCapability(list_changed=False) if upstream.tools is not None else None,
        prompts=types.PromptsCapability(list_changed=False)
        if upstream.prompts is not None
        else None,
        resources=types.ResourcesCapability(subscribe=False, list_changed=False)
        if upstream.resources is not None
        else None,
        completions=upstream.completions,
    )


@dataclass
class _Connection:
    """One connection to the upstream: its client, the event of its end, and its health."""

    client: Client
    ended: anyio.Event
    revision: str
    started: float = field(default_factory=time.monotonic)
    misses: int = 0
    """Requests in a row cut by their deadline; an answered request resets it."""
    probe: anyio.Event = field(default_factory=anyio.Event)
    """Set after a miss: the watchdog pings the upstream."""
    failure: str = ""
    """Why the gateway ended this connection itself (the upstream stopped answering)."""


class Upstream:
    """An MCP server in another process or behind a URL, served over SimpleX.

    Made by :meth:`stdio` (a command, run as a child process) or :meth:`http`
    (a Streamable HTTP URL). It goes wherever an :class:`McpBridge` goes:
    ``ChatCore.serve(user, upstream.rpc_handler, ...)``, ``ChatCore.serve_calls
    (user, {"mcp": upstream})``, with the same ``conversation_tools`` and
    ``rpc_limit``. ``async with upstream:`` starts the child (or connects) and
    stops it on the way out: the child never outlives the block.

    Each SimpleX request becomes one request of the gateway's own client to
    the upstream. In a conversation the upstream's progress notifications for
    the request are replies; over Service RPC they are dropped. A request cut
    by the caller's deadline is cancelled upstream (``notifications/cancelled``).
    A request to the client by an upstream of a revision before 2026-07-28
    (sampling, elicitation, roots) is answered as a client without that
    capability answers: the gateway declares none.

    When the child exits (or the URL refuses), every request in flight is
    answered ``-32603`` in a conversation and ``internal`` over Service RPC,
    and the connection is made again after 0.5 s, then 1, 2, ... up to 30 s
    between attempts. A request that arrives while no connection is up is
    answered the same way at once.
    """

    def __init__(
        self,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        url: str | None = None,
        headers: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        conversation_tools: Iterable[str] = (),
        rpc_limit: int = RPC_JSON_LIMIT,
        line_limit: int = LINE_LIMIT,
        restart_after: int = RESTART_AFTER,
        ping_timeout: float = PING_TIMEOUT,
    ) -> None:
        if (command is None) == (url is None):
            raise BindingError("Upstream: give a command (Upstream.stdio) or a URL (Upstream.http)")
        self._params: StdioServerParameters | None = None
        self._url: str | None = None
        self._headers: dict[str, str] = {}
        if command is not None:
            if not isinstance(command, str) or not command:
                raise BindingError("Upstream.stdio: command must be a non-empty string")
            if isinstance(args, str) or not all(isinstance(a, str) for a in args):
                raise BindingError("Upstream.stdio: args must be a list of strings")
            if env is not None and (
                not isinstance(env, Mapping)
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
            ):
                raise BindingError("Upstream.stdio: env must map names to string values")
            if cwd is not None and not isinstance(cwd, (str, Path)):
                raise BindingError("Upstream.stdio: cwd must be a path")
            self._params = StdioServerParameters(
                command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
            )
            self._label = f"MCP server {Path(command).name!r}"
            if isinstance(line_limit, bool) or not isinstance(line_limit, int) or line_limit < 1:
                raise BindingError("Upstream.stdio: line_limit must be a positive number of bytes")
        else:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise BindingError("Upstream.http: url must be an http:// or https:// URL")
            self._url = url
            pairs = headers.items() if isinstance(headers, Mapping) else headers
            for name, value in pairs:
                if not isinstance(name, str) or not isinstance(value, str) or ":" in name:
                    raise BindingError(
                        "Upstream.http: headers must be pairs of strings (name, value)"
                    )
                checked = header_field(f"{name}: {value}", "Upstream.http: header")
                self._headers[checked[0]] = checked[1]
            try:
                host = httpx2.URL(url).host
            except httpx2.InvalidURL:
                host = ""
            if not host:
                raise BindingError("Upstream.http: url has no host")
            # The URL's query or user part may hold a credential: the log names the host only.
            self._label = f"MCP server at {host!r}"
        if isinstance(restart_after, bool) or not isinstance(restart_after, int):
            raise BindingError("Upstream: restart_after must be a whole number of at least 1")
        if restart_after < 1:
            raise BindingError("Upstream: restart_after must be a whole number of at least 1")
        if not isinstance(ping_timeout, (int, float)) or not 0 < ping_timeout < float("inf"):
            raise BindingError("Upstream: ping_timeout must be a positive number of seconds")
        self._stdio = StdioOptions(self._label, line_limit=line_limit)
        self._restart_after = restart_after
        self._ping_timeout = float(ping_timeout)
        self._server = build_server(self)
        # Named before the first answer: the SDK stamps its identity lazily.
        self._server.name = GATEWAY_NAME
        self._server.description = "An MCP server over SimpleX"
        self._server.add_request_handler("server/discover", types.RequestParams, self._discover)
        self._server.middleware.append(self._answer_loss)
        self._bridge = McpBridge(
            self._server, conversation_tools=conversation_tools, rpc_limit=rpc_limit
        )
        self._conn: _Connection | None = None
        self._state = "stopped"
        self._reason = ""
        self._public_reason = ""  # the reason as a remote caller may read it
        self._logged: tuple[str, str] | None = None
        self._settled = anyio.Event()
        self._stack: contextlib.AsyncExitStack | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        conversation_tools: Iterable[str] = (),
        rpc_limit: int = RPC_JSON_LIMIT,
        line_limit: int = LINE_LIMIT,
        restart_after: int = RESTART_AFTER,
        ping_timeout: float = PING_TIMEOUT,
    ) -> Upstream:
        """The MCP server that ``command args...`` runs, over its stdin and stdout.

        ``env`` is added to the SDK's default environment for the child (``HOME``,
        ``PATH``, ``USER`` and a few others: not the whole environment, as the
        SDK's stdio client decides).

        A line of the child's standard output longer than ``line_limit`` bytes
        is dropped and logged (an answer of that size could not reach a SimpleX
        caller); when it was the answer to a request, that request is answered
        with an error at once. Invalid UTF-8 is replaced, and logged once. The
        child is restarted when ``restart_after`` requests in a row are cut by
        their deadline, or when, after such a cut, it does not answer a ``ping``
        within ``ping_timeout`` seconds.
        """
        return cls(
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            conversation_tools=conversation_tools,
            rpc_limit=rpc_limit,
            line_limit=line_limit,
            restart_after=restart_after,
            ping_timeout=ping_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        conversation_tools: Iterable[str] = (),
        rpc_limit: int = RPC_JSON_LIMIT,
        restart_after: int = RESTART_AFTER,
        ping_timeout: float = PING_TIMEOUT,
    ) -> Upstream:
        """The MCP server at the Streamable HTTP endpoint ``url``; ``headers`` go with
        every request (for example ``Authorization``), and never to the log. The
        connection is made again as for :meth:`stdio` when the server stops answering."""
        return cls(
            url=url,
            headers=headers,
            conversation_tools=conversation_tools,
            rpc_limit=rpc_limit,
            restart_after=restart_after,
            ping_timeout=ping_timeout,
        )

    def __repr__(self) -> str:
        return f"Upstream({self._label}, state={self._state!r})"

    # -- what goes where an McpBridge goes ---------------------------------------------

    @property
    def supported(self) -> tuple[str, ...]:
        """The MCP revisions served toward SimpleX (and declared): the SDK's modern ones."""
        return tuple(MODERN_PROTOCOL_VERSIONS)

    @property
    def conversation_tools(self) -> frozenset[str]:
        return self._bridge.conversation_tools

    @property
    def rpc_limit(self) -> int:
        return self._bridge.rpc_limit

    @property
    def state(self) -> str:
        """``stopped``, ``starting``, ``running`` or ``restarting``."""
        return self._state

    @property
    def failure(self) -> str:
        """Why the last attempt ended, for the operator (``""`` while running): after
        ``async with upstream:`` a state other than ``running`` means the server never
        answered once, and this says why (the command not found, an exit before the
        MCP handshake, no answer from the URL in time)."""
        return "" if self._state == "running" else self._reason

    async def handle(
        self, message: object, *, on_notification: NotificationSink | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC response to one request (as :meth:`McpBridge.handle`)."""
        return await self._bridge.handle(message, on_notification=on_notification)

    async def chat_handler(
        self, request: str | Mapping[str, Any], *, send: ReplySink | None = None
    ) -> str:
        """The last reply to ``/_call mcp <request>`` (as :meth:`McpBridge.chat_handler`):
        ``-32603`` when the upstream failed the request."""
        return await self._bridge.chat_handler(request, send=send)

    async def rpc_handler(self, service_request: ServiceRequestLike) -> Response:
        """The Service RPC response (as :meth:`McpBridge.rpc_handler`); the envelope error
        ``internal`` when the upstream failed the request."""
        outcome = _Outcome()
        token = _OUTCOME.set(outcome)
        try:
            response = await self._bridge.rpc_handler(service_request)
        finally:
            _OUTCOME.reset(token)
        if outcome.failure is not None:
            return Response.failure(ErrorCode.INTERNAL, outcome.failure)
        return response

    # -- the connection -------------------------------------------------------------------

    async def __aenter__(self) -> Upstream:
        if self._stack is not None:
            raise RuntimeError("Upstream: already started")
        stack = contextlib.AsyncExitStack()
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)  # runs first: stops the keeper, then joins it
        self._stack = stack
        try:
            await tasks.start(self._keep)
        except BaseException:
            self._stack = None
            await stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
        self._note("stopped", "")

    def _note(self, state: str, reason: str, detail: str = "") -> None:
        """Change the state; log each change once: the same failure again is not logged,
        however many attempts it takes (``detail``, the next wait, is not part of it)."""
        self._state, self._reason = state, reason
        key = (state, reason)
        if key == self._logged:
            return
        self._logged = key
        if state == "running":
            log.info("%s: running (revision %s)", self._label, reason)
        elif state == "restarting":
            log.warning("%s: %s%s", self._label, reason, detail)
        elif state == "stopped" and self._conn is None:
            log.info("%s: stopped", self._label)

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[_Connection]:
        """One connection: spawn (or reach) the server and negotiate its revision."""
        ended = anyio.Event()
        async with contextlib.AsyncExitStack() as stack:
            if self._params is not None:
                pump = _StderrPump(self._label)
                stack.callback(pump.close_writer)
                streams = await stack.enter_async_context(
                    stdio_streams(self._params, pump.writer, self._stdio)
                )
                pump.close_writer()  # the child has its own copy: EOF when it exits
            else:
                assert self._url is not None
                # The SDK's own client's timeouts (30 s; 300 s to read a stream), with a
                # transport that notices the server's loss.
                http = httpx2.AsyncClient(
                    headers=self._headers,
                    timeout=httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_STREAM_READ_TIMEOUT),
                    transport=_LossTransport(ended),
                )
                await stack.enter_async_context(http)
                streams = await stack.enter_async_context(
                    streamable_http_client(self._url, http_client=http)
                )
            read, write = streams
            watched = _WatchedReadStream(read, ended)

            @contextlib.asynccontextmanager
            async def transport() -> AsyncIterator[tuple[Any, Any]]:
                yield watched, write

            client = Client(
                transport(),
                cache=None,  # every SimpleX request reaches the server
                logging_callback=self._on_log,
                # A 2026-07-28 server logs only for requests that opt in: over HTTP, where a
                # log message can be told to its request, every forward opts in and the
                # caller's own level is applied on the way back; over stdio none does.
                log_level="debug" if self._url is not None else None,
                client_info=types.Implementation(name=GATEWAY_NAME, version=__version__),
            )
            await stack.enter_async_context(client)
            # Runs first on the way out: requests failed by the closing client are
            # known as the upstream's loss (stopped, or gone), not as its answers.
            stack.callback(ended.set)
            conn = _Connection(client=client, ended=ended, revision=client.protocol_version)
            async with anyio.create_task_group() as watch:
                watch.start_soon(self._watch, conn, watched)
                try:
                    yield conn
                finally:
                    # Before the first await on the way out (joining the watcher is one):
                    # the client's requests failed meanwhile are known as the loss.
                    ended.set()
                    watch.cancel_scope.cancel()

    async def _watch(self, conn: _Connection, stream: _WatchedReadStream) -> None:
        """After each miss, ping the upstream; no answer within ``ping_timeout``: restart.

        Any message from the upstream while the ping is out counts as an answer
        (a server that speaks is not blocked), as does an error answer (a
        server of 2026-07-28 no longer serves ``ping``, but answers it).
        """
        while True:
            await conn.probe.wait()
            conn.probe = anyio.Event()
            heard = stream.heard
            answered = False
            with anyio.move_on_after(self._ping_timeout):
                try:
                    await conn.client.session.send_ping()
                except MCPError:
                    pass  # an answer, if an error: alive
                except Exception:
                    return  # the connection is going: the loss is handled where it is seen
                answered = True
            if not answered and stream.heard == heard:
                self._restart(conn, f"no answer to a ping within {self._ping_timeout:g} s")
                return

    def _restart(self, conn: _Connection, why: str) -> None:
        """End ``conn`` because the upstream stopped answering; ``_keep`` makes it again."""
        if conn.ended.is_set():
            return
        conn.failure = why
        conn.ended.set()

    def _missed(self, conn: _Connection) -> None:
        """A request was cut by its deadline: probe the upstream; restart after too many."""
        conn.misses += 1
        if conn.misses >= self._restart_after:
            self._restart(
                conn, f"{conn.misses} requests in a row were cut by their deadline unanswered"
            )
        else:
            conn.probe.set()

    async def _keep(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hold a connection; make it again after a loss, with backoff; log each change once."""
        delay = BACKOFF_MIN
        started = False
        first = True
        while True:
            self._settled = anyio.Event()
            self._state = "starting" if first else "restarting"
            first = False
            began = time.monotonic()
            reason = public = ""
            try:
                # The attempt (spawn, negotiation) is bounded; a held connection is not.
                with anyio.CancelScope(deadline=anyio.current_time() + CONNECT_TIMEOUT) as scope:
                    async with self._open() as conn:
                        scope.deadline = float("inf")
                        self._conn = conn
                        self._note("running", conn.revision)
                        self._settled.set()
                        if not started:
                            started = True
                            task_status.started()
                        await conn.ended.wait()
                        reason = public = conn.failure or (
                            "the server exited" if self._params is not None else "the URL refused"
                        )
                if scope.cancelled_caught:
                    reason = public = f"no answer within {CONNECT_TIMEOUT:g} s"
            except Exception as exc:
                # The details (a URL, a host, an HTTP error of the way) are the operator's.
                reason = _describe(exc)
                public = "it could not be started" if self._params else "it could not be reached"
            finally:
                self._conn = None
            if time.monotonic() - began >= STABLE_AFTER:
                delay = BACKOFF_MIN
            self._public_reason = f"stopped ({public})"
            self._note("restarting", f"stopped ({reason})", f"; starting again in {delay:g} s")
            self._settled.set()
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def client(self) -> Client:
        """The connected client (for the forwards); an error when none is up.

        A request that comes while an attempt is under way waits for its end.
        """
        if self._stack is None:
            raise _Unavailable(
                code=types.CONNECTION_CLOSED,
                message="the MCP server is not started (enter `async with upstream:` first)",
            )
        if self._conn is None and not self._settled.is_set():
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await self._settled.wait()
        conn = self._conn
        if conn is None or conn.ended.is_set():
            # A remote caller reads this: no URL, host or error text of the way to the server.
            why = self._public_reason if self._state == "restarting" else "it went away"
            raise _Unavailable(
                code=types.CONNECTION_CLOSED, message=f"the MCP server is not running: {why}"
            )
        return conn.client

    async def _answer_loss(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """The gateway's middleware, around each SimpleX request.

        A request the upstream's loss failed is an internal error. The request's
        log sink is set for the forward: the SDK's HTTP client delivers a log
        message of the upstream in the context of the request it rode with.
        """
        conn = self._conn

        async def log_to_caller(params: types.LoggingMessageNotificationParams) -> None:
            # The caller's own opt-in (its _meta log level) is the SDK session's gate. The
            # API is deprecated as of 2026-07-28: that is the upstream's to hear, not the
            # operator's. The warning comes with the call, so no await is inside the block.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                sending = ctx.session.send_log_message(
                    params.level, params.data, params.logger, related_request_id=ctx.request_id
                )
            await sending

        token = _REQUEST_LOG.set(log_to_caller)
        try:
            result = await call_next(ctx)
            if conn is not None:
                conn.misses = 0
            return result
        except anyio.get_cancelled_exc_class():
            # Cut by the caller's deadline (or the gateway's stop): a miss of the upstream.
            if conn is not None and self._conn is conn and not conn.ended.is_set():
                self._missed(conn)
            raise
        except MCPError as exc:
            if conn is not None and exc.error.code != types.CONNECTION_CLOSED:
                conn.misses = 0  # the upstream answered, if with an error
            lost = isinstance(exc, _Unavailable) or (
                exc.error.code == types.CONNECTION_CLOSED
                and conn is not None
                and conn.ended.is_set()
            )
            if not lost:
                raise
            reason = (
                exc.error.message if isinstance(exc, _Unavailable) else "the MCP server went away"
            )
            outcome = _OUTCOME.get()
            if outcome is not None:
                outcome.failure = reason
            raise MCPError(code=types.INTERNAL_ERROR, message=reason) from None
        finally:
            _REQUEST_LOG.reset(token)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message of the upstream: to the caller whose request it came with, if known.

        Over HTTP the SDK's client delivers it in the context of that request; over
        stdio nothing on the wire says which request it belongs to, so it goes to
        nobody rather than to the wrong caller.
        """
        sink = _REQUEST_LOG.get()
        if sink is None:
            log.debug("%s: a log message for no known request was dropped", self._label)
            return
        await sink(params)

    async def _discover(
        self, ctx: ServerRequestContext[Any], params: types.RequestParams | None
    ) -> types.DiscoverResult:
        """``server/discover``: the upstream's capabilities and instructions, as served here."""
        client = await self.client()
        return types.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=_served_capabilities(client.server_capabilities),
            instructions=client.instructions,
        )

"""The MCP proxy: a local stdio MCP server that forwards to a bot over SimpleX.

An MCP host (a desktop app, an IDE) runs ``simplex-rpc mcp-proxy`` as a local
server. Two SDK objects meet in this process:

* the SDK's own server (a lowlevel ``Server`` run by ``stdio_server``) faces
  the host and speaks whatever revision the host speaks: the ``initialize``
  handshake of revisions before 2026-07-28, or the per-request envelope of
  2026-07-28 and later (the SDK's dual-era loop decides per connection);
* the SDK's own client (``mcp.Client`` over :class:`SimplexTransport`) faces
  the bot and negotiates the bot's revision.

Each handler forwards one request: tools, resources, resource templates,
prompts and completions. An error of the bot or of the way to it reaches the
host as an MCP error of that request; the proxy stays up. The connection to
the core and the bot is made at start and made again on the next request
after it failed or the core went away.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .._bindings import INVALID_REQUEST, invalid_request, json_type, valid_id
from .._keeper import Backoff, Ended, Keeper
from .._listener import ListenerPolicy, Stopper, guard, listen, server_options, uvicorn_server
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, redact
from ..adapter import ChatCore
from ._client import SimplexTransport, Via
from ._forward import PROXY_NAME, build_server, leaf, upstream_client
from ._proxy_sessions import DEFAULT_IDLE_TIMEOUT, SessionGuard
from ._proxy_stdin import StdinLines

__all__ = [
    "PROXY_NAME",
    "BotConnection",
    "StdioOutcome",
    "build_server",
    "check_message",
    "connector",
    "run_proxy",
    "run_proxy_http",
    "upstream_client",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp_proxy"))

Connect = Callable[[], AbstractAsyncContextManager[tuple[ChatCore, Client]]]


class BotConnection:
    """The proxy's SDK client to the bot, kept by a :class:`~simplex_rpc._keeper.Keeper`:
    connected by :meth:`run`, used by :meth:`client`.

    :meth:`run` owns the connection (the core, then ``mcp.Client``), so that the
    SDK's task groups are entered and left in one task. It is made at start; a
    failed connection is made again when a request asks for the client after the
    wait of ``backoff`` (0.5 s, doubled up to 30 s); a request during the wait gets
    the last failure at once. A connection whose core went away is made again at
    once, for the request that noticed.
    """

    def __init__(self, connect: Connect, target: str, *, backoff: Backoff | None = None) -> None:
        self._target = target
        self._failure = ""
        self._lock = anyio.Lock()
        self._keeper: Keeper[tuple[ChatCore, Client]] = Keeper(
            connect, backoff=backoff, on_demand=True, on_up=self._up, on_down=self._down
        )

    def __repr__(self) -> str:
        return f"BotConnection({self._target!r}, {self._keeper!r})"

    def _up(self, _connection: tuple[ChatCore, Client]) -> None:
        self._failure = ""
        log.info("connected to the bot")

    def _down(self, ended: Ended[tuple[ChatCore, Client]]) -> None:
        failure: str | None = None
        if ended.error is not None:
            inner = leaf(ended.error)
            failure = redact(str(inner) or type(inner).__name__)[:500]
        if ended.dropped:
            # Dropped on purpose (the core went away): made again at once; the
            # requests waiting get that attempt's outcome.
            if failure is not None:
                log.debug("closing the lost connection failed: %s", failure)
            return
        self._failure = failure or "the connection ended"
        log.warning("the bot could not be reached: %s", self._failure)

    async def run(self) -> None:
        """Keep the connection (see the class's docstring); runs until cancelled."""
        await self._keeper.run()

    async def client(self) -> Client:
        """The connected client; an ``MCPError`` when the bot cannot be reached."""
        async with self._lock:
            held = self._keeper.current
            if held is not None and held[0].closed:
                log.info("the connection to the chat core was lost: connecting again")
                self._keeper.drop()
            held = await self._keeper.settle()
            if held is None:
                raise MCPError(
                    code=types.CONNECTION_CLOSED,
                    message=f"the SimpleX bot could not be reached: {self._failure}",
                )
            return held[1]


def connector(
    core_url: str,
    user_id: int,
    target: str,
    *,
    via: Via,
    sign_key: SigningKey | None,
    timeout: float,
    start: bool,
    member: str | None = None,
) -> Connect:
    """How :class:`BotConnection` connects: the core at ``core_url``, then ``mcp.Client``."""
    # Checked now, so that a wrong argument fails the command instead of every request.
    SimplexTransport._check_arguments(user_id, target, via=via, timeout=timeout, member=member)

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
        # --timeout bounds the connection step too: a core that does not answer fails the
        # attempt (and the request waiting for it) in that time, not the 60 s of /_start.
        async with ChatCore.connect(core_url, open_timeout=timeout) as core:
            if start:
                # A core that is running already answers chatRunning and is unchanged.
                await core.start(service_requests=False, timeout=timeout)
            transport = SimplexTransport(
                core,
                user_id,
                target,
                via=via,
                sign_key=sign_key,
                timeout=timeout,
                member=member,
            )
            async with upstream_client(transport) as client:
                yield core, client

    return connect


class StdioOutcome:
    """What a stdio proxy did: the host's requests it answered, and those left unanswered
    when it stopped (the drain's bound ran out). ``stop()`` ends reading at once, as end
    of file does: the requests already read are still answered."""

    def __init__(self) -> None:
        self.answered = 0
        self.unanswered = 0
        self._stdin: StdinLines | None = None
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        if self._stdin is not None:
            self._stdin.close()

    def line(self) -> str:
        return f"stopped: {self.answered} answered, {self.unanswered} unanswered"


async def run_proxy(
    connect: Connect, target: str, *, outcome: StdioOutcome | None = None, drain: float = 60.0
) -> StdioOutcome:
    """Serve the host on stdin and stdout until it closes stdin, or ``outcome.stop()``.

    Every request read before the end is answered before the proxy returns (the
    SDK's server would cancel them when its input ends): the input the server sees
    ends only once each such request has its response on stdout, or after
    ``drain`` seconds (then counted in ``unanswered``).
    """
    outcome = outcome if outcome is not None else StdioOutcome()
    stdin = StdinLines(0)
    outcome._stdin = stdin
    if outcome._stopped:
        stdin.close()
    upstream = BotConnection(connect, target)
    server = build_server(upstream)
    pending: set[types.RequestId] = set()
    settled = anyio.Event()
    inner_send, inner_read = anyio.create_memory_object_stream[Any](0)
    out_send, out_read = anyio.create_memory_object_stream[Any](0)

    async def pump_in(read_stream: Any) -> None:
        nonlocal settled
        async with inner_send:
            async for item in read_stream:
                message = getattr(item, "message", None)
                if isinstance(message, types.JSONRPCRequest):
                    pending.add(message.id)
                    settled = anyio.Event()
                elif isinstance(message, types.JSONRPCNotification) and (
                    message.method == "notifications/cancelled"
                ):
                    pending.discard((message.params or {}).get("requestId"))
                await inner_send.send(item)
            # The end of the input: the server keeps it open until the answers are out.
            with anyio.move_on_after(drain):
                while pending:
                    await settled.wait()
            outcome.unanswered = len(pending)

    async def pump_out(write_stream: Any) -> None:
        async with write_stream, out_read:
            async for item in out_read:
                message = getattr(item, "message", None)
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                    if message.id in pending:
                        pending.discard(message.id)
                        outcome.answered += 1
                        if not pending:
                            settled.set()
                await write_stream.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.run)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
            tg.start_soon(pump_in, read_stream)
            tg.start_soon(pump_out, write_stream)
            async with out_send:
                await server.run(inner_read, out_send, server.create_initialization_options())
        tg.cancel_scope.cancel()
    return outcome


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_message(message: object) -> tuple[int, str] | None:
    """Why a POSTed body is not one JSON-RPC message an MCP client sends, or None.

    A client POSTs a request, a notification, or a response to the server's
    request (an elicitation's answer). Anything else is answered here, with the
    JSON-RPC error, before the SDK sees it: the SDK's own answer would be the
    text of its pydantic validation error.
    """
    if not isinstance(message, dict):
        return INVALID_REQUEST, (
            f"Invalid Request: expected one JSON-RPC message object, got {json_type(message)}"
        )
    if message.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, "Invalid Request: member 'jsonrpc' must be \"2.0\""
    if "method" in message:
        if "id" in message:
            problem = invalid_request(message, allow_null_id=False)
        elif not isinstance(message["method"], str) or not message["method"]:
            problem = "member 'method' must be a non-empty string"
        elif "params" in message and not isinstance(message["params"], dict):
            problem = f"member 'params' must be an object, got {json_type(message['params'])}"
        else:
            problem = None
    elif ("result" in message) == ("error" in message):
        problem = (
            "a message has 'method' (a request or a notification), or one of 'result'"
            " and 'error' (a response)"
        )
    elif not valid_id(message.get("id"), allow_null="error" in message):
        problem = "a response's member 'id' must be a string or an integer"
    elif "error" in message and not (
        isinstance(message["error"], dict)
        and isinstance(message["error"].get("code"), int)
        and isinstance(message["error"].get("message"), str)
    ):
        problem = "member 'error' must be an object with an integer 'code' and a 'message'"
    else:
        problem = None
    return None if problem is None else (INVALID_REQUEST, f"Invalid Request: {problem}")


async def run_proxy_http(
    connect: Connect,
    target: str,
    policy: ListenerPolicy,
    on_listening: Callable[[str], None],
    *,
    stopper: Stopper | None = None,
) -> None:
    """Serve the proxy as a Streamable HTTP MCP server at ``http://HOST:PORT/mcp``.

    The SDK's own server app (``Server.streamable_http_app``, its 4 MiB body
    limit included) behind the listener's guard (``simplex_rpc._listener``:
    ``Host``, ``Origin``, token, ``Content-Type``, body size and time, strict
    JSON, :func:`check_message`) and :class:`~._sessions.SessionGuard`, under
    uvicorn with the listener's connection cap and header timeout. ``policy``
    says where to listen (its port 0 picks a free port) and what to accept; an
    address other machines reach without a token, or one that cannot be bound,
    raises :class:`~simplex_rpc._listener.ListenerError` before anything starts.
    ``on_listening`` gets the endpoint's URL once uvicorn accepts connections.
    Runs until cancelled, or until ``stopper`` asks for uvicorn's graceful
    shutdown (the process's signals are the caller's: uvicorn installs none).
    """
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    requested = policy.address
    sock, policy = listen(policy)
    upstream = BotConnection(connect, target)
    server = build_server(upstream)
    # The listener's guard checks Host and Origin on every path, with the rules of
    # simplex_rpc._listener (which the SDK's lists cannot express for a wildcard
    # address), so the SDK's own copy of that check is off; it still checks
    # Content-Type and the body size.
    app = server.streamable_http_app(
        host=requested,
        max_request_body_size=policy.max_body,
        session_idle_timeout=DEFAULT_IDLE_TIMEOUT,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sessions = SessionGuard(app, idle_timeout=DEFAULT_IDLE_TIMEOUT)
    guarded = guard(sessions, policy, check=check_message)
    config = uvicorn.Config(guarded, lifespan="on", **server_options(policy))
    url = f"http://{_url_host(requested)}:{policy.port}/mcp"
    http = uvicorn_server(config, stopper, on_started=lambda: on_listening(url))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream.run)
            tg.start_soon(sessions.run)
            try:
                await http.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
    finally:
        sock.close()

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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Any, Final, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .. import __version__
from .._bindings import INVALID_REQUEST, invalid_request, json_type, valid_id
from .._listener import ListenerPolicy, Stopper, guard, listen, server_options, uvicorn_server
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, redact
from ..adapter import ChatCore
from ._client import SimplexTransport, Via
from ._sessions import DEFAULT_IDLE_TIMEOUT, SessionGuard
from ._stdin import StdinLines

__all__ = [
    "PROXY_NAME",
    "StdioOutcome",
    "Upstream",
    "build_server",
    "check_message",
    "run_proxy",
    "run_proxy_http",
    "upstream_client",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp_proxy"))

PROXY_NAME: Final = "simplex-rpc-mcp-proxy"

Connect = Callable[[], AbstractAsyncContextManager[tuple[ChatCore, Client]]]


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside exception groups (the SDK's session wraps its errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class ClientSource(Protocol):
    """Where the forwards get their SDK client: the proxy's bot, or the gateway's upstream."""

    async def client(self) -> Client: ...


class Upstream:
    """The proxy's SDK client to the bot: connected by :meth:`run`, used by :meth:`client`.

    :meth:`run` owns the connection (the core, then ``mcp.Client``), so that
    the SDK's task groups are entered and left in one task. A failed
    connection is tried again when the next request asks for the client.
    """

    def __init__(self, connect: Connect, target: str) -> None:
        self._connect = connect
        self._target = target
        self._core: ChatCore | None = None
        self._client: Client | None = None
        self._failure = ""
        self._wanted = anyio.Event()
        self._wanted.set()  # connect at start: the first request need not wait for it
        self._ready = anyio.Event()
        self._drop = anyio.Event()
        self._lock = anyio.Lock()

    async def run(self) -> None:
        """Keep the connection: make it when wanted, hold it until it is dropped.

        ``_ready`` is set once per attempt, when the attempt has ended (connected or
        failed): a request that waits for it never sees the state between a dropped
        connection and the next attempt.
        """
        while True:
            await self._wanted.wait()
            self._drop = anyio.Event()
            failure: str | None = None
            try:
                async with self._connect() as (core, client):
                    self._core, self._client = core, client
                    self._failure = ""
                    log.info("connected to the bot")
                    self._ready.set()
                    await self._drop.wait()
            except Exception as exc:
                leaf = _leaf(exc)
                failure = redact(str(leaf) or type(leaf).__name__)[:500]
            self._core = self._client = None
            if self._drop.is_set():
                # Dropped on purpose (the core went away): connect again now; the
                # requests waiting on the new ``_ready`` get this attempt's outcome.
                if failure is not None:
                    log.debug("closing the lost connection failed: %s", failure)
                continue
            self._failure = failure or "the connection ended"
            log.warning("the bot could not be reached: %s", self._failure)
            # A failure: try again only when a request asks for the bot.
            self._wanted = anyio.Event()
            self._ready.set()

    async def client(self) -> Client:
        """The connected client; an ``MCPError`` when the bot cannot be reached."""
        async with self._lock:
            if self._client is not None and self._core is not None and self._core.closed:
                log.info("the connection to the chat core was lost: connecting again")
                self._ready = anyio.Event()
                self._drop.set()
            elif self._client is None and self._ready.is_set():
                self._ready = anyio.Event()
                self._wanted.set()
            await self._ready.wait()
            if self._client is None:
                raise MCPError(
                    code=types.CONNECTION_CLOSED,
                    message=f"the SimpleX bot could not be reached: {self._failure}",
                )
            return self._client


def _page(params: types.PaginatedRequestParams | None) -> types.PaginatedRequestParams | None:
    """The host's pagination without its ``_meta``: the proxy's client writes its own."""
    if params is None or params.cursor is None:
        return None
    return types.PaginatedRequestParams(cursor=params.cursor)


def _progress_to_host(ctx: ServerRequestContext[Any]) -> ProgressFnT | None:
    """Progress from the bot (over chat) passed on to the host, when the host asked for it."""
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        return None
    request_id = str(ctx.request_id) if ctx.request_id is not None else None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.send_progress_notification(
            token, progress, total, message, related_request_id=request_id
        )

    return forward


_HOST_REQUEST: ContextVar[ServerRequestContext[Any] | None] = ContextVar(
    "simplex_rpc_mcp_proxy_host_request", default=None
)
"""The host's request being forwarded, for the elicitation callback of the proxy's client."""


async def _elicit_from_host(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """The bot asked for the user's input: ask the host, within the host's request.

    Used for hosts of revisions before 2026-07-28, which cannot receive an
    ``input_required`` result: the proxy's client runs the rounds with the bot
    and each question becomes the SDK server's ``elicitation/create`` to the host.
    """
    host = _HOST_REQUEST.get()
    if host is None:
        return types.ErrorData(
            code=types.INVALID_REQUEST, message="no host request to ask for the input"
        )
    related = host.request_id
    if isinstance(params, types.ElicitRequestURLParams):
        if params.elicitation_id is None:
            return types.ErrorData(
                code=types.INVALID_PARAMS, message="a URL elicitation without elicitationId"
            )
        return await host.session.elicit_url(
            params.message, params.url, params.elicitation_id, related_request_id=related
        )
    return await host.session.elicit_form(
        params.message, params.requested_schema, related_request_id=related
    )


def upstream_client(transport: SimplexTransport) -> Client:
    """The proxy's SDK client to the bot over ``transport``.

    It declares elicitation (its callback asks the host), so that the bot's tools
    that need the user's input answer ``input_required`` instead of refusing.
    The host keeps its own cache; the proxy forwards every request.
    """
    return Client(transport, cache=None, elicitation_callback=_elicit_from_host)


_T = TypeVar("_T")


async def _forward(
    method: str, ctx: ServerRequestContext[Any], call: Callable[[], Awaitable[_T]]
) -> _T:
    """Run one forward for the host's request ``ctx``; its failure as an MCP error.

    The SDK server answers a pydantic ``ValidationError`` as "Invalid request
    parameters", which would blame the host for the bot's answer: a bot answer
    that is not valid MCP, or any other failure on the way, is an internal error
    of this request, with a short text that holds no key material.
    """
    token = _HOST_REQUEST.set(ctx)
    try:
        return await call()
    except MCPError:
        raise
    except Exception as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, MCPError):
            raise leaf from None
        if isinstance(leaf, ValidationError):
            raise MCPError(
                code=types.INTERNAL_ERROR, message=f"the bot's {method} answer is not valid MCP"
            ) from None
        log.warning("forwarding %s failed: %s", method, redact(str(leaf))[:300])
        text = redact(str(leaf))[:200] or type(leaf).__name__
        raise MCPError(
            code=types.INTERNAL_ERROR, message=f"{method} could not be forwarded: {text}"
        ) from None
    finally:
        _HOST_REQUEST.reset(token)


def _modern(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the host speaks 2026-07-28 or later (it can receive ``input_required``)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def build_server(upstream: ClientSource) -> Server[Any]:
    """The SDK server the host talks to: each request forwarded through ``upstream``.

    A tool, resource or prompt that needs the user's input: a 2026-07-28 host
    receives the bot's ``input_required`` result and answers it itself (its
    retry is forwarded); for an older host the proxy's client runs the rounds,
    asking the host with ``elicitation/create``.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        async def call() -> types.ListToolsResult:
            return await (await upstream.client()).session.list_tools(params=_page(params))

        return await _forward("tools/list", ctx, call)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async def call() -> types.CallToolResult | types.InputRequiredResult:
            client = await upstream.client()
            progress = _progress_to_host(ctx)
            if not _modern(ctx):
                return await client.call_tool(
                    params.name, params.arguments, progress_callback=progress
                )
            result = await client.session.call_tool(
                params.name,
                params.arguments,
                progress_callback=progress,
                input_responses=params.input_responses,
                request_state=params.request_state,
                allow_input_required=True,
            )
            return result

        return await _forward("tools/call", ctx, call)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        async def call() -> types.ListResourcesResult:
            return await (await upstream.client()).session.list_resources(params=_page(params))

        return await _forward("resources/list", ctx, call)

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        async def call() -> types.ListResourceTemplatesResult:
            session = (await upstream.client()).session
            return await session.list_resource_templates(params=_page(params))

        return await _forward("resources/templates/list", ctx, call)

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        async def call() -> types.ReadResourceResult | types.InputRequiredResult:
            client = await upstream.client()
            if not _modern(ctx):
                return await client.read_resource(str(params.uri), cache_mode="bypass")
            return await client.session.read_resource(
                str(params.uri),
                input_responses=params.input_responses,
                request_state=params.request_state,
                allow_input_required=True,
            )

        return await _forward("resources/read", ctx, call)

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        async def call() -> types.ListPromptsResult:
            return await (await upstream.client()).session.list_prompts(params=_page(params))

        return await _forward("prompts/list", ctx, call)

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        async def call() -> types.GetPromptResult | types.InputRequiredResult:
            client = await upstream.client()
            if not _modern(ctx):
                return await client.get_prompt(params.name, params.arguments)
            return await client.session.get_prompt(
                params.name,
                params.arguments,
                input_responses=params.input_responses,
                request_state=params.request_state,
                allow_input_required=True,
            )

        return await _forward("prompts/get", ctx, call)

    async def complete(
        ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        async def call() -> types.CompleteResult:
            session = (await upstream.client()).session
            context = params.context.arguments if params.context is not None else None
            return await session.complete(
                params.ref,
                params.argument.model_dump(by_alias=True, exclude_none=True),
                context_arguments=context,
            )

        return await _forward("completion/complete", ctx, call)

    return Server(
        PROXY_NAME,
        version=__version__,
        description="An MCP bot reached over SimpleX",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )


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
    """How :class:`Upstream` connects: the core at ``core_url``, then ``mcp.Client``."""
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
    upstream = Upstream(connect, target)
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
    upstream = Upstream(connect, target)
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
    http = uvicorn_server(config, stopper)
    url = f"http://{_url_host(requested)}:{policy.port}/mcp"

    async def announce() -> None:
        while not http.started:
            await anyio.sleep(0.01)
        on_listening(url)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream.run)
            tg.start_soon(announce)
            tg.start_soon(sessions.run)
            try:
                await http.serve(sockets=[sock])
            finally:
                tg.cancel_scope.cancel()
    finally:
        sock.close()

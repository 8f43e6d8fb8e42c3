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
from typing import Any, Final

import anyio
import mcp_types as types
from mcp import Client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from . import __version__
from ._keys import SigningKey
from ._mcp_client import SimplexTransport
from ._redact import RedactingLogger, redact
from .adapter import ChatCore

__all__ = ["PROXY_NAME", "Upstream", "build_server", "run_proxy"]

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp_proxy"))

PROXY_NAME: Final = "simplex-rpc-mcp-proxy"

Connect = Callable[[], AbstractAsyncContextManager[tuple[ChatCore, Client]]]


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside exception groups (the SDK's session wraps its errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


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
        """Keep the connection: make it when wanted, hold it until it is dropped."""
        while True:
            await self._wanted.wait()
            self._drop = anyio.Event()
            try:
                async with self._connect() as (core, client):
                    self._core, self._client = core, client
                    log.info("connected to the bot")
                    self._ready.set()
                    await self._drop.wait()
            except Exception as exc:
                leaf = _leaf(exc)
                self._failure = redact(str(leaf) or type(leaf).__name__)[:500]
                log.warning("the bot could not be reached: %s", self._failure)
            self._core = self._client = None
            if not self._drop.is_set():
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


def build_server(upstream: Upstream) -> Server[Any]:
    """The SDK server the host talks to: each request forwarded through ``upstream``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await (await upstream.client()).session.list_tools(params=_page(params))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        session = (await upstream.client()).session
        result = await session.call_tool(
            params.name,
            params.arguments,
            progress_callback=_progress_to_host(ctx),
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
        )
        return result

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await (await upstream.client()).session.list_resources(params=_page(params))

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        session = (await upstream.client()).session
        return await session.list_resource_templates(params=_page(params))

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        session = (await upstream.client()).session
        return await session.read_resource(
            str(params.uri),
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
        )

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await (await upstream.client()).session.list_prompts(params=_page(params))

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        session = (await upstream.client()).session
        return await session.get_prompt(
            params.name,
            params.arguments,
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
        )

    async def complete(
        ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        session = (await upstream.client()).session
        context = params.context.arguments if params.context is not None else None
        return await session.complete(
            params.ref,
            params.argument.model_dump(by_alias=True, exclude_none=True),
            context_arguments=context,
        )

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
    via: str,
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
        async with ChatCore.connect(core_url) as core:
            if start:
                # A core that is running already answers chatRunning and is unchanged.
                await core.start(service_requests=False)
            transport = SimplexTransport(
                core,
                user_id,
                target,
                via=via,
                sign_key=sign_key,
                timeout=timeout,
                member=member,
            )
            # The host keeps its own cache; the proxy forwards every request.
            async with Client(transport, cache=None) as client:
                yield core, client

    return connect


async def run_proxy(connect: Connect, target: str) -> None:
    """Serve the host on stdin and stdout until it closes them."""
    upstream = Upstream(connect, target)
    server = build_server(upstream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.run)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()

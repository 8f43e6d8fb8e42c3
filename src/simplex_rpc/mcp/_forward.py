"""The MCP forwards: each request of an SDK server relayed through an SDK client.

The role *forward* of both bindings (see the package's docstring): what relays
one request to the upstream and maps its answer. :func:`build_server` is an SDK
``Server`` whose every handler (tools, resources, resource templates, prompts,
completions) is one request of an ``mcp.Client`` that a :class:`ClientSource`
gives: the proxy's client to the bot (``_proxy.BotConnection``), or the
gateway's client to the MCP server it serves (``_gateway.Upstream``). A failure
on the way is an MCP error of that request, never the host's fault and never a
text with key material.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final, Protocol, TypeVar

import mcp_types as types
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .. import __version__
from .._wire.redact import RedactingLogger, redact
from ._client import SimplexTransport

__all__ = ["PROXY_NAME", "ClientSource", "build_server", "forward", "leaf", "upstream_client"]

# The proxy's logger: the forwards were the proxy's before the gateway shared them.
log = RedactingLogger(logging.getLogger("simplex_rpc.mcp_proxy"))

PROXY_NAME: Final = "simplex-rpc-mcp-proxy"
"""The SDK server's name (the gateway renames its own)."""

_T = TypeVar("_T")


def leaf(exc: BaseException) -> BaseException:
    """The first error inside exception groups (the SDK's session wraps its errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class ClientSource(Protocol):
    """Where the forwards get their SDK client: the proxy's bot, or the gateway's upstream."""

    async def client(self) -> Client: ...


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


async def forward(
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
        inner = leaf(exc)
        if isinstance(inner, MCPError):
            raise inner from None
        if isinstance(inner, ValidationError):
            raise MCPError(
                code=types.INTERNAL_ERROR, message=f"the bot's {method} answer is not valid MCP"
            ) from None
        log.warning("forwarding %s failed: %s", method, redact(str(inner))[:300])
        text = redact(str(inner))[:200] or type(inner).__name__
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

        return await forward("tools/list", ctx, call)

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

        return await forward("tools/call", ctx, call)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        async def call() -> types.ListResourcesResult:
            return await (await upstream.client()).session.list_resources(params=_page(params))

        return await forward("resources/list", ctx, call)

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        async def call() -> types.ListResourceTemplatesResult:
            session = (await upstream.client()).session
            return await session.list_resource_templates(params=_page(params))

        return await forward("resources/templates/list", ctx, call)

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

        return await forward("resources/read", ctx, call)

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        async def call() -> types.ListPromptsResult:
            return await (await upstream.client()).session.list_prompts(params=_page(params))

        return await forward("prompts/list", ctx, call)

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

        return await forward("prompts/get", ctx, call)

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

        return await forward("completion/complete", ctx, call)

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

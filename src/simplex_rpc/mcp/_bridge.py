"""McpBridge: a server written with the official ``mcp`` SDK behind SimpleX.

The SDK (2.x) answers a 2026-07-28 request in one exchange: its HTTP entry
classifies the request (``classify_inbound_request``: ``-32602`` for a
malformed ``_meta`` envelope, then ``-32022`` for a revision it does not
serve), builds a born-ready
``Connection`` from the envelope and runs ``serve_one``, the single-exchange
driver, under a dispatch context that refuses server-to-client requests. The
bridge does the same without HTTP: the same SDK calls, with a dispatch
context whose notifications go to the caller as replies in a conversation.
The SDK does the dispatch, the validation, the results, ``-32602`` and
``-32022``.

What the bridge adds is the binding: ``-32600`` for what is not a request,
``-32022`` for ``initialize`` (over HTTP the SDK routes it to its handshake
transport, which the binding does not carry; the answer is the one of the
SDK's modern connection), the size rules of each transport, and
``conversation_required`` for the tools marked as needing a conversation.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import modern_error_data, serve_one
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import MessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCRequest, ProgressToken, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .._bindings import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RPC_JSON_LIMIT,
    BindingError,
    ServiceRequestLike,
    dumps_text,
    envelope_of,
    error_response,
    mcp,
    refuse_envelope,
)
from .._wire import strict_json as _json
from .._wire.envelope import Response
from ..chat import fits_message

__all__ = ["McpBridge"]

logger = logging.getLogger(__name__)

TRANSPORT_KIND: Final = "simplex"
"""``TransportContext.kind`` of a request that came over SimpleX."""

NOT_SERVED: Final = frozenset({"subscriptions/listen"})
"""Methods whose answer is an open-ended stream: the binding serves request-response methods."""

NotificationSink = Callable[[dict[str, Any]], Awaitable[None]]
ReplySink = Callable[[str], Awaitable[None]]


@dataclass
class _SimplexDispatchContext:
    """The SDK's ``DispatchContext`` for one request that came over SimpleX.

    Like the SDK's single-exchange HTTP context: no back-channel (a
    2026-07-28 server sends no requests to the client), and notifications for
    the request go to ``sink``, the conversation, when there is one.
    """

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata = None
    progress_token: ProgressToken | None = None
    sink: NotificationSink | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)

    @property
    def can_send_request(self) -> bool:
        return False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        if self.sink is None:
            return
        note: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            note["params"] = dict(params)
        try:
            await self.sink(note)
        except Exception:
            # Notifications are advisory: a failed one must not fail the request.
            logger.warning("a notification for request %r could not be delivered", self.request_id)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


def _lowlevel(server: object) -> Server[Any]:
    if isinstance(server, MCPServer):
        # The SDK's own InMemoryTransport unwraps MCPServer the same way.
        inner = server._lowlevel_server
        assert isinstance(inner, Server)
        return inner
    if isinstance(server, Server):
        return server
    raise TypeError(f"server: expected an mcp SDK Server or MCPServer, got {type(server).__name__}")


class McpBridge:
    """Serves an ``mcp`` SDK server over both SimpleX transports.

    ``server`` is an ``MCPServer`` (FastMCP style) or a lowlevel ``Server``.
    ``conversation_tools`` names the tools that need a conversation: over
    Service RPC a call of one of them is answered ``conversation_required``.
    ``rpc_limit`` is the byte limit of a Service RPC response envelope
    (default 10,000, the protocol text's SHOULD; at most what fits the block).

    * :meth:`handle`: one JSON-RPC request in, its JSON-RPC response out (no
      size rules). Notifications the server sends for the request go to
      ``on_notification``.
    * :meth:`chat_handler`: ``/_call mcp <request>`` in a conversation: the
      text of the last reply, sized for one message (``-32603`` otherwise).
    * :meth:`rpc_handler`: the adapter responder's handler: a request
      envelope in, a response envelope out.

    The server's lifespan is entered once by ``async with bridge:``; without
    it, each request enters and leaves the lifespan on its own.
    """

    def __init__(
        self,
        server: Server[Any] | MCPServer[Any],
        *,
        conversation_tools: Iterable[str] = (),
        rpc_limit: int = RPC_JSON_LIMIT,
    ) -> None:
        self.server = server
        self._server = _lowlevel(server)
        if isinstance(conversation_tools, str):
            raise BindingError(
                "conversation_tools: expected a collection of tool names, got a string"
            )
        self.conversation_tools = frozenset(conversation_tools)
        for name in self.conversation_tools:
            if not isinstance(name, str) or not name:
                raise BindingError("conversation_tools: every tool name must be a non-empty string")
        mcp.rpc_response(
            {"jsonrpc": "2.0", "id": 0, "result": {}}, limit=rpc_limit
        )  # checks the limit
        self.rpc_limit = rpc_limit
        self._stack: contextlib.AsyncExitStack | None = None
        self._state: Any = None

    def __repr__(self) -> str:
        tools = sorted(self.conversation_tools)
        return f"McpBridge({self._server.name!r}, conversation_tools={tools!r})"

    @property
    def supported(self) -> tuple[str, ...]:
        """The MCP revisions the SDK serves, for ``-32022`` and the declaration."""
        return tuple(MODERN_PROTOCOL_VERSIONS)

    async def __aenter__(self) -> McpBridge:
        if self._stack is not None:
            raise RuntimeError("McpBridge: the server's lifespan is already entered")
        stack = contextlib.AsyncExitStack()
        self._state = await stack.enter_async_context(self._server.lifespan(self._server))
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack, self._state = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    @contextlib.asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[Any]:
        if self._stack is not None:
            yield self._state
            return
        async with self._server.lifespan(self._server) as state:
            yield state

    async def handle(
        self, message: object, *, on_notification: NotificationSink | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC response to one request, a result or an error.

        ``-32600`` for a message that is not a request (see
        :func:`simplex_rpc.mcp.check_request`), ``-32022`` for ``initialize``;
        everything else is the SDK's answer: ``-32602`` for a malformed
        ``_meta`` envelope (a request without one included) and ``-32022`` for
        an unserved revision. An exception in
        a handler is the SDK's ``-32603`` without its text.
        """
        refused = self._refusal(message)
        if refused is not None:
            return refused
        assert isinstance(message, Mapping)
        request = JSONRPCRequest.model_validate(message)
        route = classify_inbound_request(message)
        if isinstance(route, InboundLadderRejection):
            return error_response(request.id, route.code, route.message, route.data)
        connection = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities
        )
        dctx = _SimplexDispatchContext(
            transport=TransportContext(kind=TRANSPORT_KIND, can_send_request=False),
            request_id=request.id,
            progress_token=progress_token_from_params(request.params),
            sink=on_notification,
        )
        try:
            async with self._lifespan() as state:
                result = await serve_one(
                    self._server,
                    dctx,
                    request.method,
                    request.params,
                    connection=connection,
                    lifespan_state=state,
                )
        except Exception as exc:
            data = modern_error_data(exc)
            return error_response(request.id, data.code, data.message, data.data)
        response = {"jsonrpc": "2.0", "id": request.id, "result": result}
        try:
            dumps_text(response, "mcp response")
        except BindingError:
            logger.error("the handler for %r returned a result that is not JSON", request.method)
            return error_response(request.id, INTERNAL_ERROR, "Internal server error")
        return response

    def _refusal(self, message: object) -> dict[str, Any] | None:
        """The binding's answer when the SDK is not asked, else None."""
        served = self.supported
        problem = mcp.check_request(message, supported=served)
        if problem is not None and problem["error"]["code"] == INVALID_REQUEST:
            return problem
        assert isinstance(message, Mapping)
        try:
            JSONRPCRequest.model_validate(message)
        except ValidationError:  # pragma: no cover - check_request refuses these first
            return error_response(None, INVALID_REQUEST, "Invalid Request")
        if message["method"] == "initialize":
            # Over HTTP the SDK routes initialize to its handshake transport, which
            # the binding does not carry: its modern connection's -32022 instead.
            return problem
        if problem is not None:
            # A malformed envelope (-32602) or an unserved revision (-32022): the SDK's
            # ladder answers it itself, with the same error check_request gives.
            return None
        if message["method"] in NOT_SERVED:
            return error_response(
                message["id"],
                METHOD_NOT_FOUND,
                f"Method not found: {message['method']} is an open-ended stream,"
                " not served over SimpleX",
            )
        return None

    async def chat_handler(
        self, request: str | Mapping[str, Any], *, send: ReplySink | None = None
    ) -> str:
        """The text of the last reply to ``/_call mcp <request>``.

        ``request`` is the request's JSON text (the part after ``/_call mcp``)
        or the parsed object (``chat.parse_call(text).request``). Text that is
        not strict JSON gets ``-32700``. Notifications the server sends for
        the request (``notifications/progress`` with a progress token, log
        messages the request opted into) are passed to ``send`` as reply texts
        before the answer; one that does not fit a message is dropped. The
        answer is sized for one message: ``-32603`` when it does not fit.
        """
        message: object = request
        if isinstance(request, str):
            try:
                message = _json.loads(request)
            except _json.JsonError as exc:
                return mcp.chat_reply(error_response(None, PARSE_ERROR, f"Parse error: {exc}"))

        async def forward(note: dict[str, Any]) -> None:
            if send is None:
                return
            try:
                text = dumps_text(note, "mcp notification")
            except BindingError:
                return
            if fits_message(text):
                await send(text)
            else:
                logger.info("dropped %s: it does not fit one chat message", note.get("method"))

        return mcp.chat_reply(await self.handle(message, on_notification=forward))

    async def rpc_handler(self, service_request: ServiceRequestLike) -> Response:
        """The response envelope for a Service RPC request (the adapter's handler).

        ``service_request`` is the adapter's ``ServiceRequest`` (its
        ``.request`` is the envelope) or a bare ``Request``. The envelope
        error is ``unsupported_protocol`` for another protocol,
        ``bad_request`` when the envelope has a ``version`` (the binding omits
        it), ``conversation_required`` for a call of a marked tool, and
        ``too_large`` for a response over the limit.
        """
        envelope = envelope_of(service_request)
        refused = refuse_envelope(envelope, mcp.PROTOCOL, "the revision is in _meta")
        if refused is not None:
            return refused
        message = envelope.request
        if isinstance(message, Mapping):
            refused = mcp.rpc_disposition(message, conversation_tools=self.conversation_tools)
            if refused is not None:
                return refused
        return mcp.rpc_response(await self.handle(message), limit=self.rpc_limit)

    def handle_sync(self, message: object) -> dict[str, Any]:
        """:meth:`handle` from synchronous code (not inside a running event loop)."""
        return anyio.run(self._handle_once, message)

    def chat_handler_sync(self, request: str | Mapping[str, Any]) -> str:
        """:meth:`chat_handler` from synchronous code, without notifications."""
        return anyio.run(self._chat_once, request)

    async def _handle_once(self, message: object) -> dict[str, Any]:
        return await self.handle(message)

    async def _chat_once(self, request: str | Mapping[str, Any]) -> str:
        return await self.chat_handler(request)

"""SimplexTransport: an ``mcp`` SDK client transport that reaches a bot over SimpleX.

The SDK's client (``mcp.Client``, ``ClientSession``) talks to a transport
through two memory streams of ``SessionMessage``: it writes JSON-RPC messages
and reads the answers. This transport answers each JSON-RPC request with one
round trip to the bot and writes the bot's JSON-RPC response back, as the
SDK's own streamable HTTP client does for a 2026-07-28 server (one POST per
request). The SDK does everything else: ``server/discover`` and its revision
handling, the ``_meta`` envelope, ``input_required`` retries, caching.

Each request is one round trip of the adapter (``adapter._client.RoundTrip``,
shared with the A2A transport), by the transport chosen once (``via``):

* ``rpc``: one Service RPC request per JSON-RPC request (protocol text,
  "MCP binding": over Service RPC the request is the envelope's ``request``
  and the answer its ``response``), signed with ``sign_key`` when given and
  naming its public key in ``requestKey``.
* ``chat``: ``/_call mcp <request>`` in a conversation (a ChatRef,
  ``ChatCore.call_stream``). The bot's notifications for the request
  (progress, log messages) are replies before the answer; they reach the SDK
  as notifications, and the reply with the JSON-RPC response ends the call.
* ``auto``: the address's declarations (``ChatCore.link_declarations``),
  read once when the transport starts: ``rpc`` when ``mcp`` declares
  ``transports.rpc``, otherwise a clear error.

Each failure the round trip classifies (``Failure``) becomes a JSON-RPC error
for that request, which the SDK raises as ``MCPError``. Envelope errors (the
request was not passed to the server) have the code :data:`SERVICE_RPC_ERROR`,
a message that starts with the envelope code and the envelope's error in
``data``; no answer in time and an address the core cannot reach are the
SDK's own ``REQUEST_TIMEOUT`` and ``CONNECTION_CLOSED``; a call refused before
sending is ``-32600``; an answer that is not a response to the request
``-32603``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from types import TracebackType
from typing import Any, Final, Unpack

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from .._bindings import INTERNAL_ERROR, INVALID_REQUEST, error_response, mcp
from .._wire.envelope import ErrorCode, ErrorInfo
from .._wire.redact import RedactingLogger, redact
from ..adapter import ChatCore
from ..adapter._client import (
    VIAS,
    CallOptions,
    Failure,
    RoundTrip,
    RoundTripError,
    Via,
    check_seconds,
    describe_error,
    is_notification,
)
from ..errors import SimplexRpcError

# What the transport yields to the SDK: its read and write streams. The SDK names
# this pair TransportStreams in a private module (mcp.client._transport), typed with
# its own private stream protocols; the project names the concrete anyio streams it
# creates instead, which satisfy those protocols, so the public mcp.client.Transport
# accepts this class without any private import (issue 31).
TransportStreams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception],
    MemoryObjectSendStream[SessionMessage],
]

__all__ = ["CONVERSATION_HINT", "SERVICE_RPC_ERROR", "VIAS", "SimplexTransport", "Via"]

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp"))

SERVICE_RPC_ERROR: Final = -32010
"""The JSON-RPC error code of a Service RPC envelope error.

In MCP's implementation-defined band (-32000 to -32019), beside the SDK's
own -32000 and -32001. ``error.data.serviceRpcError`` is the envelope's
error object (``code``, ``message``, ``retryAfter``)."""

CONVERSATION_HINT: Final = (
    "call it in a conversation: use the chat transport: via='chat',"
    " or --via chat for mcp-proxy"
)
"""What a ``conversation_required`` error tells the caller, whether it uses
:class:`SimplexTransport` itself or ``simplex-rpc mcp-proxy``."""

Notify = Callable[[dict[str, Any]], Awaitable[None]]
"""Where the notifications the bot sends for a request, before its response, go."""

# The JSON-RPC error code of each failure of a round trip but an envelope error's.
_FAILURE_CODES: Final = {
    Failure.REFUSED: INVALID_REQUEST,
    Failure.TIMEOUT: REQUEST_TIMEOUT,
    Failure.UNDELIVERED: CONNECTION_CLOSED,
    Failure.BAD_ANSWER: INTERNAL_ERROR,
}


def envelope_error(request_id: Any, error: ErrorInfo, *, hint: str = "") -> dict[str, Any]:
    """The JSON-RPC error response that stands for an envelope error.

    The message names the envelope code first, then the bot's message and
    ``hint`` (what to do instead); ``data.serviceRpcError`` is the error.
    """
    text = describe_error(error, hint)
    return error_response(request_id, SERVICE_RPC_ERROR, text, {"serviceRpcError": error.to_dict()})


class _Validated(dict[str, Any]):
    """A bot's answer that :meth:`SimplexTransport._checked` validated, with its parsed form."""

    def __init__(self, answer: dict[str, Any], parsed: JSONRPCResponse | JSONRPCError) -> None:
        super().__init__(answer)
        self.parsed = parsed


class SimplexTransport:
    """An ``mcp`` SDK client transport to a bot at ``target``, through ``core``.

    ``mcp.Client(SimplexTransport(core, 1, link))`` and ``ClientSession``
    work unchanged. ``core`` is an open :class:`~simplex_rpc.adapter.ChatCore`
    (started); ``user_id`` the requesting user; ``target`` the bot's contact
    address link or SimpleX name.

    * ``via="rpc"``: each JSON-RPC request is one Service RPC request, signed
      with ``sign_key`` when given (``requestKey`` is then its public key). A
      tool marked for a conversation is an ``MCPError`` whose message starts
      with ``conversation_required``.
    * ``via="chat"``: ``target`` is a ChatRef (``"@5"`` a contact, ``"#7"``
      a group, with ``member`` the bot's display name to mention); each
      request is ``/_call mcp`` there. Notification replies reach the SDK as
      notifications (progress with the call's ``progress_callback``); the
      response ends the call. ``sign_key`` does not apply.
    * ``via="auto"``: ``target`` is the address link; its declarations are
      read when the transport starts, and ``rpc`` is used when ``mcp``
      declares ``transports.rpc``. Otherwise entering raises
      :class:`~simplex_rpc.errors.SimplexRpcError`.
    * ``timeout``: seconds the bot has to answer each request (the core's
      ``timeout=``, rounded up to whole seconds).
    * ``max_retry_after``: an error with ``retryAfter`` (``rate_limited``) is
      repeated after that wait, up to :data:`RETRIES` times, when the wait is
      at most this many seconds; otherwise it is the request's error.

    Notifications the client sends (``notifications/cancelled``) end the
    local wait for that request; over Service RPC nothing more can be sent.
    The private key never appears in a message, a log line or the repr.
    """

    def __init__(
        self, core: ChatCore, user_id: int, target: str, *, via: Via = "rpc",
        **options: Unpack[CallOptions],
    ) -> None:
        via_chat = via == "chat"
        # The options are the round trip's, checked there, the same for both bindings.
        self._trip = RoundTrip(
            core,
            user_id,
            mcp.PROTOCOL,
            target=None if via_chat else target,
            chat=target if via_chat else None,
            via=via,
            **options,
        )
        self.core = core
        self.user_id = user_id
        self.target = target
        self.via: Via = via
        self.timeout = self._trip.timeout
        self.max_retry_after = self._trip.max_retry_after
        self.member = self._trip.member
        self._sign_key = options.get("sign_key")
        self._cm: AbstractAsyncContextManager[TransportStreams] | None = None

    @staticmethod
    def _check_arguments(
        user_id: object,
        target: object,
        *,
        via: object,
        timeout: object,
        member: object = None,
    ) -> None:
        """Raise for arguments the constructor would refuse (before a core is open)."""
        via_chat = via == "chat"
        RoundTrip.check(
            user_id,
            target=None if via_chat else target,
            chat=target if via_chat else None,
            member=member,
            via=via,
        )
        check_seconds(timeout, "timeout")

    def __repr__(self) -> str:
        signed = "signed" if self._sign_key is not None else "unsigned"
        return f"SimplexTransport({self.target!r}, via={self.via!r}, {signed})"

    # -- the round trip ------------------------------------------------------------

    async def _round_trip(self, message: dict[str, Any], notify: Notify) -> dict[str, Any]:
        """The bot's JSON-RPC response to ``message`` (notifications to ``notify`` before
        it), or the JSON-RPC error that stands for the round trip's failure."""
        request_id = message.get("id")
        try:
            async with aclosing(self._trip.answers(message)) as answers:
                async for answer in answers:
                    if is_notification(answer):
                        await notify(answer)
                    else:
                        return self._checked(answer, request_id)
        except RoundTripError as exc:
            if exc.error is not None:
                return envelope_error(request_id, exc.error, hint=self._hint(exc.error))
            return error_response(request_id, _FAILURE_CODES[exc.kind], str(exc))
        raise AssertionError("a round trip ends with its answer or a RoundTripError")

    def _hint(self, error: ErrorInfo) -> str:
        """What the caller can do about an envelope error."""
        if error.code == ErrorCode.CONVERSATION_REQUIRED:
            return CONVERSATION_HINT
        if error.retry_after is not None:
            return (
                f"not repeated: the wait is over max_retry_after ({self.max_retry_after:g} s)"
                " or the repeats are used up"
            )
        return ""

    @staticmethod
    def _checked(answer: dict[str, Any], request_id: Any) -> dict[str, Any]:
        """The bot's response (the round trip matched its id) if it is a JSON-RPC
        response as the SDK reads it, else ``-32603``."""
        try:
            parsed = jsonrpc_message_adapter.validate_python(answer, by_name=False)
        except ValidationError:
            return error_response(
                request_id, INTERNAL_ERROR, "the bot's answer is not a JSON-RPC response"
            )
        if not isinstance(parsed, (JSONRPCResponse, JSONRPCError)):
            return error_response(
                request_id,
                INTERNAL_ERROR,
                "the bot answered with a JSON-RPC message that is not a response",
            )
        return _Validated(answer, parsed)

    # -- the streams -----------------------------------------------------------------

    async def _answer(
        self,
        request: JSONRPCRequest,
        to_client: anyio.abc.ObjectSendStream[SessionMessage | Exception],
        in_flight: dict[Any, anyio.CancelScope],
    ) -> None:
        message = request.model_dump(by_alias=True, mode="json", exclude_unset=True)

        async def notify(note: dict[str, Any]) -> None:
            try:
                parsed = jsonrpc_message_adapter.validate_python(note, by_name=False)
            except ValidationError:
                log.info("dropped a notification from the bot that is not JSON-RPC")
                return
            if isinstance(parsed, JSONRPCNotification):
                await to_client.send(SessionMessage(parsed))

        scope = anyio.CancelScope()
        in_flight[request.id] = scope
        answer: dict[str, Any] | None = None
        try:
            with scope:
                try:
                    answer = await self._round_trip(message, notify)
                except SimplexRpcError as exc:
                    # The library refused something on the way (an answer of the core it
                    # cannot use): this request fails, the transport stays up.
                    answer = error_response(
                        request.id, INTERNAL_ERROR, redact(f"not delivered: {exc}")[:500]
                    )
                except Exception:
                    log.exception("the round trip of a request failed")
                    answer = error_response(
                        request.id, INTERNAL_ERROR, "not delivered: the transport failed"
                    )
        finally:
            if in_flight.get(request.id) is scope:
                del in_flight[request.id]
        if answer is None:
            return  # cancelled by the client: it waits for nothing
        # An answer _checked validated is not validated again (one pydantic pass per answer).
        reply = (
            answer.parsed
            if isinstance(answer, _Validated)
            else jsonrpc_message_adapter.validate_python(answer, by_name=False)
        )
        try:
            await to_client.send(SessionMessage(reply))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.debug("the client closed before the answer to %r arrived", request.id)

    async def _pump(
        self,
        from_client: anyio.abc.ObjectReceiveStream[SessionMessage],
        to_client: anyio.abc.ObjectSendStream[SessionMessage | Exception],
        tg: anyio.abc.TaskGroup,
    ) -> None:
        in_flight: dict[Any, anyio.CancelScope] = {}
        async with from_client:
            async for item in from_client:
                message = item.message
                if isinstance(message, JSONRPCRequest):
                    tg.start_soon(self._answer, message, to_client, in_flight)
                elif isinstance(message, JSONRPCNotification):
                    if message.method == "notifications/cancelled":
                        params = message.params or {}
                        scope = in_flight.get(params.get("requestId"))
                        if scope is not None:
                            scope.cancel()
                    else:
                        log.debug("client notification %s not sent", message.method[:64])
                else:
                    # Over SimpleX a 2026-07-28 server sends no requests, so there
                    # is nothing a client response could answer.
                    log.debug("client response dropped: the bot sent no request")

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[TransportStreams]:
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        client_writes, from_client = anyio.create_memory_object_stream[SessionMessage](64)
        async with anyio.create_task_group() as tg, to_client, client_reads, client_writes:
            tg.start_soon(self._pump, from_client, to_client, tg)
            try:
                yield client_reads, client_writes
            finally:
                tg.cancel_scope.cancel()

    async def __aenter__(self) -> TransportStreams:
        """Start the transport; return the SDK's read and write streams.

        With ``via="auto"``, the address's declarations are read first.
        """
        if self._cm is not None:
            raise RuntimeError("SimplexTransport: already entered")
        if self.via == "auto":
            await self._trip.choose()
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the transport; requests still waiting are abandoned."""
        cm, self._cm = self._cm, None
        if cm is not None:
            await cm.__aexit__(exc_type, exc, tb)

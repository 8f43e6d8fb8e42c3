"""SimplexTransport: an ``mcp`` SDK client transport that reaches a bot over SimpleX.

The SDK's client (``mcp.Client``, ``ClientSession``) talks to a transport
through two memory streams of ``SessionMessage``: it writes JSON-RPC messages
and reads the answers. This transport answers each JSON-RPC request with one
round trip to the bot and writes the bot's JSON-RPC response back, as the
SDK's own streamable HTTP client does for a 2026-07-28 server (one POST per
request). The SDK does everything else: ``server/discover`` and its revision
handling, the ``_meta`` envelope, ``input_required`` retries, caching.

A round trip is one function, chosen once per transport (``via``):

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

Envelope errors (the request was not passed to the server) become JSON-RPC
errors with the code :data:`SERVICE_RPC_ERROR`, whose message starts with the
envelope code and whose ``data`` holds the envelope's error; the SDK raises
them as ``MCPError``. Failures of the chat core (no answer in time, an
address it cannot reach) become the SDK's own ``REQUEST_TIMEOUT`` and
``CONNECTION_CLOSED`` errors for that request.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Final, Literal

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
from .._wire.envelope import ErrorCode, ErrorInfo, Request
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, redact
from ..adapter import CallRefused, ChatCore, ChatCoreTimeout
from ..adapter._chat import check_chat_ref
from ..adapter._client import (
    DEFAULT_MAX_RETRY_AFTER,
    RETRIES,
    check_destination,
    check_seconds,
    describe_error,
)
from ..errors import ChatCoreError, SimplexRpcError

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

Via = Literal["rpc", "chat", "auto"]
"""The transports a request can go by (``auto``: chosen from the address's declarations)."""

VIAS: Final[tuple[Via, ...]] = ("rpc", "chat", "auto")
"""The transports a request can go by (``auto``: chosen from the address's declarations)."""

CONVERSATION_HINT: Final = (
    "call it in a conversation: use the chat transport: via='chat',"
    " or --via chat for mcp-proxy"
)
"""What a ``conversation_required`` error tells the caller, whether it uses
:class:`SimplexTransport` itself or ``simplex-rpc mcp-proxy``."""

Notify = Callable[[dict[str, Any]], Awaitable[None]]
RoundTrip = Callable[[dict[str, Any], Notify], Awaitable[dict[str, Any]]]
"""One request to the bot: the JSON-RPC request in, its JSON-RPC response out.
Notifications the bot sends for the request before the response go to the
``Notify`` callable."""


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
        self,
        core: ChatCore,
        user_id: int,
        target: str,
        *,
        via: Via = "rpc",
        sign_key: SigningKey | None = None,
        timeout: float = 30.0,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        member: str | None = None,
    ) -> None:
        if not isinstance(core, ChatCore):
            raise TypeError(f"core: expected a ChatCore, got {type(core).__name__}")
        self._check_arguments(user_id, target, via=via, timeout=timeout, member=member)
        if sign_key is not None and not isinstance(sign_key, SigningKey):
            raise TypeError(f"sign_key: expected a SigningKey, got {type(sign_key).__name__}")
        self.core = core
        self.user_id = user_id
        self.target = target
        self.via: Via = via
        self.timeout = float(timeout)
        self.max_retry_after = check_seconds(max_retry_after, "max_retry_after")
        self.member = member
        self._sign_key = sign_key
        self._round_trip: RoundTrip = (
            self._chat_round_trip if via == "chat" else self._rpc_round_trip
        )
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
        check_destination(user_id, target)
        if via not in VIAS:
            raise SimplexRpcError(f"via: {str(via)[:32]!r} is not one of {', '.join(VIAS)}")
        if via == "chat":
            target = check_chat_ref(target, "target: via='chat' calls in a conversation")
            if member is not None and (not isinstance(member, str) or not member):
                raise SimplexRpcError("member: expected a member's display name")
            if member is not None and target.startswith("@"):
                raise SimplexRpcError("member: a direct chat has no members to mention")
        elif member is not None:
            raise SimplexRpcError("member: only for via='chat' in a group")
        else:
            try:
                check_chat_ref(target, "target")
            except SimplexRpcError:
                pass  # not a ChatRef: a link or a name, as check_destination took it
            else:
                raise SimplexRpcError(
                    f"target: {target} is a ChatRef: use via='chat', or the address link for"
                    f" via={via!r}"
                )
        check_seconds(timeout, "timeout")

    def __repr__(self) -> str:
        signed = "signed" if self._sign_key is not None else "unsigned"
        return f"SimplexTransport({self.target!r}, via={self.via!r}, {signed})"

    # -- the round trips -----------------------------------------------------------

    async def _rpc_round_trip(self, message: dict[str, Any], notify: Notify) -> dict[str, Any]:
        """One Service RPC request; its response, or the JSON-RPC error that stands for it."""
        request_id = message.get("id")
        key = self._sign_key
        envelope = Request(
            protocol=mcp.PROTOCOL,
            request=message,
            request_key=key.public_key if key is not None else None,
        )
        response = await self.core.service_request(
            self.user_id,
            self.target,
            envelope,
            timeout=math.ceil(self.timeout),
            sign_key=key,
            retries=RETRIES,
            max_retry_after=self.max_retry_after,
        )
        error = response.error
        if error is None:
            return self._checked(response.response, request_id)
        hint = ""
        if error.code == ErrorCode.CONVERSATION_REQUIRED:
            hint = CONVERSATION_HINT
        elif error.retry_after is not None:
            hint = (
                f"not repeated: the wait is over max_retry_after ({self.max_retry_after:g} s)"
                " or the repeats are used up"
            )
        return envelope_error(request_id, error, hint=hint)

    async def _chat_round_trip(self, message: dict[str, Any], notify: Notify) -> dict[str, Any]:
        """``/_call mcp`` in the chat: notifications as they come, then the response."""
        request_id = message.get("id")
        try:
            replies = self.core.call_stream(
                self.target,
                mcp.PROTOCOL,
                message,
                member=self.member,
                wait=self.timeout,
                user_id=self.user_id,
            )
            async for reply in replies:
                body = reply.message
                if body is None:
                    continue  # a text reply, not a message of the binding
                if "id" not in body and isinstance(body.get("method"), str):
                    await notify(body)
                elif body.get("id") == request_id or reply.ends:
                    return self._checked(body, request_id)
        except CallRefused as exc:
            return error_response(request_id, INVALID_REQUEST, f"not sent: {exc}")
        return error_response(
            request_id,
            REQUEST_TIMEOUT,
            f"no answer in {self.target} within {self.timeout:g} seconds",
        )

    async def _choose(self) -> None:
        """``via="auto"``: the round trip the address's declarations allow."""
        declared = await self.core.link_declarations(self.user_id, self.target)
        entry = declared.protocols.get(mcp.PROTOCOL)
        transports = entry.transports if entry is not None else ()
        if "rpc" in transports:
            self._round_trip = self._rpc_round_trip
            return
        if entry is None:
            what = "does not declare mcp"
        else:
            what = f"declares mcp over {', '.join(transports) or 'no transport'} only"
        raise SimplexRpcError(
            f"via='auto': the address {what}, not over Service RPC (transports.rpc);"
            " connect to it and call with via='chat' and the contact's ChatRef"
        )

    @staticmethod
    def _checked(answer: object, request_id: Any) -> dict[str, Any]:
        """The bot's answer if it is a JSON-RPC response to this request, else -32603."""
        problem: str | None = None
        if not isinstance(answer, dict):
            problem = "the bot's answer is not a JSON-RPC response object"
        else:
            try:
                parsed = jsonrpc_message_adapter.validate_python(answer, by_name=False)
            except ValidationError:
                problem = "the bot's answer is not a JSON-RPC response"
            else:
                if not isinstance(parsed, (JSONRPCResponse, JSONRPCError)):
                    problem = "the bot answered with a JSON-RPC message that is not a response"
                elif isinstance(parsed, JSONRPCError) and parsed.id is None:
                    # JSON-RPC 2.0 allows a null id on an error the server could not tie
                    # to a request (a parse error). A round trip carries exactly one
                    # request, so the error is this request's: keep its code and message.
                    return {**answer, "id": request_id}
                elif parsed.id != request_id:
                    problem = "the bot's response has another request's id"
        if problem is not None:
            return error_response(request_id, INTERNAL_ERROR, problem)
        assert isinstance(answer, dict)
        assert isinstance(parsed, (JSONRPCResponse, JSONRPCError))
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
                except ChatCoreTimeout as exc:
                    answer = error_response(request.id, REQUEST_TIMEOUT, redact(str(exc)))
                except ChatCoreError as exc:
                    answer = error_response(
                        request.id,
                        CONNECTION_CLOSED,
                        redact(f"the chat core could not deliver the request: {exc}"),
                    )
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
            await self._choose()
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

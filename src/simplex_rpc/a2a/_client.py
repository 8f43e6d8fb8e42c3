"""An a2a-sdk client transport to a bot over SimpleX, registered in ``ClientFactory``.

An Agent Card lists a SimpleX interface in ``supportedInterfaces``: ``url``
the bot's contact address link, ``protocolBinding`` the binding URI
(``https://simplex.chat/protocol/a2a/v1``) and ``protocolVersion`` the A2A
version (protocol text, "A2A binding", Identification). :func:`register_client`
registers a transport producer for that URI, so that a client created from
such a card talks to the bot through the chat core.

The transport builds the requests of the A2A JSON-RPC binding, as the SDK's
own ``JsonRpcTransport`` does, with the service parameters in the member
``a2a-service-parameters``, always with ``A2A-Version`` ("Every request MUST
carry A2A-Version"). Each request is one round trip of the adapter
(``adapter._client.RoundTrip``, shared with the MCP transport), over one of:

* over Service RPC: the envelope's ``request`` and ``response``. The bot
  serves one-shot ``SendMessage`` there and answers everything else
  ``conversation_required``, which is raised as :class:`ServiceRpcError`;
* in a conversation, when the transport knows the chat with the bot
  (``chats=``): ``/_call a2a`` there (``ChatCore.call_stream``), for
  streaming (``SendStreamingMessage``, ``SubscribeToTask``: each
  StreamResponse one reply, until the terminal or interrupted state) and
  follow-ups (``GetTask``, ``CancelTask``, a message with ``taskId`` or
  ``contextId``, everything Service RPC does not serve).

JSON-RPC errors of the bot raise the SDK's own error classes
(``VersionNotSupportedError``, ``TaskNotFoundError``, ...), as over HTTP. A
round trip's failure raises :class:`ServiceRpcError` for an envelope error,
``A2AClientTimeoutError`` when no answer came in time, and ``A2AClientError``
otherwise (not sent, not delivered, not an answer to the request).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final, Literal, Unpack

from a2a.client.client import ClientCallContext, ClientConfig
from a2a.client.client_factory import ClientFactory
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.base import ClientTransport
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP
from a2a.utils.proto_utils import parse_lenient
from google.protobuf import json_format  # type: ignore[import-untyped]
from google.protobuf.message import Message as ProtoMessage  # type: ignore[import-untyped]

from .._bindings import a2a
from .._wire.envelope import ErrorCode, ErrorInfo
from .._wire.keys import SigningKey
from ..adapter import ChatCore
from ..adapter._chat import check_chat_ref
from ..adapter._client import (
    DEFAULT_MAX_RETRY_AFTER,
    CallOptions,
    Failure,
    RoundTrip,
    RoundTripError,
    check_destination,
    check_seconds,
    describe_error,
    is_notification,
)
from ..errors import SimplexRpcError, _rebuild

__all__ = ["Conversation", "ServiceRpcError", "SimplexA2aTransport", "register_client"]

_ERROR_INFO_TYPE: Final = "type.googleapis.com/google.rpc.ErrorInfo"
_ERRORS: Final = {code: kind for kind, code in JSON_RPC_ERROR_CODE_MAP.items()}

Conversation = str | tuple[str, str]
"""Where a bot's conversation is: a direct chat's ChatRef (``"@5"``), or a group's
ChatRef with the bot's member display name (``("#7", "bot")``)."""


def _check_chat(chat: object, where: str) -> str:
    return check_chat_ref(chat, where)


def _check_conversation(chat: object, member: object, where: str) -> tuple[str, str | None]:
    """``chat`` and ``member`` checked: a group needs the member, a direct chat has none.

    In a group a call without a mention is a broadcast, whose first matching
    answer could come from any member; naming the bot's member makes its
    answer the only one accepted.
    """
    chat = _check_chat(chat, where)
    if chat.startswith("#"):
        if member is None:
            raise SimplexRpcError(
                f"{where}: {chat} is a group: name the bot's member, ({chat!r}, '<display name>'),"
                " so that only its answer is accepted"
            )
        if not isinstance(member, str) or not member:
            raise SimplexRpcError(f"{where}: expected the bot's member display name")
        return chat, member
    if member is not None:
        raise SimplexRpcError(f"{where}: {chat} is a direct chat: it has no members to name")
    return chat, None


def _conversation(value: object, where: str) -> tuple[str, str | None]:
    """A ``chats`` value: a ChatRef, or a (group ChatRef, member display name) pair."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise SimplexRpcError(f"{where}: expected (ChatRef, member display name)")
        return _check_conversation(value[0], value[1], where)
    return _check_conversation(value, None, where)


class ServiceRpcError(A2AClientError):
    """The bot's Service RPC answer was an envelope error: the request was not served.

    ``code`` is the envelope code (``conversation_required``, ``rate_limited``,
    ...), ``retry_after`` its ``retryAfter`` or None. The message starts with
    the code.
    """

    def __init__(self, error: ErrorInfo, hint: str = "") -> None:
        super().__init__(describe_error(error, hint), data=error.to_dict())
        self.code = error.code
        self.retry_after = error.retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        # The default reduce re-calls cls(*args) with the message as ``error``; the
        # attributes travel as state instead, as for the library's own errors.
        return (_rebuild, (type(self), self.args), self.__dict__ or None)


def _jsonrpc_error(error: object) -> Exception:
    """The SDK's exception for a JSON-RPC error object, as its JSON-RPC transport raises it."""
    if not isinstance(error, dict):
        return A2AClientError("Invalid JSON-RPC response: error is not an object")
    code = error.get("code")
    message = error.get("message")
    text = message[:500] if isinstance(message, str) else "no message"
    info: dict[str, Any] | None = None
    data = error.get("data")
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and item.get("@type") == _ERROR_INFO_TYPE:
                metadata = item.get("metadata")
                info = metadata if isinstance(metadata, dict) and metadata else None
                break
    if isinstance(code, int) and code in _ERRORS:
        exc: Exception = _ERRORS[code](text, data=info)
        return exc
    return A2AClientError(f"JSON-RPC Error {code}: {text}")


def _result(response: dict[str, Any]) -> Any:
    """The ``result`` of a JSON-RPC response; its error raised as the SDK's exception."""
    if "error" in response and response["error"] is not None:
        raise _jsonrpc_error(response["error"])
    if "result" not in response:
        raise A2AClientError("Invalid JSON-RPC response: it has neither 'result' nor 'error'")
    return response["result"]


def _failure(exc: RoundTripError) -> Exception:
    """The SDK's error for a failed round trip."""
    if exc.error is not None:
        hint = ""
        if exc.error.code == ErrorCode.CONVERSATION_REQUIRED:
            hint = "Service RPC serves one-shot SendMessage; this request needs a conversation"
        return ServiceRpcError(exc.error, hint)
    if exc.kind is Failure.TIMEOUT:
        return A2AClientTimeoutError(str(exc))
    return A2AClientError(str(exc))


class SimplexA2aTransport(ClientTransport):
    """The a2a-sdk ``ClientTransport`` to the bot at ``target`` (its contact address link).

    Made by the producer :func:`register_client` registers; ``version`` is the
    A2A version of the card's SimpleX interface. A ``ClientCallContext`` may
    give ``service_parameters`` (sent in ``a2a-service-parameters``; its
    ``A2A-Version``, if any, replaces ``version``) and ``timeout``. ``chat``
    is the ChatRef of a conversation with the bot: requests Service RPC does
    not serve go there as ``/_call a2a``; without it they go over Service
    RPC and raise ``conversation_required``. In a group (``"#7"``), ``member``
    is the bot's display name, required: the call mentions it and only its
    answer is accepted. ``via="chat"`` sends every request to ``chat``, the
    one-shot ``SendMessage`` included (for a bot that serves A2A in
    conversations only); the default ``"rpc"`` sends there only what Service
    RPC does not serve.
    """

    def __init__(
        self, core: ChatCore, user_id: int, target: str, card: AgentCard, *,
        version: str = "1.0", chat: str | None = None, via: Literal["rpc", "chat"] = "rpc",
        **options: Unpack[CallOptions],
    ) -> None:
        member = options.get("member")
        self.chat: str | None = None
        self.member: str | None = None
        if chat is not None:
            self.chat, self.member = _check_conversation(chat, member, "chat")
        elif member is not None:
            raise SimplexRpcError("member: only with chat, a group's ChatRef")
        if via not in ("rpc", "chat"):
            raise SimplexRpcError(f"via: {str(via)[:32]!r} is not rpc or chat")
        if via == "chat" and self.chat is None:
            raise SimplexRpcError("via='chat': name the conversation with chat=")
        # The core, the key and the times are the round trip's to check, as for MCP.
        options["member"] = self.member  # as the conversation check wrote it
        self._trip = RoundTrip(
            core, user_id, a2a.PROTOCOL, target=target, chat=self.chat, via=via, **options
        )
        a2a.agent_card_interface(target, version)  # checks the link and the version
        self.via = via
        check_destination(user_id, target)
        self.core = core
        self.user_id = user_id
        self.target = target
        self.agent_card = card
        # The card as JSON: in a group the chat transport refuses a request that
        # carries a parameter the card's security schemes name (a credential).
        self._card_json: dict[str, Any] = json_format.MessageToDict(card)
        self.version = version
        self.timeout = self._trip.timeout
        self.max_retry_after = self._trip.max_retry_after
        self._sign_key = options.get("sign_key")

    def __repr__(self) -> str:
        signed = "signed" if self._sign_key is not None else "unsigned"
        return f"SimplexA2aTransport({self.target!r}, version={self.version!r}, {signed})"

    # -- requests ------------------------------------------------------------------

    def _request(
        self, method: str, params: ProtoMessage, context: ClientCallContext | None
    ) -> dict[str, Any]:
        """The JSON-RPC request of the binding, with A2A-Version among its service parameters."""
        version = self.version
        parameters: dict[str, str] = {}
        given = context.service_parameters if context is not None else None
        for name, value in (given or {}).items():
            if isinstance(name, str) and name.lower() == a2a.VERSION_PARAMETER.lower():
                version = value
            else:
                parameters[name] = value
        body = json_format.MessageToDict(params)
        try:
            return a2a.make_request(
                method, body, id=str(uuid.uuid4()), version=version, parameters=parameters
            )
        except a2a.BindingError as exc:
            raise A2AClientError(f"{method}: {exc}") from None

    def _seconds(self, context: ClientCallContext | None) -> float:
        if context is not None and context.timeout is not None:
            return check_seconds(context.timeout, "context.timeout")
        return self.timeout

    def _in_chat(self, message: dict[str, Any]) -> bool:
        """Whether ``message`` goes to the conversation: every one with ``via="chat"``,
        else one Service RPC does not serve."""
        if self.chat is not None and self.via == "chat":
            return True
        return self.chat is not None and a2a.rpc_disposition(message) is not None

    async def _answers(
        self, method: str, params: ProtoMessage, context: ClientCallContext | None
    ) -> AsyncGenerator[Any]:
        """The results of the bot's responses to one request, in order.

        One over Service RPC; in the conversation each response until the
        answer ends (a stream's events). A JSON-RPC error raises the SDK's
        class for it; a round trip's failure its SDK error (:func:`_failure`).
        """
        message = self._request(method, params, context)
        try:
            async for answer in self._trip.answers(
                message,
                via="chat" if self._in_chat(message) else "rpc",
                timeout=self._seconds(context),
                agent_card=self._card_json,
            ):
                if not is_notification(answer):
                    yield _result(answer)
        except RoundTripError as exc:
            raise _failure(exc) from None

    async def _call(
        self, method: str, params: ProtoMessage, context: ClientCallContext | None
    ) -> Any:
        async with contextlib.aclosing(self._answers(method, params, context)) as results:
            async for result in results:
                return result
        raise A2AClientError(f"{method}: the round trip ended without an answer")

    async def _stream(
        self, method: str, params: ProtoMessage, context: ClientCallContext | None
    ) -> AsyncGenerator[StreamResponse]:
        # Over Service RPC the bot answers a streaming method with one envelope: its
        # error (conversation_required), raised as ServiceRpcError.
        async for result in self._answers(method, params, context):
            yield parse_lenient(result, StreamResponse())

    # -- the SDK's ClientTransport -------------------------------------------------

    async def send_message(
        self, request: SendMessageRequest, *, context: ClientCallContext | None = None
    ) -> SendMessageResponse:
        """SendMessage: over Service RPC when one-shot, as the binding serves it there."""
        result = await self._call("SendMessage", request, context)
        return parse_lenient(result, SendMessageResponse())

    async def send_message_streaming(
        self, request: SendMessageRequest, *, context: ClientCallContext | None = None
    ) -> AsyncGenerator[StreamResponse]:
        """SendStreamingMessage: every StreamResponse of the task, in order."""
        async for event in self._stream("SendStreamingMessage", request, context):
            yield event

    async def get_task(
        self, request: GetTaskRequest, *, context: ClientCallContext | None = None
    ) -> Task:
        return parse_lenient(await self._call("GetTask", request, context), Task())

    async def list_tasks(
        self, request: ListTasksRequest, *, context: ClientCallContext | None = None
    ) -> ListTasksResponse:
        result = await self._call("ListTasks", request, context)
        return parse_lenient(result, ListTasksResponse())

    async def cancel_task(
        self, request: CancelTaskRequest, *, context: ClientCallContext | None = None
    ) -> Task:
        return parse_lenient(await self._call("CancelTask", request, context), Task())

    async def create_task_push_notification_config(
        self, request: TaskPushNotificationConfig, *, context: ClientCallContext | None = None
    ) -> TaskPushNotificationConfig:
        result = await self._call("CreateTaskPushNotificationConfig", request, context)
        return parse_lenient(result, TaskPushNotificationConfig())

    async def get_task_push_notification_config(
        self,
        request: GetTaskPushNotificationConfigRequest,
        *,
        context: ClientCallContext | None = None,
    ) -> TaskPushNotificationConfig:
        result = await self._call("GetTaskPushNotificationConfig", request, context)
        return parse_lenient(result, TaskPushNotificationConfig())

    async def list_task_push_notification_configs(
        self,
        request: ListTaskPushNotificationConfigsRequest,
        *,
        context: ClientCallContext | None = None,
    ) -> ListTaskPushNotificationConfigsResponse:
        result = await self._call("ListTaskPushNotificationConfigs", request, context)
        return parse_lenient(result, ListTaskPushNotificationConfigsResponse())

    async def delete_task_push_notification_config(
        self,
        request: DeleteTaskPushNotificationConfigRequest,
        *,
        context: ClientCallContext | None = None,
    ) -> None:
        await self._call("DeleteTaskPushNotificationConfig", request, context)

    async def subscribe(
        self, request: SubscribeToTaskRequest, *, context: ClientCallContext | None = None
    ) -> AsyncGenerator[StreamResponse]:
        """SubscribeToTask: the task's StreamResponses from now on."""
        async for event in self._stream("SubscribeToTask", request, context):
            yield event

    async def get_extended_agent_card(
        self, request: GetExtendedAgentCardRequest, *, context: ClientCallContext | None = None
    ) -> AgentCard:
        """The card the client was made from, unless it declares an extended card."""
        if not self.agent_card.capabilities.extended_agent_card:
            return self.agent_card
        result = await self._call("GetExtendedAgentCard", request, context)
        if not isinstance(result, dict):
            raise A2AClientError("GetExtendedAgentCard: the result is not an Agent Card")
        return parse_lenient(result, AgentCard())

    async def close(self) -> None:
        """Nothing to close: the chat core belongs to the caller."""


def register_client(
    factory_or_config: ClientFactory | ClientConfig,
    core: ChatCore,
    user_id: int,
    *,
    sign_key: SigningKey | None = None,
    timeout: float = 30.0,
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
    chats: Mapping[str, Conversation] | None = None,
) -> ClientFactory:
    """Register the SimpleX transport for :data:`a2a.BINDING_URI`; return the factory.

    ``factory_or_config`` is a ``ClientFactory`` or the ``ClientConfig`` to
    make one from. The binding URI is added to the config's
    ``supported_protocol_bindings`` (after JSON-RPC when the list was empty,
    which means JSON-RPC only), so that ``factory.create(card)`` picks the
    SimpleX interface of a card as the card's order of interfaces says.
    Requests go through ``core`` as ``user_id``, signed with ``sign_key``
    when given; ``timeout`` is the seconds the bot has for each request,
    ``max_retry_after`` the longest ``retryAfter`` waited for. ``chats`` maps
    a bot's contact address link (the interface's ``url``) to the
    conversation with it: the ChatRef of a direct chat (``"@5"``), or a
    group's ChatRef with the bot's member display name (``("#7", "bot")``;
    a group without the member is refused, as any member could answer a
    broadcast). Streaming and follow-ups to that bot go there as
    ``/_call a2a``.
    """
    if isinstance(factory_or_config, ClientFactory):
        factory = factory_or_config
        # ClientFactory keeps its config private; the bindings list is what create() reads.
        config = getattr(factory, "_config", None)
    elif isinstance(factory_or_config, ClientConfig):
        config = factory_or_config
        factory = None
    else:
        raise TypeError(
            "factory_or_config: expected an a2a-sdk ClientFactory or ClientConfig,"
            f" got {type(factory_or_config).__name__}"
        )
    if not isinstance(core, ChatCore):
        raise TypeError(f"core: expected a ChatCore, got {type(core).__name__}")
    if sign_key is not None and not isinstance(sign_key, SigningKey):
        raise TypeError(f"sign_key: expected a SigningKey, got {type(sign_key).__name__}")
    check_destination(user_id, "probe")
    check_seconds(timeout, "timeout")
    check_seconds(max_retry_after, "max_retry_after")
    if isinstance(chats, str) or (chats is not None and not isinstance(chats, Mapping)):
        raise TypeError("chats: expected a mapping of address links to ChatRefs")
    conversations = {
        str(link): _conversation(chat, f"chats[{str(link)[:64]!r}]")
        for link, chat in (chats or {}).items()
    }
    if isinstance(config, ClientConfig):
        bindings = config.supported_protocol_bindings
        if a2a.BINDING_URI not in bindings:
            if not bindings:
                bindings.append(TransportProtocol.JSONRPC)
            bindings.append(a2a.BINDING_URI)
    if factory is None:
        assert isinstance(config, ClientConfig)
        factory = ClientFactory(config)

    def produce(card: AgentCard, url: str, config: ClientConfig) -> ClientTransport:
        version = "1.0"
        for interface in card.supported_interfaces:
            if interface.protocol_binding == a2a.BINDING_URI and interface.url == url:
                version = interface.protocol_version or version
                break
        chat, member = conversations.get(url, (None, None))
        return SimplexA2aTransport(
            core,
            user_id,
            url,
            card,
            version=version,
            sign_key=sign_key,
            timeout=timeout,
            max_retry_after=max_retry_after,
            chat=chat,
            member=member,
        )

    factory.register(a2a.BINDING_URI, produce)
    return factory

"""Forwarding an A2A request handler to an a2a-sdk client transport: the A2A gateway.

A gateway is an SDK *client* of the upstream behind our bridge (the house
style's "transports turned around"). :class:`ForwardingHandler` is an
a2a-sdk ``RequestHandler`` whose every method is one call of an a2a-sdk
``ClientTransport``. It serves both directions of issue 18:

* ``simplex-rpc serve --a2a-url URL``: the transport is the SDK's own
  ``JsonRpcTransport`` to the upstream's JSON-RPC interface, and the handler
  sits behind :class:`A2aBridge`, which brings the binding's rules (the
  request checks, the ``A2A-Version`` check against the upstream's versions,
  ``conversation_required`` over Service RPC, the end of a stream at a
  terminal or interrupted state, the size rules and the Service RPC
  deadline). The bridge turns ``a2a-service-parameters`` into the headers of
  its in-memory request; this handler sends them to the upstream as HTTP
  headers, so the member never reaches it (protocol text: "A proxy to an
  HTTP interface sends each service parameter as an HTTP header and removes
  the member from the request").
* ``simplex-rpc a2a-proxy``: the transport is :class:`SimplexA2aTransport`
  (``register_client``), the handler sits behind the SDK's own Starlette
  routes (``a2a._proxy``).

Callers (gateway only, ``scoped=True``): the upstream sees one client, the
gateway, so it cannot tell SimpleX callers apart; the gateway keeps which
caller made each task and context (:class:`a2a.CallerStore`) and answers a
request that names another caller's task or context as for an unknown task.
"""

from __future__ import annotations

import contextlib
import logging
import re
import urllib.parse
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Final, TypeVar

import httpx
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.client import ClientCallContext
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.tenant_decorator import TenantTransportDecorator
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.errors import (
    A2AError,
    InternalError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format  # type: ignore[import-untyped]

from .._bindings import a2a as binding
from .._wire.redact import RedactingLogger, redact
from ..errors import SimplexRpcError
from ._bridge import DEFAULT_RPC_DEADLINE, A2aBridge, SimplexCaller

__all__ = [
    "DEFAULT_RPC_DEADLINE",
    "ForwardingHandler",
    "GatewayError",
    "card_url",
    "gateway",
    "module_bridge",
    "served_versions",
    "with_simplex_interface",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.a2a.gateway"))

# Headers that frame the HTTP request itself: the in-memory request of the bridge
# has its own content-type, and a caller's service parameter must not rewrite the
# gateway's request to the upstream (RFC 9110 section 7.6.1 and the fields httpx sets).
_FRAMING: Final = frozenset(
    {
        "accept",
        "accept-encoding",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

_T = TypeVar("_T")

ParameterPicker = Callable[[ServerCallContext], dict[str, str]]
"""Which of a request's headers go on as service parameters."""


def _unknown_task() -> TaskNotFoundError:
    # One error, whoever owns the id or whether anybody does: the answer must not
    # reveal that another caller's task or context exists.
    return TaskNotFoundError()


def _event(response: StreamResponse) -> Event:
    """The event a StreamResponse carries (the SDK's dispatcher wraps it again)."""
    kind = response.WhichOneof("payload")
    if kind is None:
        raise InternalError(message="the upstream sent an empty stream response")
    event: Event = getattr(response, kind)
    return event


class ForwardingHandler(RequestHandler):
    """An a2a-sdk ``RequestHandler`` that answers each request with one call of ``transport``.

    ``card`` is the public Agent Card, the answer to ``GetExtendedAgentCard``.
    ``parameters`` picks the service parameters from the request's context
    (its headers); they go to the transport in ``ClientCallContext``.
    With ``scoped``, each task and context belongs to the caller that made it
    through this handler (the bridge's :class:`SimplexCaller` in
    ``context.user``): a request that names one the caller was not given
    (another caller's, or one the handler never saw) is answered
    ``TaskNotFoundError``, the same answer either way, without reaching the
    transport; ``ListTasks`` lists the caller's own tasks.
    ``push`` passes the push notification methods on; otherwise they are
    answered ``PushNotificationNotSupportedError``.

    Errors of the transport that are A2A errors (``TaskNotFoundError``,
    ``VersionNotSupportedError``, ...) are raised as they are, so the SDK's
    server answers them with their own codes; a failure to reach the other
    side (a timeout, a refused connection, a Service RPC envelope error) is
    an ``InternalError`` naming it, or ``UnsupportedOperationError`` for
    ``conversation_required``, logged once. With ``remote_callers`` (the
    gateway, whose callers are strangers over SimpleX) that error names the
    kind of failure only, never a URL, host or redirect target of the way to
    the other side; the log has the details.
    """

    def __init__(
        self,
        transport: ClientTransport,
        card: AgentCard,
        *,
        parameters: ParameterPicker,
        scoped: bool,
        push: bool = False,
        what: str = "the upstream",
        remote_callers: bool = False,
    ) -> None:
        self._transport = transport
        self._remote_callers = remote_callers
        self._card = card
        self._parameters = parameters
        self._scoped = scoped
        self._push = push
        self._what = what
        self.callers = binding.CallerStore()

    def __repr__(self) -> str:
        return f"ForwardingHandler({type(self._transport).__name__}, scoped={self._scoped})"

    # -- callers ---------------------------------------------------------------------

    def _caller(self, context: ServerCallContext) -> binding.Caller:
        user = context.user
        if isinstance(user, SimplexCaller):
            return user.caller
        # Not a SimpleX caller (the handler served some other way): nobody's tasks.
        return binding.Caller(chat=f"unscoped:{uuid.uuid4()}")

    def _own_task(self, context: ServerCallContext, task_id: str) -> None:
        if self._scoped and self.callers.owner_of_task(task_id) != self._caller(context):
            raise _unknown_task()

    def _own_context(self, context: ServerCallContext, context_id: str) -> None:
        if self._scoped and context_id:
            if self.callers.owner_of_context(context_id) != self._caller(context):
                raise _unknown_task()

    def _check_message(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        """Every task and context the message names must be the caller's: its task,
        its context and the tasks it refers to (``referenceTaskIds``)."""
        message = params.message
        if message.task_id:
            self._own_task(context, message.task_id)
        self._own_context(context, message.context_id)
        for reference in message.reference_task_ids:
            self._own_task(context, reference)

    def _record(self, context: ServerCallContext, task_id: str, context_id: str) -> None:
        if not self._scoped:
            return
        caller = self._caller(context)
        if task_id:
            self.callers.add_task(caller, task_id, context_id or None)
        elif context_id:
            self.callers.add_context(caller, context_id)

    def _record_event(self, context: ServerCallContext, event: Event) -> None:
        if isinstance(event, Task):
            self._record(context, event.id, event.context_id)
        elif isinstance(event, Message):
            self._record(context, event.task_id, event.context_id)
        else:  # TaskStatusUpdateEvent, TaskArtifactUpdateEvent
            self._record(context, event.task_id, event.context_id)

    # -- calls -----------------------------------------------------------------------

    def _call_context(self, context: ServerCallContext) -> ClientCallContext:
        return ClientCallContext(service_parameters=self._parameters(context))

    def _failure(self, exc: BaseException) -> A2AError:
        """The A2A error that answers a failure of the way to the other side.

        For remote callers the answer names the kind of failure (and an HTTP
        status), never a URL, a host or a redirect target of the way to the
        upstream; the log line, for the operator, has the details (redacted).
        """
        if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
            return exc  # an A2A error of the other side: answered with its own code
        code = getattr(exc, "code", None)  # a Service RPC envelope error (ServiceRpcError)
        if code == "conversation_required":
            return UnsupportedOperationError(message=redact(str(exc))[:500])
        detail = ""
        if code is not None:
            reason = f"{self._what} did not serve the request: {redact(str(exc))[:300]}"
        elif isinstance(exc, A2AClientTimeoutError):
            reason = f"{self._what} did not answer in time"
        elif isinstance(exc, A2AClientError) and not self._remote_callers:
            reason = f"{self._what} could not be reached: {redact(str(exc))[:300]}"
        elif isinstance(exc, A2AClientError):
            status = _HTTP_STATUS.search(str(exc))
            reason = f"{self._what} could not be reached" + (
                f" (HTTP {status.group(1)})" if status else ""
            )
            detail = f": {_reason(exc)}"
        else:
            reason = f"{self._what} failed ({type(exc).__name__})"
        log.warning("%s%s", reason, detail)
        return InternalError(message=reason)

    async def _unary(self, call: Callable[..., Awaitable[_T]], context: ServerCallContext) -> _T:
        """``call(context=...)`` with the caller's service parameters; failures mapped."""
        try:
            return await call(context=self._call_context(context))
        except Exception as exc:
            raise self._failure(exc) from None

    async def _stream(
        self, stream: AsyncGenerator[StreamResponse], context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        try:
            async for response in stream:
                event = _event(response)
                self._record_event(context, event)
                yield event
        except Exception as exc:
            raise self._failure(exc) from None
        finally:
            await stream.aclose()

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        self._check_message(params, context)
        result = await self._unary(
            lambda context: self._transport.send_message(params, context=context), context
        )
        if result.HasField("task"):
            self._record(context, result.task.id, result.task.context_id)
            task: Task = result.task
            return task
        if result.HasField("message"):
            self._record(context, result.message.task_id, result.message.context_id)
            message: Message = result.message
            return message
        raise InternalError(message=f"{self._what} answered neither a task nor a message")

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        self._check_message(params, context)
        stream = self._transport.send_message_streaming(params, context=self._call_context(context))
        async for event in self._stream(stream, context):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        self._own_task(context, params.id)
        stream = self._transport.subscribe(params, context=self._call_context(context))
        async for event in self._stream(stream, context):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        self._own_task(context, params.id)
        task: Task = await self._unary(
            lambda context: self._transport.get_task(params, context=context), context
        )
        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        self._own_task(context, params.id)
        task: Task = await self._unary(
            lambda context: self._transport.cancel_task(params, context=context), context
        )
        return task

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        self._own_context(context, params.context_id)
        result: ListTasksResponse = await self._unary(
            lambda context: self._transport.list_tasks(params, context=context), context
        )
        if not self._scoped:
            return result
        # The upstream lists every task it has; a caller sees its own. A page can hold
        # fewer tasks than pageSize: the next page token is the upstream's.
        caller = self._caller(context)
        mine = [t for t in result.tasks if self.callers.owner_of_task(t.id) == caller]
        out = ListTasksResponse(next_page_token=result.next_page_token, page_size=result.page_size)
        out.tasks.extend(mine)
        out.total_size = len(mine)
        return out

    def _no_push(self) -> None:
        if not self._push:
            # Protocol text: "A conversation delivers every update of a task to the
            # caller, so push notification configurations are not used."
            raise PushNotificationNotSupportedError()

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._no_push()
        result: TaskPushNotificationConfig = await self._unary(
            lambda context: self._transport.create_task_push_notification_config(
                params, context=context
            ),
            context,
        )
        return result

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._no_push()
        result: TaskPushNotificationConfig = await self._unary(
            lambda context: self._transport.get_task_push_notification_config(
                params, context=context
            ),
            context,
        )
        return result

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        self._no_push()
        result: ListTaskPushNotificationConfigsResponse = await self._unary(
            lambda context: self._transport.list_task_push_notification_configs(
                params, context=context
            ),
            context,
        )
        return result

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        self._no_push()
        await self._unary(
            lambda context: self._transport.delete_task_push_notification_config(
                params, context=context
            ),
            context,
        )

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        # The public card: a SimpleX caller carries no credential the gateway verifies.
        return self._card


# -- the upstream: its card, its versions, its JSON-RPC interface -----------------------------


class GatewayError(SimplexRpcError):
    """The upstream agent cannot be fronted: its card is unreadable or serves no JSON-RPC 1.x."""


def _shown(url: str) -> str:
    """``url`` for a message: scheme, host and path; no credentials, no query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        host = f"{host}:{port}"
    return f"{parts.scheme}://{host}{parts.path}"


def _origin(url: str) -> tuple[str, str, int | None]:
    """The origin of ``url`` (RFC 6454): scheme, host and port, the default port made
    explicit; where the operator's credential may go."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # no origin matches a URL whose port is not a number
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def card_url(url: str) -> tuple[str, str]:
    """The base URL and the card path for ``--a2a-url``: the URL itself when its
    path ends in ``.json``, else the well-known URI under it (A2A section 8.2)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GatewayError(f"--a2a-url: {_shown(url)[:200]!r} is not an http or https URL")
    if parts.path.endswith(".json"):
        return url, "/"  # A2ACardResolver: "Use '/' for an empty path"
    return url, AGENT_CARD_WELL_KNOWN_PATH


def _jsonrpc_interfaces(card: AgentCard) -> list[tuple[AgentInterface, str]]:
    """The card's JSON-RPC interfaces of A2A 1.x, with their versions in Major.Minor."""
    out: list[tuple[AgentInterface, str]] = []
    for interface in card.supported_interfaces:
        if interface.protocol_binding != TransportProtocol.JSONRPC:
            continue
        version = binding._major_minor(interface.protocol_version or "1.0")
        # The binding is of A2A 1.0 and the SDK's JSON-RPC server serves 1.x.
        if version is not None and version.split(".")[0] == "1":
            out.append((interface, version))
    return out


def served_versions(card: AgentCard) -> tuple[str, ...]:
    """The A2A versions (Major.Minor) the upstream serves over JSON-RPC, in the card's order."""
    return tuple(dict.fromkeys(version for _, version in _jsonrpc_interfaces(card)))


def with_simplex_interface(card: AgentCard, link: str, versions: Iterable[str]) -> AgentCard:
    """A copy of ``card`` with the SimpleX interface first (``agent_card_interface``).

    Push notifications are off (the bot answers them
    PushNotificationNotSupportedError), and so is the extended card (the bot
    answers GetExtendedAgentCard with this public card).
    """
    out = AgentCard()
    out.CopyFrom(card)
    simplex = [
        json_format.ParseDict(binding.agent_card_interface(link, v), AgentInterface())
        for v in versions
    ]
    others = [i for i in card.supported_interfaces if i.protocol_binding != binding.BINDING_URI]
    del out.supported_interfaces[:]
    out.supported_interfaces.extend([*simplex, *others])
    out.capabilities.push_notifications = False
    out.capabilities.extended_agent_card = False
    return out


def _service_parameters(operator: frozenset[str]) -> ParameterPicker:
    """The caller's service parameters: the bridge's request headers, less HTTP framing
    and less the names the operator set with --header (those are the operator's)."""

    def pick(context: ServerCallContext) -> dict[str, str]:
        headers = context.state.get("headers")
        if not isinstance(headers, Mapping):
            return {}
        return {
            str(name): str(value)
            for name, value in headers.items()
            if str(name).lower() not in _FRAMING and str(name).lower() not in operator
        }

    return pick


@contextlib.asynccontextmanager
async def gateway(
    url: str,
    link: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    rpc_deadline: float | None = DEFAULT_RPC_DEADLINE,
    connect_timeout: float = 10.0,
    follow_card_url: bool = False,
) -> AsyncIterator[A2aBridge]:
    """An :class:`A2aBridge` in front of the A2A agent at ``url`` (its JSON-RPC binding).

    The card is read from ``url`` (a ``.json`` URL) or from its well-known URI;
    ``link`` is the bot's contact address link, for the SimpleX interface.
    ``headers`` (the operator's credential) go with every request to the origin
    of ``url`` (scheme, host and port), the card's included, and to no other:
    they reach no log. When the card puts its JSON-RPC interface at another
    origin and ``headers`` are given, the gateway refuses to start
    (:class:`GatewayError`) unless ``follow_card_url``, which uses that
    interface without them; either way the choice is logged. Raises
    :class:`GatewayError` when the card cannot be read or lists no JSON-RPC
    interface of A2A 1.x.
    """
    base, path = card_url(url)
    for name, value in headers:
        binding.ServiceParameters({name: value})  # a header field the upstream can take
    origin = _origin(url)
    credential = [(name, value) for name, value in headers]

    async def add_credential(request: httpx.Request) -> None:
        # Every request, redirects included, is checked: the credential is for one origin.
        if credential and _origin(str(request.url)) == origin:
            for name, value in credential:
                request.headers[name] = value

    # No read timeout: a task may take its time; the bridge's and the adapter's
    # deadlines end a request that takes too long.
    timeout = httpx.Timeout(connect_timeout, read=None)
    async with httpx.AsyncClient(
        timeout=timeout, event_hooks={"request": [add_credential]}
    ) as http:
        try:
            card = await A2ACardResolver(http, base, path).get_agent_card()
        except A2AClientError as exc:
            where = _shown(base if path == "/" else base.rstrip("/") + path)
            raise GatewayError(
                f"--a2a-url: could not read the agent card at {where}: {_reason(exc)}"
            ) from None
        interfaces = _jsonrpc_interfaces(card)
        if not interfaces:
            listed = ", ".join(
                f"{i.protocol_binding} {i.protocol_version}".strip()
                for i in card.supported_interfaces
            )
            raise GatewayError(
                "--a2a-url: the agent card lists no JSON-RPC interface of A2A 1.x"
                f" (it lists {listed[:200] or 'none'}); the binding is of A2A 1.0"
            )
        interface = interfaces[0][0]
        if _origin(interface.url) != origin:
            where = _shown(interface.url)[:200]
            if credential and not follow_card_url:
                raise GatewayError(
                    f"--a2a-url: the agent card puts its JSON-RPC interface at {where}, another"
                    f" origin than {_origin_text(url)}, where the --header credential goes:"
                    " refused; give --follow-card-url to use that interface without the"
                    " credential, or point --a2a-url at it"
                )
            if credential:
                log.warning(
                    "the agent card puts its JSON-RPC interface at %s, another origin than"
                    " %s: followed without the --header credential (--follow-card-url)",
                    where,
                    _origin_text(url),
                )
            else:
                log.info(
                    "the agent card puts its JSON-RPC interface at %s, another origin than %s:"
                    " followed (no --header credential)",
                    where,
                    _origin_text(url),
                )
        versions = served_versions(card)
        transport: ClientTransport = JsonRpcTransport(
            http, card, interface.url, is_shared_httpx=True
        )
        if interface.tenant:
            transport = TenantTransportDecorator(transport, interface.tenant)
        public = with_simplex_interface(card, link, versions)
        operator = frozenset(name.lower() for name, _ in headers)
        handler = ForwardingHandler(
            transport,
            public,
            parameters=_service_parameters(operator),
            scoped=True,
            remote_callers=True,
        )
        log.info(
            "fronting %s (%s), A2A %s", card.name[:80], _shown(interface.url), ", ".join(versions)
        )
        yield A2aBridge(
            handler, supported_versions=versions, agent_card=public, rpc_deadline=rpc_deadline
        )


_HTTP_STATUS: Final = re.compile(r"\bHTTP Error (\d{3})\b")
_URL: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/'\"?#]*)([^\s'\"]*)")


def _reason(exc: BaseException) -> str:
    """An SDK error's text for the operator's log: its lines joined (a redirect's target
    is on the second), each URL without its query and user part, credentials redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _URL.sub(lambda m: _shown(m.group(0)), text)
    return redact(text)[:300]


def module_bridge(
    handler: object, link: str, *, rpc_deadline: float | None = DEFAULT_RPC_DEADLINE
) -> A2aBridge:
    """An :class:`A2aBridge` for an a2a-sdk agent served in process (``--a2a-module``).

    ``handler`` is the SDK's ``RequestHandler`` (usually ``DefaultRequestHandler``),
    or a function that makes one. Its Agent Card, when it keeps one, is served
    with the SimpleX interface added (``link``, the bot's contact address link).
    ``rpc_deadline`` is the bridge's Service RPC deadline. Raises
    :class:`GatewayError` for anything else.
    """
    if not isinstance(handler, RequestHandler) and callable(handler):
        # A factory (for example ``build_handler``) is called to make the handler.
        handler = handler()
    if not isinstance(handler, RequestHandler):
        raise GatewayError(
            "--a2a-module: expected an a2a-sdk RequestHandler (DefaultRequestHandler) or a"
            f" function that makes one, got {type(handler).__name__}"
        )
    # DefaultRequestHandler keeps the public card there (as A2aBridge reads it).
    card = getattr(handler, "_agent_card", None)
    public = None
    if isinstance(card, AgentCard):
        public = with_simplex_interface(card, link, binding.SUPPORTED_VERSIONS)
    return A2aBridge(handler, agent_card=public, rpc_deadline=rpc_deadline)

"""The A2A forward: an a2a-sdk request handler whose every method is one call of a transport.

The role *forward* of both bindings (see the package's docstring): what relays
one request to the upstream and maps its answer. :class:`ForwardingHandler` is
an a2a-sdk ``RequestHandler`` whose every method is one call of an a2a-sdk
``ClientTransport`` (the house style's "transports turned around"). It serves
both directions of issue 18:

* the gateway (``simplex-rpc serve --a2a-url URL``, ``_gateway``): the
  transport is the SDK's own ``JsonRpcTransport`` to the upstream's JSON-RPC
  interface, and the handler sits behind :class:`A2aBridge`, which brings the
  binding's rules (the request checks, the ``A2A-Version`` check against the
  upstream's versions, ``conversation_required`` over Service RPC, the end of
  a stream at a terminal or interrupted state, the size rules and the Service
  RPC deadline). The bridge turns ``a2a-service-parameters`` into the headers
  of its in-memory request; this handler sends them to the upstream as HTTP
  headers, so the member never reaches it (protocol text: "A proxy to an HTTP
  interface sends each service parameter as an HTTP header and removes the
  member from the request").
* the proxy (``simplex-rpc a2a-proxy``, ``_proxy``): the transport is
  :class:`SimplexA2aTransport` (``register_client``), the handler sits behind
  the SDK's own Starlette routes.

Callers (gateway only, ``scoped=True``): the upstream sees one client, the
gateway, so it cannot tell SimpleX callers apart; the handler keeps which
caller made each task and context (:class:`a2a.CallerStore`) and answers a
request that names another caller's task or context as for an unknown task.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final, TypeVar

from a2a.client.client import ClientCallContext
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.transports.base import ClientTransport
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
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
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from .._bindings import a2a as binding
from .._wire.redact import RedactingLogger, redact
from ._bridge import SimplexCaller

__all__ = ["ForwardingHandler", "ParameterPicker", "reason_of", "shown"]

# The gateway's logger: the handler was the gateway's before the proxy shared it.
log = RedactingLogger(logging.getLogger("simplex_rpc.a2a.gateway"))

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
        self._transport, self._card, self._what = transport, card, what
        self._parameters = parameters
        # What the handler does besides forwarding: keep callers apart, pass the push
        # methods on, and keep the way to the upstream out of its answers.
        self._scoped, self._push, self._remote_callers = scoped, push, remote_callers
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
            detail = f": {reason_of(exc)}"
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


def shown(url: str) -> str:
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


_HTTP_STATUS: Final = re.compile(r"\bHTTP Error (\d{3})\b")
_URL: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/'\"?#]*)([^\s'\"]*)")


def reason_of(exc: BaseException) -> str:
    """An SDK error's text for the operator's log: its lines joined (a redirect's target
    is on the second), each URL without its query and user part, credentials redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _URL.sub(lambda m: shown(m.group(0)), text)
    return redact(text)[:300]

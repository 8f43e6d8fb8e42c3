"""A2aBridge: an agent written with the official ``a2a-sdk`` behind SimpleX.

The SDK's JSON-RPC binding (``JsonRpcDispatcher``) takes a Starlette
``Request``, which is an ASGI scope and a ``receive`` callable, not a socket.
The bridge builds that request in memory and does what the protocol text asks
of a proxy to an HTTP interface: each service parameter becomes a header and
the ``a2a-service-parameters`` member is removed. The SDK then does the
routing, the parameter validation, the ``A2A-Version`` check (``-32009``), the
task store and the serialization. A JSON response is read from the
``JSONResponse`` body; a stream from the ``EventSourceResponse`` body
iterator, one JSON-RPC response per event. Nothing is sent over HTTP.

The caller becomes the SDK's user: the SDK's task stores keep tasks per
``user_name`` (``owner_resolver``). The SDK does not scope contexts: a message
with another caller's ``contextId`` would run in that context, and an agent
that keeps memory per context would show one caller's conversation to
another. So the bridge scopes both with :class:`~simplex_rpc.a2a.CallerStore`
(``CallerStore.scoped`` around each call to the SDK): a request that names a
context or a task the caller was not given is answered ``-32001`` before the
SDK sees it. The bridge adds the binding's other rules: ``-32600`` for what
is not a request of the binding, ``-32003`` for the push notification methods
in a conversation, ``conversation_required`` over Service RPC, and the size
rules.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from a2a.auth.user import User
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import AgentCard
from google.protobuf import json_format  # type: ignore[import-untyped]
from starlette.requests import Request as HttpRequest
from starlette.types import Message as AsgiMessage

from .._bindings import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    RPC_JSON_LIMIT,
    ServiceRequestLike,
    a2a,
    dumps_text,
    envelope_of,
    refuse_envelope,
)
from .._wire import strict_json as _json
from .._wire.envelope import ErrorCode, Response
from .._wire.keys import PublicKey

__all__ = ["DEFAULT_RPC_DEADLINE", "A2aBridge", "SimplexCaller"]

logger = logging.getLogger(__name__)

_CALLER_SCOPE_KEY: Final = "simplex_rpc.caller"

EXTENDED_CARD_NOT_CONFIGURED: Final = -32007
"""A2A's ExtendedAgentCardNotConfiguredError."""

DEFAULT_RPC_DEADLINE: Final = 160.0
"""Seconds a Service RPC task may take: below the adapter's handler deadline
(170 s) and the core's 180-second window, so conversation_required arrives."""

ReplySink = Callable[[str], Awaitable[None]]
EventSink = Callable[[dict[str, Any]], Awaitable[None]]


class SimplexCaller(User):
    """The SDK user for a SimpleX caller: not authenticated, named by the caller.

    ``user_name`` is :attr:`a2a.Caller.key`, which the SDK's task stores use
    as the owner of a task. A caller with credentials sends them as service
    parameters (``Authorization``); an agent that checks them reads the
    headers in ``ServerCallContext.state["headers"]``.
    """

    def __init__(self, caller: a2a.Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return False

    @property
    def user_name(self) -> str:
        return self.caller.key

    def __repr__(self) -> str:
        return f"SimplexCaller({self.caller.key!r})"


class _CallerContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's default context (headers, extensions), with the SimpleX caller as user."""

    def build_user(self, request: HttpRequest) -> User:
        caller = request.scope.get(_CALLER_SCOPE_KEY)
        if isinstance(caller, a2a.Caller):
            return SimplexCaller(caller)
        return super().build_user(request)


def _http_request(body: bytes, headers: list[tuple[str, str]], caller: a2a.Caller) -> HttpRequest:
    """A Starlette request in memory: a POST of ``body`` with ``headers``."""
    raw_headers = [(b"content-type", b"application/json")]
    raw_headers += [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers
    ]
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "simplex",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": None,
        "server": None,
        _CALLER_SCOPE_KEY: caller,
    }
    delivered = False

    async def receive() -> AsgiMessage:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return HttpRequest(scope, receive)


def _parse_sdk_json(data: bytes | str) -> dict[str, Any]:
    value = _json.loads(data)
    if not isinstance(value, dict):
        raise _json.JsonError("the SDK answered something other than a JSON object")
    return value


class A2aBridge:
    """Serves an ``a2a-sdk`` request handler over both SimpleX transports.

    ``request_handler`` is the SDK's ``RequestHandler`` (usually
    ``DefaultRequestHandler(agent_executor=..., task_store=...,
    agent_card=...)``). The same handler can serve HTTP at the same time.

    * :meth:`handle` answers one JSON-RPC request for a caller and returns the
      JSON-RPC response; for a streaming method, earlier events go to
      ``on_event`` and the last one is returned. No size rules.
    * :meth:`chat_handler` is for ``/_call a2a`` in a conversation: request in,
      reply texts out, each sized for one message (``-32603`` otherwise).
    * :meth:`rpc_handler` is the adapter responder's handler: a request
      envelope in, a response envelope out.

    ``rpc_limit`` is the byte limit of a Service RPC response envelope
    (default 10,000). ``rpc_deadline`` (default 160 s; None for none) is how
    long a Service RPC task may take before the answer is
    ``conversation_required``. The bridge keeps its own deadline because the
    SDK swallows the cancellation of a call whose agent has not answered yet,
    so an outer deadline (``asyncio.timeout``) cannot end such a call.

    ``supported_versions`` are the A2A versions served (Major.Minor, default
    ``a2a.SUPPORTED_VERSIONS``): a request whose ``A2A-Version`` is another
    one, or that has none, is answered ``VersionNotSupportedError``
    (``-32009``) before the SDK sees it.

    ``agent_card`` is the public Agent Card (default: the handler's own card,
    as ``DefaultRequestHandler`` keeps it). A SimpleX caller carries no
    credentials the bridge verifies, so ``GetExtendedAgentCard`` answers the
    public card, never the handler's extended card.

    ``callers`` is the :class:`~simplex_rpc.a2a.CallerStore` that keeps which
    caller owns each context and task (default: a new one, in memory; pass
    one to share it among bridges of one agent). A context and its tasks are
    available only to their caller: a request that names one the caller was
    not given is answered as for an unknown task (``-32001``), the same
    answer whether another caller has it or nobody does.
    """

    def __init__(
        self,
        request_handler: RequestHandler,
        *,
        rpc_limit: int = RPC_JSON_LIMIT,
        rpc_deadline: float | None = DEFAULT_RPC_DEADLINE,
        supported_versions: Iterable[str] = a2a.SUPPORTED_VERSIONS,
        agent_card: AgentCard | None = None,
        callers: a2a.CallerStore | None = None,
    ) -> None:
        if not isinstance(request_handler, RequestHandler):
            raise TypeError(
                f"request_handler: expected an a2a-sdk RequestHandler,"
                f" got {type(request_handler).__name__}"
            )
        if rpc_deadline is not None and not rpc_deadline > 0:
            raise ValueError("rpc_deadline: expected a positive number of seconds or None")
        a2a.rpc_response(
            {"jsonrpc": "2.0", "id": 0, "result": {}}, limit=rpc_limit
        )  # checks the limit
        if agent_card is None:
            # DefaultRequestHandler (and its v2) keep the public card here; a custom
            # handler without one gets -32007 for GetExtendedAgentCard.
            agent_card = getattr(request_handler, "_agent_card", None)
        if agent_card is not None and not isinstance(agent_card, AgentCard):
            raise TypeError(
                f"agent_card: expected an a2a-sdk AgentCard, got {type(agent_card).__name__}"
            )
        self.request_handler = request_handler
        self.rpc_limit = rpc_limit
        self.rpc_deadline = rpc_deadline
        self.supported_versions = a2a._check_versions(supported_versions)
        self.agent_card = agent_card
        if callers is not None and not isinstance(callers, a2a.CallerStore):
            raise TypeError(f"callers: expected an a2a.CallerStore, got {type(callers).__name__}")
        self.callers = callers if callers is not None else a2a.CallerStore()
        self._dispatcher = JsonRpcDispatcher(
            request_handler, context_builder=_CallerContextBuilder()
        )

    def __repr__(self) -> str:
        return f"A2aBridge({type(self.request_handler).__name__})"

    @property
    def supported(self) -> tuple[str, ...]:
        """The A2A versions (Major.Minor) the bridge serves: ``supported_versions``.

        ``serve_calls(declare=True)`` declares exactly these ("versions: ... The
        protocol versions the bot serves"), and :meth:`stream` refuses every other
        one with ``-32009``: what is declared is what is served.
        """
        return self.supported_versions

    async def stream(self, request: object, *, caller: a2a.Caller) -> AsyncIterator[dict[str, Any]]:
        """Every JSON-RPC response of the answer to ``request``, in order.

        One for a unary method, one per StreamResponse for a streaming method,
        up to the first whose task or status update is in a terminal or an
        interrupted state (``a2a.is_stream_end``): the binding ends the stream
        there. Errors are JSON-RPC error responses.

        Contexts and tasks are the caller's (:class:`~simplex_rpc.a2a.CallerStore`,
        :attr:`callers`): a request that names one the caller was not given
        (another caller's, or one nobody has) is answered ``-32001`` without
        reaching the agent, and the ids in each answer become the caller's.
        """
        async for answer in self._stream(request, caller, record=True):
            yield answer

    async def _stream(
        self, request: object, caller: a2a.Caller, *, record: bool
    ) -> AsyncIterator[dict[str, Any]]:
        if not isinstance(caller, a2a.Caller):
            raise TypeError(f"caller: expected an a2a.Caller, got {type(caller).__name__}")
        reason = a2a._invalid(request)
        if reason is not None:
            yield a2a.error(a2a._request_id(request), INVALID_REQUEST, f"Invalid Request: {reason}")
            return
        assert isinstance(request, Mapping)
        # The SDK passes any 1.x version to a 1.0 handler: the binding says a bot
        # answers a version it does not serve with VersionNotSupportedError.
        refused = a2a.check_request(request, supported_versions=self.supported_versions)
        if refused is not None:
            yield refused
            return
        if request["method"] == "GetExtendedAgentCard":
            yield self._public_card(request)
            return
        if not record:
            # An anonymous Service RPC requester is new with each request: nothing it
            # is given can be named again, so nothing is kept for it.
            refused = self.callers.check_request(caller, request)
            answers: AsyncIterator[Mapping[str, Any]] = (
                _one(refused) if refused is not None else self._dispatch(request, caller)
            )
        else:
            answers = self.callers.scoped(caller, request, lambda: self._dispatch(request, caller))
        try:
            async for answer in answers:
                yield dict(answer)
        finally:
            # Left early: the scoped answers, and with them the SDK's stream, end too.
            aclose = getattr(answers, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _dispatch(
        self, request: Mapping[str, Any], caller: a2a.Caller
    ) -> AsyncIterator[dict[str, Any]]:
        """The SDK's answers to a checked request, as a proxy to its HTTP interface."""
        parameters = a2a.service_parameters(request)
        body_obj = {k: v for k, v in request.items() if k != a2a.SERVICE_PARAMETERS_MEMBER}
        try:
            body = _json.dumps(body_obj)
        except (_json.JsonError, TypeError):
            yield a2a.error(request["id"], INVALID_REQUEST, "Invalid Request: not JSON")
            return
        http_request = _http_request(body, parameters.headers(), caller)
        response = await self._dispatcher.handle_requests(http_request)
        iterator = getattr(response, "body_iterator", None)
        if iterator is None:
            yield self._checked(_parse_sdk_json(bytes(response.body)), request)
            return
        try:
            async for event in iterator:
                data = event.get("data") if isinstance(event, Mapping) else None
                if data is None:  # pragma: no cover - the SDK sends data in every event
                    continue
                answer = self._checked(_parse_sdk_json(data), request)
                yield answer
                if a2a.is_stream_end(answer):
                    # The binding ends a stream at a terminal or interrupted state. The
                    # SDK keeps a subscription to an interrupted task open for its next
                    # event, so without this the answer would never end.
                    return
        finally:
            # A stream left early (a reply that could not be sent) ends the SDK's stream too.
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    def _public_card(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to GetExtendedAgentCard: the public card.

        The SDK's handler answers with its extended card whoever asks; over
        SimpleX no caller is authenticated (:class:`SimplexCaller`), and the
        protocol text gives a caller without credentials the public card.
        """
        if self.agent_card is None:
            return a2a.error(
                request["id"],
                EXTENDED_CARD_NOT_CONFIGURED,
                "Extended Agent Card not configured: the bridge has no public card"
                " (pass agent_card= to A2aBridge)",
            )
        card: dict[str, Any] = json_format.MessageToDict(
            self.agent_card, preserving_proto_field_name=False
        )
        return {"jsonrpc": "2.0", "id": request["id"], "result": card}

    @staticmethod
    def _checked(response: dict[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
        try:
            dumps_text(response, "a2a response")
        except a2a.BindingError:  # pragma: no cover - the SDK writes JSON
            return a2a.error(request.get("id"), INTERNAL_ERROR, "Internal error")
        return response

    async def handle(
        self,
        request: object,
        *,
        caller: a2a.Caller,
        on_event: EventSink | None = None,
    ) -> dict[str, Any]:
        """The JSON-RPC response to ``request``; for a stream, its last event.

        Events of a stream before the last are passed to ``on_event`` (dropped
        without it). The SDK does the dispatch, the validation and the version
        check; the caller scopes contexts and tasks (:meth:`stream`).
        """
        return await self._handle(request, caller, on_event, record=True)

    async def _handle(
        self,
        request: object,
        caller: a2a.Caller,
        on_event: EventSink | None,
        *,
        record: bool,
    ) -> dict[str, Any]:
        last: dict[str, Any] | None = None
        async for response in self._stream(request, caller, record=record):
            if last is not None and on_event is not None:
                await on_event(last)
            last = response
        if last is None:  # pragma: no cover - the SDK ends a stream with an event
            return a2a.error(
                a2a._request_id(request), INTERNAL_ERROR, "Internal error: no response"
            )
        return last

    async def chat_handler(
        self,
        request: str | Mapping[str, Any],
        *,
        caller: a2a.Caller,
        send: ReplySink | None = None,
    ) -> str:
        """The reply texts for ``/_call a2a <request>`` from ``caller``.

        ``request`` is the request's JSON text (the part after ``/_call a2a``)
        or the parsed object (``chat.parse_call(text).request``). Returns the
        last reply; the replies before it (the earlier events of a stream)
        are passed to ``send`` in order. Each is sized for one message: a
        reply that does not fit becomes ``-32603``. Push notification methods
        get ``-32003``; a task of another caller is an unknown task.
        """
        message: object = request
        if isinstance(request, str):
            try:
                message = _json.loads(request)
            except _json.JsonError as exc:
                return a2a.chat_reply(a2a.error(None, PARSE_ERROR, f"Parse error: {exc}"))
        if isinstance(message, Mapping):
            refused = a2a.chat_disposition(message)
            if refused is not None:
                return a2a.chat_reply(refused)

        async def forward(event: dict[str, Any]) -> None:
            if send is not None:
                await send(a2a.chat_reply(event))

        return a2a.chat_reply(await self.handle(message, caller=caller, on_event=forward))

    async def rpc_handler(self, service_request: ServiceRequestLike) -> Response:
        """The response envelope for a Service RPC request (the adapter's handler).

        ``service_request`` is the adapter's ``ServiceRequest`` (``.request``
        the envelope, ``.signer`` the verified key or None) or a bare
        ``Request``. Only one-shot ``SendMessage`` is served; everything else
        is ``conversation_required``, as is a task not finished within
        ``rpc_deadline``. The caller is the signer key, or a new anonymous
        caller for an unsigned request.
        """
        envelope = envelope_of(service_request)
        refused = refuse_envelope(envelope, a2a.PROTOCOL, "A2A-Version is a service parameter")
        if refused is not None:
            return refused
        message = envelope.request
        if a2a._invalid(message) is None:
            # A request that is not one is answered -32600 by handle().
            refused = a2a.rpc_disposition(message)
            if refused is not None:
                return refused
        caller, signed = _rpc_caller(service_request)
        answer = self._handle(message, caller, None, record=signed)
        if self.rpc_deadline is None:
            response = await answer
        else:
            finished = await _within(answer, self.rpc_deadline)
            if finished is None:
                return Response.failure(
                    ErrorCode.CONVERSATION_REQUIRED,
                    f"the task did not finish within {self.rpc_deadline:g} seconds",
                )
            response = finished
        return a2a.rpc_response(response, limit=self.rpc_limit)


async def _within(answer: Awaitable[dict[str, Any]], seconds: float) -> dict[str, Any] | None:
    """The answer, or None when it is not ready within ``seconds``.

    Not ``asyncio.wait_for``: it waits for the cancelled call to end, and the
    SDK's ``on_message_send`` swallows the cancellation while it waits for
    the agent's first event (``ActiveTask.subscribe`` catches
    ``CancelledError``), so a call whose agent has produced nothing yet would
    never end. The late call is cancelled and left to finish on its own.
    """
    task = asyncio.ensure_future(answer)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task in done:
        return task.result()
    task.cancel()
    task.add_done_callback(_discard_outcome)
    return None


def _discard_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("a request that passed its deadline failed afterwards")


def _rpc_caller(service_request: object) -> tuple[a2a.Caller, bool]:
    """The caller of a Service RPC request, and whether it is signed.

    The signer's key names a signed requester, who can refer to its own
    earlier tasks; an unsigned one is a new anonymous caller each time.
    """
    signer = getattr(service_request, "signer", None)
    if isinstance(signer, PublicKey):
        return a2a.Caller(chat=f"rpc:{signer.encode()}"), True
    return a2a.Caller(chat=f"rpc:anonymous:{uuid.uuid4()}"), False


async def _one(answer: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield answer

"""The data of the A2A binding: no I/O and no SDK.

:mod:`simplex_rpc.a2a` re-exports its public names and documents them; the
bridge, the client transport and the gateway use them, and the adapter applies
its call policy (:func:`call_policy`, credentials in groups) through
:func:`simplex_rpc._bindings.call_policy`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar

from .._wire.envelope import ErrorCode, Response
from . import shared
from .shared import (
    FIELD_NAME,
    FIELD_VALUE,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    RPC_JSON_LIMIT,
    BindingError,
    Caller,
    error_response,
    json_type,
)

__all__ = [
    "BINDING_URI",
    "INTERRUPTED_STATES",
    "METHODS",
    "PROTOCOL",
    "PUSH_NOTIFICATION_METHODS",
    "PUSH_NOTIFICATION_NOT_SUPPORTED",
    "SERVICE_PARAMETERS_MEMBER",
    "STREAMING_METHODS",
    "SUPPORTED_VERSIONS",
    "TASK_NOT_FOUND",
    "TERMINAL_STATES",
    "VERSION_NOT_SUPPORTED",
    "VERSION_PARAMETER",
    "BindingError",
    "Caller",
    "CallerStore",
    "ServiceParameters",
    "agent_card_interface",
    "chat_disposition",
    "chat_reply",
    "check_request",
    "credential_parameters",
    "error",
    "is_stream_end",
    "make_request",
    "rpc_disposition",
    "rpc_response",
    "service_parameters",
]


PROTOCOL: Final = "a2a"
BINDING_URI: Final = "https://simplex.chat/protocol/a2a/v1"
VERSION_PARAMETER: Final = "A2A-Version"
SUPPORTED_VERSIONS: Final = ("1.0",)

TASK_NOT_FOUND: Final = -32001
PUSH_NOTIFICATION_NOT_SUPPORTED: Final = -32003
VERSION_NOT_SUPPORTED: Final = -32009

METHODS: Final = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
"""The methods of the A2A 1.0 JSON-RPC binding (A2A section 9.4)."""

STREAMING_METHODS: Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})
PUSH_NOTIFICATION_METHODS: Final = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
TERMINAL_STATES: Final = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED_STATES: Final = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})

_ERROR_INFO_TYPE: Final = "type.googleapis.com/google.rpc.ErrorInfo"
_A2A_DOMAIN: Final = "a2a-protocol.org"
_REASONS: Final = {
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    PUSH_NOTIFICATION_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    INVALID_REQUEST: "INVALID_REQUEST",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}
_VERSION: Final = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*))?")


# -- the service parameters ("Service parameters" of the A2A binding) --

#: The request member that carries the A2A service parameters ("Service parameters").
SERVICE_PARAMETERS_MEMBER: Final = "a2a-service-parameters"
# HTTP's optional whitespace (OWS, RFC 9110 section 5.6.3) around a field value.
_OWS: Final = " \t"


class ServiceParameters(Mapping[str, str]):
    """The service parameters of a request: a read-only, case-insensitive mapping.

    Lookup ignores the letter case of names; iteration gives the names as the
    request spelled them. Several values of one parameter are one string,
    joined by commas as in an HTTP header; :meth:`split` returns them apart.
    A value is kept without its leading and trailing spaces and tabs, as an
    HTTP field value is read (RFC 9110, section 5.5: that optional whitespace
    is not part of the value), so ``" 1.0"`` is ``"1.0"``.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, tuple[str, str]] = {}
        for name, value in (items or {}).items():
            _check_parameter(name, value, SERVICE_PARAMETERS_MEMBER)
            key = name.lower()
            if key in self._items:
                raise BindingError(
                    f"{SERVICE_PARAMETERS_MEMBER}: {name!r} repeats"
                    f" {self._items[key][0]!r} (names are case-insensitive)"
                )
            self._items[key] = (name, value.strip(_OWS))

    def __getitem__(self, name: str) -> str:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._items[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        # Values can be credentials (Authorization): the repr names only the parameters.
        return f"ServiceParameters(names={list(self)!r})"

    def split(self, name: str) -> list[str]:
        """The values of one parameter, split at commas and stripped; [] when absent."""
        if name not in self:
            return []
        return [part.strip() for part in self[name].split(",")]

    def headers(self) -> list[tuple[str, str]]:
        """The parameters as HTTP header fields, as a proxy to HTTP sends them."""
        return list(self._items.values())


def _check_parameter(name: object, value: object, where: str) -> None:
    if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
        raise BindingError(f"{where}: {str(name)[:64]!r} is not a service parameter name")
    if not isinstance(value, str):
        raise BindingError(f"{where}: {name}: expected a string value, got {json_type(value)}")
    if not FIELD_VALUE.fullmatch(value):
        raise BindingError(f"{where}: {name}: the value is not a valid header field value")


def service_parameters(request: Mapping[str, Any]) -> ServiceParameters:
    """The ``a2a-service-parameters`` member of a JSON-RPC request.

    An absent member is an empty mapping. A member that is not an object of
    names and string values, or that names one parameter twice in different
    letter cases, raises :class:`BindingError`.
    """
    if not isinstance(request, Mapping):
        raise BindingError(f"request: expected a JSON-RPC request object, got {json_type(request)}")
    member = request.get(SERVICE_PARAMETERS_MEMBER)
    if member is None and SERVICE_PARAMETERS_MEMBER not in request:
        return ServiceParameters()
    if not isinstance(member, Mapping):
        raise BindingError(
            f"{SERVICE_PARAMETERS_MEMBER}: expected an object, got {json_type(member)}"
        )
    return ServiceParameters(member)


# The service parameter that carries the credential of each kind of security
# scheme of an Agent Card (A2A 1.0, section 4.5, SecurityScheme), as its HTTP
# interface receives it: the protocol text's "receives the credential as the
# service parameter of the scheme, for example Authorization for an HTTP
# scheme". An API key travels in the parameter the scheme names (or, with
# location "cookie", in Cookie); mutual TLS sends none.
_AUTHORIZATION_SCHEMES: Final = (
    ("httpAuthSecurityScheme", "http_auth_security_scheme"),
    ("oauth2SecurityScheme", "oauth2_security_scheme"),
    ("openIdConnectSecurityScheme", "open_id_connect_security_scheme"),
)
_API_KEY_SCHEME: Final = ("apiKeySecurityScheme", "api_key_security_scheme")


def _field(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A member by its JSON name or its proto field name (the SDK reads both)."""
    return obj[camel] if camel in obj else obj.get(snake)


def credential_parameters(agent_card: Mapping[str, Any]) -> frozenset[str]:
    """The service parameters that carry credentials for an agent, in lower case.

    ``agent_card`` is the agent's Agent Card as JSON (``securitySchemes`` or
    the proto name ``security_schemes``). Each scheme names its parameter: an
    API key scheme its ``name`` (and ``Cookie`` for the location ``cookie``),
    an HTTP, OAuth 2 or OpenID Connect scheme ``Authorization``; mutual TLS
    none. Names are case-insensitive, so they are returned in lower case. A
    card without schemes gives the empty set; schemes that are not objects, or
    an API key scheme without a name, raise :class:`BindingError`.
    """
    if not isinstance(agent_card, Mapping):
        raise BindingError(f"agent_card: expected a JSON object, got {json_type(agent_card)}")
    schemes = _field(agent_card, "securitySchemes", "security_schemes")
    if schemes is None:
        return frozenset()
    if not isinstance(schemes, Mapping):
        raise BindingError(
            f"agent_card.securitySchemes: expected an object of schemes, got {json_type(schemes)}"
        )
    found: set[str] = set()
    for name, scheme in schemes.items():
        where = f"agent_card.securitySchemes.{str(name)[:64]}"
        if not isinstance(scheme, Mapping):
            raise BindingError(f"{where}: expected an object, got {json_type(scheme)}")
        if any(_field(scheme, *kind) is not None for kind in _AUTHORIZATION_SCHEMES):
            found.add("authorization")
        api_key = _field(scheme, *_API_KEY_SCHEME)
        if api_key is not None:
            if not isinstance(api_key, Mapping):
                raise BindingError(f"{where}: expected an object, got {json_type(api_key)}")
            parameter = api_key.get("name")
            if not isinstance(parameter, str) or not FIELD_NAME.fullmatch(parameter):
                raise BindingError(f"{where}: an API key scheme names its parameter in 'name'")
            found.add(parameter.lower())
            if api_key.get("location") == "cookie":
                found.add("cookie")
    return frozenset(found)


# Service parameters that carry credentials whatever the card says: HTTP's credential
# fields. Without a card, any name that looks like a credential is one too.
_CREDENTIAL_NAMES: Final = frozenset({"authorization", "proxy-authorization", "cookie"})
_CREDENTIAL_WORDS: Final = re.compile(r"auth|token|key|secret|password|credential|session", re.I)


def _credentials_sent(
    request: Mapping[str, Any], agent_card: Mapping[str, Any] | None
) -> list[str]:
    """Names of the service parameters of ``request`` that carry credentials.

    With the bot's Agent Card, those its security schemes name ("An agent
    whose Agent Card declares security schemes receives the credential as the
    service parameter of the scheme") and HTTP's credential fields, whatever
    else they are called; without it, the names that look like credentials.
    """
    parameters = service_parameters(request)
    if agent_card is not None:
        schemes = credential_parameters(agent_card)
        return [n for n in parameters if n.lower() in schemes or n.lower() in _CREDENTIAL_NAMES]
    return [
        name
        for name in parameters
        if name.lower() in _CREDENTIAL_NAMES or _CREDENTIAL_WORDS.search(name) is not None
    ]


def call_policy(
    request: Mapping[str, Any], *, group: bool, agent_card: Mapping[str, Any] | None
) -> str | None:
    """The A2A binding's :class:`~simplex_rpc._bindings.shared.CallPolicy`.

    "A request with a credential MUST NOT be sent in a group": in a group, a
    request whose service parameters carry a credential is refused (which
    ones: :func:`_credentials_sent`); a direct chat takes any request. A
    malformed ``a2a-service-parameters`` member or card raises
    :class:`BindingError`.
    """
    if not group:
        return None
    credentials = _credentials_sent(request, agent_card)
    if not credentials:
        return None
    return (
        "a2a: a request with a credential MUST NOT be sent in a group"
        f" (service parameters {', '.join(sorted(credentials))})"
    )


def error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """An A2A JSON-RPC error response, shaped as the SDK writes it.

    ``data`` is a list with one ``google.rpc.ErrorInfo`` that names the A2A
    reason (``TASK_NOT_FOUND``, ``VERSION_NOT_SUPPORTED``, ...) in the domain
    ``a2a-protocol.org``.
    """
    reason = _REASONS.get(code, "UNKNOWN_ERROR")
    info = {"@type": _ERROR_INFO_TYPE, "reason": reason, "domain": _A2A_DOMAIN, "metadata": {}}
    return error_response(request_id, code, message, [info])


def _major_minor(version: str) -> str | None:
    match = _VERSION.fullmatch(version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _check_versions(versions: Iterable[str]) -> tuple[str, ...]:
    return shared.checked_list(versions, "supported_versions", "versions", _check_version)


def _check_version(place: str, version: object) -> None:
    if not isinstance(version, str) or _VERSION.fullmatch(version) is None or (
        version.count(".") != 1
    ):
        raise BindingError(f"{place}: {version!r} is not an A2A version in the Major.Minor form")


def agent_card_interface(contact_link: str, a2a_version: str = "1.0") -> dict[str, str]:
    """The ``supportedInterfaces`` entry of an Agent Card for the SimpleX interface.

    ``url`` is the bot's contact address link, ``protocolBinding`` the binding
    URI and ``protocolVersion`` the A2A version (Major.Minor).
    """
    if not isinstance(contact_link, str) or not contact_link:
        raise BindingError(
            f"contact_link: expected a non-empty string, got {json_type(contact_link)}"
        )
    if any(ch.isspace() for ch in contact_link) or ":" not in contact_link:
        raise BindingError("contact_link: not a link (a URI with a scheme and no whitespace)")
    _check_versions([a2a_version])
    return {"url": contact_link, "protocolBinding": BINDING_URI, "protocolVersion": a2a_version}


def make_request(
    method: str,
    params: Mapping[str, Any] | None,
    *,
    id: str | int,
    version: str = "1.0",
    parameters: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC request of this binding: ``jsonrpc``, ``id``, ``method``,
    ``a2a-service-parameters`` (``A2A-Version`` first, then ``parameters``),
    then ``params``."""
    if not isinstance(method, str) or not method:
        raise BindingError("method: expected a non-empty string")
    if not shared.valid_id(id, allow_null=False):
        raise BindingError(f"id: expected a string or an integer, got {json_type(id)}")
    _check_versions([version])
    members: dict[str, str] = {VERSION_PARAMETER: version}
    for name, value in (parameters or {}).items():
        if isinstance(name, str) and name.lower() == VERSION_PARAMETER.lower():
            raise BindingError(f"parameters: {name!r} is given by version=")
        members[name] = value
    ServiceParameters(members)  # validates names, values and repeats
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    out[SERVICE_PARAMETERS_MEMBER] = members
    if params is not None:
        out["params"] = dict(params)
    return out


def _request_id(request: object) -> Any:
    return shared.request_id(request, allow_null=True)


def _invalid(request: object) -> str | None:
    """Why ``request`` is not a JSON-RPC 2.0 request of this binding, or None."""
    reason = shared.invalid_request(request, allow_null_id=True)
    if reason is not None:
        return reason
    assert isinstance(request, Mapping)
    try:
        service_parameters(request)
    except BindingError as exc:
        return str(exc)
    return None


def check_request(
    request: object, *, supported_versions: Iterable[str] = SUPPORTED_VERSIONS
) -> dict[str, Any] | None:
    """None for a valid request of a served A2A version; else the error response.

    ``-32600`` (InvalidRequestError) for a message that is not a JSON-RPC 2.0
    request (a notification included) or whose ``a2a-service-parameters`` is
    malformed; ``-32009`` (VersionNotSupportedError) when ``A2A-Version`` is
    missing or names a version not in ``supported_versions`` (Major.Minor; a
    patch number in the request is ignored). The method is not checked here:
    an unknown one is the agent's ``-32601``.
    """
    served = _check_versions(supported_versions)
    reason = _invalid(request)
    if reason is not None:
        return error(_request_id(request), INVALID_REQUEST, f"Invalid Request: {reason}")
    assert isinstance(request, Mapping)
    parameters = service_parameters(request)
    version = parameters.get(VERSION_PARAMETER)
    if version is None:
        return error(
            request["id"],
            VERSION_NOT_SUPPORTED,
            f"Version not supported: the request has no {VERSION_PARAMETER};"
            f" this agent serves {', '.join(served)}",
        )
    if _major_minor(version) not in served:
        return error(
            request["id"],
            VERSION_NOT_SUPPORTED,
            f"Version not supported: A2A version {version[:32]!r};"
            f" this agent serves {', '.join(served)}",
        )
    return None


def _member(obj: Mapping[str, Any], camel: str, snake: str) -> tuple[bool, Any]:
    """A member by its JSON name or its proto field name (the SDK accepts both)."""
    for name in (camel, snake):
        if name in obj:
            return True, obj[name]
    return False, None


def rpc_disposition(request: Mapping[str, Any]) -> Response | None:
    """None when Service RPC may serve the request; else ``conversation_required``.

    Service RPC serves ``SendMessage`` whose message has neither ``contextId``
    nor ``taskId``, and whose ``configuration.returnImmediately`` is absent or
    false. Every other request, the streaming and push notification methods
    included, needs a conversation. Members are also recognized by their proto
    field names (``context_id``, ...), which the SDK accepts as well.
    """
    if not isinstance(request, Mapping):
        raise BindingError(f"request: expected a JSON-RPC request object, got {json_type(request)}")
    method = request.get("method")
    if method != "SendMessage":
        name = method if isinstance(method, str) else "this request"
        return _conversation_required(f"{str(name)[:64]} needs a conversation")
    params = request.get("params")
    if isinstance(params, Mapping):
        message = params.get("message")
        if isinstance(message, Mapping):
            for camel, snake in (("contextId", "context_id"), ("taskId", "task_id")):
                if _member(message, camel, snake)[0]:
                    return _conversation_required(
                        f"a message with {camel} continues a conversation"
                    )
        config = params.get("configuration")
        if isinstance(config, Mapping):
            present, value = _member(config, "returnImmediately", "return_immediately")
            if present and value is not False:
                return _conversation_required("returnImmediately needs a conversation")
    return None


def _conversation_required(message: str) -> Response:
    return Response.failure(ErrorCode.CONVERSATION_REQUIRED, message)


def chat_disposition(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """None when a conversation may pass the request on; else the error response.

    A conversation delivers every update of a task, so push notification
    configurations are not used: the push notification methods get ``-32003``
    (PushNotificationNotSupportedError).
    """
    if not isinstance(request, Mapping):
        raise BindingError(f"request: expected a JSON-RPC request object, got {json_type(request)}")
    method = request.get("method")
    if isinstance(method, str) and method in PUSH_NOTIFICATION_METHODS:
        return error(
            _request_id(request),
            PUSH_NOTIFICATION_NOT_SUPPORTED,
            "Push Notification is not supported: a conversation delivers every update of a task",
        )
    return None


def _stream_response(value: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The StreamResponse in ``value``: itself, or the result of a JSON-RPC response."""
    if "jsonrpc" in value or "result" in value:
        result = value.get("result")
        return result if isinstance(result, Mapping) else None
    return value


def is_stream_end(stream_response: Mapping[str, Any]) -> bool:
    """Whether this reply ends a stream (SendStreamingMessage, SubscribeToTask).

    True for a ``task`` or ``statusUpdate`` whose ``status.state`` is terminal
    (``TASK_STATE_COMPLETED``, ``_FAILED``, ``_CANCELED``, ``_REJECTED``) or
    interrupted (``TASK_STATE_INPUT_REQUIRED``, ``_AUTH_REQUIRED``). Also true
    for a ``message``, which A2A makes the whole answer (no event may follow
    one), and for a JSON-RPC error response, after which nothing follows.
    Accepts the StreamResponse itself or the JSON-RPC response that carries it.
    """
    if not isinstance(stream_response, Mapping):
        raise BindingError(f"stream response: expected an object, got {json_type(stream_response)}")
    if "error" in stream_response and "result" not in stream_response:
        return True
    inner = _stream_response(stream_response)
    if inner is None:
        return False
    if isinstance(inner.get("message"), Mapping):
        return True
    for kind in ("task", "statusUpdate", "status_update"):
        event = inner.get(kind)
        if isinstance(event, Mapping):
            status = event.get("status")
            if isinstance(status, Mapping):
                state = status.get("state")
                return isinstance(state, str) and (
                    state in TERMINAL_STATES or state in INTERRUPTED_STATES
                )
    return False


def chat_reply(response: Mapping[str, Any]) -> str:
    """The reply text for a JSON-RPC response (or one StreamResponse event) in a
    conversation; ``-32603`` with the request's id when it does not fit one
    message. The bytes of raw parts (base64 in JSON) count towards the limit."""
    return shared.chat_reply(response, binding=PROTOCOL)


def rpc_response(response: Mapping[str, Any], *, limit: int = RPC_JSON_LIMIT) -> Response:
    """The Service RPC envelope for a JSON-RPC response; ``too_large`` over
    ``limit`` (default 10,000 bytes) or over the padded block."""
    return shared.rpc_response(response, binding=PROTOCOL, limit=limit)


# The params members that name a task, by method: their JSON names and their
# proto field names, which the SDK reads as well.
_TASK_PARAM: Final = {
    "GetTask": ("id",),
    "CancelTask": ("id",),
    "SubscribeToTask": ("id",),
    "CreateTaskPushNotificationConfig": ("taskId", "task_id"),
    "GetTaskPushNotificationConfig": ("taskId", "task_id"),
    "ListTaskPushNotificationConfigs": ("taskId", "task_id"),
    "DeleteTaskPushNotificationConfig": ("taskId", "task_id"),
}
_MESSAGE_METHODS: Final = frozenset({"SendMessage", "SendStreamingMessage"})
_Answer = TypeVar("_Answer", bound=Mapping[str, Any])

#: A named id that is not a usable id (a number, a list): it cannot be the
#: caller's, so a request naming it is refused like one naming an unknown id.
_NOT_AN_ID: Final = "\x00not an id"


class CallerStore:
    """Which caller owns each context and task: pure data, no I/O.

    The protocol text: "A context and its tasks are available only to their
    caller: in the conversation where they were created, and in a group to
    the member who created them. A request that names the context or the task
    of another caller is answered as a request for an unknown task."

    A caller owns what the agent gave it: the tasks and contexts named by the
    answers it received (:meth:`record`, or :meth:`add_task` and
    :meth:`add_context`). A request may name only those (:meth:`check_request`):
    every other id, another caller's or one nobody has, is answered the same
    way, as an unknown task (``-32001``), so the answer never tells whether
    another caller's context exists. A new conversation starts without a
    ``contextId``, and the agent makes one (A2A 1.0, section 3.4.1: an agent
    that cannot accept a client-provided ``contextId`` rejects the request).

    :meth:`scoped` is the whole rule around one upstream call: a bridge (or a
    gateway in front of an agent that knows nothing of SimpleX callers) wraps
    each request's answers in it. The store is kept in memory; an application
    that shares one among bridges passes it to each.
    """

    __slots__ = ("_contexts", "_tasks")

    def __init__(self) -> None:
        self._tasks: dict[str, Caller] = {}
        self._contexts: dict[str, Caller] = {}

    def __repr__(self) -> str:
        return f"CallerStore(tasks={len(self._tasks)}, contexts={len(self._contexts)})"

    def owner_of_task(self, task_id: str) -> Caller | None:
        """The caller that owns ``task_id``, or None."""
        return self._tasks.get(task_id)

    def owner_of_context(self, context_id: str) -> Caller | None:
        """The caller that owns ``context_id``, or None."""
        return self._contexts.get(context_id)

    def tasks_of(self, caller: Caller) -> frozenset[str]:
        """The ids of the tasks ``caller`` owns."""
        return frozenset(t for t, owner in self._tasks.items() if owner == caller)

    def contexts_of(self, caller: Caller) -> frozenset[str]:
        """The ids of the contexts ``caller`` owns."""
        return frozenset(c for c, owner in self._contexts.items() if owner == caller)

    def add_task(self, caller: Caller, task_id: str, context_id: str | None = None) -> bool:
        """Give ``caller`` the task (and its context); False if another caller owns either."""
        _check_caller(caller)
        if not self._free(caller, self._tasks, task_id) or (
            context_id is not None and not self._free(caller, self._contexts, context_id)
        ):
            return False
        self._tasks[task_id] = caller
        if context_id is not None:
            self._contexts[context_id] = caller
        return True

    def add_context(self, caller: Caller, context_id: str) -> bool:
        """Give ``caller`` the context; False if another caller owns it."""
        _check_caller(caller)
        if not self._free(caller, self._contexts, context_id):
            return False
        self._contexts[context_id] = caller
        return True

    def forget_task(self, task_id: str) -> None:
        """Drop the record of one task (its context stays)."""
        self._tasks.pop(task_id, None)

    def forget_context(self, context_id: str) -> None:
        """Drop the record of one context (its tasks stay until forgotten)."""
        self._contexts.pop(context_id, None)

    @staticmethod
    def _free(caller: Caller, table: Mapping[str, Caller], key: object) -> bool:
        if not isinstance(key, str) or not key:
            raise BindingError(f"id: expected a non-empty string, got {json_type(key)}")
        owner = table.get(key)
        return owner is None or owner == caller

    def named_ids(self, request: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        """The task ids and the context ids a request names.

        Every place a method of the binding names one, by its JSON name and by
        its proto field name: ``id`` of GetTask, CancelTask and
        SubscribeToTask; ``taskId`` of the push notification methods; the
        message's ``taskId``, ``contextId`` and ``referenceTaskIds`` in
        SendMessage and SendStreamingMessage; ``contextId`` of ListTasks. A
        member that is present but not a string (nor null or empty, which the
        SDK reads as absent) is listed as an id no caller can own.
        """
        tasks: list[str] = []
        contexts: list[str] = []
        method = request.get("method")
        params = request.get("params")
        if not isinstance(params, Mapping) or not isinstance(method, str):
            return tasks, contexts
        for name in _TASK_PARAM.get(method, ()):
            _named(params.get(name), tasks)
        if method in _MESSAGE_METHODS:
            message = params.get("message")
            if isinstance(message, Mapping):
                for name in ("taskId", "task_id"):
                    _named(message.get(name), tasks)
                for name in ("contextId", "context_id"):
                    _named(message.get(name), contexts)
                for name in ("referenceTaskIds", "reference_task_ids"):
                    references = message.get(name)
                    if isinstance(references, list):
                        for reference in references:
                            _named(reference, tasks)
                    else:
                        _named(references, tasks)
        if method == "ListTasks":
            for name in ("contextId", "context_id"):
                _named(params.get(name), contexts)
        return tasks, contexts

    def check_request(self, caller: Caller, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """None when every task and context the request names is the caller's; else the
        ``-32001`` response, the same for another caller's id as for an unknown one."""
        _check_caller(caller)
        if not isinstance(request, Mapping):
            raise BindingError(
                f"request: expected a JSON-RPC request object, got {json_type(request)}"
            )
        tasks, contexts = self.named_ids(request)
        if all(self._tasks.get(t) == caller for t in tasks) and all(
            self._contexts.get(c) == caller for c in contexts
        ):
            return None
        return error(_request_id(request), TASK_NOT_FOUND, "Task not found")

    def record(self, caller: Caller, message: Mapping[str, Any]) -> None:
        """Give ``caller`` every task and context that ``message`` names and that
        no one owns yet.

        ``message`` is a response or stream event the agent answered the caller
        with: a Task, a Message, a status or artifact update, a ListTasks
        result. (A request is read too, for an application that accepts the
        ``contextId`` a caller chooses; the bridges record answers only.) Ids
        owned by another caller are left alone.
        """
        _check_caller(caller)
        if not isinstance(message, Mapping):
            raise BindingError(f"message: expected an object, got {json_type(message)}")
        tasks: list[str] = []
        contexts: list[str] = []
        if "method" in message:
            tasks, contexts = self.named_ids(message)
        else:
            result = _stream_response(message)
            if result is not None:
                _collect_result(result, tasks, contexts)
        for task_id in tasks:
            if task_id and task_id != _NOT_AN_ID and task_id not in self._tasks:
                self._tasks[task_id] = caller
        for context_id in contexts:
            if context_id and context_id != _NOT_AN_ID and context_id not in self._contexts:
                self._contexts[context_id] = caller

    async def scoped(
        self,
        caller: Caller,
        request: Mapping[str, Any],
        answer: Callable[[], AsyncIterable[_Answer]],
    ) -> AsyncIterator[_Answer | dict[str, Any]]:
        """The answers to ``request`` from ``caller``, scoped to the caller.

        When the request names a task or a context that is not the caller's,
        the one answer is the unknown-task response and ``answer`` is never
        called: the request does not reach the agent. Otherwise ``answer()``
        is the upstream call (a unary response, or the events of a stream):
        each answer is recorded for the caller, then passed on, in order.
        """
        refused = self.check_request(caller, request)
        if refused is not None:
            yield refused
            return
        responses = answer()
        try:
            async for response in responses:
                self.record(caller, response)
                yield response
        finally:
            # Left early (a reply that could not be sent): the upstream's stream ends too.
            aclose = getattr(responses, "aclose", None)
            if aclose is not None:
                await aclose()


def _named(value: Any, out: list[str]) -> None:
    """Add the id a request member names: absent, null or empty names none (as
    in the SDK's proto reading); anything but a string is no caller's id."""
    if value is None or value == "":
        return
    out.append(value if isinstance(value, str) else _NOT_AN_ID)


def _check_caller(caller: object) -> None:
    if not isinstance(caller, Caller):
        raise TypeError(f"caller: expected a Caller, got {type(caller).__name__}")


def _collect(obj: Mapping[str, Any], tasks: list[str], contexts: list[str]) -> None:
    """Task and context ids of a Message, a Task or an update event."""
    for (camel, snake), out in (
        (("taskId", "task_id"), tasks),
        (("contextId", "context_id"), contexts),
    ):
        present, value = _member(obj, camel, snake)
        if present and isinstance(value, str):
            out.append(value)


def _collect_result(result: Mapping[str, Any], tasks: list[str], contexts: list[str]) -> None:
    """Ids in a result: SendMessage's ``task``/``message``, a StreamResponse
    event, a bare Task (GetTask, CancelTask) or ListTasks' ``tasks``."""
    for kind in ("message", "statusUpdate", "status_update", "artifactUpdate", "artifact_update"):
        event = result.get(kind)
        if isinstance(event, Mapping):
            _collect(event, tasks, contexts)
    candidates: list[Any] = [result.get("task"), result]
    listed = result.get("tasks")
    if isinstance(listed, list):
        candidates.extend(listed)
    for task in candidates:
        if isinstance(task, Mapping) and isinstance(task.get("id"), str) and "status" in task:
            tasks.append(task["id"])
            present, value = _member(task, "contextId", "context_id")
            if present and isinstance(value, str):
                contexts.append(value)

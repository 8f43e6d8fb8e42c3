"""What the MCP and A2A bindings share: JSON-RPC shapes and the size rules.

It also holds what the adapter's chat transport needs to know of a request
without knowing a binding: the caller (:class:`Caller`), the A2A service
parameters (:func:`service_parameters`) and the parameters an Agent Card's
security schemes name (:func:`credential_parameters`), re-exported by
:mod:`simplex_rpc.a2a`.
No I/O and no SDK imports. Both bindings carry one JSON-RPC request and end
their answer with one JSON-RPC response (protocol text, "MCP binding" and "A2A
binding"). A response above the size limit is replaced: in a conversation by a
JSON-RPC error ``-32603`` with the request's id, over Service RPC by the
envelope error ``too_large``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._wire import strict_json as _json
from ._wire.envelope import UNSET, ErrorCode, Request, Response
from ._wire.seal import MAX_RESPONSE
from ._wire.strict_json import json_type
from .chat import MAX_MESSAGE_JSON, encoded_size, fits_message, reply_allowance
from .errors import SimplexRpcError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RPC_JSON_LIMIT",
    "SERVICE_PARAMETERS_MEMBER",
    "BindingError",
    "Caller",
    "ServiceParameters",
    "chat_reply",
    "credential_parameters",
    "dumps_text",
    "envelope_of",
    "error_response",
    "header_field",
    "invalid_request",
    "json_type",
    "refuse_envelope",
    "request_id",
    "rpc_response",
    "service_parameters",
    "valid_id",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

RPC_JSON_LIMIT: Final = 10_000
"""The protocol text's SHOULD: a response SHOULD NOT exceed 10,000 bytes of JSON."""


class BindingError(SimplexRpcError):
    """A binding helper got a value it cannot use: a response that is not a
    JSON-RPC response, a malformed ``a2a-service-parameters`` member, a
    version list that is not one, and the like. The message names the field."""


def valid_id(value: object, *, allow_null: bool) -> bool:
    """Whether ``value`` is a JSON-RPC request id: a string or an integer.

    A boolean is not an id. MCP forbids ``null`` ids; A2A follows JSON-RPC 2.0,
    which allows them (``allow_null``). Fractional numbers are refused, as
    both SDKs refuse them.
    """
    if value is None:
        return allow_null
    if isinstance(value, bool):
        return False
    return isinstance(value, (str, int))


def request_id(message: object, *, allow_null: bool) -> Any:
    """The id of ``message`` if it is a valid JSON-RPC id, else None (for error responses)."""
    if isinstance(message, Mapping):
        candidate = message.get("id")
        if valid_id(candidate, allow_null=allow_null):
            return candidate
    return None


def invalid_request(message: object, *, allow_null_id: bool) -> str | None:
    """Why ``message`` is not a JSON-RPC 2.0 request that a binding carries, or None.

    Both bindings carry requests, never notifications, so ``id`` is required;
    MCP forbids a ``null`` id and A2A allows it (``allow_null_id``).
    """
    if not isinstance(message, Mapping):
        return f"expected a JSON-RPC request object, got {json_type(message)}"
    if message.get("jsonrpc") != "2.0":
        return "member 'jsonrpc' must be \"2.0\""
    if "id" not in message:
        return "member 'id' is missing: the binding carries requests, not notifications"
    if not valid_id(message["id"], allow_null=allow_null_id):
        kinds = "a string, an integer or null" if allow_null_id else "a string or an integer"
        return f"member 'id' must be {kinds}, got {json_type(message['id'])}"
    method = message.get("method")
    if not isinstance(method, str) or not method:
        return "member 'method' must be a non-empty string"
    if "params" in message and not isinstance(message["params"], Mapping):
        return f"member 'params' must be an object, got {json_type(message['params'])}"
    return None


def error_response(
    request_id: Any, code: int, message: str, data: Any = None, *, with_data: bool = False
) -> dict[str, Any]:
    """A JSON-RPC error response: ``jsonrpc``, ``id``, then ``error``.

    ``data`` is written when it is not None, or when ``with_data`` says so
    (for a ``null`` data member).
    """
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None or with_data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _check_response(response: object, where: str) -> Mapping[str, Any]:
    """Refuse a value that is not a JSON-RPC 2.0 response object."""
    if not isinstance(response, Mapping):
        raise BindingError(
            f"{where}: expected a JSON-RPC response object, got {json_type(response)}"
        )
    if response.get("jsonrpc") != "2.0":
        raise BindingError(f"{where}: member 'jsonrpc' must be \"2.0\"")
    if "id" not in response:
        raise BindingError(f"{where}: member 'id' is missing")
    if ("result" in response) == ("error" in response):
        raise BindingError(f"{where}: a JSON-RPC response has exactly one of 'result' and 'error'")
    return response


def dumps_text(value: Any, where: str) -> str:
    """Compact JSON text of ``value`` (the library's serializer), or BindingError."""
    try:
        return _json.dumps(value).decode("utf-8")
    except (_json.JsonError, TypeError) as exc:
        raise BindingError(f"{where}: cannot be serialized as JSON ({exc})") from None


def chat_reply(response: object, *, binding: str) -> str:
    """The reply text for a JSON-RPC response in a conversation.

    The text is the compact JSON of the response when it fits one chat message
    (``chat.fits_message``); otherwise it is a JSON-RPC error ``-32603`` with
    the response's id, whose ``data`` gives the size and the limit. Both count
    the same thing, the chat message JSON the reply would take (its text as
    the core encodes it, plus :func:`chat.reply_allowance` for the message
    around it), so ``data.size > data.limit`` holds for every replaced reply.
    """
    where = f"{binding} chat reply"
    checked = _check_response(response, where)
    text = dumps_text(dict(checked), where)
    if fits_message(text):
        return text
    # The limit is on the whole message: count the text the way fits_message does,
    # with the room the message around it takes, not the text alone.
    size = encoded_size(text) + reply_allowance()
    replacement = error_response(
        checked["id"],
        INTERNAL_ERROR,
        f"Response too large: the reply would be a chat message of {size} bytes,"
        f" over the limit of {MAX_MESSAGE_JSON}",
        {"size": size, "limit": MAX_MESSAGE_JSON},
    )
    text = dumps_text(replacement, where)
    if not fits_message(text):
        # Only an id far larger than any request that fits a message gets here.
        raise BindingError(f"{where}: the response id is too large for any reply to fit a message")
    return text


def rpc_response(response: object, *, binding: str, limit: int = RPC_JSON_LIMIT) -> Response:
    """The Service RPC response envelope that carries a JSON-RPC response.

    The envelope is ``{"response": <response>}``. When its compact JSON is over
    ``limit`` bytes (default 10,000, the protocol text's SHOULD) or over what
    fits the padded block (``MAX_RESPONSE``), the envelope is the error
    ``too_large`` instead. ``limit`` may be raised up to ``MAX_RESPONSE``.
    """
    where = f"{binding} rpc response"
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_RESPONSE:
        raise BindingError(
            f"{where}: limit must be an integer from 1 to {MAX_RESPONSE}, got {limit!r}"
        )
    checked = _check_response(response, where)
    envelope = Response.success(dict(checked))
    size = len(dumps_text(envelope.to_dict(), where).encode("utf-8"))
    if size > limit:
        return Response.failure(
            ErrorCode.TOO_LARGE,
            f"response envelope of {size} bytes exceeds the limit of {limit} bytes",
        )
    return envelope


def envelope_of(service_request: object) -> Request:
    """The request envelope of a responder's handler argument.

    Accepts a :class:`Request` or any object with a ``request`` attribute that
    is one (the adapter's ``ServiceRequest``).
    """
    if isinstance(service_request, Request):
        return service_request
    inner = getattr(service_request, "request", None)
    if isinstance(inner, Request):
        return inner
    raise TypeError(
        f"expected a Request or an object whose .request is a Request,"
        f" got {type(service_request).__name__}"
    )


def refuse_envelope(envelope: Request, protocol: str, version_note: str) -> Response | None:
    """The envelope error for a request a binding's handler cannot take, or None.

    ``unsupported_protocol`` for another protocol; ``bad_request`` when the
    envelope carries ``version``, which both bindings omit (``version_note``
    says where the binding's version travels instead).
    """
    if envelope.protocol != protocol:
        return Response.failure(
            ErrorCode.UNSUPPORTED_PROTOCOL,
            f"this handler serves {protocol}, not {envelope.protocol}",
        )
    if envelope.version is not UNSET:
        return Response.failure(
            ErrorCode.BAD_REQUEST,
            f"the {protocol} binding omits the envelope's version: {version_note}",
        )
    return None


# -- what the chat transport needs of the A2A binding (re-exported by simplex_rpc.a2a) --

#: The request member that carries the A2A service parameters ("Service parameters").
SERVICE_PARAMETERS_MEMBER: Final = "a2a-service-parameters"
# RFC 9110 token: the characters of an HTTP field name.
_FIELD_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value a proxy can send as an HTTP header: visible Latin-1, spaces and tabs.
_FIELD_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
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
    if not isinstance(name, str) or not _FIELD_NAME.fullmatch(name):
        raise BindingError(f"{where}: {str(name)[:64]!r} is not a service parameter name")
    if not isinstance(value, str):
        raise BindingError(f"{where}: {name}: expected a string value, got {json_type(value)}")
    if not _FIELD_VALUE.fullmatch(value):
        raise BindingError(f"{where}: {name}: the value is not a valid header field value")


def header_field(text: str, where: str = "header") -> tuple[str, str]:
    """``'Name: value'`` as ``(name, value)``: one HTTP header a gateway sends upstream.

    The name is an RFC 9110 token; the value, trimmed of the blanks around it,
    is one a proxy can send (visible Latin-1, spaces and tabs). Anything else
    raises :class:`BindingError` naming ``where``; the message never repeats
    the value, which may be a credential.
    """
    if not isinstance(text, str):
        raise BindingError(f"{where}: expected 'Name: value', got {json_type(text)}")
    name, sep, value = text.partition(":")
    name = name.strip(" \t")
    if not sep:
        raise BindingError(f"{where}: expected 'Name: value', with a colon after the name")
    if not _FIELD_NAME.fullmatch(name):
        raise BindingError(f"{where}: {name[:64]!r} is not a header name (an HTTP token)")
    value = value.strip(" \t")
    if not _FIELD_VALUE.fullmatch(value):
        raise BindingError(f"{where} {name}: the value is not a valid header field value")
    return name, value


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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a command: a contact, or a member of a group.

    ``chat`` names the conversation (a contact's or a group's id, as the
    application knows it); ``member`` is the group member, None in a direct
    chat. Two callers are the same only when both parts are equal.
    """

    chat: str
    member: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.chat, str) or not self.chat:
            raise BindingError(
                f"caller: chat must be a non-empty string, got {json_type(self.chat)}"
            )
        if self.member is not None and (not isinstance(self.member, str) or not self.member):
            raise BindingError("caller: member must be a non-empty string or None")

    @classmethod
    def contact(cls, contact_id: str | int) -> Caller:
        """The caller in a direct chat with a contact."""
        return cls(chat=f"@{contact_id}")

    @classmethod
    def group_member(cls, group_id: str | int, member_id: str | int) -> Caller:
        """A member of a group; each member has their own contexts and tasks."""
        return cls(chat=f"#{group_id}", member=str(member_id))

    @property
    def key(self) -> str:
        """A string that names the caller, for stores keyed by strings."""
        return self.chat if self.member is None else f"{self.chat}/{self.member}"


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
            if not isinstance(parameter, str) or not _FIELD_NAME.fullmatch(parameter):
                raise BindingError(f"{where}: an API key scheme names its parameter in 'name'")
            found.add(parameter.lower())
            if api_key.get("location") == "cookie":
                found.add("cookie")
    return frozenset(found)

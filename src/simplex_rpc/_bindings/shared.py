"""What the MCP and A2A bindings share: JSON-RPC shapes, the size rules, the caller.

No I/O and no SDK imports. Both bindings carry one JSON-RPC request and end
their answer with one JSON-RPC response (protocol text, "MCP binding" and "A2A
binding"). A response above the size limit is replaced: in a conversation by a
JSON-RPC error ``-32603`` with the request's id, over Service RPC by the
envelope error ``too_large``.

It also holds what the adapter needs of a binding without knowing one: the
caller of a ``/_call`` (:class:`Caller`, public as ``simplex_rpc.a2a.Caller``),
what a responder's handler receives (:class:`CarriesRequest`) and the shape of a
binding's call policy (:class:`CallPolicy`), which :mod:`simplex_rpc._bindings`
looks up by protocol name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

from .._wire import strict_json as _json
from .._wire.envelope import UNSET, ErrorCode, Request, Response
from .._wire.seal import MAX_RESPONSE
from .._wire.strict_json import json_type
from ..chat import MAX_MESSAGE_JSON, encoded_size, fits_message, reply_allowance
from ..errors import SimplexRpcError

__all__ = [
    "FIELD_NAME",
    "FIELD_VALUE",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RPC_JSON_LIMIT",
    "BindingError",
    "CallPolicy",
    "Caller",
    "CarriesRequest",
    "ServiceRequestLike",
    "chat_reply",
    "dumps_text",
    "envelope_of",
    "error_response",
    "header_field",
    "invalid_request",
    "json_type",
    "refuse_envelope",
    "request_id",
    "rpc_response",
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


class CarriesRequest(Protocol):
    """What a responder's handler receives: the adapter's ``ServiceRequest``, or
    any object whose ``request`` is the request envelope."""

    @property
    def request(self) -> Request: ...


ServiceRequestLike: TypeAlias = Request | CarriesRequest
"""A responder handler's argument: the adapter's ``ServiceRequest``, or a bare
:class:`Request` (a handler called directly, as in tests)."""


def envelope_of(service_request: ServiceRequestLike) -> Request:
    """The request envelope of a responder's handler argument.

    Accepts a :class:`Request` or any object with a ``request`` attribute that
    is one (the adapter's ``ServiceRequest``); anything else is a TypeError.
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


# -- HTTP fields: a gateway's headers, and the A2A service parameters --

# RFC 9110 token: the characters of an HTTP field name.
FIELD_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value a proxy can send as an HTTP header: visible Latin-1, spaces and tabs.
FIELD_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


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
    if not FIELD_NAME.fullmatch(name):
        raise BindingError(f"{where}: {name[:64]!r} is not a header name (an HTTP token)")
    value = value.strip(" \t")
    if not FIELD_VALUE.fullmatch(value):
        raise BindingError(f"{where} {name}: the value is not a valid header field value")
    return name, value


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


class CallPolicy(Protocol):
    """A binding's rule for the ``/_call`` requests a caller may send, before sending.

    ``policy(request, group=..., agent_card=...)`` returns why the request must
    not be sent (the whole message of the refusal), or None to send it.
    ``group`` says whether the call goes to a group; ``agent_card`` is the
    called bot's card as JSON when the caller has one. A malformed request
    raises :class:`BindingError`. The adapter applies the policy its
    binding supplies (:func:`simplex_rpc._bindings.call_policy`) without
    knowing the binding.
    """

    def __call__(
        self, request: Mapping[str, Any], *, group: bool, agent_card: Mapping[str, Any] | None
    ) -> str | None: ...


def checked_list(
    values: Iterable[str], name: str, what: str, check: Callable[[str, object], None]
) -> tuple[str, ...]:
    """``values`` as a tuple: a list (not a string), not empty, each item passed by
    ``check(place, item)``, which raises :class:`BindingError` naming ``name[i]``.

    Both bindings' lists of supported versions are checked this way (MCP revisions,
    A2A Major.Minor versions); only the rule for one item differs.
    """
    if isinstance(values, str):
        raise BindingError(f"{name}: expected a list of {what}, got a string")
    out: list[str] = []
    for i, value in enumerate(values):
        check(f"{name}[{i}]", value)
        out.append(value)
    if not out:
        raise BindingError(f"{name}: the list is empty")
    return tuple(out)

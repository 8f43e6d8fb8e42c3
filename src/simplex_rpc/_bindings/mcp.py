"""The data of the MCP binding: no I/O and no SDK.

:mod:`simplex_rpc.mcp` re-exports its public names and documents them; the
bridge, the client transport and the gateway use them.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .._wire.envelope import ErrorCode, Response
from . import shared
from .shared import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RPC_JSON_LIMIT,
    BindingError,
    error_response,
    json_type,
)

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MIN_REVISION",
    "PROTOCOL",
    "PROTOCOL_VERSION_KEY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "BindingError",
    "chat_reply",
    "check_request",
    "check_revisions",
    "make_request",
    "revision_of",
    "rpc_disposition",
    "rpc_response",
    "unsupported_revision",
]


PROTOCOL: Final = "mcp"
MIN_REVISION: Final = "2026-07-28"
"""The first MCP revision this binding carries: each request names its revision."""
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

_REVISION: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def revision_of(message: object) -> str | None:
    """The MCP revision a request names in ``params._meta``, or None.

    None when the message is not an object, has no ``params._meta`` object, or
    the ``io.modelcontextprotocol/protocolVersion`` member is absent or not a
    string. Requests of revisions before 2026-07-28 name none.
    """
    if not isinstance(message, Mapping):
        return None
    params = message.get("params")
    if not isinstance(params, Mapping):
        return None
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    revision = meta.get(PROTOCOL_VERSION_KEY)
    return revision if isinstance(revision, str) else None


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_revisions(supported: Iterable[str]) -> tuple[str, ...]:
    """``supported`` as a tuple, checked: MCP revisions (YYYY-MM-DD) from 2026-07-28 on.

    Raises :class:`BindingError` for an empty list, a string in place of a
    list, or a revision this binding cannot carry.
    """
    return shared.checked_list(supported, "supported", "revisions", _check_revision)


def _check_revision(place: str, revision: object) -> None:
    if not isinstance(revision, str) or not _REVISION.fullmatch(revision) or not _is_date(revision):
        raise BindingError(f"{place}: {revision!r} is not an MCP revision (YYYY-MM-DD)")
    if revision < MIN_REVISION:
        raise BindingError(
            f"{place}: revision {revision} is before {MIN_REVISION};"
            " earlier revisions begin with an initialize handshake and are not carried"
        )


def _request_id(message: object) -> Any:
    return shared.request_id(message, allow_null=False)


def _invalid(message: object) -> str | None:
    """Why ``message`` is not a JSON-RPC 2.0 request as MCP has them, or None."""
    return shared.invalid_request(message, allow_null_id=False)


def unsupported_revision(
    request_id: Any, supported: Iterable[str], requested: str | None
) -> dict[str, Any]:
    """MCP's UnsupportedProtocolVersionError (``-32022``) as a JSON-RPC response.

    ``error.data`` lists the served revisions (``supported``) and, when the
    request named one, the ``requested`` revision, as the MCP SDK writes it.
    """
    data = _version_data(check_revisions(supported), requested)
    return error_response(
        request_id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data
    )


def check_request(message: object, *, supported: Iterable[str]) -> dict[str, Any] | None:
    """None for a valid JSON-RPC 2.0 request of a served revision; else the error response.

    The answers are the MCP SDK's, error object for error object (its modern
    request ladder, ``mcp.shared.inbound.classify_inbound_request``, and its
    modern connection's answer to ``initialize``), in the SDK's order:

    * ``-32600`` (Invalid Request) for a message that is not a JSON-RPC 2.0
      request: not an object, ``jsonrpc`` other than ``"2.0"``, no ``id`` (a
      notification), an id that is not a string or an integer (MCP forbids
      ``null``), no method, or ``params`` that is not an object. The id is
      the request's when it is a valid one, else ``null``.
    * ``-32022`` (UnsupportedProtocolVersionError) for ``initialize``, the
      handshake that begins the revisions before 2026-07-28, which this
      binding does not carry: ``data.supported`` and, when the request offers
      one, ``data.requested`` (its ``protocolVersion``).
    * ``-32602`` (Invalid params) when ``params._meta`` is not an object that
      carries both ``io.modelcontextprotocol/protocolVersion`` and
      ``io.modelcontextprotocol/clientCapabilities``, or when the protocol
      version in it is not a string: the envelope is malformed, which is not
      a version to negotiate.
    * ``-32022`` when the revision is a string not in ``supported``, with
      ``data.supported`` and ``data.requested``.

    Params themselves are not validated: that is the server's ``-32602``.
    """
    served = check_revisions(supported)
    reason = _invalid(message)
    if reason is not None:
        return error_response(_request_id(message), INVALID_REQUEST, f"Invalid Request: {reason}")
    assert isinstance(message, Mapping)
    params = message.get("params")
    if message["method"] == "initialize":
        offered = params.get("protocolVersion") if isinstance(params, Mapping) else None
        return error_response(
            message["id"],
            UNSUPPORTED_PROTOCOL_VERSION,
            # The SDK's words (mcp.server.runner, a modern connection's answer).
            "connection is serving the 2026-07-28 protocol;"
            " the initialize handshake is not accepted",
            _version_data(served, offered if isinstance(offered, str) else None),
        )
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping):
        return error_response(
            message["id"],
            INVALID_PARAMS,
            "params._meta must be an object carrying the required"
            f" {PROTOCOL_VERSION_KEY!r} and {CLIENT_CAPABILITIES_KEY!r} envelope keys",
        )
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        return error_response(
            message["id"],
            INVALID_PARAMS,
            f"params._meta is missing the required envelope key(s): {', '.join(missing)}",
        )
    revision = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(revision, str):
        return error_response(
            message["id"], INVALID_PARAMS, "the protocol-version envelope value must be a string"
        )
    if revision not in served:
        return unsupported_revision(message["id"], served, revision)
    return None


def _version_data(served: Iterable[str], requested: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"supported": list(served)}
    if requested is not None:
        data["requested"] = requested
    return data


def make_request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: str | int,
    revision: str = MIN_REVISION,
    client_capabilities: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC request of this binding: ``params`` with the ``_meta`` envelope.

    ``_meta`` gets the revision and the client capabilities (``{}`` when not
    given) after any ``_meta`` members ``params`` already has; ``_meta`` is
    the last member of ``params``.
    """
    if not isinstance(method, str) or not method:
        raise BindingError("method: expected a non-empty string")
    if not shared.valid_id(id, allow_null=False):
        raise BindingError(f"id: expected a string or an integer, got {json_type(id)}")
    check_revisions([revision])
    body = dict(params or {})
    meta = body.pop("_meta", None) or {}
    if not isinstance(meta, Mapping):
        raise BindingError(f"params._meta: expected an object, got {json_type(meta)}")
    meta = dict(meta)
    meta[PROTOCOL_VERSION_KEY] = revision
    meta[CLIENT_CAPABILITIES_KEY] = dict(client_capabilities or {})
    body["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": body}


def chat_reply(response: Mapping[str, Any]) -> str:
    """The text of the last reply in a conversation for a JSON-RPC response.

    The compact JSON of ``response`` when it fits one chat message
    (``chat.fits_message``); otherwise a JSON-RPC error ``-32603`` with the
    request's id and ``data`` ``{"size": ..., "limit": 15602}``, where ``size``
    counts the whole message as the limit does (``size > limit``).
    """
    return shared.chat_reply(response, binding=PROTOCOL)


def rpc_response(response: Mapping[str, Any], *, limit: int = RPC_JSON_LIMIT) -> Response:
    """The Service RPC response envelope for a JSON-RPC response.

    ``{"response": <response>}``, or the envelope error ``too_large`` when its
    JSON is over ``limit`` bytes (default 10,000, the protocol text's SHOULD)
    or would not fit the padded block.
    """
    return shared.rpc_response(response, binding=PROTOCOL, limit=limit)


def rpc_disposition(
    message: Mapping[str, Any], *, conversation_tools: Iterable[str] = ()
) -> Response | None:
    """None when Service RPC may pass the request on; else ``conversation_required``.

    A ``tools/call`` of a tool in ``conversation_tools`` (the tools marked as
    needing a conversation) gets the envelope error ``conversation_required``:
    the requester connects to the address and calls it with ``/_call mcp``.
    """
    if not isinstance(message, Mapping):
        raise BindingError(f"request: expected a JSON-RPC request object, got {json_type(message)}")
    if isinstance(conversation_tools, str):
        raise BindingError("conversation_tools: expected a collection of tool names, got a string")
    tools = frozenset(conversation_tools)
    if message.get("method") != "tools/call" or not tools:
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, Mapping) else None
    if isinstance(name, str) and name in tools:
        return Response.failure(
            ErrorCode.CONVERSATION_REQUIRED,
            f"tool {name[:64]!r} needs a conversation: call it with /_call mcp",
        )
    return None

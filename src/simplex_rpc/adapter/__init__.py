"""A thin asyncio adapter to the SimpleX chat core: both transports of the protocol.

The chat core does the work: it opens the connection to the address, runs the
double ratchet, signs with ``sign_key=``, pads, verifies, and reports the
verified ``signerKey``. This package drives it through its command API and is
the only part of the library that does I/O. Its parts:

* :mod:`._transports`: the WebSocket API of the SimpleX CLI
  (:meth:`ChatCore.connect`; a command is ``{"corrId", "cmd"}``, its answer
  ``{"corrId", "resp"}``, an event ``{"resp"}`` without a ``corrId``:
  simplex-chat ``bots/README.md``) and the native library of the
  ``simplex-chat`` Python package (:meth:`ChatCore.native`).
* :mod:`._frames`: the core's frames read strictly, with the library's JSON
  rules (the envelope a frame carries cut out and read on its own).
* :mod:`._errors`: the adapter's errors (:class:`ChatCoreClosed`,
  :class:`ChatCoreTimeout`) and the strict JSON reading of a core message.
* :mod:`._explain`: what a failure means, in one table: a sentence and a hint for
  the core's errors a user meets, and what was found at an address that could not
  be connected to.
* :mod:`._core`: ``ChatCore``'s commands and events, over a small pool of
  connections to one core (the core runs one command at a time per connection
  and gives each event to one connection: ``apps/simplex-chat/Server.hs``).
* :mod:`._pool`: the connections a blocking ``/_service_request`` runs on.
* :mod:`._admission`: request admission without I/O (slots, backlog, deadlines
  from arrival, repeats, shedding, the stop), the policy of both servers.
* :mod:`._service`: Service RPC, the requester and the responder: the raw layer
  (any JSON object) and the protocol text's envelope as a codec over it.
* :mod:`._raw`: the raw layer's values (``RawRequest``) and error shapes.
* :mod:`._budget`: the responder's rate limits (token buckets), without I/O.
* :mod:`._answers`: idempotent answers: stores kept by (signer, request digest).
* :mod:`._chat`: the chat transport, ``/_call`` sent and answered as messages.
* :mod:`._declare`: the profile declarations, written and read through the core.
* :mod:`._client`: the caller's round trip the SDK client transports
  (``simplex_rpc.mcp``, ``simplex_rpc.a2a``) adapt: one request to one bot over
  Service RPC or in a conversation, and one classification of its failures.
* :mod:`._call_options`: :class:`CallOptions`, the keywords both client transports
  take alike and pass to the round trip.

Secrets: the private key given as ``sign_key`` never appears in a log line, an
exception message or a repr; everything logged passes through
:func:`simplex_rpc._wire.redact.redact`. What a peer sent is data: it is parsed
strictly, never interpreted, and logged escaped and truncated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..errors import ChatCoreError
from ._answers import (
    DEFAULT_ANSWER_WINDOW,
    AnswerKey,
    AnswerStore,
    AnswerStoreProtocol,
    Begun,
    SQLiteAnswerStore,
)
from ._budget import RateLimit
from ._budget import _Limiter as _Limiter
from ._call_options import CallOptions
from ._chat import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CALL_WAIT,
    CallRefused,
    IncomingCall,
    ReplySink,
    _ChatCalls,
)
from ._chat import CallHandler as CallHandler
from ._core import DEFAULT_COMMAND_TIMEOUT as DEFAULT_COMMAND_TIMEOUT
from ._core import DEFAULT_EVENT_HOLD, EventStream, _CoreBase
from ._declare import LinkDeclarations, _Declarations
from ._errors import ChatCoreClosed, ChatCoreTimeout
from ._errors import _loads_core as _loads_core
from ._raw import (
    ENVELOPE_ERRORS,
    TYPED_ERRORS,
    EnvelopeErrors,
    ErrorFormat,
    RawRequest,
    TypedErrors,
)
from ._service import (
    DEFAULT_HANDLER_TIMEOUT,
    MAX_RAW_REQUEST,
    RESPONSE_WINDOW,
    ServeOutcome,
    ServiceAddress,
    ServiceRequest,
    _ServiceRpc,
    raw_request_command,
    service_request_command,
)
from ._service import DEFAULT_REQUEST_TIMEOUT as DEFAULT_REQUEST_TIMEOUT
from ._service import Handler as Handler
from ._service import RawHandler as RawHandler
from ._service import _parse_request_data as _parse_request_data
from ._service import _parse_response_data as _parse_response_data
from ._transports import LibsimplexHandle, NativeHandle, _Transport

_P = ParamSpec("_P")
_R = TypeVar("_R")

__all__ = [
    "DEFAULT_ANSWER_WINDOW",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CALL_WAIT",
    "DEFAULT_HANDLER_TIMEOUT",
    "ENVELOPE_ERRORS",
    "MAX_RAW_REQUEST",
    "RESPONSE_WINDOW",
    "TYPED_ERRORS",
    "AnswerKey",
    "AnswerStore",
    "AnswerStoreProtocol",
    "Begun",
    "CallOptions",
    "CallRefused",
    "ChatCore",
    "ChatCoreClosed",
    "ChatCoreError",
    "ChatCoreTimeout",
    "EnvelopeErrors",
    "ErrorFormat",
    "EventStream",
    "IncomingCall",
    "LibsimplexHandle",
    "LinkDeclarations",
    "NativeHandle",
    "RateLimit",
    "RawRequest",
    "ReplySink",
    "SQLiteAnswerStore",
    "ServeOutcome",
    "ServiceAddress",
    "ServiceRequest",
    "TypedErrors",
    "raw_request_command",
    "service_request_command",
]


def _part_method(
    part: str, method: Callable[Concatenate[Any, _P], _R]
) -> Callable[Concatenate[ChatCore, _P], _R]:
    """``ChatCore.<name>``: the method of its part ``part``, with its signature and text."""
    name = method.__name__

    def delegated(self: ChatCore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        bound: Callable[_P, _R] = getattr(getattr(self, part), name)
        return bound(*args, **kwargs)

    functools.update_wrapper(delegated, method)
    return delegated


class ChatCore(_CoreBase):
    """A connection to a SimpleX chat core: Service RPC and the chat transport.

    Use :meth:`connect` (WebSocket) or :meth:`native` as an async context
    manager. Commands may run concurrently; answers are matched by
    ``corrId``. Over WebSocket a ``ChatCore`` is a small pool of connections to
    one core (:meth:`connect`: commands and answers on one, each blocking
    ``/_service_request`` on one of its own), whose events are read as one
    stream. One client per core: another program connected to the same core
    takes events too, and the library cannot see that. When a connection
    drops, every pending command fails with :class:`ChatCoreClosed`.

    It is composed of its parts, each using the core's commands, events and
    request sinks (:class:`._core._CoreBase`) and nothing of the others but
    what it is given: the declarations (:mod:`._declare`), Service RPC
    (:mod:`._service`: the requester and ``serve``) and the chat transport
    (:mod:`._chat`: ``serve_calls`` and ``call``).
    """

    def __init__(
        self,
        transport: _Transport,
        *,
        event_buffer: int = 10_000,
        event_hold: float = DEFAULT_EVENT_HOLD,
    ) -> None:
        """Wrap a transport; use :meth:`connect` or :meth:`native` instead of calling this."""
        super().__init__(transport, event_buffer=event_buffer, event_hold=event_hold)
        self._declarations = _Declarations(self)
        self._rpc = _ServiceRpc(self, self._declarations)
        self._calls = _ChatCalls(self, self._declarations)
        # A request no serve takes in time is answered by Service RPC's part.
        self._on_unserved = self._rpc._unserved_request

    # Service RPC (._service)
    service_address = _part_method("_rpc", _ServiceRpc.service_address)
    service_request = _part_method("_rpc", _ServiceRpc.service_request)
    service_request_raw = _part_method("_rpc", _ServiceRpc.service_request_raw)
    serve = _part_method("_rpc", _ServiceRpc.serve)
    serve_raw = _part_method("_rpc", _ServiceRpc.serve_raw)
    # The chat transport (._chat)
    serve_calls = _part_method("_calls", _ChatCalls.serve_calls)
    call = _part_method("_calls", _ChatCalls.call)
    call_stream = _part_method("_calls", _ChatCalls.call_stream)
    # Declarations (._declare)
    declare = _part_method("_declarations", _Declarations.declare)
    declared = _part_method("_declarations", _Declarations.declared)
    link_declarations = _part_method("_declarations", _Declarations.link_declarations)
    _declare_transport = _part_method("_declarations", _Declarations._declare_transport)

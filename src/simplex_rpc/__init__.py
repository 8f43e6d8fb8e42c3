"""simplex-rpc: the Service RPC transport of SimpleX agent protocols.

One signed, padded request and one response between an agent and a bot,
without a conversation. This package is the no-I/O data layer: keys,
session-bound signatures, envelopes, the agent's Service RPC block and
padding, exact to the byte (see ``wire.md``); :mod:`simplex_rpc.agent` holds
the agent's values (reply queues, messages). The top-level sealing and
padding functions are those of the active backend (:func:`backend`).
"""

from __future__ import annotations

from . import agent
from ._wire import backend as _backend
from ._wire.backend import BackendInfo, backend, backend_info, backends
from ._wire.batch import BlockFailure, OpenedRequests
from ._wire.envelope import UNSET, ErrorCode, ErrorInfo, Request, Response, check_request_key
from ._wire.keys import SIGNING_DOMAIN, PublicKey, SigningKey, session_tag
from ._wire.padding import PADDED_LENGTH
from ._wire.seal import MAX_RESPONSE, OpenedRequest, max_request_payload, max_response_payload
from .errors import (
    BadSignature,
    EnvelopeError,
    FrameError,
    KeyFormatError,
    PaddingError,
    PayloadTooLarge,
    ServiceRejected,
    SimplexRpcError,
)

__version__ = "0.1.0"

pad = _backend.active.pad
unpad = _backend.active.unpad
pad_many = _backend.active.pad_many
unpad_many = _backend.active.unpad_many
seal_request = _backend.active.seal_request
open_request = _backend.active.open_request
seal_response = _backend.active.seal_response
seal_rejection = _backend.active.seal_rejection
open_response = _backend.active.open_response
seal_requests = _backend.active.seal_requests
open_requests = _backend.active.open_requests

__all__ = [
    "MAX_RESPONSE",
    "PADDED_LENGTH",
    "SIGNING_DOMAIN",
    "UNSET",
    "BackendInfo",
    "BadSignature",
    "BlockFailure",
    "EnvelopeError",
    "ErrorCode",
    "ErrorInfo",
    "FrameError",
    "KeyFormatError",
    "OpenedRequest",
    "OpenedRequests",
    "PaddingError",
    "PayloadTooLarge",
    "PublicKey",
    "Request",
    "Response",
    "ServiceRejected",
    "SigningKey",
    "SimplexRpcError",
    "agent",
    "backend",
    "backend_info",
    "backends",
    "check_request_key",
    "max_request_payload",
    "max_response_payload",
    "open_request",
    "open_requests",
    "open_response",
    "pad",
    "pad_many",
    "seal_rejection",
    "seal_request",
    "seal_requests",
    "seal_response",
    "session_tag",
    "unpad",
    "unpad_many",
]

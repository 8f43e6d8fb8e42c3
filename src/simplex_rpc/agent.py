"""The SimpleX agent's own Service RPC values (agent v8), with strict codecs.

``SMPServer`` and ``SMPQueueInfo`` (a reply queue, with its SMP queue URI text
form), ``RequestSignature``, and the three messages of the padded block:
``AgentServiceRequest`` (``'A'``), ``AgentServiceResponse`` (``'P'``) and
``AgentRejection`` (``'J'``), each with ``encode()`` and a strict decode
(``decode_message``, ``SMPQueueInfo.decode``, ``SMPQueueInfo.from_uri``). The
size limits depend on the reply queue: :func:`max_request_payload`. Sealing and
opening the padded block are ``simplex_rpc.seal_request`` and its siblings.

The bytes are simplexmq's (wire.md section 4 cites each rule).
"""

from __future__ import annotations

from ._wire.agent_block import (
    CURRENT_CLIENT_VERSION,
    AgentRejection,
    AgentServiceMessage,
    AgentServiceRequest,
    AgentServiceResponse,
    RequestSignature,
    SMPQueueInfo,
    SMPServer,
    decode_message,
)
from ._wire.seal import (
    NO_PQ_PADDED_LENGTH,
    PQ_PADDED_LENGTH,
    REQUEST_PADDED_LENGTH,
    max_request_payload,
    max_response_payload,
)

__all__ = [
    "CURRENT_CLIENT_VERSION",
    "NO_PQ_PADDED_LENGTH",
    "PQ_PADDED_LENGTH",
    "REQUEST_PADDED_LENGTH",
    "AgentRejection",
    "AgentServiceMessage",
    "AgentServiceRequest",
    "AgentServiceResponse",
    "RequestSignature",
    "SMPQueueInfo",
    "SMPServer",
    "decode_message",
    "max_request_payload",
    "max_response_payload",
]

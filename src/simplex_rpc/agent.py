"""The SimpleX agent's own Service RPC values (agent v8), with strict codecs.

``SMPServer`` and ``SMPQueueInfo`` (a reply queue, with its SMP queue URI text
form), ``RequestSignature``, and the three messages of the padded block:
``AgentServiceRequest`` (``'A'``), ``AgentServiceResponse`` (``'P'``) and
``AgentRejection`` (``'J'``), each with ``encode()`` and a strict decode
(``decode_message``, ``SMPQueueInfo.decode``, ``SMPQueueInfo.from_uri``). The
size limits depend on the reply queue: :func:`max_request_payload`. Sealing and
opening the padded block are ``simplex_rpc.seal_request`` and its siblings.

The bytes are simplexmq's (wire.md section 4 cites each rule).

The Service RPC cryptography end to end (agent v8: X3DH with X448 and sntrup761,
the ratchet's first message both ways, the per-queue ``crypto_box``) seals a
request to a service address's keys and opens it, and answers::

    from simplex_rpc import agent
    service = agent.AddressKeys.generate(pq=True)       # the service's private keys
    published = service.public                            # in its link data
    sent = agent.seal_service_request(payload, published, reply_queue=queue, sign_key=key)
    got = agent.open_service_request(sent.message, service)
    answer = agent.seal_service_response(b"...", got.reply)
    assert agent.open_service_response(answer, sent.state) == b"..."

It needs ``cryptography`` (the ``crypto`` extra) and, for the post-quantum KEM,
``pqcrypto`` (the ``sntrup761`` extra); its names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

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
from .errors import install_hint

#: The cryptography's names (``_wire.agent_crypto``), imported on first use.
_CRYPTO_NAMES = {
    name: "_wire.agent_crypto"
    for name in (
        "AddressKeys",
        "AddressPublicKeys",
        "OpenedServiceRequest",
        "RequestRandomness",
        "RequesterState",
        "ResponseRandomness",
        "SealedRequest",
        "ServiceReply",
        "open_service_request",
        "open_service_response",
        "seal_service_rejection",
        "seal_service_request",
        "seal_service_response",
    )
}


def __getattr__(name: str) -> Any:
    private = _CRYPTO_NAMES.get(name)
    if private is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        found = importlib.import_module(f"simplex_rpc.{private}")
    except ImportError as exc:
        raise ImportError(
            f"{__name__}.{name} needs cryptography: {install_hint('crypto')} ({exc})"
        ) from exc
    return getattr(found, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_CRYPTO_NAMES})


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
    *_CRYPTO_NAMES,
]

"""The SimpleX agent's own messages (agent v8): Service RPC cryptography end to end.

A requester seals a request to a service address's keys; the service opens it,
verifies its signature and answers on the reply queue; the requester reads the
answer. Every layer is simplexmq's (commit ``22815214…``; ``docs/wire.md``)::

    from simplex_rpc import agent
    service = agent.AddressKeys.generate(pq=True)       # the service's private keys
    published = service.public                            # in its link data
    queue = agent.ReplyQueue(("smp.example.net",), "", key_hash, sender_id)
    sent = agent.seal_service_request(payload, published, reply_queue=queue, sign_key=key)
    got = agent.open_service_request(sent.message, service)
    answer = agent.seal_service_response(b"...", got.reply)
    assert agent.open_service_response(answer, sent.state) == b"..."

The cryptography needs ``cryptography`` (the ``crypto`` extra) and, for the
post-quantum KEM, ``pqcrypto`` (the ``sntrup761`` extra); the names that need
them are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_CRYPTO_NAMES = {
    name: "_wire.agent_crypto"
    for name in (
        "AddressKeys",
        "AddressPublicKeys",
        "OpenedServiceRequest",
        "ReplyQueue",
        "RequestRandomness",
        "RequesterState",
        "ResponseRandomness",
        "SealedRequest",
        "ServiceRejected",
        "ServiceReply",
        "max_request_payload",
        "max_response_payload",
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
            f"{__name__}.{name} needs cryptography: pip install 'simplex-rpc[crypto]' ({exc})"
        ) from exc
    return getattr(found, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_CRYPTO_NAMES})


__all__ = sorted(_CRYPTO_NAMES)

"""Reply queues for the tests: the agent's ``SMPQueueInfo`` values (wire.md section 4).

``QUEUE`` is the common shape, one host at client version 4 with queue mode
messaging, as the agent creates its reply queue (V8 Agent.hs ``joinConnSrv'``:
``SMPQueueInfo rqV (rcvSMPQueueAddress rq)``); ``THREE_HOSTS`` has three hosts
and a port. Every field is fixed, so blocks sealed with them are deterministic.
"""

from __future__ import annotations

from typing import Final

from simplex_rpc.agent import SMPQueueInfo, SMPServer

X25519_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b656e032100")


def queue(
    hosts: tuple[str, ...] = ("smp.example.com",),
    port: str = "",
    *,
    version: int = 4,
    mode: str | None = "M",
    key_hash: bytes = bytes(range(32)),
    sender_id: bytes = bytes(range(24)),
) -> SMPQueueInfo:
    """A reply queue with the given server and the tests' fixed ids and key."""
    dh = X25519_SPKI_PREFIX + bytes(range(64, 96))
    return SMPQueueInfo(version, SMPServer(hosts, port, key_hash), sender_id, dh, mode)  # type: ignore[arg-type]


QUEUE: Final = queue()
THREE_HOSTS: Final = queue(
    ("smp.example.com", "abcdefghijklmnop.onion", "192.0.2.7"), "5223", mode="C"
)

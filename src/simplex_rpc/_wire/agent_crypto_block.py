"""The padded inner block of a Service RPC message, as far as the cryptography needs it.

A minimal, private codec of ``AgentServiceRequest`` (``'A'``), ``AgentServiceResponse``
(``'P'``) and ``AgentRejection`` (``'J'``) with the reply queue's ``SMPQueueInfo``
(simplexmq ``Agent/Protocol.hs`` at ``22815214…``; ``Protocol.hs`` for the server),
used until the wire layer's own block codec (the issue "The agent's own bytes")
is merged; the cryptography then calls that codec instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..errors import AgentCryptoError
from .keys import SPKI_LENGTH as ED25519_SPKI_LENGTH
from .keys import SPKI_PREFIX as ED25519_SPKI_PREFIX
from .ratchet import Reader, short

X25519_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b656e032100")
X25519_LENGTH: Final = 32
SHORT_LINKS_CLIENT_VERSION: Final = 4  # shortLinksSMPClientVersion
SND_AUTH_KEY_CLIENT_VERSION: Final = 3  # sndAuthKeySMPClientVersion
CURRENT_CLIENT_VERSION: Final = 4  # currentSMPClientVersion


def x25519_spki(raw: bytes) -> bytes:
    return X25519_SPKI_PREFIX + raw


def read_x25519(reader: Reader, what: str) -> bytes:
    at = reader.pos
    der = reader.short(what)
    if len(der) != len(X25519_SPKI_PREFIX) + X25519_LENGTH or not der.startswith(
        X25519_SPKI_PREFIX
    ):
        reader.fail(f"{what}: not the 44-byte X.509 SPKI of an X25519 key", at)
    return der[len(X25519_SPKI_PREFIX) :]


def read_ed25519(reader: Reader, what: str) -> bytes:
    at = reader.pos
    der = reader.short(what)
    if len(der) != ED25519_SPKI_LENGTH or not der.startswith(ED25519_SPKI_PREFIX):
        reader.fail(f"{what}: not the 44-byte X.509 SPKI of an Ed25519 key", at)
    return der[len(ED25519_SPKI_PREFIX) :]


@dataclass(frozen=True)
class ReplyQueue:
    """Where the answer goes: an SMP server, the sender id and the client version.

    ``hosts`` are the server's ``strEncode``d transport hosts, ``port`` its port text
    (``""`` for the default), ``key_hash`` its key hash; ``queue_mode`` is ``"M"``
    (the agent's reply queue Q_A: a messaging queue), ``"C"`` or None. The queue's
    X25519 key is not here: it is made with the requester's randomness.
    """

    hosts: tuple[str, ...]
    port: str
    key_hash: bytes
    sender_id: bytes
    client_version: int = CURRENT_CLIENT_VERSION
    queue_mode: str | None = "M"

    def __post_init__(self) -> None:
        if not self.hosts:
            raise AgentCryptoError("reply queue: no host", layer="reply queue")
        if self.queue_mode not in ("M", "C", None):
            raise AgentCryptoError(
                f"reply queue: queue mode {self.queue_mode!r} is not 'M', 'C' or None",
                layer="reply queue",
            )
        if not 2 <= self.client_version <= CURRENT_CLIENT_VERSION:
            raise AgentCryptoError(
                f"reply queue: client version {self.client_version} is not 2 to"
                f" {CURRENT_CLIENT_VERSION}",
                layer="reply queue",
            )

    def encode(self, dh_public: bytes) -> bytes:
        """``smpEncode`` of the ``SMPQueueInfo`` with the queue's X25519 public key."""
        server = (
            bytes((len(self.hosts),))
            + b"".join(short(h.encode("ascii")) for h in self.hosts)
            + short(self.port.encode("ascii"))
            + short(self.key_hash)
        )
        out = (
            self.client_version.to_bytes(2, "big")
            + server
            + short(self.sender_id)
            + short(x25519_spki(dh_public))
        )
        if self.client_version >= SHORT_LINKS_CLIENT_VERSION:
            return out + (self.queue_mode or "").encode("ascii")
        if self.client_version >= SND_AUTH_KEY_CLIENT_VERSION and self.queue_mode == "M":
            return out + b"T"
        return out


def read_queue_info(reader: Reader) -> tuple[ReplyQueue, bytes]:
    """Read one ``SMPQueueInfo`` (client version 2 or later): the queue and its DH key."""
    at = reader.pos
    version = reader.word16("client version")
    if not 2 <= version:
        reader.fail(f"client version {version} (the legacy encoding is not read)", at)
    count = reader.byte("host count")
    if count == 0:
        reader.fail("no host (NonEmpty)", reader.pos - 1)
    hosts = []
    for _ in range(count):
        at = reader.pos
        host = reader.short("host")
        if not host or not host.isascii():
            reader.fail("host: not ASCII text", at)
        hosts.append(host.decode("ascii"))
    at = reader.pos
    port = reader.short("port")
    if not port.isascii():
        reader.fail("port: not ASCII text", at)
    key_hash = reader.short("key hash")
    sender_id = reader.short("sender id")
    dh_public = read_x25519(reader, "DH key")
    mode: str | None = None
    if reader.pos < len(reader.data) and reader.data[reader.pos] in b"MCTF":
        tag = reader.byte("queue mode")
        mode = {0x4D: "M", 0x43: "C", 0x54: "M", 0x46: "C"}[tag]
    queue = ReplyQueue(
        tuple(hosts), port.decode("ascii"), key_hash, sender_id, version, mode
    )
    return queue, dh_public


def encode_request(
    queue: ReplyQueue, dh_public: bytes, signature: tuple[bytes, bytes] | None, payload: bytes
) -> bytes:
    """``AgentServiceRequest (q :| []) sig payload``: ``'A'``, one queue, the signature, payload."""
    sig = b"0"
    if signature is not None:
        key, value = signature
        sig = b"1" + short(ED25519_SPKI_PREFIX + key) + short(value)
    return b"A\x01" + queue.encode(dh_public) + sig + payload


@dataclass(frozen=True)
class Block:
    """An unpadded Service RPC ``AgentMessage``: ``tag`` ``"A"``, ``"P"`` or ``"J"``.

    ``payload`` is the request or response payload, or the rejection's reason;
    ``queues`` and ``signature`` (key, value) are the request's.
    """

    tag: str
    payload: bytes
    queues: tuple[tuple[ReplyQueue, bytes], ...] = ()
    signature: tuple[bytes, bytes] | None = None


def decode_block(data: bytes) -> Block:
    """Read an unpadded ``AgentMessage`` of Service RPC; any other tag is refused."""
    reader = Reader(data, "agent message")
    tag = reader.char("message tag", b"APJ")
    if tag == 0x50:
        return Block("P", reader.tail())
    if tag == 0x4A:
        return Block("J", reader.tail())
    count = reader.byte("reply queue count")
    if count == 0:
        reader.fail("no reply queue (NonEmpty)", reader.pos - 1)
    queues = tuple(read_queue_info(reader) for _ in range(count))
    signature = None
    if reader.maybe("request signature"):
        key = read_ed25519(reader, "signer key")
        at = reader.pos
        value = reader.short("signature")
        if len(value) != 64:
            reader.fail(f"signature of {len(value)} bytes (Ed25519 has 64)", at)
        signature = (key, value)
    return Block("A", reader.tail(), queues, signature)

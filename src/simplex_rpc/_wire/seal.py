"""Sealing and opening the agent's Service RPC block: encode, sign, pad (pure Python).

The block is the agent's own (wire.md section 4; V8 Agent/Protocol.hs ``AgentMessage``
and Agent.hs ``sendServiceRequest'``, ``prepareReply``): a request is
``'A' ‖ reply queues ‖ Maybe RequestSignature ‖ payload`` padded to 11,106 bytes
(``e2eEncConnInfoLength PQSupportOn``), a response ``'P' ‖ payload`` padded to
11,106, or to 14,832 when the service address has PQ support off, and a
rejection ``'J' ‖ reason`` likewise. Sealing and opening work on payload bytes
and never parse them: envelope parsing is a separate, explicit step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..errors import FrameError, PayloadTooLarge, ServiceRejected
from .agent_block import (
    REJECTION_TAG,
    RESPONSE_TAG,
    SIGNATURE_FIELD_LENGTH,
    RequestSignature,
    SMPQueueInfo,
    parse_request_head,
    request_head,
    tag_error,
)
from .keys import PublicKey, SigningKey, session_tag
from .padding import pad, unpad

Buffer = bytes | bytearray | memoryview

#: V8 Agent/Protocol.hs ``e2eEncConnInfoLength``: PQSupportOn 11,106, PQSupportOff 14,832.
REQUEST_PADDED_LENGTH: Final = 11106
PQ_PADDED_LENGTH: Final = 11106
NO_PQ_PADDED_LENGTH: Final = 14832
RESPONSE_LENGTHS: Final = (PQ_PADDED_LENGTH, NO_PQ_PADDED_LENGTH)


def response_length(pq_support: bool) -> int:
    """The padded length of a response or rejection for the address's PQ support."""
    if not isinstance(pq_support, bool):
        raise TypeError(f"pq_support: expected bool, got {type(pq_support).__name__}")
    return PQ_PADDED_LENGTH if pq_support else NO_PQ_PADDED_LENGTH


def max_request_payload(reply_queue: SMPQueueInfo, signed: bool = True) -> int:
    """The largest request payload that fits the block with ``reply_queue``.

    ``11,106 - 2 - 1 ('A') - 1 (count) - len(queue) - (111 signed, 1 unsigned)``.
    """
    check_reply_queue(reply_queue)
    return request_room(len(reply_queue.encode()), signed)


def request_room(queue_length: int, signed: bool) -> int:
    """:func:`max_request_payload` for a reply queue of ``queue_length`` encoded bytes."""
    sig = SIGNATURE_FIELD_LENGTH if signed else 1
    return REQUEST_PADDED_LENGTH - 2 - 2 - queue_length - sig


def max_response_payload(pq_support: bool = True) -> int:
    """The largest response payload (or rejection reason): 11,103, or 14,829 without PQ."""
    return response_length(pq_support) - 3


#: The largest response payload for an address with PQ support (the agent's default).
MAX_RESPONSE: Final = max_response_payload(True)  # 11103


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenedRequest:
    """An opened request block: the payload, the verified signer or None, the reply queues."""

    payload: bytes
    signer: PublicKey | None
    reply_queues: tuple[SMPQueueInfo, ...]

    @property
    def reply_queue(self) -> SMPQueueInfo:
        """The first reply queue: the one the agent answers through (``replyQueue :| _``)."""
        return self.reply_queues[0]


def _opened_request_builder() -> Callable[
    [bytes, PublicKey | None, tuple[SMPQueueInfo, ...]], OpenedRequest
]:
    # Bound once (closure cells read as fast as locals): the C backend's hot path.
    new = object.__new__
    cls = OpenedRequest
    set_payload, set_signer, set_queues = (
        OpenedRequest.__dict__[name].__set__ for name in ("payload", "signer", "reply_queues")
    )

    def opened_request(
        payload: bytes, signer: PublicKey | None, reply_queues: tuple[SMPQueueInfo, ...]
    ) -> OpenedRequest:
        """``OpenedRequest(payload=..., signer=..., reply_queues=...)`` of fields already of
        their types: the slots set directly, as the dataclass's own ``__init__`` sets them
        (object.__setattr__), without its keyword handling."""
        opened = new(cls)
        set_payload(opened, payload)
        set_signer(opened, signer)
        set_queues(opened, reply_queues)
        return opened

    return opened_request


opened_request: Final = _opened_request_builder()


def check_reply_queue(reply_queue: object) -> SMPQueueInfo:
    """``reply_queue`` if it is an :class:`SMPQueueInfo`; TypeError otherwise."""
    if not isinstance(reply_queue, SMPQueueInfo):
        raise TypeError(f"reply_queue: expected SMPQueueInfo, got {type(reply_queue).__name__}")
    return reply_queue


def check_request_size(size: int, reply_queue: SMPQueueInfo, signed: bool) -> None:
    """Raise :class:`PayloadTooLarge` if a request payload cannot fit the block."""
    limit = max_request_payload(reply_queue, signed)
    if size > limit:
        kind = "a signed request" if signed else "an unsigned request"
        raise PayloadTooLarge(
            f"payload of {size} bytes is too large: at most {limit} bytes fit {kind}"
            f" with this reply queue",
            size=size,
            limit=limit,
        )


def check_response_size(size: int, pq_support: bool, what: str = "a response") -> None:
    """Raise :class:`PayloadTooLarge` if a response payload cannot fit the block."""
    limit = max_response_payload(pq_support)
    if size > limit:
        raise PayloadTooLarge(
            f"payload of {size} bytes is too large: at most {limit} bytes fit {what}"
            f" ({'PQ support on' if pq_support else 'PQ support off'})",
            size=size,
            limit=limit,
        )


def check_signing_key(signing_key: object) -> None:
    """Raise TypeError unless ``signing_key`` is None or a :class:`SigningKey`."""
    if signing_key is not None and not isinstance(signing_key, SigningKey):
        raise TypeError(f"signing_key: expected SigningKey, got {type(signing_key).__name__}")


def signed_head(reply_queue: SMPQueueInfo, signing_key: SigningKey | None, tag: bytes,
                payload: bytes) -> bytes:
    """The request's bytes before its payload, signing ``tag ‖ payload`` when keyed."""
    if signing_key is None:
        return request_head((reply_queue,), None)
    signature = RequestSignature(signing_key.public_key, signing_key.sign(tag + payload))
    return request_head((reply_queue,), signature)


def seal_request(
    payload: Buffer,
    ad: bytes,
    signing_key: SigningKey | None = None,
    *,
    reply_queue: SMPQueueInfo,
) -> bytes:
    """Encode ``'A'`` with ``reply_queue``, optionally sign (bound to ``ad``), and pad to 11,106.

    The signature is V8 Agent.hs ``signServiceReq``: Ed25519 over
    ``sha3_256("SimpleXService" ‖ ad) ‖ payload``.
    """
    check_signing_key(signing_key)
    check_reply_queue(reply_queue)
    # nbytes, not len(): a memoryview's len() counts items, not bytes.
    check_request_size(memoryview(payload).nbytes, reply_queue, signing_key is not None)
    tag = session_tag(ad)  # validates the AD even for an unsigned request
    data = bytes(payload)
    return pad(signed_head(reply_queue, signing_key, tag, data) + data, REQUEST_PADDED_LENGTH)


def open_request(block: Buffer, ad: bytes, *, strict: bool = False) -> OpenedRequest:
    """Unpad and decode a request block; verify its signature if it is signed.

    Raises :class:`FrameError` for a block that is not the agent's request (the
    message's offsets), :class:`BadSignature` for a signed block that does not
    verify under ``ad``; ``strict`` requires every fill byte to be ``#``.
    """
    tag = session_tag(ad)
    message = unpad(block, length=REQUEST_PADDED_LENGTH, strict=strict)
    queues, signature, at = parse_request_head(message)
    payload = message[at:]
    if signature is not None:
        signature.key._verify_tagged(tag, payload, signature.signature)
        return OpenedRequest(payload=payload, signer=signature.key, reply_queues=queues)
    return OpenedRequest(payload=payload, signer=None, reply_queues=queues)


def seal_response(payload: Buffer, *, pq_support: bool = True) -> bytes:
    """Encode ``'P' ‖ payload`` and pad it to 11,106 (or 14,832 with ``pq_support=False``)."""
    length = response_length(pq_support)
    check_response_size(memoryview(payload).nbytes, pq_support)
    return pad(b"P" + bytes(payload), length)


def seal_rejection(reason: Buffer, *, pq_support: bool = True) -> bytes:
    """Encode ``'J' ‖ reason`` (V8 ``AgentRejection``) and pad it as a response."""
    length = response_length(pq_support)
    check_response_size(memoryview(reason).nbytes, pq_support, "a rejection")
    return pad(b"J" + bytes(reason), length)


def response_block_length(size: int) -> int:
    """The padded length a response block of ``size`` bytes must have: 11,106 or 14,832.

    A block of any other size is refused with the padding error of the nearest one.
    """
    return NO_PQ_PADDED_LENGTH if size == NO_PQ_PADDED_LENGTH else PQ_PADDED_LENGTH


def rejected_error(reason: bytes) -> ServiceRejected:
    """The error ``open_response`` raises for a rejection (``'J'``)."""
    return ServiceRejected(reason)


def response_payload(message: bytes) -> bytes:
    """The payload of an unpadded response message; ServiceRejected for ``'J'``."""
    if not message:
        raise FrameError("agent message: empty, no tag at offset 0")
    tag = message[0]
    if tag == RESPONSE_TAG:
        return message[1:]
    if tag == REJECTION_TAG:
        raise rejected_error(message[1:])
    raise tag_error(tag, "a response ('P') or a rejection ('J')")


def open_response(block: Buffer, *, strict: bool = False) -> bytes:
    """Unpad and decode a response block (11,106 or 14,832 bytes); return its payload.

    A rejection (``'J'``) raises :class:`ServiceRejected` carrying its reason.
    """
    size = memoryview(block).nbytes
    message = unpad(block, length=response_block_length(size), strict=strict)
    return response_payload(message)


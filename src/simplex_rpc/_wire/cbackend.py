"""The C backend: thin wrappers over ``csrc/`` (wire.md sections 4 to 6).

Each function here has the signature, results and errors of its twin in the
pure backend (``_padding``, ``_seal``, ``_batch``). C never raises: it returns
a length or a negative status, and :func:`_error` maps the status to the same
exception class with the same message as the pure backend: every message is
worded once, in the pure module that raises it, and built here by that
module's own error builders (``_padding.fill_error``, ...) or checks
(``check_pad``, ``check_request_size``, ``PublicKey._verify_tagged``). The
agent message's fields are read and written by the one codec
(``agent_block``); C builds and checks the padded block around them. The fast path passes
``err=NULL``; only a failure calls C again to fill an ``srpc_error`` with the
details.

Buffers: every input may be bytes, bytearray or memoryview. Bytes go to C as
they are; other buffers through ``ffi.from_buffer`` (a non-contiguous view is
copied once), released before any exception leaves the wrapper so that an
error kept in a reference cycle never pins the caller's buffer. Outputs are
written by C into memory allocated once per call (or into the caller's ``out``).
Signing and verification stay in PyNaCl's libsodium, called on buffers that C
laid out, so the tagged message is never concatenated in Python.

Importing this module fails when the extension was not built; ``_backend``
records that error as ``c_unavailable_reason``.
"""

from __future__ import annotations

import array
import functools
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, NoReturn, overload

import nacl.bindings  # initialises libsodium before any of its functions is called
import nacl.exceptions

from ..errors import BadSignature, PaddingError, SimplexRpcError
from . import json_pure as _json
from . import padding as _padding
from ._simplex_rpc_c import ffi, lib
from .agent_block import (
    RESPONSE_TAG,
    SMPQueueInfo,
    checked_queue,
    parse_request_head,
    request_head,
)
from .batch import WritableBuffer, out_too_small, writable_view
from .keys import SIGNATURE_LENGTH, SPKI_PREFIX, PublicKey, SigningKey, session_tag
from .padding import PADDED_LENGTH, block_error, check_pad, message_error
from .seal import (
    REQUEST_PADDED_LENGTH,
    Buffer,
    OpenedRequest,
    check_reply_queue,
    check_request_size,
    check_response_size,
    check_signing_key,
    opened_request,
    request_room,
    response_block_length,
    response_length,
    response_payload,
)

# The one private module of a third-party package that src/ imports (issue 31;
# tests/project/test_private_imports.py allows it and nothing else). PyNaCl's own cffi
# module is libsodium without the copies and checks of nacl.bindings, which would
# cost the hot path (sign and verify in place, docs/c-backend.md). When a PyNaCl
# release drops it, the public nacl.bindings path below takes over, slower but alike.
try:  # PyNaCl's own cffi module: libsodium without the copies of nacl.bindings
    from nacl._sodium import lib as _sodium
except ImportError:  # pragma: no cover - every PyNaCl release so far has it
    _sodium = None

__all__ = [
    "BackendMismatch",
    "json_loads",
    "memcpy",
    "open_request",
    "open_response",
    "pad",
    "pad_many",
    "seal_rejection",
    "seal_request",
    "seal_response",
    "seal_unsigned_many",
    "unpad",
    "unpad_many",
]

_NULL: Final = ffi.NULL
SIZE_MAX: Final[int] = int(ffi.cast("size_t", -1))
_alloc = ffi.new_allocator(should_clear_after_alloc=False)  # C writes every byte
_CHAR: Final = ffi.typeof("char[]")  # ffi.unpack of char[] is one memcpy into bytes
_SIZES: Final = ffi.typeof("size_t[]")
_unpack = ffi.unpack
_SM_HEAD: Final = SIGNATURE_LENGTH + 32  # sig || tag, before the payload
_REQ_LEN: Final = REQUEST_PADDED_LENGTH
_RESPONSE_TAGS: Final = (RESPONSE_TAG, b"P")  # src[2] is an int for bytes, bytes for cdata
# Bound once: the hot paths below call these without attribute lookups.
_srpc_pad = lib.srpc_pad
_srpc_unpad = lib.srpc_unpad
_srpc_seal_parts = lib.srpc_seal_parts
_srpc_seal_signed_begin = lib.srpc_seal_signed_begin
_srpc_seal_signed_end = lib.srpc_seal_signed_end


class BackendMismatch(AssertionError):
    """C and the pure checks disagree: a bug in simplex-rpc, never bad input."""


# -- buffers ------------------------------------------------------------------------


def _cbuffer(obj: object, strided: bool = False) -> Any:
    """A C view of a bytes-like object; release it with :func:`_release`.

    As in the pure backend, anything but a buffer raises memoryview's
    TypeError, and a non-contiguous view is copied when ``strided`` (the
    encoders, which take ``bytes(view)``) and refused with the TypeError of
    ``memoryview.cast`` otherwise (the decoders).
    """
    if type(obj) is bytes:
        return obj
    try:
        return ffi.from_buffer(obj)
    except (TypeError, BufferError):
        view = memoryview(obj)  # type: ignore[arg-type]
        if not strided:
            view.cast("B")
        return ffi.from_buffer(view.tobytes())


def _release(src: Any, obj: object) -> None:
    """Give back the buffer ``_cbuffer`` took from ``obj`` (nothing for bytes)."""
    if src is not obj:
        ffi.release(src)


def _slice(obj: Any, src: Any, start: int, stop: int) -> bytes:
    """``bytes`` of bytes ``start:stop`` of the buffer, one copy."""
    if src is obj:
        return obj[start:stop]  # type: ignore[no-any-return]
    return ffi.buffer(src)[start:stop]  # type: ignore[no-any-return]


def _size_arg(length: int) -> int:
    """``length`` as C's size_t; out-of-range values become one C can never match."""
    if 0 <= length <= SIZE_MAX:
        return length
    return SIZE_MAX if length > 0 else 0


# -- errors -------------------------------------------------------------------------


def _explain(function: Callable[..., int], *args: Any) -> Any:
    """Call ``function(*args, err)`` again to get the details of its failure."""
    err = ffi.new("srpc_error *")
    function(*args, err)
    return err


def _pad_error(size: int, length: int) -> PaddingError:
    """The pure backend's error for padding ``size`` bytes into ``length``."""
    try:
        check_pad(size, length)
    except PaddingError as exc:
        return exc
    raise BackendMismatch(f"C refused to pad {size} bytes into {length}; the pure check passed")


def _pad_status_error(err: Any, length: int | None) -> PaddingError:
    """The error of a pad status: the pure ``check_pad`` words all three."""
    return _pad_error(err.value, err.bound if length is None else length)


# Each failure status and its error, built by the pure module that words it from the
# details C reports (``err``, an srpc_error) and the block length the caller gave
# (``length``: C's may be clamped, and the pure backend names the caller's).
_ERRORS: Final[dict[int, Callable[[Any, Any], SimplexRpcError]]] = {
    lib.SRPC_E_PAD_BLOCK_LENGTH: _pad_status_error,
    lib.SRPC_E_PAD_MESSAGE_MAX: _pad_status_error,
    lib.SRPC_E_PAD_MESSAGE_FIT: _pad_status_error,
    lib.SRPC_E_UNPAD_BLOCK_SIZE: lambda err, length: _padding.block_size_error(err.value, length),
    lib.SRPC_E_UNPAD_SHORT: lambda err, _: _padding.short_block_error(err.value),
    lib.SRPC_E_UNPAD_LENGTH_FIELD: lambda err, _: _padding.length_field_error(err.value, err.bound),
    lib.SRPC_E_UNPAD_FILL: lambda err, _: _padding.fill_error(err.offset),
    lib.SRPC_E_BATCH_BLOCK_LENGTH: lambda _, length: _padding.block_length_error(
        "unpad_many", length
    ),
    lib.SRPC_E_BATCH_SHAPE: lambda err, length: _padding.whole_blocks_error(
        "unpad_many", err.value, length
    ),
}


def _error(err: Any, *, length: int | None = None) -> SimplexRpcError:
    """The exception of a C status: the pure backend's class and message.

    ``length`` is the block length the caller gave (C's may be clamped).
    """
    build = _ERRORS.get(err.status)
    if build is None:
        raise BackendMismatch(
            f"C status {err.status} (srpc_error value={err.value} bound={err.bound})"
        )
    return build(err, length)


# -- padding (wire.md section 5) ----------------------------------------------------


#: The fill of the longest block the join below builds, viewed without copying.
_FILL_VIEW: Final = memoryview(b"#" * PADDED_LENGTH)


def pad(message: Buffer, length: int = PADDED_LENGTH) -> bytes:
    """Pad ``message`` to a block of exactly ``length`` bytes.

    One block of bytes up to ``PADDED_LENGTH`` is joined in CPython's C
    (length field, message, a view of the fill), which allocates the result
    once and copies each byte once: a cffi call would add its fixed cost and
    a second copy out of C's buffer. Longer blocks and other buffers go to C.
    """
    if type(message) is bytes and len(message) <= length - 2 and length <= PADDED_LENGTH:
        size = len(message)
        return b"".join((size.to_bytes(2, "big"), message, _FILL_VIEW[: length - 2 - size]))
    if type(message) is bytes and 2 <= length <= SIZE_MAX:  # the fast path
        out = _alloc(_CHAR, length)
        if _srpc_pad(message, len(message), length, out, length, _NULL) >= 0:
            return _unpack(out, length)  # type: ignore[no-any-return]
        raise _pad_error(len(message), length)
    src = _cbuffer(message, True)
    try:
        size = len(src)
        if not 0 <= length <= SIZE_MAX:
            check_pad(size, length)
            raise OverflowError(f"pad: block length {length} is too large")
        out = _alloc(_CHAR, length)
        if _srpc_pad(src, size, length, out, length, _NULL) < 0:
            raise _pad_error(size, length)
        return _unpack(out, length)  # type: ignore[no-any-return]
    except BaseException:
        _release(src, message)
        raise


def unpad(block: Buffer, *, length: int | None = None, strict: bool = False) -> bytes:
    """Return the message inside ``block``.

    ``length`` requires the block to be exactly that many bytes; ``strict``
    requires every fill byte to be ``#``.
    """
    if type(block) is bytes and length is None:  # the fast path
        n: int = _srpc_unpad(block, len(block), 0, 0, strict, _NULL)
        if n >= 0:
            return block[2 : 2 + n]
    src = block if type(block) is bytes else _cbuffer(block)
    try:
        if length is None:
            args = (src, len(src), 0, 0, strict)
        else:
            # No block has a negative size: C gets one no buffer has (0 would match b"").
            args = (src, len(src), 1, SIZE_MAX if length < 0 else _size_arg(length), strict)
        n = _srpc_unpad(*args, _NULL)
        if n < 0:
            raise _error(_explain(lib.srpc_unpad, *args), length=length)
        return _slice(block, src, 2, 2 + n)
    except BaseException:
        _release(src, block)
        raise


def _gather(messages: Iterable[Buffer], length: int) -> tuple[bytes, list[int]]:
    """The messages back to back (one copy) and their byte lengths."""
    items = messages if isinstance(messages, (list, tuple)) else list(messages)
    try:
        joined = b"".join(items)
    except TypeError:  # a non-contiguous view, or not a buffer at all
        items = _contiguous(items, length)
        joined = b"".join(items)
    lens = list(map(len, items))
    if len(joined) != sum(lens):  # a memoryview of wide items: len() counts items
        lens = [memoryview(m).nbytes for m in items]
    return joined, lens


def _contiguous(items: Iterable[Any], length: int) -> list[Any]:
    """Copy the non-contiguous views; at a non-buffer, fail as the pure ``pad_many`` does.

    The pure backend pads message by message, so a message too long before
    the bad item is reported first.
    """
    out: list[Any] = []
    for item in items:
        try:
            view = memoryview(item)
        except TypeError:
            _pad_many_unsized([memoryview(m).nbytes for m in out], length, partial=True)
            raise
        out.append(item if view.c_contiguous else view.tobytes())
    return out


def _pad_many_unsized(lens: list[int], length: int, *, partial: bool = False) -> None:
    """The pure checks of ``pad_many`` in order; then OverflowError, unless ``partial``."""
    for index, size in enumerate(lens):
        try:
            check_pad(size, length)
        except PaddingError as exc:
            raise message_error(index, exc) from None
    if not partial:
        raise OverflowError(f"pad_many: {len(lens)} blocks of {length} bytes are too large")


class _Scratch(threading.local):
    """This thread's reusable output buffer of ``pad_many`` (None while in use)."""

    buffer: Any = None


_scratch = _Scratch()

#: The largest output ``pad_many`` keeps for reuse (per thread); larger ones are
#: allocated per call. Writing into memory already mapped spares the page faults of
#: a fresh buffer, which on some machines cost more than the padding itself.
SCRATCH_MAX: Final = 16 << 20


def _take_scratch(size: int) -> Any:
    """A C buffer of at least ``size`` bytes: this thread's reusable one when it can be."""
    if size > SCRATCH_MAX:
        return _alloc(_CHAR, size)
    buffer = _scratch.buffer
    _scratch.buffer = None  # taken: a re-entrant call (a signal handler) gets its own
    if buffer is None or len(buffer) < size:
        buffer = _alloc(_CHAR, size)
    return buffer


def _give_scratch(buffer: Any) -> None:
    if len(buffer) <= SCRATCH_MAX and (
        _scratch.buffer is None or len(_scratch.buffer) < len(buffer)
    ):
        _scratch.buffer = buffer


@overload
def pad_many(messages: Iterable[Buffer], length: int = ..., *, out: None = None) -> bytes: ...
@overload
def pad_many(
    messages: Iterable[Buffer], length: int = ..., *, out: WritableBuffer
) -> memoryview: ...
def pad_many(
    messages: Iterable[Buffer], length: int = PADDED_LENGTH, *, out: WritableBuffer | None = None
) -> bytes | memoryview:
    """Pad each message to ``length`` bytes; return the blocks back to back.

    With ``out`` (a writable buffer), C writes the blocks at its start and a
    memoryview of them is returned: nothing else is allocated for the output.
    Without it, C writes into this thread's reusable buffer (up to
    ``SCRATCH_MAX`` bytes are kept) and the result is one copy of it.
    The first bad message raises :class:`PaddingError` naming its index.
    """
    dst = None if out is None else writable_view(out)
    joined, lens = _gather(messages, length)
    count = len(lens)
    if count and not 0 <= length <= SIZE_MAX // count:
        _pad_many_unsized(lens, length)
    total = count * length if count else 0
    if dst is None:
        c_out = _take_scratch(total)
        room = total
    else:
        c_out = ffi.from_buffer(dst)
        room = len(dst)
    try:
        c_lens = ffi.new("size_t[]", lens)
        args = (joined, len(joined), c_lens, count, _size_arg(length), c_out, min(room, total))
        if lib.srpc_pad_many(*args, _NULL) < 0:
            err = _explain(lib.srpc_pad_many, *args)
            if err.status == lib.SRPC_E_ARGUMENT and room < total:
                raise out_too_small(room, count, length)
            raise message_error(err.index, _error(err, length=length))
        if dst is None:
            return _unpack(c_out, total)  # type: ignore[no-any-return]
    except BaseException:
        if dst is not None:
            ffi.release(c_out)
        raise
    finally:
        if dst is None:
            _give_scratch(c_out)
    return dst[:total]


@overload
def unpad_many(
    buffer: Buffer, length: int = ..., *, strict: bool = ..., views: Literal[False] = False
) -> list[bytes]: ...
@overload
def unpad_many(
    buffer: Buffer, length: int = ..., *, strict: bool = ..., views: Literal[True]
) -> list[memoryview]: ...
def unpad_many(
    buffer: Buffer,
    length: int = PADDED_LENGTH,
    *,
    strict: bool = False,
    views: bool = False,
) -> list[bytes] | list[memoryview]:
    """Split ``buffer`` into blocks of ``length`` bytes and unpad each one.

    The first bad block raises :class:`PaddingError` naming its index. With
    ``views``, the payloads are memoryviews into ``buffer`` (no copy).
    """
    c_length = _size_arg(length)
    if c_length < 2:  # checked before the buffer is looked at, as in the pure backend
        raise _error(
            _explain(lib.srpc_unpad_many, _NULL, 0, c_length, strict, _NULL, 0), length=length
        )
    src = buffer if type(buffer) is bytes else _cbuffer(buffer)
    try:
        size = len(src)
        count = size // c_length
        lens = ffi.new("size_t[]", count)
        args = (src, size, c_length, strict, lens, count)
        if lib.srpc_unpad_many(*args, _NULL) < 0:
            err = _explain(lib.srpc_unpad_many, *args)
            exc = _error(err, length=length)
            if err.status in (lib.SRPC_E_BATCH_BLOCK_LENGTH, lib.SRPC_E_BATCH_SHAPE):
                raise exc
            raise block_error(err.index, exc) from None
    except BaseException:
        _release(src, buffer)
        raise
    sizes = ffi.unpack(lens, count)
    data: Any = src if src is buffer else ffi.buffer(src)
    if views:
        data = memoryview(data)
    return [data[i * length + 2 : i * length + 2 + n] for i, n in enumerate(sizes)]


# -- sealing and opening the agent's block (wire.md section 4) -------------------------


@functools.lru_cache(maxsize=256)
def _cached_tag(ad: bytes) -> bytes:
    """``session_tag(ad)`` memoized for ``bytes`` ADs: a session seals many requests.

    Errors are never cached: a bad AD raises each time, as ``session_tag`` does.
    """
    return session_tag(ad)


def _sign(block: Any, payload_at: int, tagged_length: int, signing_key: SigningKey) -> None:
    """libsodium's crypto_sign over the block laid out by srpc_seal_signed_begin."""
    sk = signing_key._sk
    sm_at = payload_at - _SM_HEAD
    m_at = payload_at - 32
    if _sodium is not None:
        status = _sodium.crypto_sign(block + sm_at, _NULL, block + m_at, tagged_length, sk)
        if status != 0:
            raise SimplexRpcError("signature: libsodium could not sign the request")
        return
    signed = nacl.bindings.crypto_sign(  # pragma: no cover - PyNaCl without _sodium
        ffi.buffer(block + m_at, tagged_length)[:], sk
    )
    ffi.memmove(block + sm_at, signed, SIGNATURE_LENGTH)  # pragma: no cover


def _verified(sm: Any, sm_length: int, raw_key: bytes) -> bool:
    """Whether ``sm`` (sig || tagged message) verifies under ``raw_key`` (libsodium, strict)."""
    if _sodium is not None:
        return bool(_sodium.crypto_sign_open(_NULL, _NULL, sm, sm_length, raw_key) == 0)
    try:  # pragma: no cover - PyNaCl without _sodium
        nacl.bindings.crypto_sign_open(ffi.buffer(sm, sm_length)[:], raw_key)
    except nacl.exceptions.BadSignatureError:  # pragma: no cover
        return False
    return True  # pragma: no cover


# The heads below are remembered by bytes (the queue's encoding, the signer's raw key):
# a client seals many requests with one queue and one key, and a bytes object keeps its
# hash, where the frozen SMPQueueInfo would compute its own on every lookup.


_UNSIGNED_HEADS: Final[dict[bytes, bytes]] = {}  # cleared at 64 entries


def _unsigned_head(reply_queue: SMPQueueInfo) -> bytes:
    """An unsigned request's head for ``reply_queue``: 'A' 1 queue '0' (the codec's)."""
    head = _UNSIGNED_HEADS.get(reply_queue._encoded)
    if head is None:
        head = request_head((reply_queue,), None)
        if len(_UNSIGNED_HEADS) >= 64:
            _UNSIGNED_HEADS.clear()
        _UNSIGNED_HEADS[reply_queue._encoded] = head
    return head


@functools.lru_cache(maxsize=64)
def _signed_prefix_of(encoded_queue: bytes, raw_key: bytes) -> bytes:
    return b"A\x01" + encoded_queue + b"1\x2c" + SPKI_PREFIX + raw_key + b"\x40"


def _signed_prefix(reply_queue: SMPQueueInfo, key: PublicKey) -> bytes:
    """A signed request's head up to its signature: 'A' 1 queue '1' 44 key 64."""
    return _signed_prefix_of(reply_queue._encoded, key._raw)


def _seal_parts(head: bytes, payload: Buffer, length: int) -> bytes:
    """C's one-pass pad of ``head ‖ payload`` into ``length`` bytes (checked sizes only)."""
    src = payload if type(payload) is bytes else _cbuffer(payload, True)
    try:
        block = _alloc(_CHAR, length)
        status = _srpc_seal_parts(head, len(head), src, len(src), block, length, _NULL)
        if status < 0:
            raise BackendMismatch(f"C refused to seal a checked message (status {status})")
        return _unpack(block, length)  # type: ignore[no-any-return]
    except BaseException:
        _release(src, payload)
        raise


def seal_request(
    payload: Buffer,
    ad: bytes,
    signing_key: SigningKey | None = None,
    *,
    reply_queue: SMPQueueInfo,
) -> bytes:
    """Encode ``'A'`` with ``reply_queue``, optionally sign (bound to ``ad``), and pad to 11,106.

    A signed request is signed in place: C lays out the block with the session
    tag right before the payload, libsodium signs that span where it lies, and
    C moves the signature to its place and writes the head; the payload is
    copied once.
    """
    check_signing_key(signing_key)
    check_reply_queue(reply_queue)
    size = len(payload) if type(payload) is bytes else memoryview(payload).nbytes
    signed = signing_key is not None
    if size > request_room(len(reply_queue._encoded), signed):
        check_request_size(size, reply_queue, signed)  # raises PayloadTooLarge
    tag = _cached_tag(ad) if type(ad) is bytes else session_tag(ad)  # checks the AD
    if signing_key is None:
        return _seal_parts(_unsigned_head(reply_queue), payload, _REQ_LEN)
    prefix = _signed_prefix(reply_queue, signing_key.public_key)
    payload_at = 2 + len(prefix) + SIGNATURE_LENGTH
    src = payload if type(payload) is bytes else _cbuffer(payload, True)
    try:
        block = _alloc(_CHAR, _REQ_LEN)
        status = _srpc_seal_signed_begin(tag, src, size, payload_at, block, _REQ_LEN, _NULL)
        if status >= 0:
            _sign(block, payload_at, 32 + size, signing_key)
            status = _srpc_seal_signed_end(prefix, len(prefix), block, _REQ_LEN, payload_at)
        if status < 0:
            raise BackendMismatch(f"C refused to seal a checked request (status {status})")
        return _unpack(block, _REQ_LEN)  # type: ignore[no-any-return]
    except BaseException:
        _release(src, payload)
        raise


#: The array type code of C's size_t, so that a list of lengths reaches C as one buffer.
_SIZE_T_CODE: Final = next(c for c in "LQI" if array.array(c).itemsize == ffi.sizeof("size_t"))


def seal_unsigned_many(
    payloads: list[Any], sizes: list[int], reply_queue: SMPQueueInfo,
    dst: memoryview | None = None,
) -> bytes | memoryview:
    """The blocks of unsigned requests of checked sizes (``sizes``, in bytes), in one C call
    (``seal_requests``): into ``dst`` when given (large enough), else into a new bytes object.

    The payloads are joined once (one copy, by CPython in C), and C writes each block
    once: the fill of all blocks in one pass, then each length field, head and payload.
    """
    head = _unsigned_head(reply_queue)
    try:
        joined = b"".join(payloads)
    except (TypeError, BufferError):  # a non-contiguous view: copied, as the encoders read it
        joined = b"".join(_contiguous(payloads, _REQ_LEN))
    count = len(sizes)
    total = count * _REQ_LEN
    c_lens = ffi.from_buffer(_SIZES, array.array(_SIZE_T_CODE, sizes))
    c_out = _take_scratch(total) if dst is None else ffi.from_buffer(dst)
    try:
        status = lib.srpc_seal_parts_many(head, len(head), joined, len(joined), c_lens, count,
                                          _REQ_LEN, c_out, total, _NULL)
        if status < 0:
            raise BackendMismatch(f"C refused to seal checked requests (status {status})")
        if dst is None:
            return _unpack(c_out, total)  # type: ignore[no-any-return]
        return dst[:total]
    finally:
        if dst is None:
            _give_scratch(c_out)
        else:
            ffi.release(c_out)


def _message_length(src: Any, length: int, strict: bool) -> int:
    """C's unpad of a block of exactly ``length`` bytes: the message length."""
    n: int = _srpc_unpad(src, len(src), 1, length, strict, _NULL)
    if n < 0:
        args = (src, len(src), 1, length, strict)
        raise _error(_explain(lib.srpc_unpad, *args), length=length)
    return n


_HEAD_LENGTH: Final[int] = lib.SRPC_HEAD_RESULT_LENGTH
_HEAD_FIELDS: Final[int] = lib.SRPC_HEAD_QUEUE_FIELDS
_HEAD_DEFER: Final[int] = lib.SRPC_HEAD_DEFER
_SM_MAX: Final = _SM_HEAD + _REQ_LEN  # sig || tag || the longest payload
_srpc_open_request = lib.srpc_open_request


class _OpenScratch(threading.local):
    """This thread's reusable buffers of ``open_request`` (C's results and the signed
    message): a call takes a pair and gives it back, so a re-entrant call (a signal
    handler's) takes another or makes its own."""

    def __init__(self) -> None:
        self.free: list[tuple[Any, Any]] = []


_open_scratch = _OpenScratch()

#: The signers' keys of the last requests, by their 32 raw bytes: a requester signs its
#: requests with one long-lived key (PublicKey is immutable). Cleared at _SIGNERS_MAX.
_SIGNERS: Final[dict[bytes, PublicKey]] = {}
_SIGNERS_MAX: Final = 256


def _signer(raw: bytes) -> PublicKey:
    """The PublicKey of 32 raw bytes C has checked (an Ed25519 SPKI's key), remembered."""
    key = PublicKey._checked(raw)
    if len(_SIGNERS) >= _SIGNERS_MAX:
        _SIGNERS.clear()
    _SIGNERS[raw] = key
    return key


_sodium_open = None if _sodium is None else _sodium.crypto_sign_open  # strict, as _verified


def open_request(block: Buffer, ad: bytes, *, strict: bool = False) -> OpenedRequest:
    """Unpad and decode a request block; verify its signature if it is signed.

    One C call (``srpc_open_request``) checks the padding, reads the usual head
    (reply queues of plain domain hosts, the signature field) as the codec does,
    and lays out sig || tag || payload for libsodium; the queues are built from
    the offsets it reports (``agent_block.checked_queue``). Any other head, valid
    or not, is read by the codec (``agent_block.parse_request_head``), which
    words every error: both backends raise the same one. C writes into buffers
    this thread keeps (taken while in use, so a re-entrant call gets its own).
    """
    tag = _cached_tag(ad) if type(ad) is bytes else session_tag(ad)
    src = block if type(block) is bytes else _cbuffer(block)
    free = _open_scratch.free
    res, sm = free.pop() if free else (_alloc(_SIZES, _HEAD_LENGTH), _alloc(_CHAR, _SM_MAX))
    try:
        status = _srpc_open_request(src, len(src), strict, tag, sm, _SM_MAX, res, _HEAD_LENGTH,
                                    _NULL)
        if status < 0 and status != _HEAD_DEFER:
            _message_length(src, _REQ_LEN, strict)  # raises the pure backend's unpad error
            raise BackendMismatch(f"srpc_open_request refused a block unpad accepts ({status})")
        data = block if type(block) is bytes else bytes(ffi.buffer(src))
        if status == _HEAD_DEFER:
            return _open_decoded(data, res[0], tag)
        # A head C read has one queue or more, so the first ten results are set.
        n, at, key_at, count, start, sender_at, dh_at, stop, version, mode = _unpack(
            res, 4 + _HEAD_FIELDS
        )
        end = 2 + n
        if count == 1:
            queues: tuple[SMPQueueInfo, ...] = (
                checked_queue(data, start, sender_at, dh_at, stop, version, mode),
            )
        else:
            head = _unpack(res, 4 + _HEAD_FIELDS * count)
            queues = tuple(
                checked_queue(data, *head[4 + _HEAD_FIELDS * i : 4 + _HEAD_FIELDS * (i + 1)])
                for i in range(count)
            )
        if not key_at:
            return opened_request(data[at:end], None, queues)
        payload = data[at:end]  # the bytes C copied after sig || tag in sm
        raw = data[key_at : key_at + 32]
        sm_len = _SM_HEAD + end - at
        if _sodium_open is not None:
            ok = _sodium_open(_NULL, _NULL, sm, sm_len, raw) == 0
        else:  # pragma: no cover - PyNaCl without _sodium
            ok = _verified(sm, sm_len, raw)
        if not ok:
            _refuse(PublicKey(raw), tag, payload, data[at - SIGNATURE_LENGTH : at])
        return opened_request(payload, _SIGNERS.get(raw) or _signer(raw), queues)
    except BaseException:
        _release(src, block)
        raise
    finally:
        if len(free) < 2:
            free.append((res, sm))


def _refuse(key: PublicKey, tag: bytes, payload: bytes, signature: bytes) -> NoReturn:
    """Raise the pure backend's BadSignature for a signature libsodium refused."""
    try:
        key._verify_tagged(tag, payload, signature)
    except BadSignature as exc:
        raise exc from None
    raise BackendMismatch("libsodium refused a signature that PyNaCl accepts")


def _open_decoded(data: bytes, n: int, tag: bytes) -> OpenedRequest:
    """The rest of ``open_request`` for a head C left to the codec: the message is
    ``data[2 : 2 + n]`` (its padding checked)."""
    queues, signature, at = parse_request_head(data, 2, 2 + n)
    end = 2 + n
    if signature is None:
        return OpenedRequest(payload=data[at:end], signer=None, reply_queues=queues)
    size = end - at
    sm_len = _SM_HEAD + size
    sm = _alloc(_CHAR, sm_len)
    source = ffi.from_buffer(data) + at
    if lib.srpc_signed_message(signature.signature, tag, source, size, sm, sm_len) < 0:
        raise BackendMismatch("srpc_signed_message refused a checked layout")
    payload: bytes = ffi.buffer(sm)[_SM_HEAD:sm_len]
    if not _verified(sm, sm_len, signature.key.raw):
        _refuse(signature.key, tag, payload, signature.signature)
    return OpenedRequest(payload=payload, signer=signature.key, reply_queues=queues)


def seal_response(payload: Buffer, *, pq_support: bool = True) -> bytes:
    """Encode ``'P' ‖ payload`` and pad it to 11,106 (or 14,832 with ``pq_support=False``)."""
    length = response_length(pq_support)
    check_response_size(memoryview(payload).nbytes, pq_support)
    return _seal_parts(b"P", payload, length)


def seal_rejection(reason: Buffer, *, pq_support: bool = True) -> bytes:
    """Encode ``'J' ‖ reason`` (V8 ``AgentRejection``) and pad it as a response."""
    length = response_length(pq_support)
    check_response_size(memoryview(reason).nbytes, pq_support, "a rejection")
    return _seal_parts(b"J", reason, length)


def open_response(block: Buffer, *, strict: bool = False) -> bytes:
    """Unpad and decode a response block (11,106 or 14,832 bytes); return its payload.

    A rejection (``'J'``) raises :class:`ServiceRejected` carrying its reason.
    """
    src = block if type(block) is bytes else _cbuffer(block)
    try:
        size = len(src)
        n = _message_length(src, response_block_length(size), strict)
        if n and src[2] in _RESPONSE_TAGS:
            return _slice(block, src, 3, 2 + n)
        return response_payload(_slice(block, src, 2, 2 + n))
    except BaseException:
        _release(src, block)
        raise


def memcpy(dst: Any, src: Buffer) -> None:
    """Copy all of ``src`` to the start of the writable buffer ``dst``, in C (one memcpy).

    The floor of the benchmarks: moving the same bytes without looking at them.
    """
    c_dst = ffi.from_buffer(dst, require_writable=True)
    c_src = _cbuffer(src)
    if lib.srpc_copy(c_dst, len(c_dst), c_src, len(c_src)) < 0:
        raise ValueError(f"memcpy: {len(c_src)} bytes do not fit {len(c_dst)}")


# -- strict JSON (wire.md section 3) -----------------------------------------------------

_srpc_json_check = lib.srpc_json_check
_JSON_WORKSPACE: Final[int] = lib.SRPC_E_JSON_WORKSPACE
#: Keys the hash of member names, so that no input can be built to collide.
_JSON_SEED: Final = int.from_bytes(os.urandom(8), "little")
#: The json module's scanner without hooks: it builds the value C has validated.
_scan_once: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

# Each failure status and its error, worded by the pure backend's builders from what C
# reports (``err``, an srpc_json_error) and the input's bytes.
_SYNTAX: Final = {
    lib.SRPC_E_JSON_EXPECT_VALUE: "Expecting value",
    lib.SRPC_E_JSON_EXPECT_NAME: "Expecting property name enclosed in double quotes",
    lib.SRPC_E_JSON_EXPECT_COLON: "Expecting ':' delimiter",
    lib.SRPC_E_JSON_EXPECT_COMMA: "Expecting ',' delimiter",
    lib.SRPC_E_JSON_UNTERMINATED: "Unterminated string starting",
    lib.SRPC_E_JSON_CONTROL: "Invalid control character",
    lib.SRPC_E_JSON_ESCAPE: "Invalid \\escape",
    lib.SRPC_E_JSON_UESCAPE: "Invalid \\uXXXX escape",
}
_JSON_ERRORS: Final[dict[int, Callable[[Any, bytes], _json.JsonError]]] = {
    lib.SRPC_E_JSON_UTF8: lambda err, _: _json.utf8_error(err.offset),
    lib.SRPC_E_JSON_BOM: lambda err, _: _json.bom_error(),
    lib.SRPC_E_JSON_DEPTH: lambda err, _: _json.depth_error(),
    lib.SRPC_E_JSON_DUPLICATE: lambda err, data: _json.duplicate_error(
        _scan_once(data[err.offset : err.offset + err.length].decode("utf-8"), 0)[0]
    ),
    lib.SRPC_E_JSON_NAN: lambda err, _: _json.constant_error("NaN"),
    lib.SRPC_E_JSON_INFINITY: lambda err, _: _json.constant_error("Infinity"),
    lib.SRPC_E_JSON_NEG_INFINITY: lambda err, _: _json.constant_error("-Infinity"),
    lib.SRPC_E_JSON_INT_DIGITS: lambda err, _: _json.digits_error(err.value),
    lib.SRPC_E_JSON_RANGE: lambda err, data: _json.range_error(
        data[err.offset : err.offset + min(err.length, 32)].decode("ascii")
    ),
    lib.SRPC_E_JSON_EXTRA: lambda err, _: _json.extra_error(err.chars),
    lib.SRPC_E_JSON_SURROGATE: lambda err, _: _json.surrogate_error(err.value),
}


def _json_error(data: bytes, workspace: Any, size: int) -> _json.JsonError:
    """The pure backend's error for ``data``, from C's explanation of its failure."""
    err = ffi.new("srpc_json_error *")
    _srpc_json_check(data, len(data), _JSON_SEED, workspace, size, err)
    return json_error_of(err, data)


def json_error_of(err: Any, data: bytes) -> _json.JsonError:
    """The error of an ``srpc_json_error`` for ``data`` (any object with its fields).

    The fuzz harnesses call this with what C reported, to compare with the pure backend.
    """
    what = _SYNTAX.get(err.status)
    if what is not None:
        return _json.syntax_error(what, err.chars)
    build = _JSON_ERRORS.get(err.status)
    if build is None:
        raise BackendMismatch(f"C JSON status {err.status} (offset {err.offset})")
    return build(err, data)


def json_workspace_size(raw: bytes) -> int:
    """The bytes of C workspace that checking ``raw`` needs beyond the stack's (0 for none).

    C counts the most member names open at once (the names of every object not yet
    closed), and the workspace holds exactly that many: its size follows the names,
    not the length of the input (a 30 MB object of 300 long members needs 300).
    """
    err = ffi.new("srpc_json_error *")
    if _srpc_json_check(raw, len(raw), _JSON_SEED, _NULL, 0, err) != _JSON_WORKSPACE:
        return 0
    size: int = lib.srpc_json_workspace_size(err.value)
    return size


def _json_checked(data: bytes | bytearray | memoryview | str) -> tuple[bytes, str | None, int]:
    """C's one pass over ``data``: its UTF-8 bytes, the text if it came as text, and
    the offset of the value's first byte; raises the pure backend's error."""
    text: str | None = None
    if type(data) is bytes:  # the fast path: no copy
        raw = data
    elif isinstance(data, str):
        raw = str.encode(data, "utf-8")  # UnicodeEncodeError: the callers' pure fallback
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        # Subclasses included, and a strided view: the bytes the pure backend reads.
        raw = bytes(data)
    else:
        raise TypeError(f"expected bytes or str, got {type(data).__name__}")
    workspace: Any = _NULL
    size = 0
    at: int = _srpc_json_check(raw, len(raw), _JSON_SEED, _NULL, 0, _NULL)
    if at == _JSON_WORKSPACE:  # more than 256 names in open objects: a workspace for them
        size = json_workspace_size(raw)
        workspace = _alloc(_CHAR, size)
        at = _srpc_json_check(raw, len(raw), _JSON_SEED, workspace, size, _NULL)
        if at == _JSON_WORKSPACE:
            raise BackendMismatch(f"C JSON: a workspace of {size} bytes is still too small")
    if at < 0:
        raise _json_error(raw, workspace, size)
    return raw, text, at


def json_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one strict JSON value (the C backend's ``_json.loads``).

    C validates the UTF-8 bytes in one pass, with every rule of the pure
    backend; the json module's scanner then builds the value, with no hooks.
    A failure raises the pure backend's :class:`~simplex_rpc._wire.json_pure.JsonError`,
    with its message. A str holding a lone surrogate code point (which has no
    UTF-8 form) goes to the pure backend, which words its error.
    """
    try:
        raw, text, at = _json_checked(data)
    except UnicodeEncodeError:
        return _json.python_loads(data)
    if text is None:
        text = raw.decode("utf-8")
    return _scan_once(text, at)[0]


def json_check(data: bytes | bytearray | memoryview | str) -> None:
    """Check that ``data`` is one strict JSON value, building nothing (C's pass alone).

    Accepts and refuses exactly what :func:`json_loads` does, with the same error.
    """
    try:
        _json_checked(data)
    except UnicodeEncodeError:
        _json.python_loads(data)

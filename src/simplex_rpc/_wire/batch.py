"""Batch forms, written once for both backends (wire.md section 6).

``seal_requests`` and ``open_requests`` run a backend's single-block
``seal_request`` and ``open_request`` over many payloads or blocks, so both
backends give identical results and errors by construction. Signing and
verification happen in libsodium (through PyNaCl), which releases the GIL, so
both spread the blocks over a thread pool; results keep the input order.

``open_requests`` does not stop at the first bad block: it returns an
:class:`OpenedRequests`, one entry per block, each an
:class:`~simplex_rpc.OpenedRequest` or a :class:`BlockFailure` that holds the
exact error ``open_request`` raises for that block.

This module also holds the pure backend's ``pad_many`` and ``unpad_many``
(the core's, plus the ``out=`` and ``views=`` options) and the helpers the C
backend shares with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, Protocol, overload

from ..errors import PaddingError, PayloadTooLarge, SimplexRpcError
from . import padding as _padding
from .agent_block import SMPQueueInfo
from .keys import SigningKey, session_tag
from .padding import PADDED_LENGTH, whole_blocks_error
from .seal import (
    OpenedRequest,
    check_reply_queue,
    check_request_size,
    check_signing_key,
    max_request_payload,
)

__all__ = [
    "MIN_BLOCKS_PER_WORKER",
    "BlockFailure",
    "OpenedRequests",
    "batch_functions",
    "default_workers",
    "open_requests_with",
    "pad_many",
    "seal_requests_with",
    "unpad_many",
]

Buffer = bytes | bytearray | memoryview
#: Where ``pad_many(out=...)`` writes: a bytearray, or a writable C-contiguous
#: memoryview (of an array, an mmap, ...). A read-only view is refused at run time.
WritableBuffer = bytearray | memoryview

#: A worker thread is started only for at least this many blocks: below it,
#: starting the thread costs more than it saves.
MIN_BLOCKS_PER_WORKER: Final = 16

_BYTES_LIKE: Final = (bytes, bytearray, memoryview)

#: A backend's sealer of many unsigned requests of checked sizes (given, in bytes), all
#: with one queue, into a new bytes object or at the start of a writable view large enough.
SealUnsignedMany = Callable[
    [list[Any], list[int], SMPQueueInfo, memoryview | None], bytes | memoryview
]


# -- helpers shared with the C backend ---------------------------------------------


def writable_view(out: object, where: str = "pad_many") -> memoryview:
    """``out`` as a writable byte memoryview; TypeError for anything else."""
    try:
        view = memoryview(out)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{where}: out must be a writable buffer, got {type(out).__name__}"
        ) from None
    if view.readonly:
        raise TypeError(
            f"{where}: out must be a writable buffer, got a read-only {type(out).__name__}"
        )
    if not view.c_contiguous:
        raise TypeError(f"{where}: out must be a C-contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def out_too_small(room: int, count: int, length: int, where: str = "pad_many") -> PaddingError:
    """The error of ``pad_many`` or ``seal_requests`` when ``out`` cannot hold the blocks."""
    return PaddingError(
        f"{where}: out has {room} bytes where {count} blocks of {length} bytes"
        f" need {count * length}"
    )


def default_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


# -- the pure backend's pad_many and unpad_many ------------------------------------


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

    With ``out`` (a writable buffer), the blocks are written at its start and
    a memoryview of them is returned. The first bad message raises
    :class:`PaddingError` naming its index (``message 3: ...``).
    """
    if out is None:
        return _padding.pad_many(messages, length)
    dst = writable_view(out)
    items = messages if isinstance(messages, (list, tuple)) else list(messages)
    blocks = _padding.pad_many(items, length)
    if len(dst) < len(blocks):
        raise out_too_small(len(dst), len(items), length)
    dst[: len(blocks)] = blocks
    return dst[: len(blocks)]


@overload
def unpad_many(
    buffer: Buffer, length: int = ..., *, strict: bool = ..., views: Literal[False] = False
) -> list[bytes]: ...
@overload
def unpad_many(
    buffer: Buffer, length: int = ..., *, strict: bool = ..., views: Literal[True]
) -> list[memoryview]: ...
def unpad_many(
    buffer: Buffer, length: int = PADDED_LENGTH, *, strict: bool = False, views: bool = False
) -> list[bytes] | list[memoryview]:
    """Split ``buffer`` into blocks of ``length`` bytes and unpad each one.

    The first bad block raises :class:`PaddingError` naming its index
    (``block 3: ...``). With ``views``, the payloads are memoryviews into
    ``buffer`` instead of copies.
    """
    payloads = _padding.unpad_many(buffer, length, strict=strict)
    if not views:
        return payloads
    view = memoryview(buffer).cast("B")
    return [view[i * length + 2 : i * length + 2 + len(p)] for i, p in enumerate(payloads)]


# -- the result of open_requests ---------------------------------------------------


class BlockFailure:
    """A block that ``open_requests`` could not open.

    ``index`` is its position in the input; ``error`` is the exception
    ``open_request`` raises for it (a :class:`SimplexRpcError`: padding, agent
    message, signature or AD). Two failures are equal when index, error class and
    message are.
    """

    __slots__ = ("error", "index")

    def __init__(self, index: int, error: SimplexRpcError) -> None:
        self.index = index
        self.error = error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockFailure):
            return NotImplemented
        return (self.index, type(self.error), str(self.error)) == (
            other.index,
            type(other.error),
            str(other.error),
        )

    def __hash__(self) -> int:
        return hash((self.index, type(self.error), str(self.error)))

    def __repr__(self) -> str:
        return f"BlockFailure(index={self.index}, error={self.error!r})"


class OpenedRequests(Sequence[OpenedRequest | BlockFailure]):
    """What ``open_requests`` returns: one entry per block, in input order.

    Each entry is an :class:`~simplex_rpc.OpenedRequest` or a
    :class:`BlockFailure`. ``ok`` says whether every block opened;
    ``failures`` lists the bad ones; ``unwrap()`` returns the opened requests
    or raises the first failure.
    """

    __slots__ = ("_results",)

    def __init__(self, results: Iterable[OpenedRequest | BlockFailure]) -> None:
        self._results: tuple[OpenedRequest | BlockFailure, ...] = tuple(results)

    def __len__(self) -> int:
        return len(self._results)

    @overload
    def __getitem__(self, index: int) -> OpenedRequest | BlockFailure: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[OpenedRequest | BlockFailure, ...]: ...
    def __getitem__(
        self, index: int | slice
    ) -> OpenedRequest | BlockFailure | tuple[OpenedRequest | BlockFailure, ...]:
        return self._results[index]

    def __iter__(self) -> Iterator[OpenedRequest | BlockFailure]:
        return iter(self._results)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpenedRequests):
            return NotImplemented
        return self._results == other._results

    def __hash__(self) -> int:
        return hash(self._results)

    def __repr__(self) -> str:
        return f"<OpenedRequests {len(self._results)} blocks, {len(self.failures)} failed>"

    @property
    def ok(self) -> bool:
        """True when every block opened (and verified, if signed)."""
        return not any(isinstance(r, BlockFailure) for r in self._results)

    @property
    def failures(self) -> tuple[BlockFailure, ...]:
        """The blocks that failed, in input order."""
        return tuple(r for r in self._results if isinstance(r, BlockFailure))

    def unwrap(self) -> list[OpenedRequest]:
        """Every opened request, in order; raise the first failure instead, if any.

        The raised error has the class of the block's error and a message that
        starts with ``block {index}: ``.
        """
        for result in self._results:
            if isinstance(result, BlockFailure):
                error = result.error
                message = f"block {result.index}: {error}"
                try:
                    raised = type(error)(message)
                except TypeError:  # a subclass with extra required arguments
                    raised = SimplexRpcError(message)
                raise raised from error
        return list(self._results)  # type: ignore[arg-type]


# -- seal_requests and open_requests, over a backend's single-block functions -----


class SealRequestsFunction(Protocol):
    @overload
    def __call__(
        self,
        payloads: Iterable[Buffer],
        ad_or_ads: Buffer | Iterable[Buffer],
        signing_key: SigningKey | None = None,
        *,
        reply_queue: SMPQueueInfo,
        workers: int | None = None,
        out: None = None,
    ) -> bytes: ...
    @overload
    def __call__(
        self,
        payloads: Iterable[Buffer],
        ad_or_ads: Buffer | Iterable[Buffer],
        signing_key: SigningKey | None = None,
        *,
        reply_queue: SMPQueueInfo,
        workers: int | None = None,
        out: WritableBuffer,
    ) -> memoryview: ...


class OpenRequestsFunction(Protocol):
    def __call__(
        self,
        blocks: Buffer | Iterable[Buffer],
        ad_or_ads: Buffer | Iterable[Buffer],
        *,
        workers: int | None = None,
        strict: bool = False,
    ) -> OpenedRequests: ...





def _workers(workers: int | None, count: int) -> int:
    if workers is None:
        workers = default_workers()
    elif not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise SimplexRpcError(f"workers: {workers!r} is not a positive number of threads")
    return max(1, min(workers, count // MIN_BLOCKS_PER_WORKER))


def _run_striped(count: int, workers: int, work: Callable[[int, int], None]) -> None:
    """Run ``work(start, step)`` for start in 0..workers-1; this thread takes start 0.

    Striping (block i goes to worker i mod workers) keeps the load even when
    signed and unsigned blocks are mixed.
    """
    if workers <= 1:
        work(0, 1)
        return
    with ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="simplex-rpc") as pool:
        futures = [pool.submit(work, start, workers) for start in range(1, workers)]
        work(0, workers)
        for future in futures:
            future.result()


def _ads(ad_or_ads: object, count: int, what: str) -> Sequence[Any]:
    """One AD per item: the same AD for all, or a sequence of exactly ``count``."""
    if isinstance(ad_or_ads, _BYTES_LIKE):
        return [ad_or_ads] * count
    if isinstance(ad_or_ads, str) or not isinstance(ad_or_ads, Iterable):
        raise TypeError(
            f"{what}: ad_or_ads must be one bytes-like AD or a sequence of them,"
            f" got {type(ad_or_ads).__name__}"
        )
    ads = list(ad_or_ads)
    if len(ads) != count:
        raise SimplexRpcError(f"{what}: {len(ads)} ADs for {count} items; give one AD or one each")
    return ads


def _items(values: Iterable[Any]) -> list[Any]:
    return values if isinstance(values, list) else list(values)


def seal_requests_with(
    seal_request: Callable[..., bytes],
    payloads: Iterable[Buffer],
    ad_or_ads: Buffer | Iterable[Buffer],
    signing_key: SigningKey | None = None,
    *,
    reply_queue: SMPQueueInfo,
    workers: int | None = None,
    seal_unsigned_many: SealUnsignedMany | None = None,
    out: WritableBuffer | None = None,
) -> bytes | memoryview:
    """``seal_requests`` of a backend whose single-block sealer is ``seal_request``.

    ``seal_unsigned_many``, when the backend has one, seals all the unsigned
    requests at once once every check has passed (the C backend: one call).
    """
    dst = None if out is None else writable_view(out, "seal_requests")
    check_signing_key(signing_key)
    check_reply_queue(reply_queue)
    items = _items(payloads)
    count = len(items)
    signed = signing_key is not None
    # Every size and AD is checked before any work is done; the limit is the queue's.
    limit = max_request_payload(reply_queue, signed)
    # All bytes (the usual case): every size at C speed; otherwise one by one.
    all_bytes = set(map(type, items)) <= {bytes}
    sizes = list(map(len, items)) if all_bytes else [memoryview(p).nbytes for p in items]
    if sizes and max(sizes) > limit:
        index = next(i for i, size in enumerate(sizes) if size > limit)
        try:
            check_request_size(sizes[index], reply_queue, signed)
        except PayloadTooLarge as exc:
            raise PayloadTooLarge(
                f"payload {index}: {exc}", size=exc.size, limit=exc.limit
            ) from None
    ads: Sequence[Any] | None = None  # built below only where it is used: one AD for all
    if isinstance(ad_or_ads, _BYTES_LIKE):
        session_tag(ad_or_ads)  # type: ignore[arg-type]  # any bytes-like AD
    else:
        ads = _ads(ad_or_ads, count, "seal_requests")
        for index, ad in enumerate(ads):
            try:
                session_tag(ad)
            except SimplexRpcError as exc:
                raise SimplexRpcError(f"ad {index}: {exc}") from None
    threads = _workers(workers, count)  # checks ``workers`` whether or not it is used
    total = count * PADDED_LENGTH
    if dst is not None and len(dst) < total:
        raise out_too_small(len(dst), count, PADDED_LENGTH, "seal_requests")
    if not signed and seal_unsigned_many is not None:
        return seal_unsigned_many(items, sizes, reply_queue, dst)
    each_ad = _ads(ad_or_ads, count, "seal_requests") if ads is None else ads
    blocks: list[bytes] = [b""] * count

    def work(start: int, step: int) -> None:
        for i in range(start, count, step):
            blocks[i] = seal_request(items[i], each_ad[i], signing_key, reply_queue=reply_queue)

    # Only signing releases the GIL; unsigned sealing gains nothing from threads.
    _run_striped(count, threads if signed else 1, work)
    if dst is None:
        return b"".join(blocks)
    for index, block in enumerate(blocks):
        dst[index * PADDED_LENGTH : (index + 1) * PADDED_LENGTH] = block
    return dst[:total]


def _split_blocks(blocks: Buffer | Iterable[Buffer]) -> list[Any]:
    """A contiguous buffer cut into PADDED_LENGTH views, or the given blocks."""
    if not isinstance(blocks, _BYTES_LIKE):
        if isinstance(blocks, str) or not isinstance(blocks, Iterable):
            raise TypeError(
                "open_requests: blocks must be a bytes-like buffer of blocks or a sequence"
                f" of blocks, got {type(blocks).__name__}"
            )
        return _items(blocks)
    view = memoryview(blocks)
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    view = view.cast("B")
    size = len(view)
    if size % PADDED_LENGTH:
        raise whole_blocks_error("open_requests", size, PADDED_LENGTH)
    n = PADDED_LENGTH
    return [view[i : i + n] for i in range(0, size, n)]


def open_requests_with(
    open_request: Callable[..., OpenedRequest],
    blocks: Buffer | Iterable[Buffer],
    ad_or_ads: Buffer | Iterable[Buffer],
    *,
    workers: int | None = None,
    strict: bool = False,
) -> OpenedRequests:
    """``open_requests`` of a backend whose single-block opener is ``open_request``."""
    items = _split_blocks(blocks)
    count = len(items)
    ads = _ads(ad_or_ads, count, "open_requests")
    results: list[Any] = [None] * count

    def work(start: int, step: int) -> None:
        for i in range(start, count, step):
            try:
                results[i] = open_request(items[i], ads[i], strict=strict)
            except SimplexRpcError as exc:
                # Without its traceback, a kept error pins no frame (nor its buffers).
                results[i] = BlockFailure(i, exc.with_traceback(None))

    _run_striped(count, _workers(workers, count), work)
    return OpenedRequests(results)


def batch_functions(
    seal_request: Callable[..., bytes],
    open_request: Callable[..., OpenedRequest],
    seal_unsigned_many: SealUnsignedMany | None = None,
) -> tuple[SealRequestsFunction, OpenRequestsFunction]:
    """``seal_requests`` and ``open_requests`` over one backend's single-block functions
    (and its bulk sealer of unsigned requests, if it has one)."""

    def seal_requests(
        payloads: Iterable[Buffer],
        ad_or_ads: Buffer | Iterable[Buffer],
        signing_key: SigningKey | None = None,
        *,
        reply_queue: SMPQueueInfo,
        workers: int | None = None,
        out: WritableBuffer | None = None,
    ) -> bytes | memoryview:
        """Seal many request payloads, each with ``reply_queue``; return the blocks back to back.

        With ``out`` (a writable buffer of at least 11,106 bytes per payload), the
        blocks are written at its start and a memoryview of them is returned.

        ``ad_or_ads`` is one AD for every payload or a sequence of one AD per
        payload. Every payload size and AD is checked before any work is done;
        a payload too large raises :class:`PayloadTooLarge` naming its index.
        Signed requests are signed on ``workers`` threads (default: every CPU).
        """
        return seal_requests_with(
            seal_request,
            payloads,
            ad_or_ads,
            signing_key,
            reply_queue=reply_queue,
            workers=workers,
            seal_unsigned_many=seal_unsigned_many,
            out=out,
        )

    def open_requests(
        blocks: Buffer | Iterable[Buffer],
        ad_or_ads: Buffer | Iterable[Buffer],
        *,
        workers: int | None = None,
        strict: bool = False,
    ) -> OpenedRequests:
        """Open many request blocks, verifying signatures on ``workers`` threads.

        ``blocks`` is one buffer of back-to-back 11,106-byte blocks or a
        sequence of blocks; ``ad_or_ads`` one AD for all or one per block.
        Returns an :class:`OpenedRequests` in input order: every block gets an
        ``OpenedRequest`` or a :class:`BlockFailure` with the error
        ``open_request`` raises for it; a bad block does not stop the others.
        """
        return open_requests_with(open_request, blocks, ad_or_ads, workers=workers, strict=strict)

    return seal_requests, open_requests  # type: ignore[return-value]

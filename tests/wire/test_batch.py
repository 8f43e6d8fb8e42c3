"""The batch API on every backend (wire.md section 6; issue 3 "Batch API").

Rules pinned: ``pad_many`` returns the blocks back to back and ``unpad_many``
one payload per block, a bad one named by its index; ``seal_requests`` checks
every size and AD before any work; ``open_requests`` returns results in input
order and reports every block that failed without stopping at the first, each
with exactly the error ``open_request`` raises for it; results do not depend
on the number of worker threads; buffers are taken without copies where the
caller asks (``out=``, ``views=``).
"""

from __future__ import annotations

from typing import Any

import pytest

import simplex_rpc as sx
from _queues import QUEUE
from simplex_rpc._wire import backend as _backend
from simplex_rpc._wire import batch as _batch

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

AD = bytes(range(112))
OTHER_AD = bytes(range(1, 113))
KEY = sx.SigningKey.from_seed(bytes(range(32)))
N = sx.PADDED_LENGTH


# -- pad_many / unpad_many ---------------------------------------------------------


def test_rule_pad_many_is_the_blocks_back_to_back(backend: _backend.Backend) -> None:
    messages = [b"", b"a", b"x" * 100, bytearray(b"ba"), memoryview(b"mv")]
    assert backend.pad_many(messages, 120) == b"".join(sx.pad(m, 120) for m in messages)
    assert backend.pad_many(iter(messages)) == b"".join(sx.pad(m) for m in messages)
    assert backend.pad_many([]) == b""
    assert backend.pad_many([], 0) == b""  # no message, nothing to refuse


def test_rule_pad_many_names_the_bad_message(backend: _backend.Backend) -> None:
    with pytest.raises(sx.PaddingError, match=r"^message 2: pad: message of 9 bytes does not"):
        backend.pad_many([b"a", b"b", b"c" * 9, b"d" * 99], 10)
    with pytest.raises(sx.PaddingError, match=r"^message 0: pad: block length 1 is less than 2"):
        backend.pad_many([b""], 1)


def test_rule_pad_many_writes_into_out(backend: _backend.Backend) -> None:
    out = bytearray(b"?" * (2 * 20 + 5))
    view = backend.pad_many([b"ab", b"c"], 20, out=out)
    assert isinstance(view, memoryview)
    assert bytes(view) == sx.pad(b"ab", 20) + sx.pad(b"c", 20)
    assert out[40:] == b"?????"  # the rest is left alone
    view[0] = 0xFF  # a view of out itself, not of a copy
    assert out[0] == 0xFF


def test_rule_pad_many_out_errors(backend: _backend.Backend) -> None:
    with pytest.raises(
        sx.PaddingError, match="out has 39 bytes where 2 blocks of 20 bytes need 40"
    ):
        backend.pad_many([b"ab", b"c"], 20, out=bytearray(39))
    with pytest.raises(TypeError, match="writable"):
        backend.pad_many([b"ab"], 20, out=bytes(20))
    with pytest.raises(TypeError, match="writable"):
        backend.pad_many([b"ab"], 20, out="text")
    # a bad message is reported before a small out
    with pytest.raises(sx.PaddingError, match=r"^message 0"):
        backend.pad_many([b"x" * 30], 20, out=bytearray(1))


def test_rule_unpad_many_is_one_payload_per_block(backend: _backend.Backend) -> None:
    messages = [b"", b"a", b"x" * 100]
    buffer = sx.pad_many(messages, 120)
    assert backend.unpad_many(buffer, 120) == messages
    assert backend.unpad_many(bytearray(buffer), 120, strict=True) == messages
    assert backend.unpad_many(b"", 120) == []


def test_rule_unpad_many_names_the_bad_block(backend: _backend.Backend) -> None:
    buffer = bytearray(sx.pad_many([b"a", b"b", b"c"], 10))
    buffer[20:22] = b"\x00\x09"
    with pytest.raises(sx.PaddingError, match=r"^block 2: unpad: length field 9 at offset 0"):
        backend.unpad_many(buffer, 10)
    buffer[20:22] = b"\x00\x01"
    buffer[25] = 0x00
    with pytest.raises(sx.PaddingError, match=r"^block 2: unpad: fill byte at offset 5 "):
        backend.unpad_many(buffer, 10, strict=True)
    with pytest.raises(sx.PaddingError, match="not a whole number of 10-byte blocks"):
        backend.unpad_many(buffer[:-1], 10)
    with pytest.raises(sx.PaddingError, match="block length 1 is less than 2"):
        backend.unpad_many(buffer, 1)


def test_rule_unpad_many_views_share_the_buffer(backend: _backend.Backend) -> None:
    buffer = bytearray(sx.pad_many([b"abc", b"de"], 10))
    views = backend.unpad_many(buffer, 10, views=True)
    assert [bytes(v) for v in views] == [b"abc", b"de"]
    assert all(isinstance(v, memoryview) for v in views)
    buffer[2] = ord("X")
    assert bytes(views[0]) == b"Xbc"
    frozen = sx.pad_many([b"abc"], 10)
    assert [bytes(v) for v in backend.unpad_many(frozen, 10, views=True)] == [b"abc"]


# -- seal_requests -------------------------------------------------------------------


def test_rule_seal_requests_equals_seal_request_each(backend: _backend.Backend) -> None:
    payloads = [b"{}", b'{"a":1}', bytearray(b"[]")]
    for key in (None, KEY):
        blocks = backend.seal_requests(payloads, AD, key, reply_queue=QUEUE)
        assert blocks == b"".join(sx.seal_request(p, AD, key, reply_queue=QUEUE) for p in payloads)
    ads = [AD, OTHER_AD, b"third"]
    blocks = backend.seal_requests(payloads, ads, KEY, workers=2, reply_queue=QUEUE)
    assert blocks == b"".join(
        sx.seal_request(p, a, KEY, reply_queue=QUEUE) for p, a in zip(payloads, ads, strict=True)
    )
    assert backend.seal_requests([], AD, KEY, reply_queue=QUEUE) == b""


def test_rule_seal_requests_checks_everything_before_any_work() -> None:
    calls: list[int] = []

    def spy(payload: Any, ad: Any, key: Any, *, reply_queue: Any) -> bytes:
        calls.append(1)
        return sx.seal_request(payload, ad, key, reply_queue=reply_queue)

    limit = sx.max_request_payload(QUEUE)
    big = b"x" * (limit + 1)
    too_large = rf"^payload 2: payload of {limit + 1} bytes"
    with pytest.raises(sx.PayloadTooLarge, match=too_large) as info:
        _batch.seal_requests_with(spy, [b"{}", b"{}", big], AD, KEY, reply_queue=QUEUE)
    assert (info.value.size, info.value.limit) == (limit + 1, limit)
    with pytest.raises(sx.SimplexRpcError, match=r"^ad 1: ad: the associated data must not"):
        _batch.seal_requests_with(spy, [b"{}", b"{}"], [AD, b""], KEY, reply_queue=QUEUE)
    with pytest.raises(sx.SimplexRpcError, match=r"^ad: the associated data must not be empty"):
        _batch.seal_requests_with(spy, [b"{}"], b"", None, reply_queue=QUEUE)
    with pytest.raises(TypeError, match="signing_key"):
        _batch.seal_requests_with(spy, [b"{}"], AD, "key", reply_queue=QUEUE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reply_queue"):
        _batch.seal_requests_with(spy, [b"{}"], AD, None, reply_queue="smp://")  # type: ignore[arg-type]
    assert calls == []


def test_rule_seal_requests_out_writes_the_same_blocks(backend: _backend.Backend) -> None:
    """seal_requests(out=): the same blocks, written at the start of the caller's buffer;
    a buffer too small is refused before anything is written."""
    payloads = [b"{}", b"[1,2]", b"x" * 500]
    for key in (None, KEY):
        out = bytearray(3 * N + 7)
        view = backend.seal_requests(payloads, AD, key, reply_queue=QUEUE, out=out)
        assert bytes(view) == backend.seal_requests(payloads, AD, key, reply_queue=QUEUE)
        assert out[3 * N :] == bytes(7)
    with pytest.raises(sx.PaddingError, match=r"^seal_requests: out has"):
        backend.seal_requests(payloads, AD, reply_queue=QUEUE, out=bytearray(N))


def test_rule_seal_requests_ad_count_must_match(backend: _backend.Backend) -> None:
    with pytest.raises(sx.SimplexRpcError, match="2 ADs for 3 items"):
        backend.seal_requests([b"1", b"2", b"3"], [AD, AD], reply_queue=QUEUE)
    with pytest.raises(TypeError, match="ad_or_ads"):
        backend.seal_requests([b"1"], "text", reply_queue=QUEUE)


# -- open_requests -------------------------------------------------------------------


def mixed_blocks() -> list[bytes]:
    """Signed, unsigned, response, tampered and short blocks, in a known order."""
    signed = sx.seal_request(b'{"n":0}', AD, KEY, reply_queue=QUEUE)
    tampered = bytearray(sx.seal_request(b'{"n":3}', AD, KEY, reply_queue=QUEUE))
    tampered[-11106 + 2 + 2 + len(QUEUE.encode()) + 111 + 2] ^= 1  # in the payload: refused
    return [
        signed,
        sx.seal_request(b'{"n":1}', AD, reply_queue=QUEUE),
        sx.seal_response(b'{"n":2}'),
        bytes(tampered),
        sx.seal_request(b'{"n":4}', AD, KEY, reply_queue=QUEUE),
        sx.pad(b"Q", N),
    ]


def expected(blocks: list[bytes], ads: list[bytes]) -> list[Any]:
    out: list[Any] = []
    for index, (block, ad) in enumerate(zip(blocks, ads, strict=True)):
        try:
            out.append(sx.backends["python"].open_request(block, ad))
        except sx.SimplexRpcError as exc:
            out.append(_batch.BlockFailure(index, exc))
    return out


@pytest.mark.parametrize("workers", [1, 2, 3, None])
def test_rule_open_requests_in_order_without_stopping(
    backend: _backend.Backend, workers: int | None
) -> None:
    blocks = mixed_blocks() * 8  # 48 blocks: enough for every worker count to run
    result = backend.open_requests(blocks, AD, workers=workers)
    assert isinstance(result, sx.OpenedRequests)
    assert list(result) == expected(blocks, [AD] * len(blocks))
    assert not result.ok
    assert [f.index for f in result.failures] == [i for i in range(48) if i % 6 in (2, 3, 5)]
    assert isinstance(result[2], sx.BlockFailure)
    assert isinstance(result[2].error, sx.FrameError)
    assert isinstance(result[3].error, sx.BadSignature)  # type: ignore[union-attr]
    assert result[0].signer == KEY.public_key  # type: ignore[union-attr]
    assert result[1].signer is None  # type: ignore[union-attr]


def test_rule_open_requests_takes_one_buffer_or_many_blocks(backend: _backend.Backend) -> None:
    blocks = mixed_blocks()
    assert backend.open_requests(b"".join(blocks), AD) == backend.open_requests(blocks, AD)
    assert backend.open_requests(bytearray(b"".join(blocks)), AD) == backend.open_requests(
        [memoryview(b) for b in blocks], AD
    )
    assert len(backend.open_requests(b"", AD)) == 0
    with pytest.raises(sx.PaddingError, match="buffer of 11107 bytes is not a whole number"):
        backend.open_requests(b"".join(blocks[:1]) + b"x", AD)
    with pytest.raises(TypeError, match="blocks"):
        backend.open_requests(12, AD)


def test_rule_open_requests_per_block_ads(backend: _backend.Backend) -> None:
    blocks = [
        sx.seal_request(b"{}", AD, KEY, reply_queue=QUEUE),
        sx.seal_request(b"{}", OTHER_AD, KEY, reply_queue=QUEUE),
    ]
    assert backend.open_requests(blocks, [AD, OTHER_AD]).ok
    result = backend.open_requests(blocks, AD)
    assert [type(r).__name__ for r in result] == ["OpenedRequest", "BlockFailure"]
    empty = backend.open_requests(blocks, [AD, b""])
    assert str(empty[1].error) == "ad: the associated data must not be empty"  # type: ignore[union-attr]
    with pytest.raises(sx.SimplexRpcError, match="1 ADs for 2 items"):
        backend.open_requests(blocks, [AD])


def test_rule_a_failure_is_the_error_open_request_raises(backend: _backend.Backend) -> None:
    blocks = mixed_blocks()
    for failure in backend.open_requests(blocks, AD).failures:
        with pytest.raises(type(failure.error)) as info:
            backend.open_request(blocks[failure.index], AD)
        assert str(info.value) == str(failure.error)
        assert failure.error.__traceback__ is None  # keeps no frame alive


def test_rule_unwrap_returns_all_or_raises_the_first(backend: _backend.Backend) -> None:
    good = [
        sx.seal_request(b"[1]", AD, KEY, reply_queue=QUEUE),
        sx.seal_request(b"[2]", AD, reply_queue=QUEUE),
    ]
    opened = backend.open_requests(good, AD).unwrap()
    assert [o.payload for o in opened] == [b"[1]", b"[2]"]
    result = backend.open_requests(mixed_blocks(), AD)
    with pytest.raises(sx.FrameError, match=r"^block 2: agent message: a response \('P'\) where"):
        result.unwrap()


def test_rule_results_compare_by_value(backend: _backend.Backend) -> None:
    blocks = mixed_blocks()
    one = backend.open_requests(blocks, AD, workers=1)
    two = sx.backends["python"].open_requests(blocks, AD, workers=2)
    assert one == two
    assert one[1:3] == two[1:3]
    assert len({f for f in one.failures} | {f for f in two.failures}) == 3
    assert "6 blocks, 3 failed" in repr(one)
    assert repr(one.failures[0]).startswith("BlockFailure(index=2, error=FrameError(")
    assert one.failures[0] != "BlockFailure"


def test_rule_workers_must_be_a_positive_count(backend: _backend.Backend) -> None:
    for workers in (0, -1, 1.5, True):
        with pytest.raises(sx.SimplexRpcError, match="workers"):
            backend.open_requests(mixed_blocks() * 10, AD, workers=workers)
        for key in (KEY, None):  # refused for unsigned sealing too, which uses no thread
            with pytest.raises(sx.SimplexRpcError, match="workers"):
                backend.seal_requests([b"{}"] * 40, AD, key, workers=workers, reply_queue=QUEUE)


def test_rule_small_batches_use_no_thread() -> None:
    assert _batch._workers(8, 10) == 1
    assert _batch._workers(2, 32) == 2
    assert _batch._workers(None, 1000) == min(_batch.default_workers(), 62)

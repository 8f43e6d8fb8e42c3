"""Padding: wire.md section 5, simplexmq's ``pad``/``unPad`` and our options.

``padded = uint16_be(len(msg)) || msg || "#" * (N - 2 - len(msg))``. Every
test runs on every backend through the ``backend`` fixture.
"""

from __future__ import annotations

import array

import pytest

import simplex_rpc as sx
from simplex_rpc import PADDED_LENGTH, PaddingError, SimplexRpcError
from simplex_rpc._wire.backend import Backend

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

MAX_MSG_LEN = 2**16 - 3  # simplexmq maxMsgLen


def test_rule_service_rpc_block_is_11106_bytes() -> None:
    """§5: Service RPC pads to N = 11,106 (e2eEncConnInfoLength with PQ support)."""
    assert PADDED_LENGTH == 11106
    assert MAX_MSG_LEN == 65533


@pytest.mark.parametrize("size", [0, 1, 2, 255, 256, 257, 1000, 11103, 11104])
def test_rule_pad_format_every_byte(backend: Backend, size: int) -> None:
    """§5: uint16_be(len) || msg || '#' * (N - 2 - len), at the default N = 11,106."""
    message = bytes((i * 7 + 3) % 256 for i in range(size))
    block = backend.pad(message)
    assert len(block) == 11106
    assert block[:2] == bytes([size >> 8, size & 0xFF])
    assert block[2 : 2 + size] == message
    assert block[2 + size :] == b"#" * (11106 - 2 - size)
    assert backend.unpad(block) == message


def test_rule_pad_known_bytes(backend: Backend) -> None:
    """§5: the exact bytes of a small block, written out."""
    assert backend.pad(b"abc", 8) == b"\x00\x03abc###"
    assert backend.pad(b"", 2) == b"\x00\x00"
    assert backend.pad(b"", 5) == b"\x00\x00###"
    assert backend.pad(b"x" * 300, 302) == b"\x01\x2c" + b"x" * 300
    assert backend.pad(b"#", 4) == b"\x00\x01##"


def test_rule_exact_limits_at_11106(backend: Backend) -> None:
    """§5: a frame of at most 11,104 bytes fits N = 11,106; 11,105 fails (N - 2 - len < 0)."""
    block = backend.pad(b"m" * 11104)
    assert block == b"\x2b\x60" + b"m" * 11104  # no fill at all
    with pytest.raises(PaddingError, match=r"11105 bytes does not fit a block of 11106") as info:
        backend.pad(b"m" * 11105)
    assert "at most 11104" in str(info.value)


@pytest.mark.parametrize("length", [2, 3, 10, 300, 65535, 65536])
def test_rule_n_minus_2_minus_len_below_zero_fails(backend: Backend, length: int) -> None:
    """§5: pad fails when N - 2 - len(msg) < 0, for any N."""
    fits = min(length - 2, MAX_MSG_LEN)
    assert backend.unpad(backend.pad(b"a" * fits, length)) == b"a" * fits
    with pytest.raises(PaddingError):
        backend.pad(b"a" * (length - 1), length)


def test_rule_max_msg_len_65533(backend: Backend) -> None:
    """§5: pad fails when len(msg) > 65533 (maxMsgLen = 2^16 - 3), even if N is larger."""
    block = backend.pad(b"z" * MAX_MSG_LEN, 70000)
    assert block[:2] == b"\xff\xfd"
    assert len(block) == 70000
    assert backend.unpad(block) == b"z" * MAX_MSG_LEN
    for size in (MAX_MSG_LEN + 1, MAX_MSG_LEN + 2, 2**16, 100000):
        with pytest.raises(PaddingError, match=rf"{size} bytes exceeds the maximum of 65533"):
            backend.pad(b"z" * size, 200000)


@pytest.mark.parametrize("length", [-1, 0, 1])
def test_rule_block_shorter_than_its_length_field_cannot_be_padded(
    backend: Backend, length: int
) -> None:
    """§5: a block has room for its 2-byte length at least (N - 2 - 0 < 0 fails)."""
    with pytest.raises(PaddingError, match=r"less than 2"):
        backend.pad(b"", length)


def test_rule_pad_error_classes(backend: Backend) -> None:
    """§5 failures are PaddingError, a SimplexRpcError and a ValueError."""
    with pytest.raises(PaddingError) as info:
        backend.pad(b"x" * 11105)
    assert isinstance(info.value, SimplexRpcError)
    assert isinstance(info.value, ValueError)


# -- unpad --------------------------------------------------------------------


def test_rule_unpad_reads_the_length_and_takes_that_many(backend: Backend) -> None:
    """§5 unpad as simplexmq: read the 2-byte length, return that many following bytes."""
    assert backend.unpad(b"\x00\x03abc###") == b"abc"
    assert backend.unpad(b"\x00\x03abc") == b"abc"
    assert backend.unpad(b"\x00\x00") == b""
    assert backend.unpad(b"\x00\x00anything") == b""
    # Not strict: the fill is not looked at.
    assert backend.unpad(b"\x00\x01a\x00\xff") == b"a"


@pytest.mark.parametrize("block", [b"", b"\x00"])
def test_rule_unpad_short_blocks(backend: Backend, block: bytes) -> None:
    """§5: a block shorter than its 2-byte length field fails."""
    with pytest.raises(PaddingError, match=rf"block of {len(block)} bytes is shorter"):
        backend.unpad(block)


@pytest.mark.parametrize(
    ("block", "n", "follow"),
    [
        (b"\x00\x01", 1, 0),
        (b"\x00\x04abc", 4, 3),
        (b"\xff\xff" + b"#" * 100, 65535, 100),
        (b"\x2b\x61" + b"#" * 11104, 11105, 11104),
    ],
)
def test_rule_unpad_length_field_beyond_the_block(
    backend: Backend, block: bytes, n: int, follow: int
) -> None:
    """§5: unpad fails when fewer bytes follow than the length field says; names offset 0."""
    with pytest.raises(PaddingError, match=rf"length field {n} at offset 0 exceeds the {follow}"):
        backend.unpad(block)


def test_rule_unpad_exact_length_option(backend: Backend) -> None:
    """§5 option (ours): length= requires the block to be exactly N bytes."""
    block = backend.pad(b"hello")
    assert backend.unpad(block, length=11106) == b"hello"
    for bad in (block[:-1], block + b"#", b"\x00\x00"):
        with pytest.raises(PaddingError, match=rf"block of {len(bad)} bytes where exactly 11106"):
            backend.unpad(bad, length=11106)
    assert backend.unpad(backend.pad(b"x", 10), length=10) == b"x"
    # Without length=, any block size is read (simplexmq's unPad does not check N).
    assert backend.unpad(block + b"#") == b"hello"


@pytest.mark.parametrize("length", [-1, -11106, 2**64, 2**70])
@pytest.mark.parametrize("block", [b"", b"\x00", b"\x00\x00"])
def test_rule_unpad_exact_length_out_of_range(backend: Backend, length: int, block: bytes) -> None:
    """§5 option (ours): no block has a negative or huge length, so each is a size error."""
    with pytest.raises(PaddingError, match=rf"block of {len(block)} bytes where exactly {length} "):
        backend.unpad(block, length=length)


def test_rule_unpad_options_are_keyword_only(backend: Backend) -> None:
    """§5 options: length and strict are keyword-only, so a stray positional is an error."""
    with pytest.raises(TypeError):
        backend.unpad(backend.pad(b""), 11106)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_rule_unpad_strict_fill(backend: Backend, where: str) -> None:
    """§5 option (ours): strict requires every fill byte to be '#'; the error names the offset."""
    block = bytearray(backend.pad(b"payload", 64))
    offset = {"first": 9, "middle": 30, "last": 63}[where]
    block[offset] = ord("$")
    assert backend.unpad(bytes(block)) == b"payload"  # not strict: fill ignored
    with pytest.raises(PaddingError, match=rf"fill byte at offset {offset} is not '#'"):
        backend.unpad(bytes(block), strict=True)
    with pytest.raises(PaddingError, match=rf"offset {offset}\b"):
        backend.unpad(bytes(block), length=64, strict=True)


def test_rule_unpad_strict_names_the_first_bad_fill_byte(backend: Backend) -> None:
    """§5 strict: with several bad fill bytes, the first one is named."""
    block = bytearray(backend.pad(b"", 20))
    block[7] = block[12] = 0
    with pytest.raises(PaddingError, match=r"offset 7\b"):
        backend.unpad(bytes(block), strict=True)


def test_rule_unpad_strict_accepts_a_correct_fill(backend: Backend) -> None:
    """§5 strict: a block that pad wrote passes strict mode, with and without fill."""
    for size in (0, 1, 100, 11104):
        message = b"#" * size  # message bytes equal to the fill byte are not fill
        assert backend.unpad(backend.pad(message), length=11106, strict=True) == message


def test_rule_unpad_order_of_checks(backend: Backend) -> None:
    """§5: the exact length is checked first, then the length field, then the fill."""
    with pytest.raises(PaddingError, match=r"where exactly 10"):
        backend.unpad(b"\xff\xff$", length=10, strict=True)
    with pytest.raises(PaddingError, match=r"length field"):
        backend.unpad(b"\x00\x09$$", strict=True)


# -- bytes-like inputs and batch forms -----------------------------------------


def test_pad_and_unpad_take_bytes_like(backend: Backend) -> None:
    """pad and unpad take bytes, bytearray and memoryview alike and return bytes."""
    block = backend.pad(bytearray(b"abc"), 10)
    assert block == backend.pad(memoryview(b"abc"), 10) == b"\x00\x03abc#####"
    assert type(block) is bytes
    out = backend.unpad(memoryview(block))
    assert out == b"abc" and type(out) is bytes
    assert backend.unpad(bytearray(block), strict=True) == b"abc"


def test_pad_and_unpad_count_bytes_of_wide_buffers(backend: Backend) -> None:
    """A buffer of wider items (array('H')) is its bytes: the length field counts bytes."""
    wide = array.array("H", [0x4142, 0x4344])  # 4 bytes
    raw = wide.tobytes()
    assert backend.pad(memoryview(wide), 10) == backend.pad(raw, 10)
    block = array.array("H", backend.pad(raw, 10))
    assert backend.unpad(memoryview(block), length=10, strict=True) == raw


def test_pad_many_and_unpad_many(backend: Backend) -> None:
    """Batch forms: one contiguous buffer of blocks in and out, identical to one at a time."""
    messages = [b"", b"a", b"x" * 11104, b"#" * 5]
    buffer = backend.pad_many(messages)
    assert buffer == b"".join(backend.pad(m) for m in messages)
    assert backend.unpad_many(buffer) == messages
    assert backend.unpad_many(buffer, strict=True) == messages
    assert backend.unpad_many(b"") == []
    assert backend.unpad_many(backend.pad_many([b"q"], 8), 8) == [b"q"]


def test_pad_many_and_unpad_many_errors_name_the_index(backend: Backend) -> None:
    """Batch forms: an error names the message or block index."""
    with pytest.raises(PaddingError, match=r"message 1: "):
        backend.pad_many([b"", b"x" * 11105])
    buffer = bytearray(backend.pad_many([b"a", b"b", b"c"]))
    with pytest.raises(PaddingError, match=r"not a whole number"):
        backend.unpad_many(bytes(buffer[:-1]))
    buffer[2 * 11106] = 0xFF  # block 2: length field beyond the block
    with pytest.raises(PaddingError, match=r"block 2: .*offset 0"):
        backend.unpad_many(bytes(buffer))
    buffer[2 * 11106] = 0
    buffer[11106 + 50] = 0  # block 1: bad fill
    assert len(backend.unpad_many(bytes(buffer))) == 3
    with pytest.raises(PaddingError, match=r"block 1: .*offset 50"):
        backend.unpad_many(bytes(buffer), strict=True)


def test_top_level_pad_is_the_active_backend() -> None:
    """sx.pad and sx.unpad are the active backend's functions."""
    from simplex_rpc._wire import backend as _backend

    assert sx.pad is _backend.active.pad
    assert sx.unpad is _backend.active.unpad
    assert sx.backend() in ("c", "python")


@pytest.mark.parametrize("not_a_buffer", [5, None, "text", [1, 2]])
def test_pad_takes_only_buffers(backend: Backend, not_a_buffer: object) -> None:
    """``pad(5)`` is not five zero bytes: a message must be a bytes-like object."""
    with pytest.raises(TypeError):
        backend.pad(not_a_buffer)

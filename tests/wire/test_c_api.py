"""The C functions of csrc/ called directly (the contract of csrc/simplex_rpc.h).

Rules pinned: C returns a length or a negative status and never anything
else; every length is checked before use (a NULL pointer, an output of the
wrong size or a size that would overflow is SRPC_E_ARGUMENT, never a write);
``err`` may be NULL and, when given, describes the failure; each status maps to
the pure backend's exception class and message (wire.md section 6). These are
the tests ``make sanitize`` runs under AddressSanitizer and UBSan.
"""

from __future__ import annotations

from typing import Any

import pytest

import simplex_rpc as sx
from _queues import QUEUE
from simplex_rpc._wire import backend as _backend

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

AD = bytes(range(112))
KEY = sx.SigningKey.from_seed(bytes(range(32)))


@pytest.fixture
def c(c_backend: _backend.Backend) -> Any:
    """The compiled module: ``c.ffi`` and ``c.lib``."""
    from simplex_rpc._wire import _simplex_rpc_c

    return _simplex_rpc_c


def statuses(lib: Any, prefix: str = "SRPC_E_") -> dict[str, int]:
    """The statuses of srpc_error (``SRPC_E_``), or those of srpc_json_error (``SRPC_E_JSON_``)."""
    return {
        name: getattr(lib, name)
        for name in dir(lib)
        if name.startswith(prefix) and (prefix != "SRPC_E_" or not name.startswith("SRPC_E_JSON_"))
    }


def test_rule_statuses_are_negative_and_distinct(c: Any) -> None:
    codes = statuses(c.lib) | statuses(c.lib, "SRPC_E_JSON_")
    assert len(codes) >= 20
    assert all(v < 0 for v in codes.values())
    assert len(set(codes.values())) == len(codes)
    assert c.lib.SRPC_OK == 0


def test_rule_every_status_but_argument_maps_to_a_library_error(c: Any) -> None:
    """A status maps to a SimplexRpcError; SRPC_E_ARGUMENT is a bug (BackendMismatch)."""
    from simplex_rpc._wire import cbackend as _cbackend

    err = c.ffi.new("srpc_error *")
    for name, code in statuses(c.lib).items():
        err.status = code
        err.value = 3
        err.bound = 4
        err.offset = 5
        if code == c.lib.SRPC_E_ARGUMENT:
            with pytest.raises(_cbackend.BackendMismatch):
                _cbackend._error(err, length=4)
            continue
        assert isinstance(_cbackend._error(err, length=4), sx.SimplexRpcError), name
    err.status = -1000
    with pytest.raises(_cbackend.BackendMismatch):
        _cbackend._error(err)


def test_rule_every_json_status_maps_to_a_json_error(c: Any) -> None:
    """srpc_json_check's statuses map to the pure backend's JsonError; others are a bug."""
    from simplex_rpc._wire import cbackend as _cbackend
    from simplex_rpc._wire import strict_json as _json

    err = c.ffi.new("srpc_json_error *")
    data = b'"\\ud800" 1e999 "x"'
    for name, code in statuses(c.lib, "SRPC_E_JSON_").items():
        err.status, err.offset, err.chars, err.length, err.value = code, 0, 0, 8, 0xD800
        if code == c.lib.SRPC_E_JSON_WORKSPACE:  # asks for a workspace; never an error
            with pytest.raises(_cbackend.BackendMismatch):
                _cbackend.json_error_of(err, data)
            continue
        assert isinstance(_cbackend.json_error_of(err, data), _json.JsonError), name


def test_rule_json_check_takes_any_workspace(c: Any) -> None:
    """srpc_json_check: a NULL or short workspace uses the stack one; NULL input is refused."""
    ffi, lib = c.ffi, c.lib
    doc = b"{" + b",".join(b'"k%d":0' % i for i in range(600)) + b"}"
    assert lib.srpc_json_check(doc, len(doc), 0, ffi.NULL, 0, ffi.NULL) == lib.SRPC_E_JSON_WORKSPACE
    short = ffi.new("char[]", 16)
    assert lib.srpc_json_check(doc, len(doc), 0, short, 16, ffi.NULL) == lib.SRPC_E_JSON_WORKSPACE
    size = lib.srpc_json_workspace_size(600)
    ws = ffi.new("char[]", size)
    assert lib.srpc_json_check(doc, len(doc), 0, ws, size, ffi.NULL) == 0
    # one byte less holds 599 names: too few, asked for again
    short_by_one = lib.srpc_json_check(doc, len(doc), 0, ws, size - 1, ffi.NULL)
    assert short_by_one == lib.SRPC_E_JSON_WORKSPACE
    assert lib.srpc_json_check(b" []", 3, 0, ffi.NULL, 0, ffi.NULL) == 1
    assert lib.srpc_json_check(ffi.NULL, 1, 0, ffi.NULL, 0, ffi.NULL) == lib.SRPC_E_ARGUMENT
    empty = lib.srpc_json_check(ffi.NULL, 0, 0, ffi.NULL, 0, ffi.NULL)
    assert empty == lib.SRPC_E_JSON_EXPECT_VALUE


def test_rule_json_workspace_holds_the_peak_of_open_names(c: Any) -> None:
    """srpc_json_check with err counts the names open at once; that many is exactly enough.

    The count is of every object not yet closed (an inner object's names add to its
    parent's), found by reading on past the full stack workspace.
    """
    ffi, lib = c.ffi, c.lib
    inner = b"{" + b",".join(b'"i%d":0' % i for i in range(200)) + b"}"
    doc = b"{" + b",".join(b'"k%d":0' % i for i in range(300)) + b',"in":' + inner + b"}"
    for data, peak in [
        (doc, 301 + 200),  # 300 names, then "in" and the inner object's 200
        (b"[" + doc + b"," + doc + b"]", 501),  # siblings: the first closes before the second
        (b'{"a":' + doc[:-1], 1 + 501),  # unterminated: counted up to the error
    ]:
        err = ffi.new("srpc_json_error *")
        asked = lib.srpc_json_check(data, len(data), 0, ffi.NULL, 0, err)
        assert asked == lib.SRPC_E_JSON_WORKSPACE
        assert (err.status, err.value) == (lib.SRPC_E_JSON_WORKSPACE, peak)
        size = lib.srpc_json_workspace_size(peak)
        ws = ffi.new("char[]", size)
        explained = ffi.new("srpc_json_error *")
        retried = lib.srpc_json_check(data, len(data), 0, ws, size, explained)
        assert retried != lib.SRPC_E_JSON_WORKSPACE
    # the names themselves (three size_t and a 64-bit hash each) and their hash buckets
    z = ffi.sizeof("size_t")
    assert lib.srpc_json_workspace_size(300) == 300 * (3 * z + 8) + 512 * z
    size_max = int(ffi.cast("size_t", -1))
    assert lib.srpc_json_workspace_size(size_max) == size_max  # cannot be allocated


def test_rule_pad_checks_its_buffers(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    out = ffi.new("unsigned char[]", 10)
    assert lib.srpc_pad(b"abc", 3, 10, out, 10, ffi.NULL) == 0
    assert ffi.buffer(out)[:] == b"\x00\x03abc#####"
    assert lib.srpc_pad(b"abc", 3, 10, out, 9, ffi.NULL) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad(b"abc", 3, 10, ffi.NULL, 10, ffi.NULL) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad(ffi.NULL, 3, 10, out, 10, ffi.NULL) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad(ffi.NULL, 0, 10, out, 10, ffi.NULL) == 0
    # user errors come first, before the buffers are looked at
    assert lib.srpc_pad(ffi.NULL, 0, 1, ffi.NULL, 0, ffi.NULL) == lib.SRPC_E_PAD_BLOCK_LENGTH


def test_rule_err_may_be_null_and_describes_the_failure(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    block = b"\x00\x02ab#x#"
    assert lib.srpc_unpad(block, 7, 0, 0, 1, ffi.NULL) == lib.SRPC_E_UNPAD_FILL
    assert lib.srpc_unpad(block, 7, 0, 0, 1, err) == lib.SRPC_E_UNPAD_FILL
    assert (err.status, err.offset, err.value) == (lib.SRPC_E_UNPAD_FILL, 5, ord("x"))
    assert lib.srpc_unpad(block, 7, 0, 0, 0, err) == 2  # the message length
    assert lib.srpc_unpad(ffi.NULL, 7, 0, 0, 0, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_unpad(block, 7, 1, 8, 0, err) == lib.SRPC_E_UNPAD_BLOCK_SIZE
    assert (err.value, err.bound) == (7, 8)


def test_rule_pad_many_checks_sizes_and_overflow(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    lens = ffi.new("size_t[]", [1, 2])
    out = ffi.new("unsigned char[]", 10)
    assert lib.srpc_pad_many(b"abc", 3, lens, 2, 5, out, 10, err) == 0
    assert ffi.buffer(out)[:] == b"\x00\x01a##\x00\x02bc#"
    assert lib.srpc_pad_many(b"abcd", 4, lens, 2, 5, out, 10, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad_many(b"abc", 3, lens, 2, 5, out, 9, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad_many(b"abc", 3, ffi.NULL, 2, 5, out, 10, err) == lib.SRPC_E_ARGUMENT
    size_max = int(ffi.cast("size_t", -1))
    assert lib.srpc_pad_many(b"abc", 3, lens, 2, size_max, out, 10, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_pad_many(b"abc", 3, lens, 2, 3, out, 6, err) == lib.SRPC_E_PAD_MESSAGE_FIT
    assert err.index == 1
    assert lib.srpc_pad_many(ffi.NULL, 0, ffi.NULL, 0, 0, ffi.NULL, 0, err) == 0
    empty = ffi.new("size_t[]", [0, 0])  # no bytes at all: src may be NULL
    assert lib.srpc_pad_many(ffi.NULL, 0, empty, 2, 5, out, 10, err) == 0
    assert ffi.buffer(out)[:] == b"\x00\x00###" * 2


def test_rule_unpad_many_checks_count(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    lens = ffi.new("size_t[]", 2)
    buf = b"\x00\x01a##\x00\x00###"
    assert lib.srpc_unpad_many(buf, 10, 5, 1, lens, 2, err) == 0
    assert list(lens) == [1, 0]
    assert lib.srpc_unpad_many(buf, 10, 5, 1, lens, 1, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_unpad_many(buf, 10, 5, 1, ffi.NULL, 2, err) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_unpad_many(buf, 10, 4, 1, lens, 2, err) == lib.SRPC_E_BATCH_SHAPE
    assert lib.srpc_unpad_many(buf, 10, 1, 1, lens, 2, err) == lib.SRPC_E_BATCH_BLOCK_LENGTH


def test_rule_seal_parts_pads_head_and_payload(c: Any) -> None:
    """srpc_seal_parts = pad(head || payload): the agent's message around the payload."""
    ffi, lib = c.ffi, c.lib
    block = ffi.new("unsigned char[]", 20)
    size_max = int(ffi.cast("size_t", -1))
    assert lib.srpc_seal_parts(b"P", 1, b"abc", 3, block, 20, ffi.NULL) == 0
    assert ffi.buffer(block)[:] == sx.pad(b"Pabc", 20)
    assert lib.srpc_seal_parts(b"P", 1, b"a" * 18, 18, block, 20, ffi.NULL) == (
        lib.SRPC_E_PAD_MESSAGE_FIT
    )
    for args in (
        (b"P", 1, b"", size_max, block, 20),
        (b"P", size_max, b"x", 1, block, 20),
        (ffi.NULL, 1, b"x", 1, block, 20),
        (b"P", 1, ffi.NULL, 1, block, 20),
        (b"P", 1, b"abc", 3, ffi.NULL, 20),
    ):
        assert lib.srpc_seal_parts(*args, ffi.NULL) == lib.SRPC_E_ARGUMENT, args


def test_rule_seal_parts_many_seals_each_payload(c: Any) -> None:
    """srpc_seal_parts_many: one head, payloads back to back, blocks back to back; every
    payload is checked before anything is written, and the first that fails names its
    index."""
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    out = ffi.new("unsigned char[]", 30)
    lens = ffi.new("size_t[]", [1, 0, 2])
    assert lib.srpc_seal_parts_many(b"H", 1, b"abc", 3, lens, 3, 10, out, 30, err) == 0
    assert ffi.buffer(out)[:] == sx.pad_many([b"Ha", b"H", b"Hbc"], 10)
    big = ffi.new("size_t[]", [1, 9, 2])
    src = b"a" + b"b" * 9 + b"cc"
    untouched = ffi.new("unsigned char[]", 30)
    ffi.memmove(untouched, b"?" * 30, 30)
    assert lib.srpc_seal_parts_many(b"H", 1, src, 12, big, 3, 10, untouched, 30, err) == (
        lib.SRPC_E_PAD_MESSAGE_FIT
    )
    assert err.index == 1
    assert ffi.buffer(untouched)[:] == b"?" * 30  # block 0 was good, and is not written
    assert lib.srpc_seal_parts_many(b"H", 1, b"abc", 3, lens, 3, 10, out, 29, err) == (
        lib.SRPC_E_ARGUMENT
    )
    assert lib.srpc_seal_parts_many(b"H", 1, b"abcd", 4, lens, 3, 10, out, 30, err) == (
        lib.SRPC_E_ARGUMENT  # a byte of src left over
    )


def test_rule_signed_message_lays_out_sig_tag_payload(c: Any) -> None:
    """sm = sig || tag || payload: what crypto_sign_open verifies (wire.md section 2)."""
    ffi, lib = c.ffi, c.lib
    sm = ffi.new("unsigned char[]", 96 + 3)
    assert lib.srpc_signed_message(b"s" * 64, b"t" * 32, b"abc", 3, sm, 99) == 0
    assert ffi.buffer(sm)[:] == b"s" * 64 + b"t" * 32 + b"abc"
    assert lib.srpc_signed_message(b"s" * 64, b"t" * 32, b"abc", 3, sm, 98) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_signed_message(ffi.NULL, b"t" * 32, b"abc", 3, sm, 99) == lib.SRPC_E_ARGUMENT


def test_rule_signing_in_place_gives_the_pure_block(c: Any) -> None:
    """begin, libsodium's crypto_sign 96 bytes before the payload, end: the agent's block."""
    from nacl.bindings import crypto_sign

    ffi, lib = c.ffi, c.lib
    payload = b'{"protocol":"x","request":[1,2,3]}'
    n = sx.PADDED_LENGTH
    tag = sx.session_tag(AD)
    head = b"A\x01" + QUEUE.encode() + b"1\x2c" + KEY.public_key.der + b"\x40"
    at = 2 + len(head) + 64
    block = ffi.new("unsigned char[]", n)
    assert lib.srpc_seal_signed_begin(tag, payload, len(payload), at, block, n, ffi.NULL) == 0
    assert ffi.buffer(block)[at - 32 : at + len(payload)] == tag + payload
    signed = crypto_sign(tag + payload, KEY._sk)  # what libsodium writes at sm
    ffi.memmove(block + at - 96, signed, len(signed))
    assert lib.srpc_seal_signed_end(head, len(head), block, n, at) == 0
    expected = sx.backends["python"].seal_request(payload, AD, KEY, reply_queue=QUEUE)
    assert ffi.buffer(block)[:] == expected


def test_rule_signing_in_place_checks_its_arguments(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    block = ffi.new("unsigned char[]", 300)
    tag = bytes(32)
    size_max = int(ffi.cast("size_t", -1))
    at = 200
    begin = lib.srpc_seal_signed_begin
    assert begin(ffi.NULL, b"x", 1, at, block, 300, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, ffi.NULL, 1, at, block, 300, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x", size_max - 100, at, block, 300, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x", 1, at, ffi.NULL, 300, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x", 1, 97, block, 300, err) == lib.SRPC_E_ARGUMENT  # no room for sm
    assert begin(tag, b"x" * 101, 101, at, block, 300, err) == lib.SRPC_E_PAD_MESSAGE_FIT
    assert (err.value, err.bound) == (at - 2 + 101, 300)
    assert begin(tag, b"x" * 100, 100, at, block, 300, err) == 0
    end = lib.srpc_seal_signed_end
    head = bytes(at - 66)
    assert end(head, len(head), block, 300, at) == 0
    assert end(head, len(head) - 1, block, 300, at) == lib.SRPC_E_ARGUMENT
    assert end(ffi.NULL, len(head), block, 300, at) == lib.SRPC_E_ARGUMENT
    assert end(head, len(head), ffi.NULL, 300, at) == lib.SRPC_E_ARGUMENT
    assert end(head, len(head), block, 199, at) == lib.SRPC_E_ARGUMENT


def test_rule_copy_checks_its_size(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    dst = bytearray(4)
    assert lib.srpc_copy(ffi.from_buffer(dst), 4, b"abcd", 4) == 0
    assert dst == b"abcd"
    assert lib.srpc_copy(ffi.from_buffer(dst), 4, b"abcde", 5) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_copy(ffi.NULL, 0, ffi.NULL, 0) == 0


def test_rule_wrapper_releases_buffers_before_raising(c_backend: _backend.Backend) -> None:
    """An error leaves the caller's bytearray resizable: no buffer export is kept."""
    data = bytearray(b"\x00\x09ab")
    for call in (
        lambda: c_backend.unpad(data),
        lambda: c_backend.open_request(data, AD),
        lambda: c_backend.open_response(data),
        lambda: c_backend.unpad_many(data, 3),
        lambda: c_backend.pad(data, 3),
    ):
        with pytest.raises(sx.SimplexRpcError) as info:
            call()
        data.append(0)  # BufferError if an export were still held
        data.pop()
        del info


def test_rule_the_session_tag_cache_never_caches_errors(c_backend: _backend.Backend) -> None:
    for _ in range(2):
        with pytest.raises(sx.SimplexRpcError, match="must not be empty"):
            c_backend.seal_request(b"{}", b"", reply_queue=QUEUE)
    block = c_backend.seal_request(b"{}", AD, KEY, reply_queue=QUEUE)
    assert c_backend.open_request(block, AD).signer == (
        KEY.public_key
    )

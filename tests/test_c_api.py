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
from simplex_rpc._wire import backend as _backend

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


def test_rule_frame_encode_checks_kind_key_and_sizes(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    der = KEY.public_key.der
    sig = bytes(64)
    out = ffi.new("unsigned char[]", 200)
    assert lib.srpc_frame_head_length(lib.SRPC_REQUEST, 1) == 114
    assert lib.srpc_frame_head_length(lib.SRPC_REQUEST, 0) == 4
    assert lib.srpc_frame_head_length(lib.SRPC_RESPONSE, 0) == 3
    assert lib.srpc_frame_head_length(lib.SRPC_RESPONSE, 1) == 0
    assert lib.srpc_frame_head_length(7, 0) == 0
    ok = lib.srpc_frame_encode(lib.SRPC_REQUEST, 1, der, sig, b"xy", 2, out, 116, ffi.NULL)
    assert ok == 0
    assert ffi.buffer(out, 116)[:] == sx.encode_frame(
        "request", b"xy", key=KEY.public_key, signature=sig
    )
    bad = [
        (lib.SRPC_RESPONSE, 1, der, sig, b"xy", 2, out, 116),  # a signed response
        (9, 0, ffi.NULL, ffi.NULL, b"xy", 2, out, 6),  # no such kind
        (lib.SRPC_REQUEST, 1, bytes(44), sig, b"xy", 2, out, 116),  # not an SPKI
        (lib.SRPC_REQUEST, 1, ffi.NULL, sig, b"xy", 2, out, 116),
        (lib.SRPC_REQUEST, 0, ffi.NULL, ffi.NULL, b"xy", 2, out, 7),  # wrong out size
        (lib.SRPC_REQUEST, 0, ffi.NULL, ffi.NULL, ffi.NULL, 2, out, 6),
        (lib.SRPC_REQUEST, 0, ffi.NULL, ffi.NULL, b"xy", int(ffi.cast("size_t", -1)), out, 5),
    ]
    for args in bad:
        assert lib.srpc_frame_encode(*args, ffi.NULL) == lib.SRPC_E_ARGUMENT, args


def test_rule_seal_checks_sizes(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    block = ffi.new("unsigned char[]", 20)
    size_max = int(ffi.cast("size_t", -1))
    req = lib.SRPC_REQUEST
    assert lib.srpc_seal(req, 0, ffi.NULL, ffi.NULL, b"abc", 3, block, 20, ffi.NULL) == 0
    assert ffi.buffer(block)[:] == sx.pad(sx.encode_frame("request", b"abc"), 20)
    assert lib.srpc_seal(req, 0, ffi.NULL, ffi.NULL, b"a" * 15, 15, block, 20, ffi.NULL) == (
        lib.SRPC_E_PAD_MESSAGE_FIT
    )
    assert lib.srpc_seal(req, 0, ffi.NULL, ffi.NULL, b"", size_max, block, 20, ffi.NULL) == (
        lib.SRPC_E_ARGUMENT
    )
    assert lib.srpc_seal(req, 0, ffi.NULL, ffi.NULL, b"abc", 3, ffi.NULL, 20, ffi.NULL) == (
        lib.SRPC_E_ARGUMENT
    )


def test_rule_open_lays_out_the_signed_message_for_libsodium(c: Any) -> None:
    """sm = sig || tag || payload: what crypto_sign_open verifies (wire.md section 2)."""
    ffi, lib = c.ffi, c.lib
    payload = b'{"protocol":"x","request":1}'
    block = sx.backends["python"].seal_request(payload, AD, KEY)
    tag = sx.session_tag(AD)
    info = ffi.new("srpc_frame *")
    sm = ffi.new("unsigned char[]", 96 + len(payload))
    n = len(block)
    args = (block, n, n, 1, lib.SRPC_REQUEST, tag, sm, len(sm), info, ffi.NULL)
    assert lib.srpc_open(*args) == 0
    assert (info.kind, info.is_signed) == (lib.SRPC_REQUEST, 1)
    assert (info.key_offset, info.sig_offset, info.payload_offset) == (7, 52, 116)
    assert info.payload_length == len(payload)
    signature = KEY.sign_request(AD, payload)
    assert ffi.buffer(sm)[:] == signature + tag + payload
    assert block[info.key_offset : info.key_offset + 44] == KEY.public_key.der
    short = ffi.new("unsigned char[]", 95 + len(payload))
    args = (block, n, n, 1, lib.SRPC_REQUEST, tag, short, len(short), info, ffi.NULL)
    assert lib.srpc_open(*args) == lib.SRPC_E_ARGUMENT
    for expect in (3, -1):
        args = (block, n, n, 1, expect, tag, sm, len(sm), info, ffi.NULL)
        assert lib.srpc_open(*args) == lib.SRPC_E_ARGUMENT
    args = (block, n, n, 1, lib.SRPC_RESPONSE, tag, sm, len(sm), info, ffi.NULL)
    assert lib.srpc_open(*args) == lib.SRPC_E_FRAME_NOT_RESPONSE


def test_rule_signing_in_place_gives_the_pure_block(c: Any) -> None:
    """begin, libsodium's crypto_sign at offsets 20/84, end: the block of wire.md 2, 4, 5."""
    from nacl.bindings import crypto_sign

    ffi, lib = c.ffi, c.lib
    payload = b'{"protocol":"x","request":[1,2,3]}'
    n = sx.PADDED_LENGTH
    tag = sx.session_tag(AD)
    block = ffi.new("unsigned char[]", n)
    assert lib.srpc_seal_signed_begin(tag, payload, len(payload), block, n, ffi.NULL) == 0
    at = lib.SRPC_SIGN_M_AT
    assert ffi.buffer(block)[at : at + 32 + len(payload)] == tag + payload
    signed = crypto_sign(tag + payload, KEY._sk)  # what libsodium writes at sm
    ffi.memmove(block + lib.SRPC_SIGN_SM_AT, signed, len(signed))
    assert lib.srpc_seal_signed_end(KEY.public_key.der, block, n) == 0
    assert ffi.buffer(block)[:] == sx.backends["python"].seal_request(payload, AD, KEY)


def test_rule_signing_in_place_checks_its_arguments(c: Any) -> None:
    ffi, lib = c.ffi, c.lib
    err = ffi.new("srpc_error *")
    block = ffi.new("unsigned char[]", 200)
    tag = bytes(32)
    size_max = int(ffi.cast("size_t", -1))
    begin = lib.srpc_seal_signed_begin
    assert begin(ffi.NULL, b"x", 1, block, 200, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, ffi.NULL, 1, block, 200, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x", size_max - 100, block, 200, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x", 1, ffi.NULL, 200, err) == lib.SRPC_E_ARGUMENT
    assert begin(tag, b"x" * 85, 85, block, 200, err) == lib.SRPC_E_PAD_MESSAGE_FIT
    assert (err.value, err.bound) == (114 + 85, 200)
    assert begin(tag, b"x" * 84, 84, block, 200, err) == 0
    end = lib.srpc_seal_signed_end
    assert end(KEY.public_key.der, block, 200) == 0
    assert end(bytes(44), block, 200) == lib.SRPC_E_ARGUMENT
    assert end(ffi.NULL, block, 200) == lib.SRPC_E_ARGUMENT
    assert end(KEY.public_key.der, ffi.NULL, 200) == lib.SRPC_E_ARGUMENT
    assert end(KEY.public_key.der, block, 115) == lib.SRPC_E_ARGUMENT


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
        lambda: c_backend.decode_frame(data),
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
            c_backend.seal_request(b"{}", b"")
    assert c_backend.open_request(c_backend.seal_request(b"{}", AD, KEY), AD).signer == (
        KEY.public_key
    )

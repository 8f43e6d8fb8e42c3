"""Hostile JSON and envelopes (wire.md section 3, issue 7).

Every envelope decoder returns a value or raises ``EnvelopeError`` (code
``bad_request``) with a one-line message that says what is wrong. Strict JSON
refuses deep nesting, huge integers, non-finite numbers, invalid UTF-8, lone
surrogates (raw and escaped) and duplicate member names, each with its own
message. Memory stays proportional to the input: a 1 MB hostile input is
parsed or refused with a tracemalloc peak of a small multiple of its size,
and inputs that are quadratic traps (a million brackets, a million escapes)
complete; the tests judge by completion and by memory, never by the clock.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

import simplex_rpc as sx

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.hostile]

KEY = sx.SigningKey.from_seed(bytes(range(32))).public_key
REQUEST = (
    b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"x","arguments":{"a":[1,-2.5e3,"\\u00e9\\ud83d\\ude00",null,true]}}},'
    b'"version":"2026-07-28","requestKey":"' + KEY.encode().encode() + b'","x-extra":{"k":[]}}'
)
RESPONSE_OK = b'{"response":{"jsonrpc":"2.0","id":1,"result":{"content":[]}},"x":1}'
RESPONSE_ERR = b'{"error":{"code":"rate_limited","message":"slow down","retryAfter":30,"y":[]}}'
MAX_MESSAGE = 300

Parser = Callable[[Any], Any]
PARSERS: dict[str, tuple[Parser, bytes]] = {
    "Request.parse": (sx.Request.parse, REQUEST),
    "Response.parse(ok)": (sx.Response.parse, RESPONSE_OK),
    "Response.parse(error)": (sx.Response.parse, RESPONSE_ERR),
}


def parse_outcome(parse: Parser, data: object) -> tuple[str, Any]:
    """("value", v) or ("error", exc); anything but EnvelopeError fails the test."""
    try:
        return ("value", parse(data))
    except sx.EnvelopeError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) <= MAX_MESSAGE, message[:400]
        assert exc.code == "bad_request"
        return ("error", exc)


def refused(parse: Parser, data: object) -> str:
    kind, exc = parse_outcome(parse, data)
    assert kind == "error", f"accepted: {data!r:.200}"
    return str(exc)


# --------------------------------------------------------------------------
# Mutations of valid envelopes


@pytest.mark.parametrize("name", list(PARSERS))
def test_envelope_truncated_at_every_offset(name: str) -> None:
    parse, valid = PARSERS[name]
    for i in range(len(valid)):
        refused(parse, valid[:i])


@pytest.mark.parametrize("name", list(PARSERS))
def test_envelope_every_bit_flipped(name: str) -> None:
    parse, valid = PARSERS[name]
    for bit in range(8 * len(valid)):
        mutated = bytearray(valid)
        mutated[bit // 8] ^= 1 << (bit % 8)
        parse_outcome(parse, bytes(mutated))
        parse_outcome(parse, bytes(mutated).decode("latin-1"))


@pytest.mark.parametrize("name", list(PARSERS))
@pytest.mark.parametrize(
    "trailer", [b"x", b"}", b" {}", b"\x00", b",", b"\xff", b"\xef\xbb\xbf", b"//"], ids=repr
)
def test_envelope_trailing_bytes_refused(name: str, trailer: bytes) -> None:
    parse, valid = PARSERS[name]
    assert "offset" in refused(parse, valid + trailer) or trailer in (b"\xff", b"\xef\xbb\xbf")


@pytest.mark.parametrize("name", list(PARSERS))
def test_envelope_surrounding_json_whitespace_allowed(name: str) -> None:
    parse, valid = PARSERS[name]
    assert parse_outcome(parse, b" \t\r\n" + valid + b" \n")[0] == "value"


@pytest.mark.parametrize("name", list(PARSERS))
@pytest.mark.parametrize(
    "data", [b"", "", b" ", b"null", b"[]", b'"x"', b"1", b"true", b"{}", b"[{}]"], ids=repr
)
def test_envelope_empty_and_non_objects(name: str, data: bytes | str) -> None:
    parse, _ = PARSERS[name]
    refused(parse, data)


REQUEST_MEMBERS: dict[str, bytes] = {
    "protocol number": b'{"protocol":1,"request":{}}',
    "protocol null": b'{"protocol":null,"request":{}}',
    "protocol array": b'{"protocol":["mcp"],"request":{}}',
    "protocol object": b'{"protocol":{},"request":{}}',
    "protocol empty": b'{"protocol":"","request":{}}',
    "protocol upper": b'{"protocol":"MCP","request":{}}',
    "protocol space": b'{"protocol":"mcp ","request":{}}',
    "protocol unicode digit": '{"protocol":"mcp\u0663","request":{}}'.encode(),
    "protocol escaped newline": b'{"protocol":"mcp\\n","request":{}}',
    "protocol missing": b'{"request":{}}',
    "request missing": b'{"protocol":"mcp"}',
    "requestKey number": b'{"protocol":"mcp","request":{},"requestKey":1}',
    "requestKey null": b'{"protocol":"mcp","request":{},"requestKey":null}',
    "requestKey empty": b'{"protocol":"mcp","request":{},"requestKey":""}',
    "requestKey std base64": b'{"protocol":"mcp","request":{},"requestKey":"'
    + KEY.encode().replace("_", "/").replace("-", "+").encode() + b'"',
    "requestKey raw hex": b'{"protocol":"mcp","request":{},"requestKey":"'
    + KEY.raw.hex().encode() + b'"',
    "requestKey private key": b'{"protocol":"mcp","request":{},"requestKey":"'
    + sx.SigningKey.from_seed(bytes(32)).encode().encode() + b'"',
    "requestKey with space": b'{"protocol":"mcp","request":{},"requestKey":" '
    + KEY.encode().encode() + b'"',
    "duplicate protocol": b'{"protocol":"mcp","protocol":"a2a","request":{}}',
    "duplicate via escape": b'{"protocol":"mcp","\\u0070rotocol":"a2a","request":{}}',
}
RESPONSE_MEMBERS: dict[str, bytes] = {
    "both": b'{"response":1,"error":{"code":"internal"}}',
    "neither": b'{"x":1}',
    "error null": b'{"error":null}',
    "error string": b'{"error":"internal"}',
    "error array": b'{"error":[]}',
    "code missing": b'{"error":{}}',
    "code number": b'{"error":{"code":1}}',
    "code null": b'{"error":{"code":null}}',
    "message number": b'{"error":{"code":"internal","message":1}}',
    "retryAfter negative": b'{"error":{"code":"internal","retryAfter":-1}}',
    "retryAfter 2^32": b'{"error":{"code":"internal","retryAfter":4294967296}}',
    "retryAfter fraction": b'{"error":{"code":"internal","retryAfter":1.5}}',
    "retryAfter string": b'{"error":{"code":"internal","retryAfter":"5"}}',
    "retryAfter bool": b'{"error":{"code":"internal","retryAfter":true}}',
    "retryAfter null": b'{"error":{"code":"internal","retryAfter":null}}',
    "retryAfter 1e10": b'{"error":{"code":"internal","retryAfter":1e10}}',
    "retryAfter 1e400": b'{"error":{"code":"internal","retryAfter":1e400}}',
    "retryAfter 64 nines": b'{"error":{"code":"internal","retryAfter":' + b"9" * 64 + b"}}",
    "duplicate error": b'{"error":{"code":"a"},"error":{"code":"b"}}',
    "duplicate code": b'{"error":{"code":"a","code":"b"}}',
}


@pytest.mark.parametrize("name", list(REQUEST_MEMBERS))
def test_request_wrong_member_types_and_values(name: str) -> None:
    refused(sx.Request.parse, REQUEST_MEMBERS[name])


@pytest.mark.parametrize("name", list(RESPONSE_MEMBERS))
def test_response_wrong_member_types_and_values(name: str) -> None:
    refused(sx.Response.parse, RESPONSE_MEMBERS[name])


# --------------------------------------------------------------------------
# Strict JSON: each hostile construct, as the whole document and nested in `request`


def _nested(value: bytes) -> bytes:
    return b'{"protocol":"mcp","request":{"a":[' + value + b"]}}"


STRICT_CASES: dict[str, tuple[bytes | str, str]] = {
    "depth 10^5 arrays": (b"[" * 100_000 + b"]" * 100_000, "nesting"),
    "depth 10^5 objects": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nesting"),
    "depth 10^5 mixed, unclosed": (b'[{"a":' * 50_000, "nesting"),
    "depth 65": (b"[" * 65 + b"]" * 65, "nesting"),
    "integer of 65 digits": (b"1" * 65, "integer"),
    "negative integer of 65 digits": (b"-" + b"9" * 65, "integer"),
    "integer of 10^5 digits": (b"7" * 100_000, "integer"),
    "1e400": (b"1e400", "range"),
    "-1e400": (b"-1e400", "range"),
    "1E400": (b"1E400", "range"),
    "huge exponent": (b"1e" + b"9" * 1000, "range"),
    "NaN": (b"NaN", "NaN"),
    "Infinity": (b"Infinity", "Infinity"),
    "-Infinity": (b"-Infinity", "Infinity"),
    "nan lowercase": (b"nan", "Expecting value"),
    "invalid UTF-8 byte": (b'"\xff"', "UTF-8"),
    "overlong NUL": (b'"\xc0\x80"', "UTF-8"),
    "UTF-8 encoded surrogate": (b'"\xed\xa0\x80"', "UTF-8"),
    "above U+10FFFF": (b'"\xf4\x90\x80\x80"', "UTF-8"),
    "truncated sequence": (b'"\xe2\x82"', "UTF-8"),
    "lone continuation byte": (b'"\x80"', "UTF-8"),
    "byte-order mark": (b"\xef\xbb\xbf{}", "byte-order mark"),
    "escaped lone high surrogate": (b'"\\ud800"', "surrogate"),
    "escaped lone low surrogate": (b'"\\udc00"', "surrogate"),
    "escaped high then letter": (b'"\\ud800\\u0041"', "surrogate"),
    "escaped surrogates reversed": (b'"\\udc00\\ud800"', "surrogate"),
    "escaped surrogate in a name": (b'{"\\ud800":1}', "surrogate"),
    "raw lone surrogate (text input)": ('"\ud800"', "surrogate"),
    "raw lone surrogate in a name (text input)": ('{"\udfff":1}', "surrogate"),
    "duplicate names": (b'{"a":1,"a":2}', "duplicate"),
    "duplicate names, one escaped": (b'{"a":1,"\\u0061":2}', "duplicate"),
    "duplicate names, nested": (b'{"a":{"b":1,"b":1}}', "duplicate"),
    "raw control character": (b'"a\x01b"', "control character"),
    "single quotes": (b"{'a':1}", "property name"),
    "trailing comma": (b"[1,]", "Expecting value"),
    "comment": (b"[1]//", "extra data"),
}


@pytest.mark.parametrize("name", list(STRICT_CASES))
def test_strict_json_case_as_whole_request(name: str) -> None:
    """Refused as the whole document, with a message naming the rule."""
    data, word = STRICT_CASES[name]
    assert word.lower() in refused(sx.Request.parse, data).lower()


@pytest.mark.parametrize("name", list(STRICT_CASES))
def test_strict_json_case_nested_in_request_member(name: str) -> None:
    """The same construct anywhere inside an envelope is refused the same way."""
    data, word = STRICT_CASES[name]
    if isinstance(data, str):
        nested: bytes | str = _nested(b"\x00").decode().replace("\x00", data)
    else:
        nested = _nested(data)
    # Inside a value, a byte-order mark is a stray character and a comment a bad delimiter.
    word = {"byte-order mark": "Expecting value", "comment": "delimiter"}.get(name, word)
    message = refused(sx.Request.parse, nested).lower()
    assert word.lower() in message, message
    refused(sx.Response.parse, (b'{"response":' + data + b"}") if isinstance(data, bytes)
            else '{"response":' + data + "}")


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 63 + b"]" * 63,  # 64 levels with the envelope object
        b"9" * 64,
        b"-" + b"9" * 64,
        b"1e308",
        b"1e-400",
        b'"\\ud83d\\ude00"',
        '"\U0001f600"'.encode(),
        b'"\\u0000"',
        b'{"a":1,"A":2}',
        b'{"":1}',
    ],
    ids=repr,
)
def test_strict_json_limits_accept_their_boundary(data: bytes) -> None:
    """Just inside each limit is accepted: the rules refuse what they name and no more."""
    kind, _ = parse_outcome(sx.Response.parse, b'{"response":' + data + b"}")
    assert kind == "value"


# --------------------------------------------------------------------------
# Resource bounds: memory proportional to the input, no quadratic traps

MB = 1 << 20
ENVELOPE_HEAD = b'{"protocol":"x","request":['


def _hostile(name: str, size: int) -> bytes:
    """A hostile input of about ``size`` bytes."""
    body = {
        "brackets": lambda: b"[" * size,
        "objects": lambda: b'{"a":' * (size // 5),
        "escaped surrogates": lambda: b'"' + b"\\ud800" * (size // 6) + b'"',
        "digits": lambda: b"1" * size,
        "exponent digits": lambda: b"1e" + b"9" * size,
        "brackets in a string": lambda: b'{"protocol":"x","request":"' + b"[" * size + b'"}',
        "escapes in a string": lambda: ENVELOPE_HEAD + b'"' + b"\\n" * (size // 2) + b'"]}',
        "empty arrays": lambda: ENVELOPE_HEAD + b"[]," * (size // 3) + b"[]]}",
        "empty objects": lambda: ENVELOPE_HEAD + b"{}," * (size // 3) + b"{}]}",
        "small numbers": lambda: ENVELOPE_HEAD + b"0," * (size // 2) + b"0]}",
        "duplicate names": lambda: b"{" + b'"a":1,' * (size // 6) + b'"b":1}',
        "long duplicate name": lambda: b'{"' + b"a" * (size // 2) + b'":1,"'
        + b"a" * (size // 2) + b'":1}',
        "many names": lambda: b'{"protocol":"x","request":{'
        + b",".join(b'"%d":0' % i for i in range(size // 10)) + b"}}",
        "whitespace": lambda: b" " * size + b"{}",
        "invalid UTF-8 at the end": lambda: b'"' + b"a" * size + b'\xff"',
    }[name]
    return body()


HOSTILE = [
    "brackets", "objects", "escaped surrogates", "digits", "exponent digits",
    "brackets in a string", "escapes in a string", "empty arrays", "empty objects",
    "small numbers", "duplicate names", "long duplicate name", "many names", "whitespace",
    "invalid UTF-8 at the end",
]
# The peak may reach this multiple of the input: Python objects for a value
# parsed from a few bytes (an empty list from "[]," ) take tens of bytes.
MEMORY_FACTOR = 64


def _peak(data: bytes) -> int:
    tracemalloc.start()
    try:
        try:
            sx.Request.parse(data)
        except sx.EnvelopeError as exc:
            assert len(str(exc)) <= MAX_MESSAGE
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# Inputs that parse into many small Python objects are checked at a quarter of
# the size: the bound is the same multiple, and the suite stays fast.
OBJECT_HEAVY = {"empty arrays", "empty objects", "small numbers", "many names", "whitespace"}


@pytest.mark.parametrize("name", HOSTILE)
def test_one_megabyte_hostile_input_memory_is_proportional(name: str) -> None:
    """1 MB in: parsed or refused, with a peak of at most a fixed multiple of the input.

    A quadratic algorithm on these inputs (10^6 brackets, escapes or names)
    would not complete; an allocation out of proportion would exceed the bound.
    """
    data = _hostile(name, MB // 4 if name in OBJECT_HEAVY else MB)
    assert _peak(data) <= MEMORY_FACTOR * len(data)


@pytest.mark.parametrize("name", ["brackets", "empty arrays", "many names", "escaped surrogates"])
def test_memory_grows_linearly(name: str) -> None:
    """Four times the input takes at most about four times the memory (not sixteen)."""
    small = _peak(_hostile(name, MB // 16))
    large = _peak(_hostile(name, MB // 4))
    assert large <= 6 * small + MB // 4


def test_refusal_of_deep_nesting_does_not_parse_the_rest() -> None:
    """Deep nesting is refused before the parser builds the value: the peak stays near
    the size of the text, far below what a parsed value of that size would take."""
    data = b"[" * (4 * MB) + b"]" * (4 * MB)
    assert _peak(data) <= 3 * len(data)


def test_messages_do_not_echo_long_input() -> None:
    """Error messages quote at most a short excerpt of the input."""
    for data in (
        b'{"protocol":"' + b"A" * MB + b'","request":1}',
        b'{"' + b"k" * MB + b'":1,"' + b"k" * MB + b'":1}',
        b"1" * MB + b"e999",
        b'{"error":{"code":"x","retryAfter":' + b"1" * 64 + b".0}}",
    ):
        for parse in (sx.Request.parse, sx.Response.parse):
            kind, _ = parse_outcome(parse, data)  # asserts the message length
            assert kind == "error"

"""Strict JSON: wire.md section 3, "Strict parsing (ours)".

UTF-8 only; duplicate member names rejected; nesting depth bounded (64); no
NaN or Infinity, no number that overflows; a clear error names what is wrong.
Each case is checked at the JSON layer (``_json.loads`` raises ``JsonError``)
and through both envelope parsers, where it becomes an ``EnvelopeError`` with
code ``bad_request`` and a message that says what is wrong.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from simplex_rpc import EnvelopeError, Request, Response
from simplex_rpc._wire.strict_json import MAX_DEPTH, MAX_INT_DIGITS, JsonError, dumps, loads

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend


def _in_request(value_text: str) -> str:
    return '{"protocol":"p","request":' + value_text + "}"


def _in_response(value_text: str) -> str:
    return '{"response":' + value_text + "}"


def _refused_everywhere(data: str | bytes, what: str) -> None:
    """``data`` is refused by loads and by both envelope parsers, with ``what`` in the message."""
    with pytest.raises(JsonError, match=what):
        loads(data)
    for parse, name in ((Request.parse, "request envelope"), (Response.parse, "response envelope")):
        with pytest.raises(EnvelopeError, match=what) as info:
            parse(data)
        assert info.value.code == "bad_request"
        assert str(info.value).startswith(f"{name}: ")


def _nested_refused(value_text: str, what: str) -> None:
    """A bad value nested inside a request and inside a response is refused too."""
    with pytest.raises(EnvelopeError, match=what) as info:
        Request.parse(_in_request(value_text))
    assert info.value.code == "bad_request"
    with pytest.raises(EnvelopeError, match=what):
        Response.parse(_in_response(value_text))


# -- duplicates -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"protocol":"a","protocol":"b","request":1}',
        '{"protocol":"p","request":1,"request":2}',
        '{"response":1,"response":1}',
        '{"a":1,"a":1}',
        '{"a":1,"\\u0061":2}',  # the same name once escaped
    ],
)
def test_rule_duplicate_member_names_rejected(text: str) -> None:
    """§3 strict: duplicate member names are rejected (the last one does not silently win)."""
    _refused_everywhere(text, r"duplicate member name '(protocol|request|response|a)'")


def test_rule_duplicate_member_names_rejected_at_any_depth() -> None:
    """§3 strict: duplicates inside the request, the response and the error are rejected too."""
    _nested_refused('{"x":{"k":1,"k":2}}', r"duplicate member name 'k'")
    _nested_refused('[{"id":1,"id":1}]', r"duplicate member name 'id'")
    with pytest.raises(EnvelopeError, match=r"duplicate member name 'code'"):
        Response.parse('{"error":{"code":"internal","code":"bad_request"}}')


def test_rule_same_name_in_different_objects_is_fine() -> None:
    """§3: one name in two different objects is not a duplicate."""
    assert loads('{"a":{"a":1},"b":[{"a":2},{"a":3}]}') == {
        "a": {"a": 1},
        "b": [{"a": 2}, {"a": 3}],
    }


# -- depth ----------------------------------------------------------------------


@pytest.mark.parametrize(("open_", "close"), [("[", "]"), ('{"k":', "}")])
def test_rule_nesting_depth_bounded_at_64(open_: str, close: str) -> None:
    """§3 strict: nesting depth is bounded: 64 levels parse, 65 do not."""
    assert MAX_DEPTH == 64
    ok = open_ * 64 + "1" + close * 64
    loads(ok)
    too_deep = open_ * 65 + "1" + close * 65
    _refused_everywhere(too_deep, r"nesting deeper than 64 levels")


def test_rule_depth_counts_the_envelope() -> None:
    """§3 strict: the envelope object is level 1: a request value may nest 63 more levels."""
    Request.parse(_in_request("[" * 63 + "]" * 63))
    _nested_refused("[" * 64 + "]" * 64, r"nesting deeper than 64 levels")


def test_rule_depth_bound_holds_for_huge_nesting() -> None:
    """§3 strict: very deep input is refused quickly with the same error, no RecursionError."""
    _refused_everywhere("[" * 200_000 + "]" * 200_000, r"nesting deeper than 64")
    _refused_everywhere('{"a":' * 100_000 + "1" + "}" * 100_000, r"nesting deeper than 64")
    _refused_everywhere("[" * 100_000, r"nesting deeper than 64")  # unterminated too


def test_rule_brackets_inside_strings_do_not_count() -> None:
    """§3: the depth bound is about structure, not about brackets in string values."""
    text = '{"protocol":"p","request":"' + "[{" * 200 + '\\"[" }'
    assert Request.parse(text).request == "[{" * 200 + '"['


# -- numbers ----------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_rule_nan_and_infinity_rejected(literal: str) -> None:
    """§3 strict: NaN and Infinity are not JSON (Python's json accepts them by default)."""
    _refused_everywhere(literal, rf"{literal} is not JSON")
    _nested_refused(literal, rf"{literal} is not JSON")
    _nested_refused("[1," + literal + "]", r"is not JSON")


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "1E400", "1e309", "123456789e999"])
def test_rule_numbers_that_overflow_rejected(literal: str) -> None:
    """§3 strict: a number that overflows to infinity is refused, not turned into inf."""
    _refused_everywhere(literal, r"out of range")
    _nested_refused(literal, r"out of range")
    with pytest.raises(EnvelopeError, match=r"out of range"):
        Response.parse('{"error":{"code":"x","retryAfter":1e400}}')


def test_rule_finite_numbers_accepted() -> None:
    """§3: large finite numbers and underflow to zero are ordinary JSON numbers."""
    assert loads("1e308") == 1e308
    assert loads("-1.7976931348623157e308") == -1.7976931348623157e308
    assert loads("1e-400") == 0.0
    assert math.isfinite(loads("0." + "9" * 1000))


def test_rule_huge_integers_rejected() -> None:
    """§3 strict: integers of more than 64 digits are refused (bounded work)."""
    assert MAX_INT_DIGITS == 64
    assert loads("9" * 64) == int("9" * 64)
    assert loads("-" + "9" * 64) == -int("9" * 64)
    _refused_everywhere("1" + "0" * 64, r"integer of 65 digits is too large")
    _nested_refused("-" + "1" * 65, r"integer of 65 digits")
    _refused_everywhere("7" * 5000, r"integer of 5000 digits")


# -- UTF-8, surrogates, BOM ---------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b'{"protocol":"p","request":"\xff"}', 27),
        (b'{"protocol":"p","request":"\xc0\xaf"}', 27),  # overlong '/'
        (b'{"protocol":"p","request":"\xed\xa0\x80"}', 27),  # an encoded surrogate
        (b'{"protocol":"p","request":"\xe2\x82"}', 27),  # truncated sequence
        (b'{"protocol":"p","request":"\xf4\x90\x80\x80"}', 27),  # above U+10FFFF
        (b'{"protocol":"p","request":1,"\x80":1}', 29),  # in a member name
        (b"\xfe\xff\x00{", 0),  # UTF-16 is not UTF-8
    ],
)
def test_rule_invalid_utf8_rejected(data: bytes, offset: int) -> None:
    """§3 strict: UTF-8 only; the error names the byte offset of the first bad byte."""
    _refused_everywhere(data, rf"invalid UTF-8 at byte offset {offset}\b")


def test_rule_utf16_text_rejected() -> None:
    """§3 strict: JSON in UTF-16 is not accepted (with its BOM it is not UTF-8 at all)."""
    text = '{"protocol":"p","request":1}'
    with pytest.raises(EnvelopeError, match=r"invalid UTF-8 at byte offset 0") as info:
        Request.parse(text.encode("utf-16"))
    assert info.value.code == "bad_request"
    # Without a BOM, UTF-16 of ASCII is valid UTF-8 with NUL bytes: not JSON.
    with pytest.raises(EnvelopeError, match=r"offset 1\b") as info:
        Request.parse(text.encode("utf-16-le"))
    assert info.value.code == "bad_request"


@pytest.mark.parametrize(
    "escaped",
    ["\\ud800", "\\udc00", "\\udfff", "\\ude00\\ud83d", "a\\ud800b", "\\ud800\\u0041"],
)
def test_rule_lone_surrogates_rejected(escaped: str) -> None:
    """§3 strict: a lone surrogate (a \\u escape) is refused, in values and in names."""
    _nested_refused(f'"{escaped}"', r"lone surrogate")
    _nested_refused(f'{{"{escaped}":1}}', r"lone surrogate")
    _refused_everywhere(f'"{escaped}"', r"lone surrogate")


def test_rule_lone_surrogate_in_str_input_rejected() -> None:
    """§3 strict: a str holding a lone surrogate code point is refused as well."""
    _refused_everywhere('{"protocol":"p","request":"\ud800"}', r"lone surrogate")


def test_rule_surrogate_pairs_are_fine() -> None:
    """§3: an escaped surrogate pair is one character, and raw UTF-8 of it is the same."""
    text = _in_request('"\\ud83d\\ude00"')
    assert Request.parse(text).request == "\U0001f600"
    assert Request.parse(_in_request('"\U0001f600"').encode()).request == "\U0001f600"


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf{}", "\ufeff{}", b"\xef\xbb\xbf" + b" {}"])
def test_rule_byte_order_mark_rejected(data: str | bytes) -> None:
    """§3 strict: a byte-order mark before the value is refused."""
    _refused_everywhere(data, r"byte-order mark")


def test_rule_bom_character_inside_a_string_is_text() -> None:
    """§3: U+FEFF inside a string is an ordinary character."""
    assert Request.parse(_in_request('"\ufeff"').encode()).request == "\ufeff"


# -- one value, nothing after it -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ('{"response":1} {}', 15),
        ('{"response":1}x', 14),
        ('{"response":1}\x00', 14),
        ('{"response":1},', 14),
        ('{"response":1}]', 14),
        ('{"response":1}\n\n{"response":2}', 16),
    ],
)
def test_rule_trailing_data_rejected(text: str, offset: int) -> None:
    """§3 strict: one JSON value; anything after it (but whitespace) is refused, with the offset."""
    with pytest.raises(JsonError, match=rf"extra data after the JSON value at offset {offset}"):
        loads(text)
    with pytest.raises(EnvelopeError, match=r"extra data") as info:
        Response.parse(text)
    assert info.value.code == "bad_request"


def test_rule_surrounding_whitespace_is_fine() -> None:
    """JSON's own whitespace around the value is allowed (RFC 8259 ws)."""
    assert Response.parse(' \t\r\n{"response":1}\n ').response == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{'response':1}",
        '{"response":1,}',
        '{"response":[1,]}',
        '{"response":1 // comment\n}',
        "{response:1}",
        '{"response":"a\x01"}',  # raw control character in a string
        '{"response":01}',
        '{"response":.5}',
        '{"response":tru}',
    ],
)
def test_rule_not_json_rejected_with_offset(text: str) -> None:
    """§3: anything that is not JSON is bad_request with a message that names the offset."""
    with pytest.raises(JsonError, match=r"offset \d+"):
        loads(text)
    with pytest.raises(EnvelopeError, match=r"offset \d+") as info:
        Response.parse(text)
    assert info.value.code == "bad_request"


def test_control_character_message_reads_once() -> None:
    """§3: the message names the control character's offset once, in one phrase."""
    with pytest.raises(JsonError) as info:
        loads('{"response":"a\x01"}')
    assert str(info.value) == "Invalid control character at offset 14"


def test_loads_takes_bytes_like_and_rejects_other_types() -> None:
    """loads takes str, bytes, bytearray and memoryview; anything else is a TypeError."""
    for data in ('{"a":1}', b'{"a":1}', bytearray(b'{"a":1}'), memoryview(b'{"a":1}')):
        assert loads(data) == {"a": 1}
    with pytest.raises(TypeError):
        loads(1)  # type: ignore[arg-type]


# -- serialization ----------------------------------------------------------------------


def test_dumps_is_compact_utf8_and_ordered() -> None:
    """§3 output: compact, UTF-8 (no ASCII escaping), members in the given order."""
    value = {"z": 1, "a": ["é", "\U0001f600", None, True, 1.5], "m": {"q": '\n"'}}
    out = dumps(value)
    assert out == '{"z":1,"a":["é","\U0001f600",null,true,1.5],"m":{"q":"\\n\\""}}'.encode()
    assert loads(out) == value
    assert list(loads(out)) == ["z", "a", "m"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [-float("inf")], "\ud800"])
def test_dumps_refuses_what_loads_refuses(value: Any) -> None:
    """§3: the writer refuses NaN, Infinity and lone surrogates, so it never writes bad JSON."""
    with pytest.raises(JsonError):
        dumps(value)


def test_loads_agrees_with_json_on_ordinary_documents() -> None:
    """For ordinary JSON, strict loads gives what the standard library gives."""
    text = '{"a":[1,2.5,-3e2,"x\\u00e9",{"b":null,"c":false}],"d":""}'
    assert loads(text) == json.loads(text)

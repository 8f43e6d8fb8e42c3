"""Strict JSON on both backends: wire.md section 3, issue 12.

Rules pinned: the C backend validates strict JSON with every rule of the pure
backend (``_json.python_loads``) and gives the same value; for bad input its
first error is the pure backend's, with the same message and offset, found in
the same order: UTF-8, the byte-order mark, the depth pre-scan, the grammar
with the number and duplicate-name rules (as the json module meets them),
trailing data, and the first lone surrogate in document order. Every strict
decoder of the library (``_json.loads``, ``Request.parse``,
``Response.parse``) runs on the active backend's validator.
"""

from __future__ import annotations

import array
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from _hypothesis import examples
from simplex_rpc._wire import backend as _backend
from simplex_rpc._wire import strict_json as _json
from simplex_rpc._wire.strict_json import JsonError

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

PURE = sx.backends["python"]

SETTINGS = settings(
    max_examples=examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def outcome(parse: Any, data: Any) -> tuple[str, Any]:
    """("ok", repr of the value) or ("error", message); any other exception escapes."""
    try:
        return ("ok", repr(parse(data)))
    except JsonError as exc:
        return ("error", str(exc))


def checked(check: Any, data: Any) -> tuple[str, Any]:
    """("ok", None) or ("error", message) from a backend's ``json_check``."""
    try:
        return ("ok", check(data))
    except JsonError as exc:
        return ("error", str(exc))


def same(c: _backend.Backend, data: bytes | str) -> tuple[str, Any]:
    """Parse ``data`` on both backends; assert identical outcomes; return it.

    Each backend's ``json_check`` (strict_json.check) refuses exactly what its
    ``json_loads`` refuses, with the same message, and accepts the rest.
    """
    want = outcome(PURE.json_loads, data)
    assert outcome(c.json_loads, data) == want, data
    verdict = want if want[0] == "error" else ("ok", None)
    assert checked(PURE.json_check, data) == verdict, data
    assert checked(c.json_check, data) == verdict, data
    return want


# -- the rules, each with the pure backend's words on both backends ----------------------

RULES: list[tuple[str, bytes, str]] = [
    ("duplicate name after unescaping", b'{"a":1,"\\u0061":2}', "duplicate member name 'a'"),
    ("duplicate name, raw UTF-8 and escape", '{"é":1,"\\u00e9":2}'.encode(),
     "duplicate member name 'é'"),
    ("duplicate name, pair and raw", '{"\\ud83d\\ude00":1,"😀":2}'.encode(),
     "duplicate member name '😀'"),
    ("duplicate name at depth", b'[{"x":{"k":1,"k":2}}]', "duplicate member name 'k'"),
    (
        "lone high surrogate then a letter",
        b'"\\ud800\\u0041"',
        "lone surrogate \\ud800 in a string",
    ),
    ("lone low surrogate", b'"\\udc00"', "lone surrogate \\udc00 in a string"),
    ("raw control character", b'["a\x01"]', "Invalid control character at offset 3"),
    ("leading zero", b"[01]", "Expecting ',' delimiter at offset 2"),
    ("leading zero at top level", b"01", "extra data after the JSON value at offset 1"),
    ("1.", b"[1.]", "Expecting ',' delimiter at offset 2"),
    ("a lone minus", b"-", "Expecting value at offset 0"),
    ("1e without digits", b"[1e]", "Expecting ',' delimiter at offset 2"),
    ("byte-order mark", b"\xef\xbb\xbf{}", "byte-order mark before the JSON value"),
    ("depth 65", b"[" * 65 + b"]" * 65, "nesting deeper than 64 levels"),
    ("65-digit integer", b"1" * 65, "integer of 65 digits is too large (at most 64)"),
    ("65 digits after a minus", b"-" + b"1" * 65, "integer of 65 digits is too large (at most 64)"),
    (
        "overflow to infinity",
        b"1.7976931348623159e308",
        "number '1.7976931348623159e308' is out of range",
    ),
    ("NaN", b"[NaN]", "NaN is not JSON"),
    ("-Infinity", b"-Infinity", "-Infinity is not JSON"),
    ("invalid UTF-8", b'"\xc0\xaf"', "invalid UTF-8 at byte offset 1"),
    ("encoded surrogate", b'["\xed\xa0\x80"]', "invalid UTF-8 at byte offset 2"),
    ("invalid escape", b'"\\x"', "Invalid \\escape at offset 1"),
    ("short \\u escape", b'"\\u12"', "Invalid \\uXXXX escape at offset 2"),
    ("unterminated string", b'["abc', "Unterminated string starting at offset 1"),
    ("trailing comma in an array", b"[1,]", "Expecting value at offset 3"),
    (
        "trailing comma in an object",
        b'{"a":1,}',
        "Expecting property name enclosed in double quotes at offset 7",
    ),
    ("missing colon", b'{"a" 1}', "Expecting ':' delimiter at offset 5"),
    ("trailing data", b"{} x", "extra data after the JSON value at offset 3"),
    ("offsets count characters", '["ééé" x]'.encode(), "Expecting ',' delimiter at offset 7"),
]


@pytest.mark.parametrize(("name", "data", "message"), RULES, ids=[r[0] for r in RULES])
def test_rule_each_strict_rule_has_the_same_error_on_both_backends(
    c_backend: _backend.Backend, name: str, data: bytes, message: str
) -> None:
    """§3 strict: each rule refuses with one message, the same on both backends."""
    assert same(c_backend, data) == ("error", message)


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 64 + b"]" * 64,
        b'{"a":' * 63 + b"[]" + b"}" * 63,
        b"9" * 64,
        b"-" + b"9" * 64,
        b"1.7976931348623158e308",  # DBL_MAX: finite
        b"0.0e99999999999999999999",
        b"1e-99999",
        b'"\\ud83d\\ude00"',
        b'{"a":1,"A":2,"\\u0062":3,"b\\u0000":4}',
        b'"\\u0000\\/\\b\\f\\n\\r\\t\\"\\\\"',
        '{"é":"😀","ż":[true,false,null]}'.encode(),
        b" \t\r\n[] \n",
    ],
    ids=repr,
)
def test_rule_limits_accept_their_boundary(c_backend: _backend.Backend, data: bytes) -> None:
    """§3: just inside each limit parses, to the value the json module gives."""
    kind, value = same(c_backend, data)
    assert kind == "ok"
    assert value == repr(json.loads(data))


def test_rule_overflow_threshold_is_exact(c_backend: _backend.Backend) -> None:
    """§3: a number overflows when it rounds to infinity: at 2**1024 - 2**970, not before."""
    threshold = 2**1024 - 2**970
    for text, finite in [
        (f"{threshold - 1}.0", True),
        (f"{threshold}.0", False),
        (f"0.{threshold}e309", False),
        (f"{threshold - 1}e0", True),
        ("1" + "0" * 308 + ".0", True),
        ("1" + "0" * 309 + ".0", False),
        ("0.000017976931348623157e313", True),
        ("1e" + "0" * 50 + "309", False),
    ]:
        kind, _ = same(c_backend, text.encode())
        assert (kind == "ok") == finite, text


# -- which error comes first -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'[x, "\xff"]', "invalid UTF-8 at byte offset 5"),  # UTF-8 before grammar
        (b"x" + b"[" * 65, "nesting deeper than 64 levels"),  # the pre-scan before grammar
        (b'{"a":1,"a":2,"b":01}', "Expecting ',' delimiter at offset 18"),  # before the close
        (b'{"a":1,"a":{"b":1,"b":2}}', "duplicate member name 'b'"),  # inner object closes first
        (b'{"a":1,"a":2,"c":[1e400]}', "number '1e400' is out of range"),
        (b'["\\udc00", "\\ud800"]', "lone surrogate \\udc00 in a string"),  # document order
        (b'{"\\ud800":"\\udc00"}', "lone surrogate \\ud800 in a string"),  # names count
        (b'["\\ud800"] x', "extra data after the JSON value at offset 11"),  # surrogates last
        (b'["\\ud800", 1e400]', "number '1e400' is out of range"),
    ],
)
def test_rule_first_error_in_the_pure_backends_order(
    c_backend: _backend.Backend, data: bytes, message: str
) -> None:
    """The first error is the pure backend's: phases in order, grammar in scanner order."""
    assert same(c_backend, data) == ("error", message)


def test_rule_many_names_in_open_objects(c_backend: _backend.Backend) -> None:
    """Objects with more names than C keeps on its stack are checked in full."""
    names = [f'"n{i}":{i}' for i in range(3000)]
    doc = "{" + ",".join(names) + ',"inner":{' + ",".join(names) + "}}"
    assert same(c_backend, doc.encode())[0] == "ok"
    assert same(c_backend, (doc[:-2] + ',"n2999":0}}').encode()) == (
        "error",
        "duplicate member name 'n2999'",
    )
    assert same(c_backend, ("{" + ",".join(names) + ',"\\u006e7":0}').encode()) == (
        "error",
        "duplicate member name 'n7'",
    )


def test_rule_workspace_follows_the_open_names_not_the_bytes(c_backend: _backend.Backend) -> None:
    """The C workspace past the stack's 256 names holds the names open at once, no more.

    A 30 MB object of 300 long members needs room for 300 names (about 13 KB), not a
    size drawn from its 30 MB; the check still sees every name (a late duplicate).
    """
    from simplex_rpc._wire import _simplex_rpc_c
    from simplex_rpc._wire import cbackend as _cbackend

    value = "v" * 100_000
    members = [f'"member{i}":"{value}"' for i in range(300)]
    doc = ("{" + ",".join(members) + "}").encode()
    assert len(doc) > 30_000_000
    size = _cbackend.json_workspace_size(doc)
    assert size == _simplex_rpc_c.lib.srpc_json_workspace_size(300)
    assert size < 300 * 64
    parsed = c_backend.json_loads(doc)
    assert len(parsed) == 300 and parsed["member299"] == value
    twice = doc[:-1] + b',"member7":0}'
    assert outcome(c_backend.json_loads, twice) == ("error", "duplicate member name 'member7'")
    # under the stack's 256 names, no workspace at all
    assert _cbackend.json_workspace_size(("{" + ",".join(members[:256]) + "}").encode()) == 0


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, str])
def test_rule_every_input_type(c_backend: _backend.Backend, kind: type) -> None:
    """bytes, bytearray, memoryview and str all parse, and fail, the same way."""
    for text in ('{"a":[1,2.5,"é"]}', '{"a":1,"a":2}', '["x" 1]'):
        data = text if kind is str else kind(text.encode())
        assert outcome(c_backend.json_loads, data) == outcome(PURE.json_loads, data)
        assert checked(c_backend.json_check, data) == checked(PURE.json_check, data)


class _Bytes(bytes):
    pass


class _Bytearray(bytearray):
    pass


class _Str(str):
    pass


def _buffer_forms(text: str) -> dict[str, Any]:
    """``text`` in every input form json_loads takes, each holding the same UTF-8 bytes.

    Subclasses of bytes, bytearray and str; a memoryview of bytes and of a bytearray;
    a strided (non-contiguous) memoryview, whose bytes are its elements in order; and
    a memoryview of an ``array`` (items wider than a byte: its bytes, not its items).
    """
    raw = text.encode()
    spread = bytearray(2 * len(raw))
    spread[::2] = raw
    wide = array.array("B", raw)
    return {
        "bytes subclass": _Bytes(raw),
        "bytearray subclass": _Bytearray(raw),
        "str subclass": _Str(text),
        "memoryview of bytes": memoryview(raw),
        "memoryview of a bytearray subclass": memoryview(_Bytearray(raw)),
        "strided memoryview": memoryview(spread)[::2],
        "memoryview of an array": memoryview(wide),
        "memoryview of an array, cast": memoryview(wide).cast("B"),
        "sliced memoryview": memoryview(b"  " + raw + b"  ")[2:-2],
    }


#: Documents for the buffer forms: accepted, and refused by each phase of the check.
_FORM_DOCUMENTS = [
    '{"a":[1,2.5,"é"],"b":{"c":null}}',
    '{"a":1,"\\u0061":2}',
    '["x" 1]',
    '["\\ud800"]',
    "[" * 65 + "]" * 65,
    "1" * 65,
    "\ufeff{}",
    "{} x",
]


@pytest.mark.parametrize("form", list(_buffer_forms("")), ids=str)
def test_rule_both_backends_accept_the_same_inputs(c_backend: _backend.Backend, form: str) -> None:
    """wire.md section 6: every buffer and str form parses, and fails, as on the pure backend.

    Subclasses of bytes and str take the C path after its exact-type fast path.
    """
    for text in _FORM_DOCUMENTS:
        data = _buffer_forms(text)[form]
        want = outcome(PURE.json_loads, data)
        assert outcome(c_backend.json_loads, data) == want, (form, text)
        assert want == outcome(PURE.json_loads, text.encode()), (form, text)
    odd = array.array("H", [0x5B5B, 0x5D5D])  # b"[[]]" in two 2-byte items
    for parse in (c_backend.json_loads, PURE.json_loads):
        assert outcome(parse, memoryview(odd)) == ("ok", "[[]]")


def test_rule_str_with_a_raw_lone_surrogate(c_backend: _backend.Backend) -> None:
    """A str holding a surrogate code point (no UTF-8 form) is refused the same way."""
    assert same(c_backend, '["ok", "\udfff"]') == ("error", "lone surrogate \\udfff in a string")


def test_rule_other_types_are_a_type_error(c_backend: _backend.Backend) -> None:
    for parse in (PURE.json_loads, c_backend.json_loads, PURE.json_check, c_backend.json_check):
        with pytest.raises(TypeError, match="expected bytes or str, got int"):
            parse(1)


def test_rule_check_follows_the_active_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """strict_json.check runs the active backend's json_check: None for strict JSON,
    JsonError (the words of loads) for the rest."""
    seen: list[object] = []

    def spy(data: Any) -> None:
        seen.append(data)
        PURE.json_check(data)

    monkeypatch.setattr(_backend, "active", dataclasses.replace(_backend.active, json_check=spy))
    assert _json.check(b'{"a":1}') is None
    with pytest.raises(JsonError, match="duplicate member name 'a'"):
        _json.check('{"a":1,"a":2}')
    assert seen == [b'{"a":1}', '{"a":1,"a":2}']


def test_rule_every_strict_decoder_uses_the_active_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """_json.loads, Request.parse and Response.parse all run the active backend's validator."""
    seen: list[object] = []

    def spy(data: Any) -> Any:
        seen.append(data)
        return PURE.json_loads(data)

    monkeypatch.setattr(_backend, "active", dataclasses.replace(_backend.active, json_loads=spy))
    _json.loads(b"[]")
    sx.Request.parse(b'{"protocol":"x","request":1}')
    sx.Response.parse(b'{"response":1}')
    assert seen == [b"[]", b'{"protocol":"x","request":1}', b'{"response":1}']


# -- differential: generated and mutated inputs ---------------------------------------------

TOKENS = [
    "{", "}", "[", "]", ",", ":", " ", "\n", '"a"', '"b"', '"\\u0061"', '"é"', '"\\u00e9"',
    '"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"😀"', '"\\x"', '"\\u00"', '"\\', '"',
    "\\u", "\\ud800", "0", "1", "-", "01", "1.", "1e", "1e+", ".5", "-0", "1.5e3", "1e400",
    "1.7976931348623159e308", "9" * 65, "true", "tru", "null", "false", "NaN", "Infinity",
    "-Infinity", "x", '"\x01"', "\ufeff", "é", "\x00", "[" * 33, "]" * 33, '{"k":',
]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14))
def test_differential_token_soup(c_backend: _backend.Backend, tokens: list[str]) -> None:
    """Any sequence of JSON-ish tokens: the same value or the same first error."""
    text = "".join(tokens)
    same(c_backend, _encoded(text))
    same(c_backend, text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=24,
)


@SETTINGS
@given(
    JSON_VALUES,
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["del", "cut", *TOKENS]))),
)
def test_differential_mutated_documents(
    c_backend: _backend.Backend, value: Any, ascii_only: bool, edits: list[tuple[int, str]]
) -> None:
    """Real documents, then cut, with bytes deleted or tokens inserted: C agrees with pure."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    for at, edit in edits:
        at = at % (len(text) + 1)
        if edit == "del":
            text = text[:at] + text[at + 1 :]
        elif edit == "cut":
            text = text[:at]
        else:
            text = text[:at] + edit + text[at:]
    same(c_backend, _encoded(text))


@SETTINGS
@given(st.binary(max_size=64))
def test_differential_random_bytes(c_backend: _backend.Backend, data: bytes) -> None:
    """Arbitrary bytes: the same refusal (mostly UTF-8 and grammar errors) on both."""
    same(c_backend, data)


def test_differential_fuzz_seeds(c_backend: _backend.Backend) -> None:
    """The JSON fuzz seeds (every envelope of vectors/envelopes.json) agree on both backends."""
    seeds = sorted((Path(__file__).resolve().parents[2] / "fuzz" / "corpus" / "json").iterdir())
    assert len(seeds) >= 100
    outcomes = {same(c_backend, seed.read_bytes())[0] for seed in seeds}
    assert outcomes == {"ok", "error"}

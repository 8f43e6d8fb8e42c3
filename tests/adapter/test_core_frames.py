"""Reading the chat core's frames (``simplex_rpc.adapter._frames``), issue 14 problems 6 and 8.

Rules pinned: every frame is read with the library's strict JSON (wire.md
section 3: duplicate member names, NaN, integers of more than 64 digits, lone
surrogates, nesting deeper than 64 levels are refused); the envelope a frame
carries (``requestData``, ``responseData``) is kept as the very text it came
as, and gets the whole depth allowance of its own; a frame that cannot be read
never raises, and its ``corrId`` is read when it can be.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from simplex_rpc._wire import strict_json as _json
from simplex_rpc.adapter._frames import AMBIGUOUS, read_frame

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

SETTINGS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

json_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=20,
)


def event_frame(data: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    return json.dumps(
        {
            "resp": {
                "type": "serviceRequest",
                "user": {"userId": 1},
                "requestId": "r1",
                "requestData": data,
            }
        },
        indent=indent,
        ensure_ascii=ascii_only,
    )


@SETTINGS
@given(
    data=st.dictionaries(json_text, json_values, max_size=5) | st.lists(json_values, max_size=5),
    indent=st.none() | st.integers(0, 3),
    ascii_only=st.booleans(),
)
def test_a_strict_frame_reads_as_the_strict_reader_reads_it(
    data: Any, indent: int | None, ascii_only: bool
) -> None:
    """The value is the strict reader's; the envelope's text is the frame's own slice."""
    text = event_frame(data, indent=indent, ascii_only=ascii_only)
    frame = read_frame(text)
    assert frame.error is None
    assert frame.value == _json.loads(text)
    envelope = frame.envelopes[("resp", "requestData")]
    assert envelope in text and _json.loads(envelope) == data


@SETTINGS
@given(st.text(max_size=80) | st.binary(max_size=80).map(lambda b: b.decode("latin-1")))
def test_any_text_is_read_or_refused_without_raising(text: str) -> None:
    """Without an envelope member, the frame reader is exactly the strict reader."""
    frame = read_frame(text)
    try:
        expected = _json.loads(text)
    except _json.JsonError as exc:
        assert frame.error == str(exc)[:200]
    else:
        assert frame.error is None and frame.value == expected


def test_every_truncation_of_a_frame_is_refused_without_raising() -> None:
    text = '{"corrId":"7","resp":{"type":"serviceResponse","responseData":{"response":[1,"}"]}}}'
    for cut in range(len(text)):
        frame = read_frame(text[:cut])
        assert frame.error is not None
        if cut >= len('{"corrId":"7"'):
            assert frame.corr_id == "7"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"resp":{"type":"a","type":"b"}}', "duplicate member name 'type'"),
        ('{"corrId":"1","resp":{"type":"x","n":NaN}}', "NaN is not JSON"),
        ('{"resp":{"type":"x","n":' + "9" * 70 + "}}", "70 digits"),
        ('{"resp":{"type":"x\\ud800"}}', "lone surrogate"),
        ('{"resp":{"type":"x","deep":' + "[" * 70 + "]" * 70 + "}}", "deeper than 64"),
        ("\ufeff{}", "byte-order mark"),
    ],
)
def test_the_strict_rules_apply_to_the_frame_around_the_envelope(text: str, error: str) -> None:
    frame = read_frame(text)
    assert frame.error is not None and error in frame.error


def test_an_envelope_breaking_the_rules_is_kept_as_its_text_for_its_reader() -> None:
    """The frame is fine; the envelope is not: the event carries the envelope's text (the
    core's JSON-text form), whose reader reports the rule it breaks."""
    envelope = '{"protocol":"mcp","request":1,"request":2}'
    frame = read_frame('{"resp":{"type":"serviceRequest","requestData":' + envelope + "}}")
    assert frame.error is None
    assert frame.value["resp"]["requestData"] == envelope
    assert frame.envelopes[("resp", "requestData")] == envelope


def test_the_envelope_has_its_own_64_levels() -> None:
    deep = "[" * 64 + "]" * 64
    frame = read_frame('{"result":{"type":"serviceRequest","requestData":' + deep + "}}")
    assert frame.error is None and frame.envelopes[("result", "requestData")] == deep
    deeper = "[" * 65 + "]" * 65
    frame = read_frame('{"resp":{"type":"serviceRequest","requestData":' + deeper + "}}")
    assert frame.error is None and frame.value["resp"]["requestData"] == deeper


def test_an_envelope_member_given_twice_is_refused() -> None:
    frame = read_frame('{"resp":{"requestData":{"a":1},"requestData":{"a":1}}}')
    assert frame.error == "duplicate member name 'requestData'"
    assert frame.value == {"resp": {"requestData": AMBIGUOUS}}


def test_an_escaped_member_name_is_the_same_member() -> None:
    frame = read_frame('{"resp":{"request\\u0044ata":{"s":"}]"}}}')
    assert frame.error is None
    assert frame.envelopes == {("resp", "requestData"): '{"s":"}]"}'}


def test_only_the_event_s_own_members_are_envelopes() -> None:
    """A member of that name deeper in the event is data, left where it is."""
    text = '{"resp":{"type":"x","chatItem":{"requestData":{"a":1}}}}'
    frame = read_frame(text)
    assert frame.error is None and frame.envelopes == {}
    assert frame.value == json.loads(text)


def test_a_corr_id_is_read_from_an_unreadable_frame_only_when_unambiguous() -> None:
    assert read_frame('{"corrId":"1","corrId":"2","resp":{"type":"x"}}').corr_id is None
    assert read_frame('{"corrId":12,"resp":{"type":"x","n":NaN}}').corr_id == "12"
    assert read_frame('{"corrId":true,"resp":{"type":"x","n":NaN}}').corr_id is None
    assert read_frame('{"resp":{"type":"x","n":NaN}}').corr_id is None


def test_bytes_are_utf8() -> None:
    assert read_frame(b'{"resp":{"type":"\xc3\xa9"}}').value == {"resp": {"type": "é"}}
    assert read_frame(b'{"resp":{"type":"\xff"}}').error == "invalid UTF-8 at byte offset 17"

"""The I/O edge, issue 21 item 1: a core frame is read in one linear pass.

The rule pinned (issue 21): "The whole frame must be read in one linear pass,
and no core frame may hold the loop longer than its size warrants." A frame
may be up to 16 MiB (the WebSocket transport's ``max_size``).

Linearity is asserted by counting work, not with a clock: the frame reader
counts the characters its scanner steps look at (every regular-expression or
JSON-scanner step adds the span it examined, a failing step the rest of the
text), and that count must stay within a constant times the frame's length,
for the hostile frames of the issue and for ordinary ones. This test uses the
private reader (``simplex_rpc.adapter._frames``): the count is its own.
"""

from __future__ import annotations

import json

import pytest

from simplex_rpc.adapter._frames import read_frame, scan_work

pytestmark = pytest.mark.edge

# At most this many characters looked at per character of the frame.
PER_CHAR = 4


def hostile(kind: str, n: int) -> str:
    """The issue's frames: an envelope member name, then an unterminated string of
    escaped quotes (or a variant of it) of about ``n`` characters."""
    if kind == "escaped-quotes":
        return '{"resp":{"requestData":1,"x":"' + '\\"' * (n // 2)
    if kind == "unicode-escape":
        return '{"resp":{"type":"\\u0041","x":"' + '\\"' * (n // 2)
    if kind == "quotes-after-envelope":
        return '{"resp":{"responseData":{"a":1},"x":' + '"\\"' * (n // 3)
    if kind == "many-strings":
        return '{"resp":{"requestData":1,' + '"a":"b",' * (n // 8)
    if kind == "deep-then-open":
        return '{"resp":{"requestData":' + "[" * (n // 2) + '"' + "\\\\" * (n // 4)
    if kind == "brackets-in-strings":
        return '{"resp":{"requestData":[' + '"]}]",' * (n // 6) + "1]}}"
    raise AssertionError(kind)


KINDS = (
    "escaped-quotes",
    "unicode-escape",
    "quotes-after-envelope",
    "many-strings",
    "deep-then-open",
    "brackets-in-strings",
)


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_frame_is_scanned_in_work_linear_in_its_length(kind: str) -> None:
    """Issue 21 item 1: ``'{"resp":{"requestData":1,"x":"' + '\\\\"' * 8000`` took 1.3 s
    (a quadratic scan); every such frame is now looked at a bounded number of times per
    character, whatever its length, and read (or refused) without raising."""
    for n in (2_000, 16_000, 128_000):
        text = hostile(kind, n)
        work = scan_work(text)
        assert work <= PER_CHAR * len(text) + 64, (kind, n, work, len(text))
        frame = read_frame(text)
        assert frame.value is not None or frame.error is not None


@pytest.mark.parametrize("kind", KINDS)
def test_the_work_grows_no_faster_than_the_frame(kind: str) -> None:
    """Eight times the frame, at most about eight times the work (a quadratic scan
    would do 64 times)."""
    small, large = scan_work(hostile(kind, 16_000)), scan_work(hostile(kind, 128_000))
    assert large <= 9 * max(small, 1), (kind, small, large)


def test_an_ordinary_service_request_frame_is_scanned_once() -> None:
    """A well-formed serviceRequest with a large envelope and a large user record: the
    scan looks at each character a bounded number of times, and the envelope is cut."""
    envelope = {"protocol": "mcp", "request": {"text": 'a"b\\c}' * 2_000, "list": list(range(500))}}
    text = json.dumps(
        {
            "resp": {
                "type": "serviceRequest",
                "user": {"userId": 1, "profile": {"displayName": "bob", "bio": "x\\y" * 3_000}},
                "requestId": "r1",
                "requestData": envelope,
            }
        }
    )
    assert scan_work(text) <= PER_CHAR * len(text)
    frame = read_frame(text)
    assert frame.error is None
    assert json.loads(frame.envelopes[("resp", "requestData")]) == envelope


def test_a_frame_of_many_megabytes_is_scanned_linearly() -> None:
    """A frame near the 16 MiB limit (here 4 MiB of escaped quotes after an envelope
    member) is looked at linearly: at most a few passes over its characters."""
    text = '{"resp":{"requestData":1,"x":"' + '\\"' * (2 * 2**20)
    assert scan_work(text) <= PER_CHAR * len(text)
    assert read_frame(text).error is not None

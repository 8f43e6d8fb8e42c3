"""Hostile input to the text decoders: /_call, replies, declarations, llms.txt, core events.

The same guarantee as for the core decoders (issue 7): a value, or the
decoder's own error class (``CallSyntaxError``, ``DeclarationError``,
``LlmsTxtError``, ``EnvelopeError``), never another exception type, never a
hang or unbounded recursion. Decoders documented never to raise
(``parse_reply``, ``link_kind``, ``parse_communications`` without ``strict``)
are held to that. Large inputs are judged by completion and tracemalloc
peaks, never by the clock.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simplex_rpc import Request, adapter, chat, declarations, llms_txt
from simplex_rpc.errors import (
    CallSyntaxError,
    ChatCoreError,
    DeclarationError,
    EnvelopeError,
    LlmsTxtError,
    SimplexRpcError,
)

pytestmark = pytest.mark.hostile

# Characters that break parsers: separators, controls, quotes, brackets,
# surrogates, wide and combining characters, the replacement character.
HOSTILE_CHARS = [
    "", " ", "  ", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\x85", "\xa0", "\u2028", "\u2029",
    "\u3000", "\u200b", "\ufeff", "\ud800", "\udfff", "\ufffd", "'", '"', "\\", "@", "#", "[",
    "]", "(", ")", "{", "}", ",", ".", ":", "é", "\u0301", "\U0001f600", "A",
]
MB = 1 << 20
BIG = MB // 4  # large enough that a quadratic step would not complete


def char_mutations(text: str, step: int = 1) -> Iterator[str]:
    """Truncations at every offset, and every hostile character put at (or over) each offset."""
    for i in range(0, len(text) + 1, step):
        yield text[:i]
        for ch in HOSTILE_CHARS:
            yield text[:i] + ch + text[i:]
            yield text[:i] + ch + text[i + 1 :]


def held(decode: Callable[[Any], Any], data: Any, error: type[SimplexRpcError]) -> Any:
    """The value, or None after the decoder's own error; anything else fails the test."""
    try:
        return decode(data)
    except SimplexRpcError as exc:
        assert isinstance(exc, error), f"{type(exc).__name__}: {exc}"
        assert str(exc)
        return None


def peak_of(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------
# /_call text (chat.parse_call)

CALLS = [
    '/_call mcp {"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    "/_call @bob a2a {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"GetTask\",\"params\":{}}",
    "/_call @'Acme Support' mcp {\"a\":[1,2.5,\"é\"]}",
]


@pytest.mark.parametrize("valid", CALLS)
def test_call_every_truncation_and_character(valid: str) -> None:
    assert isinstance(chat.parse_call(valid), chat.Call)
    for text in char_mutations(valid):
        call = held(chat.parse_call, text, CallSyntaxError)
        if call is not None:
            # What parses is a call that writes back to a command that parses the same.
            assert chat.parse_call(call.text()) == call


@pytest.mark.parametrize(
    "text",
    [
        "",
        "/_call",
        "/_call ",
        "/_call  mcp {}",
        "/_call mcp",
        "/_call mcp ",
        "/_call mcp  {}",
        "/_call MCP {}",
        "/_call mcp []",
        "/_call mcp null",
        "/_call mcp {} {}",
        "/_call @ mcp {}",
        "/_call @'' mcp {}",
        "/_call @'unclosed mcp {}",
        "/_call @bob, mcp {}",
        "/_call @\x00 mcp {}",
        "/_call @\ud800 mcp {}",
        "/_call @'a\ud800b c' mcp {}",
        "/_call mcp {\"a\":1,\"a\":2}",
        "/_call mcp {\"a\":NaN}",
        "/_call mcp {\"a\":1e400}",
        "/_call mcp {\"a\":\"\\ud800\"}",
        "/_call mcp {\"a\":" + "1" * 65 + "}",
        "/_call mcp " + "[" * 100_000,
        "/_call mcp " + '{"a":' * 100_000,
        "/_call @'" + "a " * (BIG // 2) + " mcp {}",
        "/_call\u00a0mcp {}",
        "/_call\u3000mcp {}",
        "/_callmcp {}",
        "\ufeff/_call mcp {}",
    ],
    ids=lambda t: repr(t[:40]),
)
def test_call_hostile_table(text: str) -> None:
    assert held(chat.parse_call, text, CallSyntaxError) is None


@pytest.mark.parametrize(
    "text",
    ["/_call @" + "a" * BIG + " mcp {}", "/_call " + "a" * BIG + " {}",
     "/_call mcp {" + '"a":0,' * (BIG // 6) + '"b":0}'],
    ids=["long member", "long protocol", "many members"],
)
def test_call_long_parts_complete(text: str) -> None:
    """Megabyte parts are read in linear time and memory (the chat size limit is elsewhere)."""
    assert peak_of(lambda: held(chat.parse_call, text, CallSyntaxError)) <= 64 * len(text)


@pytest.mark.parametrize("data", [None, b"/_call mcp {}", 1, ["/_call mcp {}"]], ids=repr)
def test_call_wrong_types(data: object) -> None:
    with pytest.raises((TypeError, CallSyntaxError)):
        chat.parse_call(data)  # type: ignore[arg-type]


def test_call_memory_is_proportional() -> None:
    text = '/_call mcp {"a":[' + "{}," * (MB // 12) + "{}]}"
    assert peak_of(lambda: chat.parse_call(text)) <= 64 * len(text)


@pytest.mark.parametrize("protocol", ["mcp", "a2a", "x"])
def test_parse_reply_never_raises(protocol: str) -> None:
    """A reply that is not a protocol message is a text reply (None), whatever it holds."""
    valid = '{"jsonrpc":"2.0","id":1,"result":{}}'
    for text in char_mutations(valid, step=3):
        value = chat.parse_reply(protocol, text)
        assert value is None or isinstance(value, dict)
    for text in ("[" * 100_000, '"\\ud800"', "1" * 100, "NaN", "", "\ud800"):
        assert chat.parse_reply(protocol, text) is None


# --------------------------------------------------------------------------
# Declarations

PREFERENCES = (
    '{"timedMessages":{"allow":"yes"},"protocols":{"mcp":{"versions":["2026-07-28"],'
    '"transports":{"chat":true,"rpc":true},"x":1},"a2a":{"versions":["1.0"],'
    '"transports":{"rpc":true}}}}'
)
PUBLIC_GROUP = '{"audience":["agent","human"],"changeFrequency":"weekly","x":[1]}'
LINK_DATA = '{"serves":["bot","agent"],"other":{}}'

DECLARATION_PARSERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "parse_protocols": (declarations.parse_protocols, PREFERENCES),
    "parse_protocols(group)": (
        lambda s: declarations.parse_protocols(s, group=True), PREFERENCES
    ),
    "check_protocols": (declarations.check_protocols, PREFERENCES),
    "parse_audience": (declarations.parse_audience, PUBLIC_GROUP),
    "parse_change_frequency": (declarations.parse_change_frequency, PUBLIC_GROUP),
    "parse_serves": (declarations.parse_serves, LINK_DATA),
}


@pytest.mark.parametrize("name", list(DECLARATION_PARSERS))
def test_declaration_every_truncation_and_character(name: str) -> None:
    parse, valid = DECLARATION_PARSERS[name]
    held(parse, valid, DeclarationError)
    for text in char_mutations(valid, step=2):
        held(parse, text, DeclarationError)
        held(parse, text.encode("utf-8", "surrogatepass"), DeclarationError)


@pytest.mark.parametrize("name", list(DECLARATION_PARSERS))
def test_declaration_every_bit_flipped(name: str) -> None:
    parse, valid = DECLARATION_PARSERS[name]
    data = valid.encode()
    for bit in range(8 * len(data)):
        mutated = bytearray(data)
        mutated[bit // 8] ^= 1 << (bit % 8)
        held(parse, bytes(mutated), DeclarationError)


PROTOCOLS_VALUES = [
    "null", "[]", '"mcp"', "1", "true", "{}", '{"MCP":{}}', '{"":{}}', '{"mcp":null}',
    '{"mcp":[]}', '{"mcp":{"versions":"1.0","transports":{}}}',
    '{"mcp":{"versions":[1],"transports":{}}}', '{"mcp":{"versions":[],"transports":[]}}',
    '{"mcp":{"versions":[],"transports":{"chat":"yes"}}}',
    '{"mcp":{"versions":[],"transports":{"rpc":1}}}', '{"mcp":{"versions":[]}}',
    '{"mcp":{"transports":{}}}',
    '{"mcp":{"versions":[' + '"v",' * 10_000 + '"v"],"transports":{}}}',
    '{"' + "a" * 100_000 + '":{"versions":[],"transports":{}}}',
    '{"mcp":{"versions":[],"transports":{}},"mcp":{"versions":[],"transports":{}}}',
    '{"mcp":{"versions":[' + "[" * 70 + "]" * 70 + '],"transports":{}}}',
    '{"mcp\\u0000":{"versions":[],"transports":{}}}',
]


@pytest.mark.parametrize("value", PROTOCOLS_VALUES, ids=lambda v: v[:40])
@pytest.mark.parametrize("group", [False, True])
def test_declaration_protocols_entry_table(value: str, group: bool) -> None:
    """Each hostile ``protocols`` value: dropped entries are reported, never raised."""
    text = '{"protocols":' + value + "}"
    parsed = held(lambda s: declarations.parse_protocols(s, group=group), text, DeclarationError)
    problems = held(lambda s: declarations.check_protocols(s, group=group), text, DeclarationError)
    if parsed is not None:
        assert all(isinstance(d, declarations.ProtocolDeclaration) for d in parsed.values())
        assert all(isinstance(p, str) and len(p) < 400 for p in problems)


@pytest.mark.parametrize(
    "source",
    ["", "[]", "null", '"x"', "[" * 100_000, '{"a":1,"a":1}', '{"a":NaN}', b"\xff", "\ud800",
     b'{"audience":' + b"[" * 100 + b"]" * 100 + b"}"],
    ids=lambda s: repr(s[:20]),
)
@pytest.mark.parametrize("name", list(DECLARATION_PARSERS))
def test_declaration_sources_that_are_not_objects(name: str, source: str | bytes) -> None:
    parse, _ = DECLARATION_PARSERS[name]
    assert held(parse, source, DeclarationError) is None


@pytest.mark.parametrize(
    "record",
    [
        {"audience": "agent"}, {"audience": [["agent"]]}, {"audience": [{"a": 1}, None, 1.5]},
        {"serves": {"bot": True}}, {"changeFrequency": ["weekly"]}, {"changeFrequency": {}},
        {"audience": ["agent"] * 100_000}, {"protocols": {1: {}}},
    ],
    ids=repr,
)
def test_declaration_decoded_records_with_wrong_types(record: dict[Any, Any]) -> None:
    for parse, _ in DECLARATION_PARSERS.values():
        held(parse, record, DeclarationError)


# --------------------------------------------------------------------------
# llms.txt

SECTION = (
    "# Acme\n\n## Communications\n\n"
    "- [Acme news](https://smp12.simplex.im/c#k): SimpleX updates for people and agents,"
    " weekly. News.\n"
    "- [Ask Acme](https://smp12.simplex.im/a#k): SimpleX business contact for agents, MCP,"
    " A2A. Orders.\n"
    "- [Mail](mailto:a@acme.example): Email contact for people.\n\n## Other\n"
)


def _communications(text: str) -> llms_txt.Communications:
    result = llms_txt.parse_communications(text)
    assert isinstance(result, llms_txt.Communications)
    for address in result:
        value = llms_txt.check_address(address)
        assert value is None or isinstance(value, str)
        # Every address read writes back to a line that reads back to it.
        again = llms_txt.parse_communications(llms_txt.format_communications([address]))
        assert list(again) == [address]
    for problem in result.problems:
        assert problem.line >= 1 and problem.message
    return result


def test_llms_txt_every_truncation_and_character() -> None:
    assert len(_communications(SECTION)) == 3
    for text in char_mutations(SECTION, step=3):
        _communications(text)
        held(lambda t: llms_txt.parse_communications(t, strict=True), text, LlmsTxtError)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "## Communications",
        "## Communications\n" + "- [a](b): SimpleX contact for agents" + ", mcp" * 100_000 + ".",
        "## Communications\n- [" + "[" * BIG + "](x): SimpleX group for people.",
        "## Communications\n- [t](" + "(" * BIG + "): SimpleX group for people.",
        "## Communications\n- [t](u): " + "SimpleX " * (BIG // 8) + "group for people.",
        "## Communications\n- [t](u): " + "x contact " * (BIG // 10),
        "## Communications\n- [t](u): SimpleX updates for people" + ", weekly" * 50_000,
        "## Communications\n- [t](u): SimpleX contact for agents, " + "a" * BIG + ".",
        "## Communications\n" + "- [t](u): SimpleX group for people.\n" * 20_000,
        "## Communications\n" + "```\n" * 10_000,
        "## Communications\n" + "\n" * BIG,
        "## Communications\n" + "\u2028" * 10_000,
        "## Communications\r\n- [t](u): SimpleX group for people.\r\n",
        "## Communications\n- [t](u): SimpleX group for people.\x00",
        "## Communications\n- [t](\ud800): SimpleX group for people.",
        "## Communications\n- [\ud800](u): SimpleX group for people.",
        "#" * 100_000 + " Communications",
        "## Communications\n" + "#" * 7 + " x\n- [t](u): SimpleX group for people.",
    ],
    ids=lambda t: repr(t[:50]),
)
def test_llms_txt_hostile_table(text: str) -> None:
    """Parsed, with problems listed by line; strict mode raises LlmsTxtError only."""
    _communications(text)
    held(lambda t: llms_txt.parse_communications(t, strict=True), text, LlmsTxtError)


def test_llms_txt_memory_is_proportional() -> None:
    text = "## Communications\n" + "- [t](u): SimpleX contact for agents, mcp. x\n" * 5_000
    assert peak_of(lambda: llms_txt.parse_communications(text)) <= 64 * len(text)


@pytest.mark.parametrize(
    "url",
    [
        "", "simplex:", "simplex:/a", "simplex:/a#", "https://", "https:///a#k", "https://[::1/a#k",
        "https://[zz]/a#k", "https://h:99999999/a#k", "simplex:/contact#/?data=" + "%5B" * 100_000,
        "simplex:/contact#/?data=" + "%7B%22a%22:" * 10_000, "simplex:/contact#/?data=%FF%FE",
        "simplex:/contact#/?data=" + "1" * 10_000, "simplex:/contact#/?data=NaN",
        "simplex:/contact#/?" + "&" * BIG, "https://h/\ud800#k", "https://h/a#\x00",
        "simplex://host/a#k", "https://" + "a" * BIG + "/a#k",
    ],
    ids=lambda u: repr(u[:40]),
)
def test_link_kind_never_raises(url: str) -> None:
    """A link from a web page is hostile: its kind or None, even for deep or broken data."""
    kind = llms_txt.link_kind(url)
    assert kind is None or kind in llms_txt.LINK_KINDS


@pytest.mark.parametrize("data", [None, b"## Communications\n", 1], ids=repr)
def test_llms_txt_wrong_types(data: object) -> None:
    with pytest.raises((TypeError, LlmsTxtError)):
        llms_txt.parse_communications(data)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# The chat core's events: the parse path of serviceRequest and serviceResponse


REQUEST_DATA = {"protocol": "mcp", "request": {"jsonrpc": "2.0", "id": 1, "method": "x"}}


def _event_values() -> Iterator[object]:
    text = json.dumps(REQUEST_DATA)
    yield text
    yield REQUEST_DATA
    yield from char_mutations(text, step=3)
    deep: object = {}
    for _ in range(900):
        deep = {"a": deep}
    yield {"protocol": "mcp", "request": deep}
    yield {"protocol": "mcp", "request": "\ud800"}
    yield {"protocol": "mcp", "request": float("nan")}
    yield {"protocol": "mcp", "request": 10**100}
    yield {"protocol": "mcp", "request": {1: 2}}
    yield {"protocol": 1, "request": {}}
    yield {"protocol": "mcp", "request": {}, "requestKey": 5}
    yield from (None, 1, 1.5, True, [], ["x"], b"{}", "[" * 100_000)


def test_core_request_data_table() -> None:
    """requestData of a serviceRequest event: a Request, or EnvelopeError (bad_request)."""
    for value in _event_values():
        request = held(adapter._parse_request_data, value, EnvelopeError)
        assert request is None or isinstance(request, Request)


def test_core_response_data_table() -> None:
    """responseData of a serviceResponse: a Response, or EnvelopeError."""
    for value in _event_values():
        held(adapter._parse_response_data, value, EnvelopeError)
    for value in ('{"response":1}', {"error": {"code": "internal"}}, {"response": None}):
        assert held(adapter._parse_response_data, value, EnvelopeError) is not None


def test_core_message_json_raises_value_error_only() -> None:
    """The adapter's reader of core messages refuses bad JSON with ValueError, which its
    callers turn into a logged, dropped message; never RecursionError or the like."""
    for text in ("[" * 100_000, '{"a":NaN}', "\xff", b"\xff\xfe", "", "1" * 10_000, "[1,]"):
        with pytest.raises(ValueError):
            adapter._loads_core(text)


@pytest.mark.parametrize(
    "obj",
    [None, {}, [], {"connFullLink": 1}, {"connFullLink": None}, "x",
     {"connFullLink": "simplex:/a#k", "connShortLink": 5}],
    ids=repr,
)
def test_core_created_link_table(obj: object) -> None:
    address = held(adapter.ServiceAddress.from_created_link, obj, ChatCoreError)
    assert address is None or isinstance(address.full_link, str)

"""Chat transport: commands, message size (protocol text, "Chat transport")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from simplex_rpc._wire import strict_json as _json
from simplex_rpc.chat import (
    MAX_MESSAGE_JSON,
    QUOTE_ALLOWANCE,
    Call,
    command_allowance,
    encoded_size,
    fits_message,
    format_call,
    format_member,
    parse_call,
    reply_allowance,
)
from simplex_rpc.errors import CallSyntaxError, SimplexRpcError
from simplex_rpc.vectors._examples import MCP_TOOLS_LIST_COMMAND_TEXT

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

# ---------------------------------------------------------------- commands


def test_spec_example_parses_to_what_it_says() -> None:
    call = parse_call(MCP_TOOLS_LIST_COMMAND_TEXT)  # "Listing tools in a conversation"
    assert call == Call(
        "mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
    )
    assert call.member is None


def test_format_writes_compact_json_one_space_between_parts() -> None:
    text = format_call("a2a", {"jsonrpc": "2.0", "id": 7, "method": "GetTask"})
    assert text == '/_call a2a {"jsonrpc":"2.0","id":7,"method":"GetTask"}'


@pytest.mark.parametrize(
    ("member", "mention"),
    [
        ("bob", "@bob"),
        ("Acme Support", "@'Acme Support'"),  # a space: quoted, as SimpleX mentions are
        ("S.C.", "@'S.C.'"),  # ends with punctuation: quoted (viewName)
        ("O'Brien", "@O'Brien"),  # an apostrophe inside an unquoted name is fine
        ("a\u00a0b", "@'a\u00a0b'"),  # NO-BREAK SPACE is a space to Haskell's isSpace
        ("a\u3000b", "@'a\u3000b'"),  # IDEOGRAPHIC SPACE (Zs)
        ("a\u2028b", "@a\u2028b"),  # LINE SEPARATOR (Zl) is not isSpace
        ("Zoë", "@Zoë"),
        ("bob_1", "@bob_1"),
        ("x.y", "@x.y"),  # punctuation inside, not at the end
    ],
)
def test_member_mentions_follow_simplex(member: str, mention: str) -> None:
    assert format_member(member) == mention
    text = format_call("mcp", {"id": 1}, member=member)
    assert text == f'/_call {mention} mcp {{"id":1}}'
    assert parse_call(text) == Call("mcp", {"id": 1}, member)


@pytest.mark.parametrize(
    "member",
    [
        "",
        " bob",  # starts with a space
        "#bob",
        "@bob",
        "'bob",
        "Acme's Support",  # needs quotes and contains "'"
        "bob's.",  # ends with punctuation and contains "'"
        "a\nb",  # a control character (the core splits lines before mentions)
        "a\x00b",
        "\ud800",
    ],
)
def test_unmentionable_names_are_refused(member: str) -> None:
    with pytest.raises(CallSyntaxError, match="member"):
        format_call("mcp", {}, member=member)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "does not start"),
        ("/call mcp {}", "does not start"),
        ("/_callmcp {}", "offset 6"),
        ("/_call", "protocol is missing"),
        ("/_call ", "protocol is missing"),
        ("/_call  mcp {}", "extra space at offset 7"),
        ("/_call mcp", "request is missing"),
        ("/_call mcp ", "request is missing"),
        ("/_call mcp  {}", "extra space at offset 11"),
        ("/_call mcp\t{}", "not a protocol name"),
        ("/_call MCP {}", "not a protocol name"),
        ("/_call m_p {}", "not a protocol name"),
        ("/_call mcp []", "expected a JSON object"),
        ("/_call mcp 1", "expected a JSON object"),
        ("/_call mcp {", "offset 11"),
        ('/_call mcp {"a":1,"a":2}', "duplicate member name"),
        ('/_call mcp {"a":NaN}', "NaN"),
        ('/_call mcp {"a":"\\ud800"}', "lone surrogate"),
        ("/_call mcp {} x", "extra data"),
        ("/_call mcp " + "[" * 65 + "]" * 65, "nesting"),
        ("/_call @ mcp {}", "not followed by a name"),
        ("/_call @bob. mcp {}", "must be quoted"),
        ("/_call @'bob mcp {}", "no closing"),
        ("/_call @'' mcp {}", "empty"),
        ("/_call @' bob' mcp {}", "starts with ' '"),
        ("/_call @#x mcp {}", "starts with '#'"),
        ("/_call @bob  mcp {}", "extra space"),
        ("/_call @'a b'mcp {}", "one space before the protocol"),
        ("/_call @bob\tmcp {}", "one space before the protocol"),
        ("/_call @'a\nb' mcp {}", "control character"),
    ],
)
def test_bad_commands_raise_call_syntax_error(text: str, where: str) -> None:
    with pytest.raises(CallSyntaxError, match=where):
        parse_call(text)


def test_call_syntax_error_is_the_library_error() -> None:
    assert issubclass(CallSyntaxError, SimplexRpcError)
    assert issubclass(CallSyntaxError, ValueError)


def test_trailing_json_whitespace_is_part_of_the_request() -> None:
    assert parse_call("/_call mcp {} \n").request == {}
    assert parse_call('/_call mcp {"a": [1, 2]}').request == {"a": [1, 2]}


def test_format_refuses_bad_parts() -> None:
    with pytest.raises(CallSyntaxError, match="protocol name"):
        format_call("Mcp", {})
    with pytest.raises(CallSyntaxError, match="JSON object"):
        format_call("mcp", [1])  # type: ignore[arg-type]
    with pytest.raises(CallSyntaxError, match="strict JSON"):
        format_call("mcp", {"x": float("nan")})
    with pytest.raises(CallSyntaxError, match="strict JSON"):
        format_call("mcp", {"x": "\ud800"})
    with pytest.raises(CallSyntaxError, match="strict JSON"):
        format_call("mcp", {"x": object()})
    deep: dict[str, Any] = {}
    for _ in range(70):
        deep = {"a": deep}
    with pytest.raises(CallSyntaxError, match="strict JSON"):
        format_call("mcp", deep)


# Round trips: what format_call writes, parse_call reads back unchanged.

_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20
).filter(lambda n: n[0] > " " and n[0] not in "#@'")
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_requests = st.dictionaries(st.text(max_size=8), _json_values, max_size=5)
_protocols = st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True)


@settings(max_examples=examples(150))
@given(_protocols, _requests, st.none() | _names)
def test_format_then_parse_round_trips(protocol: str, request: dict[str, Any], member: Any) -> None:
    try:
        text = format_call(protocol, request, member=member)
    except CallSyntaxError:
        # Only names no mention can carry are refused.
        assert member is not None and "'" in member
        return
    assert parse_call(text) == Call(protocol, request, member)
    assert Call(protocol, request, member).text() == text


@settings(max_examples=examples(150))
@given(st.text(max_size=60))
def test_parse_never_raises_anything_but_call_syntax_error(text: str) -> None:
    try:
        call = parse_call("/_call " + text)
    except CallSyntaxError:
        return
    assert parse_call(call.text()) == call


# ---------------------------------------------------------------- message size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("", 0),
        ("abc", 3),
        ('"', 2),  # \"
        ("\\", 2),  # \\
        ("\n", 2),
        ("\r", 2),
        ("\t", 2),
        ("\x00", 6),  # \u0000
        ("\x08", 6),  # backspace: aeson writes \u0008, not \b
        ("\x0b", 6),
        ("\x0c", 6),  # form feed: \u000c, not \f
        ("\x1f", 6),
        (" ", 1),  # U+0020 is the first character written as itself
        ("\x7f", 1),  # DEL is not escaped
        ("/", 1),  # nor is the solidus
        ("é", 2),
        ("€", 3),
        ("😀", 4),
        ("\u2028", 3),  # not escaped by aeson
        ("\ud800", 3),  # a lone surrogate: the U+FFFD the core's Text holds
        ('a"b\\c\nd\x01é😀', 1 + 2 + 1 + 2 + 1 + 2 + 1 + 6 + 2 + 4),
    ],
)
def test_encoded_size_of_each_escape_class(text: str, size: int) -> None:
    assert encoded_size(text) == size


@settings(max_examples=examples(200))
@given(st.text())
def test_encoded_size_matches_a_reference_json_encoder(text: str) -> None:
    # json.dumps escapes the same set; it writes \b and \f as two bytes where
    # aeson writes six, and cannot encode lone surrogates.
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    expected = len(body.encode("utf-8", "surrogatepass"))
    expected += 4 * (text.count("\b") + text.count("\f"))
    assert encoded_size(text) == expected


def test_encoded_size_refuses_non_text() -> None:
    with pytest.raises(TypeError):
        encoded_size(b"abc")  # type: ignore[arg-type]


def test_allowances_are_the_core_frames() -> None:
    # The envelope of a text message at its largest, as Protocol.hs writes it.
    assert command_allowance() == 208
    assert command_allowance("bob") == 208 + 48 + 3
    assert command_allowance('a"b') == 208 + 48 + 4
    assert reply_allowance() == 208 + 172 + QUOTE_ALLOWANCE
    assert reply_allowance("x" * 10) == 208 + 172 + 10


def test_the_frame_is_a_real_message() -> None:
    # The frame is the JSON the core would send around an empty text.
    from simplex_rpc import chat

    message = _json.loads(chat._FRAME)
    assert message["event"] == "x.msg.new"
    assert message["params"]["content"] == {"type": "text", "text": ""}
    frame = chat._FRAME[:-2] + chat._QUOTE_FRAME + chat._MENTION_FRAME + "}}"
    assert _json.loads(frame)["params"]["quote"]["msgRef"]["sent"] is False


def test_a_reply_fits_up_to_the_limit_less_its_allowance() -> None:
    room = MAX_MESSAGE_JSON - reply_allowance()
    assert fits_message("x" * room)
    assert not fits_message("x" * (room + 1))
    # Escapes count: a quote character takes two bytes.
    assert fits_message('"' * (room // 2))
    assert not fits_message('"' * (room // 2 + 1))
    # Multi-byte characters count their UTF-8 bytes.
    assert fits_message("€" * (room // 3))
    assert not fits_message("€" * (room // 3 + 1))


def test_a_longer_quote_leaves_less_room() -> None:
    room = MAX_MESSAGE_JSON - reply_allowance()
    quote = "q" * (QUOTE_ALLOWANCE + 100)
    assert fits_message("x" * room)
    assert not fits_message("x" * room, quote=quote)
    assert fits_message("x" * (room - 100), quote=quote)


def test_a_command_counts_its_own_frame_and_mention() -> None:
    prefix = format_call("mcp", {"p": ""})
    filler = MAX_MESSAGE_JSON - command_allowance() - encoded_size(prefix)
    text = format_call("mcp", {"p": "x" * filler})
    assert encoded_size(text) + command_allowance() == MAX_MESSAGE_JSON
    assert fits_message(text)
    assert not fits_message(format_call("mcp", {"p": "x" * (filler + 1)}))
    # The same request to a mentioned member also carries the mention.
    mentioned = format_call("mcp", {"p": "x" * filler}, member="Acme Support")
    assert not fits_message(mentioned)
    room = MAX_MESSAGE_JSON - command_allowance("Acme Support")
    assert encoded_size(mentioned) > room

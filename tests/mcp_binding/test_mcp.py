"""The MCP binding's no-I/O helpers (protocol text, "MCP binding").

The protocol text's MCP examples come from ``simplex_rpc.vectors._examples``, which
holds every example of the text once; the test that checks each of them is
verbatim is here. Each test that uses an example says which rule it pins.
JSON is compared as values (parsed), and the builders are also compared by
their compact JSON, which pins member order.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from _shared import protocol_text_path
from simplex_rpc import MAX_RESPONSE, ErrorCode, Request, Response, chat, mcp
from simplex_rpc.mcp import BindingError
from simplex_rpc.vectors import _examples
from simplex_rpc.vectors._examples import (
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_CALL_RESPONSE_TEXT,
    MCP_TOOLS_LIST_COMMAND_TEXT,
    mcp_tools_call_request,
    mcp_tools_call_response,
    mcp_tools_list_reply,
)

SPEC = protocol_text_path()
SERVED = ("2026-07-28",)


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def request(**overrides: Any) -> dict[str, Any]:
    base = mcp.make_request("tools/list", id=7)
    base.update(overrides)
    return base


# -- the examples ---------------------------------------------------------------


@pytest.mark.skipif(not SPEC.exists(), reason="the protocol text is not in this checkout")
def test_every_example_is_a_verbatim_copy_of_the_protocol_text() -> None:
    """Every constant of simplex_rpc.vectors._examples is the protocol text's, verbatim."""
    text = SPEC.read_text(encoding="utf-8")
    examples = {
        name: value
        for name, value in vars(_examples).items()
        if name.isupper() and isinstance(value, str)
    }
    assert examples
    assert sorted(examples) == sorted(name for name in _examples.__all__ if name.isupper())
    for name, example in examples.items():
        assert example in text, name


def test_example_list_command_is_a_valid_request_of_the_served_revision() -> None:
    """Example 1: the command's request is a JSON-RPC request naming 2026-07-28 in _meta."""
    call = chat.parse_call(MCP_TOOLS_LIST_COMMAND_TEXT)
    assert call.protocol == "mcp"
    assert mcp.revision_of(call.request) == "2026-07-28"
    assert mcp.check_request(call.request, supported=SERVED) is None
    built = mcp.make_request("tools/list", id=1)
    assert built == call.request
    assert compact(built) == compact(call.request)


def test_example_list_reply_is_the_reply_text() -> None:
    """Example 1: the reply is the JSON-RPC response, which fits one message."""
    reply = mcp_tools_list_reply()
    text = mcp.chat_reply(reply)
    assert json.loads(text) == reply
    assert text == compact(reply)
    assert chat.fits_message(text)


def test_example_call_request_is_the_envelope_request() -> None:
    """Example 2: the envelope has no version; its request is the MCP request unchanged."""
    envelope = Request.parse(MCP_TOOLS_CALL_REQUEST_TEXT)
    assert envelope.protocol == "mcp"
    assert "version" not in envelope.to_dict()
    assert mcp.check_request(envelope.request, supported=SERVED) is None
    assert mcp.rpc_disposition(envelope.request) is None
    built = mcp.make_request(
        "tools/call", {"name": "availability", "arguments": {"item": "anvil"}}, id=1
    )
    assert built == envelope.request
    assert Request(protocol="mcp", request=built).to_dict() == mcp_tools_call_request()
    assert Request(protocol="mcp", request=built).to_json() == compact(
        mcp_tools_call_request()
    ).encode("utf-8")


def test_example_call_response_is_the_envelope_response() -> None:
    """Example 2: the response envelope carries the JSON-RPC response as its response."""
    expected = mcp_tools_call_response()
    envelope = mcp.rpc_response(expected["response"])
    assert envelope.ok
    assert envelope.to_dict() == expected
    assert json.loads(envelope.to_json()) == expected
    assert Response.parse(MCP_TOOLS_CALL_RESPONSE_TEXT).to_dict() == expected


# -- revision_of ----------------------------------------------------------------


def test_min_revision_is_the_first_carried_revision() -> None:
    assert mcp.MIN_REVISION == "2026-07-28"
    assert mcp.PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (mcp.make_request("tools/list", id=1), "2026-07-28"),
        (mcp.make_request("tools/list", id=1, revision="2027-01-01"), "2027-01-01"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, None),
        ({"params": {"_meta": []}}, None),
        ({"params": {"_meta": {mcp.PROTOCOL_VERSION_KEY: 20260728}}}, None),
        ({"params": []}, None),
        ([], None),
        ("2026-07-28", None),
    ],
)
def test_revision_of_reads_meta(message: Any, expected: str | None) -> None:
    """Each request names its revision in _meta under io.modelcontextprotocol/protocolVersion."""
    assert mcp.revision_of(message) == expected


# -- check_request: -32600 -------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "echoed_id"),
    [
        ([], None),
        ("tools/list", None),
        (None, None),
        (request(jsonrpc="1.0"), 7),
        ({k: v for k, v in request().items() if k != "jsonrpc"}, 7),
        ({k: v for k, v in request().items() if k != "id"}, None),  # a notification
        (request(id=None), None),
        (request(id=True), None),
        (request(id=1.5), None),
        (request(id={"n": 1}), None),
        ({k: v for k, v in request().items() if k != "method"}, 7),
        (request(method=""), 7),
        (request(method=5), 7),
        (request(params=[1, 2]), 7),
        (request(params="x"), 7),
    ],
)
def test_not_a_request_is_invalid_request(message: Any, echoed_id: Any) -> None:
    """A message that is not a valid JSON-RPC 2.0 request gets -32600, with the
    request's id when it has a valid one and null otherwise."""
    answer = mcp.check_request(message, supported=SERVED)
    assert answer is not None
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] == echoed_id
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith("Invalid Request")


def test_string_ids_are_valid() -> None:
    assert mcp.check_request(request(id="abc"), supported=SERVED) is None
    assert mcp.check_request(request(id=0), supported=SERVED) is None


# -- check_request: -32022 -------------------------------------------------------


def test_unserved_revision_gets_unsupported_protocol_version() -> None:
    """A request of a revision the bot does not serve gets -32022 listing what it serves."""
    message = mcp.make_request("tools/list", id=3, revision="2027-01-01")
    answer = mcp.check_request(message, supported=SERVED)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2027-01-01"},
        },
    }
    assert mcp.check_request(message, supported=["2026-07-28", "2027-01-01"]) is None


def test_request_without_the_envelope_is_invalid_params() -> None:
    """A request without the _meta envelope is malformed, as the SDK answers it: -32602
    (issue 20: check_request matches the SDK; tests/mcp_binding/test_mcp_check_request.py runs
    the whole table through both)."""
    message = {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}
    answer = mcp.check_request(message, supported=SERVED)
    assert answer is not None
    assert answer["id"] == "a"
    assert answer["error"]["code"] == mcp.INVALID_PARAMS == -32602
    assert "data" not in answer["error"]


def test_initialize_handshake_gets_unsupported_protocol_version() -> None:
    """Earlier revisions begin with initialize: -32022 naming the offered revision."""
    message = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    answer = mcp.check_request(message, supported=SERVED)
    assert answer is not None
    assert answer["error"]["code"] == mcp.UNSUPPORTED_PROTOCOL_VERSION
    assert answer["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_invalid_request_is_answered_before_the_revision() -> None:
    message = mcp.make_request("tools/list", id=1, revision="2027-01-01")
    message["params"]["_meta"][mcp.PROTOCOL_VERSION_KEY] = "2027-01-01"
    message["jsonrpc"] = "1.0"
    answer = mcp.check_request(message, supported=SERVED)
    assert answer is not None and answer["error"]["code"] == -32600


@pytest.mark.parametrize(
    "supported",
    [[], "2026-07-28", ["2025-11-25"], ["26-07-28"], [20260728], ["2026-7-28"]],
)
def test_supported_revisions_are_checked(supported: Any) -> None:
    """versions: MCP revisions from 2026-07-28 on."""
    with pytest.raises(BindingError, match="supported"):
        mcp.check_request(request(), supported=supported)


# -- chat_reply: one message, else -32603 --------------------------------------


def _response_with_text(text: str, rid: Any = 9) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _largest_fitting(char: str) -> int:
    """The largest n for which the reply with n copies of ``char`` fits a message."""
    low, high = 0, chat.MAX_MESSAGE_JSON
    while low < high:
        mid = (low + high + 1) // 2
        if chat.fits_message(compact(_response_with_text(char * mid))):
            low = mid
        else:
            high = mid - 1
    return low


def test_chat_reply_at_the_message_limit() -> None:
    """A reply that fits one message is the response; one byte more gets -32603."""
    n = _largest_fitting("a")
    fitting = _response_with_text("a" * n)
    assert mcp.chat_reply(fitting) == compact(fitting)
    over = json.loads(mcp.chat_reply(_response_with_text("a" * (n + 1))))
    assert over["id"] == 9
    assert over["error"]["code"] == -32603
    assert over["error"]["data"]["limit"] == chat.MAX_MESSAGE_JSON
    # The size is counted as the limit counts it (the whole message), so it is over it
    # even for the reply one byte too long, whose text alone is well under 15,602 bytes.
    assert over["error"]["data"]["size"] > over["error"]["data"]["limit"]
    text_alone = chat.encoded_size(compact(_response_with_text("a" * (n + 1))))
    assert text_alone < chat.MAX_MESSAGE_JSON
    assert over["error"]["data"]["size"] == text_alone + chat.reply_allowance()


def test_chat_reply_counts_escape_characters() -> None:
    """The reply is a string inside the core's JSON: its escapes count towards the limit."""
    n = _largest_fitting('"')
    assert n < _largest_fitting("a") // 3  # '"' is \\\" in the core's JSON: 4 bytes
    text = mcp.chat_reply(_response_with_text('"' * (n + 1)))
    assert json.loads(text)["error"]["code"] == -32603
    assert len(compact(_response_with_text('"' * (n + 1))).encode()) < chat.MAX_MESSAGE_JSON


def test_chat_reply_replaces_an_error_too() -> None:
    big_error = {"jsonrpc": "2.0", "id": "q", "error": {"code": 1, "message": "x" * 20_000}}
    assert json.loads(mcp.chat_reply(big_error))["error"]["code"] == -32603
    assert json.loads(mcp.chat_reply(big_error))["id"] == "q"


def test_chat_reply_keeps_a_null_id() -> None:
    small = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert json.loads(mcp.chat_reply(small)) == small


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"id": 1, "result": {}},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}},
        {"jsonrpc": "2.0", "id": 1, "result": {"x": float("nan")}},
    ],
)
def test_chat_reply_refuses_what_is_not_a_response(bad: Any) -> None:
    with pytest.raises(BindingError, match="mcp chat reply"):
        mcp.chat_reply(bad)


# -- rpc_response: too_large -----------------------------------------------------


def _response_of_envelope_size(size: int) -> dict[str, Any]:
    response = _response_with_text("")
    base = len(Response.success(response).to_json())
    return _response_with_text("a" * (size - base))


def test_rpc_response_at_the_10000_byte_should() -> None:
    """A response SHOULD NOT exceed 10,000 bytes of JSON: over it, too_large."""
    at = _response_of_envelope_size(10_000)
    envelope = mcp.rpc_response(at)
    assert envelope.ok
    assert len(envelope.to_json()) == 10_000
    over = mcp.rpc_response(_response_of_envelope_size(10_001))
    assert over.error is not None
    assert over.error.code == ErrorCode.TOO_LARGE
    assert over.error.code == "too_large"
    assert "10001 bytes" in (over.error.message or "")


def test_rpc_response_never_exceeds_the_padded_block() -> None:
    """The hard limit is what fits the padded block, whatever limit is given."""
    at = _response_of_envelope_size(MAX_RESPONSE)
    assert mcp.rpc_response(at, limit=MAX_RESPONSE).ok
    assert mcp.rpc_response(at).error is not None
    over = _response_of_envelope_size(MAX_RESPONSE + 1)
    assert mcp.rpc_response(over, limit=MAX_RESPONSE).error is not None


@pytest.mark.parametrize("limit", [0, -1, MAX_RESPONSE + 1, True, 10_000.0])
def test_rpc_response_limit_is_checked(limit: Any) -> None:
    with pytest.raises(BindingError, match="limit"):
        mcp.rpc_response(_response_with_text("x"), limit=limit)


def test_rpc_response_counts_utf8_bytes() -> None:
    """Sizes are bytes of UTF-8 JSON, not characters."""
    base = len(Response.success(_response_with_text("")).to_json())
    n = (10_000 - base) // 3  # a 3-byte character
    assert mcp.rpc_response(_response_with_text("€" * n)).ok
    assert not mcp.rpc_response(_response_with_text("€" * (n + 1))).ok


# -- conversation_required -------------------------------------------------------


def test_marked_tool_needs_a_conversation_over_service_rpc() -> None:
    """Over Service RPC, a call of a tool that needs a conversation: conversation_required."""
    call = mcp.make_request("tools/call", {"name": "chatty", "arguments": {}}, id=1)
    refused = mcp.rpc_disposition(call, conversation_tools={"chatty"})
    assert refused is not None and refused.error is not None
    assert refused.error.code == "conversation_required"
    other = mcp.make_request("tools/call", {"name": "availability"}, id=1)
    assert mcp.rpc_disposition(other, conversation_tools={"chatty"}) is None
    assert mcp.rpc_disposition(call) is None
    listing = mcp.make_request("tools/list", id=1)
    assert mcp.rpc_disposition(listing, conversation_tools={"chatty"}) is None


def test_conversation_tools_must_be_a_collection() -> None:
    with pytest.raises(BindingError, match="conversation_tools"):
        mcp.rpc_disposition(mcp.make_request("tools/list", id=1), conversation_tools="chatty")


# -- make_request --------------------------------------------------------------------


def test_make_request_keeps_other_meta_first() -> None:
    built = mcp.make_request("tools/call", {"name": "x", "_meta": {"progressToken": "p"}}, id="r")
    assert list(built["params"]) == ["name", "_meta"]
    assert list(built["params"]["_meta"]) == [
        "progressToken",
        mcp.PROTOCOL_VERSION_KEY,
        mcp.CLIENT_CAPABILITIES_KEY,
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "", "id": 1}, "method"),
        ({"method": "tools/list", "id": None}, "id"),
        ({"method": "tools/list", "id": 1, "revision": "2025-11-25"}, "before"),
        ({"method": "tools/list", "id": 1, "params": {"_meta": [1]}}, "_meta"),
    ],
)
def test_make_request_refuses_bad_input(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(BindingError, match=match):
        mcp.make_request(**kwargs)


# -- properties: whatever the response, the answer fits its transport --------------------

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=40))
json_values = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    result=json_values,
    padding=st.text(alphabet=st.characters(codec="utf-8"), max_size=3000),
    repeat=st.integers(1, 12),
    rid=st.one_of(st.integers(-1000, 1000), st.text(max_size=20)),
)
def test_answers_always_fit_their_transport(
    result: Any, padding: str, repeat: int, rid: Any
) -> None:
    """A chat reply always fits one message and is the response or -32603 with its id;
    an RPC envelope is always at most 10,000 bytes or too_large."""
    response = {"jsonrpc": "2.0", "id": rid, "result": {"value": result, "pad": padding * repeat}}
    text = mcp.chat_reply(response)
    assert chat.fits_message(text)
    reply = json.loads(text)
    assert reply == response or (reply["id"] == rid and reply["error"]["code"] == -32603)
    envelope = mcp.rpc_response(response)
    if envelope.ok:
        assert len(envelope.to_json()) <= 10_000
        assert envelope.response == response
    else:
        assert envelope.error is not None and envelope.error.code == "too_large"
        assert len(Response.success(response).to_json()) > 10_000


def test_the_sdk_names_are_listed_by_dir_and_imported_on_first_use() -> None:
    """``McpBridge``, ``SimplexTransport`` and ``SERVICE_RPC_ERROR`` need the mcp SDK:
    they are imported when asked for, and ``dir()`` shows them all the same."""
    lazy = {"McpBridge", "SimplexTransport", "SERVICE_RPC_ERROR"}
    assert lazy <= set(dir(mcp)) and set(mcp.__all__) <= set(dir(mcp))
    assert dir(mcp) == sorted(dir(mcp))
    assert mcp.SimplexTransport.__module__ == "simplex_rpc.mcp._client"
    with pytest.raises(AttributeError, match=r"'simplex_rpc\.mcp' has no attribute 'Nothing'"):
        getattr(mcp, "Nothing")  # noqa: B009 - the name is not an attribute

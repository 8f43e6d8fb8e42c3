"""Reply collector: acceptance and completion rules (protocol text, "Replies";
MCP binding "Messages"; A2A binding "A2A messages" and "Streaming")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simplex_rpc.chat import (
    A2A_ENDING_STATES,
    Call,
    ReplyCollector,
    ends_answer,
    parse_call,
    parse_reply,
)
from simplex_rpc.errors import CollectorError
from simplex_rpc.vectors._examples import mcp_tools_list_reply

MCP_REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_CALL = Call("mcp", MCP_REQUEST)

# The protocol text's example reply to tools/list.
MCP_REPLY = json.dumps(mcp_tools_list_reply(), indent=2)
PROGRESS = json.dumps(
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": 1},
    }
)


def j(value: Any) -> str:
    return json.dumps(value)


def a2a_call(method: str, id_: Any = 9) -> Call:
    return Call(
        "a2a",
        {
            "jsonrpc": "2.0",
            "id": id_,
            "method": method,
            "a2a-service-parameters": {"A2A-Version": "1.0"},
            "params": {},
        },
    )


def task_reply(state: str, id_: Any = 9, key: str = "task") -> str:
    return j(
        {
            "jsonrpc": "2.0",
            "id": id_,
            "result": {key: {"id": "t-1", "contextId": "c-1", "status": {"state": state}}},
        }
    )


# ---------------------------------------------------------------- acceptance


def test_direct_chat_accepts_only_the_recipient() -> None:
    c = ReplyCollector()
    c.register(100, MCP_CALL, chat="direct", peer="acme-bot")
    assert not c.add("someone-else", 100, MCP_REPLY)
    assert not c.is_complete(100)
    assert c.add("acme-bot", 100, MCP_REPLY)
    assert c.is_complete(100)
    assert [r.sender for r in c.collected(100)] == ["acme-bot"]


def test_replies_are_matched_by_the_quoted_item() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer=7)
    c.register(2, Call("mcp", {**MCP_REQUEST, "id": 2}), chat="direct", peer=7)
    assert not c.add(7, None, MCP_REPLY)  # quotes nothing
    assert not c.add(7, 3, MCP_REPLY)  # quotes an item that is not a call
    # Replies can arrive in any order: the answer to item 2 first.
    assert c.add(7, 2, j({"jsonrpc": "2.0", "id": 2, "result": {}}))
    assert c.add(7, 1, MCP_REPLY)
    assert c.is_complete(1) and c.is_complete(2)
    assert len(c.collected(1)) == len(c.collected(2)) == 1


def test_group_call_with_mention_accepts_only_the_mentioned_member() -> None:
    call = parse_call("/_call @'Acme Support' mcp " + j(MCP_REQUEST))
    c = ReplyCollector()
    c.register(5, call, chat="group")  # peer defaults to the mentioned name
    assert not c.is_broadcast(5)
    assert not c.add("Other Bot", 5, MCP_REPLY)
    assert c.add("Acme Support", 5, MCP_REPLY)
    assert c.is_complete(5)


def test_group_call_with_mention_and_member_id() -> None:
    c = ReplyCollector()
    c.register(5, Call("mcp", MCP_REQUEST, "Acme Support"), chat="group", peer=42)
    assert not c.add("Acme Support", 5, MCP_REPLY)  # the sender is identified by id
    assert not c.add(43, 5, MCP_REPLY)
    assert c.add(42, 5, MCP_REPLY)
    assert c.is_complete(5)


def test_group_broadcast_accepts_every_member_and_completes_per_member() -> None:
    c = ReplyCollector()
    c.register(8, MCP_CALL, chat="group")
    assert c.is_broadcast(8)
    assert c.add("bot-a", 8, PROGRESS)
    assert c.add("bot-b", 8, MCP_REPLY)
    assert c.add("person", 8, "what is this?")  # collected as text
    assert c.add("bot-a", 8, MCP_REPLY)
    # A broadcast's wait ends by time, not by a reply.
    assert not c.is_complete(8)
    assert c.is_complete(8, "bot-a") and c.is_complete(8, "bot-b")
    assert not c.is_complete(8, "person")
    assert c.completed_senders(8) == ("bot-b", "bot-a")
    got = c.finish(8)
    assert [(r.sender, r.is_message, r.ends) for r in got] == [
        ("bot-a", True, False),
        ("bot-b", True, True),
        ("person", False, False),
        ("bot-a", True, True),
    ]
    assert got[2].text == "what is this?" and got[2].message is None
    assert 8 not in c


def test_text_replies_are_collected_with_their_sender() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    for text in ["Sorry, I am busy", "[1, 2]", '{"no": "jsonrpc"}', '{"a":1,"a":2}', ""]:
        assert c.add("bot", 1, text)
    assert all(not r.is_message for r in c.collected(1))
    assert c.collected(1)[0].text == "Sorry, I am busy"
    assert not c.is_complete(1)


def test_replies_after_the_answer_ended_are_still_collected() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    assert c.add("bot", 1, MCP_REPLY)
    assert c.add("bot", 1, MCP_REPLY)
    assert [r.ends for r in c.collected(1)] == [True, False]
    assert c.completed_senders(1) == ("bot",)


def test_pending_lists_unanswered_calls() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    c.register(2, MCP_CALL, chat="group")
    assert c.pending() == (1, 2)
    c.add("bot", 1, MCP_REPLY)
    assert c.pending() == (2,)
    assert c.call(1) == MCP_CALL


@pytest.mark.parametrize(
    ("call", "chat", "peer", "match"),
    [
        (MCP_CALL, "direct", None, "needs the peer"),
        (Call("mcp", {}, "bob"), "direct", "bob", "mentions no member"),
        (MCP_CALL, "group", "bob", "no peer"),
        (MCP_CALL, "channel", None, "expected 'direct' or 'group'"),
        ("/_call mcp {}", "direct", "bob", "expected a Call"),
    ],
)
def test_register_refuses_wrong_combinations(call: Any, chat: str, peer: Any, match: str) -> None:
    with pytest.raises(CollectorError, match=match):
        ReplyCollector().register(1, call, chat=chat, peer=peer)


def test_register_twice_and_unknown_items_raise() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    with pytest.raises(CollectorError, match="already registered"):
        c.register(1, MCP_CALL, chat="direct", peer="bot")
    for method in (c.collected, c.is_complete, c.finish, c.call, c.completed_senders):
        with pytest.raises(CollectorError, match="not a registered call"):
            method(2)


# ---------------------------------------------------------------- completion: MCP


def test_mcp_notifications_before_the_response_do_not_end_it() -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    c.add("bot", 1, PROGRESS)
    assert not c.is_complete(1)
    c.add("bot", 1, MCP_REPLY)
    assert c.is_complete(1)


@pytest.mark.parametrize(
    ("reply", "ends"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, True),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "too large"}}, True),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}, True),
        ({"jsonrpc": "2.0", "id": 1.0, "result": {}}, True),  # the same JSON number
        ({"jsonrpc": "2.0", "id": 2, "result": {}}, False),  # another request's id
        ({"jsonrpc": "2.0", "id": "1", "result": {}}, False),  # a string is not the number
        ({"jsonrpc": "2.0", "id": True, "result": {}}, False),
        ({"jsonrpc": "2.0", "id": None, "result": {}}, False),
        ({"jsonrpc": "2.0", "result": {}}, False),  # no id
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, False),  # not a response
        ({"jsonrpc": "2.0", "id": 1}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, False),  # a request from the bot
        ({"jsonrpc": "1.0", "id": 1, "result": {}}, False),  # not a JSON-RPC 2.0 message
    ],
)
def test_mcp_answer_ends_with_the_response_with_the_request_id(
    reply: dict[str, Any], ends: bool
) -> None:
    c = ReplyCollector()
    c.register(1, MCP_CALL, chat="direct", peer="bot")
    assert c.add("bot", 1, j(reply))
    assert c.is_complete(1) is ends


def test_mcp_string_ids() -> None:
    call = Call("mcp", {**MCP_REQUEST, "id": "req-1"})
    assert ends_answer("mcp", call.request, {"jsonrpc": "2.0", "id": "req-1", "result": {}})
    assert not ends_answer("mcp", call.request, {"jsonrpc": "2.0", "id": "req-2", "result": {}})


def test_mcp_notification_call_has_no_ending_reply() -> None:
    request = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
    assert not ends_answer("mcp", request, {"jsonrpc": "2.0", "id": 1, "result": {}})


# ---------------------------------------------------------------- completion: A2A


@pytest.mark.parametrize("method", ["SendMessage", "GetTask", "ListTasks", "CancelTask"])
def test_a2a_non_streaming_methods_end_with_one_response(method: str) -> None:
    c = ReplyCollector()
    c.register(1, a2a_call(method), chat="direct", peer="bot")
    # Even a working task ends a non-streaming answer: it is the one response.
    c.add("bot", 1, task_reply("TASK_STATE_WORKING"))
    assert c.is_complete(1)


def test_a2a_push_notification_error_ends_the_answer() -> None:
    c = ReplyCollector()
    c.register(1, a2a_call("CreateTaskPushNotificationConfig"), chat="direct", peer="bot")
    c.add("bot", 1, j({"jsonrpc": "2.0", "id": 9, "error": {"code": -32003, "message": "no"}}))
    assert c.is_complete(1)


@pytest.mark.parametrize("method", ["SendStreamingMessage", "SubscribeToTask"])
@pytest.mark.parametrize("key", ["task", "statusUpdate"])
@pytest.mark.parametrize(
    "state",
    [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
    ],
)
def test_a2a_stream_ends_in_a_terminal_or_interrupted_state(
    method: str, key: str, state: str
) -> None:
    assert state in A2A_ENDING_STATES
    c = ReplyCollector()
    c.register(1, a2a_call(method), chat="direct", peer="bot")
    c.add("bot", 1, task_reply("TASK_STATE_SUBMITTED"))
    c.add("bot", 1, task_reply("TASK_STATE_WORKING", key="statusUpdate"))
    c.add("bot", 1, j({"jsonrpc": "2.0", "id": 9, "result": {"artifactUpdate": {"taskId": "t"}}}))
    assert not c.is_complete(1)
    c.add("bot", 1, task_reply(state, key=key))
    assert c.is_complete(1)
    assert [r.ends for r in c.collected(1)] == [False, False, False, True]


@pytest.mark.parametrize(
    "state", ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "completed", "TASK_STATE_UNSPECIFIED"]
)
def test_a2a_stream_goes_on_in_other_states(state: str) -> None:
    assert not ends_answer(
        "a2a", a2a_call("SendStreamingMessage").request, json.loads(task_reply(state))
    )


def test_a2a_stream_ends_with_an_error_or_a_message() -> None:
    request = a2a_call("SendStreamingMessage").request
    error = {"jsonrpc": "2.0", "id": 9, "error": {"code": -32001, "message": "Task not found"}}
    assert ends_answer("a2a", request, error)
    message = {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {"message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": []}},
    }
    assert ends_answer("a2a", request, message)
    # A stream event for another request does not end this one.
    assert not ends_answer("a2a", request, json.loads(task_reply("TASK_STATE_COMPLETED", id_=10)))


def test_a2a_null_id_request_ends_with_the_null_id_response() -> None:
    """A2A follows JSON-RPC 2.0, which allows a null request id; the response repeats it."""
    c = ReplyCollector()
    c.register(1, a2a_call("GetTask", id_=None), chat="direct", peer="bot")
    assert c.add("bot", 1, task_reply("TASK_STATE_WORKING", id_=None))
    assert c.is_complete(1)
    # A null-id result does not answer a request that has an id.
    assert not ends_answer("a2a", a2a_call("GetTask").request, json.loads(task_reply("x", None)))


@pytest.mark.parametrize("state", [["TASK_STATE_COMPLETED"], {"a": 1}, 3, None])
def test_a2a_stream_reply_with_a_state_of_another_type_is_collected(state: Any) -> None:
    """A reply is the peer's data: a state that is not a string neither ends nor breaks."""
    c = ReplyCollector()
    c.register(1, a2a_call("SendStreamingMessage"), chat="direct", peer="bot")
    reply = {"jsonrpc": "2.0", "id": 9, "result": {"task": {"id": "t", "status": {"state": state}}}}
    assert c.add("bot", 1, j(reply))
    assert not c.is_complete(1)
    odd = Call("a2a", {"jsonrpc": "2.0", "id": 9, "method": ["SendStreamingMessage"]})
    assert ends_answer("a2a", odd.request, reply)  # not a streaming method: one response


def test_a2a_stream_in_a_group_broadcast_ends_per_member() -> None:
    c = ReplyCollector()
    c.register(3, a2a_call("SendStreamingMessage"), chat="group")
    c.add(11, 3, task_reply("TASK_STATE_WORKING"))
    c.add(12, 3, task_reply("TASK_STATE_COMPLETED"))
    c.add(11, 3, task_reply("TASK_STATE_INPUT_REQUIRED", key="statusUpdate"))
    assert c.completed_senders(3) == (12, 11)
    assert not c.is_complete(3)
    assert len(c.collected(3)) == 3


# ---------------------------------------------------------------- unknown protocols


def test_unknown_protocol_collects_every_json_reply() -> None:
    c = ReplyCollector()
    c.register(1, Call("weather", {"city": "Lisbon"}), chat="direct", peer="bot")
    assert c.add("bot", 1, '{"temp": 21}')
    assert c.add("bot", 1, "sunny")
    assert [r.is_message for r in c.collected(1)] == [True, False]
    assert not c.is_complete(1)  # the request has no id: nothing ends it


def test_unknown_protocol_with_an_id_ends_with_the_response() -> None:
    c = ReplyCollector()
    c.register(1, Call("kv", {"jsonrpc": "2.0", "id": "k", "method": "get"}), chat="direct", peer=1)
    c.add(1, 1, '{"jsonrpc": "2.0", "method": "log"}')
    assert not c.is_complete(1)
    c.add(1, 1, '{"jsonrpc": "2.0", "id": "k", "result": 5}')
    assert c.is_complete(1)


def test_parse_reply_is_strict_json() -> None:
    assert parse_reply("mcp", MCP_REPLY) is not None
    assert parse_reply("mcp", '{"jsonrpc":"2.0","id":1,"id":2}') is None  # duplicate names
    assert parse_reply("mcp", '{"jsonrpc":"2.0","x":NaN}') is None
    assert parse_reply("other", '{"x":1}') == {"x": 1}
    assert parse_reply("other", "[1]") is None

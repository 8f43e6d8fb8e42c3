"""The A2A binding's no-I/O helpers (protocol text, "A2A binding").

The protocol text's A2A example (a one-shot task over Service RPC, the
request) comes from ``simplex_rpc.vectors._examples``; the copy of the text ends
inside the A2A examples, so it is the only one. ``MESSAGE``, the message the
tests build their requests from, is that example's message.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from _a2a import MESSAGE
from simplex_rpc import Request, Response, a2a, chat
from simplex_rpc.a2a import BindingError, Caller, CallerStore
from simplex_rpc.vectors._examples import A2A_SEND_MESSAGE_REQUEST_TEXT, a2a_send_message_request


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def send(message: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return a2a.make_request("SendMessage", {"message": message or MESSAGE, **params}, id=1)


# -- the example and identification ---------------------------------------------------


def test_example_one_shot_request() -> None:
    """The example: a one-shot SendMessage that Service RPC serves, version 1.0."""
    envelope = Request.parse(A2A_SEND_MESSAGE_REQUEST_TEXT)
    assert envelope.protocol == "a2a"
    assert "version" not in envelope.to_dict()  # the envelope's version is omitted
    request = envelope.request
    assert a2a.check_request(request) is None
    assert a2a.rpc_disposition(request) is None
    assert a2a.chat_disposition(request) is None
    assert a2a.service_parameters(request)["a2a-version"] == "1.0"
    built = a2a.make_request("SendMessage", {"message": MESSAGE}, id=1)
    assert built == request
    assert compact(Request(protocol="a2a", request=built).to_dict()) == compact(
        a2a_send_message_request()
    )


def test_binding_uri_and_agent_card_interface() -> None:
    """An Agent Card lists the SimpleX interface: url, protocolBinding, protocolVersion."""
    assert a2a.BINDING_URI == "https://simplex.chat/protocol/a2a/v1"
    link = "https://smp12.simplex.im/a#abc"
    assert a2a.agent_card_interface(link) == {
        "url": link,
        "protocolBinding": "https://simplex.chat/protocol/a2a/v1",
        "protocolVersion": "1.0",
    }
    assert a2a.agent_card_interface(link, "1.1")["protocolVersion"] == "1.1"


@pytest.mark.parametrize(
    ("link", "version", "match"),
    [
        ("", "1.0", "contact_link"),
        ("no scheme", "1.0", "contact_link"),
        ("https://x/a#b c", "1.0", "contact_link"),
        (5, "1.0", "contact_link"),
        ("https://x/a#b", "1", "Major.Minor"),
        ("https://x/a#b", "1.0.0", "Major.Minor"),
        ("https://x/a#b", "v1.0", "Major.Minor"),
    ],
)
def test_agent_card_interface_refuses_bad_input(link: Any, version: Any, match: str) -> None:
    with pytest.raises(BindingError, match=match):
        a2a.agent_card_interface(link, version)


def test_agent_card_interface_is_accepted_by_the_sdk() -> None:
    """The entry parses as the SDK's AgentInterface (A2A 1.0 JSON form)."""
    pb = pytest.importorskip("a2a.types.a2a_pb2")
    json_format = pytest.importorskip("google.protobuf.json_format")
    entry = a2a.agent_card_interface("simplex:/contact#/?v=2&smp=x")
    interface = json_format.ParseDict(entry, pb.AgentInterface())
    assert interface.protocol_binding == a2a.BINDING_URI
    assert json_format.MessageToDict(interface) == entry


# -- service parameters -----------------------------------------------------------


def test_service_parameters_are_case_insensitive() -> None:
    """Names are case-insensitive; the value is a string."""
    request = a2a.make_request(
        "GetTask", {"id": "t"}, id=1, parameters={"A2A-Extensions": "https://e/1, https://e/2"}
    )
    params = a2a.service_parameters(request)
    for name in ("A2A-Version", "a2a-version", "A2A-VERSION"):
        assert name in params
        assert params[name] == "1.0"
    assert list(params) == ["A2A-Version", "A2A-Extensions"]
    assert len(params) == 2
    assert "Authorization" not in params
    assert params.get("authorization") is None
    assert 5 not in params  # type: ignore[comparison-overlap]
    with pytest.raises(KeyError):
        params["Authorization"]


def test_several_values_are_joined_by_commas() -> None:
    """Several values of one parameter are joined by commas in one string."""
    request = a2a.make_request(
        "GetTask", {}, id=1, parameters={"A2A-Extensions": "https://e/1, https://e/2"}
    )
    params = a2a.service_parameters(request)
    assert params["a2a-extensions"] == "https://e/1, https://e/2"
    assert params.split("A2A-EXTENSIONS") == ["https://e/1", "https://e/2"]
    assert params.split("A2A-Version") == ["1.0"]
    assert params.split("Absent") == []


def test_absent_member_is_empty() -> None:
    params = a2a.service_parameters({"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
    assert len(params) == 0
    assert dict(params) == {}


@pytest.mark.parametrize(
    ("member", "match"),
    [
        ([["A2A-Version", "1.0"]], "expected an object"),
        (None, "expected an object"),
        ({"A2A-Version": 1.0}, "string value"),
        ({"A2A-Version": ["1.0"]}, "string value"),
        ({"A2A-Version": "1.0", "a2a-version": "1.0"}, "case-insensitive"),
        ({"A2A Version": "1.0"}, "not a service parameter name"),
        ({"": "1.0"}, "not a service parameter name"),
        ({"X": "line\nbreak"}, "header field value"),
        ({"X": "€"}, "header field value"),
    ],
)
def test_malformed_member_is_refused(member: Any, match: str) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "a2a-service-parameters": member}
    with pytest.raises(BindingError, match=match):
        a2a.service_parameters(request)
    answer = a2a.check_request(request)
    assert answer is not None and answer["error"]["code"] == -32600


def test_service_parameters_repr_hides_values() -> None:
    """A credential sent as a service parameter never shows in a repr."""
    secret = "Bearer very-secret-token"
    request = a2a.make_request("GetTask", {}, id=1, parameters={"Authorization": secret})
    params = a2a.service_parameters(request)
    assert secret not in repr(params)
    assert "Authorization" in repr(params)
    assert params.headers() == [("A2A-Version", "1.0"), ("Authorization", secret)]


# -- check_request --------------------------------------------------------------------


def test_every_request_must_carry_a2a_version() -> None:
    """Every request MUST carry A2A-Version: without it, -32009."""
    request = send()
    del request["a2a-service-parameters"]
    answer = a2a.check_request(request)
    assert answer is not None
    assert answer["id"] == 1
    assert answer["error"]["code"] == a2a.VERSION_NOT_SUPPORTED == -32009
    assert answer["error"]["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "VERSION_NOT_SUPPORTED",
            "domain": "a2a-protocol.org",
            "metadata": {},
        }
    ]
    request["a2a-service-parameters"] = {"Authorization": "x"}
    assert a2a.check_request(request)["error"]["code"] == -32009  # type: ignore[index]


@pytest.mark.parametrize(
    ("version", "supported", "served"),
    [
        ("1.0", ["1.0"], True),
        ("1.0.3", ["1.0"], True),  # a patch number is ignored
        ("1.1", ["1.0"], False),
        ("1.1", ["1.0", "1.1"], True),
        ("0.3", ["1.0"], False),
        ("2.0", ["1.0"], False),
        ("1", ["1.0"], False),
        ("", ["1.0"], False),
        ("1.0, 1.1", ["1.0", "1.1"], False),
        ("01.0", ["1.0"], False),
    ],
)
def test_unserved_version_is_version_not_supported(
    version: str, supported: list[str], served: bool
) -> None:
    """A bot answers a request of a version it does not serve with VersionNotSupportedError."""
    request = send()
    request["a2a-service-parameters"] = {"a2a-version": version}
    answer = a2a.check_request(request, supported_versions=supported)
    if served:
        assert answer is None
    else:
        assert answer is not None and answer["error"]["code"] == -32009


@pytest.mark.parametrize(
    ("request_", "echoed_id"),
    [
        ([], None),
        ("SendMessage", None),
        ({**send(), "jsonrpc": "1.0"}, 1),
        ({k: v for k, v in send().items() if k != "id"}, None),
        ({**send(), "id": True}, None),
        ({**send(), "id": 2.5}, None),
        ({**send(), "method": ""}, 1),
        ({**send(), "method": None}, 1),
        ({**send(), "params": [MESSAGE]}, 1),
    ],
)
def test_not_a_request_is_invalid_request(request_: Any, echoed_id: Any) -> None:
    """A request that is not valid JSON-RPC gets -32600 (InvalidRequestError)."""
    answer = a2a.check_request(request_)
    assert answer is not None
    assert answer["id"] == echoed_id
    assert answer["error"]["code"] == -32600
    assert answer["error"]["data"][0]["reason"] == "INVALID_REQUEST"


def test_null_id_is_valid_in_a2a() -> None:
    """A2A follows JSON-RPC 2.0, whose ids may be null (unlike MCP)."""
    assert a2a.check_request({**send(), "id": None}) is None
    assert a2a.check_request({**send(), "id": "s"}) is None


def test_unknown_methods_are_left_to_the_agent() -> None:
    assert a2a.check_request(a2a.make_request("message/send", {}, id=1)) is None


@pytest.mark.parametrize("supported", [[], "1.0", ["1"], ["1.0.0"], [1.0]])
def test_supported_versions_are_checked(supported: Any) -> None:
    with pytest.raises(BindingError, match="supported_versions"):
        a2a.check_request(send(), supported_versions=supported)


# -- Service RPC: what it serves --------------------------------------------------------


def test_one_shot_send_message_is_served_over_rpc() -> None:
    assert a2a.rpc_disposition(send()) is None
    assert a2a.rpc_disposition(send(configuration={"returnImmediately": False})) is None
    assert a2a.rpc_disposition(send(configuration={"historyLength": 2})) is None


@pytest.mark.parametrize(
    "request_",
    [
        send({**MESSAGE, "contextId": "c-1"}),
        send({**MESSAGE, "taskId": "t-1"}),
        send({**MESSAGE, "context_id": "c-1"}),
        send({**MESSAGE, "task_id": "t-1"}),
        send({**MESSAGE, "contextId": ""}),
        send(configuration={"returnImmediately": True}),
        send(configuration={"return_immediately": True}),
        send(configuration={"returnImmediately": "yes"}),
    ],
)
def test_continuing_or_returning_immediately_needs_a_conversation(request_: Any) -> None:
    """SendMessage with contextId or taskId, or returnImmediately: conversation_required."""
    refused = a2a.rpc_disposition(request_)
    assert refused is not None and refused.error is not None
    assert refused.error.code == "conversation_required"


@pytest.mark.parametrize("method", [m for m in a2a.METHODS if m != "SendMessage"])
def test_every_other_method_needs_a_conversation(method: str) -> None:
    """Every other request is answered with conversation_required (streams included)."""
    refused = a2a.rpc_disposition(a2a.make_request(method, {}, id=1))
    assert refused is not None and refused.error is not None
    assert refused.error.code == "conversation_required"


def test_push_notification_methods_in_a_conversation() -> None:
    """In a conversation, the push notification methods get -32003."""
    assert a2a.PUSH_NOTIFICATION_METHODS == {m for m in a2a.METHODS if "PushNotification" in m}
    for method in a2a.PUSH_NOTIFICATION_METHODS:
        answer = a2a.chat_disposition(a2a.make_request(method, {"taskId": "t"}, id="p"))
        assert answer is not None
        assert answer["id"] == "p"
        assert answer["error"]["code"] == a2a.PUSH_NOTIFICATION_NOT_SUPPORTED == -32003
        assert answer["error"]["data"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    for method in set(a2a.METHODS) - a2a.PUSH_NOTIFICATION_METHODS:
        assert a2a.chat_disposition(a2a.make_request(method, {}, id=1)) is None


# -- streams ------------------------------------------------------------------------


STATES = {
    "TASK_STATE_SUBMITTED": False,
    "TASK_STATE_WORKING": False,
    "TASK_STATE_COMPLETED": True,
    "TASK_STATE_FAILED": True,
    "TASK_STATE_CANCELED": True,
    "TASK_STATE_REJECTED": True,
    "TASK_STATE_INPUT_REQUIRED": True,
    "TASK_STATE_AUTH_REQUIRED": True,
    "TASK_STATE_UNSPECIFIED": False,
}


@pytest.mark.parametrize(("state", "ends"), STATES.items())
def test_stream_ends_in_a_terminal_or_interrupted_state(state: str, ends: bool) -> None:
    """The stream ends with a task or status update in a terminal or interrupted state,
    named in A2A 1.0's JSON form."""
    task = {"task": {"id": "t", "contextId": "c", "status": {"state": state}}}
    update = {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": state}}}
    for event in (task, update):
        assert a2a.is_stream_end(event) is ends
        assert a2a.is_stream_end({"jsonrpc": "2.0", "id": 1, "result": event}) is ends
        reply = {"jsonrpc": "2.0", "id": 1, "result": event}
        request = a2a.make_request("SendStreamingMessage", {"message": MESSAGE}, id=1)
        assert chat.ends_answer("a2a", request, reply) is ends  # the collector agrees


def test_stream_end_other_events() -> None:
    artifact = {"artifactUpdate": {"taskId": "t", "artifact": {"parts": [{"text": "x"}]}}}
    assert a2a.is_stream_end(artifact) is False
    assert a2a.is_stream_end({"message": MESSAGE}) is True  # a Message is the whole answer
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}}
    assert a2a.is_stream_end(error) is True
    assert a2a.is_stream_end({}) is False
    assert a2a.is_stream_end({"task": {"status": "TASK_STATE_COMPLETED"}}) is False
    assert a2a.is_stream_end({"statusUpdate": {"status": {"state": "completed"}}}) is False
    with pytest.raises(BindingError):
        a2a.is_stream_end([])  # type: ignore[arg-type]


@pytest.mark.parametrize("state", [["TASK_STATE_COMPLETED"], {"s": 1}, 5, None])
def test_stream_end_state_of_another_type_does_not_end(state: Any) -> None:
    """A peer's event with a state that is not a string does not end a stream, nor raise."""
    event = {"jsonrpc": "2.0", "id": 1, "result": {"task": {"status": {"state": state}}}}
    assert a2a.is_stream_end(event) is False


def test_chat_disposition_takes_any_method_value() -> None:
    """The request is the peer's data: a method that is not a string is not refused here
    (it is the -32600 of check_request), and does not raise."""
    for method in (["CreateTaskPushNotificationConfig"], {"m": 1}, 5, None):
        assert a2a.chat_disposition({"jsonrpc": "2.0", "id": 1, "method": method}) is None


def test_state_sets() -> None:
    assert a2a.TERMINAL_STATES == chat.A2A_TERMINAL_STATES
    assert a2a.INTERRUPTED_STATES == chat.A2A_INTERRUPTED_STATES
    assert a2a.STREAMING_METHODS == chat.A2A_STREAMING_METHODS


# -- size rules ------------------------------------------------------------------------


def raw_part_response(size: int) -> dict[str, Any]:
    raw = base64.b64encode(bytes(size)).decode("ascii")
    task = {
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "a", "parts": [{"raw": raw, "mediaType": "image/png"}]}],
    }
    return {"jsonrpc": "2.0", "id": 4, "result": {"task": task}}


def test_raw_parts_count_towards_the_chat_limit() -> None:
    """A response above the size limit becomes -32603 in a conversation; the bytes
    of raw parts (base64 in the JSON form) count."""
    small = raw_part_response(1_000)
    assert json.loads(a2a.chat_reply(small)) == small
    big = json.loads(a2a.chat_reply(raw_part_response(12_000)))
    assert big["id"] == 4
    assert big["error"]["code"] == -32603


def test_raw_parts_count_towards_the_rpc_limit() -> None:
    """Over Service RPC, the envelope error too_large instead."""
    assert a2a.rpc_response(raw_part_response(1_000)).ok
    refused = a2a.rpc_response(raw_part_response(7_500))
    assert refused.error is not None and refused.error.code == "too_large"
    assert Response.parse(refused.to_json()).error is not None


# -- callers ------------------------------------------------------------------------------


def test_callers() -> None:
    """The caller is the contact, or the group member, that sent the command."""
    assert Caller.contact(5) == Caller("@5")
    assert Caller.group_member(7, 3) == Caller("#7", "3")
    assert Caller.group_member(7, 3) != Caller.group_member(7, 4)
    assert Caller.group_member(7, 3) != Caller.contact(3)
    assert Caller.group_member(7, 3).key == "#7/3"
    with pytest.raises(BindingError):
        Caller("")
    with pytest.raises(BindingError):
        Caller("@1", "")


def get_task(task_id: str, rid: Any = 2) -> dict[str, Any]:
    return a2a.make_request("GetTask", {"id": task_id}, id=rid)


def test_another_callers_task_is_an_unknown_task() -> None:
    """A request that names the task of another caller is answered as for an unknown
    task (-32001)."""
    alice, bob = Caller.group_member("g", "alice"), Caller.group_member("g", "bob")
    store = CallerStore()
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "X"}}},
    }
    store.record(alice, response)
    assert store.owner_of_task("t-1") == alice
    assert store.owner_of_context("c-1") == alice
    assert store.check_request(alice, get_task("t-1")) is None
    refused = store.check_request(bob, get_task("t-1", rid="b"))
    assert refused is not None
    assert refused["id"] == "b"
    assert refused["error"]["code"] == a2a.TASK_NOT_FOUND == -32001
    assert refused["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    # An id nobody has gets the same answer (issue 20): the answer never tells
    # whether another caller's task exists.
    assert store.check_request(bob, get_task("t-404", rid="b")) == refused


@pytest.mark.parametrize(
    "request_",
    [
        a2a.make_request("CancelTask", {"id": "t-1"}, id=1),
        a2a.make_request("SubscribeToTask", {"id": "t-1"}, id=1),
        a2a.make_request("GetTaskPushNotificationConfig", {"taskId": "t-1", "id": "x"}, id=1),
        a2a.make_request("SendMessage", {"message": {**MESSAGE, "taskId": "t-1"}}, id=1),
        a2a.make_request(
            "SendStreamingMessage", {"message": {**MESSAGE, "contextId": "c-1"}}, id=1
        ),
        a2a.make_request("ListTasks", {"contextId": "c-1"}, id=1),
    ],
)
def test_every_way_of_naming_a_task_or_context_is_scoped(request_: dict[str, Any]) -> None:
    alice, bob = Caller.contact("alice"), Caller.contact("bob")
    store = CallerStore()
    assert store.add_task(alice, "t-1", "c-1")
    assert store.check_request(alice, request_) is None
    refused = store.check_request(bob, request_)
    assert refused is not None and refused["error"]["code"] == -32001


def test_record_claims_only_free_ids() -> None:
    alice, bob = Caller.contact("alice"), Caller.contact("bob")
    store = CallerStore()
    # A request with a new contextId the caller chose claims it.
    store.record(alice, send({**MESSAGE, "contextId": "c-new"}))
    assert store.contexts_of(alice) == {"c-new"}
    # Nobody steals it, by request or by response.
    store.record(bob, send({**MESSAGE, "contextId": "c-new"}))
    update = {"statusUpdate": {"taskId": "t-2", "contextId": "c-new", "status": {}}}
    store.record(bob, {"jsonrpc": "2.0", "id": 1, "result": update})
    assert store.owner_of_context("c-new") == alice
    assert store.owner_of_task("t-2") == bob
    assert not store.add_context(bob, "c-new")
    assert not store.add_task(bob, "t-3", "c-new")
    assert store.owner_of_task("t-3") is None
    assert store.add_task(alice, "t-3", "c-new")
    assert store.tasks_of(alice) == {"t-3"}


def test_record_reads_every_result_shape() -> None:
    caller = Caller.contact("a")
    store = CallerStore()
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
    message = {"messageId": "r", "role": "ROLE_AGENT", "contextId": "c-2", "parts": []}
    listing = {"tasks": [{"id": "t-3", "contextId": "c-3", "status": {}}]}
    artifact = {"artifactUpdate": {"taskId": "t-4", "contextId": "c-4", "artifact": {}}}
    for result in ({"task": task}, {"message": message}, listing, artifact):
        store.record(caller, {"jsonrpc": "2.0", "id": 1, "result": result})
    store.record(caller, {"id": "t-5", "contextId": "c-5", "status": {}})  # a bare Task
    assert store.tasks_of(caller) == {"t-1", "t-3", "t-4", "t-5"}
    assert store.contexts_of(caller) == {"c-1", "c-2", "c-3", "c-4", "c-5"}
    store.forget_task("t-1")
    store.forget_context("c-1")
    assert store.owner_of_task("t-1") is None
    assert store.owner_of_context("c-1") is None


def test_store_refuses_bad_input() -> None:
    store = CallerStore()
    with pytest.raises(TypeError, match="Caller"):
        store.record("alice", send())  # type: ignore[arg-type]
    with pytest.raises(BindingError):
        store.add_task(Caller.contact(1), "")
    with pytest.raises(BindingError):
        store.record(Caller.contact(1), [])  # type: ignore[arg-type]


# -- make_request -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "", "params": {}, "id": 1}, "method"),
        ({"method": "GetTask", "params": {}, "id": None}, "id"),
        ({"method": "GetTask", "params": {}, "id": 1, "version": "1"}, "Major.Minor"),
        (
            {"method": "GetTask", "params": {}, "id": 1, "parameters": {"a2a-version": "1.0"}},
            "version=",
        ),
        ({"method": "GetTask", "params": {}, "id": 1, "parameters": {"X": 1}}, "string value"),
    ],
)
def test_make_request_refuses_bad_input(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(BindingError, match=match):
        a2a.make_request(**kwargs)


def test_the_sdk_names_are_listed_by_dir_and_imported_on_first_use() -> None:
    """``A2aBridge``, ``SimplexCaller``, ``register_client``, ``ServiceRpcError`` and
    ``SimplexA2aTransport`` need the a2a-sdk: they are imported when asked for,
    and ``dir()`` shows them all the same."""
    lazy = {
        "A2aBridge",
        "SimplexCaller",
        "register_client",
        "ServiceRpcError",
        "SimplexA2aTransport",
    }
    assert lazy <= set(dir(a2a)) and set(a2a.__all__) <= set(dir(a2a))
    assert dir(a2a) == sorted(dir(a2a))
    assert a2a.A2aBridge.__module__ == "simplex_rpc.a2a._bridge"
    with pytest.raises(AttributeError, match=r"'simplex_rpc\.a2a' has no attribute 'Nothing'"):
        getattr(a2a, "Nothing")  # noqa: B009 - the name is not an attribute

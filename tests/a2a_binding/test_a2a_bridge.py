"""A2aBridge against a real a2a-sdk agent, over both transports.

The agent is an ``AgentExecutor`` behind the SDK's ``DefaultRequestHandler``
and ``InMemoryTaskStore``. Each test runs in one event loop, with the handler
built inside it, as a bot runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from _a2a import ALICE, LINK, MESSAGE, Bot, chat_call, make_bot, send_message
from simplex_rpc import MAX_RESPONSE, PublicKey, Request, Response, SigningKey, a2a, chat
from simplex_rpc.a2a import A2aBridge, Caller
from simplex_rpc.vectors._examples import A2A_SEND_MESSAGE_REQUEST_TEXT

BOB = Caller.contact("bob")


@dataclass(frozen=True)
class ServiceRequest:
    """The shape of the adapter's ServiceRequest that a handler sees."""

    request_id: int
    signer: PublicKey | None
    request: Request


async def rpc_call(bot: Bot, message: Any, signer: PublicKey | None = None) -> Response:
    envelope = Request.parse(Request(protocol="a2a", request=message).to_json())
    response = await bot.bridge.rpc_handler(ServiceRequest(1, signer, envelope))
    return Response.parse(response.to_json())


# -- Service RPC ------------------------------------------------------------------


@pytest.mark.anyio
async def test_protocol_text_example_one_shot_task_over_rpc() -> None:
    """The example: the response is the task in its state at the end of the work."""

    bot = make_bot()
    envelope = Request.parse(A2A_SEND_MESSAGE_REQUEST_TEXT)
    response = await bot.bridge.rpc_handler(ServiceRequest(1, None, envelope))
    assert response.ok
    answer = response.response
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 1
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "Two anvils to Lisbon: 240 EUR."}]
    assert task["history"][0]["messageId"] == "m-1"


@pytest.mark.anyio
async def test_signed_one_shot_and_a_message_answer() -> None:
    """The response is the task, or a message."""
    key = SigningKey.generate().public_key

    response = await rpc_call(make_bot(), send_message("hello"), signer=key)
    assert response.ok
    assert response.response["result"]["message"]["parts"] == [{"text": "Hello from Acme"}]


@pytest.mark.parametrize(
    "message",
    [
        send_message("quote", contextId="c-1"),
        send_message("quote", taskId="t-1"),
        a2a.make_request(
            "SendMessage",
            {"message": MESSAGE, "configuration": {"returnImmediately": True}},
            id=1,
        ),
        a2a.make_request("SendStreamingMessage", {"message": MESSAGE}, id=1),
        a2a.make_request("GetTask", {"id": "t-1"}, id=1),
        a2a.make_request("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "x"}, id=1),
        a2a.make_request("GetExtendedAgentCard", {}, id=1),
    ],
)
@pytest.mark.anyio
async def test_everything_else_is_conversation_required_over_rpc(message: dict[str, Any]) -> None:
    response = await rpc_call(make_bot(), message)
    assert response.error is not None
    assert response.error.code == "conversation_required"


@pytest.mark.anyio
async def test_missing_version_over_rpc_is_the_sdks_version_not_supported() -> None:
    """Every request MUST carry A2A-Version; the SDK answers -32009 in the response."""
    message = send_message("quote")
    del message["a2a-service-parameters"]

    response = await rpc_call(make_bot(), message)
    assert response.ok
    assert response.response["error"]["code"] == -32009


@pytest.mark.anyio
async def test_oversized_task_over_rpc_is_too_large() -> None:
    bot = make_bot()
    relaxed = make_bot(rpc_limit=MAX_RESPONSE)
    message = send_message("big 9700")
    default, relaxed = await rpc_call(bot, message), await rpc_call(relaxed, message)
    assert default.error is not None and default.error.code == "too_large"
    assert relaxed.ok  # 10,000 < size <= what fits the block


@pytest.mark.anyio
async def test_task_not_finished_in_time_is_conversation_required() -> None:
    """A bot that cannot finish the task in time answers conversation_required."""

    response = await rpc_call(make_bot(rpc_deadline=0.05), send_message("hang"))
    assert response.error is not None
    assert response.error.code == "conversation_required"


@pytest.mark.anyio
async def test_envelope_errors() -> None:
    bot = make_bot()
    with_version = Request(protocol="a2a", request=send_message("q"), version="1.0")
    other = Request(protocol="mcp", request={})
    invalid = Request(protocol="a2a", request=[1])
    with_version, other, invalid = (
        await bot.bridge.rpc_handler(with_version),
        await bot.bridge.rpc_handler(other),
        await bot.bridge.rpc_handler(invalid),
    )
    assert with_version.error is not None and with_version.error.code == "bad_request"
    assert other.error is not None and other.error.code == "unsupported_protocol"
    assert invalid.ok and invalid.response["error"]["code"] == -32600


# -- conversations --------------------------------------------------------------------


@pytest.mark.anyio
async def test_send_message_in_a_conversation_is_one_reply() -> None:
    earlier, last = await chat_call(make_bot(), send_message("quote", rid="q"))
    assert earlier == []
    assert last["id"] == "q"
    assert last["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_streaming_replies_in_stream_order_until_the_end() -> None:
    """Each StreamResponse is one reply with the request's id; the last ends the stream."""
    request = a2a.make_request(
        "SendStreamingMessage", {"message": {**MESSAGE, "messageId": "m-9"}}, id=9
    )

    earlier, last = await chat_call(make_bot(), request)
    kinds = [next(iter(reply["result"])) for reply in [*earlier, last]]
    assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert all(reply["id"] == 9 for reply in [*earlier, last])
    assert not any(a2a.is_stream_end(reply) for reply in earlier)
    assert a2a.is_stream_end(last)
    assert last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert chat.ends_answer("a2a", request, last)
    assert not any(chat.ends_answer("a2a", request, reply) for reply in earlier)


@pytest.mark.anyio
async def test_stream_ends_in_an_interrupted_state_and_the_task_continues() -> None:
    bot = make_bot()
    ask = a2a.make_request(
        "SendStreamingMessage",
        {"message": {**MESSAGE, "parts": [{"text": "ask"}], "messageId": "m-2"}},
        id=1,
    )
    _, interrupted = await chat_call(bot, ask)
    task_id = interrupted["result"]["statusUpdate"]["taskId"]
    follow = send_message("quote", rid=2, messageId="m-3", taskId=task_id)
    _, done = await chat_call(bot, follow)
    interrupted, done = interrupted, done
    assert interrupted["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert a2a.is_stream_end(interrupted)
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_a_task_is_available_only_to_its_caller() -> None:
    """A request that names another caller's task is answered as for an unknown task."""

    bot = make_bot()
    _, created = await chat_call(bot, send_message("quote"), caller=ALICE)
    task_id = created["result"]["task"]["id"]
    get = a2a.make_request("GetTask", {"id": task_id}, id=2)
    subscribe = a2a.make_request("SubscribeToTask", {"id": task_id}, id=3)
    member_a = Caller.group_member("g", "alice")
    member_b = Caller.group_member("g", "bob")
    _, in_group = await chat_call(bot, send_message("quote", rid=4), caller=member_a)
    group_task = in_group["result"]["task"]["id"]
    get_group = a2a.make_request("GetTask", {"id": group_task}, id=5)
    answers = {
        "own": (await chat_call(bot, get, caller=ALICE))[1],
        "other": (await chat_call(bot, get, caller=BOB))[1],
        "other subscribe": (await chat_call(bot, subscribe, caller=BOB))[1],
        "same member": (await chat_call(bot, get_group, caller=member_a))[1],
        "other member": (await chat_call(bot, get_group, caller=member_b))[1],
        "direct chat": (await chat_call(bot, get_group, caller=ALICE))[1],
    }
    assert answers["own"]["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answers["same member"]["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    for name in ("other", "other subscribe", "other member", "direct chat"):
        assert answers[name]["error"]["code"] == -32001, name


@pytest.mark.anyio
async def test_push_notification_methods_get_push_not_supported() -> None:
    bot = make_bot()
    for method in sorted(a2a.PUSH_NOTIFICATION_METHODS):
        message = a2a.make_request(method, {"taskId": "t", "id": "c"}, id=method)
        answer = (await chat_call(bot, message))[1]
        assert answer["error"]["code"] == -32003


@pytest.mark.anyio
async def test_oversized_reply_in_a_conversation_is_internal_error() -> None:
    answer = (await chat_call(make_bot(), send_message("big 20000", rid=7)))[1]
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32603


@pytest.mark.anyio
async def test_service_parameters_become_headers() -> None:
    """A proxy to an HTTP interface sends each service parameter as an HTTP header;
    the credential of a security scheme arrives as its service parameter."""
    message = a2a.make_request(
        "SendMessage",
        {"message": {**MESSAGE, "parts": [{"text": "hello"}]}},
        id=1,
        parameters={"Authorization": "Bearer t0ken", "A2A-Extensions": "https://e/1"},
    )

    bot = make_bot()
    await chat_call(bot, message)
    agent = bot.agent
    (headers,) = agent.headers_seen
    assert headers["authorization"] == "Bearer t0ken"
    assert headers["a2a-version"] == "1.0"
    assert headers["a2a-extensions"] == "https://e/1"


@pytest.mark.anyio
async def test_version_not_supported_in_a_conversation() -> None:
    message = send_message("quote")
    message["a2a-service-parameters"] = {"A2A-Version": "0.3"}
    assert (await chat_call(make_bot(), message))[1]["error"]["code"] == -32009


@pytest.mark.anyio
async def test_extended_agent_card_is_the_public_card() -> None:
    """A bot answers GetExtendedAgentCard with its Agent Card, listing the SimpleX interface."""
    request = a2a.make_request("GetExtendedAgentCard", {}, id=1)
    card = (await chat_call(make_bot(), request))[1]["result"]
    assert card["name"] == "Acme"
    assert card["supportedInterfaces"] == [a2a.agent_card_interface(LINK)]


@pytest.mark.anyio
async def test_bad_chat_input() -> None:
    bot = make_bot()
    texts = [
        "{",
        '{"jsonrpc": "2.0", "method": "GetTask", "params": {}}',
        # A method that is not a string is the peer's data, not a crash.
        '{"jsonrpc": "2.0", "id": 4, "method": ["GetTask"], "params": {}}',
    ]
    out = [json.loads(await bot.bridge.chat_handler(t, caller=ALICE)) for t in texts]
    unknown = a2a.make_request("tasks/get", {}, id=3)
    out.append((await chat_call(bot, unknown))[1])
    parse, notification, odd_method, unknown = out
    assert parse["id"] is None and parse["error"]["code"] == -32700
    assert notification["error"]["code"] == -32600
    assert odd_method["id"] == 4 and odd_method["error"]["code"] == -32600
    assert unknown["error"]["code"] == -32601


@pytest.mark.anyio
async def test_bridge_refuses_bad_arguments() -> None:
    with pytest.raises(TypeError, match="RequestHandler"):
        A2aBridge(object())  # type: ignore[arg-type]

    bot = make_bot()
    with pytest.raises(ValueError, match="rpc_deadline"):
        A2aBridge(bot.bridge.request_handler, rpc_deadline=0)
    with pytest.raises(a2a.BindingError, match="limit"):
        A2aBridge(bot.bridge.request_handler, rpc_limit=MAX_RESPONSE + 1)
    with pytest.raises(TypeError, match="Caller"):
        await bot.bridge.handle(send_message("q"), caller="alice")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_cancel_task_in_a_conversation() -> None:
    """CancelTask reaches the agent for its caller only."""

    bot = make_bot()
    _, asked = await chat_call(bot, send_message("ask"))
    task_id = asked["result"]["task"]["id"]
    cancel = a2a.make_request("CancelTask", {"id": task_id}, id=2)
    other = (await chat_call(bot, cancel, caller=BOB))[1]
    own = (await chat_call(bot, cancel, caller=ALICE))[1]
    other, own = other, own
    assert other["error"]["code"] == -32001
    assert own["result"]["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.anyio
async def test_bridge_serves_through_the_adapter_and_the_simulator() -> None:
    """bridge.rpc_handler is the responder's handler: the protocol text's one-shot
    task over the simulated core, signed, and conversation_required for a stream."""
    from _support import pair

    key = SigningKey.generate()

    bot = make_bot()
    async with pair(bot.bridge.rpc_handler, protocols=("a2a",)) as p:
        request = Request.parse(A2A_SEND_MESSAGE_REQUEST_TEXT)
        done = await p.alice.service_request(1, p.link, request, timeout=10, sign_key=key)
        assert done.ok
        assert done.response["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        stream = a2a.make_request("SendStreamingMessage", {"message": MESSAGE}, id=2)
        refused = await p.alice.service_request(
            1, p.link, Request(protocol="a2a", request=stream), timeout=10
        )
        assert refused.error is not None
        assert refused.error.code == "conversation_required"


@pytest.mark.anyio
async def test_default_deadline_is_below_the_adapters() -> None:
    """The bridge's deadline answers before the adapter's and the core's window."""
    from simplex_rpc.a2a._bridge import DEFAULT_RPC_DEADLINE
    from simplex_rpc.adapter import DEFAULT_HANDLER_TIMEOUT, RESPONSE_WINDOW

    assert DEFAULT_RPC_DEADLINE < DEFAULT_HANDLER_TIMEOUT < RESPONSE_WINDOW

    assert make_bot().bridge.rpc_deadline == DEFAULT_RPC_DEADLINE


@pytest.mark.anyio
async def test_a_stream_left_early_ends_cleanly() -> None:
    """A reply that cannot be sent ends the answer; the bridge keeps serving."""
    request = a2a.make_request("SendStreamingMessage", {"message": MESSAGE}, id=1)

    bot = make_bot()

    async def gone(text: str) -> None:
        raise OSError("the chat is gone")

    with pytest.raises(OSError, match="gone"):
        await bot.bridge.chat_handler(request, caller=ALICE, send=gone)
    answer = (await chat_call(bot, send_message("quote", rid=2, messageId="m-5")))[1]
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_a_request_that_is_not_json_is_invalid() -> None:
    bot = make_bot()
    request = send_message("quote")
    request["params"]["metadata"] = {"x": float("nan")}
    answer = await bot.bridge.handle(request, caller=ALICE)
    assert answer["error"]["code"] == -32600

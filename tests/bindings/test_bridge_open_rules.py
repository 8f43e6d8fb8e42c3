"""The bridges' rules that were left open (issue 11, "Rules left open in the bridges").

* A2A binding, "Service parameters": "A bot answers a request of a version it
  does not serve with A2A's VersionNotSupportedError." The SDK passes any 1.x
  version to its 1.0 handler; the bridge refuses it first.
* A2A binding, "Agent Card": "A bot answers GetExtendedAgentCard with its Agent
  Card. For a caller without credentials, it is the public card." Tested as a
  security property: the extended card's content never reaches the caller.
* Both bindings: "A response above the size limit is replaced with a JSON-RPC
  error with code -32603 in a conversation." Its ``data`` counts the size as the
  limit counts it, so ``size > limit`` holds for every replaced reply.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb

from _a2a import AnvilAgent, Bot, agent_card, chat_call, make_bot, send_message
from simplex_rpc import a2a, chat, mcp
from simplex_rpc.a2a import A2aBridge, Caller

SECRET_SKILL = "internal-pricing-override"


def bot_with_an_extended_card() -> Bot:
    """A bot whose handler has a distinct extended card with a skill for trusted callers."""
    agent = AnvilAgent()
    public = agent_card()
    extended = pb.AgentCard()
    extended.CopyFrom(public)
    extended.description = "Anvils, delivered; partner prices inside"
    extended.skills.append(
        pb.AgentSkill(id=SECRET_SKILL, name="Override", description="Partner prices", tags=["x"])
    )
    handler = DefaultRequestHandler(
        agent_executor=agent,
        task_store=InMemoryTaskStore(),
        agent_card=public,
        extended_agent_card=extended,
    )
    return Bot(A2aBridge(handler), agent)


# -- A2A-Version ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.1", "2.0", "0.3", "1"])
@pytest.mark.anyio
async def test_an_unserved_version_is_version_not_supported(version: str) -> None:
    """A request of a version the bot does not serve gets -32009; the agent never runs."""
    message = send_message("quote")
    message["a2a-service-parameters"] = {"A2A-Version": version}

    bot = make_bot()
    answer, agent = (await chat_call(bot, message))[1], bot.agent
    assert answer["id"] == 1
    assert answer["error"]["code"] == a2a.VERSION_NOT_SUPPORTED
    assert answer["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert agent.headers_seen == []


@pytest.mark.anyio
async def test_a_patch_number_is_ignored_and_a_served_version_passes() -> None:
    """Versions are Major.Minor: 1.0.2 is 1.0."""
    message = send_message("quote")
    message["a2a-service-parameters"] = {"a2a-version": "1.0.2"}

    answer = (await chat_call(make_bot(), message))[1]
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_the_served_versions_are_the_bridges_choice() -> None:
    agent = AnvilAgent()
    handler = DefaultRequestHandler(
        agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=agent_card()
    )
    bridge = A2aBridge(handler, supported_versions=["0.9"])
    answer: dict[str, Any] = json.loads(
        await bridge.chat_handler(send_message("quote"), caller=Caller.contact("a"))
    )
    answer = answer
    assert answer["error"]["code"] == a2a.VERSION_NOT_SUPPORTED
    assert "0.9" in answer["error"]["message"]
    with pytest.raises(a2a.BindingError, match="supported_versions"):
        A2aBridge(make_bot().bridge.request_handler, supported_versions="1.0")


# -- the end of a stream ------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_subscription_to_an_interrupted_task_ends_at_its_state() -> None:
    """A2A binding, "Streaming": the stream ends with the reply whose task is in an
    interrupted state. The SDK keeps such a subscription open for the next event; the
    bridge ends the answer with the task in input required."""

    bot = make_bot()
    alice = Caller.contact("alice")
    asked = await bot.bridge.handle(send_message("ask"), caller=alice)
    task_id = asked["result"]["task"]["id"]
    subscribe = a2a.make_request("SubscribeToTask", {"id": task_id}, id=2)
    earlier, last = await chat_call(bot, subscribe, caller=alice)
    assert earlier == []
    assert last["id"] == 2
    assert last["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


# -- GetExtendedAgentCard ------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters",
    [{}, {"Authorization": "Bearer unverified-token"}],
    ids=["no-credentials", "unverified-credentials"],
)
@pytest.mark.anyio
async def test_an_unauthenticated_caller_gets_the_public_card_only(
    parameters: dict[str, str],
) -> None:
    """Security: the extended card never reaches a SimpleX caller, whose credentials the
    bridge does not verify; the answer is the public card, as the SDK would serialize it."""
    request = a2a.make_request("GetExtendedAgentCard", {}, id=7, parameters=parameters)

    bot = bot_with_an_extended_card()
    text = await bot.bridge.chat_handler(request, caller=Caller.contact("mallory"))
    assert SECRET_SKILL not in text and "partner prices" not in text
    answer = json.loads(text)
    assert answer["id"] == 7
    card = answer["result"]
    assert card["description"] == "Anvils, delivered"
    assert [skill["id"] for skill in card["skills"]] == ["quote"]
    assert card["supportedInterfaces"] == [
        a2a.agent_card_interface("https://smp12.simplex.im/a#acme")
    ]


@pytest.mark.anyio
async def test_without_a_known_public_card_the_answer_is_not_configured() -> None:
    """A handler that keeps no public card: -32007, never the extended card."""

    class Bare(DefaultRequestHandler):
        pass

    agent = AnvilAgent()
    handler = Bare(
        agent_executor=agent,
        task_store=InMemoryTaskStore(),
        agent_card=agent_card(),
        extended_agent_card=agent_card(),
    )
    del handler._agent_card
    bridge = A2aBridge(handler)
    request = a2a.make_request("GetExtendedAgentCard", {}, id=1)
    answer: dict[str, Any] = json.loads(
        await bridge.chat_handler(request, caller=Caller.contact("a"))
    )
    answer = answer
    assert answer["error"]["code"] == -32007
    assert answer["error"]["data"][0]["reason"] == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    with pytest.raises(TypeError, match="agent_card"):
        A2aBridge(make_bot().bridge.request_handler, agent_card="card")  # type: ignore[arg-type]


# -- -32603: size > limit ----------------------------------------------------------------------


def _response(text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": text}]}}


@pytest.mark.parametrize("binding", [mcp, a2a], ids=["mcp", "a2a"])
@pytest.mark.parametrize("char", ["a", '"', "é", "\x01"])
def test_the_replacement_states_a_size_over_its_limit(binding: Any, char: str) -> None:
    """Around the limit, for characters the core encodes in 1, 2 and 6 bytes: every reply
    that does not fit is replaced, and its data says size > limit."""
    # The longest text that fits, found from the allowance, then every length near it.
    per_char = chat.encoded_size(json.dumps(char, ensure_ascii=False)[1:-1])
    frame = chat.encoded_size(json.dumps(_response(""), separators=(",", ":")))
    fitting = (chat.MAX_MESSAGE_JSON - chat.reply_allowance() - frame) // per_char
    replaced = 0
    for n in range(fitting - 40, fitting + 40):
        response = _response(char * n)
        reply = json.loads(binding.chat_reply(response))
        if reply == response:
            continue
        replaced += 1
        data = reply["error"]["data"]
        assert reply["error"]["code"] == -32603
        assert data["limit"] == chat.MAX_MESSAGE_JSON
        assert data["size"] > data["limit"], (n, data)
        assert str(data["size"]) in reply["error"]["message"]
    assert 0 < replaced < 80

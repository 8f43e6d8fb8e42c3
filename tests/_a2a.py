"""The A2A binding tests' shared pieces: a message, an agent, its card, a bot serving it.

No tests here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format  # type: ignore[import-untyped]

from _a2a_upstream import AnvilAgent
from simplex_rpc import a2a, chat
from simplex_rpc.a2a import A2aBridge, Caller
from simplex_rpc.vectors._examples import a2a_send_message_request

MESSAGE: dict[str, Any] = a2a_send_message_request()["request"]["params"]["message"]
LINK = "https://smp12.simplex.im/a#acme"
ALICE = Caller.contact("alice")


def agent_card() -> pb.AgentCard:
    card = pb.AgentCard(
        name="Acme",
        description="Anvils, delivered",
        version="1.0",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    card.supported_interfaces.append(
        json_format.ParseDict(a2a.agent_card_interface(LINK), pb.AgentInterface())
    )
    card.capabilities.streaming = True
    card.capabilities.extended_agent_card = True
    card.skills.append(pb.AgentSkill(id="quote", name="Quote", description="Prices", tags=["x"]))
    return card


@dataclass
class Bot:
    bridge: A2aBridge
    agent: AnvilAgent


def make_bot(**kwargs: Any) -> Bot:
    agent = AnvilAgent()
    card = agent_card()
    handler = DefaultRequestHandler(
        agent_executor=agent,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        # The binding: GetExtendedAgentCard answers the public card to a caller
        # without credentials.
        extended_agent_card=card,
    )
    return Bot(A2aBridge(handler, **kwargs), agent)


def send_message(text: str, rid: Any = 1, **message: Any) -> dict[str, Any]:
    msg = {**MESSAGE, "parts": [{"text": text}], **message}
    return a2a.make_request("SendMessage", {"message": msg}, id=rid)


async def chat_call(
    bot: Bot, request: Any, caller: Caller = ALICE
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The replies before the last, and the last, each parsed from its text."""
    earlier: list[str] = []

    async def send(text: str) -> None:
        earlier.append(text)

    last = await bot.bridge.chat_handler(request, caller=caller, send=send)
    for text in [*earlier, last]:
        assert chat.fits_message(text)
    return [json.loads(t) for t in earlier], json.loads(last)


def card_for(link: str, version: str = "1.0") -> pb.AgentCard:
    """The agent's card with its SimpleX interface: the bot's address link."""
    card = agent_card()
    del card.supported_interfaces[:]
    card.supported_interfaces.append(
        json_format.ParseDict(a2a.agent_card_interface(link, version), pb.AgentInterface())
    )
    return card


def user_message(text: str) -> pb.SendMessageRequest:
    message = pb.Message(message_id="m-1", role=pb.ROLE_USER, parts=[new_text_part(text)])
    return pb.SendMessageRequest(message=message)

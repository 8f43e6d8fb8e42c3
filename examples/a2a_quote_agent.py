"""A small A2A agent, served over SimpleX on both transports by A2aBridge.

The agent is an ordinary a2a-sdk agent (an ``AgentExecutor`` behind the SDK's
``DefaultRequestHandler``); the bridge puts it behind SimpleX without changing it:

* over Service RPC, each one-shot ``SendMessage`` envelope gets one response
  envelope (``bridge.rpc_handler``, the handler of the adapter's responder);
* in a conversation, each ``/_call a2a <request>`` gets its replies
  (``bridge.chat_handler``), streams and follow-ups included.

Serve it through a chat core (``simplex-rpc serve --a2a-module
examples/a2a_quote_agent.py:build_handler --address``) and talk to it with
``simplex-rpc a2a send LINK "quote anvil"``. Run it (``python
examples/a2a_quote_agent.py``) to see one Service RPC round trip in memory,
with no chat core.
"""

from __future__ import annotations

import asyncio

from a2a.helpers.proto_helpers import get_message_text, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError

from simplex_rpc import Request
from simplex_rpc import a2a as a2a_binding
from simplex_rpc.a2a import A2aBridge

PRICES = {"anvil": 120, "hammer": 15, "tongs": 9}


class QuoteAgent(AgentExecutor):
    """Answers "quote ITEM" with a price, anything else with what it can do."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        words = get_message_text(context.message).split()
        item = words[1] if len(words) > 1 and words[0] == "quote" else None
        text = f"One {item}: {PRICES[item]} EUR." if item in PRICES else "Try: quote anvil"
        reply = pb.Message(
            message_id=f"re-{context.message.message_id}",
            role=pb.ROLE_AGENT,
            parts=[new_text_part(text)],
            context_id=context.context_id,
        )
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # Every quote is answered at once with a message: there is never a task to cancel.
        raise TaskNotCancelableError(message="a quote is answered at once; no task runs")


def agent_card() -> pb.AgentCard:
    """The agent's public card: its name, version and one skill."""
    card = pb.AgentCard(
        name="Acme quotes",
        description="Prices of anvils, hammers and tongs",
        version="1.0.0",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    card.capabilities.streaming = True
    card.skills.append(
        pb.AgentSkill(id="quote", name="Quote", description="quote ITEM", tags=["prices"])
    )
    return card


def build_handler() -> DefaultRequestHandler:
    """The agent behind the SDK's request handler (what ``serve --a2a-module`` takes)."""
    card = agent_card()
    return DefaultRequestHandler(
        agent_executor=QuoteAgent(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=card,  # GetExtendedAgentCard answers the public card
    )


async def main() -> None:
    bridge = A2aBridge(build_handler())
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "quote anvil"}]}
    request = Request(
        protocol="a2a",
        request=a2a_binding.make_request("SendMessage", {"message": message}, id=1),
    )
    print("rpc   >", request.to_json().decode()[:72], "...")
    print("rpc   <", (await bridge.rpc_handler(request)).to_json().decode())


if __name__ == "__main__":
    asyncio.run(main())

"""An a2a-sdk ClientFactory client over SimpleX, against the simulator (issue 11).

Protocol text, "A2A binding": an Agent Card lists a SimpleX interface (url the
contact address link, protocolBinding the binding URI, protocolVersion the A2A
version); every request carries A2A-Version in ``a2a-service-parameters``; a
bot answers a version it does not serve with VersionNotSupportedError; Service
RPC serves one-shot SendMessage and answers every other request
conversation_required.

The client is the SDK's own: ``ClientFactory(config)`` with the SimpleX
transport registered by ``a2a.register_client``, ``factory.create(card)``
with a card made with ``a2a.agent_card_interface(link)``. The bot is the SDK
agent of test_a2a_bridge behind ``A2aBridge``, served by ``ChatCore.serve``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import VersionNotSupportedError

from _a2a import AnvilAgent, agent_card, card_for, make_bot, user_message
from _support import Pair, pair
from simplex_rpc import ErrorCode, Response, SigningKey, a2a
from simplex_rpc.a2a import ServiceRpcError, register_client
from simplex_rpc.adapter import ServiceRequest

Handler = Callable[[ServiceRequest], Awaitable[Response]]


@contextlib.asynccontextmanager
async def bot(
    wrap: Callable[[Handler], Handler] | None = None,
) -> AsyncIterator[tuple[Pair, AnvilAgent]]:
    """The anvil agent behind A2aBridge, served by bob; alice is the requester."""
    made = make_bot()
    handler: Handler = made.bridge.rpc_handler
    if wrap is not None:
        handler = wrap(handler)
    async with pair(handler, protocols=("a2a",)) as p:
        yield p, made.agent


async def one_shot(client: Any, text: str, **kwargs: Any) -> pb.StreamResponse:
    events = [event async for event in client.send_message(user_message(text), **kwargs)]
    (event,) = events
    assert isinstance(event, pb.StreamResponse)
    return event


# -- one-shot SendMessage over Service RPC --------------------------------------------------


@pytest.mark.anyio
async def test_a_client_from_the_card_gets_a_completed_task_over_rpc() -> None:
    """A client made from a card with the SimpleX interface sends SendMessage as one
    Service RPC request and gets the task in its state at the end of the work."""
    seen: list[dict[str, Any]] = []

    def record(handler: Handler) -> Handler:
        async def recorded(request: ServiceRequest) -> Response:
            seen.append(request.request.request)
            return await handler(request)

        return recorded

    async with bot(record) as (p, agent):
        factory = register_client(ClientConfig(streaming=False), p.alice, 1)
        client = factory.create(card_for(p.link))
        event = await one_shot(client, "quote")
        assert event.task.status.state == pb.TASK_STATE_COMPLETED
        assert event.task.artifacts[0].parts[0].text == "Two anvils to Lisbon: 240 EUR."
        reply = await one_shot(client, "hello")
        assert reply.message.parts[0].text == "Hello from Acme"
        await client.close()
        (headers, _) = agent.headers_seen
        assert headers["a2a-version"] == "1.0"
    assert [m["method"] for m in seen] == ["SendMessage", "SendMessage"]
    for message in seen:
        # Every request MUST carry A2A-Version, in the member for protocols without headers.
        assert message["a2a-service-parameters"] == {"A2A-Version": "1.0"}


@pytest.mark.anyio
async def test_service_parameters_and_a_signed_caller() -> None:
    """Service parameters of the call context go into a2a-service-parameters (A2A-Version
    first, always); a signed request reaches the bot with the signer's key."""
    key = SigningKey.generate()
    signers: list[Any] = []

    def record(handler: Handler) -> Handler:
        async def recorded(request: ServiceRequest) -> Response:
            signers.append((request.signer, request.request.request_key))
            return await handler(request)

        return recorded

    async with bot(record) as (p, agent):
        config = ClientConfig(streaming=False)
        factory = register_client(ClientFactory(config), p.alice, 1, sign_key=key)
        client = factory.create(card_for(p.link))
        context = ClientCallContext(service_parameters={"A2A-Extensions": "https://e/1"})
        event = await one_shot(client, "quote", context=context)
        assert event.task.status.state == pb.TASK_STATE_COMPLETED
        (headers,) = agent.headers_seen
        assert headers["a2a-version"] == "1.0"
        assert headers["a2a-extensions"] == "https://e/1"
    assert signers == [(key.public_key, key.public_key)]


@pytest.mark.anyio
async def test_an_unserved_version_is_version_not_supported() -> None:
    """A card whose SimpleX interface names 1.1: the bot serves 1.0 and answers -32009,
    which the SDK client raises as its VersionNotSupportedError."""

    async with bot() as (p, agent):
        factory = register_client(ClientConfig(streaming=False), p.alice, 1)
        client = factory.create(card_for(p.link, "1.1"))
        with pytest.raises(VersionNotSupportedError):
            await one_shot(client, "quote")
        assert agent.headers_seen == []


# -- what Service RPC does not serve ---------------------------------------------------------


@pytest.mark.anyio
async def test_follow_ups_and_streams_are_conversation_required_over_rpc() -> None:
    """GetTask, CancelTask, a message with taskId and the streaming methods are answered
    conversation_required, raised as ServiceRpcError naming the code."""

    async with bot() as (p, _):
        factory = register_client(ClientConfig(streaming=False), p.alice, 1)
        client = factory.create(card_for(p.link))
        task = (await one_shot(client, "quote")).task
        calls = [
            client.get_task(pb.GetTaskRequest(id=task.id)),
            client.cancel_task(pb.CancelTaskRequest(id=task.id)),
        ]
        for call in calls:
            with pytest.raises(ServiceRpcError) as caught:
                await call
            assert caught.value.code == ErrorCode.CONVERSATION_REQUIRED
            assert str(caught.value).startswith("conversation_required")
        follow_up = user_message("and a hammer?")
        follow_up.message.task_id = task.id
        with pytest.raises(ServiceRpcError, match="conversation_required"):
            [e async for e in client.send_message(follow_up)]
        streaming = register_client(ClientConfig(streaming=True), p.alice, 1)
        with pytest.raises(ServiceRpcError, match="SendStreamingMessage needs a conversation"):
            [
                e
                async for e in streaming.create(card_for(p.link)).send_message(
                    user_message("q")
                )
            ]


@pytest.mark.anyio
async def test_rate_limited_is_repeated_within_the_bound() -> None:
    answered: list[str] = []

    def limit_first(handler: Handler) -> Handler:
        async def limited(request: ServiceRequest) -> Response:
            answered.append(request.request.request["method"])
            if len(answered) == 1:
                return Response.failure(ErrorCode.RATE_LIMITED, "slow down", retry_after=0)
            return await handler(request)

        return limited

    async with bot(limit_first) as (p, _):
        client = register_client(ClientConfig(streaming=False), p.alice, 1).create(
            card_for(p.link)
        )
        event = await one_shot(client, "quote")
        assert event.task.status.state == pb.TASK_STATE_COMPLETED
    assert answered == ["SendMessage", "SendMessage"]


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_register_client_refuses_what_it_cannot_use() -> None:
    async with pair(lambda r: "x") as p:
        with pytest.raises(TypeError, match="factory_or_config"):
            register_client("config", p.alice, 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="core"):
            register_client(ClientConfig(), "ws://x", 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="sign_key"):
            register_client(ClientConfig(), p.alice, 1, sign_key="k")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="user_id"):
            register_client(ClientConfig(), p.alice, 0)
        with pytest.raises(ValueError, match="timeout"):
            register_client(ClientConfig(), p.alice, 1, timeout=-1)
        config = ClientConfig()
        register_client(config, p.alice, 1)
        # An empty list meant JSON-RPC only: it keeps JSON-RPC, then adds the binding.
        assert config.supported_protocol_bindings == ["JSONRPC", a2a.BINDING_URI]
        register_client(config, p.alice, 1)
        assert config.supported_protocol_bindings.count(a2a.BINDING_URI) == 1
        # A card without a SimpleX interface is not this transport's.
        card = agent_card()
        del card.supported_interfaces[:]
        with pytest.raises(ValueError, match="no compatible transports"):
            ClientFactory(ClientConfig(supported_protocol_bindings=[a2a.BINDING_URI])).create(
                card
            )
        key = SigningKey.generate()
        factory = register_client(ClientConfig(), p.alice, 1, sign_key=key)
        transport = factory._registry[a2a.BINDING_URI](card_for(p.link), p.link, ClientConfig())
        assert key.encode() not in repr(transport)
        with pytest.raises(A2AClientError):
            await transport.get_task(
                pb.GetTaskRequest(id="t"),
                context=ClientCallContext(service_parameters={"Bad Name": "x"}),
            )

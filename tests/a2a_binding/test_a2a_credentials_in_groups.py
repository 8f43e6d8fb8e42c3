"""A credential in a group is recognised by the Agent Card's security schemes (issue 20, item 7).

The protocol text, "A2A binding", Callers and authorization: "An agent whose
Agent Card declares security schemes receives the credential as the service
parameter of the scheme, for example Authorization for an HTTP scheme", and
"A request with a credential MUST NOT be sent in a group." A caller that has
the bot's Agent Card knows which parameters are credentials, whatever their
names; without the card, the name rule stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client import ClientCallContext, ClientConfig
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format  # type: ignore[import-untyped]

from simplex_rpc import a2a
from simplex_rpc.a2a import register_client
from simplex_rpc.adapter import CallRefused, ChatCore, IncomingCall, ReplySink
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.conformance

CARD: dict[str, Any] = {
    "name": "Acme",
    "description": "Anvils",
    "version": "1.0",
    "securitySchemes": {
        "acme-key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Acme-Pass"}},
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
        "sso": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://acme.example/oidc"}},
        "tls": {"mtlsSecurityScheme": {}},
    },
    "securityRequirements": [{"schemes": {"acme-key": {}}}],
}


def test_credential_parameters_are_the_service_parameters_of_the_schemes() -> None:
    """ "receives the credential as the service parameter of the scheme": an API key
    scheme's parameter is its name; an HTTP, OAuth 2 or OpenID Connect scheme's is
    Authorization; mutual TLS sends none. Names are case-insensitive (lower case)."""
    assert a2a.credential_parameters(CARD) == frozenset({"x-acme-pass", "authorization"})
    oauth = {"securitySchemes": {"o": {"oauth2SecurityScheme": {"flows": {}}}}}
    assert a2a.credential_parameters(oauth) == frozenset({"authorization"})
    snake = {"security_schemes": {"k": {"api_key_security_scheme": {"name": "Api-Token-2"}}}}
    assert a2a.credential_parameters(snake) == frozenset({"api-token-2"})
    assert a2a.credential_parameters({"name": "no schemes"}) == frozenset()
    with pytest.raises(a2a.BindingError, match="securitySchemes"):
        a2a.credential_parameters({"securitySchemes": []})


def call_with(parameters: dict[str, str]) -> dict[str, Any]:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    return a2a.make_request("SendMessage", {"message": message}, id=1, parameters=parameters)


async def answer(call: IncomingCall, send: ReplySink) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {}})


@contextlib.asynccontextmanager
async def group() -> AsyncIterator[tuple[CoreSimulator, ChatCore, str, str]]:
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        for core in (alice, bot):
            await core.start(service_requests=True)
        link = (await bot.service_address(1)).link
        ids = sim.create_group("team", "alice", ["bot"])
        ready = asyncio.Event()
        serving = asyncio.create_task(bot.serve_calls(1, {"a2a": answer}, ready=ready))
        await ready.wait()
        try:
            yield sim, alice, f"#{ids[('alice', 1)]}", link
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


@pytest.mark.anyio
async def test_a_scheme_credential_is_not_sent_in_a_group_whatever_its_name() -> None:
    """ "A request with a credential MUST NOT be sent in a group": with the bot's card,
    X-Acme-Pass (its API key scheme) is refused before anything is sent; so is
    Authorization (its HTTP scheme). A parameter the card names no scheme for goes."""

    async with group() as (sim, alice, at, _):
        sent = sim.stats.messages
        for name in ("X-Acme-Pass", "x-acme-pass", "Authorization"):
            with pytest.raises(CallRefused, match=r"credential.*" + name):
                await alice.call(
                    at,
                    "a2a",
                    call_with({name: "s3cret"}),
                    member="bot",
                    wait=5,
                    agent_card=CARD,
                )
        assert sim.stats.messages == sent
        (reply,) = await alice.call(
            at, "a2a", call_with({"X-Trace": "1"}), member="bot", wait=20, agent_card=CARD
        )
        assert reply.message is not None and "result" in reply.message


@pytest.mark.anyio
async def test_without_the_card_the_name_rule_stays() -> None:
    """Without the card, a parameter is a credential by its name (Authorization,
    X-Api-Key, ...), as before."""

    async with group() as (_, alice, at, _link):
        for name in ("Authorization", "X-Api-Key", "Api-Secret-Value"):
            with pytest.raises(CallRefused, match="credential"):
                await alice.call(at, "a2a", call_with({name: "s3cret"}), member="bot", wait=5)


@pytest.mark.anyio
async def test_the_sdk_client_with_the_card_does_not_send_a_credential_in_a_group() -> None:
    """The a2a-sdk client through register_client has the card it was created from: a
    request with the card's API key in the group is not sent."""

    async with group() as (sim, alice, at, link):
        card = json_format.ParseDict(CARD, pb.AgentCard(), ignore_unknown_fields=True)
        card.supported_interfaces.append(
            json_format.ParseDict(a2a.agent_card_interface(link), pb.AgentInterface())
        )
        factory = register_client(
            ClientConfig(streaming=False), alice, 1, chats={link: (at, "bot")}, timeout=10
        )
        client = factory.create(card)
        message = pb.Message(message_id="m", role=pb.ROLE_USER, parts=[pb.Part(text="hi")])
        message.context_id = "c-1"  # a follow-up: it goes to the conversation
        context = ClientCallContext(service_parameters={"X-Acme-Pass": "s3cret"})
        sent = sim.stats.messages
        with pytest.raises(A2AClientError, match="credential"):
            async for _ in client.send_message(
                pb.SendMessageRequest(message=message), context=context
            ):
                pass
        assert sim.stats.messages == sent

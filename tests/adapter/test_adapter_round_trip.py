"""The caller's round trip both SDK client transports adapt (issue 31), over the simulator.

``simplex_rpc.adapter._client.RoundTrip`` sends one JSON-RPC request of a binding
to one bot and gives back the binding messages of its answer: over Service RPC
the envelope's ``response`` (protocol text, "MCP binding" and "A2A binding":
"over Service RPC the request is the envelope's request and the answer its
response"), in a conversation the replies to ``/_call`` until the answer ends
(notifications first). Every failure is one ``RoundTripError`` whose ``kind``
(``Failure``) each transport maps to its SDK's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import pickle
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from simplex_rpc import ErrorCode, ErrorInfo, Response, SigningKey
from simplex_rpc.adapter import ChatCore, IncomingCall, ReplySink, ServiceRequest
from simplex_rpc.adapter._client import Failure, RoundTrip, RoundTripError, is_notification
from simplex_rpc.declarations import ProtocolDeclaration
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.testing import CoreSimulator

UNKNOWN_LINK = "https://simplex.chat/contact#/?v=2&smp=unknown"


def request(method: str = "tools/list", id: int | str = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


@dataclass
class Bot:
    """What the bot answers, by method, and what it saw."""

    signers: list[Any] = field(default_factory=list)
    held: asyncio.Event = field(default_factory=asyncio.Event)

    async def rpc(self, service_request: ServiceRequest) -> Response:
        self.signers.append(service_request.signer)
        message = service_request.request.request
        method = message["method"]
        if method == "other-id":
            return Response.success({"jsonrpc": "2.0", "id": "another", "result": {}})
        if method == "not-an-object":
            return Response.success(["a", "list"])
        if method == "parse-error":
            error = {"code": -32700, "message": "Parse error"}
            return Response.success({"jsonrpc": "2.0", "id": None, "error": error})
        if method == "busy":
            return Response.failure(ErrorCode.CONVERSATION_REQUIRED, "call it in a chat")
        return Response.success({"jsonrpc": "2.0", "id": message["id"], "result": {"rpc": method}})

    async def call(self, call: IncomingCall, send: ReplySink) -> str:
        message = call.request
        if message["method"] == "hold":
            await self.held.wait()  # released when the test ends: no answer in time
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"n": 1}}
        await send(json.dumps(note))
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"chat": message["method"]}}
        return json.dumps(answer)


@dataclass
class Scene:
    alice: ChatCore
    bot: Bot
    link: str  # the bot's address
    contact: str  # alice's ChatRef of the bot
    group: str  # alice's ChatRef of the group "team" (alice, bot)


@contextlib.asynccontextmanager
async def scene(*, declare: ProtocolDeclaration | None = None) -> AsyncIterator[Scene]:
    """alice, and a bot that serves mcp over Service RPC and in conversations."""
    bot = Bot()
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as core,
    ):
        await core.start(service_requests=True)
        await alice.start(service_requests=False)
        link = (await core.service_address(1)).link
        if declare is not None:
            await core.declare(1, {"mcp": declare})
        at_alice, _ = sim.connect("alice", "bot")
        ids = sim.create_group("team", "alice", ["bot"])
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(core.serve_calls(1, {"mcp": bot.call}, ready=ready[0])),
            asyncio.create_task(core.serve(1, bot.rpc, protocols=["mcp"], ready=ready[1])),
        ]
        for event in ready:
            await event.wait()  # both loops take their events
        try:
            yield Scene(
                alice=alice,
                bot=bot,
                link=link,
                contact=f"@{at_alice}",
                group=f"#{ids[('alice', 1)]}",
            )
        finally:
            bot.held.set()
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def answers(trip: RoundTrip, message: dict[str, Any], **options: Any) -> list[Any]:
    return [answer async for answer in trip.answers(message, **options)]


async def failure(trip: RoundTrip, message: dict[str, Any], **options: Any) -> RoundTripError:
    with pytest.raises(RoundTripError) as caught:
        await answers(trip, message, **options)
    return caught.value


# -- the two transports ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_over_service_rpc_the_answer_is_the_envelopes_response_signed_with_the_key() -> None:
    key = SigningKey.generate()
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, sign_key=key, timeout=20)
        got = await answers(trip, request("tools/list", id=7))
        assert got == [{"jsonrpc": "2.0", "id": 7, "result": {"rpc": "tools/list"}}]
        assert s.bot.signers == [key.public_key]  # the bot saw the verified signer
        assert key.encode() not in repr(trip)


@pytest.mark.anyio
async def test_in_a_conversation_notifications_come_first_then_the_response() -> None:
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", chat=s.contact, via="chat", timeout=20)
        note, answer = await answers(trip, request("tools/call", id="c1"))
        assert is_notification(note) and note["method"] == "notifications/progress"
        assert answer == {"jsonrpc": "2.0", "id": "c1", "result": {"chat": "tools/call"}}
        assert s.bot.signers == []  # nothing went over Service RPC


@pytest.mark.anyio
async def test_one_round_trip_object_takes_either_transport_per_request() -> None:
    """A transport that chooses per request (the A2A one) passes ``via`` to answers()."""
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, chat=s.contact, timeout=20)
        assert (await answers(trip, request(), via="rpc"))[-1]["result"] == {"rpc": "tools/list"}
        assert (await answers(trip, request(), via="chat"))[-1]["result"] == {"chat": "tools/list"}


@pytest.mark.anyio
async def test_auto_is_rpc_when_the_address_declares_transports_rpc() -> None:
    async with scene(declare=ProtocolDeclaration(versions=("2026-07-28",), rpc=True)) as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, via="auto", timeout=20)
        assert await trip.choose() == "rpc"
        assert trip.via == "rpc"


@pytest.mark.anyio
async def test_auto_without_transports_rpc_is_a_clear_error() -> None:
    async with scene(declare=ProtocolDeclaration(versions=("2026-07-28",), chat=True)) as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, via="auto", timeout=20)
        with pytest.raises(SimplexRpcError, match="declares mcp over chat only"):
            await trip.choose()


# -- one classification of failures ---------------------------------------------------------


@pytest.mark.anyio
async def test_an_envelope_error_is_envelope_with_the_error() -> None:
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, timeout=20)
        caught = await failure(trip, request("busy"))
        assert caught.kind is Failure.ENVELOPE
        assert caught.error is not None and caught.error.code == "conversation_required"
        assert str(caught).startswith("conversation_required: call it in a chat")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "says"),
    [
        ("other-id", "the bot's response has another request's id"),
        ("not-an-object", "the bot's answer is not a JSON-RPC response object"),
    ],
)
async def test_an_answer_to_another_request_is_bad_answer(method: str, says: str) -> None:
    async with scene() as s:
        caught = await failure(RoundTrip(s.alice, 1, "mcp", target=s.link), request(method))
        assert (caught.kind, str(caught), caught.error) == (Failure.BAD_ANSWER, says, None)


@pytest.mark.anyio
async def test_a_null_id_error_is_this_requests_error() -> None:
    """JSON-RPC 2.0: an error the server cannot tie to a request has a null id; a round
    trip carries one request, so the error is that request's, code and message kept."""
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=s.link, timeout=20)
        (answer,) = await answers(trip, request("parse-error", id=3))
        assert answer == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32700, "message": "Parse error"},
        }


@pytest.mark.anyio
async def test_an_address_the_core_cannot_reach_is_undelivered_without_the_key() -> None:
    key = SigningKey.generate()
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", target=UNKNOWN_LINK, sign_key=key, timeout=20)
        caught = await failure(trip, request())
        assert caught.kind is Failure.UNDELIVERED
        assert str(caught).startswith("the chat core could not deliver the request")
        assert key.encode() not in str(caught)


@pytest.mark.anyio
async def test_a_call_that_does_not_fit_a_message_is_refused_before_sending() -> None:
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", chat=s.contact, via="chat", timeout=20)
        caught = await failure(trip, request("tools/call", text="x" * 20_000))
        assert caught.kind is Failure.REFUSED
        assert str(caught).startswith("not sent: the /_call does not fit one chat message")


@pytest.mark.anyio
async def test_the_bindings_call_policy_refuses_before_sending() -> None:
    """The A2A binding's hook: "A request with a credential MUST NOT be sent in a group"."""
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "a2a", chat=s.group, member="bot", via="chat", timeout=20)
        message = request("GetTask", id="g")
        message["a2a-service-parameters"] = {"A2A-Version": "1.0", "Authorization": "Bearer t"}
        caught = await failure(trip, message)
        assert caught.kind is Failure.REFUSED
        assert "MUST NOT be sent in a group (service parameters Authorization)" in str(caught)
        assert "Bearer" not in str(caught)


@pytest.mark.anyio
async def test_no_complete_answer_within_the_timeout_is_timeout() -> None:
    async with scene() as s:
        trip = RoundTrip(s.alice, 1, "mcp", chat=s.contact, via="chat", timeout=20)
        caught = await failure(trip, request("hold"), timeout=0.3)
        assert caught.kind is Failure.TIMEOUT
        assert str(caught) == f"no complete answer in {s.contact} within 0.3 seconds"


def test_a_round_trip_error_pickles_and_copies_with_its_kind_and_error() -> None:
    error = RoundTripError(Failure.ENVELOPE, "busy", ErrorInfo(code="busy", retry_after=2))
    for back in [pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)]:
        assert (type(back), str(back), back.kind, back.error) == (
            RoundTripError,
            "busy",
            Failure.ENVELOPE,
            error.error,
        )


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"target": "https://x.example/a", "via": "pigeon"}, "via: 'pigeon' is not one of"),
        ({}, "target: name the bot's address, or a chat with it"),
        ({"target": "@5"}, "target: @5 is a ChatRef: use via='chat'"),
        ({"chat": "@5"}, "target: via='rpc' needs the bot's address"),
        ({"target": "https://x.example/a", "via": "chat"}, "via='chat' needs the conversation"),
        ({"chat": "five", "via": "chat"}, "expected a ChatRef"),
        ({"target": "https://x.example/a", "member": "bot"}, "member: only for via='chat'"),
        ({"chat": "@5", "via": "chat", "member": "bot"}, "a direct chat has no members"),
        ({"chat": "#5", "via": "chat", "member": ""}, "member: expected a member's display"),
    ],
)
def test_arguments_are_checked_before_a_core_is_open(arguments: dict[str, Any], says: str) -> None:
    with pytest.raises(SimplexRpcError, match=says):
        RoundTrip.check(1, **arguments)


def test_the_user_id_is_checked_as_the_cores_command_checks_it() -> None:
    with pytest.raises(SimplexRpcError, match="user_id"):
        RoundTrip.check(0, target="https://x.example/a")

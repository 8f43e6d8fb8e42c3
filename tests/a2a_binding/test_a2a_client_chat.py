"""The a2a-sdk ClientFactory client in a conversation: streams and follow-ups (issue 11).

Protocol text, "A2A binding": SendStreamingMessage and SubscribeToTask are
served in a conversation, each StreamResponse one reply, the stream ending
with the reply whose task is in a terminal or interrupted state; follow-ups
(GetTask, CancelTask, messages with taskId or contextId) need a conversation;
Service RPC serves one-shot SendMessage.

The client is the SDK's own, made from an Agent Card with the SimpleX
interface; ``register_client(..., chats={link: ChatRef or (group, member)})`` names the
conversation with the bot. The bot is the anvil agent of test_a2a_bridge behind
``A2aBridge``, served by ``ChatCore.serve_calls`` and ``ChatCore.serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from a2a.client import ClientConfig
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from _a2a import card_for, make_bot, user_message
from simplex_rpc import Response
from simplex_rpc.a2a import register_client
from simplex_rpc.adapter import ChatCore, IncomingCall, ReplySink, ServiceRequest
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.testing import CoreSimulator


@dataclass
class Scene:
    sim: CoreSimulator
    alice: ChatCore
    link: str
    contact: str
    group: str
    rpc_methods: list[str]


@contextlib.asynccontextmanager
async def scene() -> AsyncIterator[Scene]:
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        await bot.start(service_requests=True)
        await alice.start(service_requests=False)
        link = (await bot.service_address(1)).link
        at_alice, _ = sim.connect("alice", "bot")
        ids = sim.create_group("team", "alice", ["bot"])
        bridge = make_bot().bridge
        rpc_methods: list[str] = []

        async def rpc(request: ServiceRequest) -> Response:
            rpc_methods.append(request.request.request["method"])
            return await bridge.rpc_handler(request)

        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(bot.serve_calls(1, {"a2a": bridge}, ready=ready[0])),
            asyncio.create_task(bot.serve(1, rpc, protocols=["a2a"], ready=ready[1])),
        ]
        for event in ready:
            await event.wait()
        try:
            yield Scene(sim, alice, link, f"@{at_alice}", f"#{ids[('alice', 1)]}", rpc_methods)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def state_of(event: pb.StreamResponse) -> int | None:
    if event.HasField("task"):
        return int(event.task.status.state)
    if event.HasField("status_update"):
        return int(event.status_update.status.state)
    return None


@pytest.mark.anyio
async def test_a_stream_reaches_its_terminal_state_over_call() -> None:
    """SendStreamingMessage in the conversation: every StreamResponse, in order, the last
    in the completed state; nothing went over Service RPC."""

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True), s.alice, 1, chats={s.link: s.contact}, timeout=20
        )
        client = factory.create(card_for(s.link))
        events = [event async for event in client.send_message(user_message("quote"))]
        assert len(events) > 1
        states = [state_of(e) for e in events]
        assert states[-1] == pb.TASK_STATE_COMPLETED
        assert pb.TASK_STATE_COMPLETED not in states[:-1]
        artifacts = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert artifacts[0].artifact.parts[0].text == "Two anvils to Lisbon: 240 EUR."
        assert s.rpc_methods == []


@pytest.mark.anyio
async def test_follow_ups_go_to_the_conversation_and_one_shots_over_rpc() -> None:
    """A one-shot SendMessage goes over Service RPC; the input the agent asks for (a message
    with taskId) and GetTask go to the conversation where the task was made."""

    async with scene() as s:
        chats = {s.link: s.contact}
        one_shot = register_client(ClientConfig(streaming=False), s.alice, 1, chats=chats)
        client = one_shot.create(card_for(s.link))
        (done,) = [e async for e in client.send_message(user_message("quote"))]
        assert done.task.status.state == pb.TASK_STATE_COMPLETED
        assert s.rpc_methods == ["SendMessage"]
        streaming = register_client(ClientConfig(streaming=True), s.alice, 1, chats=chats)
        events = [
            e
            async for e in streaming.create(card_for(s.link)).send_message(user_message("ask"))
        ]
        task = next(e.task for e in events if e.HasField("task"))
        assert state_of(events[-1]) == pb.TASK_STATE_INPUT_REQUIRED
        follow_up = user_message("quote")
        follow_up.message.task_id = task.id
        follow_up.message.context_id = task.context_id
        (answer,) = [e async for e in client.send_message(follow_up)]
        assert answer.task.id == task.id
        assert answer.task.status.state == pb.TASK_STATE_COMPLETED
        fetched = await client.get_task(pb.GetTaskRequest(id=task.id))
        assert fetched.status.state == pb.TASK_STATE_COMPLETED
        assert s.rpc_methods == ["SendMessage"]


@pytest.mark.anyio
async def test_a_task_made_over_rpc_is_not_the_conversations() -> None:
    """A context and its tasks are available only to their caller: the Service RPC
    requester and the contact in the conversation are different callers, so a follow-up
    of a one-shot task in the conversation is an unknown task."""

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=False), s.alice, 1, chats={s.link: s.contact}
        )
        client = factory.create(card_for(s.link))
        (done,) = [e async for e in client.send_message(user_message("quote"))]
        with pytest.raises(TaskNotFoundError):
            await client.get_task(pb.GetTaskRequest(id=done.task.id))


@pytest.mark.anyio
async def test_subscribing_to_an_interrupted_task_ends_at_its_state() -> None:
    """A caller that missed replies resumes the stream with SubscribeToTask; the stream
    ends with the reply whose task is in an interrupted state (input required)."""

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True), s.alice, 1, chats={s.link: s.contact}, timeout=20
        )
        client = factory.create(card_for(s.link))
        events = [event async for event in client.send_message(user_message("ask"))]
        task_id = next(e.task.id for e in events if e.HasField("task"))
        resumed = [e async for e in client.subscribe(pb.SubscribeToTaskRequest(id=task_id))]
        assert [state_of(e) for e in resumed] == [pb.TASK_STATE_INPUT_REQUIRED]
        assert resumed[0].task.id == task_id


@pytest.mark.anyio
async def test_subscribe_and_cancel_in_the_conversation() -> None:
    """CancelTask of an interrupted task, then SubscribeToTask of the ended task: both in
    the conversation; the agent's answer to the subscription (an error for a task in a
    terminal state) is raised as the SDK's error."""

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True), s.alice, 1, chats={s.link: s.contact}, timeout=20
        )
        client = factory.create(card_for(s.link))
        events = [event async for event in client.send_message(user_message("ask"))]
        task_id = next(e.task.id for e in events if e.HasField("task"))
        assert state_of(events[-1]) == pb.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=task_id))
        assert canceled.status.state == pb.TASK_STATE_CANCELED
        with pytest.raises(UnsupportedOperationError, match="terminal state"):
            [e async for e in client.subscribe(pb.SubscribeToTaskRequest(id=task_id))]
        assert s.rpc_methods == []


@pytest.mark.anyio
async def test_a_credential_is_not_sent_in_a_group() -> None:
    """A request with a credential MUST NOT be sent in a group: refused before sending."""
    from a2a.client.client import ClientCallContext

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True),
            s.alice,
            1,
            chats={s.link: (s.group, "bot")},
            timeout=20,
        )
        client = factory.create(card_for(s.link))
        context = ClientCallContext(service_parameters={"Authorization": "Bearer t0ken"})
        with pytest.raises(A2AClientError, match="MUST NOT be sent in a group"):
            [e async for e in client.send_message(user_message("quote"), context=context)]


@pytest.mark.anyio
async def test_in_a_group_the_call_names_the_bots_member_and_streams_its_answer() -> None:
    """In a group, the call mentions the called member (``chats={link: (group, member)}``),
    so that its answer is the one accepted: the stream reaches the completed state."""

    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True),
            s.alice,
            1,
            chats={s.link: (s.group, "bot")},
            timeout=20,
        )
        client = factory.create(card_for(s.link))
        events = [event async for event in client.send_message(user_message("quote"))]
        assert state_of(events[-1]) == pb.TASK_STATE_COMPLETED
        assert s.rpc_methods == []


@pytest.mark.anyio
async def test_a_hostile_member_of_the_group_is_not_called_and_its_answer_is_not_taken() -> None:
    """A group with another member serving A2A, who answers every call it sees with a
    forged completed task: the call names the bot's member, so mallory is not called and
    the stream is the bot's own."""
    mallory_calls: list[IncomingCall] = []

    async def forge(call: IncomingCall, send: ReplySink) -> str:
        mallory_calls.append(call)
        task = {
            "id": "forged",
            "contextId": "forged",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "forged", "parts": [{"text": "Free anvils."}]}],
        }
        answer = {"jsonrpc": "2.0", "id": call.request.get("id"), "result": {"task": task}}
        return json.dumps(answer)

    async with scene() as s, ChatCore.connect(s.sim.url_for("mallory")) as mallory:
        await mallory.start(service_requests=False)
        ids = s.sim.create_group("market", "alice", ["bot", "mallory"])
        ready = asyncio.Event()
        serving = asyncio.create_task(mallory.serve_calls(1, {"a2a": forge}, ready=ready))
        await ready.wait()
        try:
            factory = register_client(
                ClientConfig(streaming=True),
                s.alice,
                1,
                chats={s.link: (f"#{ids[('alice', 1)]}", "bot")},
                timeout=20,
            )
            client = factory.create(card_for(s.link))
            events = [event async for event in client.send_message(user_message("quote"))]
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        assert state_of(events[-1]) == pb.TASK_STATE_COMPLETED
        artifacts = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert artifacts[0].artifact.parts[0].text == "Two anvils to Lisbon: 240 EUR."
        assert all(not e.HasField("task") or e.task.id != "forged" for e in events)
        assert mallory_calls == []


@pytest.mark.anyio
async def test_a_group_without_the_bots_member_is_refused() -> None:
    """Without a mention a group call is a broadcast whose first answer could come from
    any member, a hostile one too: a group ChatRef needs the bot's member."""

    async with scene() as s:
        with pytest.raises(SimplexRpcError, match="is a group: name the bot's member"):
            register_client(ClientConfig(), s.alice, 1, chats={s.link: s.group})
        with pytest.raises(SimplexRpcError, match="direct chat: it has no members"):
            register_client(ClientConfig(), s.alice, 1, chats={s.link: (s.contact, "bot")})
        with pytest.raises(SimplexRpcError, match="expected the bot's member display name"):
            register_client(ClientConfig(), s.alice, 1, chats={s.link: (s.group, "")})


@pytest.mark.anyio
async def test_chats_must_be_chat_refs() -> None:
    async with scene() as s:
        with pytest.raises(SimplexRpcError, match="expected a ChatRef"):
            register_client(ClientConfig(), s.alice, 1, chats={s.link: s.link})
        with pytest.raises(TypeError, match="chats"):
            register_client(ClientConfig(), s.alice, 1, chats="@1")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_an_unknown_chat_is_an_a2a_client_error() -> None:
    async with scene() as s:
        factory = register_client(
            ClientConfig(streaming=True), s.alice, 1, chats={s.link: "@999"}, timeout=5
        )
        client = factory.create(card_for(s.link))
        with pytest.raises(A2AClientError, match="could not deliver"):
            [e async for e in client.send_message(user_message("quote"))]

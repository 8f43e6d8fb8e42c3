"""A2A contexts and tasks are scoped to their caller (issue 20, item 1).

The protocol text, "A2A binding", Callers and authorization: "A context and its
tasks are available only to their caller: in the conversation where they were
created, and in a group to the member who created them. A request that names
the context or the task of another caller is answered as a request for an
unknown task."

The agent here keeps a memory per context, the consequence the issue names:
when the scoping fails, Bob reads what Alice told the agent. Every method that
names a context or a task is tried, over both transports, in direct chats and
in groups; the answer to a foreign id is compared with the answer to an id
nobody ever used, so that it never reveals whether the other caller's context
exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb

from simplex_rpc import PublicKey, Request, Response, SigningKey, a2a
from simplex_rpc.a2a import A2aBridge, Caller, CallerStore
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.conformance

MESSAGE: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}
UNUSED_CONTEXT = "c-nobody-ever-used-this"
UNUSED_TASK = "t-nobody-ever-used-this"


class MemoryAgent(AgentExecutor):
    """Remembers what each context was told and answers with what it heard before.

    "ask" leaves the task waiting for input, so that it can be continued,
    cancelled or subscribed to; any other text completes it.
    """

    def __init__(self) -> None:
        self.memory: dict[str, list[str]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None and context.context_id is not None
        text = get_message_text(context.message)
        heard = self.memory.setdefault(context.context_id, [])
        before = " | ".join(heard) or "nothing"
        heard.append(text)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(f"before: {before}")])
        if text.startswith("ask"):
            await updater.requires_input(updater.new_agent_message([new_text_part("more?")]))
            return
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def make_bridge() -> tuple[A2aBridge, MemoryAgent]:
    agent = MemoryAgent()
    card = pb.AgentCard(name="Memo", description="remembers", version="1.0")
    card.capabilities.streaming = True
    handler = DefaultRequestHandler(
        agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=card
    )
    return A2aBridge(handler), agent


def send(text: str, rid: Any = 1, method: str = "SendMessage", **message: Any) -> dict[str, Any]:
    msg = {**MESSAGE, "parts": [{"text": text}], **message}
    return a2a.make_request(method, {"message": msg}, id=rid)


async def last_answer(bridge: A2aBridge, request: dict[str, Any], caller: Caller) -> Any:
    """The last reply of the conversation's answer, parsed."""
    return json.loads(await bridge.chat_handler(request, caller=caller))


def ids_of(answer: dict[str, Any]) -> tuple[str, str]:
    task = answer["result"]["task"]
    return task["id"], task["contextId"]


ALICE = Caller.contact(1)
BOB = Caller.contact(2)
GROUP_ALICE = Caller.group_member(7, "alice")
GROUP_BOB = Caller.group_member(7, "bob")


def naming_requests(task_id: str, context_id: str) -> dict[str, dict[str, Any]]:
    """Every request of the binding that names a task or a context, by what it tries."""
    return {
        "SendMessage with contextId": send("what did they say?", contextId=context_id),
        "SendMessage with taskId": send("what did they say?", taskId=task_id),
        "SendMessage with both": send("what?", taskId=task_id, contextId=context_id),
        "SendMessage with context_id": send("what?", context_id=context_id),
        "SendMessage with referenceTaskIds": send("what?", referenceTaskIds=[task_id]),
        "SendStreamingMessage with contextId": send(
            "what?", method="SendStreamingMessage", contextId=context_id
        ),
        "GetTask": a2a.make_request("GetTask", {"id": task_id}, id=1),
        "CancelTask": a2a.make_request("CancelTask", {"id": task_id}, id=1),
        "SubscribeToTask": a2a.make_request("SubscribeToTask", {"id": task_id}, id=1),
        "ListTasks with contextId": a2a.make_request("ListTasks", {"contextId": context_id}, id=1),
        "ListTasks with context_id": a2a.make_request(
            "ListTasks", {"context_id": context_id}, id=1
        ),
    }


@pytest.mark.parametrize(("owner", "other"), [(ALICE, BOB), (GROUP_ALICE, GROUP_BOB)])
@pytest.mark.anyio
async def test_a_context_and_its_tasks_are_available_only_to_their_caller(
    owner: Caller, other: Caller
) -> None:
    """ "A context and its tasks are available only to their caller ... A request that
    names the context or the task of another caller is answered as a request for an
    unknown task." In a direct chat and in a group (per member), every method that
    names a context or a task: the other caller's request never reaches the agent, and
    its answer is the one for an id nobody ever used, so it does not reveal that the
    context exists."""

    bridge, agent = make_bridge()
    first = await last_answer(bridge, send("ask: my secret is 42"), owner)
    task_id, context_id = ids_of(first)
    for what, request in naming_requests(task_id, context_id).items():
        foreign = await last_answer(bridge, request, other)
        unknown_request = json.loads(
            json.dumps(request).replace(task_id, UNUSED_TASK).replace(context_id, UNUSED_CONTEXT)
        )
        unknown = await last_answer(bridge, unknown_request, other)
        assert "error" in foreign, f"{what}: served to another caller: {foreign}"
        assert foreign["error"]["code"] == a2a.TASK_NOT_FOUND, what
        assert foreign == unknown, f"{what}: the answer tells a foreign id from an unknown one"
    assert agent.memory[context_id] == ["ask: my secret is 42"]
    # The owner still continues its own task and context.
    follow = await last_answer(bridge, send("done", taskId=task_id, contextId=context_id), owner)
    assert follow["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    listed = await last_answer(
        bridge, a2a.make_request("ListTasks", {"contextId": context_id}, id=3), owner
    )
    assert [t["id"] for t in listed["result"]["tasks"]] == [task_id]


@pytest.mark.anyio
async def test_the_same_member_in_another_conversation_is_another_caller() -> None:
    """A context is available "in the conversation where they were created": the same
    person as a contact and as a member of a group are two callers."""

    bridge, agent = make_bridge()
    _, context_id = ids_of(await last_answer(bridge, send("ask: direct only"), ALICE))
    answer = await last_answer(bridge, send("again", contextId=context_id), GROUP_ALICE)
    assert answer["error"]["code"] == a2a.TASK_NOT_FOUND
    assert agent.memory[context_id] == ["ask: direct only"]


@pytest.mark.anyio
async def test_a_stream_of_another_caller_is_not_joined() -> None:
    """SendStreamingMessage and SubscribeToTask name contexts and tasks too: the other
    caller's stream ends at once with the unknown-task answer."""

    bridge, _ = make_bridge()
    events = [
        e
        async for e in bridge.stream(
            send("ask: streamed", method="SendStreamingMessage"), caller=ALICE
        )
    ]
    task_id = events[0]["result"]["task"]["id"]
    context_id = events[0]["result"]["task"]["contextId"]
    for request in (
        a2a.make_request("SubscribeToTask", {"id": task_id}, id=2),
        send("join", method="SendStreamingMessage", contextId=context_id),
    ):
        answers = [e async for e in bridge.stream(request, caller=BOB)]
        assert len(answers) == 1 and answers[0]["error"]["code"] == a2a.TASK_NOT_FOUND


@pytest.mark.anyio
async def test_service_rpc_callers_are_scoped_too() -> None:
    """Over Service RPC the caller is the signer (or an anonymous requester): a
    one-shot SendMessage that refers to another caller's task by referenceTaskIds is
    answered as for an unknown task, in the envelope's response."""

    bridge, agent = make_bridge()
    task_id, context_id = ids_of(await last_answer(bridge, send("ask: private"), ALICE))
    signer = SigningKey.generate().public_key
    for key in (signer, None):
        response = await rpc(bridge, send("peek", referenceTaskIds=[task_id]), key)
        assert response.ok and response.response["error"]["code"] == a2a.TASK_NOT_FOUND
    assert agent.memory[context_id] == ["ask: private"]
    # A signed requester's own one-shot task is not the conversation's either.
    own = await rpc(bridge, send("mine"), signer)
    assert own.ok
    rpc_task, _ = ids_of(own.response)
    got = await last_answer(bridge, a2a.make_request("GetTask", {"id": rpc_task}, id=4), ALICE)
    assert got["error"]["code"] == a2a.TASK_NOT_FOUND


async def rpc(bridge: A2aBridge, message: dict[str, Any], signer: PublicKey | None) -> Response:
    envelope = Request.parse(Request(protocol="a2a", request=message).to_json())
    answer = await bridge.rpc_handler(
        ServiceRequest(request_id="r", signer=signer, request=envelope, user_id=1)
    )
    return Response.parse(answer.to_json())


@contextlib.asynccontextmanager
async def group_of_three() -> AsyncIterator[tuple[ChatCore, ChatCore, str, str]]:
    """A group of alice (owner), bob and the bot serving the memory agent."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        for core in (alice, bob, bot):
            await core.start(service_requests=False)
        ids = sim.create_group("team", "alice", ["bob", "bot"])
        bridge, _ = make_bridge()
        ready = asyncio.Event()
        serving = asyncio.create_task(bot.serve_calls(1, {"a2a": bridge}, ready=ready))
        await ready.wait()
        try:
            yield alice, bob, f"#{ids[('alice', 1)]}", f"#{ids[('bob', 1)]}"
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


@pytest.mark.anyio
async def test_in_a_group_through_the_core_each_member_has_their_own_contexts() -> None:
    """End to end through the chat core: in a group, Bob sees Alice's contextId in the
    conversation (replies are ordinary messages), and his /_call naming it is answered
    as for an unknown task."""

    async with group_of_three() as (alice, bob, at_alice, at_bob):
        (reply,) = await alice.call(at_alice, "a2a", send("ask: 42"), member="bot", wait=20)
        assert reply.message is not None
        _, context_id = ids_of(reply.message)
        (answer,) = await bob.call(
            at_bob, "a2a", send("tell me", contextId=context_id), member="bot", wait=20
        )
        assert answer.message is not None
        assert answer.message["error"]["code"] == a2a.TASK_NOT_FOUND


def test_caller_store_names_only_the_callers_own_ids() -> None:
    """The reusable piece (CallerStore): a request that names an id the caller was not
    given, another caller's or one nobody has, gets the same unknown-task answer."""
    store = CallerStore()
    store.record(
        ALICE,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
            },
        },
    )
    assert store.check_request(ALICE, send("go", contextId="c-1")) is None
    foreign = store.check_request(BOB, send("go", contextId="c-1"))
    unknown = store.check_request(BOB, send("go", contextId="c-2"))
    assert foreign is not None and foreign == unknown
    assert foreign["error"]["code"] == a2a.TASK_NOT_FOUND
    assert store.check_request(BOB, send("go", referenceTaskIds=["t-1"])) == foreign
    assert store.check_request(BOB, send("go")) is None  # names nothing


@pytest.mark.anyio
async def test_caller_store_scoped_checks_then_records_each_answer() -> None:
    """CallerStore.scoped is what a bridge or a gateway wraps its upstream call in: a
    refused request never reaches the upstream, and each answer it passes on gives the
    caller the ids it names."""
    store = CallerStore()
    calls: list[dict[str, Any]] = []

    def upstream(request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async def answers() -> AsyncIterator[dict[str, Any]]:
            calls.append(request)
            task = {"id": "t-9", "contextId": "c-9", "status": {"state": "TASK_STATE_WORKING"}}
            yield {"jsonrpc": "2.0", "id": request["id"], "result": {"task": task}}

        return answers()

    first = send("hi")
    got = [a async for a in store.scoped(ALICE, first, lambda: upstream(first))]
    assert got[0]["result"]["task"]["id"] == "t-9"
    assert store.owner_of_context("c-9") == ALICE
    stolen = send("mine now", contextId="c-9")
    refused = [a async for a in store.scoped(BOB, stolen, lambda: upstream(stolen))]
    assert len(refused) == 1 and refused[0]["error"]["code"] == a2a.TASK_NOT_FOUND
    assert calls == [first]


@pytest.mark.anyio
async def test_caller_store_scoped_closes_the_upstream_when_left_early() -> None:
    """A stream left early (a reply that could not be sent) ends the upstream's stream
    too: scoped closes the iterator it was given."""
    store = CallerStore()
    closed: list[bool] = []

    async def events() -> AsyncIterator[dict[str, Any]]:
        try:
            for n in range(3):
                update = {"statusUpdate": {"taskId": f"t-{n}", "contextId": "c", "status": {}}}
                yield {"jsonrpc": "2.0", "id": 1, "result": update}
        finally:
            closed.append(True)

    answers = store.scoped(ALICE, send("go"), events)
    async for _ in answers:
        break
    await answers.aclose()  # type: ignore[attr-defined]
    assert closed == [True]
    assert store.owner_of_task("t-0") == ALICE and store.owner_of_task("t-1") is None


@pytest.mark.anyio
async def test_an_unsigned_rpc_requester_leaves_nothing_behind() -> None:
    """An unsigned Service RPC requester is a new caller each time: nothing it is given
    could be named again, so the bridge keeps nothing for it (the store does not grow
    with anonymous traffic), and its task is nobody's to name."""

    bridge, _ = make_bridge()
    response = await rpc(bridge, send("one-shot"), None)
    assert response.ok
    task_id, context_id = ids_of(response.response)
    assert bridge.callers.owner_of_task(task_id) is None
    assert bridge.callers.owner_of_context(context_id) is None
    signed = SigningKey.generate().public_key
    mine = await rpc(bridge, send("one-shot"), signed)
    signed_task, _ = ids_of(mine.response)
    owner = bridge.callers.owner_of_task(signed_task)
    assert owner is not None and owner.chat == f"rpc:{signed.encode()}"

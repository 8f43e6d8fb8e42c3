"""The chat transport through the core ("Chat transport" of the protocol text), on the simulator.

A caller core ``alice`` and bot cores ``bot`` and ``carol``; the bots answer
``/_call`` with :meth:`ChatCore.serve_calls`, the caller sends with
:meth:`ChatCore.call` and :meth:`ChatCore.call_stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from _chat import PING, World, serving, world
from _waiting import until
from simplex_rpc.adapter import CallRefused, ChatCore, IncomingCall
from simplex_rpc.adapter._chat import ReplySink
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.testing import CoreSimulator


@dataclass
class Recorder:
    """A ``/_call`` handler that records its calls and answers with a JSON-RPC result."""

    name: str
    calls: list[IncomingCall] = field(default_factory=list)

    async def __call__(self, call: IncomingCall, send: ReplySink) -> str:
        self.calls.append(call)
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": self.name})


def drain(stream: Any) -> list[dict[str, Any]]:
    """The chat items alice received so far: (text, quoted item id, sender kind)."""
    items = []
    while not stream._queue.empty():
        event = stream._queue.get_nowait()
        if isinstance(event, dict) and event.get("type") == "newChatItems":
            for item in event["chatItems"]:
                chat_item = item["chatItem"]
                items.append(
                    {
                        "text": chat_item["content"]["msgContent"]["text"],
                        "quoted": (chat_item.get("quotedItem") or {}).get("itemId"),
                    }
                )
    return items


async def send_text(core: ChatCore, chat: str, text: str) -> int:
    """Send ``text`` as a plain message (as a person or a hand-written client would)."""
    resp = await core.command(
        f"/_send {chat} json " + json.dumps([{"msgContent": {"type": "text", "text": text}}])
    )
    item_id: int = resp["chatItems"][0]["chatItem"]["meta"]["itemId"]
    return item_id


# -- direct and group ------------------------------------------------------------------


@pytest.mark.anyio
async def test_direct_chat_every_command_is_answered_with_a_quoting_reply(world: World) -> None:
    """In a direct chat the bot answers every command; each reply quotes the command."""

    bot = Recorder("bot")
    async with serving(world.bot, {"mcp": bot}):
        replies = await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        assert [r.message for r in replies] == [{"jsonrpc": "2.0", "id": 1, "result": "bot"}]
        assert replies[0].ends and replies[0].sender == "bot"
        call = bot.calls[0]
        assert (call.protocol, call.request, call.member) == ("mcp", PING, None)
        assert call.chat.startswith("@") and call.sender == "alice"
        assert call.caller.chat == call.chat and call.caller.member is None
        sent = drain(world.raw)
        assert sent and all(item["quoted"] is not None for item in sent)


@pytest.mark.anyio
async def test_group_broadcast_is_answered_by_every_serving_member(world: World) -> None:
    """A command without a mention is a broadcast: each member that serves the protocol answers."""

    bot, carol = Recorder("bot"), Recorder("carol")
    async with serving(world.bot, {"mcp": bot}), serving(world.carol, {"mcp": carol}):
        replies = await world.alice.call(f"#{world.group}", "mcp", PING, wait=1.5)
        assert sorted(r.sender for r in replies) == ["bot", "carol"]
        assert all(r.ends for r in replies)
        assert len(bot.calls) == len(carol.calls) == 1
        assert bot.calls[0].caller.member is not None
        assert bot.calls[0].caller.chat == bot.calls[0].chat


@pytest.mark.anyio
async def test_group_mention_is_answered_by_the_mentioned_member_only(world: World) -> None:
    """A command with a mention is answered by the mentioned member; another member's
    mention is ignored."""

    bot, carol = Recorder("bot"), Recorder("carol")
    async with serving(world.bot, {"mcp": bot}), serving(world.carol, {"mcp": carol}):
        replies = await world.alice.call(f"#{world.group}", "mcp", PING, member="bot", wait=10)
        assert [r.sender for r in replies] == ["bot"]
        assert bot.calls[0].member == "bot"
        await asyncio.sleep(0.2)  # the behaviour under test: carol does not answer
        assert carol.calls == []
        assert [i["text"] for i in drain(world.raw)].count(replies[0].text) == 1


@pytest.mark.anyio
async def test_a_broadcast_does_not_end_with_the_declared_owners_answer() -> None:
    """A group's declaration states that its owners serve the protocol, but "Other
    members can serve a protocol in a group without a declaration" and "A caller collects
    every reply until its wait ends": the owner's answer does not end the broadcast (issue
    20 changed this test, which pinned the early end). A caller who wants to stop at the
    owner's answer says so with ``until``."""

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        for core in (alice, bot):
            await core.start(service_requests=False)
        prefs = {"protocols": {"mcp": {"versions": ["2026-07-28"], "transports": {"chat": True}}}}
        ids = sim.create_group("shop", "bot", ["alice"], preferences=prefs)
        group = f"#{ids[('alice', 1)]}"
        async with serving(bot, {"mcp": Recorder("bot")}):
            stream = alice.call_stream(group, "mcp", PING, wait=600)
            first = await anext(stream)
            assert first.sender == "bot" and first.ends
            with pytest.raises(TimeoutError):  # still collecting after the owner's answer
                async with asyncio.timeout(0.3):
                    await anext(stream)
            await stream.aclose()

            def owner_answered(replies: tuple[Any, ...]) -> bool:
                return any(r.sender == "bot" and r.ends for r in replies)

            async with asyncio.timeout(60):  # ends at once, long before the wait
                replies = await alice.call(group, "mcp", PING, wait=600, until=owner_answered)
            assert [r.sender for r in replies] == ["bot"]


# -- replies ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stream_replies_arrive_in_order_each_quoting_the_command() -> None:
    """Several replies go in order, each quoting the command; the binding's last message
    ends the answer, and call_stream yields each as it arrives."""

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        for step in range(3):
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": step},
            }
            await send(json.dumps(note))
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})

    async with world() as w, serving(w.bot, {"mcp": handler}):
        seen = [r async for r in w.alice.call_stream(f"@{w.direct}", "mcp", PING, wait=10)]
        steps = [r.message["params"]["progress"] for r in seen[:3] if r.message]
        assert steps == [0, 1, 2] and seen[3].ends and len(seen) == 4
        replies = drain(w.raw)  # what alice's core received: the four replies
        assert [r["text"] for r in replies] == [r.text for r in seen]
        quoted = {r["quoted"] for r in replies}
        assert len(quoted) == 1 and None not in quoted


@pytest.mark.anyio
async def test_a_reply_too_large_is_replaced_with_the_binding_error() -> None:
    """A reply over 15,602 bytes of message JSON is replaced with -32603."""

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": "x" * 20_000})

    async with world() as w, serving(w.bot, {"mcp": handler}):
        (reply,) = await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
        assert reply.message is not None and reply.message["error"]["code"] == -32603
        assert reply.message["id"] == 1 and reply.ends


@pytest.mark.anyio
async def test_nothing_is_sent_after_a_stream_reply_is_replaced() -> None:
    """For a stream, nothing more is sent after the size replacement."""

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        event = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": {"big": "x" * 20_000}}}
        await send(json.dumps(event))
        await send(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"later": True}}))
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"last": True}})

    request = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {}}

    async with world() as w, serving(w.bot, {"a2a": handler}):
        replies = await w.alice.call(f"@{w.direct}", "a2a", request, wait=1.5)
        assert len(replies) == 1 and replies[0].message is not None
        assert replies[0].message["error"]["code"] == -32603


@pytest.mark.anyio
async def test_a_call_that_does_not_parse_gets_the_parse_error_and_other_text_is_left_alone() -> (
    None
):
    """A /_call that does not parse gets -32700 as a quoting reply; other text gets nothing."""

    async with world() as w:
        bot = Recorder("bot")
        async with serving(w.bot, {"mcp": bot}):
            chat = f"@{w.direct}"
            await send_text(w.alice, chat, "hello bot")
            bad = await send_text(w.alice, chat, '/_call mcp {"jsonrpc": ')
            replies = await until(
                lambda: [i for i in drain(w.raw) if i["quoted"] == bad],
                "the reply to the broken /_call",
                within=10,
            )
            (reply,) = replies
            message = json.loads(reply["text"])
            assert message["error"]["code"] == -32700 and message["id"] is None
            assert bot.calls == [] and w.sim.stats.messages == 3


@pytest.mark.anyio
async def test_a_broken_command_for_another_member_is_left_to_that_member() -> None:
    """In a group, a /_call that does not parse but mentions another member is not
    answered by this bot; one that mentions it gets the parse error."""

    async with world() as w, serving(w.bot, {"mcp": Recorder("bot")}):
        chat = f"#{w.group}"
        other = await send_text(w.alice, chat, '/_call @carol mcp {"broken": ')
        mine = await send_text(w.alice, chat, '/_call @bot mcp {"broken": ')
        received: list[dict[str, Any]] = []

        def answered() -> bool:
            received.extend(drain(w.raw))
            return any(i["quoted"] == mine for i in received)

        await until(answered, "the reply to the /_call mentioning bot", within=10)
        await asyncio.sleep(0.2)  # the behaviour under test: no reply to carol's
        received += drain(w.raw)
        (reply,) = [i for i in received if i["quoted"] == mine]
        assert json.loads(reply["text"])["error"]["code"] == -32700
        assert not [i for i in received if i["quoted"] == other]


@pytest.mark.anyio
async def test_a_failing_or_late_handler_gets_the_internal_error_without_its_text(
    world: World,
) -> None:
    """A handler that raises is answered -32603 without its exception text; one past
    handler_timeout is cancelled and answered the same way."""
    cancelled = []

    async def failing(call: IncomingCall, send: ReplySink) -> str:
        raise RuntimeError("secret detail")

    async def late(call: IncomingCall, send: ReplySink) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return ""

    async with serving(world.bot, {"mcp": failing}):
        (reply,) = await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        assert reply.message is not None and reply.message["error"]["code"] == -32603
        assert "secret" not in reply.text
    async with serving(world.bot, {"mcp": late}, handler_timeout=0.2):
        (reply,) = await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        assert reply.message is not None and reply.message["error"]["code"] == -32603
        assert cancelled == [True]


@pytest.mark.anyio
async def test_each_command_is_answered_exactly_once(world: World) -> None:
    """The same chat item delivered twice is answered once."""

    bot = Recorder("bot")
    async with serving(world.bot, {"mcp": bot}):
        captured = world.bot.events()
        await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        event = await anext(captured)
        captured.close()
        await world.sim.send_event("bot", event)
        await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        assert len(bot.calls) == 2


# -- refusals before sending -------------------------------------------------------------


@pytest.mark.anyio
async def test_the_caller_refuses_before_sending(world: World) -> None:
    """Refused before sending: a command that does not fit one message; an A2A request
    with a credential in a group ("A request with a credential MUST NOT be sent in a
    group"); a mention in a direct chat or of an unknown member."""
    credential = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "a2a-service-parameters": {"A2A-Version": "1.0", "Authorization": "Bearer abc"},
        "params": {},
    }

    with pytest.raises(CallRefused, match="does not fit"):
        await world.alice.call(f"@{world.direct}", "mcp", {"x": "y" * 16_000})
    with pytest.raises(CallRefused, match="credential") as info:
        await world.alice.call(f"#{world.group}", "a2a", credential)
    assert "Bearer" not in str(info.value)
    with pytest.raises(CallRefused, match="direct chat"):
        await world.alice.call(f"@{world.direct}", "mcp", PING, member="bot")
    with pytest.raises(CallRefused, match="no member"):
        await world.alice.call(f"#{world.group}", "mcp", PING, member="nobody")
    with pytest.raises(SimplexRpcError, match="ChatRef"):
        await world.alice.call("bot", "mcp", PING)
    assert world.sim.stats.messages == 0
    # In a direct chat the credential may go.
    assert await world.alice.call(f"@{world.direct}", "a2a", credential, wait=0.1) == ()
    assert world.sim.stats.messages == 1


# -- hostile events --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hostile_events_never_crash_the_bot_nor_get_answered_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every field of an event can be missing, of the wrong type or hostile: the bot logs
    and goes on."""

    async with world() as w:
        bot = Recorder("bot")
        async with serving(w.bot, {"mcp": bot}):
            captured = w.bot.events()
            await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
            good = await anext(captured)
            captured.close()
            item = good["chatItems"][0]

            def variant(**changes: Any) -> dict[str, Any]:
                copy = json.loads(json.dumps(item))
                chat_item = copy["chatItem"]
                chat_item["meta"]["itemId"] = changes.pop("item_id", 1000)
                for key, value in changes.items():
                    if key == "text":
                        chat_item["content"]["msgContent"]["text"] = value
                    else:
                        chat_item[key] = value
                return {"type": "newChatItems", "user": good["user"], "chatItems": [copy]}

            no_text = variant(item_id=1001)
            del no_text["chatItems"][0]["chatItem"]["content"]["msgContent"]["text"]
            hostile = [
                no_text,
                variant(item_id=1002, quotedItem={"itemId": 99_999}, text="hi"),
                variant(item_id=1003, mentions=[1, 2], text="/_call @bot mcp {}"),
                variant(item_id=1004, text="/_call mcp " + "[" * 100_000),
                variant(item_id=1005, text='/_call mcp {"a":"\ud800"}'),
                {**good, "user": {"userId": 2}},
                {"type": "newChatItems", "user": good["user"], "chatItems": "nope"},
                {"type": "newChatItems", "user": good["user"], "chatItems": [None, 1, {}]},
            ]
            with caplog.at_level(logging.DEBUG, logger="simplex_rpc.adapter"):
                for event in hostile:
                    await w.sim.send_event("bot", event)
                await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
            # Answered: the two good calls, and item 1003 (a direct chat answers
            # every command; its broken mention map does not matter there).
            assert 1003 in {c.item_id for c in bot.calls}
            assert len(bot.calls) == 3
            assert "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[" not in caplog.text


@pytest.mark.anyio
async def test_commands_of_another_user_of_the_core_are_ignored() -> None:
    """serve_calls answers its own user's commands only, as serve does."""

    async with (
        CoreSimulator(users=(1, 2)) as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
    ):
        for core in (alice, bot):
            await core.start(service_requests=False)
        to_user2, _ = sim.connect("alice", ("bot", 2))
        recorder = Recorder("bot")
        async with serving(bot, {"mcp": recorder}):
            assert await alice.call(f"@{to_user2}", "mcp", PING, wait=0.5) == ()
            assert recorder.calls == []


# -- review of issue 10 -----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_broken_call_whose_mention_is_a_quoted_name_gets_the_parse_error() -> None:
    """A /_call that does not parse gets -32700 (MCP) whatever its mention: a quoted
    name (@'b o t', a name with spaces) is skipped by parse_call's rule to find the
    protocol."""

    async with world() as w, serving(w.bot, {"mcp": Recorder("bot")}):
        bad = await send_text(w.alice, f"@{w.direct}", "/_call @'b o t' mcp {bad json")
        replies = await until(
            lambda: [i for i in drain(w.raw) if i["quoted"] == bad],
            "the reply to the broken /_call",
            within=10,
        )
        (reply,) = replies
        assert json.loads(reply["text"])["error"]["code"] == -32700


@pytest.mark.anyio
async def test_handlers_that_are_not_async_functions_are_refused_before_anything_runs(
    world: World,
) -> None:
    """serve_calls takes an async handler(call, send) -> str or a bridge for each
    protocol: anything else is refused with the library's error naming the protocol,
    before the bot subscribes to events."""

    def sync_handler(call: IncomingCall, send: ReplySink) -> str:
        return "{}"

    before = len(world.bot._subscribers)
    with pytest.raises(SimplexRpcError, match=r"handlers\['mcp'\].*not an async function"):
        await world.bot.serve_calls(1, {"mcp": sync_handler})  # type: ignore[dict-item]
    with pytest.raises(SimplexRpcError, match=r"handlers\['x'\].*got int"):
        await world.bot.serve_calls(1, {"mcp": Recorder("bot"), "x": 42})  # type: ignore[dict-item]
    assert len(world.bot._subscribers) == before


@pytest.mark.anyio
async def test_user_and_item_ids_are_integers_of_the_core_never_booleans(world: World) -> None:
    """userId and itemId are Int64 ids of the core (TYPES.md): a JSON true is not user 1,
    and an item id outside 1 <= id < 2**63 is not a chat item; neither is answered."""

    bot = Recorder("bot")
    async with serving(world.bot, {"mcp": bot}):
        captured = world.bot.events()
        await world.alice.call(f"@{world.direct}", "mcp", PING, wait=10)
        good = await anext(captured)
        captured.close()

        def variant(item_id: Any, user: Any = None) -> dict[str, Any]:
            event = json.loads(json.dumps(good))
            event["chatItems"][0]["chatItem"]["meta"]["itemId"] = item_id
            if user is not None:
                event["user"] = {"userId": user}
            return event

        for event in (
            variant(2000, user=True),
            variant(True),
            variant(2**63),
            variant(2**70),
            variant(0),
            variant(-5),
            variant(2001),  # the control: answered, after every event before it
        ):
            await world.sim.send_event("bot", event)
        await until(lambda: len(bot.calls) >= 2, "the control's call", within=10)
        assert [c.item_id for c in bot.calls][1:] == [2001]


@pytest.mark.anyio
async def test_a_stalled_bot_keeps_reading_and_bounds_its_backlog(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While every handler is busy the bot keeps reading events (so the core's event
    buffer never overflows unseen): commands wait in a bounded backlog, and those
    beyond it are counted in one log line, not answered."""
    from simplex_rpc.adapter._chat import _CallServer

    release = asyncio.Event()

    class Gated:
        """An event stream that yields ``events``, then signals it was read to the end."""

        def __init__(self, events: list[dict[str, Any]]) -> None:
            self.events = events
            self.read = asyncio.Event()

        def __aiter__(self) -> Gated:
            return self

        async def __anext__(self) -> dict[str, Any]:
            if self.events:
                return self.events.pop(0)
            self.read.set()
            await asyncio.Event().wait()
            raise StopAsyncIteration

        def close(self) -> None:
            pass

    async with world() as w:
        answered: list[int] = []

        async def stalled(call: IncomingCall, send: ReplySink) -> str:
            await release.wait()
            answered.append(call.item_id)
            return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})

        captured = w.bot.events()
        await send_text(w.alice, f"@{w.direct}", "hello")
        good = await anext(captured)
        captured.close()

        def command(item_id: int) -> dict[str, Any]:
            event = json.loads(json.dumps(good))
            chat_item = event["chatItems"][0]["chatItem"]
            chat_item["meta"]["itemId"] = item_id
            chat_item["content"]["msgContent"]["text"] = (
                '/_call mcp {"jsonrpc":"2.0","id":1,"method":"ping"}'
            )
            return event

        server = _CallServer(
            w.bot, 1, {"mcp": stalled}, concurrency=1, handler_timeout=60, backlog=2
        )
        stream = Gated([command(i) for i in range(3000, 3006)])
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            task = asyncio.create_task(server.run(stream))
            async with asyncio.timeout(10):
                await stream.read.wait()  # every event read while the handler stalls
            release.set()
            await until(lambda: len(answered) >= 3, "three answers", within=10)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # One running, two in the backlog; the other three not answered.
        assert answered == [3000, 3001, 3002]
        (line,) = [r.getMessage() for r in caplog.records if "not answered" in r.getMessage()]
        assert line.startswith("3 /_call command(s) not answered")


@pytest.mark.anyio
async def test_a_handler_failure_is_logged_by_type_and_excerpt_the_traceback_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A traceback can carry the request's content: the ERROR line names the exception
    type with a bounded excerpt of its text; the traceback is logged at DEBUG only."""

    async def failing(call: IncomingCall, send: ReplySink) -> str:
        raise RuntimeError("request content " * 100)

    async with world() as w, serving(w.bot, {"mcp": failing}):
        with caplog.at_level(logging.DEBUG, logger="simplex_rpc.adapter"):
            (reply,) = await w.alice.call(f"@{w.direct}", "mcp", PING, wait=10)
        assert reply.message is not None and reply.message["error"]["code"] == -32603
        (error,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
        # The library's log adapter writes a traceback into the message, redacted.
        assert "RuntimeError" in error.getMessage() and "Traceback" not in error.getMessage()
        assert len(error.getMessage()) < 300
        traced = [r for r in caplog.records if "Traceback" in r.getMessage()]
        assert traced and all(r.levelno == logging.DEBUG for r in traced)

"""Events out of order across the pool's connections, and where order matters.

The chat core gives each event to one connection, whichever takes it first (simplex-chat
``apps/simplex-chat/Server.hs``: every client's ``output`` thread reads the core's one
``outputQ``), so two events taken by two connections can reach ``ChatCore`` in the
other order. The rules pinned here (docs/adapter.md, "Order across connections"):

* a ``/_call`` caller orders the replies by the core's chat item ids (one sequence
  for every item the core stores, so one sender's replies are numbered in the order
  sent): the replies come out in that order, and a reply that ends the answer does not
  end the wait before an earlier one that another connection carries. A reply is held
  only while an id between the call's and its own is missing (at most 0.1 s): with
  none missing it goes at once;
* ``serve`` answers each request once, whatever connection carries it and in whatever
  order (requests are independent: matched by ``requestId``, the repeats of one known
  by it);
* ``serve_calls`` answers each ``/_call`` once, in whatever order and on whatever
  connection it comes (each answer quotes its own item: ``(chat, itemId)``).

Each against a scripted core of two connections (a bot that calls and serves: its
answers have a connection of their own), the test choosing which connection carries
which event.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from _scripted_core import ScriptedCore, request_event, scripted_serving
from _waiting import until
from simplex_rpc.adapter import IncomingCall, ServiceRequest, _chat
from simplex_rpc.adapter._chat import ReplySink

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
CONTACT = {"contactId": 5, "localDisplayName": "bot", "profile": {"displayName": "bot"}}
DIRECT = {"type": "direct", "contact": CONTACT}


def _frame(corr_id: str, resp: dict[str, Any]) -> str:
    return json.dumps({"corrId": corr_id, "resp": resp})


def _received(item_id: int, text: str, quoted: int | None = None) -> dict[str, Any]:
    """A ``newChatItems`` event: one text the contact ``bot`` sent to user 1."""
    chat_item: dict[str, Any] = {
        "chatDir": {"type": "directRcv"},
        "meta": {"itemId": item_id},
        "content": {"type": "rcvMsgContent", "msgContent": {"type": "text", "text": text}},
    }
    if quoted is not None:
        chat_item["quotedItem"] = {"itemId": quoted}
    return {
        "type": "newChatItems",
        "user": {"userId": 1},
        "chatItems": [{"chatInfo": DIRECT, "chatItem": chat_item}],
    }


async def _two_connections(fake: ScriptedCore) -> None:
    await until(lambda: len(fake.connections) >= 2, "serve's answers' own connection")


async def _echo(request: ServiceRequest) -> Any:
    return request.request.request


def _active_user(corr_id: str, cmd: str) -> str:
    return _frame(corr_id, {"type": "activeUser", "user": {"userId": 1}})


@pytest.mark.anyio
async def test_a_callers_replies_come_in_the_cores_order_whatever_connection_carries_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bot's progress notification (item 11) and its result (item 12, which ends the
    answer) reach the caller in the other order, on two connections: the caller yields the
    notification first, and the result does not end the wait before it."""
    # The gap (item 11) is what holds item 12, not a time: a window of a minute is not
    # waited out, since item 11 fills the gap.
    monkeypatch.setattr(_chat, "_REORDER_WINDOW", 60.0)
    progress = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    )
    result = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})

    async with scripted_serving(_echo) as (fake, core, _):
        await _two_connections(fake)
        fake.raw["/user"] = _active_user
        fake.raw["/_send"] = lambda corr_id, cmd: _frame(
            corr_id,
            {
                "type": "newChatItems",
                "user": {"userId": 1},
                "chatItems": [{"chatInfo": DIRECT, "chatItem": {"meta": {"itemId": 10}}}],
            },
        )
        watch = core.events()
        replies = asyncio.create_task(core.call("@5", "mcp", PING, wait=30))
        await _call_sent(fake)
        await fake.event(_received(12, result, quoted=10), connection=1)
        while (await anext(watch)).get("type") != "newChatItems":
            pass  # the result was read first
        await fake.event(_received(11, progress, quoted=10), connection=0)
        got = await replies
        assert [r.text for r in got] == [progress, result]
        assert [r.ends for r in got] == [False, True]


@pytest.mark.anyio
async def test_serve_answers_each_request_once_whatever_order_and_connection() -> None:
    """Requests r1..r4 arrive in the reverse order, alternating between the two
    connections, and each is reported again on the other one: each is answered once."""

    async with scripted_serving(_echo) as (fake, _, _task):
        await _two_connections(fake)
        ids = ["r4", "r3", "r2", "r1"]
        for n, request_id in enumerate(ids):
            await fake.event(request_event(request_id, {"n": request_id}), connection=n % 2)
        for n, request_id in enumerate(ids):
            await fake.event(request_event(request_id, {"n": request_id}), connection=1 - n % 2)
        await fake.event(request_event("last", {"n": "last"}), connection=0)
        answered = await fake.wait_answers(5)
        # The answers go out in order on one connection: a second answer to any of
        # r1..r4 would have come before the one to "last".
        assert Counter(answered) == Counter([*ids, "last"])
        for request_id in ids:
            assert fake.answers[request_id] == [{"response": {"n": request_id}}]


@pytest.mark.anyio
async def test_serve_calls_answers_each_call_once_whatever_order_and_connection() -> None:
    """/_call items 23, 22, 21 arrive in the reverse order, on both connections, each
    twice: each is answered once, quoting its own item."""

    async def handler(call: IncomingCall, send: ReplySink) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {}})

    async with scripted_serving(_echo) as (fake, core, _task):
        await _two_connections(fake)
        fake.raw["/user"] = _active_user
        fake.raw["/_send"] = lambda corr_id, cmd: _frame(
            corr_id, {"type": "newChatItems", "user": {"userId": 1}, "chatItems": []}
        )
        ready = asyncio.Event()
        calls = asyncio.create_task(core.serve_calls(1, {"mcp": handler}, ready=ready))
        await ready.wait()
        items = [23, 22, 21]
        for round_ in range(2):
            for n, item_id in enumerate(items):
                text = "/_call mcp " + json.dumps({**PING, "id": item_id})
                await fake.event(_received(item_id, text), connection=(n + round_) % 2)
        quoted: Counter[int] = Counter()
        while sum(quoted.values()) < 3:
            cmd = await asyncio.wait_for(fake.commands.get(), 10)
            if cmd.startswith("/_send "):
                sent = json.loads(cmd.split(" json ", 1)[1])
                quoted[sent[0]["quotedItemId"]] += 1
        # One more /_call, answered after any second answer would have been sent.
        await fake.event(_received(24, "/_call mcp " + json.dumps(PING)), connection=0)
        while True:
            cmd = await asyncio.wait_for(fake.commands.get(), 10)
            if cmd.startswith("/_send "):
                sent = json.loads(cmd.split(" json ", 1)[1])
                quoted[sent[0]["quotedItemId"]] += 1
                if sent[0]["quotedItemId"] == 24:
                    break
        assert quoted == Counter({21: 1, 22: 1, 23: 1, 24: 1})
        calls.cancel()
        await asyncio.gather(calls, return_exceptions=True)


def _send_answer(corr_id: str, cmd: str) -> str:
    return _frame(
        corr_id,
        {
            "type": "newChatItems",
            "user": {"userId": 1},
            "chatItems": [{"chatInfo": DIRECT, "chatItem": {"meta": {"itemId": 10}}}],
        },
    )


async def _call_sent(fake: ScriptedCore) -> None:
    await until(
        lambda: "/_send" in [c.split(" ", 1)[0] for c in list(fake.commands._queue)],
        "the call's /_send",
    )


@pytest.mark.anyio
async def test_a_reply_with_no_id_missing_before_it_is_not_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call is item 10; an event of another chat is item 11 and the result item 12:
    no id is missing, so the result ends the call at once (a window of a minute would
    otherwise be waited out), on two connections."""
    monkeypatch.setattr(_chat, "_REORDER_WINDOW", 60.0)
    result = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})
    other = _received(11, "hello from another chat")
    other["chatItems"][0]["chatInfo"] = {"type": "direct", "contact": {**CONTACT, "contactId": 6}}

    async with scripted_serving(_echo) as (fake, core, _):
        await _two_connections(fake)
        fake.raw["/user"] = _active_user
        fake.raw["/_send"] = _send_answer
        replies = asyncio.create_task(core.call("@5", "mcp", PING, wait=120))
        await _call_sent(fake)
        await fake.event(other, connection=1)
        await fake.event(_received(12, result, quoted=10), connection=0)
        async with asyncio.timeout(30):  # generous; the rule is "at once"
            got = await replies
        assert [r.text for r in got] == [result]


@pytest.mark.anyio
async def test_a_reply_whose_gap_never_fills_is_given_out_after_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An id the core used without an event reaching this ChatCore (item 11 here) leaves a
    gap no event fills: the reply behind it is held for the window only, then ends the
    call."""
    monkeypatch.setattr(_chat, "_REORDER_WINDOW", 0.2)
    result = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})

    async with scripted_serving(_echo) as (fake, core, _):
        await _two_connections(fake)
        fake.raw["/user"] = _active_user
        fake.raw["/_send"] = _send_answer
        replies = asyncio.create_task(core.call("@5", "mcp", PING, wait=120))
        await _call_sent(fake)
        await fake.event(_received(12, result, quoted=10), connection=1)
        async with asyncio.timeout(30):
            got = await replies
        assert [r.text for r in got] == [result] and got[0].ends

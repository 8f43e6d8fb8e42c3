"""A minimal chat bot that speaks the chat core's WebSocket API with ``websockets`` alone.

It uses no code of simplex-rpc: it stands for a bot written in any language,
tested against ``simplex-rpc simulator --world``. Two roles:

* ``host URL``: starts its core, waits for a contact request to its address and
  accepts it, answers the first message with a quoted reply, then creates a
  group, invites the contact, and once it joined says hello there and waits for
  a quoted reply to that;
* ``guest URL LINK``: starts its core, plans and connects to LINK, says hello,
  waits for the quoted reply, joins the group it is invited to and answers the
  host's group message with a quoted reply.

Each event and response it sees is printed as one JSON line
``{"role", "step", "type"}``; the last line is ``{"role", "step": "done"}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from typing import Any

from websockets.asyncio.client import connect


class Bot:
    def __init__(self, ws: Any, role: str) -> None:
        self.ws = ws
        self.role = role
        self.ids = itertools.count(1)
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def say(self, step: str, kind: str) -> None:
        print(json.dumps({"role": self.role, "step": step, "type": kind}), flush=True)

    async def read(self) -> None:
        async for text in self.ws:
            frame = json.loads(text)
            corr = frame.get("corrId")
            if corr in self.waiting:
                self.waiting.pop(corr).set_result(frame["resp"])
            else:
                await self.events.put(frame["resp"])

    async def cmd(self, step: str, command: str) -> dict[str, Any]:
        corr = str(next(self.ids))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[corr] = future
        await self.ws.send(json.dumps({"corrId": corr, "cmd": command}))
        resp = await future
        self.say(step, resp["type"])
        if resp["type"] == "chatCmdError":
            raise SystemExit(f"{self.role}: {command!r} failed: {resp}")
        return resp

    async def wait(self, step: str, kind: str) -> dict[str, Any]:
        while True:
            event = await self.events.get()
            self.say(step, event["type"])
            if event["type"] == kind:
                return event


def text_of(event: dict[str, Any]) -> str:
    return str(event["chatItems"][0]["chatItem"]["content"]["msgContent"]["text"])


def item_id(event: dict[str, Any]) -> int:
    return int(event["chatItems"][0]["chatItem"]["meta"]["itemId"])


def quoted_id(event: dict[str, Any]) -> int | None:
    quote = event["chatItems"][0]["chatItem"].get("quotedItem")
    return None if quote is None else quote.get("itemId")


def reply(to: int, text: str) -> str:
    return json.dumps([{"msgContent": {"type": "text", "text": text}, "quotedItemId": to}])


async def host(bot: Bot) -> None:
    await bot.cmd("start", "/_start main=on")
    user = (await bot.cmd("user", "/user"))["user"]["userId"]
    request = await bot.wait("request", "receivedContactRequest")
    await bot.cmd("accept", f"/_accept {request['contactRequest']['contactRequestId']}")
    contact = (await bot.wait("connected", "contactConnected"))["contact"]["contactId"]
    hello = await bot.wait("direct", "newChatItems")
    assert text_of(hello) == "hello host", hello
    await bot.cmd("direct-reply", f"/_send @{contact} json {reply(item_id(hello), 'hello guest')}")
    answer = await bot.wait("direct", "newChatItems")
    assert text_of(answer) == "thanks", answer

    group = await bot.cmd("group", f'/_group {user} {{"displayName":"team","fullName":""}}')
    gid = group["groupInfo"]["groupId"]
    await bot.cmd("invite", f"/_add #{gid} {contact} member")
    await bot.wait("joined", "joinedGroupMember")
    sent = await bot.cmd("group-hello", f"/_send #{gid} text welcome to the group")
    mine = int(sent["chatItems"][0]["chatItem"]["meta"]["itemId"])
    got = await bot.wait("group", "newChatItems")
    assert text_of(got) == "glad to be here" and quoted_id(got) == mine, got
    member = got["chatItems"][0]["chatItem"]["chatDir"]["groupMember"]["memberProfile"]
    assert member["displayName"] == "Guest Bot", member
    members = await bot.cmd("members", f"/_members #{gid}")
    assert [m["memberProfile"]["displayName"] for m in members["group"]["members"]] == ["Guest Bot"]


async def guest(bot: Bot, link: str) -> None:
    await bot.cmd("start", "/_start main=on")
    user = (await bot.cmd("user", "/user"))["user"]["userId"]
    plan = await bot.cmd("plan", f"/_connect plan {user} {link}")
    assert plan["connectionPlan"]["contactAddressPlan"]["type"] == "ok", plan
    await bot.cmd("connect", f"/_connect {user} {link}")
    connected = await bot.wait("connected", "contactConnected")
    contact = connected["contact"]["contactId"]
    assert connected["contact"]["profile"]["displayName"] == "Host Bot", connected
    sent = await bot.cmd("direct-hello", f"/_send @{contact} text hello host")
    mine = int(sent["chatItems"][0]["chatItem"]["meta"]["itemId"])
    answer = await bot.wait("direct", "newChatItems")
    assert text_of(answer) == "hello guest" and quoted_id(answer) == mine, answer
    await bot.cmd("direct-thanks", f"/_send @{contact} text thanks")

    invitation = await bot.wait("invited", "receivedGroupInvitation")
    gid = invitation["groupInfo"]["groupId"]
    await bot.cmd("join", f"/_join #{gid}")
    await bot.wait("joined", "userJoinedGroup")
    hello = await bot.wait("group", "newChatItems")
    assert text_of(hello) == "welcome to the group", hello
    await bot.cmd("group-reply", f"/_send #{gid} json {reply(item_id(hello), 'glad to be here')}")


async def main(role: str, url: str, link: str | None) -> None:
    async with connect(url, max_size=None) as ws:
        bot = Bot(ws, role)
        reader = asyncio.create_task(bot.read())
        async with asyncio.timeout(60):
            if role == "host":
                await host(bot)
            else:
                assert link is not None
                await guest(bot, link)
        bot.say("done", "done")
        reader.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))

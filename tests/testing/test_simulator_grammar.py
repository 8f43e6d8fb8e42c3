"""The simulator accepts the forms the chat core's parser accepts, and answers the rest
as the core answers an unknown command.

The parser is ``chatCommandP`` in simplex-chat's
``src/Simplex/Chat/Library/Commands.hs``; its lines are quoted in each test.
Every alternative runs under ``choice = A.choice . map (\\p -> p <* A.takeWhile
(== ' ') <* A.endOfInput)`` and ``parseChatCommand`` first drops trailing
white space, so a command may end in spaces. A command the parser rejects is
answered ``chatCmdError`` with ``commandError`` and the parser's message
(``chatCmdError :: String -> ...``; attoparsec's ``A.choice`` fails last on
``empty``: "Failed reading: empty"). The WebSocket server
(``apps/simplex-chat/Server.hs``, ``receive``) answers a frame that does not
decode as ``{"corrId": text, "cmd": text}`` with ``sendError Nothing Nothing
"invalid request"``: a ``chatCmdError`` without ``corrId``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from _raw_core import RawCore, raw_core
from simplex_rpc.testing import CoreSimulator

UNKNOWN = {
    "type": "chatCmdError",
    "chatError": {
        "type": "error",
        "errorType": {"type": "commandError", "message": "Failed reading: empty"},
    },
}


def text_of(resp: dict[str, Any]) -> list[str]:
    return [i["chatItem"]["meta"]["itemText"] for i in resp["chatItems"]]


def check_frames(frames: list[tuple[str, Any]]) -> None:
    """Every answer is core-shaped: each frame checks against simplex-chat 7.0.2's types
    (the checker of tests/_records.py), when the package is installed."""
    try:
        from _records import check_frame, checker
    except pytest.skip.Exception:  # pragma: no cover - simplex-chat not installed
        return
    check = checker()
    for i, (who, frame) in enumerate(frames):
        check_frame(check, frame, f"frame {i} to {who}")
    assert check.errors == [], "\n".join(check.errors[:20])


@asynccontextmanager
async def world() -> AsyncIterator[tuple[CoreSimulator, RawCore, RawCore, dict[str, int]]]:
    """``(sim, alice, bob, ids)`` with alice and bob contacts and a group of alice (owner)
    and bob, both cores started; after the block, every frame they received is checked."""
    frames: list[tuple[str, Any]] = []
    async with CoreSimulator() as sim:
        a_id, b_id = sim.connect("alice", "bob")
        groups = sim.create_group("team", "alice", ["bob"])
        ids = {
            "bob@alice": a_id,
            "alice@bob": b_id,
            "g@alice": groups[("alice", 1)],
            "g@bob": groups[("bob", 1)],
        }
        async with (
            raw_core(sim.url_for("alice"), "alice", frames) as alice,
            raw_core(sim.url_for("bob"), "bob", frames) as bob,
        ):
            await alice.ok("/_start", "chatStarted")
            await bob.ok("/_start", "chatStarted")
            yield sim, alice, bob, ids
    check_frames(frames)


@pytest.mark.anyio
async def test_u_is_user() -> None:
    """``("/user" <|> "/u") $> ShowActiveUser``."""

    async with world() as (_sim, alice, _bob, _ids):
        user = await alice.ok("/user", "activeUser")
        assert await alice.ok("/u", "activeUser") == user
        assert await alice.ok("/u  ", "activeUser") == user  # trailing spaces


@pytest.mark.anyio
async def test_send_takes_live_ttl_and_the_text_form() -> None:
    """``"/_send " *> (APISendMessages <$> sendRefP <*> liveMessageP <*> sendMessageTTLP <*>
    (" json " *> jsonP <|> " text " *> composedMessagesTextP))`` with ``liveMessageP = " live="
    *> onOffP <|> pure False`` and ``sendMessageTTLP = " ttl=" *> ((Just <$> A.decimal) <|>
    ("default" $> Nothing)) <|> pure Nothing``; ``composedMessagesTextP`` makes one text message
    of the rest of the line (``mcTextP = MCText . safeDecodeUtf8 <$> A.takeByteString``)."""

    async with world() as (_sim, alice, bob, ids):
        to_bob = ids["bob@alice"]
        forms = {
            f"/_send @{to_bob} live=off json "
            + json.dumps([{"msgContent": {"type": "text", "text": "a"}}]): "a",
            f"/_send @{to_bob} ttl=default json "
            + json.dumps([{"msgContent": {"type": "text", "text": "b"}}]): "b",
            f"/_send @{to_bob} live=off ttl=30 json "
            + json.dumps([{"msgContent": {"type": "text", "text": "c"}}]): "c",
            f"/_send @{to_bob} text hello  world": "hello  world",
            f'/_send @{to_bob} ttl=default text {{"not": "json"}}': '{"not": "json"}',
        }
        for command, text in forms.items():
            resp = await alice.ok(command, "newChatItems")
            assert text_of(resp) == [text]
            event = await bob.event("newChatItems")
            assert text_of(event) == [text]
            content = event["chatItems"][0]["chatItem"]["content"]
            assert content == {
                "type": "rcvMsgContent",
                "msgContent": {"type": "text", "text": text},
            }
        # A ttl makes a timed item (CIMeta.itemTimed); a live message is marked itemLive.
        resp = await alice.ok(f"/_send @{to_bob} ttl=30 text t", "newChatItems")
        assert resp["chatItems"][0]["chatItem"]["meta"]["itemTimed"]["ttl"] == 30
        resp = await alice.ok(f"/_send @{to_bob} live=on text l", "newChatItems")
        assert resp["chatItems"][0]["chatItem"]["meta"]["itemLive"] is True
        # Off the grammar: an unknown option, a bad ttl, no form word.
        for bad in (
            f"/_send @{to_bob} live=maybe text x",
            f"/_send @{to_bob} ttl=soon text x",
            f"/_send @{to_bob} hello",
            f"/_send {to_bob} text x",
        ):
            assert await alice.cmd(bad) == UNKNOWN, bad


@pytest.mark.anyio
async def test_send_takes_a_group_support_scope(simulator: CoreSimulator) -> None:
    """``sendRefP = (A.char '@' $> SRDirect <*> A.decimal) <|> (A.char '#' $> SRGroup <*>
    A.decimal <*> optional gcScopeP)`` with ``gcScopeP = "(_support" *> (GCSMemberSupport <$>
    optional (A.char ':' *> A.decimal)) <* A.char ')'``: a member writes to its support chat with
    the group's admins (``#<groupId>(_support)``), an admin to one member's
    (``#<groupId>(_support:<groupMemberId>)``); the chat is ``ChatInfo`` ``group`` with
    ``groupChatScope`` ``memberSupport``, and members outside it do not see it."""

    groups = simulator.create_group("team", "alice", ["bob", "carol"])
    g = {name: groups[(name, 1)] for name in ("alice", "bob", "carol")}
    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
        raw_core(simulator.url_for("carol"), "carol") as carol,
    ):
        for core in (alice, bob, carol):
            await core.ok("/_start", "chatStarted")
        resp = await bob.ok(f"/_send #{g['bob']}(_support) text help me", "newChatItems")
        scope = resp["chatItems"][0]["chatInfo"]["groupChatScope"]
        assert scope["type"] == "memberSupport"
        event = await alice.event("newChatItems")
        assert text_of(event) == ["help me"]
        info = event["chatItems"][0]["chatInfo"]
        assert info["type"] == "group" and info["groupChatScope"]["type"] == "memberSupport"
        bob_member = info["groupChatScope"]["groupMember_"]["groupMemberId"]
        assert info["groupChatScope"]["groupMember_"]["memberProfile"]["displayName"] == "bob"
        resp = await alice.ok(
            f"/_send #{g['alice']}(_support:{bob_member}) text how can I help",
            "newChatItems",
        )
        event = await bob.event("newChatItems")
        assert text_of(event) == ["how can I help"]
        # Carol (a member, not an admin) saw neither message.
        await alice.ok(f"/_send #{g['alice']} text everyone", "newChatItems")
        assert text_of(await carol.event("newChatItems")) == ["everyone"]
        assert carol.events.empty()
        # A support chat of a member that does not exist.
        resp = await alice.cmd(f"/_send #{g['alice']}(_support:999) text x")
        assert resp["type"] == "chatCmdError"
        assert await alice.cmd(f"/_send #{g['alice']}(support) text x") == UNKNOWN


@pytest.mark.anyio
async def test_groups_takes_a_contact_and_a_search(simulator: CoreSimulator) -> None:
    """``"/_groups" *> (APIListGroups <$> A.decimal <*> optional (" @" *> A.decimal) <*>
    optional (A.space *> stringP))``: the groups of user 1, those the contact is a member of,
    those whose name contains the search. The documented syntax (COMMANDS.md) is
    ``/_groups <userId>[ @<contactId_>][ <search>]``; this parser also reads the older form
    without the space, ``/_groups1`` (the line has no space after ``"/_groups"``)."""

    to_bob, _ = simulator.connect("alice", "bob")
    simulator.create_group("team", "alice", ["bob"])
    simulator.create_group("family", "alice", [])
    simulator.create_group("teammates", "alice", ["carol"])
    async with raw_core(simulator.url_for("alice"), "alice") as alice:

        async def names(command: str) -> list[str]:
            resp = await alice.ok(command, "groupsList")
            return sorted(g["groupProfile"]["displayName"] for g in resp["groups"])

        assert await names("/_groups 1") == ["family", "team", "teammates"]
        assert await names("/_groups1") == ["family", "team", "teammates"]
        assert await names(f"/_groups 1 @{to_bob}") == ["team"]
        assert await names("/_groups 1 team") == ["team", "teammates"]
        assert await names(f"/_groups 1 @{to_bob} team") == ["team"]
        assert await names("/_groups 1 TEAM") == ["team", "teammates"]
        assert (await alice.cmd("/_groups 7"))["chatError"]["storeError"][
            "type"
        ] == "userNotFound"
        assert await alice.cmd("/_groups x") == UNKNOWN


@pytest.mark.anyio
async def test_every_implemented_command_tolerates_trailing_spaces() -> None:
    """``choice = A.choice . map (\\p -> p <* A.takeWhile (== ' ') <* A.endOfInput)`` and
    ``parseChatCommand = A.parseOnly chatCommandP . B.dropWhileEnd isSpace``."""

    async with world() as (_sim, alice, _bob, ids):
        await alice.ok("/users  ", "usersList")
        await alice.ok("/_groups 1 ", "groupsList")
        await alice.ok(f"/_members #{ids['g@alice']}   ", "groupMembers")
        await alice.ok("/_address 1 \n", "userContactLinkCreated")
        await alice.ok("/_show_address 1  ", "userContactLink")
        await alice.ok("/_contacts 1 ", "contactsList")
        await alice.ok("/_start main=on ", "chatRunning")


@pytest.mark.anyio
async def test_start_takes_the_parsers_options_in_order(simulator: CoreSimulator) -> None:
    """``"/_start " *> do mainApp <- "main=" *> onOffP; enableSndFiles <- " snd_files=" *> onOffP
    <|> pure mainApp; largeLinkData <- " large_link_data=" *> onOffP <|> pure False``, and
    ``"/_start" $> StartChat {mainApp = True, ...}``; the option ``service_requests=on`` of the
    Service RPC core (COMMANDS.md, StartChat: ``/_start main=on|off[ snd_files=off][
    service_requests=on]``) comes last."""

    async with raw_core(simulator.url_for("a"), "a") as a:
        await a.ok("/_start main=on snd_files=off large_link_data=on", "chatStarted")
    async with raw_core(simulator.url_for("b"), "b") as b:
        await b.ok("/_start main=off service_requests=on", "chatStarted")
    async with raw_core(simulator.url_for("c"), "c") as c:
        for bad in ("/_start main=maybe", "/_start snd_files=on", "/_start main=on extra"):
            assert await c.cmd(bad) == UNKNOWN, bad


@pytest.mark.anyio
async def test_accept_connect_and_group_take_the_incognito_option(simulator: CoreSimulator) -> None:
    """``"/_accept" *> (APIAcceptContact <$> incognitoOnOffP <* A.space <*> A.decimal)``,
    ``"/_connect " *> (APIConnect <$> A.decimal <*> incognitoOnOffP <* A.space <*> connLinkP)``,
    ``"/_group " *> (APINewGroup <$> A.decimal <*> incognitoOnOffP <* A.space <*> jsonP)`` with
    ``incognitoOnOffP = (A.space *> "incognito=" *> onOffP) <|> pure False``. The simulator has
    no incognito profiles: ``incognito=off`` is the default and ``incognito=on`` is refused."""

    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
    ):
        await alice.ok("/_start", "chatStarted")
        await bob.ok("/_start", "chatStarted")
        link = (await alice.ok("/_address 1", "userContactLinkCreated"))["connLinkContact"][
            "connFullLink"
        ]
        on = await bob.cmd(f"/_connect 1 incognito=on {link}")
        assert on["type"] == "chatCmdError"
        await bob.ok(f"/_connect 1 incognito=off {link}", "sentInvitation")
        request = await alice.event("receivedContactRequest")
        rid = request["contactRequest"]["contactRequestId"]
        await alice.ok(f"/_accept incognito=off {rid}", "acceptingContactRequest")
        await alice.ok(
            '/_group 1 incognito=off {"displayName":"g","fullName":""}', "groupCreated"
        )
        assert (await alice.cmd('/_group 1 incognito=on {"displayName":"h","fullName":""}'))[
            "type"
        ] == "chatCmdError"


@pytest.mark.parametrize(
    "command",
    [
        "/_nonsense",
        "/user alice",  # SetActiveUser by name: parsed by the core, not implemented here
        "/_get chats 1",
        "/connect",
        "hello",
        "",
        "/_send @1",
        "/_members #x",
    ],
)
@pytest.mark.anyio
async def test_a_form_the_simulator_does_not_implement_is_an_unknown_command(command: str) -> None:
    """ "A form the simulator does not implement is answered as the core answers an unknown
    command": ``chatCmdError`` / ``commandError`` "Failed reading: empty" (the last
    alternative of ``A.choice`` is ``empty``)."""

    async with world() as (_sim, alice, _bob, _ids):
        assert await alice.cmd(command) == UNKNOWN


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        "[1, 2]",
        '{"cmd": "/user"}',
        '{"corrId": 1, "cmd": "/user"}',
        '{"corrId": "1", "cmd": 5}',
        '{"corrId": "1"}',
        '"/user"',
    ],
)
@pytest.mark.anyio
async def test_a_frame_that_is_not_a_request_is_answered_invalid_request_without_corr_id(
    frame: str,
) -> None:
    """Server.hs, ``receive``: ``case J.decodeStrict' s of Just ChatSrvRequest {corrId,
    remoteHostId, cmd} -> ...; Nothing -> sendError Nothing Nothing "invalid request"``, where
    ``ChatSrvRequest {corrId :: Text, remoteHostId :: Maybe RemoteHostId, cmd :: Text}`` and the
    response omits a Nothing ``corrId`` (``omitNothingFields = True``)."""

    async with CoreSimulator() as sim:
        async with raw_core(sim.url_for("alice"), "alice") as alice:
            await alice.ws.send(frame)
            answer = await alice.event("chatCmdError")
            assert answer == {
                "type": "chatCmdError",
                "chatError": {
                    "type": "error",
                    "errorType": {"type": "commandError", "message": "invalid request"},
                },
            }
            frames = [f for _, f in alice.frames]
            assert frames == [{"resp": answer}]  # no corrId
            # The connection stays usable.
            await alice.ok("/user", "activeUser")


@pytest.mark.anyio
async def test_a_request_with_remote_host_id_null_is_a_request(simulator: CoreSimulator) -> None:
    """``remoteHostId :: Maybe RemoteHostId``: a request may carry ``"remoteHostId": null``."""

    async with raw_core(simulator.url_for("alice"), "alice") as alice:
        await alice.ws.send(json.dumps({"corrId": "r1", "remoteHostId": None, "cmd": "/u"}))
        resp = await asyncio.wait_for(alice.events.get(), 10)  # an unawaited corrId
        assert resp["type"] == "activeUser"
        _, frame = alice.frames[0]
        assert frame["corrId"] == "r1"

"""Every frame the simulator sends conforms to the chat core's own types.

Issue 19, "Complete records": every required field of ``bots/api/TYPES.md`` on
every record the simulator sends. The check is the TypedDicts of the official
``simplex-chat`` package (7.0.2, ``simplex_chat/types/``, generated from the
core's API definitions), applied by a strict checker (``tests/_core_types.py``)
that fails on a missing required field, a wrong type, an unknown tag or an
unknown field. One scenario runs every command the simulator implements, over
real WebSockets, and every response and event it sends is checked.

What the package does not know is added in tests/_records.py; each with its source:

* Service RPC (the protocol text, "Service RPC transport"; COMMANDS.md of the
  core after 7.0.2, "Service commands"): the events and responses
  ``serviceRequest``, ``serviceResponse``, ``serviceReplyAccepted``,
  ``serviceReplySent`` (the badge plan) and the agent error ``A_SERVICE`` with
  ``AgentServiceError`` (simplexmq: ``ASERejected | ASETimeout |
  ASENoPendingRequest | ASENotDRAddress``, and ``ASEBadSignature`` of the signed
  requests' amendment to the Service RPC plan);
* profile declarations (the protocol text, "Profile declarations"): the key
  ``protocols`` of ``Preferences`` and ``GroupPreferences``, and ``serves`` of
  a contact address's link data (``ContactShortLinkData``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest

import simplex_rpc as sx
from _raw_core import RawCore, raw_core
from _records import EVENTS, RESPONSES, T, check_frame, checker
from simplex_rpc.testing import CoreSimulator

# -- the checker itself ----------------------------------------------------------


def test_the_checker_fails_on_a_missing_required_field_a_wrong_type_and_an_unknown_tag() -> None:
    """The check the issue asks for: "fails on a missing required field, a wrong type or an
    unknown tag" (and on an unknown field, and on null for an omitted Maybe)."""
    profile = {"profileId": 1, "displayName": "a", "fullName": "", "localAlias": ""}
    assert checker().check(profile, T.LocalProfile)

    c = checker()
    assert not c.check({k: v for k, v in profile.items() if k != "localAlias"}, T.LocalProfile)
    assert any("missing required field 'localAlias'" in e for e in c.errors)

    c = checker()
    assert not c.check({**profile, "profileId": "1"}, T.LocalProfile)
    assert any("$.profileId" in e and "integer" in e for e in c.errors)

    c = checker()
    assert not c.check({**profile, "profileId": True}, T.LocalProfile)

    c = checker()
    assert not c.check({"type": "sndLater"}, T.CIStatus)
    assert any("unknown tag 'sndLater'" in e for e in c.errors)

    c = checker()
    assert not c.check({**profile, "nickname": "x"}, T.LocalProfile)
    assert any("unknown field 'nickname'" in e for e in c.errors)

    c = checker()
    assert not c.check({**profile, "image": None}, T.LocalProfile)
    assert any("is null" in e for e in c.errors)

    c = checker()
    assert not c.check({"allow": "sometimes"}, T.SimplePreference)
    assert not c.check(["x"], list[int])
    assert c.check({"type": "A_SERVICE", "serviceError": {"type": "ASETimeout"}}, T.SMPAgentError)
    assert not checker().check(
        {"type": "A_SERVICE", "serviceError": {"type": "ASESoon"}}, T.SMPAgentError
    )


# -- the scenario ---------------------------------------------------------------


def envelope(n: int) -> str:
    return json.dumps({"protocol": "mcp", "request": {"n": n}})


async def scenario(sim: CoreSimulator, frames: list[tuple[str, Any]]) -> set[str]:
    """Run every command the simulator implements; return the command names it ran."""
    ran: set[str] = set()

    async def go(core: RawCore, command: str, expected: str) -> dict[str, Any]:
        ran.add(command.split(" ")[0].split("#")[0].split("@")[0])
        return await core.ok(command, expected)

    async with (
        raw_core(sim.url_for("alice"), "alice", frames) as alice,
        raw_core(sim.url_for("bob"), "bob", frames) as bob,
        raw_core(sim.url_for("carol"), "carol", frames) as carol,
    ):
        # Chat management and users.
        await go(alice, "/_start main=on service_requests=on", "chatStarted")
        await go(alice, "/_start main=on", "chatRunning")
        await go(bob, "/_start", "chatStarted")
        await go(carol, "/_start main=on snd_files=off", "chatStarted")
        await go(alice, "/user", "activeUser")
        await go(alice, "/u", "activeUser")
        await go(alice, "/users", "usersList")
        profile = {
            "displayName": "alice",
            "fullName": "Alice",
            "peerType": "bot",
            "preferences": {"protocols": {"mcp": {}}},
        }
        await go(alice, "/_profile 1 " + json.dumps(profile), "userProfileUpdated")
        await go(alice, "/_profile 1 " + json.dumps(profile), "userProfileNoChange")

        # Alice's address, without auto-accept.
        created = await go(alice, "/_address 1 pq_ratchet=on", "userContactLinkCreated")
        link = created["connLinkContact"]["connShortLink"]
        await go(alice, "/_show_address 1", "userContactLink")
        await go(alice, '/_address_settings 1 {"businessAddress":false}', "userContactLinkUpdated")

        # Plans: one's own address, a full link (no link data), a short link.
        await go(alice, f"/_connect plan 1 {link}", "connectionPlan")  # ownLink
        full = created["connLinkContact"]["connFullLink"]
        await go(bob, f"/_connect plan 1 {full}", "connectionPlan")  # ok, no contactSLinkData_
        sim.set_link_data(link, serves=["agent"])

        # Bob connects through the address; alice accepts.
        await go(bob, f"/_connect plan 1 {link}", "connectionPlan")
        await go(bob, f"/_connect 1 {link}", "sentInvitation")
        request = await alice.event("receivedContactRequest")
        req_id = request["contactRequest"]["contactRequestId"]
        accepted = await go(alice, f"/_accept {req_id}", "acceptingContactRequest")
        bob_at_alice = accepted["contact"]["contactId"]
        await alice.event("contactConnected")
        alice_at_bob = (await bob.event("contactConnected"))["contact"]["contactId"]
        await go(bob, f"/_connect plan 1 {link}", "connectionPlan")  # known
        await go(bob, f"/_connect 1 {link}", "contactAlreadyExists")

        # Carol asks; alice rejects; then auto-accept with an auto-reply lets her in.
        await go(carol, f"/_connect 1 {link}", "sentInvitation")
        request = await alice.event("receivedContactRequest")
        await go(
            alice,
            f"/_reject {request['contactRequest']['contactRequestId']}",
            "contactRequestRejected",
        )
        settings = {
            "businessAddress": False,
            "autoAccept": {"acceptIncognito": False},
            "autoReply": {"type": "text", "text": "welcome"},
        }
        await go(alice, "/_address_settings 1 " + json.dumps(settings), "userContactLinkUpdated")
        await go(carol, f"/_connect 1 {link}", "sentInvitation")
        carol_at_alice = (await alice.event("acceptingContactRequest"))["contact"]["contactId"]
        await carol.event("contactConnected")
        await carol.event("newChatItems")  # the auto-reply
        await alice.event("newChatItems")  # alice's own copy of it
        await go(alice, "/_contacts 1", "contactsList")

        # A direct chat, with the forms of /_send.
        sent = await go(
            bob,
            f"/_send @{alice_at_bob} json "
            + json.dumps([{"msgContent": {"type": "text", "text": "hello https://simplex.chat"}}]),
            "newChatItems",
        )
        got = await alice.event("newChatItems")
        item = got["chatItems"][0]["chatItem"]["meta"]["itemId"]
        await go(
            alice,
            f"/_send @{bob_at_alice} live=off ttl=default json "
            + json.dumps(
                [{"msgContent": {"type": "text", "text": "hi bob"}, "quotedItemId": item}]
            ),
            "newChatItems",
        )
        await bob.event("newChatItems")
        await go(alice, f"/_send @{bob_at_alice} ttl=60 text plain text", "newChatItems")
        await go(alice, f"/_send @{bob_at_alice} live=on text typing", "newChatItems")
        assert sent["chatItems"]

        # A group over the wire: create, invite, join, members.
        group = await go(alice, '/_group 1 {"displayName":"team","fullName":""}', "groupCreated")
        gid = group["groupInfo"]["groupId"]
        await go(alice, f"/_add #{gid} {bob_at_alice} member", "sentGroupInvitation")
        invitation = await bob.event("receivedGroupInvitation")
        bob_gid = invitation["groupInfo"]["groupId"]
        await go(bob, f"/_join #{bob_gid}", "userAcceptedGroupSent")
        await bob.event("userJoinedGroup")
        await alice.event("joinedGroupMember")
        await go(alice, f"/_add #{gid} {carol_at_alice} admin", "sentGroupInvitation")
        carol_gid = (await carol.event("receivedGroupInvitation"))["groupInfo"]["groupId"]
        await go(carol, f"/_join #{carol_gid}", "userAcceptedGroupSent")
        await carol.event("userJoinedGroup")
        await bob.event("connectedToGroupMember")
        members = await go(alice, f"/_members #{gid}", "groupMembers")
        bob_member = next(
            m["groupMemberId"]
            for m in members["group"]["members"]
            if m["memberProfile"]["displayName"] != "carol"
        )
        await go(alice, "/_groups 1", "groupsList")
        await go(alice, f"/_groups 1 @{bob_at_alice}", "groupsList")
        await go(alice, "/_groups 1 tea", "groupsList")

        # Group messages: a mention, a quoted reply, a support-scope message.
        await go(
            alice,
            f"/_send #{gid} json "
            + json.dumps(
                [
                    {
                        "msgContent": {"type": "text", "text": "@bob hi"},
                        "mentions": {"bob": bob_member},
                    }
                ]
            ),
            "newChatItems",
        )
        got = await bob.event("newChatItems")
        quoted = got["chatItems"][0]["chatItem"]["meta"]["itemId"]
        await go(
            bob,
            f"/_send #{bob_gid} json "
            + json.dumps([{"msgContent": {"type": "text", "text": "yes"}, "quotedItemId": quoted}]),
            "newChatItems",
        )
        await alice.event("newChatItems")
        await go(bob, f"/_send #{bob_gid}(_support) text help", "newChatItems")
        await alice.event("newChatItems")
        await go(
            alice,
            f"/_group_profile #{gid} "
            + json.dumps(
                {"displayName": "team", "fullName": "", "groupPreferences": {"protocols": {}}}
            ),
            "groupUpdated",
        )
        await bob.event("groupUpdated")
        glink = sim.group_link("alice", gid)
        await go(bob, f"/_connect plan 1 {glink}", "connectionPlan")  # known: linkOwners
        async with raw_core(sim.url_for("dave"), "dave", frames) as dave:
            await go(dave, f"/_connect plan 1 {glink}", "connectionPlan")  # ok: groupSLinkData_

        # A business chat (made in process): businessChat in GroupInfo.
        business = sim.create_group("shop", "alice", ["carol"], business=True)
        await go(alice, f"/_send #{business[('alice', 1)]} text your order", "newChatItems")
        await carol.event("newChatItems")

        # Service RPC.
        async def answer() -> None:
            request = await alice.event("serviceRequest")
            await go(
                alice,
                f'/_service_response 1 {request["requestId"]} {{"ok":1}}',
                "serviceReplyAccepted",
            )

        answering = asyncio.create_task(answer())
        key = sx.SigningKey.generate().encode()
        await go(bob, f"/_service_request 1 {link} sign_key={key} {envelope(1)}", "serviceResponse")
        await answering
        await alice.event("serviceReplySent")
        await go(alice, '/_service_response 1 nosuch {"ok":1}', "chatCmdError")  # A_SERVICE
        # A bad signature: the responder's core reports ERR (A_SERVICE ASEBadSignature).
        sim.bad_signatures = True
        await go(
            bob,
            f"/_service_request 1 {link} timeout=1 sign_key={key} {envelope(1)}",
            "chatCmdError",
        )
        await alice.event("chatError")
        sim.bad_signatures = False
        # Address upgrades in place.
        await go(alice, "/_short_link_address 1 pq_ratchet=on", "userContactLink")
        await go(alice, "/_rotate_address_keys 1", "userContactLink")

        # Errors: unknown commands, missing chats, and a frame that is not a request.
        await go(alice, "/_nonsense", "chatCmdError")
        await go(alice, "/_send @999 text x", "chatCmdError")
        await alice.ws.send("not json")
        await alice.event("chatCmdError")

        await go(alice, "/_delete_address 1", "userContactLinkDeleted")
        await go(alice, "/_stop", "chatStopped")
    return ran


@pytest.mark.anyio
@pytest.mark.time_limit(120)
async def test_every_frame_of_every_implemented_command_conforms_to_the_core_types() -> None:
    """Every response and event of a scenario that uses every implemented command checks
    against simplex-chat 7.0.2's TypedDicts: zero missing fields, zero wrong types, zero
    unknown tags (issue 19, "Done when": the validator test passes with zero missing fields)."""
    frames: list[tuple[str, Any]] = []

    with anyio.fail_after(120):
        async with CoreSimulator() as sim:
            await scenario(sim, frames)
    check = checker()
    for i, (who, frame) in enumerate(frames):
        check_frame(check, frame, f"frame {i} to {who}")
    assert check.errors == [], "\n".join(check.errors[:40])
    # The records the issue names were all reached.
    for record in (
        "User",
        "CIMeta",
        "Contact",
        "GroupInfo",
        "GroupMember",
        "GroupLinkPlan_known",
        "UserContactRequest",
        "PendingContactConnection",
        "UserContactLink",
        "ChatItem",
        "CIQuote",
        "CIMention",
        "Group",
        "ContactAddressPlan_ok",
        "ContactAddressPlan_known",
        "ContactAddressPlan_ownLink",
        "GroupLinkPlan_ok",
        "ContactShortLinkData",
        "GroupShortLinkData",
        "BusinessChatInfo",
        "Connection",
        "ContactUserPreferences",
        "FullPreferences",
        "FullGroupPreferences",
        "GroupChatScopeInfo_memberSupport",
        "InvitedBy_user",
        "InvitedBy_contact",
        "CITimed",
    ):
        assert check.seen.get(record, 0) > 0, f"no {record} was checked"
    assert len(frames) > 80


@pytest.mark.anyio
async def test_the_native_handles_results_and_errors_conform_too() -> None:
    """The native API (``chat_send_cmd``, ``chat_recv_msg_wait``) carries the same records:
    ``{"result": ChatResponse | ChatEvent}`` or ``{"error": ChatError}``."""
    results: list[Any] = []

    async with CoreSimulator() as sim:
        handle = sim.native_handle("eve")
        sim.connect("eve", "frank")
        try:
            for command in ("/_start", "/u", "/users", "/_contacts 1", "/_nonsense"):
                results.append(json.loads(await asyncio.to_thread(handle.chat_send_cmd, command)))
            async with raw_core(sim.url_for("frank"), "frank") as frank:
                await frank.ok("/_start", "chatStarted")
                await frank.ok("/_send @1 text hi eve", "newChatItems")
            event = await asyncio.to_thread(handle.chat_recv_msg_wait, 5_000_000)
            results.append(json.loads(event))
        finally:
            handle.close()
    check = checker()
    for i, message in enumerate(results):
        if "error" in message:
            check.check(message["error"], T.ChatError, f"result {i}.error")
        else:
            check.check(message["result"], RESPONSES | EVENTS, f"result {i}.result")
    assert check.errors == [], "\n".join(check.errors)
    assert [m.get("result", {}).get("type") for m in results[:4]] == [
        "chatStarted",
        "activeUser",
        "usersList",
        "contactsList",
    ]
    assert results[4]["error"]["errorType"]["message"] == "Failed reading: empty"
    assert results[5]["result"]["type"] == "newChatItems"

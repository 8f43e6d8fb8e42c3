"""Contacts and groups made over the wire, with each side's events (issue 19).

Commands and their responses are those of simplex-chat's ``bots/api/COMMANDS.md``
(APICreateMyAddress, APIShowMyAddress, APISetAddressSettings, APIConnectPlan,
APIConnect, APIAcceptContact, APIRejectContact, APIListContacts, APINewGroup,
APIAddMember, APIJoinGroup, APIListMembers); the events are those of
``bots/api/EVENTS.md``:

* the address owner: ``receivedContactRequest`` ("only sent when auto-accept is
  disabled"), or ``acceptingContactRequest`` ("automatically accepting contact
  request via bot's SimpleX address with auto-accept enabled"), then
  ``contactSndReady`` ("after accepting contact request") and ``contactConnected``;
* the requester: ``contactConnecting`` ("when bot connects to another SimpleX
  address") and ``contactConnected``; a rejected requester is "not notified";
* groups: the invitee gets ``receivedGroupInvitation``; after ``/_join`` it gets
  ``userJoinedGroup`` and the host ``joinedGroupMember``; each other member is
  told ``joinedGroupMemberConnecting`` and then ``connectedToGroupMember``, as
  the new member is of each of them.

Every client here is a plain WebSocket client (``tests/_raw_core.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from _raw_core import RawCore, raw_core
from simplex_rpc.testing import CoreSimulator


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def started(*cores: RawCore) -> None:
    for core in cores:
        await core.ok("/_start", "chatStarted")


async def drain(core: RawCore) -> list[dict[str, Any]]:
    """The events already queued (after the simulator's emits for a command completed)."""
    out = []
    while not core.events.empty():
        out.append(core.events.get_nowait())
    return out


@pytest.mark.anyio
async def test_connect_through_an_address_and_accept(simulator: CoreSimulator) -> None:
    """APIConnect through a contact address answers ``sentInvitation``; the owner sees
    ``receivedContactRequest`` and accepts with ``/_accept <contactReqId>``; then each side
    has the other as a contact, with its profile, and they can message each other."""

    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
    ):
        await started(alice, bob)
        await alice.ok(
            '/_profile 1 {"displayName":"Alice Bot","fullName":""}', "userProfileUpdated"
        )
        created = await alice.ok("/_address 1", "userContactLinkCreated")
        link = created["connLinkContact"]["connShortLink"]
        shown = await alice.ok("/_show_address 1", "userContactLink")
        assert shown["contactLink"]["addressSettings"] == {"businessAddress": False}

        plan = await bob.ok(f"/_connect plan 1 {link}", "connectionPlan")
        ok = plan["connectionPlan"]["contactAddressPlan"]
        assert ok["type"] == "ok"
        assert ok["contactSLinkData_"]["profile"]["displayName"] == "Alice Bot"

        sent = await bob.ok(f"/_connect 1 {link}", "sentInvitation")
        assert sent["connection"]["viaContactUri"] is True
        assert sent["connection"]["pccConnStatus"] == {"type": "joined"}

        request = await alice.event("receivedContactRequest")
        req = request["contactRequest"]
        assert req["profile"]["displayName"] == "bob"
        assert req["localDisplayName"] == "bob"
        assert req["userContactLinkId_"] == shown["contactLink"]["userContactLinkId"]
        assert bob.events.empty()  # nothing for the requester yet

        accepted = await alice.ok(
            f"/_accept {req['contactRequestId']}", "acceptingContactRequest"
        )
        contact = accepted["contact"]
        assert contact["profile"]["displayName"] == "bob"
        assert contact["contactRequestId"] == req["contactRequestId"]
        owner = await alice.events_until("contactConnected")
        assert kinds(owner) == ["contactSndReady", "contactConnected"]
        assert owner[-1]["contact"]["contactId"] == contact["contactId"]
        requester = await bob.events_until("contactConnected")
        assert kinds(requester) == ["contactConnecting", "contactConnected"]
        alice_at_bob = requester[-1]["contact"]
        assert alice_at_bob["profile"]["displayName"] == "Alice Bot"

        # A second accept of the same request: it is gone.
        again = await alice.cmd(f"/_accept {req['contactRequestId']}")
        assert again["chatError"]["storeError"] == {
            "type": "contactRequestNotFound",
            "contactRequestId": req["contactRequestId"],
        }
        # Known now: the plan says so, and connecting again says it exists.
        plan = await bob.ok(f"/_connect plan 1 {link}", "connectionPlan")
        assert plan["connectionPlan"]["contactAddressPlan"]["type"] == "known"
        await bob.ok(f"/_connect 1 {link}", "contactAlreadyExists")

        # They talk, and the contacts list has them.
        await bob.ok(f"/_send @{alice_at_bob['contactId']} text hi", "newChatItems")
        got = await alice.event("newChatItems")
        assert got["chatItems"][0]["chatInfo"]["contact"]["contactId"] == contact["contactId"]
        contacts = await alice.ok("/_contacts 1", "contactsList")
        assert [c["profile"]["displayName"] for c in contacts["contacts"]] == ["bob"]


@pytest.mark.anyio
async def test_reject_tells_the_requester_nothing(simulator: CoreSimulator) -> None:
    """APIRejectContact answers ``contactRequestRejected``; "The user who sent the request is
    **not notified**": the requester gets no event and has no contact."""

    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
    ):
        await started(alice, bob)
        link = (await alice.ok("/_address 1", "userContactLinkCreated"))["connLinkContact"][
            "connFullLink"
        ]
        await bob.ok(f"/_connect 1 {link}", "sentInvitation")
        req = (await alice.event("receivedContactRequest"))["contactRequest"]
        rejected = await alice.ok(
            f"/_reject {req['contactRequestId']}", "contactRequestRejected"
        )
        assert rejected["contactRequest"]["contactRequestId"] == req["contactRequestId"]
        assert "contact_" not in rejected
        assert (await alice.ok("/_contacts 1", "contactsList"))["contacts"] == []
        assert (await bob.ok("/_contacts 1", "contactsList"))["contacts"] == []
        assert await drain(bob) == []
        # It can ask again.
        await bob.ok(f"/_connect 1 {link}", "sentInvitation")
        await alice.event("receivedContactRequest")


@pytest.mark.anyio
async def test_auto_accept_with_an_auto_reply(simulator: CoreSimulator) -> None:
    """APISetAddressSettings with ``autoAccept`` (AddressSettings, TYPES.md): the owner's core
    accepts at once (``acceptingContactRequest`` as an event) and sends ``autoReply`` to the
    new contact once connected."""

    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
    ):
        await started(alice, bob)
        link = (await alice.ok("/_address 1", "userContactLinkCreated"))["connLinkContact"][
            "connShortLink"
        ]
        settings = {
            "businessAddress": False,
            "autoAccept": {"acceptIncognito": False},
            "autoReply": {"type": "text", "text": "Welcome!"},
        }
        updated = await alice.ok(
            "/_address_settings 1 " + json.dumps(settings), "userContactLinkUpdated"
        )
        assert updated["contactLink"]["addressSettings"] == settings
        await bob.ok(f"/_connect 1 {link}", "sentInvitation")
        owner = await alice.events_until("contactConnected")
        assert kinds(owner) == [
            "acceptingContactRequest",
            "contactSndReady",
            "contactConnected",
        ]
        requester = await bob.events_until("newChatItems")
        assert kinds(requester) == ["contactConnecting", "contactConnected", "newChatItems"]
        reply = requester[-1]["chatItems"][0]["chatItem"]
        assert reply["content"] == {
            "type": "rcvMsgContent",
            "msgContent": {"type": "text", "text": "Welcome!"},
        }
        assert reply["chatDir"] == {"type": "directRcv"}
        own = await alice.event("newChatItems")
        assert own["chatItems"][0]["chatItem"]["chatDir"] == {"type": "directSnd"}


@pytest.mark.anyio
async def test_connect_errors(simulator: CoreSimulator) -> None:
    """APIConnect to a link that is not a link of this simulator fails ``invalidConnReq``; a
    user the core does not have, ``userNotFound``; accepting a request that does not exist,
    ``contactRequestNotFound``. The simulator refuses to connect a user to its own address
    (whose plan is ``ownLink``) with ``invalidConnReq``."""

    async with raw_core(simulator.url_for("alice"), "alice") as alice:
        await started(alice)
        link = (await alice.ok("/_address 1", "userContactLinkCreated"))["connLinkContact"][
            "connShortLink"
        ]
        bad = await alice.cmd("/_connect 1 https://example.com/x")
        assert bad["chatError"]["errorType"] == {"type": "invalidConnReq"}
        own = await alice.cmd(f"/_connect 1 {link}")
        assert own["chatError"]["errorType"] == {"type": "invalidConnReq"}
        missing = await alice.cmd(f"/_connect 9 {link}")
        assert missing["chatError"]["storeError"] == {"type": "userNotFound", "userId": 9}
        assert (await alice.cmd("/_accept 77"))["chatError"]["storeError"][
            "type"
        ] == "contactRequestNotFound"


@pytest.mark.anyio
async def test_a_group_made_over_the_wire(simulator: CoreSimulator) -> None:
    """APINewGroup (``groupCreated``), APIAddMember (``sentGroupInvitation``; the invitee gets
    ``receivedGroupInvitation``), APIJoinGroup (``userAcceptedGroupSent``; then
    ``userJoinedGroup`` at the invitee and ``joinedGroupMember`` at the host, and for a third
    member ``joinedGroupMemberConnecting`` and ``connectedToGroupMember``), APIListMembers
    (``groupMembers`` with every member but the user, each with its role and status)."""

    a_bob, b_alice = simulator.connect("alice", "bob")
    a_carol, _ = simulator.connect("alice", "carol")
    async with (
        raw_core(simulator.url_for("alice"), "alice") as alice,
        raw_core(simulator.url_for("bob"), "bob") as bob,
        raw_core(simulator.url_for("carol"), "carol") as carol,
    ):
        await started(alice, bob, carol)
        created = await alice.ok(
            '/_group 1 {"displayName":"team","fullName":"The team"}', "groupCreated"
        )
        info = created["groupInfo"]
        gid = info["groupId"]
        assert info["membership"]["memberRole"] == "owner"
        assert info["groupSummary"]["currentMembers"] == 1
        assert (await alice.ok(f"/_members #{gid}", "groupMembers"))["group"]["members"] == []

        invited = await alice.ok(f"/_add #{gid} {a_bob} admin", "sentGroupInvitation")
        assert invited["member"]["memberRole"] == "admin"
        assert invited["member"]["memberStatus"] == "invited"
        assert invited["contact"]["contactId"] == a_bob
        invitation = await bob.event("receivedGroupInvitation")
        assert invitation["fromMemberRole"] == "owner"
        assert invitation["memberRole"] == "admin"
        assert invitation["contact"]["contactId"] == b_alice
        assert invitation["groupInfo"]["membership"]["memberStatus"] == "invited"
        bob_gid = invitation["groupInfo"]["groupId"]
        # Not joined yet: bob cannot send to it.
        early = await bob.cmd(f"/_send #{bob_gid} text early")
        assert early["chatError"]["errorType"]["type"] == "groupNotJoined"

        joined = await bob.ok(f"/_join #{bob_gid}", "userAcceptedGroupSent")
        assert joined["hostContact"]["contactId"] == b_alice
        host_member = (await bob.event("userJoinedGroup"))["hostMember"]
        assert host_member["memberRole"] == "owner"
        new_member = (await alice.event("joinedGroupMember"))["member"]
        assert new_member["memberProfile"]["displayName"] == "bob"
        assert new_member["memberStatus"] == "connected"
        again = await bob.cmd(f"/_join #{bob_gid}")
        assert again["chatError"]["storeError"] == {"type": "groupAlreadyJoined"}

        # An admin adds carol; the members connect to each other.
        await alice.ok(f"/_add #{gid} {a_carol} member", "sentGroupInvitation")
        carol_gid = (await carol.event("receivedGroupInvitation"))["groupInfo"]["groupId"]
        await carol.ok(f"/_join #{carol_gid}", "userAcceptedGroupSent")
        at_bob = await bob.events_until("connectedToGroupMember")
        assert kinds(at_bob) == ["joinedGroupMemberConnecting", "connectedToGroupMember"]
        assert at_bob[-1]["member"]["memberProfile"]["displayName"] == "carol"
        at_carol = await carol.events_until("connectedToGroupMember")
        assert "userJoinedGroup" in kinds(at_carol)
        assert at_carol[-1]["member"]["memberProfile"]["displayName"] == "bob"

        members = (await alice.ok(f"/_members #{gid}", "groupMembers"))["group"]
        roles = {m["memberProfile"]["displayName"]: m["memberRole"] for m in members["members"]}
        assert roles == {"bob": "admin", "carol": "member"}
        assert members["groupInfo"]["groupSummary"]["currentMembers"] == 3

        # A group message reaches both; a quoted reply quotes it.
        await alice.ok(f"/_send #{gid} text hello team", "newChatItems")
        got = await bob.event("newChatItems")
        await carol.event("newChatItems")
        quoted = got["chatItems"][0]["chatItem"]["meta"]["itemId"]
        await bob.ok(
            f"/_send #{bob_gid} json "
            + json.dumps(
                [{"msgContent": {"type": "text", "text": "hi"}, "quotedItemId": quoted}]
            ),
            "newChatItems",
        )
        reply = (await alice.event("newChatItems"))["chatItems"][0]["chatItem"]
        assert reply["quotedItem"]["content"] == {"type": "text", "text": "hello team"}
        assert reply["chatDir"]["groupMember"]["memberProfile"]["displayName"] == "bob"


@pytest.mark.anyio
async def test_group_permissions(simulator: CoreSimulator) -> None:
    """Adding a member "Requires bot to have Admin role" (COMMANDS.md, APIAddMember):
    a plain member is refused ``groupUserRole``; a contact already in the group,
    ``groupDuplicateMember``; a member cannot grant a role above its own."""

    simulator.connect("alice", "bob")
    b_carol, _ = simulator.connect("bob", "carol")
    groups = simulator.create_group("team", "alice", ["bob"])
    async with raw_core(simulator.url_for("bob"), "bob") as bob:
        await started(bob)
        g = groups[("bob", 1)]
        refused = await bob.cmd(f"/_add #{g} {b_carol} member")
        error = refused["chatError"]["errorType"]
        assert error["type"] == "groupUserRole" and error["requiredRole"] == "admin"
        assert error["groupInfo"]["groupId"] == g
        assert (await bob.cmd(f"/_add #{g} 99 member"))["chatError"]["storeError"][
            "type"
        ] == "contactNotFound"
        assert (await bob.cmd(f"/_add #{g} {b_carol} king"))["type"] == "chatCmdError"


@pytest.mark.anyio
async def test_a_repeated_request_is_the_same_request_and_any_user_of_the_core_accepts_its_own() -> None:  # noqa: E501
    """The core matches a repeated request by the requester (its ``xContactId``): the owner is
    told again with the same ``contactRequestId``. APIAcceptContact names no user: the core
    finds the request, and the user it was sent to, by its id, so user 2 accepts its own."""

    async with CoreSimulator(users=(1, 2)) as sim:
        link = sim.create_address(("alice", 2))["connShortLink"]
        async with (
            raw_core(sim.url_for("alice"), "alice") as alice,
            raw_core(sim.url_for("bob"), "bob") as bob,
        ):
            await started(alice, bob)
            await bob.ok(f"/_connect 1 {link}", "sentInvitation")
            first = (await alice.event("receivedContactRequest"))["contactRequest"]
            await bob.ok(f"/_connect 1 {link}", "sentInvitation")
            again = await alice.event("receivedContactRequest")
            assert again["contactRequest"]["contactRequestId"] == first["contactRequestId"]
            assert again["user"]["userId"] == 2
            accepted = await alice.ok(
                f"/_accept {first['contactRequestId']}", "acceptingContactRequest"
            )
            assert accepted["user"]["userId"] == 2
            assert (await bob.event("contactConnected"))["contact"]["profile"][
                "displayName"
            ] == "alice2"


@pytest.mark.anyio
async def test_a_business_address_is_not_connected_over_the_wire(simulator: CoreSimulator) -> None:
    """A business address makes a business chat per customer (AddressSettings.businessAddress);
    the simulator makes those only in process (``create_group(business=True)``) and says so."""

    link = simulator.create_address("shop", settings={"businessAddress": True})["connShortLink"]
    async with raw_core(simulator.url_for("bob"), "bob") as bob:
        await started(bob)
        refused = await bob.cmd(f"/_connect 1 {link}")
        assert refused["chatError"]["errorType"]["type"] == "commandError"
        assert "business" in refused["chatError"]["errorType"]["message"]


@pytest.mark.anyio
async def test_events_wait_for_a_client(simulator: CoreSimulator) -> None:
    """Server.hs: each client's ``output`` reads the core's one ``outputQ``, so an event made
    while no client is connected waits there for the next one (up to the queue's 1024)."""

    to_alice, _ = simulator.connect("bob", "alice")
    async with raw_core(simulator.url_for("bob"), "bob") as bob:
        await started(bob)
        await bob.ok(f"/_send @{to_alice} text while you were away", "newChatItems")
    async with raw_core(simulator.url_for("alice"), "alice") as alice:
        got = await alice.event("newChatItems")
        assert got["chatItems"][0]["chatItem"]["meta"]["itemText"] == "while you were away"
    async with raw_core(simulator.url_for("alice"), "alice") as again:
        await started(again)
        assert await drain(again) == []  # handed out once

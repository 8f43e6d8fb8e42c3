"""The simulator's Service RPC facts that come from the chat core's plans, not its code.

Each test names its source in simplex-chat/simplex-chat:

* ``plans/2026-07-22-service-rpc-chat.md`` (commit 525a612a): ``APISendServiceResponse``
  answered ``CRCmdOk`` (the first cores); payloads are ``J.Object`` encoded with
  ``J.encode`` (keys sorted); a contact name target resolves to the contact link, a
  channel name fails; "Amendment: signed service requests": an invalid signature
  is the agent error ``A_SERVICE ASEBadSignature``, no request is delivered;
* ``plans/2026-07-20-supporter-badges-v2-implementation.md`` (commit 67bc10d4):
  ``APISendServiceResponse`` -> ``CRServiceReplyAccepted {connectionId}``, delivery
  reported by ``CEvtServiceReplySent {connectionId}``;
* ``plans/2026-06-25-name-resolution.md``: the in-place upgrades
  (``/_short_link_address <uid> pq_ratchet=on``, ``/_rotate_address_keys <userId>``)
  set the address data on the existing connection and keep its full link.

All over raw WebSockets (``tests/_raw_core.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

import simplex_rpc as sx
from _raw_core import RawCore, raw_core
from simplex_rpc.testing import CoreSimulator

REQUEST = json.dumps({"protocol": "mcp", "request": {"n": 1}})


@asynccontextmanager
async def pair(sim: CoreSimulator, pq: bool = True) -> AsyncIterator[tuple[RawCore, RawCore]]:
    """Bob (started, service requests on, an address unless ``pq`` is None) and alice."""
    async with AsyncExitStack() as stack:
        bob = await stack.enter_async_context(raw_core(sim.url_for("bob"), "bob"))
        alice = await stack.enter_async_context(raw_core(sim.url_for("alice"), "alice"))
        await bob.ok("/_start main=on service_requests=on", "chatStarted")
        await alice.ok("/_start main=on", "chatStarted")
        await bob.ok("/_address 1" + (" pq_ratchet=on" if pq else ""), "userContactLinkCreated")
        yield bob, alice


async def link_of(bob: RawCore) -> dict[str, Any]:
    shown = await bob.ok("/_show_address 1", "userContactLink")
    link: dict[str, Any] = shown["contactLink"]["connLinkContact"]
    return link


def agent_error(resp: dict[str, Any]) -> dict[str, Any]:
    assert resp["type"] == "chatCmdError", resp
    error: dict[str, Any] = resp["chatError"]["agentError"]
    return error


async def answered(
    bob: RawCore, alice: RawCore, target: str, request: str = REQUEST
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Alice's request to ``target``, bob's event for it, bob's answer, alice's response."""
    call = asyncio.create_task(alice.cmd(f"/_service_request 1 {target} timeout=30 {request}"))
    event = await bob.event("serviceRequest")
    ack = await bob.cmd(f'/_service_response 1 {event["requestId"]} {{"z":1,"a":{{"y":2,"b":3}}}}')
    return event, ack, await call


@pytest.mark.anyio
async def test_service_response_is_answered_service_reply_accepted_then_service_reply_sent() -> None:  # noqa: E501
    """The badge plan: ``serviceReplyAccepted {user, connectionId}``, and later the event
    ``serviceReplySent {connectionId}`` with the same id."""

    async with CoreSimulator() as sim, pair(sim) as (bob, alice):
        link = (await link_of(bob))["connShortLink"]
        _, ack, response = await answered(bob, alice, link)
        assert ack["type"] == "serviceReplyAccepted"
        assert ack["user"]["userId"] == 1 and isinstance(ack["connectionId"], str)
        sent = await bob.event("serviceReplySent")
        assert sent == {"type": "serviceReplySent", "connectionId": ack["connectionId"]}
        assert response["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_the_first_cores_answer_cmd_ok_and_report_no_delivery() -> None:
    """The Service RPC plan, item 4: ``APISendServiceResponse`` returns ``CRCmdOk``
    (``ack="cmdOk"``); those cores have no ``serviceReplySent``."""

    async with CoreSimulator(ack="cmdOk") as sim, pair(sim) as (bob, alice):
        link = (await link_of(bob))["connShortLink"]
        _, ack, response = await answered(bob, alice, link)
        assert ack["type"] == "cmdOk" and ack["user_"]["userId"] == 1
        assert response["type"] == "serviceResponse"
        await sim.send_event("bob", {"type": "marker"})
        assert (await bob.events.get())["type"] == "marker"  # no serviceReplySent first


@pytest.mark.anyio
async def test_a_bad_signature_is_the_responders_error_and_the_requester_times_out() -> None:
    """The plan's amendment: an invalid signature arrives as the agent error
    ``A_SERVICE ASEBadSignature`` (a ``chatError`` event at the responder); no request is
    delivered, so the requester waits out its timeout."""

    async with CoreSimulator() as sim, pair(sim) as (bob, alice):
        link = (await link_of(bob))["connShortLink"]
        sim.bad_signatures = True
        key = sx.SigningKey.generate().encode()
        failed = await alice.cmd(f"/_service_request 1 {link} timeout=1 sign_key={key} {REQUEST}")
        assert agent_error(failed)["agentErr"]["serviceError"]["type"] == "ASETimeout"
        error = await bob.event("chatError")
        assert error["chatError"]["type"] == "errorAgent"
        agent = error["chatError"]["agentError"]
        assert agent["agentErr"] == {
            "type": "A_SERVICE",
            "serviceError": {"type": "ASEBadSignature"},
        }
        assert sim.stats.bad_signatures == 1 and sim.stats.delivered == 0
        # An unsigned request has no signature to be bad: it is delivered.
        _, _, response = await answered(bob, alice, link)
        assert response["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_a_contact_name_target_resolves_from_the_world(simulator: CoreSimulator) -> None:
    """Target resolution: ``@name.simplex`` is a contact name, resolved to the contact's
    link (here from the world file's ``address.name``); ``#…`` (a channel name) and a bare
    name fail."""
    world = {
        "users": [
            {"core": "bob", "address": {"pq_ratchet": True, "name": "bob.simplex"}},
            {"core": "alice"},
        ]
    }

    simulator.load_world(world)
    async with (
        raw_core(simulator.url_for("bob"), "bob") as bob,
        raw_core(simulator.url_for("alice"), "alice") as alice,
    ):
        await bob.ok("/_start main=on service_requests=on", "chatStarted")
        await alice.ok("/_start main=on", "chatStarted")
        _, _, response = await answered(bob, alice, "@bob.simplex")
        assert response["type"] == "serviceResponse"
        channel = await alice.cmd(f"/_service_request 1 #bob.simplex timeout=1 {REQUEST}")
        assert channel["chatError"]["errorType"]["type"] == "commandError"
        bare = await alice.cmd(f"/_service_request 1 bob.simplex timeout=1 {REQUEST}")
        assert bare["chatError"]["errorType"]["type"] == "invalidConnReq"
        unknown = await alice.cmd(f"/_service_request 1 @nobody.simplex timeout=1 {REQUEST}")
        assert unknown["type"] == "chatCmdError"
        assert simulator.stats.requests == 1


@pytest.mark.anyio
async def test_request_and_response_data_are_re_encoded_with_sorted_keys() -> None:
    """D3 of the plan: the payloads are ``J.Object``, encoded by ``J.encode``; aeson writes
    an object's keys in sorted order, so ``requestData`` and ``responseData`` arrive sorted
    at every level."""

    async with CoreSimulator() as sim, pair(sim) as (bob, alice):
        link = (await link_of(bob))["connShortLink"]
        request = '{"request":{"n":1,"b":[{"y":1,"x":2}]},"protocol":"mcp","a":0}'
        event, _, response = await answered(bob, alice, link, request)
        data = event["requestData"]
        assert list(data) == ["a", "protocol", "request"]
        assert list(data["request"]) == ["b", "n"]
        assert list(data["request"]["b"][0]) == ["x", "y"]
        assert list(response["responseData"]) == ["a", "z"]
        assert list(response["responseData"]["a"]) == ["b", "y"]


@pytest.mark.anyio
async def test_a_request_the_core_cannot_pad_fails_the_command() -> None:
    """A request whose encoding does not fit the 11,106-byte block fails the command with
    the agent's ``CMD LARGE``; nothing is sent."""

    async with CoreSimulator() as sim, pair(sim) as (bob, alice):
        link = (await link_of(bob))["connShortLink"]
        big = json.dumps({"protocol": "mcp", "request": {"pad": "x" * 12_000}})
        failed = await alice.cmd(f"/_service_request 1 {link} timeout=30 {big}")
        assert agent_error(failed)["cmdErr"] == {"type": "LARGE"}
        assert sim.stats.requests == 0


@pytest.mark.parametrize(
    "upgrade",
    [
        '/_address_settings 1 pq_ratchet=on {"businessAddress":false}',
        "/_short_link_address 1 pq_ratchet=on",
        "/_rotate_address_keys 1",
    ],
)
@pytest.mark.anyio
async def test_an_upgraded_address_has_keys_on_its_short_link_only(upgrade: str) -> None:
    """An address upgraded in place keeps its full link, without keys (no ``rk=``): a
    request to it still fails ``ASENotDRAddress``; its short link carries the keys."""

    async with CoreSimulator() as sim, pair(sim, pq=False) as (bob, alice):
        before = await link_of(bob)
        resp = await bob.cmd(upgrade)
        assert resp["type"] in ("userContactLinkUpdated", "userContactLink")
        after = resp["contactLink"]["connLinkContact"]
        assert after["connFullLink"] == before["connFullLink"]
        assert "rk=" not in after["connFullLink"]
        full = await alice.cmd(f"/_service_request 1 {after['connFullLink']} timeout=30 {REQUEST}")
        assert agent_error(full)["agentErr"]["serviceError"]["type"] == "ASENotDRAddress"
        _, _, response = await answered(bob, alice, after["connShortLink"])
        assert response["type"] == "serviceResponse"


@pytest.mark.anyio
async def test_an_address_without_a_short_link_gets_one_with_keys(simulator: CoreSimulator) -> None:
    """An address of the time before short links (a full link alone) gets a short link
    with keys from ``/_short_link_address <userId> pq_ratchet=on``."""

    created = simulator.create_address("bob", short_link=False)
    assert "connShortLink" not in created
    async with (
        raw_core(simulator.url_for("bob"), "bob") as bob,
        raw_core(simulator.url_for("alice"), "alice") as alice,
    ):
        await bob.ok("/_start main=on service_requests=on", "chatStarted")
        await alice.ok("/_start main=on", "chatStarted")
        shown = await link_of(bob)
        assert "connShortLink" not in shown
        resp = await bob.ok("/_short_link_address 1 pq_ratchet=on", "userContactLink")
        short = resp["contactLink"]["connLinkContact"]["connShortLink"]
        _, _, response = await answered(bob, alice, short)
        assert response["type"] == "serviceResponse"

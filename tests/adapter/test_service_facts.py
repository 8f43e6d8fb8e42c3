"""The adapter and the chat's plan for Service RPC (issue 28, item 5), on the simulator.

From ``plans/2026-07-22-service-rpc-chat.md`` and
``plans/2026-07-20-supporter-badges-v2-implementation.md`` (simplex-chat), not yet the
core's published code: a target may be a contact name ``@name.simplex`` (``#…`` names
and bare names fail); delivery of an answer is reported later by the event
``serviceReplySent {connectionId}``; a bad signature is the responder's agent error
``A_SERVICE ASEBadSignature`` and the request is never delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

import simplex_rpc as sx
from simplex_rpc import Request
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.errors import ChatCoreError, SimplexRpcError
from simplex_rpc.testing import CoreSimulator


async def _ok(request: ServiceRequest) -> str:
    return "ok"


@contextlib.asynccontextmanager
async def bob_serving(sim: CoreSimulator):  # type: ignore[no-untyped-def]
    async with (
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        assert await bob.start(service_requests=True)
        assert await alice.start(service_requests=False)
        ready = asyncio.Event()
        task = asyncio.create_task(bob.serve(1, _ok, protocols=["mcp"], ready=ready))
        await ready.wait()
        try:
            yield bob, alice
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.anyio
async def test_a_contact_name_target_is_sent_and_channel_or_bare_names_are_refused(
    simulator: CoreSimulator,
) -> None:
    world = {
        "users": [
            {"core": "bob", "address": {"pq_ratchet": True, "name": "bob.simplex"}},
            {"core": "alice"},
        ]
    }

    simulator.load_world(world)
    async with bob_serving(simulator) as (_, alice):
        request = Request(protocol="mcp", request={})
        response = await alice.service_request(1, "@bob.simplex", request)
        assert response.response == "ok"
        for bad in ("#bob.simplex", "bob.simplex"):
            with pytest.raises(SimplexRpcError, match=r"@name\.simplex"):
                await alice.service_request(1, bad, request)
        with pytest.raises(ChatCoreError):
            await alice.service_request(1, "@nobody.simplex", request, timeout=1)
    assert simulator.stats.requests == 1


@pytest.mark.anyio
async def test_service_reply_sent_reaches_the_event_stream_after_the_acceptance() -> None:
    async with CoreSimulator() as sim, bob_serving(sim) as (bob, alice):
        link = (await bob.service_address(1)).link
        events = bob.events()
        response = await alice.service_request(1, link, Request(protocol="mcp", request={}))
        assert response.response == "ok"
        async with asyncio.timeout(10):
            async for event in events:
                if event.get("type") == "serviceReplySent":
                    assert isinstance(event.get("connectionId"), (str, int))
                    break


@pytest.mark.anyio
async def test_a_bad_signature_is_logged_by_the_responder_the_requester_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with CoreSimulator() as sim, bob_serving(sim) as (bob, alice):
        link = (await bob.service_address(1)).link
        sim.bad_signatures = True
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            with pytest.raises(ChatCoreError, match="ASETimeout"):
                await alice.service_request(
                    1,
                    link,
                    Request(protocol="mcp", request={}),
                    timeout=1,
                    sign_key=sx.SigningKey.generate(),
                )
            await bob.command("/user")  # the chatError event has been read
        assert sim.stats.bad_signatures == 1 and sim.stats.delivered == 0
    assert "ASEBadSignature" in caplog.text and "will time out" in caplog.text

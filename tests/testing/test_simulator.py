"""CoreSimulator: the chat core's Service RPC behaviour, as the protocol text states it.

Each test names the rule of "Service RPC transport" (Requirements, Exchange)
it pins. The simulator is driven with raw commands over a real loopback
WebSocket, through ChatCore.command, so these tests see exactly what a client
of the core sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

import simplex_rpc as sx
from _support import cores
from _waiting import until
from simplex_rpc.adapter import ChatCore, ChatCoreClosed, EventStream
from simplex_rpc.errors import ChatCoreError
from simplex_rpc.testing import CoreSimulator
from simplex_rpc.testing import _model as testing


def simulator_reply_queue() -> Any:
    """The reply queue the simulated agent puts in its requests: the limits depend on it."""
    from simplex_rpc import testing

    return testing._model._REPLY_QUEUE


def envelope(protocol: str = "mcp", request: Any = None, **extra: Any) -> str:
    return json.dumps({"protocol": protocol, "request": request or {"n": 1}, **extra})


async def started(core: ChatCore, service_requests: bool) -> None:
    cmd = "/_start main=on" + (" service_requests=on" if service_requests else "")
    assert (await core.command(cmd))["type"] == "chatStarted"


async def address(core: ChatCore, pq: bool = True) -> dict[str, Any]:
    resp = await core.command("/_address 1" + (" pq_ratchet=on" if pq else ""))
    assert resp["type"] == "userContactLinkCreated"
    link: dict[str, Any] = resp["connLinkContact"]
    return link


async def next_request(events: Any) -> dict[str, Any]:
    async for event in events:
        if event["type"] == "serviceRequest":
            return dict(event)
    raise AssertionError("the event stream ended")


@dataclass
class Exchange:
    """The simulator, a responder core ``bob`` with an address, and a requester core ``alice``."""

    sim: CoreSimulator
    bob: ChatCore
    alice: ChatCore
    links: dict[str, Any]
    """Bob's address as ``/_address`` created it (``connShortLink``, ``connFullLink``)."""
    events: EventStream
    """Bob's events, subscribed before any request."""

    @property
    def link(self) -> str:
        """The short link of bob's address."""
        return str(self.links["connShortLink"])

    async def relay(self, command: str) -> tuple[asyncio.Task[dict[str, Any]], dict[str, Any]]:
        """Send alice's ``command`` (a ``/_service_request``) in a task; return the task
        and the ``serviceRequest`` event bob's core reports for it."""
        call = asyncio.create_task(self.alice.command(command))
        return call, await next_request(self.events)


@contextlib.asynccontextmanager
async def exchange(
    *,
    service_requests: bool = True,
    pq: bool = True,
    requester_started: bool = True,
    response_window: float = 180.0,
) -> AsyncIterator[Exchange]:
    """Bob started (with service_requests=on unless told otherwise) and given an address
    (with ratchet keys unless ``pq`` is false); alice started without service requests
    (unless ``requester_started`` is false); bob's events subscribed. All through raw
    commands."""
    async with cores(response_window) as (sim, bob, alice):
        await started(bob, service_requests)
        if requester_started:
            await started(alice, False)
        links = await address(bob, pq=pq)
        yield Exchange(sim=sim, bob=bob, alice=alice, links=links, events=bob.events())


@pytest.mark.anyio
async def test_start_answers_chat_started_then_chat_running() -> None:
    """/_start starts the chat once; a running chat answers chatRunning (COMMANDS.md StartChat)."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        started = await core.command("/_start main=on service_requests=on")
        assert started["type"] == "chatStarted"
        assert (await core.command("/_start main=on"))["type"] == "chatRunning"
        assert (await core.command("/_stop"))["type"] == "chatStopped"
        assert (await core.command("/_start main=on snd_files=off"))["type"] == "chatStarted"
        with pytest.raises(ChatCoreError) as info:
            await core.command("/_start bogus=on")
        assert info.value.type_path == "error/commandError"


@pytest.mark.anyio
async def test_unknown_command_and_unknown_user_are_chat_cmd_errors() -> None:
    """A failed command answers chatCmdError with a chatError object; a command the core's
    parser refuses is ``commandError`` "Failed reading: empty"
    (tests/testing/test_simulator_grammar.py)."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        with pytest.raises(ChatCoreError) as info:
            await core.command("/no such command")
        assert info.value.chat_error == {
            "type": "error",
            "errorType": {"type": "commandError", "message": "Failed reading: empty"},
        }
        with pytest.raises(ChatCoreError) as info:
            await core.command("/_address 7 pq_ratchet=on")
        assert info.value.type_path == "errorStore/userNotFound"


@pytest.mark.anyio
async def test_requests_need_a_started_chat() -> None:
    async with exchange(requester_started=False) as ex:
        with pytest.raises(ChatCoreError) as info:
            await ex.alice.command(f"/_service_request 1 {ex.link} timeout=1 {envelope()}")
        assert info.value.type_path == "error/chatNotStarted"


@pytest.mark.anyio
async def test_relays_a_request_as_a_service_request_event_and_returns_the_response() -> None:
    """Exchange: the responder's core reports serviceRequest (requestId, signerKey,
    requestData); /_service_response answers it; the requester's command returns
    serviceResponse with responseData."""

    async with exchange() as ex:
        call, event = await ex.relay(
            f"/_service_request 1 {ex.link} timeout=5 {envelope(request={'q': 2})}"
        )
        assert event["user"]["userId"] == 1
        assert "signerKey" not in event  # unsigned: no signer
        assert event["requestData"] == {"protocol": "mcp", "request": {"q": 2}}
        accepted = await ex.bob.command(
            f"/_service_response 1 {event['requestId']} " + json.dumps({"response": 42})
        )
        assert accepted["type"] == "serviceReplyAccepted"
        assert isinstance(accepted["connectionId"], str)
        resp = await call
        assert resp["type"] == "serviceResponse"
        assert resp["responseData"] == {"response": 42}
        assert ex.sim.stats.delivered == 1 and ex.sim.stats.responses == 1


@pytest.mark.anyio
async def test_signer_key_is_derived_from_sign_key() -> None:
    """Signed requests: the agent verifies the signature and the core reports the key."""

    key = sx.SigningKey.generate()
    async with exchange() as ex:
        call, event = await ex.relay(
            f"/_service_request 1 {ex.link} timeout=5 sign_key={key.encode()} {envelope()}"
        )
        assert sx.PublicKey.decode(event["signerKey"]) == key.public_key
        assert event["signerKey"] == key.public_key.encode()
        await ex.bob.command(f'/_service_response 1 {event["requestId"]} {{"response":1}}')
        assert (await call)["responseData"] == {"response": 1}


@pytest.mark.anyio
async def test_each_request_is_sealed_with_a_fresh_112_byte_ad(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Signed requests are bound to the ratchet session: a new AD per request."""
    seen: list[bytes] = []
    real = os.urandom

    def recording(n: int) -> bytes:
        value = real(n)
        if n == testing.AD_LENGTH:
            seen.append(value)
        return value

    monkeypatch.setattr(testing.os, "urandom", recording)

    key = sx.SigningKey.generate()
    async with exchange() as ex:
        signed = f"/_service_request 1 {ex.link} timeout=5 sign_key={key.encode()} {envelope()}"
        for _ in range(3):
            call, event = await ex.relay(signed)
            await ex.bob.command(f'/_service_response 1 {event["requestId"]} {{"response":0}}')
            await call
    assert len(seen) == 3 and len(set(seen)) == 3
    assert all(len(ad) == 112 for ad in seen)


@pytest.mark.anyio
async def test_an_address_without_ratchet_keys_fails_at_once() -> None:
    """Requirements: a request to an address without ratchet keys fails at once."""

    async with exchange(pq=False) as ex:
        assert "&rk=" not in ex.links["connFullLink"]
        for link in (ex.links["connShortLink"], ex.links["connFullLink"]):
            with pytest.raises(ChatCoreError) as info:
                # A long timeout: the failure must not wait for it.
                await ex.alice.command(
                    f"/_service_request 1 {link} timeout=3600 {envelope()}", timeout=10
                )
            assert info.value.type_path == "errorAgent/AGENT/A_SERVICE/ASENotDRAddress"
        # An upgrade in place (pq_ratchet=on) puts the keys on the short link only:
        # the full link stays as it was, without keys.
        updated = await ex.bob.command(
            '/_address_settings 1 pq_ratchet=on {"businessAddress":false}'
        )
        link = updated["contactLink"]["connLinkContact"]
        assert link["connFullLink"] == ex.links["connFullLink"]
        assert "&rk=" not in link["connFullLink"]
        call, event = await ex.relay(
            f"/_service_request 1 {link['connShortLink']} timeout=5 {envelope()}"
        )
        await ex.bob.command(f'/_service_response 1 {event["requestId"]} {{"response":0}}')
        assert (await call)["type"] == "serviceResponse"
        with pytest.raises(ChatCoreError) as info:
            await ex.alice.command(
                f"/_service_request 1 {ex.links['connFullLink']} timeout=5 {envelope()}"
            )
        assert info.value.type_path.endswith("ASENotDRAddress")


@pytest.mark.anyio
async def test_requests_are_dropped_when_service_requests_are_off() -> None:
    """Requirements: without service_requests=on the core drops each request and the
    requester waits until its timeout."""

    async with exchange(service_requests=False) as ex:
        with pytest.raises(ChatCoreError) as info:
            await ex.alice.command(f"/_service_request 1 {ex.link} timeout=1 {envelope()}")
        assert info.value.type_path == "errorAgent/AGENT/A_SERVICE/ASETimeout"
        assert ex.sim.stats.dropped == 1 and ex.sim.stats.delivered == 0
        assert ex.sim.stats.requester_timeouts == 1


@pytest.mark.anyio
async def test_the_requester_times_out_after_timeout() -> None:
    """timeout: how long the requester waits for the response."""

    async with exchange() as ex:
        with pytest.raises(ChatCoreError) as info:
            await ex.alice.command(f"/_service_request 1 {ex.link} timeout=1 {envelope()}")
        assert info.value.type_path.endswith("ASETimeout")
        event = await next_request(ex.events)
        # Within the window the responder's core still takes the answer.
        accepted = await ex.bob.command(
            f'/_service_response 1 {event["requestId"]} {{"response":0}}'
        )
        assert accepted["type"] == "serviceReplyAccepted"


@pytest.mark.anyio
async def test_a_response_after_the_window_is_refused() -> None:
    """Requirements: the core accepts a response within 180 seconds (here a short window)."""

    async with exchange(response_window=0.05) as ex:
        call, event = await ex.relay(f"/_service_request 1 {ex.link} timeout=1 {envelope()}")
        await asyncio.sleep(0.3)  # the behaviour under test: the 0.05 s window passes
        with pytest.raises(ChatCoreError) as info:
            await ex.bob.command(f'/_service_response 1 {event["requestId"]} {{"response":0}}')
        assert info.value.type_path.endswith("ASETimeout")
        assert ex.sim.stats.late_responses == 1
        with pytest.raises(ChatCoreError):
            await call


@pytest.mark.anyio
async def test_a_request_is_answered_once() -> None:
    async with exchange() as ex:
        call, event = await ex.relay(f"/_service_request 1 {ex.link} timeout=5 {envelope()}")
        rid = event["requestId"]
        await ex.bob.command(f'/_service_response 1 {rid} {{"response":1}}')
        with pytest.raises(ChatCoreError) as info:
            await ex.bob.command(f'/_service_response 1 {rid} {{"response":2}}')
        assert info.value.type_path.endswith("ASENoPendingRequest")
        assert ex.sim.stats.duplicate_responses == 1
        with pytest.raises(ChatCoreError) as info:
            await ex.bob.command('/_service_response 1 nosuchrequest {"response":2}')
        assert info.value.type_path.endswith("ASENoPendingRequest")
        assert (await call)["responseData"] == {"response": 1}


@pytest.mark.anyio
async def test_an_oversized_request_fails_as_the_core_would() -> None:
    """Before encryption the agent pads a request to 11,106 bytes, its framing
    included, and a longer one fails: signed and unsigned limits differ by the
    signer's key and signature."""

    def sized(size: int) -> str:
        base = json.dumps({"protocol": "mcp", "request": ""}, separators=(",", ":"))
        text = json.dumps(
            {"protocol": "mcp", "request": "x" * (size - len(base))}, separators=(",", ":")
        )
        assert len(text) == size
        return text

    key = sx.SigningKey.generate()
    async with exchange() as ex:
        queue = simulator_reply_queue()
        cases = [
            (sx.max_request_payload(queue, signed=False), ""),
            (sx.max_request_payload(queue), f"sign_key={key.encode()} "),
        ]
        for limit, option in cases:
            with pytest.raises(ChatCoreError) as info:
                await ex.alice.command(
                    f"/_service_request 1 {ex.link} timeout=5 {option}{sized(limit + 1)}"
                )
            assert info.value.type_path == "errorAgent/CMD/LARGE"
            call, event = await ex.relay(
                f"/_service_request 1 {ex.link} timeout=5 {option}{sized(limit)}"
            )
            assert len(json.dumps(event["requestData"], separators=(",", ":"))) == limit
            await ex.bob.command(f'/_service_response 1 {event["requestId"]} {{"response":0}}')
            await call


@pytest.mark.anyio
async def test_an_oversized_response_fails_and_the_request_stays_open() -> None:
    async with exchange() as ex:
        call, event = await ex.relay(f"/_service_request 1 {ex.link} timeout=5 {envelope()}")
        rid = event["requestId"]
        big = json.dumps({"response": "x" * sx.MAX_RESPONSE}, separators=(",", ":"))
        with pytest.raises(ChatCoreError) as info:
            await ex.bob.command(f"/_service_response 1 {rid} {big}")
        assert info.value.type_path == "errorAgent/CMD/LARGE"
        await ex.bob.command(f'/_service_response 1 {rid} {{"response":"ok"}}')
        assert (await call)["responseData"] == {"response": "ok"}


@pytest.mark.parametrize(
    ("options", "json_text", "what"),
    [
        ("timeout=0 ", envelope(), "timeout"),
        ("timeout=x ", envelope(), "timeout"),
        ("sign_key=AAAA ", envelope(), "sign_key"),
        ("", "[1, 2]", "JSON object"),
        ("", "{not json", "not JSON"),
    ],
)
@pytest.mark.anyio
async def test_malformed_service_requests_are_command_errors(
    options: str, json_text: str, what: str
) -> None:
    async with CoreSimulator() as sim, ChatCore.connect(sim.url_for("bob")) as bob:
        await started(bob, True)
        link = (await address(bob))["connShortLink"]
        with pytest.raises(ChatCoreError) as info:
            await bob.command(f"/_service_request 1 {link} {options}{json_text}")
        assert info.value.type_path == "error/commandError"
        assert what in str(info.value)


@pytest.mark.anyio
async def test_unknown_targets() -> None:
    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        await started(core, True)
        with pytest.raises(ChatCoreError) as info:
            await core.command(f"/_service_request 1 https://example.com {envelope()}")
        assert info.value.type_path == "error/invalidConnReq"
        gone = "simplex:/a#AAAAAAAAAAAAAAAAAAAAAAAA?h=simulator.local"
        with pytest.raises(ChatCoreError) as info:
            await core.command(f"/_service_request 1 {gone} {envelope()}")
        assert info.value.type_path == "errorAgent/SMP/AUTH"


@pytest.mark.anyio
async def test_address_commands() -> None:
    """/_address, /_show_address, /_address_settings, /_delete_address (COMMANDS.md)."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        with pytest.raises(ChatCoreError) as info:
            await core.command("/_show_address 1")
        assert info.value.type_path == "errorStore/userContactLinkNotFound"
        created = await address(core)
        with pytest.raises(ChatCoreError) as info:
            await core.command("/_address 1")
        assert info.value.type_path == "errorStore/duplicateContactLink"
        shown = await core.command("/_show_address 1")
        assert shown["contactLink"]["connLinkContact"] == created
        assert shown["contactLink"]["addressSettings"] == {"businessAddress": False}
        deleted = await core.command("/_delete_address 1")
        assert deleted["type"] == "userContactLinkDeleted"
        assert (await core.command("/user"))["user"]["userId"] == 1


@pytest.mark.anyio
async def test_drop_connections_fails_pending_commands() -> None:
    async with exchange() as ex:
        call = asyncio.create_task(
            ex.alice.command(f"/_service_request 1 {ex.link} timeout=30 {envelope()}")
        )
        await until(
            lambda: sum(t.in_flight for t in ex.alice._transports()) >= 1, "the request sent"
        )
        # ChatCore's pool: its first connection, and the request's own (a blocking
        # /_service_request never runs on the first).
        assert await ex.sim.drop_connections("alice") == 2
        with pytest.raises(ChatCoreClosed):
            await call
        assert ex.alice.closed and not ex.bob.closed


@pytest.mark.anyio
async def test_native_handle_speaks_result_and_error(simulator: CoreSimulator) -> None:
    """The native API's results: {"result": resp} or {"error": chatError}."""

    handle = simulator.native_handle("n")

    def commands() -> list[dict[str, Any]]:
        return [
            json.loads(handle.chat_send_cmd("/_start main=on service_requests=on")),
            json.loads(handle.chat_send_cmd("/_show_address 1")),
            json.loads(handle.chat_recv_msg_wait(1000) or "{}"),
        ]

    started_, missing, nothing = await asyncio.to_thread(commands)
    assert started_ == {"result": {"type": "chatStarted"}}
    assert missing == {
        "error": {"type": "errorStore", "storeError": {"type": "userContactLinkNotFound"}}
    }
    assert nothing == {}
    await asyncio.to_thread(handle.close)


def test_simulator_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError):
        CoreSimulator(users=())
    with pytest.raises(ValueError):
        CoreSimulator(response_window=0)
    with pytest.raises(ValueError):
        CoreSimulator().url_for("no/slash")
    with pytest.raises(RuntimeError):
        CoreSimulator().native_handle()


# -- one source for the simulator's answers (final review) ---------------------------------


def test_the_simulator_builds_its_chat_errors_in_one_place() -> None:
    """ChatError (simplex-chat bots/api/TYPES.md: chatCmdError with errorStore or error)
    is built by one set of functions, so the Service RPC side and the chat side of the
    simulator answer with the same shapes."""
    from simplex_rpc.testing import _chat

    for name in ("_cmd_error", "_chat_error", "_store_error"):
        assert getattr(testing, name) is getattr(_chat, name), name
    assert _chat._store_error("userNotFound", userId=2) == {
        "type": "chatCmdError",
        "chatError": {"type": "errorStore", "storeError": {"type": "userNotFound", "userId": 2}},
    }


@pytest.mark.anyio
async def test_the_simulator_reads_an_address_token_from_its_short_and_full_links() -> None:
    """A contact address has a short and a full link (CreatedConnLink, TYPES.md); both
    name the same address, and nothing else (a group link, a foreign link) is one."""
    from simplex_rpc.testing._grammar import link_token as _link_token

    async with cores() as (sim, bob, _alice):
        await started(bob, service_requests=True)
        created = await bob.service_address(1)
        assert created.short_link is not None
        token = _link_token(created.short_link)
        assert token is not None
        assert _link_token(created.full_link) == token
        ids = sim.create_group("team", "bob", [])
        assert _link_token(sim.group_link("bob", ids[("bob", 1)])) is None
        assert _link_token("simplex:/a#abc?h=example") is None
        assert _link_token(created.short_link + " ") is None

"""The adapter's requester side and its connection to the core, over real loopback WebSockets.

Rules pinned: the exact ``/_service_request`` text ("Service RPC transport",
Exchange), ``responseData`` as the response, the retry rule ("A requester
treats an unknown code as final, unless the error has retryAfter"), the
core's refusals as ChatCoreError with the core's object, and the connection's
lifecycle (corrId matching, a dropped connection, a clean close).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import pytest

import simplex_rpc as sx
from _scripted_core import ScriptedCore, request_event
from _support import FakeCore, Held, background_serve, cores, pair
from _waiting import until
from simplex_rpc import ErrorCode, Request, Response
from simplex_rpc.adapter import (
    ChatCore,
    ChatCoreClosed,
    ChatCoreTimeout,
    ServiceAddress,
    ServiceRequest,
    service_request_command,
)
from simplex_rpc.adapter import _service as adapter_service
from simplex_rpc.errors import ChatCoreError, EnvelopeError, SimplexRpcError
from simplex_rpc.testing import CoreSimulator

LINK = "simplex:/a#abc?h=example"


def echo(request: ServiceRequest) -> Any:
    return {
        "echo": request.request.request,
        "signer": request.signer.encode() if request.signer else None,
    }


# -- the command text ----------------------------------------------------------


def test_service_request_command_is_exact() -> None:
    """/_service_request <userId> <target> [timeout=<seconds>] [sign_key=<key>] <json>."""
    key = sx.SigningKey.from_seed(bytes(range(32)))
    request = Request(protocol="mcp", request={"a": [1, "é"]})
    assert (
        service_request_command(1, LINK, request, timeout=None)
        == '/_service_request 1 simplex:/a#abc?h=example {"protocol":"mcp","request":{"a":[1,"é"]}}'
    )
    assert service_request_command(7, LINK, request, timeout=45, sign_key=key) == (
        f"/_service_request 7 {LINK} timeout=45 sign_key={key.encode()} "
        '{"protocol":"mcp","request":{"a":[1,"é"]}}'
    )
    assert service_request_command(2, LINK, request).startswith(
        f"/_service_request 2 {LINK} timeout=30 {{"
    )


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((0, LINK), {}),
        ((True, LINK), {}),
        ((1, ""), {}),
        ((1, "two words"), {}),
        ((1, "line\nbreak"), {}),
        ((1, "timeout=5"), {}),
        ((1, "sign_key=x"), {}),
        ((1, LINK), {"timeout": 0}),
        ((1, LINK), {"timeout": True}),
        ((1, LINK), {"timeout": 1.5}),
    ],
)
def test_service_request_command_refuses_bad_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    request = Request(protocol="mcp", request=1)
    with pytest.raises(SimplexRpcError):
        service_request_command(*args, request, **kwargs)


def test_service_request_command_type_checks() -> None:
    with pytest.raises(TypeError):
        service_request_command(1, LINK, {"protocol": "mcp"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        service_request_command(1, LINK, Request(protocol="mcp", request=1), sign_key="k")  # type: ignore[arg-type]


# -- round trips ------------------------------------------------------------------


@pytest.mark.anyio
async def test_unsigned_round_trip() -> None:
    """An unsigned request has only the payload: the responder sees no signer."""

    async with pair(echo) as p:
        response = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request={"q": "anvil"}), timeout=5
        )
        assert response == Response.success({"echo": {"q": "anvil"}, "signer": None})


@pytest.mark.anyio
async def test_signed_round_trip_with_request_key() -> None:
    """A signed request: the core reports the verified key; requestKey matches it."""
    key = sx.SigningKey.generate()

    async with pair(echo) as p:
        request = Request(protocol="mcp", request=[1, 2], request_key=key.public_key)
        response = await p.alice.service_request(1, p.link, request, timeout=5, sign_key=key)
        assert response.ok
        assert response.response == {"echo": [1, 2], "signer": key.public_key.encode()}


@pytest.mark.parametrize("value", [None, 0, "text", [1, {"b": None}], {"nested": {"deep": True}}])
@pytest.mark.anyio
async def test_any_json_value_is_a_success(value: Any) -> None:
    async with pair(lambda r: Response.success(value)) as p:
        response = await p.alice.service_request(1, p.link, Request(protocol="mcp", request=1))
        assert response.ok and response.response == value


@pytest.mark.anyio
async def test_response_data_may_be_a_json_string() -> None:
    """responseData: a JSON value, or the response's JSON text as a string."""

    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        fake.answers["/_service_request"] = {
            "type": "serviceResponse",
            "responseData": json.dumps({"response": {"ok": 1}}),
        }
        response = await core.service_request(1, LINK, Request(protocol="mcp", request=1))
        assert response == Response.success({"ok": 1})
        fake.answers["/_service_request"] = {
            "type": "serviceResponse",
            "responseData": {"response": 1, "error": {"code": "internal"}},
        }
        with pytest.raises(EnvelopeError, match="both"):
            await core.service_request(1, LINK, Request(protocol="mcp", request=1))
        fake.answers["/_service_request"] = {"type": "serviceResponse", "responseData": 5}
        with pytest.raises(EnvelopeError):
            await core.service_request(1, LINK, Request(protocol="mcp", request=1))
        fake.answers["/_service_request"] = {"type": "cmdOk"}
        with pytest.raises(ChatCoreError, match="unexpected answer"):
            await core.service_request(1, LINK, Request(protocol="mcp", request=1))


# -- core errors -------------------------------------------------------------------


@pytest.mark.anyio
async def test_core_errors_carry_the_core_error_object() -> None:
    """A request to an address without ratchet keys fails at once, as a ChatCoreError."""

    async with cores() as (_, bob, alice):
        await bob.start()
        created = await bob.command("/_address 1")  # no pq_ratchet: no ratchet keys
        link = created["connLinkContact"]["connShortLink"]
        await alice.start(service_requests=False)
        with pytest.raises(ChatCoreError) as info:
            await alice.service_request(1, link, Request(protocol="mcp", request=1), timeout=3600)
        err = info.value
        assert isinstance(err.chat_error, dict)
        assert err.chat_error["agentError"]["agentErr"]["serviceError"] == {
            "type": "ASENotDRAddress"
        }
        assert err.type_path == "errorAgent/AGENT/A_SERVICE/ASENotDRAddress"
        assert "ASENotDRAddress" in str(err) and "/_service_request" in str(err)
        # service_address adds the keys to the existing address: an upgrade in place
        # puts them on its short link only (issue 28, item 4), which is what it returns;
        # the full link still fails ASENotDRAddress.
        address = await bob.service_address(1)
        assert address.short_link == link and address.link == link
        assert "&rk=" not in address.full_link
        with pytest.raises(ChatCoreError) as info:
            await alice.service_request(
                1, address.full_link, Request(protocol="mcp", request=1), timeout=3600
            )
        assert info.value.type_path.endswith("ASENotDRAddress")


@pytest.mark.anyio
async def test_a_dropped_request_times_out() -> None:
    """Without service_requests=on the responder's core drops the request."""

    async with cores() as (_, bob, alice):
        await bob.start(service_requests=False)
        link = (await bob.service_address(1)).link
        await alice.start(service_requests=False)
        with pytest.raises(ChatCoreError) as info:
            await alice.service_request(1, link, Request(protocol="mcp", request=1), timeout=1)
        assert info.value.type_path.endswith("A_SERVICE/ASETimeout")


# -- retries ------------------------------------------------------------------------


class Flaky:
    """Answers ``error`` for the first ``failures`` calls, then a success."""

    def __init__(self, error: Response, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.calls = 0

    def __call__(self, request: ServiceRequest) -> Response:
        self.calls += 1
        return self.error if self.calls <= self.failures else Response.success("done")


@pytest.mark.anyio
async def test_retry_after_is_repeated_up_to_the_bound() -> None:
    """retryAfter: the number of seconds after which a repeated request can succeed."""

    flaky = Flaky(Response.failure(ErrorCode.RATE_LIMITED, retry_after=0), failures=2)
    async with pair(flaky) as p:
        request = Request(protocol="mcp", request=1)
        response = await p.alice.service_request(1, p.link, request, retries=2)
        assert response == Response.success("done") and flaky.calls == 3
        flaky.calls = 0
        response = await p.alice.service_request(1, p.link, request, retries=1)
        assert response.error is not None and response.error.retry_after == 0
        assert flaky.calls == 2


@pytest.mark.anyio
async def test_unknown_code_without_retry_after_is_final() -> None:
    """A requester treats an unknown code as final, unless the error has retryAfter."""

    final = Flaky(Response.failure("no_such_code"), failures=5)
    async with pair(final) as p:
        response = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=1), retries=3
        )
        assert response.error is not None and response.error.code == "no_such_code"
        assert response.error.known_code is None
        assert final.calls == 1
    unknown_retry = Flaky(Response.failure("no_such_code", retry_after=0), failures=1)
    async with pair(unknown_retry) as p:
        response = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=1), retries=3
        )
        assert response.ok and unknown_retry.calls == 2


@pytest.mark.anyio
async def test_retry_after_beyond_the_callers_bound_is_not_waited_for() -> None:
    slow = Flaky(Response.failure(ErrorCode.RATE_LIMITED, retry_after=3600), failures=1)
    async with pair(slow) as p:
        response = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=1), retries=5, max_retry_after=60
        )
        assert response.error is not None and response.error.retry_after == 3600
        assert slow.calls == 1
        with pytest.raises(SimplexRpcError):
            await p.alice.service_request(1, p.link, Request(protocol="mcp", request=1), retries=-1)


# -- the connection ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_answers_are_matched_by_corr_id() -> None:
    """Each answer reaches its own command, by corrId (numeric or text); a command sent
    behind one the core still runs waits for it (Server.hs: one command at a time per
    connection), and odd frames meanwhile are ignored."""

    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        fake.silent.add("/slow")
        slow = asyncio.create_task(core.command("/slow"))
        assert await fake.commands.get() == "/slow"
        fast = asyncio.create_task(core.command("/fast"))
        await asyncio.sleep(0.05)  # the behaviour under test: /fast waits (an absence)
        assert not slow.done() and not fast.done()  # /fast waits behind /slow
        # An answer to no pending command, and odd messages, are ignored.
        await fake.send_raw(json.dumps({"corrId": "999", "resp": {"type": "late"}}))
        await fake.send_raw("not json")
        await fake.send_raw(json.dumps({"corrId": "1"}))
        await fake.send_raw(b"\x00binary")
        # The slow command is number 1: a numeric corrId is accepted too.
        await fake.send_raw(json.dumps({"corrId": 1, "resp": {"type": "slowOk"}}))
        fake.answer_silent("1", None)
        assert await slow == {"type": "slowOk"}
        assert await fast == {"type": "cmdOk"}


@pytest.mark.anyio
async def test_a_command_without_answer_times_out() -> None:
    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        fake.silent.add("/never")
        with pytest.raises(ChatCoreTimeout, match="/never"):
            await core.command("/never", timeout=0.2)
        with pytest.raises(SimplexRpcError):
            await core.command("/two\nlines")


@pytest.mark.anyio
async def test_a_connection_whose_command_is_never_answered_is_dropped_and_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The core runs one command at a time per connection (Server.hs), so a command it
    never answers would hold its connection, and every command behind it, until the core
    closes. Its own timeout plus a margin later the connection is dropped (a WARNING names
    the command), what was sent behind it fails with ChatCoreClosed (it may have run: the
    caller cannot know), and the next command goes on a new connection."""

    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        core._overdue_margin = 0.2
        fake.silent.add("/never")
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            with pytest.raises(ChatCoreTimeout):
                await core.command("/never", timeout=0.2)
            behind = asyncio.create_task(core.command("/other"))
            with pytest.raises(ChatCoreClosed, match="unanswered"):
                await behind
            await until(
                lambda: len(fake.connections) == 1 and not core._transport.retired,
                "the stuck connection replaced",
            )
        assert await core.command("/other") == {"type": "cmdOk"}
        assert not core.closed
        stream = core.events()
        await fake.event({"type": "contactConnected"})  # events still reach the core
        async with asyncio.timeout(5):
            assert (await anext(stream))["type"] == "contactConnected"
    lines = [r.getMessage() for r in caplog.records if "/never" in r.getMessage()]
    assert len(lines) == 1 and "dropped" in lines[0], lines


@pytest.mark.anyio
async def test_a_service_request_never_answered_has_its_lane_dropped_and_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A /_service_request the core never answers would keep its lane taken until the core
    closes (the lane is given back only on the core's answer). Its own timeout plus the
    margin later the lane is dropped (one WARNING), and the request waiting for a lane
    gets a new one."""

    async with FakeCore() as fake, ChatCore.connect(fake.url, connections=3) as core:
        core._overdue_margin = 0.2
        fake.silent.add("/_service_request")
        cmd = '/_service_request 1 simplex:/a#x timeout=30 {"protocol":"mcp","request":1}'
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            with pytest.raises(ChatCoreTimeout):
                await core.command(cmd, timeout=0.2)
            fake.silent.discard("/_service_request")
            fake.answers["/_service_request"] = {"type": "serviceResponse"}
            assert core._lanes is not None and core._lanes.busy == 1
            # The pool's one lane is taken: this waits, then goes on the new lane.
            assert (await core.command(cmd, timeout=10))["type"] == "serviceResponse"
        assert core._lanes.busy == 0 and len(core._lanes.lanes) == 1
        assert not core.closed
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 1 and "/_service_request" in lines[0], lines


@pytest.mark.anyio
async def test_an_answer_never_acknowledged_has_the_answers_connection_replaced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """serve's answers have a connection of their own; an answer the core never
    acknowledges would hold it, and every answer behind it. Past the acknowledgement's
    wait plus the margin it is dropped (one WARNING) and a new one opened: the next
    request is answered on it."""
    monkeypatch.setattr(adapter_service, "DEFAULT_COMMAND_TIMEOUT", 0.2)

    async def echo(request: Any) -> Any:
        return request.request.request

    async def answered(fake: FakeCore, request_id: str) -> None:
        while True:
            cmd = await asyncio.wait_for(fake.commands.get(), 10)
            if cmd.startswith(f"/_service_response 1 {request_id} "):
                return

    async with (
        FakeCore() as fake,
        ChatCore.connect(fake.url) as core,
        background_serve(core, echo, protocols=("mcp",)),
    ):
        core._overdue_margin = 0.2
        await until(
            lambda: len(fake.connections) >= 2 and core._answers is not None,
            "serve's answers' connection",
        )
        first = core._answers
        fake.silent.add("/_service_response")
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            await fake.event(request_event("r1", {"n": 1}))
            await answered(fake, "r1")
            fake.silent.discard("/_service_response")
            await until(
                lambda: core._answers is not None and core._answers is not first,
                "a new answers' connection",
            )
            await fake.event(request_event("r2", {"n": 2}))
            await answered(fake, "r2")
        assert not core.closed
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 1 and "/_service_response" in lines[0], lines


@pytest.mark.anyio
async def test_the_connection_dropped_mid_request_fails_every_pending_command() -> None:
    hold = Held("late")
    async with pair(hold) as p:
        calls = [
            asyncio.create_task(
                p.alice.service_request(1, p.link, Request(protocol="mcp", request=i), timeout=30)
            )
            for i in range(5)
        ]
        events = p.alice.events()
        await until(
            lambda: sum(t.in_flight for t in p.alice._transports()) >= 5,
            "the five requests sent",
        )
        # The pool: the first connection, and one per service request in flight.
        assert await p.sim.drop_connections("alice") == 6
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, ChatCoreClosed) for r in results)
        assert "closed" in str(results[0])
        with pytest.raises(ChatCoreClosed):
            await p.alice.command("/user")
        with pytest.raises(ChatCoreClosed):
            async for _ in events:
                pass
        assert p.alice.closed
        hold.release.set()
        # The responder is unaffected.
        async with ChatCore.connect(p.sim.url_for("alice")) as again:
            response = await again.service_request(1, p.link, Request(protocol="mcp", request=0))
            assert response.response == "late"


@pytest.mark.anyio
async def test_the_responder_connection_dropped_ends_serve() -> None:
    async with pair(echo) as p:
        await p.sim.drop_connections("bob")
        with pytest.raises(ChatCoreClosed):
            await p.serving


@pytest.mark.anyio
async def test_clean_close() -> None:
    """Closing fails what is pending, ends event streams, and refuses new commands."""

    async with FakeCore() as fake:
        fake.silent.add("/wait")
        async with ChatCore.connect(fake.url) as core:
            pending = asyncio.create_task(core.command("/wait"))
            events = core.events()
            assert await fake.commands.get() == "/wait"
        with pytest.raises(ChatCoreClosed):
            await pending
        assert [e async for e in events] == []
        assert core.closed and "closed" in repr(core)
        with pytest.raises(ChatCoreClosed):
            await core.command("/user")
        assert [e async for e in core.events()] == []
        await core.close()  # idempotent


@pytest.mark.anyio
async def test_the_core_closing_the_connection_fails_pending_commands() -> None:
    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        fake.silent.add("/wait")
        pending = asyncio.create_task(core.command("/wait"))
        assert await fake.commands.get() == "/wait"
        await fake.close_connection(code=1000)
        with pytest.raises(ChatCoreClosed, match="code 1000"):
            await pending


@pytest.mark.anyio
async def test_connecting_to_nothing_fails_clearly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    with pytest.raises(ChatCoreClosed, match="cannot connect"):
        async with ChatCore.connect(f"ws://127.0.0.1:{port}", open_timeout=2):
            pass


@pytest.mark.anyio
async def test_start_with_service_requests_on_a_running_chat_names_both_ways_out() -> None:
    """Issue 28, item 3: a running chat answers /_start with chatRunning and keeps its
    settings (StartChat, Commands.hs), so service_requests=on would silently not apply:
    start() raises a ChatCoreError naming `-m` and restart=True instead."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        assert await core.start(service_requests=True) is True
        with pytest.raises(ChatCoreError) as caught:
            await core.start(service_requests=True)
        text = str(caught.value)
        assert "already running" in text
        assert "simplex-chat -p PORT -m" in text and "restart=True" in text
        # Without service requests a running chat is what was wanted: False.
        assert await core.start(service_requests=False) is False


@pytest.mark.anyio
async def test_start_with_restart_stops_and_starts_the_chat_with_service_requests_on() -> None:
    """restart=True: /_stop (chatStopped), then /_start main=on service_requests=on, which
    must answer chatStarted."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        assert await core.start(service_requests=False) is True
        sent: list[str] = []
        command = core.command

        async def recording(cmd: str, **options: Any) -> dict[str, Any]:
            sent.append(cmd)
            return await command(cmd, **options)

        core.command = recording  # type: ignore[method-assign]
        assert await core.start(service_requests=True, restart=True) is True
        assert sent == [
            "/_start main=on service_requests=on",
            "/_stop",
            "/_start main=on service_requests=on",
        ]


@pytest.mark.anyio
async def test_events_are_delivered_to_every_stream() -> None:
    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        first, second = core.events(), core.events()
        await fake.event({"type": "contactConnected"})
        assert (await anext(first))["type"] == "contactConnected"
        assert (await anext(second))["type"] == "contactConnected"
        second.close()
        await fake.event({"type": "newChatItems"})
        assert (await anext(first))["type"] == "newChatItems"


@pytest.mark.anyio
async def test_a_full_event_stream_drops_events_without_blocking_answers() -> None:
    async with FakeCore() as fake, ChatCore.connect(fake.url, event_buffer=2) as core:
        stream = core.events()
        for i in range(5):
            await fake.event({"type": f"e{i}"})
        assert await core.command("/still-answered") == {"type": "cmdOk"}
        assert stream.dropped == 3
        assert [(await anext(stream))["type"] for _ in range(2)] == ["e0", "e1"]


@pytest.mark.anyio
async def test_service_address_creates_then_reuses() -> None:
    async with CoreSimulator() as sim, ChatCore.connect(sim.url) as core:
        first = await core.service_address(1)
        again = await core.service_address(1, pq_ratchet=False)
        assert isinstance(first, ServiceAddress)
        assert first == again and first.link == first.short_link
        with pytest.raises(ChatCoreError) as info:
            await core.service_address(9)
        assert info.value.type_path == "errorStore/userNotFound"
    with pytest.raises(ChatCoreError):
        ServiceAddress.from_created_link({"connShortLink": "x"})
    assert ServiceAddress.from_created_link({"connFullLink": "f"}).link == "f"


@pytest.mark.anyio
async def test_service_address_adds_a_short_link_to_an_address_without_one(
    scripted_core: ScriptedCore,
) -> None:
    """Issue 28, item 4: only the short link carries the ratchet keys after an upgrade, so
    service_address always returns one: an address made before short links (a full link
    alone, even after /_address_settings) gets one with
    `/_short_link_address <userId> pq_ratchet=on` (APIAddMyAddressShortLink)."""
    full = "simplex:/contact#/?v=2-7&smp=smp%3A%2F%2Fhost%2Ftoken"
    short = "simplex:/a#token?h=host"

    def answer(resp: dict[str, Any]) -> Any:
        return lambda corr_id, cmd: json.dumps({"corrId": corr_id, "resp": resp})

    def contact_link(links: dict[str, str]) -> dict[str, Any]:
        return {"contactLink": {"connLinkContact": links, "addressSettings": {}}}

    async with ChatCore.connect(scripted_core.url) as core:
        scripted_core.raw["/_show_address"] = answer(
            {"type": "userContactLink", **contact_link({"connFullLink": full})}
        )
        scripted_core.raw["/_address_settings"] = answer(
            {"type": "userContactLinkUpdated", **contact_link({"connFullLink": full})}
        )
        scripted_core.raw["/_short_link_address"] = answer(
            {
                "type": "userContactLink",
                **contact_link({"connFullLink": full, "connShortLink": short}),
            }
        )
        address = await core.service_address(1)
        assert address.link == short and address.full_link == full
        sent = [scripted_core.commands.get_nowait() for _ in range(scripted_core.commands.qsize())]
        assert sent[-1] == "/_short_link_address 1 pq_ratchet=on"
        # A core that makes no short link: a clear error, not a link without keys.
        scripted_core.raw["/_short_link_address"] = answer(
            {"type": "userContactLink", **contact_link({"connFullLink": full})}
        )
        with pytest.raises(ChatCoreError, match="no short link"):
            await core.service_address(1)

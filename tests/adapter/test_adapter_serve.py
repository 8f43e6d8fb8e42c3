"""The adapter's responder (``ChatCore.serve``): each step, each error code, concurrency.

Rules pinned (protocol text, "Service RPC transport"): bad_request for an
invalid envelope and for requestKey without or against the verified signer;
unsupported_protocol and unsupported_version; rate_limited with retryAfter;
internal when the responder failed; too_large when the response exceeds the
limit; the 180-second window (a handler deadline below it, answered
conversation_required for A2A, whose binding says "a bot that cannot finish
the task within 180 seconds answers with the envelope error
conversation_required"); and one response per request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

import simplex_rpc as sx
from _scripted_core import responder_of, taken
from _support import (
    FakeCore,
    Held,
    background_serve,
    fake_serving,
    pair,
    service_request_event,
)
from _waiting import until
from simplex_rpc import ErrorCode, Request, Response
from simplex_rpc.adapter import ChatCore, RateLimit, ServiceRequest, _Limiter
from simplex_rpc.errors import SimplexRpcError


def ok(request: ServiceRequest) -> Any:
    return {"got": request.request.request}


async def ask(p: Any, request: Request, **kwargs: Any) -> Response:
    response: Response = await p.alice.service_request(1, p.link, request, timeout=5, **kwargs)
    return response


def code(response: Response) -> str | None:
    return response.error.code if response.error is not None else None


# -- requestKey (bad_request) ----------------------------------------------------------


async def ask_raw(p: Any, request: Request, sign_key: sx.SigningKey | None = None) -> Response:
    """Send a request as a requester that ignores its own MUSTs (the command written by hand)."""
    cmd = f"/_service_request 1 {p.link} timeout=5"
    if sign_key is not None:
        cmd += f" sign_key={sign_key.encode()}"
    answer = await p.alice.command(f"{cmd} {request.to_json().decode()}", timeout=20)
    return Response.parse(json.dumps(answer["responseData"]))


@pytest.mark.anyio
async def test_request_key_must_match_the_verified_signer() -> None:
    """A responder MUST answer bad_request to a request whose requestKey differs from
    signerKey, and to an unsigned request with requestKey."""
    signer, other = sx.SigningKey.generate(), sx.SigningKey.generate()

    async with pair(ok) as p:
        named = Request(protocol="mcp", request=1, request_key=other.public_key)
        response = await ask_raw(p, named, sign_key=signer)
        assert code(response) == "bad_request"
        assert response.error is not None and "differs" in (response.error.message or "")
        response = await ask_raw(p, named)
        assert code(response) == "bad_request"
        assert response.error is not None and "unsigned" in (response.error.message or "")
        response = await ask(p, named, sign_key=other)
        assert response.ok


@pytest.mark.anyio
async def test_requester_refuses_a_request_key_it_does_not_sign_with() -> None:
    """A request with requestKey MUST be signed with that key: the requester refuses
    before sending (no request reaches the core)."""
    signer, other = sx.SigningKey.generate(), sx.SigningKey.generate()

    async with pair(ok) as p:
        named = Request(protocol="mcp", request=1, request_key=other.public_key)
        for kwargs in ({"sign_key": signer}, {}):
            with pytest.raises(SimplexRpcError, match="requestKey") as info:
                await ask(p, named, **kwargs)
            assert signer.encode() not in str(info.value)
        assert p.sim.stats.requests == 0


# -- protocol and version --------------------------------------------------------------


@pytest.mark.anyio
async def test_unsupported_protocol() -> None:
    """unsupported_protocol: the responder does not serve the protocol over Service RPC."""

    async with pair(ok, protocols=("mcp",)) as p:
        assert code(await ask(p, Request(protocol="a2a", request=1))) == "unsupported_protocol"
        assert (await ask(p, Request(protocol="mcp", request=1))).ok


@pytest.mark.anyio
async def test_unsupported_version_where_a_version_list_is_given() -> None:
    """unsupported_version: the responder does not serve the requested version."""

    versions = {"weather": ["1.0", {"major": 2}]}
    async with pair(ok, protocols=("weather", "mcp"), versions=versions) as p:
        assert (await ask(p, Request(protocol="weather", request=1, version="1.0"))).ok
        assert (await ask(p, Request(protocol="weather", request=1, version={"major": 2}))).ok
        response = await ask(p, Request(protocol="weather", request=1, version="3.0"))
        assert code(response) == "unsupported_version"
        # 1 is not "1.0", and True is not 1: versions compare as JSON.
        assert code(await ask(p, Request(protocol="weather", request=1, version=1))) == (
            "unsupported_version"
        )
        # Without a version the binding's own versioning applies.
        assert (await ask(p, Request(protocol="weather", request=1))).ok
        # No list for mcp: any version passes to the handler.
        assert (await ask(p, Request(protocol="mcp", request=1, version="x"))).ok


# -- the handler ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_handler_sees_the_request() -> None:
    key = sx.SigningKey.generate()
    seen: list[ServiceRequest] = []

    async def handler(request: ServiceRequest) -> Response:
        seen.append(request)
        return Response.failure(ErrorCode.CONVERSATION_REQUIRED, "connect to the address")

    async with pair(handler) as p:
        request = Request(protocol="a2a", request={"m": 1}, version="1.0", extra={"x-trace": 5})
        response = await ask(p, request, sign_key=key)
        assert code(response) == "conversation_required"
        assert response.error is not None and response.error.message == "connect to the address"
    (only,) = seen
    assert only.signer == key.public_key and only.user_id == 1
    assert only.request == Request(
        protocol="a2a", request={"m": 1}, version="1.0", extra={"x-trace": 5}
    )
    assert isinstance(only.request_id, str) and only.request_id


@pytest.mark.anyio
async def test_a_handler_that_raises_is_answered_internal_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """internal: the responder failed. The loop goes on."""

    def handler(request: ServiceRequest) -> Any:
        if request.request.request == "boom":
            raise RuntimeError("secret database password in the message")
        return "fine"

    async with pair(handler) as p:
        with caplog.at_level(logging.ERROR, logger="simplex_rpc.adapter"):
            response = await ask(p, Request(protocol="mcp", request="boom"))
        assert code(response) == "internal"
        assert "password" not in response.to_json().decode()
        assert (await ask(p, Request(protocol="mcp", request="again"))).response == "fine"
        assert not p.serving.done()
    assert "RuntimeError" in caplog.text


@pytest.mark.anyio
async def test_a_result_that_is_not_json_is_answered_internal() -> None:
    async with pair(lambda r: {"not": {1, 2}}) as p:
        assert code(await ask(p, Request(protocol="mcp", request=1))) == "internal"


@pytest.mark.anyio
async def test_a_hanging_handler_is_cut_at_the_deadline() -> None:
    """The core accepts a response within 180 seconds: the handler's deadline is below it.
    A2A: conversation_required; other protocols: internal. The loop goes on."""
    cancelled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        if request.request.request == "hang":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(request.request.protocol)
                raise
        return "quick"

    async with pair(handler, handler_timeout=0.2) as p:
        a2a, other = await asyncio.gather(
            ask(p, Request(protocol="a2a", request="hang")),
            ask(p, Request(protocol="mcp", request="hang")),
        )
        assert code(a2a) == "conversation_required"
        assert code(other) == "internal"
        assert (await ask(p, Request(protocol="mcp", request="now"))).response == "quick"
    assert sorted(cancelled) == ["a2a", "mcp"]


@pytest.mark.anyio
async def test_the_deadline_counts_from_arrival_not_from_a_free_slot() -> None:
    """The core accepts a response within 180 seconds of receiving the request: a request
    that waited for a concurrency slot has that much less time; one still waiting at its
    deadline is answered in the window (rate_limited, with retryAfter) instead of after it."""

    started, release = asyncio.Event(), asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        if request.request_id == "first":
            started.set()
            await release.wait()
            # Holds the only slot (and the loop) past the second request's deadline;
            # the margins are wide so that a loaded machine cannot blur the two.
            time.sleep(2.5)
            return "one"
        return "two"

    async with (
        FakeCore() as fake,
        ChatCore.connect(fake.url) as core,
        background_serve(core, handler, protocols=("mcp",), concurrency=1, handler_timeout=2.0),
    ):
        await fake.event(service_request_event("first"))
        await started.wait()
        await fake.event(service_request_event("second"))
        await until(lambda: taken(core) >= 2, "the second event read")
        release.set()
        answers = dict([await answer_of(fake), await answer_of(fake)])
    assert answers["first"] == {"response": "one"}
    # Still waiting for the slot at its deadline: shed, with a retryAfter.
    assert answers["second"]["error"]["code"] == "rate_limited"
    assert answers["second"]["error"]["retryAfter"] >= 1


@pytest.mark.anyio
async def test_a_handler_raising_timeout_error_itself_is_internal() -> None:
    async def handler(request: ServiceRequest) -> str:
        raise TimeoutError("upstream")

    async with pair(handler) as p:
        assert code(await ask(p, Request(protocol="a2a", request=1))) == "internal"


def test_the_default_deadline_is_below_the_core_window() -> None:
    from simplex_rpc import adapter

    assert adapter.DEFAULT_HANDLER_TIMEOUT == 170.0 < adapter.RESPONSE_WINDOW == 180.0


# -- size ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_response_that_does_not_fit_is_answered_too_large() -> None:
    """too_large: the response exceeds the size limit: 10,000 bytes by default (the
    SHOULD), what fits the padded block when max_response_bytes allows it."""

    def handler(request: ServiceRequest) -> Any:
        size = int(request.request.request)
        base = len(Response.success("").to_json())
        return "x" * (size - base)

    async with pair(handler, max_response_bytes=sx.MAX_RESPONSE) as p:
        fits = await ask(p, Request(protocol="mcp", request=sx.MAX_RESPONSE))
        assert fits.ok and len(fits.to_json()) == sx.MAX_RESPONSE
        too_big = await ask(p, Request(protocol="mcp", request=sx.MAX_RESPONSE + 1))
        assert code(too_big) == "too_large"
    async with pair(handler) as p:
        assert (await ask(p, Request(protocol="mcp", request=10_000))).ok
        assert code(await ask(p, Request(protocol="mcp", request=10_001))) == "too_large"


# -- rate limit ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_rate_limit_per_signer_answers_retry_after() -> None:
    """rate_limited: the requester repeats the request after retryAfter."""
    first, second = sx.SigningKey.generate(), sx.SigningKey.generate()

    async with pair(ok, rate_limit=RateLimit(requests=2, per=3600)) as p:
        request = Request(protocol="mcp", request=1)
        assert (await ask(p, request, sign_key=first)).ok
        assert (await ask(p, request, sign_key=first)).ok
        limited = await ask(p, request, sign_key=first)
        assert code(limited) == "rate_limited"
        assert limited.error is not None and limited.error.retry_after is not None
        assert 1 <= limited.error.retry_after <= 1800
        assert not limited.error.is_final()
        # Another key has its own bucket; unsigned requests share one.
        assert (await ask(p, request, sign_key=second)).ok
        assert (await ask(p, request)).ok
        assert (await ask(p, request)).ok
        assert code(await ask(p, request)) == "rate_limited"


def test_limiter_refills_and_stays_bounded() -> None:
    now = [0.0]
    limiter = _Limiter(RateLimit(requests=1, per=10, max_signers=3), clock=lambda: now[0])
    keys = [sx.SigningKey.generate().public_key for _ in range(5)]
    assert limiter.check(keys[0]) is None
    assert limiter.check(keys[0]) == 10
    now[0] = 4.0
    assert limiter.check(keys[0]) == 6
    now[0] = 10.0
    assert limiter.check(keys[0]) is None
    for key in keys:
        limiter.check(key)
    assert len(limiter._buckets) == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"requests": 0, "per": 1},
        {"requests": 1, "per": 0},
        {"requests": True, "per": 1},
        {"requests": 1, "per": float("inf")},
        {"requests": 1, "per": 1, "max_signers": 0},
    ],
)
def test_rate_limit_validates(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RateLimit(**kwargs)


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_200_requests_in_flight_each_answered_once_and_correctly() -> None:
    """Several requests at once, up to the concurrency bound, each answered exactly once."""
    active = 0
    peak = 0
    handled: list[int] = []

    async def handler(request: ServiceRequest) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)  # the behaviour under test: handlers that overlap
            n = request.request.request["n"]
            handled.append(n)
            return {"n": n, "square": n * n}
        finally:
            active -= 1

    async with pair(handler, concurrency=40) as p:
        key = sx.SigningKey.generate()
        requests = [
            ask(p, Request(protocol="mcp", request={"n": n}), sign_key=key if n % 2 else None)
            for n in range(200)
        ]
        responses = await asyncio.gather(*requests)
        for n, response in enumerate(responses):
            assert response.response == {"n": n, "square": n * n}
        assert p.sim.stats.responses == 200
        assert p.sim.stats.duplicate_responses == 0
        assert p.sim.stats.requester_timeouts == 0
    assert sorted(handled) == list(range(200))
    assert 1 < peak <= 40


# -- events the simulator never sends (a scripted core) -------------------------------------------


async def answer_of(fake: FakeCore) -> tuple[str, dict[str, Any]]:
    while True:
        cmd = await fake.commands.get()
        if cmd.startswith("/_service_response "):
            _, user, request_id, payload = cmd.split(" ", 3)
            assert user == "1"
            return request_id, json.loads(payload)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (service_request_event(signer="not a key"), "not an Ed25519 key"),
        (service_request_event(signer=5), "not a key"),
        (service_request_event(data={"request": 1}), "'protocol' is missing"),
        (service_request_event(data={"protocol": "BAD", "request": 1}), "not a protocol name"),
        (service_request_event(data=[1, 2]), "expected a JSON object, got an array"),
        (service_request_event(data='{"protocol":"mcp","request":1,"protocol":"x"}'), "duplicate"),
        (service_request_event(data="[" * 100 + "]" * 100), "deeper"),
        (
            service_request_event(data={"protocol": "mcp", "request": 1, "requestKey": "AAAA"}),
            "requestKey",
        ),
    ],
)
@pytest.mark.anyio
async def test_invalid_requests_from_the_core_are_answered_bad_request(
    event: dict[str, Any], expected: str
) -> None:
    """bad_request: the envelope is invalid. A signerKey that is not a key is too."""

    async with fake_serving(ok) as (fake, _):
        await fake.event(event)
        request_id, payload = await answer_of(fake)
        assert request_id == "r1"
        assert payload["error"]["code"] == "bad_request"
        assert expected in payload["error"]["message"]


@pytest.mark.anyio
async def test_a_deep_request_from_the_core_is_answered_bad_request() -> None:
    async with fake_serving(ok) as (fake, _):
        deep: Any = 1
        for _ in range(200):
            deep = [deep]
        await fake.event(service_request_event(data={"protocol": "mcp", "request": deep}))
        _, payload = await answer_of(fake)
        assert payload["error"]["code"] == "bad_request"


@pytest.mark.anyio
async def test_unusable_events_are_ignored_and_logged_as_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Everything a peer sent is data: a hostile requestId is logged escaped, never obeyed."""

    async with fake_serving(ok) as (fake, _):
        with caplog.at_level(logging.DEBUG, logger="simplex_rpc.adapter"):
            await fake.event(service_request_event("r1 /_delete_address 1\nFORGED log line"))
            await fake.event(service_request_event("ok", user_id=2))  # another user's
            await fake.event({"type": "serviceRequest", "user": {"userId": 1}})  # no id
            await fake.event({"type": "newChatItems"})
            await fake.event(service_request_event("r2"))
            request_id, payload = await answer_of(fake)
        assert request_id == "r2" and payload == {"response": {"got": {}}}
    forged = [r for r in caplog.records if "unusable requestId" in r.getMessage()]
    assert forged and "\n" not in forged[0].getMessage()
    assert "\\nFORGED" in forged[0].getMessage()


@pytest.mark.anyio
async def test_a_request_id_in_flight_is_answered_once() -> None:
    slow = Held("one")
    async with (
        FakeCore() as fake,
        ChatCore.connect(fake.url) as core,
        background_serve(core, slow, protocols=("mcp",)),
    ):
        await fake.event(service_request_event("same"))
        await fake.event(service_request_event("same"))
        await until(lambda: responder_of(core).outcome.repeats >= 1, "the repeat read")
        slow.release.set()
        request_id, payload = await answer_of(fake)
        assert (request_id, payload) == ("same", {"response": "one"})
        await fake.event(service_request_event("after"))
        request_id, _ = await answer_of(fake)
        assert request_id == "after"  # no second answer to "same" came before it


@pytest.mark.anyio
async def test_a_refused_answer_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with fake_serving(ok) as (fake, serving):
        fake.answers["/_service_response"] = {
            "type": "chatCmdError",
            "chatError": {
                "type": "errorAgent",
                "agentError": {
                    "type": "AGENT",
                    "agentErr": {"type": "A_SERVICE", "serviceError": {"type": "ASETimeout"}},
                },
                "agentConnId": "",
            },
        }
        with caplog.at_level(logging.WARNING, logger="simplex_rpc.adapter"):
            await fake.event(service_request_event("late"))
            await answer_of(fake)
            await until(lambda: "refused the answer" in caplog.text, "the refusal logged")
        assert not serving.done()
    assert "refused the answer" in caplog.text and "ASETimeout" in caplog.text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"protocols": []},
        {"protocols": "mcp"},
        {"protocols": ["Not-Valid"]},
        {"protocols": ["mcp"], "versions": {"a2a": ["1.0"]}},
        {"protocols": ["mcp"], "versions": {"mcp": "2026-07-28"}},
        {"protocols": ["mcp"], "concurrency": 0},
        {"protocols": ["mcp"], "handler_timeout": 0},
        {"protocols": ["mcp"], "max_response_bytes": sx.MAX_RESPONSE + 1},
    ],
)
@pytest.mark.anyio
async def test_serve_validates_its_options(kwargs: dict[str, Any]) -> None:
    async with FakeCore() as fake, ChatCore.connect(fake.url) as core:
        with pytest.raises((SimplexRpcError, TypeError)):
            await core.serve(1, ok, **kwargs)


@pytest.mark.anyio
async def test_a_response_the_core_cannot_pad_is_replaced_by_too_large() -> None:
    """The core pads the response, its framing included: when it refuses the size, the
    requester still gets one answer, too_large."""

    def core_answer(cmd: str) -> dict[str, Any]:
        if '"response"' in cmd:
            return {
                "type": "chatCmdError",
                "chatError": {
                    "type": "errorAgent",
                    "agentError": {"type": "CMD", "cmdErr": {"type": "LARGE"}, "errContext": ""},
                    "agentConnId": "",
                },
            }
        return {"type": "serviceReplyAccepted", "user": {"userId": 1}, "connectionId": "c"}

    async with fake_serving(ok) as (fake, _):
        fake.answers["/_service_response"] = core_answer
        await fake.event(service_request_event("big"))
        first = await answer_of(fake)
        second = await answer_of(fake)
        assert first == ("big", {"response": {"got": {}}})
        assert second[0] == "big" and second[1]["error"]["code"] == "too_large"

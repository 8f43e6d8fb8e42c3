"""The responder under faults (issue 14): each request answered exactly once, in the window.

The rule pinned throughout is the protocol text's ("Service RPC transport",
Requirements): "The core accepts a response within 180 seconds of receiving
the request", with one response per request; overload is answered with the
protocol's own code, "rate_limited: the requester repeats the request after
retryAfter". Each test names the numbered problem of the issue it reproduces.

The checks are logical (which answer, how many per requestId, in which order);
where time matters, the injected windows are seconds apart, so that a loaded
two-core machine cannot blur them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import pytest

from _scripted_core import (
    ScriptedCore,
    request_event,
    responder_of,
    scripted_serving,
    taken,
)
from _support import Held, pair
from _waiting import until
from simplex_rpc import Request, Response, SimplexRpcError
from simplex_rpc.adapter import (
    ChatCore,
    ChatCoreClosed,
    ChatCoreError,
    ChatCoreTimeout,
    ServiceRequest,
)
from simplex_rpc.testing import CoreSimulator

ADAPTER_LOG = "simplex_rpc.adapter"


def code(response: Response) -> str | None:
    return response.error.code if response.error is not None else None


def answer_code(envelope: dict[str, Any]) -> str | None:
    error = envelope.get("error")
    return error["code"] if isinstance(error, dict) else None


@contextlib.asynccontextmanager
async def responder_and_requester(
    handler: Any,
    *,
    event_buffer: int = 10_000,
    response_window: float = 180.0,
    **serve_options: Any,
) -> Any:
    """The simulator, a responder ``bob`` serving ``handler`` and a requester ``alice``:
    ``(sim, alice, link, serving, bob)``.

    ``alice``'s pool has a connection for each request of the largest burst here (the
    core runs one request at a time per connection): the bursts reach the responder at
    once, as many requesters' would. Every command of the simulated cores costs 0.1 ms
    (``command_delay``), as a real core's processing does.
    """
    async with (
        CoreSimulator(response_window=response_window, command_delay=0.0001) as sim,
        ChatCore.connect(sim.url_for("bob"), event_buffer=event_buffer) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=102) as alice,
    ):
        assert await bob.start(service_requests=True)
        link = (await bob.service_address(1)).link
        assert await alice.start(service_requests=False)
        ready = asyncio.Event()
        serving = asyncio.create_task(
            bob.serve(1, handler, protocols=["mcp"], ready=ready, **serve_options)
        )
        await ready.wait()
        try:
            yield sim, alice, link, serving, bob
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving


async def burst(
    alice: ChatCore, link: str, count: int, *, timeout: int = 10
) -> list[asyncio.Task[Response]]:
    return [
        asyncio.create_task(
            alice.service_request(
                1, link, Request(protocol="mcp", request={"n": n}), timeout=timeout
            )
        )
        for n in range(count)
    ]


# -- 1. the deadline counts from arrival, also for requests still in the event queue --


@pytest.mark.anyio
async def test_1_requests_waiting_behind_a_busy_slot_are_not_answered_after_their_deadline() -> (
    None
):
    """Problem 1: the deadline counts from the frame's arrival. Four requests arrive while the
    only slot is held for 2.5 s, past their 1-second deadline: none may then be handled and
    answered as a success, however long it sat in the event queue."""
    handled: list[str] = []

    started, release = asyncio.Event(), asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        handled.append(request.request_id)
        if request.request_id == "first":
            started.set()
            await release.wait()
            time.sleep(2.5)  # holds the slot and the loop: every deadline below passes
        return "done"

    async with scripted_serving(handler, concurrency=1, handler_timeout=1.0) as (
        fake,
        core,
        _t,
    ):
        await fake.event(request_event("first"))
        await started.wait()
        for n in range(2, 6):
            await fake.event(request_event(f"r{n}"))
        # the frames are read (and so stamped) before the block
        await until(lambda: taken(core) >= 5, "the four frames read")
        release.set()
        await fake.wait_answers(5)
        assert fake.answers["first"] == [{"response": "done"}]
        for n in range(2, 6):
            (answer,) = fake.answers[f"r{n}"]
            assert answer_code(answer) in {"rate_limited", "internal"}, (n, answer)
    assert handled[0] == "first"
    assert "r3" not in handled and "r4" not in handled and "r5" not in handled


@pytest.mark.anyio
async def test_1_queued_requests_are_answered_inside_the_core_window() -> None:
    """Problem 1, the issue's second repro: with a core window of 6 s, a handler deadline of
    2 s and one slot, twelve requests at once: every one is answered within the window (the
    ones that cannot get a slot in time with rate_limited), none refused as late, none left
    to wait out its timeout."""

    async def handler(request: ServiceRequest) -> str:
        await asyncio.sleep(0.8)  # the behaviour under test: a slow handler
        return "slow"

    async with responder_and_requester(
        handler, response_window=6.0, concurrency=1, handler_timeout=2.0
    ) as (sim, alice, link, _, _bob):
        tasks = await burst(alice, link, 12, timeout=8)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert sim.stats.late_responses == 0
        assert sim.stats.requester_timeouts == 0
        for result in results:
            assert isinstance(result, Response), result
            assert code(result) in {None, "rate_limited", "internal"}
            if code(result) == "rate_limited":
                assert result.error is not None and result.error.retry_after is not None


# -- 2. a full event buffer and a bounded queue: shed with rate_limited, never lose --


@pytest.mark.anyio
async def test_2_a_full_event_buffer_sheds_requests_instead_of_losing_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 2: 100 requests into an event buffer of 20 with one slot. Each is answered:
    a success, or rate_limited with retryAfter; none waits out its timeout; the overload
    is logged as a few lines with counts, not one line per request."""

    held = Held("ok")
    async with responder_and_requester(held, event_buffer=20, concurrency=1) as (
        sim,
        alice,
        link,
        _,
        bob,
    ):
        with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
            tasks = await burst(alice, link, 100)
            await until(lambda: sim.stats.delivered == 100, "the burst delivered")
            # the responder reads the burst while its slot is held
            await until(lambda: taken(bob) >= 100, "the burst read by the responder")
            held.release.set()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        assert sim.stats.requester_timeouts == 0
        shed = 0
        for result in results:
            assert isinstance(result, Response), result
            if code(result) == "rate_limited":
                shed += 1
                assert result.error is not None and result.error.retry_after is not None
                assert result.error.retry_after >= 1
            else:
                assert result.response == "ok"
        assert shed >= 1
        assert sim.stats.responses == 100 and sim.stats.duplicate_responses == 0
    overload = [
        r for r in caplog.records if r.name.startswith(ADAPTER_LOG) and r.levelno >= logging.WARNING
    ]
    assert 1 <= len(overload) <= 5, [r.getMessage() for r in overload]


@pytest.mark.anyio
async def test_2_past_max_queue_requests_are_answered_rate_limited_at_once() -> None:
    """Problem 2: ``max_queue`` bounds the requests waiting for a slot. With two slots held
    and a queue of three, the other fifteen of twenty are answered rate_limited with
    retryAfter at once, while the handlers still hold; the five then succeed."""

    held = Held("ok")
    async with responder_and_requester(held, concurrency=2, max_queue=3) as (
        sim,
        alice,
        link,
        serving,
        _bob,
    ):
        tasks = await burst(alice, link, 20)
        await until(lambda: sum(t.done() for t in tasks) >= 15 or serving.done(), "15 answers")
        assert not serving.done(), serving.exception()
        early = [t.result() for t in tasks if t.done()]
        assert len(early) == 15
        for response in early:
            assert code(response) == "rate_limited"
            # From the queue: (3 waiting + 2 running + itself) x the handlers' mean
            # time (1 s before any has finished) / 2 slots.
            assert response.error is not None and response.error.retry_after == 3
        held.release.set()
        results = await asyncio.gather(*tasks)
        assert sum(r.response == "ok" for r in results) == 5
        assert sim.stats.requester_timeouts == 0


# -- 3. a handler that raises CancelledError --


@pytest.mark.anyio
async def test_3_a_handler_raising_cancelled_error_is_answered_internal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 3: a handler that awaited a future someone else cancelled raises CancelledError.
    serve() itself is not being cancelled: the request is answered internal, and logged."""

    async def handler(request: ServiceRequest) -> str:
        if request.request.request == "cancelled":
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            future.cancel()
            return await future
        return "fine"

    async with pair(handler) as p:
        with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
            first = await p.alice.service_request(
                1, p.link, Request(protocol="mcp", request="cancelled"), timeout=5
            )
            second = await p.alice.service_request(
                1, p.link, Request(protocol="mcp", request="next"), timeout=5
            )
        assert code(first) == "internal"
        assert second.response == "fine"
        assert not p.serving.done()
    assert any("CancelledError" in r.getMessage() for r in caplog.records)


# -- 4. a lost connection ends serve() at once --


@pytest.mark.anyio
async def test_4_serve_ends_at_once_when_the_connection_is_lost() -> None:
    """Problem 4: 100 requests in flight and queued, four handlers held; the connection drops.
    serve() raises ChatCoreClosed promptly (not after the queue drains), and starts no handler
    whose answer could never be sent."""
    started = 0

    never = asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        nonlocal started
        started += 1
        await never.wait()
        return "never"

    async with responder_and_requester(handler, concurrency=4) as (
        sim,
        alice,
        link,
        serving,
        bob,
    ):
        tasks = await burst(alice, link, 100, timeout=30)
        await until(lambda: sim.stats.delivered == 100 and started == 4, "the burst, four handlers")
        await until(lambda: taken(bob) >= 100, "the burst read by the responder")
        assert await sim.drop_connections("bob") == 2  # its commands and its answers
        with pytest.raises(ChatCoreClosed):
            async with asyncio.timeout(10):  # generous: the rule is "at once"
                await serving
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert started == 4


# -- 5. a repeated requestId is not handled again --


@pytest.mark.anyio
async def test_5_a_repeated_request_id_is_not_handled_again_after_its_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 5: one response per request. The core reports the same requestId again after
    the first answer went out: the handler does not run again, no second answer is sent,
    and the repeats are logged once with their count."""
    handled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        handled.append(request.request_id)
        return request.request_id

    async with scripted_serving(handler) as (fake, _, _t):
        with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
            await fake.event(request_event("same"))
            await fake.wait_answers(1)
            for _ in range(3):
                await fake.event(request_event("same"))
            await fake.event(request_event("after"))
            order = await fake.wait_answers(2)
            await fake.event(request_event("last"))
            order = await fake.wait_answers(3)
        assert order == ["same", "after", "last"]
        assert fake.answers["same"] == [{"response": "same"}]
    assert handled == ["same", "after", "last"]
    repeats = [r for r in caplog.records if "same" in r.getMessage() and "repeat" in r.getMessage()]
    assert len(repeats) == 1, [r.getMessage() for r in repeats]


# -- 6. core frames are read strictly --


@pytest.mark.anyio
async def test_6_duplicate_member_names_in_request_data_are_refused_as_by_request_parse() -> None:
    """Problem 6: wire.md's strict JSON refuses duplicate member names. An envelope the core
    reports with a duplicate name is answered bad_request, as Request.parse refuses it,
    instead of being served with the last value."""
    envelope = '{"protocol":"mcp","request":1,"request":2}'
    with pytest.raises(Exception, match="duplicate"):
        Request.parse(envelope)
    handled: list[Any] = []

    async def handler(request: ServiceRequest) -> Any:
        handled.append(request.request.request)
        return "served"

    async with scripted_serving(handler) as (fake, _, _t):
        await fake.send_raw(
            '{"resp":{"type":"serviceRequest","user":{"userId":1},'
            f'"requestId":"dup","requestData":{envelope}}}}}'
        )
        await fake.wait_answers(1)
        (answer,) = fake.answers["dup"]
        assert answer_code(answer) == "bad_request"
        assert "duplicate" in answer["error"]["message"]
    assert handled == []


@pytest.mark.anyio
async def test_6_a_duplicate_request_id_in_the_event_is_not_served_under_either_id() -> None:
    """Problem 6: an event whose requestId is given twice is ambiguous: served under neither
    value (strict JSON), and the next request is served as usual."""
    handled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        handled.append(request.request_id)
        return "served"

    async with scripted_serving(handler) as (fake, _, _t):
        await fake.send_raw(
            '{"resp":{"type":"serviceRequest","user":{"userId":1},"requestId":"a",'
            '"requestId":"b","requestData":{"protocol":"mcp","request":1}}}'
        )
        await fake.event(request_event("good"))
        assert await fake.wait_answers(1) == ["good"]
    assert handled == ["good"]


@pytest.mark.anyio
async def test_6_the_event_around_the_request_does_not_use_up_the_envelope_depth() -> None:
    """The depth limit (64 levels, wire.md) applies to the envelope: the event and the frame
    around it get their own allowance, so an envelope of exactly 64 levels is served through
    the core as it is by Request.parse, and one of 65 is answered bad_request."""

    def nested(levels: int) -> str:
        # The envelope is level 1; its request value takes the remaining levels.
        return '{"protocol":"mcp","request":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"

    Request.parse(nested(64))
    with pytest.raises(Exception, match="deeper"):
        Request.parse(nested(65))

    async with scripted_serving(lambda r: "deep ok") as (fake, _, _t):
        for name, levels in (("d64", 64), ("d65", 65)):
            await fake.send_raw(
                '{"resp":{"type":"serviceRequest","user":{"userId":1},'
                f'"requestId":"{name}","requestData":{nested(levels)}}}}}'
            )
        await fake.wait_answers(2)
        assert fake.answers["d64"] == [{"response": "deep ok"}]
        assert answer_code(fake.answers["d65"][0]) == "bad_request"


# -- 7. a result the library's strict rules refuse is answered internal --


@pytest.mark.parametrize(
    ("name", "result"),
    [
        ("a 70-digit integer", 10**69),
        ("100 levels of nesting", json.loads("[" * 100 + "]" * 100)),
    ],
)
@pytest.mark.anyio
async def test_7_a_result_the_strict_rules_refuse_is_answered_internal(
    name: str, result: Any
) -> None:
    """Problem 7: the core (here the simulator, with the library's strict JSON) refuses a
    response that is not strict JSON: the responder answers internal instead, so that the
    requester does not wait out its timeout."""

    async with pair(lambda r: result) as p:
        response = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=name), timeout=5
        )
        assert code(response) == "internal"
        assert p.sim.stats.requester_timeouts == 0


@pytest.mark.anyio
async def test_7_a_core_refusal_other_than_size_is_followed_by_internal_once() -> None:
    """An answer the core refuses for a reason other than its size is followed by one
    internal, tried once: the requester gets an answer if the core takes any."""
    refusal = {
        "type": "chatCmdError",
        "chatError": {"type": "error", "errorType": {"type": "commandError", "message": "no"}},
    }

    def refuse_success(corr_id: str, cmd: str) -> str:
        if '"response"' in cmd:
            return json.dumps({"corrId": corr_id, "resp": refusal})
        return json.dumps({"corrId": corr_id, "resp": {"type": "serviceReplyAccepted"}})

    async with scripted_serving(lambda r: "refused") as (fake, _, _t):
        fake.raw["/_service_response"] = refuse_success
        await fake.event(request_event("r1"))
        await fake.wait_answers(2)
        first, second = fake.answers["r1"]
        assert first == {"response": "refused"}
        assert answer_code(second) == "internal"
        fake.raw["/_service_response"] = lambda c, _cmd: json.dumps({"corrId": c, "resp": refusal})
        await fake.event(request_event("r2"))
        await fake.event(request_event("r3"))
        await fake.wait_answers(6)
        assert len(fake.answers["r2"]) == 2 and len(fake.answers["r3"]) == 2


# -- 8. an unparseable frame with a readable corrId fails its command at once --


@pytest.mark.parametrize(
    "frame",
    [
        '{{"corrId":"{c}","resp":{{"type":"cmdOk","n":NaN}}}}',
        '{{"corrId":"{c}","resp":{{"type":"cmdOk","n":',
        '{{"corrId":"{c}","resp":{{"type":"chatCmdError","type":"cmdOk"}}}}',
    ],
    ids=["NaN", "truncated", "duplicate name"],
)
@pytest.mark.anyio
async def test_8_a_command_whose_answer_cannot_be_parsed_fails_at_once(
    scripted_core: ScriptedCore,
    frame: str,
) -> None:
    """Problem 8: the core's answer to a command is a frame that is not strict JSON but whose
    corrId can be read: the command fails at once with ChatCoreError, not after its timeout."""

    async with ChatCore.connect(scripted_core.url) as core:
        scripted_core.raw["/_probe"] = lambda corr_id, cmd: frame.format(c=corr_id)
        with pytest.raises(ChatCoreError) as caught:
            async with asyncio.timeout(5):  # generous: the rule is "at once"
                await core.command("/_probe", timeout=30)
        assert not isinstance(caught.value, ChatCoreTimeout)
        assert "/_probe" in str(caught.value)
        assert (await core.command("/_other"))["type"] == "cmdOk"


# -- 9. userId must be an integer, not a boolean or a float --


@pytest.mark.anyio
async def test_9_a_user_id_of_true_or_one_point_zero_is_not_user_1() -> None:
    """Problem 9: a serviceRequest for userId true or 1.0 is not a request to user 1 (a
    bool is refused as a user id elsewhere, as _check_user_id does)."""
    handled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        handled.append(request.request_id)
        return "served"

    async with scripted_serving(handler) as (fake, _, _t):
        await fake.event(request_event("as-true", user_id=True))
        await fake.event(request_event("as-float", user_id=1.0))
        await fake.event(request_event("as-text", user_id="1"))
        await fake.event(request_event("as-int"))
        assert await fake.wait_answers(1) == ["as-int"]
    assert handled == ["as-int"]


# -- 10. a graceful stop, and warnings that say what happened --


@pytest.mark.anyio
async def test_10_cancelling_serve_is_a_graceful_stop(caplog: pytest.LogCaptureFixture) -> None:
    """Problem 10: on cancellation serve() stops taking requests, gives the handler in flight
    up to ``grace`` seconds, answers every queued request rate_limited with a short
    retryAfter (so that requesters retry), and logs one summary line."""

    started, release = asyncio.Event(), asyncio.Event()

    async def handler(request: ServiceRequest) -> str:
        started.set()
        await release.wait()
        return "finished"

    with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
        async with scripted_serving(handler, concurrency=1, grace=30.0) as (fake, core, task):
            await fake.event(request_event("inflight"))
            await started.wait()
            for n in range(3):
                await fake.event(request_event(f"queued{n}"))
            await until(lambda: taken(core) >= 4, "the queued requests read")
            assert not task.done(), task.exception()
            task.cancel()
            order = await fake.wait_answers(3)
            assert sorted(order) == ["queued0", "queued1", "queued2"]
            for n in range(3):
                (answer,) = fake.answers[f"queued{n}"]
                assert answer_code(answer) == "rate_limited"
                assert 1 <= answer["error"]["retryAfter"] <= 5
            assert not task.done()  # still within grace: the handler in flight may finish
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert fake.answers["inflight"] == [{"response": "finished"}]
    summary = [r.getMessage() for r in caplog.records if "shed" in r.getMessage()]
    assert len(summary) == 1, summary
    assert "1 answered" in summary[0] and "3 shed" in summary[0] and "0 cancelled" in summary[0]


@pytest.mark.anyio
async def test_10_a_handler_still_running_after_grace_is_cancelled_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 10: a handler that does not finish within ``grace`` is cancelled; its request
    is answered internal (the responder failed), and the summary counts it as cancelled."""
    cancelled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(request.request_id)
            raise
        return "never"

    with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
        async with scripted_serving(handler, grace=0.5) as (fake, core, task):
            await fake.event(request_event("stuck"))
            await until(lambda: responder_of(core).running, "the stuck handler running")
            assert not task.done(), task.exception()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            (answer,) = fake.answers["stuck"]
            assert answer_code(answer) == "internal"
    assert cancelled == ["stuck"]
    summary = [r.getMessage() for r in caplog.records if "shed" in r.getMessage()]
    assert len(summary) == 1 and "1 cancelled" in summary[0], summary


@pytest.mark.anyio
async def test_10_an_answer_sent_whose_acknowledgement_is_lost_is_not_called_unanswered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 10: the answer went to the core and the connection dropped before the core
    acknowledged it. The warning says so, and does not claim the request was not answered."""

    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        async with scripted_serving(lambda r: "sent") as (fake, _, task):
            fake.raw["/_service_response"] = lambda corr_id, cmd: None  # no acknowledgement
            await fake.event(request_event("r1"))
            await fake.wait_answers(1)
            await fake.close_connection()
            with pytest.raises(ChatCoreClosed):
                async with asyncio.timeout(10):
                    await task
    lines = [r.getMessage() for r in caplog.records if "r1" in r.getMessage()]
    assert any("acknowledgement lost" in line for line in lines), lines
    assert not any("not answered" in line for line in lines), lines


@pytest.mark.anyio
async def test_5_the_memory_of_request_ids_is_bounded_and_covers_the_core_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Problem 5: the answered requestIds are remembered for at least the core's 180-second
    window, and their number is bounded (here, for the test, at three): the oldest is
    forgotten first, so memory stays flat however many requests come."""
    from simplex_rpc.adapter import RESPONSE_WINDOW, _service

    monkeypatch.setattr(_service, "_MAX_REMEMBERED", 3)
    handled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        handled.append(request.request_id)
        return "ok"

    async with scripted_serving(handler) as (fake, core, _t):
        for n, name in enumerate(["a", "b", "c", "d"], start=1):
            await fake.event(request_event(name))
            await fake.wait_answers(n)
        await fake.event(request_event("d"))  # remembered: not handled again
        await fake.event(request_event("a"))  # forgotten (the bound): handled again
        assert await fake.wait_answers(5) == ["a", "b", "c", "d", "a"]
        (responder,) = core._request_sinks
        assert responder.memory >= RESPONSE_WINDOW
        assert len(responder.seen) <= 3
    assert handled == ["a", "b", "c", "d", "a"]


def test_the_command_line_serve_takes_max_queue_and_grace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from simplex_rpc.cli import build_parser

    parser = build_parser()
    base = ["serve", "--core", "ws://127.0.0.1:1", "--echo"]
    args = parser.parse_args([*base, "--max-queue", "7", "--grace", "0"])
    assert (args.max_queue, args.grace) == (7, 0.0)
    args = parser.parse_args(base)
    assert (args.max_queue, args.grace) == (1000, 5.0)
    for bad in (["--max-queue", "-1"], ["--grace", "-1"], ["--grace", "inf"]):
        with pytest.raises(SystemExit) as caught:
            parser.parse_args([*base, *bad])
        assert caught.value.code == 2
        assert bad[0] in capsys.readouterr().err


@pytest.mark.parametrize(
    "options",
    [{"max_queue": -1}, {"max_queue": True}, {"grace": -0.5}, {"grace": float("inf")}],
)
@pytest.mark.anyio
async def test_serve_refuses_a_bad_max_queue_or_grace(
    scripted_core: ScriptedCore,
    options: dict[str,
    Any],
) -> None:
    async with ChatCore.connect(scripted_core.url) as core:
        with pytest.raises(SimplexRpcError, match=next(iter(options))):
            await core.serve(1, lambda r: None, protocols=["mcp"], **options)


@pytest.mark.anyio
async def test_10_requests_arriving_during_the_stop_are_answered_and_a_second_cancel_stops_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Problem 10: while serve() stops, a new request is not taken: it is answered
    rate_limited with the short retryAfter. A second cancellation does not wait for the
    grace: serve() ends, and the handler still running is cancelled."""
    cancelled: list[str] = []

    async def handler(request: ServiceRequest) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(request.request_id)
            raise
        return "never"

    async with scripted_serving(handler, grace=60.0) as (fake, core, task):
        await fake.event(request_event("stuck"))
        responder = responder_of(core)
        await until(lambda: responder.running, "the stuck handler running")
        task.cancel()
        await until(lambda: responder.stopping, "the graceful stop begun")
        await fake.event(request_event("late"))
        await fake.wait_answers(1)
        (answer,) = fake.answers["late"]
        assert answer_code(answer) == "rate_limited" and answer["error"]["retryAfter"] <= 5
        assert not task.done()  # the grace of 60 s runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(10):  # generous: the rule is "at once"
                await task
    assert cancelled == ["stuck"]


@pytest.mark.anyio
async def test_an_event_stream_raises_at_once_when_the_connection_is_lost(
    scripted_core: ScriptedCore,
) -> None:
    """Problem 4, for every reader of events(): events still waiting when the connection
    is lost are not handed out (nothing could be answered): the next read raises
    ChatCoreClosed. When this side closes, the waiting events are read first."""

    async with ScriptedCore() as fake, ChatCore.connect(fake.url) as core:
        stream = core.events()
        for n in range(3):
            await fake.event({"type": f"e{n}"})
        assert await core.command("/_sync") == {"type": "cmdOk"}  # the events are read
        await fake.close_connection()
        with pytest.raises(ChatCoreClosed):
            async with asyncio.timeout(10):
                await anext(stream)
    async with ChatCore.connect(scripted_core.url) as core:
        stream = core.events()
        await scripted_core.event({"type": "kept"})
        assert await core.command("/_sync") == {"type": "cmdOk"}
    assert (await anext(stream))["type"] == "kept"
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


@pytest.mark.anyio
async def test_a_full_event_stream_logs_its_drops_at_powers_of_ten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Overload as a few lines with counts: 120 events dropped by a full stream are
    logged at the 1st, 10th and 100th drop, not 120 times."""

    async with ScriptedCore() as fake, ChatCore.connect(fake.url, event_buffer=1) as core:
        stream = core.events()
        with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
            for n in range(121):
                await fake.event({"type": f"e{n}"})
            assert await core.command("/_sync") == {"type": "cmdOk"}
        assert stream.dropped == 120
    lines = [r.getMessage() for r in caplog.records if "event stream full" in r.getMessage()]
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == ["1", "10", "100"]


@pytest.mark.anyio
async def test_an_answer_the_core_does_not_accept_is_logged_and_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """APISendServiceResponse is acknowledged with serviceReplyAccepted (simplex-chat
    bots/api/COMMANDS.md), or cmdOk by the first cores (the chat's plans); any other
    reply is not an acceptance. The responder says so and does not send again, since
    the core may have delivered it (one answer per request)."""

    def other_reply(corr_id: str, cmd: str) -> str:
        return json.dumps({"corrId": corr_id, "resp": {"type": "chatRunning"}})

    with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
        async with scripted_serving(lambda r: "ok") as (fake, _, _t):
            fake.raw["/_service_response"] = other_reply
            await fake.event(request_event("r1"))
            await fake.wait_answers(1)
            await until(
                lambda: "neither serviceReplyAccepted nor cmdOk" in caplog.text, "the warning"
            )
            await asyncio.sleep(0.2)  # the behaviour under test: no second answer follows
            assert fake.answer_order == ["r1"]
    assert "answer sent, not acknowledged" in caplog.text

"""The raw layer end to end: examples/badge_style_service.py through the simulator.

Issue 29, "Done when": the example badge-style protocol (its own envelope:
``{"version", "purchaseKey"?, "request": {"type": …}}``, type-tagged answers
and errors) is served with ``serve_raw`` and called with
``service_request_raw``, signed and unsigned, and

* a repeated signed request gets the stored answer without a second run;
* a concurrent repeat does not start a second run;
* a different signer is a different request;
* the SQLite store survives a restart of the responder;
* the three budget kinds, the failures-only mode, and ``retryAfter`` as the
  next token's wait, in a burst.

The rules come from the badge service's plan (simplex-chat
``plans/2026-07-20-supporter-badges-v2-implementation.md``): "A timeout hides
the outcome, so the client repeats the identical signed request at its next
trigger", and every command answers a repeat with the stored result.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import simplex_rpc as sx
from _badge import World, world
from _waiting import until
from simplex_rpc.adapter import (
    TYPED_ERRORS,
    AnswerStore,
    AnswerStoreProtocol,
    Begun,
    RateLimit,
    RawRequest,
    SQLiteAnswerStore,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "badge_style_service.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("badge_style_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


badge = _load()
A = sx.SigningKey.generate()
B = sx.SigningKey.generate()
STATUS = {"version": 1, "request": {"type": "status"}}


@contextlib.asynccontextmanager
async def serving(
    w: World, service: Any, answers: AnswerStoreProtocol | None, **options: Any
) -> AsyncIterator[asyncio.Task[Any]]:
    """``service`` served with serve_raw until the block ends (a graceful stop)."""
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        badge.serve(w.bob, service, answers, ready=ready, stop=stop, **options)
    )
    await ready.wait()
    try:
        yield task
    finally:
        stop.set()
        await task


async def call(w: World, obj: dict[str, Any], key: sx.SigningKey | None = A) -> dict[str, Any]:
    answer: dict[str, Any] = await w.alice.service_request_raw(
        1, w.link, obj, timeout=10, sign_key=key, errors=TYPED_ERRORS
    )
    return answer


class WatchedStore(AnswerStore):
    """An in-memory answer store that records each decision of ``begin``: what a test
    waits on to know that a repeat is waiting for a run in progress."""

    def __init__(self) -> None:
        super().__init__()
        self.decisions: list[str] = []

    def begin(self, signer: sx.PublicKey | None, request: bytes) -> Begun:
        begun = super().begin(signer, request)
        self.decisions.append(begun.state)
        return begun


@pytest.mark.anyio
async def test_a_repeated_signed_request_gets_the_stored_answer_without_a_second_run() -> None:
    service = badge.BadgeService({"C1"})

    async with world() as w:
        async with serving(w, service, AnswerStore()) as task:
            first = await call(w, badge.redeem_request(A, "C1"))
            assert first == {"type": "badge", "code": "C1", "serial": 1}
            assert service.runs == 1
            again = await badge.redeem(w.alice, w.link, A, "C1")  # the example's caller
            assert again == first
            assert service.runs == 1  # answered from the store: the handler did not run
        outcome = task.result()
        assert (outcome.answered, outcome.stored) == (2, 1)


@pytest.mark.anyio
async def test_a_concurrent_repeat_does_not_start_a_second_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the first run is still running, the identical request waits for its answer."""
    service = badge.BadgeService({"C1"})
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(raw: RawRequest) -> dict[str, Any]:
        entered.set()
        await release.wait()
        result: dict[str, Any] = await service.handle(raw)
        return result

    held = badge.BadgeService(set())
    held.handle = slow  # the example's handler, held until the repeat is waiting
    store = WatchedStore()

    with caplog.at_level(logging.INFO, logger="simplex_rpc.adapter"):
        async with world() as w, serving(w, held, store):
            request = badge.redeem_request(A, "C1")
            first = asyncio.create_task(call(w, request))
            await entered.wait()
            second = asyncio.create_task(call(w, request))
            (responder,) = w.bob._request_sinks
            await until(lambda: len(responder.running) >= 2, "both requests at the responder")
            # The gate's next step after a "running" decision is its wait on the run.
            await until(lambda: "running" in store.decisions, "the repeat waiting for the run")
            release.set()
            answers = await asyncio.gather(first, second)
        assert answers[0] == answers[1] == {"type": "badge", "code": "C1", "serial": 1}
        assert service.runs == 1
    assert any("answered from the answer store (joined)" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_different_signer_is_a_different_request() -> None:
    """The same bytes signed by another key run again: the key is (signer, SHA-256)."""
    service = badge.BadgeService({"C1"})

    async with world() as w, serving(w, service, AnswerStore()):
        assert (await call(w, STATUS, A))["type"] == "status"
        assert (await call(w, STATUS, A))["type"] == "status"
        assert service.runs == 1
        assert (await call(w, STATUS, B))["type"] == "status"
        assert service.runs == 2
        # And the command's own rule: another key cannot take A's badge.
        assert (await call(w, badge.redeem_request(A, "C1"), A))["type"] == "badge"
        taken = await call(w, badge.redeem_request(B, "C1"), B)
        assert taken == {
            "type": "error",
            "code": "already_redeemed",
            "message": "the code was redeemed by another key",
        }


@pytest.mark.parametrize("unsigned", [False, True])
@pytest.mark.anyio
async def test_unsigned_requests_are_stored_only_when_the_store_opts_in(unsigned: bool) -> None:
    service = badge.BadgeService(set())

    async with world() as w, serving(w, service, AnswerStore(unsigned=unsigned)):
        for _ in range(3):
            assert (await call(w, STATUS, None))["type"] == "status"
    assert service.runs == (1 if unsigned else 3)


@pytest.mark.anyio
async def test_the_sqlite_store_survives_a_restart_of_the_responder(tmp_path: Path) -> None:
    """The repeat after the restart is answered from the file: the new service, which
    knows nothing of the code, does not run (it would answer unknown_code)."""
    path = tmp_path / "answers.db"

    async with world() as w:
        before = badge.BadgeService({"C1"})
        with SQLiteAnswerStore(path) as store:
            async with serving(w, before, store):
                first = await call(w, badge.redeem_request(A, "C1"))
        assert first["type"] == "badge" and before.runs == 1
        after = badge.BadgeService(set())  # a restart: nothing in memory
        with SQLiteAnswerStore(path) as store:
            async with serving(w, after, store):
                assert await call(w, badge.redeem_request(A, "C1")) == first
                assert after.runs == 0
                fresh = await call(w, badge.redeem_request(A, "C2"))
                assert fresh["code"] == "unknown_code" and after.runs == 1


@pytest.mark.anyio
async def test_the_envelope_rules_of_the_example() -> None:
    """A version, a signed key that must equal the signer, type-tagged answers and errors;
    the responder's own errors (a request that is not a JSON object) in the same shape."""
    service = badge.BadgeService({"C1"})

    async with world() as w, serving(w, service, None):
        assert (await call(w, {**STATUS, "version": 2}))["code"] == "unsupported_version"
        assert (await call(w, {"version": 1}))["code"] == "bad_request"
        wrong_key = badge.redeem_request(B, "C1")  # names B, signed by A
        refused = await call(w, wrong_key, A)
        assert refused["type"] == "error" and "purchaseKey" in refused["message"]
        unsigned = await call(w, badge.redeem_request(A, "C1"), None)
        assert unsigned["code"] == "bad_request"
        assert (await call(w, badge.redeem_request(A, "C1")))["serial"] == 1


@pytest.mark.anyio
async def test_a_burst_meets_the_three_budget_kinds_and_retry_after_is_the_next_tokens_wait() -> None:  # noqa: E501  # noqa: E501
    """The badge service's budgets through serve_raw: the unsigned calls (2 a minute, every
    call counts), each signer's failures (2 an hour) and everyone's failures (3 an hour).
    A request refused by a budget takes no token and is no failure; a repeat answered
    from the store passes the budgets but is no failure either. retryAfter is the next
    token's wait, rounded up (less the moment since the bucket emptied)."""
    budgets = (
        RateLimit(2, 3600, scope="signer", failures_only=True),  # a token every 1,800 s
        RateLimit(3, 3600, scope="global", failures_only=True),  # a token every 1,200 s
        RateLimit(2, 60, scope="unsigned"),  # a token every 30 s
    )
    service = badge.BadgeService({"C1"})

    def limited(answer: dict[str, Any], low: int, high: int) -> bool:
        retry = answer.get("retryAfter")
        return (
            answer.get("code") == "rate_limited"
            and isinstance(retry, int)
            and (low <= retry <= high)
        )

    async with world() as w, serving(w, service, AnswerStore(), budgets=budgets):
        # Unsigned: two pass, the third waits for the next token (30 s).
        assert [(await call(w, STATUS, None))["type"] for _ in range(2)] == ["status"] * 2
        assert limited(await call(w, STATUS, None), 29, 30)
        assert (await call(w, STATUS, A))["type"] == "status"  # signed: not that bucket
        # A signer's failures: X1 fails, its repeat comes from the store (no failure),
        # X2 fails: A's bucket is empty, for a success too.
        assert (await call(w, badge.redeem_request(A, "X1")))["code"] == "unknown_code"
        assert (await call(w, badge.redeem_request(A, "X1")))["code"] == "unknown_code"
        assert (await call(w, badge.redeem_request(A, "X2")))["code"] == "unknown_code"
        runs = service.runs
        assert limited(await call(w, STATUS, A), 1790, 1800)
        assert limited(await call(w, badge.redeem_request(A, "C1")), 1790, 1800)
        assert service.runs == runs  # refused before the handler
        # Everyone's failures: B's failure is the third: C (no failure of its own)
        # waits for the global bucket's next token.
        assert (await call(w, badge.redeem_request(B, "X3"), B))["code"] == "unknown_code"
        C = sx.SigningKey.generate()
        assert limited(await call(w, badge.redeem_request(C, "C1"), C), 1190, 1200)
        assert "C1" in service.codes  # nobody redeemed it


@pytest.mark.anyio
async def test_the_caller_repeats_the_identical_request_after_a_timeout() -> None:
    """service_request_raw's retry: the core's ASETimeout hid the outcome, so the identical
    signed request goes again at once; the responder's store makes the repeat wait for the
    first run, which answers both: one run."""
    service = badge.BadgeService({"C1"})
    first_run = True

    async def slow_once(raw: RawRequest) -> dict[str, Any]:
        nonlocal first_run
        if first_run:
            first_run = False
            await asyncio.sleep(2.5)  # the behaviour under test: past the caller's 1 s timeout
        result: dict[str, Any] = await service.handle(raw)
        return result

    held = badge.BadgeService(set())
    held.handle = slow_once

    async with world() as w, serving(w, held, AnswerStore()):
        answer = await w.alice.service_request_raw(
            1,
            w.link,
            badge.redeem_request(A, "C1"),
            timeout=1,
            sign_key=A,
            retries=3,
            errors=TYPED_ERRORS,
        )
        assert answer == {"type": "badge", "code": "C1", "serial": 1}
        assert service.runs == 1
        assert w.sim.stats.requester_timeouts >= 1


@pytest.mark.anyio
async def test_the_caller_repeats_after_retry_after_and_not_past_max_retry_after() -> None:
    """An error answer with retryAfter is repeated after it (the identical bytes), at most
    ``retries`` times; one past ``max_retry_after`` is returned as it is."""
    seen: list[dict[str, Any]] = []

    def busy_once(raw: RawRequest) -> dict[str, Any]:
        seen.append(raw.data)
        if len(seen) == 1:
            return TYPED_ERRORS.error("busy", "later", 1)
        return {"type": "ok"}

    never: list[int] = []

    def far(raw: RawRequest) -> dict[str, Any]:
        never.append(1)
        return TYPED_ERRORS.error("busy", "much later", 100)

    async with world() as w:
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(
            w.bob.serve_raw(1, busy_once, errors=TYPED_ERRORS, stop=stop, ready=ready)
        )
        await ready.wait()
        answer = await w.alice.service_request_raw(
            1, w.link, {"n": 1}, timeout=10, retries=1, errors=TYPED_ERRORS
        )
        assert answer == {"type": "ok"} and seen == [{"n": 1}, {"n": 1}]
        stop.set()
        await task
        stop = asyncio.Event()
        task = asyncio.create_task(w.bob.serve_raw(1, far, errors=TYPED_ERRORS, stop=stop))
        answer = await w.alice.service_request_raw(
            1,
            w.link,
            {"n": 2},
            timeout=10,
            retries=3,
            max_retry_after=10,
            errors=TYPED_ERRORS,
        )
        assert answer["retryAfter"] == 100 and never == [1]
        stop.set()
        await task

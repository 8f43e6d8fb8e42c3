"""Budgets (``RateLimit``, ``adapter._budget.Budget``): the badge service's token buckets.

Rules pinned (issue 29, from the badge service's plan, simplex-chat
``plans/2026-07-20-supporter-badges-v2-implementation.md``): a bucket per
signer, one for all requests, one for unsigned requests; ``failures_only``
counts only requests whose answer is an error; with several limits every one
must have a token; ``retryAfter`` is the seconds until the request would pass
them all, the next token's wait, rounded up. Every time here comes from an
injected clock: nothing sleeps, nothing is timed.
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

import simplex_rpc as sx
from _support import pair
from simplex_rpc import Request, Response
from simplex_rpc.adapter import RateLimit, ServiceRequest
from simplex_rpc.adapter._budget import Budget, retry_after
from simplex_rpc.errors import SimplexRpcError


class Clock:
    """An injected clock: seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


A = sx.SigningKey.generate().public_key
B = sx.SigningKey.generate().public_key


def burst(budget: Budget, signer: sx.PublicKey | None, count: int) -> list[int | None]:
    return [budget.check(signer) for _ in range(count)]


# -- the three scopes in a burst ---------------------------------------------------------------


def test_signer_scope_gives_each_signer_a_bucket_and_the_unsigned_one_between_them() -> None:
    clock = Clock()
    budget = Budget(RateLimit(3, 60), clock=clock)  # a token every 20 s
    assert burst(budget, A, 4) == [None, None, None, 20]
    assert burst(budget, B, 3) == [None, None, None]  # B's own bucket
    assert burst(budget, None, 4) == [None, None, None, 20]  # the unsigned share one
    assert budget.check(A) == 20


def test_global_scope_is_one_bucket_for_every_request() -> None:
    clock = Clock()
    budget = Budget(RateLimit(3, 60, scope="global"), clock=clock)
    assert [budget.check(A), budget.check(B), budget.check(None)] == [None, None, None]
    assert [budget.check(A), budget.check(B), budget.check(None)] == [20, 20, 20]


def test_unsigned_scope_limits_only_unsigned_requests() -> None:
    clock = Clock()
    budget = Budget(RateLimit(2, 60, scope="unsigned"), clock=clock)  # a token every 30 s
    assert burst(budget, None, 3) == [None, None, 30]
    assert burst(budget, A, 50) == [None] * 50  # signed requests are not counted


def test_retry_after_is_the_next_tokens_wait() -> None:
    """retryAfter: "the seconds to the next token", counted on the injected clock and
    rounded up to whole seconds (a uint32 of the envelope)."""
    clock = Clock()
    budget = Budget(RateLimit(3, 60), clock=clock)
    assert burst(budget, A, 3) == [None, None, None]
    assert budget.wait(A) == pytest.approx(20.0)
    assert budget.check(A) == 20
    clock.now += 5
    assert budget.wait(A) == pytest.approx(15.0)
    assert budget.check(A) == 15
    clock.now += 14.5  # 0.5 s to the token: announced as 1 s
    assert budget.check(A) == 1
    clock.now += 0.5
    assert budget.check(A) is None
    assert budget.check(A) == 20
    # A rate whose token is a fraction of a second away is rounded up.
    thirds = Budget(RateLimit(3, 10), clock=clock)
    assert burst(thirds, A, 4) == [None, None, None, math.ceil(10 / 3)]
    assert thirds.wait(A) == pytest.approx(10 / 3)


def test_the_bucket_refills_evenly_up_to_its_size() -> None:
    clock = Clock()
    budget = Budget(RateLimit(3, 60), clock=clock)
    assert burst(budget, A, 3) == [None, None, None]
    clock.now += 40  # two tokens
    assert burst(budget, A, 3) == [None, None, 20]
    clock.now += 3600  # full, not more
    assert burst(budget, A, 4) == [None, None, None, 20]


def test_a_clock_that_steps_back_refills_nothing() -> None:
    clock = Clock()
    budget = Budget(RateLimit(1, 60), clock=clock)
    assert budget.check(A) is None
    clock.now -= 3600
    assert budget.check(A) == 60


# -- a sequence of limits -----------------------------------------------------------------------


def test_every_limit_must_have_a_token_and_retry_after_is_the_longest_wait() -> None:
    """The badge service's set: per signer, a global one, one for unsigned calls."""
    clock = Clock()
    budget = Budget(
        [
            RateLimit(2, 60),  # per signer: a token every 30 s
            RateLimit(5, 100, scope="global"),  # a token every 20 s
            RateLimit(1, 300, scope="unsigned"),  # a token every 300 s
        ],
        clock=clock,
    )
    assert burst(budget, A, 3) == [None, None, 30]
    assert budget.check(None) is None
    assert budget.check(None) == 300  # the unsigned bucket's wait is the longest
    assert burst(budget, B, 2) == [None, None]  # the global bucket's last two tokens
    assert budget.check(sx.SigningKey.generate().public_key) == 20  # a fresh signer waits
    clock.now += 20  # one global token back; A's bucket needs 10 s more
    assert budget.check(A) == 10
    assert budget.wait(A) == pytest.approx(10.0)
    clock.now += 10
    assert budget.check(A) is None


def test_a_refused_request_takes_no_token() -> None:
    """A flood refused by its signer's bucket does not drain the global bucket."""
    clock = Clock()
    budget = Budget([RateLimit(1, 60), RateLimit(3, 60, scope="global")], clock=clock)
    assert budget.check(A) is None
    assert burst(budget, A, 100) == [60] * 100
    # The global bucket kept its two tokens: B and an unsigned request take them.
    assert [budget.check(B), budget.check(None)] == [None, None]
    assert budget.check(sx.SigningKey.generate().public_key) == 20


# -- failures only -------------------------------------------------------------------------------


def test_failures_only_counts_error_answers_alone() -> None:
    clock = Clock()
    budget = Budget(RateLimit(2, 60, failures_only=True), clock=clock)
    for _ in range(100):  # successes take nothing
        assert budget.check(A) is None
        budget.settle(A, failed=False)
    for _ in range(2):
        assert budget.check(A) is None
        budget.settle(A, failed=True)
    assert budget.check(A) == 30  # two failures: the bucket is empty
    assert budget.check(B) is None  # per signer


def test_a_global_failure_bucket_with_a_signer_bucket() -> None:
    """The badge service's pair: per signer, counting failures; one global bucket for
    failures. A refused request is not a failure: it takes no token."""
    clock = Clock()
    budget = Budget(
        [
            RateLimit(2, 60, failures_only=True),
            RateLimit(3, 30, scope="global", failures_only=True),
        ],
        clock=clock,
    )
    for signer in (A, A, B):
        assert budget.check(signer) is None
        budget.settle(signer, failed=True)
    assert budget.check(A) == 30  # A's own bucket: 30 s; the global one: 10 s
    assert budget.check(None) == 10  # the global failure bucket is empty for everyone
    clock.now += 10
    assert budget.check(None) is None


def test_concurrent_failures_each_take_a_token_below_zero() -> None:
    """Requests that pass the check together and then fail each count: the wait grows."""
    clock = Clock()
    budget = Budget(RateLimit(1, 10, failures_only=True), clock=clock)
    assert burst(budget, A, 3) == [None, None, None]  # in flight together
    for _ in range(3):
        budget.settle(A, failed=True)
    assert budget.check(A) == 30  # 1 - (-2) tokens at one every 10 s
    assert budget.wait(A) == pytest.approx(30.0)


def test_settle_without_a_failure_limit_changes_nothing() -> None:
    clock = Clock()
    budget = Budget(RateLimit(1, 60), clock=clock)
    assert not budget.failures_counted
    budget.settle(A, failed=True)
    assert budget.check(A) is None


# -- bounds and arguments ---------------------------------------------------------------------


def test_signer_buckets_stay_bounded() -> None:
    clock = Clock()
    budget = Budget(RateLimit(1, 60, max_signers=3), clock=clock)
    keys = [sx.SigningKey.generate().public_key for _ in range(10)]
    for key in keys:
        assert budget.check(key) is None
    assert len(budget._states[0].buckets) == 3
    assert budget.check(keys[-1]) == 60  # the recent ones are kept
    assert budget.check(keys[0]) is None  # the oldest was forgotten: it starts full


def test_retry_after_fits_the_envelopes_uint32() -> None:
    clock = Clock()
    budget = Budget(RateLimit(1, 1e12), clock=clock)
    assert budget.check(A) is None
    assert budget.check(A) == 2**32 - 1
    assert retry_after(0.001) == 1


def test_the_constructor_of_before_still_works() -> None:
    limit = RateLimit(requests=5, per=1.0)
    assert (limit.scope, limit.failures_only, limit.max_signers) == ("signer", False, 10_000)
    assert RateLimit(5, 1.0) == limit
    assert pickle.loads(pickle.dumps(RateLimit(5, 1, scope="global", failures_only=True))) == (
        RateLimit(5, 1, scope="global", failures_only=True)
    )


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"scope": "user"}, "scope must be one of signer, global, unsigned"),
        ({"failures_only": 1}, "failures_only"),
        ({"max_signers": True}, "max_signers"),
        ({"per": True}, "per must be"),
    ],
)
def test_rate_limit_names_what_is_wrong(kwargs: dict[str, Any], says: str) -> None:
    arguments: dict[str, Any] = {"requests": 1, "per": 1, **kwargs}
    with pytest.raises(SimplexRpcError, match=says):
        RateLimit(**arguments)


@pytest.mark.parametrize(
    ("limits", "says"),
    [
        ([], r"^rate_limit: an empty sequence"),
        ([RateLimit(1, 1), 5], r"^rate_limit\[1\]: expected a RateLimit, got int"),
        ("10/s", r"^rate_limit: expected a RateLimit or a sequence of them, got str"),
    ],
)
def test_budget_names_what_is_wrong(limits: Any, says: str) -> None:
    with pytest.raises(SimplexRpcError, match=says):
        Budget(limits)


# -- through serve ---------------------------------------------------------------------------


def failing(request: ServiceRequest) -> Any:
    if request.request.request == "fail":
        return Response.failure("invalid_purchase", "no such purchase")
    return "ok"


@pytest.mark.anyio
async def test_serve_takes_a_sequence_and_counts_failures_only() -> None:
    """serve(rate_limit=[...]): successes pass, the signer's failures empty its bucket,
    and the rate_limited answer carries retryAfter."""
    signer = sx.SigningKey.generate()
    limits = [RateLimit(2, 3600, failures_only=True), RateLimit(100, 3600, scope="global")]

    async with pair(failing, rate_limit=limits) as p:

        async def ask(what: str, key: sx.SigningKey | None = signer) -> Response:
            request = Request(protocol="mcp", request=what)
            response: Response = await p.alice.service_request(
                1, p.link, request, timeout=5, sign_key=key
            )
            return response

        for _ in range(4):
            assert (await ask("fine")).ok
        for _ in range(2):
            failed = await ask("fail")
            assert failed.error is not None and failed.error.code == "invalid_purchase"
        limited = await ask("fine")
        assert limited.error is not None and limited.error.code == "rate_limited"
        # The next token is 1,800 s away, less the moment since the failure.
        assert limited.error.retry_after is not None
        assert 1790 <= limited.error.retry_after <= 1800
        assert (await ask("fine", None)).ok  # another requester: its own bucket


@pytest.mark.parametrize(
    ("requests", "per"), [(1, 30), (3, 7), (7, 3), (10, 1), (3, 0.1), (1, 1 / 3)]
)
def test_a_token_is_there_exactly_when_its_time_comes(requests: int, per: float) -> None:
    """The float error of a refill is no refusal: at n token times, n tokens have come."""
    clock = Clock()
    budget = Budget(RateLimit(requests, per), clock=clock)
    assert burst(budget, A, requests) == [None] * requests
    start = clock.now
    for n in range(1, 50):
        clock.now = start + n * (per / requests)
        assert budget.check(A) is None, n

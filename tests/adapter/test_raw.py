"""The raw layer (issue 29, item 1): serve_raw and service_request_raw keep every guarantee
of serve and service_request, with the service's own answers.

serve_raw answers on its own in the shape its ``errors`` says (the protocol
text's ``{"error": {...}}`` by default, ``TYPED_ERRORS`` for the badge
service's ``{"type": "error", ...}``): a request that is not a strict JSON
object is ``bad_request``, a handler that raises or returns anything but an
object ``internal``, one past its deadline ``internal``, an answer past the
size limit ``too_large``, overload ``rate_limited`` with ``retryAfter``. A
requestId the core reports twice is answered once and never reaches the answer
store; serve(answers=) keeps the envelope's answers the same way as serve_raw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import simplex_rpc as sx
from _scripted_core import ScriptedCore
from _support import pair
from simplex_rpc import Request, Response
from simplex_rpc.adapter import (
    ENVELOPE_ERRORS,
    MAX_RAW_REQUEST,
    TYPED_ERRORS,
    AnswerStore,
    ChatCore,
    RawRequest,
    ServiceRequest,
    TypedErrors,
    raw_request_command,
)
from simplex_rpc.errors import ChatCoreError, EnvelopeError, SimplexRpcError

LINK = "simplex:/a#abc?h=example"


@contextlib.asynccontextmanager
async def raw_serving(handler: Any, **options: Any) -> AsyncIterator[tuple[ScriptedCore, ChatCore]]:
    async with ScriptedCore() as fake, ChatCore.connect(fake.url) as core:
        ready = asyncio.Event()
        task = asyncio.create_task(core.serve_raw(1, handler, ready=ready, **options))
        await ready.wait()
        try:
            yield fake, core
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def event(request_id: str, data: Any, signer: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "serviceRequest",
        "user": {"userId": 1},
        "requestId": request_id,
        "requestData": data,
    }
    if signer is not None:
        out["signerKey"] = signer
    return out


@pytest.mark.anyio
async def test_the_handler_gets_the_object_and_its_answer_goes_back_as_it_is() -> None:
    seen: list[RawRequest] = []
    key = sx.SigningKey.generate().public_key

    def handler(raw: RawRequest) -> dict[str, Any]:
        seen.append(raw)
        return {"type": "ok", "echo": raw.data}

    async with raw_serving(handler) as (fake, _):
        data = {"version": 1, "request": {"type": "x"}}
        await fake.event(event("r1", data, key.encode()))
        await fake.wait_answers(1)
        assert fake.answers["r1"] == [{"type": "ok", "echo": data}]
    (raw,) = seen
    assert raw.signer == key and raw.request_id == "r1" and raw.user_id == 1
    assert "version" not in repr(raw) and "2 members" in repr(raw)  # no content in the repr


@pytest.mark.parametrize("errors", [ENVELOPE_ERRORS, TYPED_ERRORS], ids=["envelope", "typed"])
@pytest.mark.parametrize(
    ("data", "code", "says"),
    [
        ([1, 2], "bad_request", "expected a JSON object, got an array"),
        ('{"a":1,"a":2}', "bad_request", "duplicate"),
        ("not json", "bad_request", "request:"),
        ({"boom": True}, "internal", "the responder failed"),
        ({"list": True}, "internal", "the responder failed"),
        ({"big": True}, "too_large", "size limit"),
    ],
)
@pytest.mark.anyio
async def test_the_responders_own_answers_take_the_services_shape(
    errors: Any, data: Any, code: str, says: str
) -> None:
    def handler(raw: RawRequest) -> Any:
        if raw.data.get("boom"):
            raise RuntimeError("secret detail")
        if raw.data.get("list"):
            return [1]  # not an object
        if raw.data.get("big"):
            return {"x": "y" * 200}
        return {"type": "ok"}

    async with raw_serving(handler, errors=errors, max_response_bytes=100) as (fake, _):
        await fake.event(event("r1", data))
        await fake.wait_answers(1)
        (answer,) = fake.answers["r1"]
        assert errors.code(answer) == code
        message = answer["error"]["message"] if errors is ENVELOPE_ERRORS else answer["message"]
        assert says in message and "secret" not in message


@pytest.mark.anyio
async def test_a_handler_past_its_deadline_and_overload_are_answered_in_the_services_shape() -> None:  # noqa: E501  # noqa: E501
    release = asyncio.Event()

    async def handler(raw: RawRequest) -> dict[str, Any]:
        await release.wait()
        return {"type": "late"}

    async with raw_serving(
        handler, errors=TYPED_ERRORS, concurrency=1, max_queue=0, handler_timeout=1
    ) as (fake, _):
        await fake.event(event("slow", {"n": 1}))
        await fake.event(event("shed", {"n": 2}))
        await fake.wait_answers(2)
        (shed,) = fake.answers["shed"]
        assert shed["type"] == "error" and shed["code"] == "rate_limited"
        assert isinstance(shed["retryAfter"], int)
        (late,) = fake.answers["slow"]
        assert late == {
            "type": "error",
            "code": "internal",
            "message": "the responder did not finish in time",
        }
        release.set()


@pytest.mark.anyio
async def test_the_core_repeating_a_request_id_is_answered_once_and_never_reaches_the_store() -> None:  # noqa: E501  # noqa: E501
    """Two rules, two cases: the core reporting one request twice (the same requestId) is
    the admission's; a requester repeating its request (a new requestId, the same bytes and
    signer) is the answer store's."""
    runs: list[str] = []
    signer = sx.SigningKey.generate().public_key.encode()

    def handler(raw: RawRequest) -> dict[str, Any]:
        runs.append(raw.request_id)
        return {"type": "ok", "run": len(runs)}

    async with raw_serving(handler, answers=AnswerStore()) as (fake, _):
        await fake.event(event("r1", {"q": 1}, signer))
        await fake.wait_answers(1)
        await fake.event(event("r1", {"q": 1}, signer))  # the core's repeat
        await fake.event(event("r2", {"q": 1}, signer))  # the requester's repeat
        await fake.event(event("r3", {"q": 2}, signer))  # another request
        await fake.wait_answers(3)
        assert fake.answers["r1"] == [{"type": "ok", "run": 1}]
        assert fake.answers["r2"] == [{"type": "ok", "run": 1}]
        assert fake.answers["r3"] == [{"type": "ok", "run": 2}]
    assert runs == ["r1", "r3"]


@pytest.mark.anyio
async def test_serve_keeps_envelope_answers_too() -> None:
    """serve(answers=): the same store under the protocol text's envelope; an error with
    retryAfter is not kept (a repeat may succeed)."""
    runs: list[Any] = []

    def handler(request: ServiceRequest) -> Any:
        runs.append(request.request.request)
        if request.request.request == "busy":
            return Response.failure("rate_limited", "later", retry_after=1)
        return {"n": len(runs)}

    key = sx.SigningKey.generate()

    async with pair(handler, answers=AnswerStore()) as p:

        async def ask(what: str) -> Response:
            response: Response = await p.alice.service_request(
                1, p.link, Request(protocol="mcp", request=what), timeout=5, sign_key=key
            )
            return response

        assert (await ask("a")).response == {"n": 1}
        assert (await ask("a")).response == {"n": 1}
        assert not (await ask("busy")).ok
        assert not (await ask("busy")).ok
    assert runs == ["a", "busy", "busy"]


@pytest.mark.anyio
async def test_a_store_that_is_not_one_is_refused_before_serving(
    scripted_core: ScriptedCore,
) -> None:
    async with ChatCore.connect(scripted_core.url) as core:
        with pytest.raises(SimplexRpcError, match="answers: expected an answer store"):
            await core.serve_raw(1, lambda r: {}, answers=object())  # type: ignore[arg-type]
        with pytest.raises(SimplexRpcError, match="errors: expected an ErrorFormat"):
            await core.serve_raw(1, lambda r: {}, errors=object())  # type: ignore[arg-type]


# -- the caller ---------------------------------------------------------------------


def test_the_raw_command_is_exact() -> None:
    key = sx.SigningKey.from_seed(bytes(range(32)))
    obj = {"version": 1, "request": {"type": "é"}}
    assert raw_request_command(3, LINK, obj, timeout=9, sign_key=key) == (
        f"/_service_request 3 {LINK} timeout=9 sign_key={key.encode()} "
        '{"version":1,"request":{"type":"é"}}'
    )


@pytest.mark.parametrize(
    ("obj", "error", "says"),
    [
        ([1], TypeError, "JSON object"),
        ({"x": float("nan")}, SimplexRpcError, "not strict JSON"),
        ({"x": "y" * MAX_RAW_REQUEST}, SimplexRpcError, "cannot fit the agent's block"),
    ],
)
def test_a_raw_request_that_cannot_be_sent_is_refused_before_sending(
    obj: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        raw_request_command(1, LINK, obj)


@pytest.mark.parametrize(
    ("data", "raises", "says"),
    [
        ("[1]", EnvelopeError, "expected a JSON object"),
        ('{"a":1,"a":2}', EnvelopeError, "duplicate"),
        ('{"x":"' + "y" * 15_000 + '"}', ChatCoreError, "more than a response can carry"),
    ],
)
@pytest.mark.anyio
async def test_an_answer_that_is_not_an_object_or_too_long_is_refused(
    scripted_core: ScriptedCore,
    data: str, raises: type[Exception], says: str
) -> None:
    async with ChatCore.connect(scripted_core.url) as core:
        scripted_core.raw["/_service_request"] = lambda corr_id, cmd: json.dumps(
            {"corrId": corr_id, "resp": {"type": "serviceResponse", "responseData": data}}
        )
        with pytest.raises(raises, match=says):
            await core.service_request_raw(1, LINK, {"q": 1}, timeout=5)


def test_the_typed_error_shape_is_configurable() -> None:
    errors = TypedErrors(tag="kind", value="failure")
    answer = errors.error("busy", "later", 3)
    assert answer == {"kind": "failure", "code": "busy", "message": "later", "retryAfter": 3}
    assert errors.code(answer) == "busy" and errors.retry_after(answer) == 3
    assert errors.code({"kind": "ok", "code": "x"}) is None
    assert TYPED_ERRORS.retry_after({"type": "error", "code": "x", "retryAfter": -1}) is None
    assert ENVELOPE_ERRORS.retry_after({"error": {"code": "x", "retryAfter": 2.0}}) == 2
    with pytest.raises(SimplexRpcError):
        TypedErrors(tag="code")


@pytest.mark.anyio
async def test_no_key_or_credential_in_any_log_of_raw_traffic() -> None:
    """Redaction (issue 21's rule, kept by the raw layer): signed and unsigned raw
    requests carrying a credential, through serve_raw with an answer store and the raw
    caller's retries, at every level of every logger: no key, no credential."""
    from _redaction import TOKEN, every_level, secrets_of

    key = sx.SigningKey.generate()
    seen: list[str] = []

    def handler(raw: RawRequest) -> dict[str, Any]:
        seen.append(repr(raw))
        if len(seen) == 1:
            return TYPED_ERRORS.error("busy", "later", 1)
        return {"type": "ok", "echo": raw.data}

    with every_level() as captured:
        from _badge import world

        async with world() as w:
            stop = asyncio.Event()
            task = asyncio.create_task(
                w.bob.serve_raw(
                    1,
                    handler,
                    errors=TYPED_ERRORS,
                    answers=AnswerStore(unsigned=True),
                    stop=stop,
                )
            )
            obj = {"version": 1, "auth": {"Authorization": f"Bearer {TOKEN}"}}
            for signer in (key, None):
                answer = await w.alice.service_request_raw(
                    1, w.link, obj, timeout=5, sign_key=signer, retries=1, errors=TYPED_ERRORS
                )
                assert answer["type"] == "ok"
            stop.set()
            await task
    text = "\n".join(captured.lines + seen)
    assert captured.lines
    for secret in secrets_of(key):
        assert secret not in text


@pytest.mark.anyio
async def test_a_failed_run_is_not_kept_and_a_failing_store_runs_nothing() -> None:
    """What is kept: not an answer the handler failed to give (internal), so its repeat
    runs again. A store that fails in begin answers internal and runs nothing (running
    could run twice what the store would have answered)."""
    runs: list[str] = []
    signer = sx.SigningKey.generate().public_key.encode()

    def handler(raw: RawRequest) -> dict[str, Any]:
        runs.append(raw.request_id)
        if len(runs) == 1:
            raise RuntimeError("first run fails")
        return {"type": "ok"}

    class Broken(AnswerStore):
        def begin(self, signer: Any, request: bytes) -> Any:
            raise SimplexRpcError("answer store 'x.db': database is locked")

    async with raw_serving(handler, answers=AnswerStore(), errors=TYPED_ERRORS) as (fake, _):
        await fake.event(event("r1", {"q": 1}, signer))
        await fake.wait_answers(1)
        await fake.event(event("r2", {"q": 1}, signer))
        await fake.event(event("r3", {"q": 1}, signer))
        await fake.wait_answers(3)
        assert fake.answers["r1"][0]["code"] == "internal"
        assert fake.answers["r2"] == fake.answers["r3"] == [{"type": "ok"}]
    async with raw_serving(handler, answers=Broken(), errors=TYPED_ERRORS) as (fake, _):
        await fake.event(event("r4", {"q": 1}, signer))
        await fake.wait_answers(1)
        assert fake.answers["r4"][0]["code"] == "internal"
    assert runs == ["r1", "r2"]


@pytest.mark.anyio
async def test_a_run_past_its_deadline_lets_the_waiting_repeat_run() -> None:
    """Exactly once with a store: the first run passes its deadline (answered internal at
    that moment, nothing kept); the repeat that came later and waited for it begins again
    and runs (a repeat that came with the first shares its deadline, and its fate)."""
    calls: list[str] = []
    hang = asyncio.Event()
    signer = sx.SigningKey.generate().public_key.encode()

    async def handler(raw: RawRequest) -> dict[str, Any]:
        calls.append(raw.request_id)
        if len(calls) == 1:
            await hang.wait()  # never set: cancelled at the deadline
        return {"type": "ok", "by": raw.request_id}

    async with raw_serving(
        handler, answers=AnswerStore(), errors=TYPED_ERRORS, handler_timeout=1
    ) as (fake, _):
        await fake.event(event("first", {"q": 1}, signer))
        # Later than the first: its own deadline, from its own arrival, is later too.
        await asyncio.sleep(0.5)  # the behaviour under test: a later arrival
        await fake.event(event("repeat", {"q": 1}, signer))
        await fake.wait_answers(2)
        assert fake.answers["first"][0]["code"] == "internal"
        assert fake.answers["repeat"] == [{"type": "ok", "by": "repeat"}]
        await fake.event(event("later", {"q": 1}, signer))  # now kept: from the store
        await fake.wait_answers(3)
        assert fake.answers["later"] == [{"type": "ok", "by": "repeat"}]
    assert calls == ["first", "repeat"]

"""``simplex-rpc bench adapter``: the Service RPC responder under load and under faults.

Every scenario runs in this one process, on the loopback: a requester core
``alice`` sends a burst of concurrent ``/_service_request`` commands through
:class:`~simplex_rpc.testing.CoreSimulator` to a responder core ``bob``
running :meth:`ChatCore.serve <simplex_rpc.adapter.ChatCore.serve>`, and each
requester's round trip is timed. The repeated-ids scenario needs a core that
reports one ``requestId`` more than once, which the simulator never does: a
small scripted core here sends those events and counts the answers.

Scenarios (``N`` requests, 1,000 by default, 200 with ``--quick``):

* ``unsigned``, ``signed``: a burst of ``N``, echo handler (signed: one key,
  the request naming it as ``requestKey``);
* ``faults``: one request in 20 each raises, raises ``CancelledError``,
  hangs past the handler deadline (2 s), or returns an oversized result
  (128 slots: the hanging handlers do not starve the others);
* ``overflow``: four slots and a queue of 50 for a burst of ``N``: the rest is
  shed with ``rate_limited``. The handlers are held until every request past
  the slots and the queue has been shed, so the overflow happens however fast
  the machine answers;
* ``repeats``: the core (the scripted one, ``simplex_rpc.testing.ScriptedCore``)
  reports every ``requestId`` twice at once, and every other one a third time
  after its answer, on the connection of the first two;
* ``drop``: the responder's connection is dropped a quarter into the burst;
* ``calls``: a bot that calls and serves. ``bob`` answers a burst of ``N``
  requests (64 in flight) while 32 of its own service requests to
  ``carol`` are in flight (held by carol for the whole round), and the same
  bot with no calls, interleaved, three rounds each, on a simulator whose
  every command costs 0.2 ms (``CoreSimulator(command_delay=...)``). The calls
  ratio is the busy rate over the quiet one (medians); its target is at least
  ``CALLS_TARGET``: the calls run on connections of their own (the core runs
  one command at a time per connection), so they do not hold bob's answers;
* ``edge``: the cost of the library's edge. A loopback core in a process of
  its own, which runs one command at a time per connection and gives each
  event to one connection as the chat core does (``apps/simplex-chat/Server.hs``:
  each command answered before the next is read, one queue of events that
  every connection takes from; ``serve`` answers on a connection of its own),
  keeps 64 ``serviceRequest`` events outstanding (4 ``N`` in all, half
  carrying ``signerKey`` and a matching ``requestKey``) and acknowledges each
  ``/_service_response`` at once. It is driven two ways, interleaved, seven
  rounds each: by ``ChatCore.serve`` with a trivial handler, and by the
  ``null`` baseline row, a plain websockets client doing only ``json.loads``
  of each frame, ``json.dumps`` of an envelope and one ``/_service_response``
  per request. The edge ratio is the null responder's rate over serve's
  (medians); its target is at most ``EDGE_TARGET``.

The requester ``alice`` has a pool of ``BURST_CONNECTIONS`` connections: the core
runs one ``/_service_request`` at a time per connection, so up to 128 of a burst
are in flight at once (the rest wait for a connection, in order).

Counts: ``ok`` responses, ``errors`` (error answers other than
``rate_limited``), ``shed`` (``rate_limited`` answers), ``lost`` (requests the
requester got no answer to), ``dup`` (second answers the core was sent),
``wrong`` (a success answering another request). Lost, dup and wrong must be
0 wherever the responder keeps its connection; otherwise the command exits 1.
``log`` is the number of WARNING-or-worse lines the library logged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from ..._wire.envelope import Request, Response
from ..._wire.keys import SigningKey
from ...adapter import ChatCore, ServiceRequest
from ...errors import ChatCoreError, SimplexRpcError
from ...testing import CoreSimulator, ScriptedCore
from ...testing._scripted import ACCEPTED
from .._common import EXIT_INVALID, EXIT_OK, emit_json, fail
from ._machine import machine

__all__ = ["SCENARIOS", "Outcome", "handle", "run_scenarios"]

#: The scenario keys, in the order of the report (``edge`` also reports the ``null`` row).
SCENARIOS: Final = (
    "unsigned",
    "signed",
    "faults",
    "overflow",
    "repeats",
    "drop",
    "calls",
    "edge",
)
#: The edge's target: serve takes at most this many times the null responder's time.
EDGE_TARGET: Final = 2.0
#: The calls row's target: the bot answers at least this fraction of its quiet rate
#: while its own calls are in flight.
CALLS_TARGET: Final = 0.8
#: The bot's own service requests in flight in the calls row, and its rounds.
CALLS_IN_FLIGHT: Final = 32
CALLS_ROUNDS: Final = 3
#: The simulator's cost of each command in the calls row, in seconds.
CALLS_COMMAND_COST: Final = 0.0002
#: The requester's pool in the bursts: 128 requests in flight at once.
BURST_CONNECTIONS: Final = 130
#: Requests the edge's core keeps outstanding, and the rounds of each responder.
EDGE_OUTSTANDING: Final = 64
EDGE_ROUNDS: Final = 7
FULL_REQUESTS: Final = 1000
QUICK_REQUESTS: Final = 200
#: The requester's wait (the protocol's ``timeout``): long enough never to cut an answer short.
REQUEST_TIMEOUT: Final = 30
#: The requester's wait when its responder's connection is dropped: the lost ones wait it out.
DROP_TIMEOUT: Final = 3
#: The overflow scenario's handler slots and queue (``serve``'s concurrency and max_queue).
OVERFLOW_SLOTS: Final = 4
OVERFLOW_QUEUE: Final = 50
#: The oversized result: more than the 10,000 bytes of JSON a response should not exceed.
OVERSIZED: Final = "x" * 12_000


@dataclass(slots=True)
class Outcome:
    """The counts and round-trip times of one scenario."""

    scenario: str
    title: str
    requests: int
    connected: bool
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    log_lines: int = 0
    note: str = ""
    rate: float | None = None  # the edge rows: the median rate of their rounds
    ratio: float | None = None  # the edge row: the null responder's rate over serve's
    calls_ratio: float | None = None  # the calls row: its rate over the quiet bot's

    @property
    def shed(self) -> int:
        """Requests answered ``rate_limited``."""
        return self.errors["rate_limited"]

    @property
    def answered(self) -> int:
        return self.ok + sum(self.errors.values())

    @property
    def per_second(self) -> float:
        if self.rate is not None:
            return self.rate
        return self.answered / self.seconds if self.seconds > 0 else 0.0

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the round-trip times, in seconds (None without answers)."""
        if not self.latencies:
            return None
        if len(self.latencies) == 1:
            return self.latencies[0]
        cuts = statistics.quantiles(self.latencies, n=100, method="inclusive")
        return cuts[round(q * 100) - 1]

    def record(self, n: int, response: Response, latency: float) -> None:
        """Count the answer to request ``n`` (a success must echo ``n``)."""
        self.latencies.append(latency)
        if response.error is not None:
            self.errors[response.error.code] += 1
        elif response.response == {"n": n}:
            self.ok += 1
        else:
            self.wrong += 1

    @property
    def broken(self) -> bool:
        """Lost, duplicated or wrong answers while the responder had its connection."""
        return self.connected and (self.lost > 0 or self.duplicated > 0 or self.wrong > 0)

    def to_json(self) -> dict[str, Any]:
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        return {
            "scenario": self.scenario,
            "title": self.title,
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
            "requests_per_second": round(self.per_second, 1),
            "p50_ms": None if p50 is None else round(p50 * 1000, 2),
            "p99_ms": None if p99 is None else round(p99 * 1000, 2),
            "ok": self.ok,
            "errors": dict(sorted(self.errors.items())),
            "shed": self.shed,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "wrong": self.wrong,
            "log_lines": self.log_lines,
            "connected": self.connected,
            "note": self.note,
            **(
                {"edge_ratio": round(self.ratio, 3), "edge_target": EDGE_TARGET}
                if self.ratio
                else {}
            ),
            **(
                {"calls_ratio": round(self.calls_ratio, 3), "calls_target": CALLS_TARGET}
                if self.calls_ratio
                else {}
            ),
        }


class _LogCounter(logging.Handler):
    """Counts the library's WARNING-or-worse lines, and keeps them off stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def _counting_logs() -> Any:
    counter = _LogCounter()
    loggers = [logging.getLogger(name) for name in ("simplex_rpc", "websockets")]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(counter)
        lg.propagate = False
        lg.setLevel(logging.WARNING)
    try:
        yield counter
    finally:
        for lg, (propagate, level) in zip(loggers, saved, strict=True):
            lg.removeHandler(counter)
            lg.propagate = propagate
            lg.setLevel(level)


# -- handlers ---------------------------------------------------------------------------


async def _echo(request: ServiceRequest) -> Any:
    await asyncio.sleep(0)
    return {"n": request.request.request["n"]}


async def _overflow(outcome: Outcome) -> None:
    """A burst into ``OVERFLOW_SLOTS`` slots and a queue of ``OVERFLOW_QUEUE``, the handlers
    held until the slots are taken and the rest of the burst shed: a responder that keeps
    up cannot hide the overflow, whatever the machine's speed."""
    gate = asyncio.Event()
    held = 0
    n = outcome.requests
    to_shed = max(0, n - OVERFLOW_SLOTS - OVERFLOW_QUEUE)

    def admitted() -> None:
        if held >= min(n, OVERFLOW_SLOTS) and outcome.shed >= to_shed:
            gate.set()

    async def held_echo(request: ServiceRequest) -> Any:
        nonlocal held
        held += 1
        admitted()
        await gate.wait()
        return {"n": request.request.request["n"]}

    await _through_simulator(
        outcome,
        held_echo,
        serve_options={"concurrency": OVERFLOW_SLOTS, "max_queue": OVERFLOW_QUEUE},
        on_answer=admitted,
    )


async def _slower_echo(request: ServiceRequest) -> Any:
    await asyncio.sleep(0.02)
    return {"n": request.request.request["n"]}


async def _faulty(request: ServiceRequest) -> Any:
    """One request in 20 each: raises, raises CancelledError, hangs, answers too much."""
    n = request.request.request["n"]
    kind = n % 20
    if kind == 0:
        raise RuntimeError("a handler bug")
    if kind == 1:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future  # someone else cancelled what the handler waited for
    if kind == 2:
        await asyncio.Event().wait()  # hangs: cut at the handler deadline
    if kind == 3:
        return {"n": n, "blob": OVERSIZED}
    await asyncio.sleep(0)
    return {"n": n}


# -- scenarios through the simulator ----------------------------------------------------------


async def _through_simulator(
    outcome: Outcome,
    handler: Callable[[ServiceRequest], Awaitable[Any]],
    *,
    signed: bool = False,
    serve_options: dict[str, Any] | None = None,
    drop_after: int | None = None,
    on_answer: Callable[[], None] | None = None,
) -> None:
    """A burst of ``outcome.requests`` from ``alice`` to ``bob`` serving ``handler``;
    ``on_answer`` is called after each answer is counted."""
    timeout = DROP_TIMEOUT if drop_after is not None else REQUEST_TIMEOUT
    key = SigningKey.generate() if signed else None
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=BURST_CONNECTIONS) as alice,
    ):
        await bob.start(service_requests=True)
        link = (await bob.service_address(1)).link
        await alice.start(service_requests=False)
        ready = asyncio.Event()
        serving = asyncio.create_task(
            bob.serve(1, handler, protocols=["mcp"], ready=ready, **(serve_options or {}))
        )
        await ready.wait()
        answered = 0
        dropped = asyncio.Event()

        async def one(n: int) -> None:
            nonlocal answered
            request = Request(
                protocol="mcp",
                request={"n": n},
                request_key=key.public_key if key is not None else None,
            )
            start = time.perf_counter()
            try:
                response = await alice.service_request(
                    1, link, request, timeout=timeout, sign_key=key
                )
            except ChatCoreError:
                outcome.lost += 1
                return
            outcome.record(n, response, time.perf_counter() - start)
            answered += 1
            if on_answer is not None:
                on_answer()
            if drop_after is not None and answered == drop_after:
                dropped.set()

        started = time.perf_counter()
        burst = asyncio.gather(*(one(n) for n in range(outcome.requests)))
        if drop_after is not None:
            await dropped.wait()
            await sim.drop_connections("bob")
            drop_time = time.perf_counter()
            try:
                async with asyncio.timeout(10):
                    await asyncio.wait({serving})
                outcome.note = (
                    f"serve() ended {time.perf_counter() - drop_time:.2f} s after the drop"
                )
            except TimeoutError:
                outcome.note = "serve() still running 10 s after the drop"
        await burst
        outcome.seconds = time.perf_counter() - started
        outcome.duplicated += sim.stats.duplicate_responses
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await serving


# -- the repeated-ids scenario: a scripted core -------------------------------------------------


async def _repeated_ids(outcome: Outcome) -> None:
    """The core reports each requestId twice at once, and every other one again after its
    answer; each must be answered exactly once. The core is the scripted one
    (:class:`~simplex_rpc.testing.ScriptedCore`): its ``/_service_response`` hook takes
    the answer's time and sends the repeat."""
    answers: Counter[str] = Counter()
    first_answer: dict[str, float] = {}
    sent_at: dict[str, float] = {}
    all_answered = asyncio.Event()
    n_requests = outcome.requests

    def event(request_id: str, n: int) -> str:
        return json.dumps(
            {
                "resp": {
                    "type": "serviceRequest",
                    "user": {"userId": 1},
                    "requestId": request_id,
                    "requestData": {"protocol": "mcp", "request": {"n": n}},
                }
            }
        )

    async def answered(corr_id: str, cmd: str) -> str:
        _, _user, request_id, payload = cmd.split(" ", 3)
        answers[request_id] += 1
        if answers[request_id] == 1:
            first_answer[request_id] = time.perf_counter()
            n = int(request_id[1:])
            outcome.record(
                n, Response.parse(payload), first_answer[request_id] - sent_at[request_id]
            )
            if n % 2 == 0:  # reported again, before its answer is accepted
                await fake.send_raw(event(request_id, n))
            if len(first_answer) == n_requests:
                all_answered.set()
        return json.dumps({"corrId": corr_id, "resp": ACCEPTED})

    async with ScriptedCore() as fake, ChatCore.connect(fake.url) as bob:
        fake.raw["/_service_response"] = answered
        ready = asyncio.Event()
        serving = asyncio.create_task(bob.serve(1, _echo, protocols=["mcp"], ready=ready))
        await fake.connected.wait()
        await ready.wait()
        started = time.perf_counter()
        for n in range(n_requests):
            request_id = f"r{n}"
            sent_at[request_id] = time.perf_counter()
            await fake.send_raw(event(request_id, n))
            await fake.send_raw(event(request_id, n))  # reported twice, at once
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                await all_answered.wait()
        except TimeoutError:
            pass
        outcome.seconds = time.perf_counter() - started
        await asyncio.sleep(0.5)  # late second answers, if any, are counted too
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await serving
    outcome.lost = n_requests - len(first_answer)
    outcome.duplicated = sum(count - 1 for count in answers.values())


# -- the edge: serve against a null responder ---------------------------------------------------


def _edge_events(count: int) -> list[str]:
    """The core's ``serviceRequest`` frames: half unsigned, half with ``signerKey`` and the
    matching ``requestKey`` (the core verified the signature: simplex-chat EVENTS.md)."""
    public = SigningKey.generate().public_key.encode()
    user = {"userId": 1, "localDisplayName": "bob", "profile": {"displayName": "bob"}}
    frames = []
    for n in range(count):
        event: dict[str, Any] = {"type": "serviceRequest", "user": user, "requestId": f"e{n}"}
        data: dict[str, Any] = {"protocol": "mcp", "request": {"n": n}}
        if n % 2:
            event["signerKey"] = public
            data["requestKey"] = public
        event["requestData"] = data
        frames.append(json.dumps({"resp": event}, separators=(",", ":")))
    return frames


def _edge_core_main(ports: Any, count: int) -> None:
    """The edge's loopback core, in a process of its own (``multiprocessing``)."""
    asyncio.run(_edge_core(ports, count))


async def _edge_core(ports: Any, count: int) -> None:
    """The chat core's connection model (``apps/simplex-chat/Server.hs``): any number of
    connections, each running one command at a time (its answer written before the next
    command is read), and one queue of events (the core's ``outputQ``) that every
    connection's writer takes from, so each event goes to one connection, whichever
    takes it first. A round starts with ``/_bench_go`` and ends with ``benchDone``."""
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    frames = _edge_events(count)
    accepted = {"type": "serviceReplyAccepted", "user": {"userId": 1}, "connectionId": "c"}
    output: asyncio.Queue[str] = asyncio.Queue()
    answered: Counter[str] = Counter()
    sent = 0
    started = 0.0

    async def events(ws: Any) -> None:
        while True:
            frame = await output.get()
            try:
                await ws.send(frame)
            except ConnectionClosed:
                output.put_nowait(frame)  # a connection closing loses nothing of the next round
                return

    async def core(ws: Any) -> None:
        nonlocal sent, started
        writer = asyncio.create_task(events(ws))
        try:
            async for message in ws:
                msg = json.loads(message)
                cmd: str = msg["cmd"]
                if cmd == "/_bench_go":
                    answered.clear()
                    sent = min(EDGE_OUTSTANDING, count)
                    await ws.send(json.dumps({"corrId": msg["corrId"], "resp": {"type": "cmdOk"}}))
                    started = time.perf_counter()
                    for frame in frames[:sent]:
                        output.put_nowait(frame)
                    continue
                if not cmd.startswith("/_service_response "):
                    await ws.send(json.dumps({"corrId": msg["corrId"], "resp": {"type": "cmdOk"}}))
                    continue
                request_id = cmd.split(" ", 3)[2]
                answered[request_id] += 1
                await ws.send(json.dumps({"corrId": msg["corrId"], "resp": accepted}))
                if len(answered) == count and answered[request_id] == 1:
                    done = {
                        "type": "benchDone",
                        "seconds": time.perf_counter() - started,
                        "answered": len(answered),
                        "duplicated": sum(c - 1 for c in answered.values()),
                    }
                    output.put_nowait(json.dumps({"resp": done}))
                elif sent < count and answered[request_id] == 1:
                    output.put_nowait(frames[sent])
                    sent += 1
        finally:
            writer.cancel()

    async with serve(core, "127.0.0.1", 0, max_size=None) as server:
        ports.put(server.sockets[0].getsockname()[1])
        await asyncio.Future()


async def _null_responder(url: str) -> dict[str, Any]:
    """The floor: one websockets client, ``json.loads`` of each frame, ``json.dumps`` of an
    envelope and of one ``/_service_response`` command per request."""
    from websockets.asyncio.client import connect

    async with connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"corrId": "0", "cmd": "/_bench_go"}))
        n = 0
        async for message in ws:
            resp = json.loads(message)["resp"]
            kind = resp.get("type")
            if kind == "serviceRequest":
                n += 1
                payload = json.dumps(
                    {"response": resp["requestData"]["request"]}, separators=(",", ":")
                )
                cmd = f"/_service_response 1 {resp['requestId']} {payload}"
                await ws.send(json.dumps({"corrId": str(n), "cmd": cmd}))
            elif kind == "benchDone":
                result: dict[str, Any] = resp
                return result
    raise ChatCoreError("the edge's core closed before the round ended")  # pragma: no cover


async def _edge_handler(request: ServiceRequest) -> Any:
    return request.request.request


async def _serve_responder(url: str) -> dict[str, Any]:
    """``ChatCore.serve`` with a trivial handler, against the same core."""
    async with ChatCore.connect(url) as core:
        stream = core.events()
        ready = asyncio.Event()
        serving = asyncio.create_task(core.serve(1, _edge_handler, protocols=["mcp"], ready=ready))
        await ready.wait()
        try:
            await core.command("/_bench_go")
            async for event in stream:
                if event.get("type") == "benchDone":
                    return event
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving
    raise ChatCoreError("the edge's core closed before the round ended")  # pragma: no cover


def _run_edge(n: int) -> tuple[Outcome, Outcome]:
    """The null and the serve rows, from ``EDGE_ROUNDS`` interleaved rounds of ``n``."""
    import multiprocessing

    null = Outcome("null", f"null responder (baseline): {n} requests, 64 outstanding", n, True)
    edge = Outcome("edge", f"ChatCore.serve: {n} requests, 64 outstanding", n, True)
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    process = context.Process(target=_edge_core_main, args=(ports, n), daemon=True)
    process.start()
    try:
        url = f"ws://127.0.0.1:{ports.get(timeout=60)}"
        rates: dict[str, list[float]] = {"null": [], "edge": []}
        for _ in range(EDGE_ROUNDS):
            for outcome, responder in ((edge, _serve_responder), (null, _null_responder)):
                result = asyncio.run(asyncio.wait_for(responder(url), REQUEST_TIMEOUT * 4))
                seconds = float(result["seconds"])
                rates[outcome.scenario].append(n / seconds if seconds > 0 else 0.0)
                outcome.duplicated += int(result["duplicated"])
                outcome.lost += n - int(result["answered"])
                outcome.seconds += seconds
    finally:
        process.terminate()
        process.join(10)
    null_rate = statistics.median(rates["null"])
    edge_rate = statistics.median(rates["edge"])
    null.ok = edge.ok = n
    null.rate, edge.rate = null_rate, edge_rate
    edge.ratio = null_rate / edge_rate if edge_rate > 0 else float("inf")
    verdict = "within" if edge.ratio <= EDGE_TARGET else "OVER"
    edge.note = (
        f"edge ratio {edge.ratio:.2f}x the null responder's time per request, {verdict} the"
        f" target of at most {EDGE_TARGET:g}x (medians of {EDGE_ROUNDS} interleaved rounds:"
        f" serve {edge_rate:.0f}/s, null {null_rate:.0f}/s)"
    )
    return null, edge


# -- the calls scenario: a bot that calls and serves ------------------------------------------


async def _calls_round(outcome: Outcome, with_calls: bool) -> float:
    """One round: alice's burst of ``outcome.requests`` to bob, with ``CALLS_IN_FLIGHT`` of
    bob's own requests to carol in flight throughout (or none); bob's answer rate."""
    release = asyncio.Event()

    async def held(request: ServiceRequest) -> Any:
        await release.wait()
        return "late"

    n = outcome.requests
    async with (
        CoreSimulator(command_delay=CALLS_COMMAND_COST) as sim,
        ChatCore.connect(sim.url_for("carol")) as carol,
        ChatCore.connect(sim.url_for("bob"), connections=CALLS_IN_FLIGHT + 2) as bob,
        ChatCore.connect(sim.url_for("alice"), connections=66) as alice,
    ):
        for core, on in ((carol, True), (bob, True), (alice, False)):
            await core.start(service_requests=on)
        carol_link = (await carol.service_address(1)).link
        bob_link = (await bob.service_address(1)).link
        ready = [asyncio.Event(), asyncio.Event()]
        servers = [
            asyncio.create_task(carol.serve(1, held, protocols=["mcp"], ready=ready[0])),
            asyncio.create_task(bob.serve(1, _echo, protocols=["mcp"], ready=ready[1])),
        ]
        for event in ready:
            await event.wait()
        calls: list[asyncio.Task[Response]] = []
        try:
            if with_calls:
                calls = [
                    asyncio.create_task(
                        bob.service_request(
                            1, carol_link, Request(protocol="mcp", request={"call": c})
                        )
                    )
                    for c in range(CALLS_IN_FLIGHT)
                ]
                while sim.stats.delivered < CALLS_IN_FLIGHT:
                    await asyncio.sleep(0.005)

            async def one(k: int) -> None:
                start = time.perf_counter()
                try:
                    response = await alice.service_request(
                        1, bob_link, Request(protocol="mcp", request={"n": k}), timeout=30
                    )
                except ChatCoreError:
                    outcome.lost += 1
                    return
                outcome.record(k, response, time.perf_counter() - start)

            started = time.perf_counter()
            await asyncio.gather(*(one(k) for k in range(n)))
            seconds = time.perf_counter() - started
            if any(call.done() for call in calls):
                outcome.note = "a call ended before the burst did: not all 32 were in flight"
            release.set()
            await asyncio.gather(*calls, return_exceptions=True)
            outcome.duplicated += sim.stats.duplicate_responses
            outcome.seconds += seconds
            return n / seconds if seconds > 0 else 0.0
        finally:
            release.set()
            for task in [*servers, *calls]:
                task.cancel()
            await asyncio.gather(*servers, *calls, return_exceptions=True)


def _run_calls(n: int) -> tuple[Outcome, Outcome]:
    """The quiet and the calls rows, from ``CALLS_ROUNDS`` interleaved rounds of ``n``."""
    quiet = Outcome("quiet", f"bob answering {n} requests, no calls of its own", n, True)
    busy = Outcome(
        "calls", f"bob answering {n} requests, {CALLS_IN_FLIGHT} of its calls in flight", n, True
    )
    rates: dict[str, list[float]] = {"quiet": [], "calls": []}
    for _ in range(CALLS_ROUNDS):
        for outcome, with_calls in ((busy, True), (quiet, False)):
            rate = asyncio.run(asyncio.wait_for(_calls_round(outcome, with_calls), 600))
            rates[outcome.scenario].append(rate)
    quiet.rate = statistics.median(rates["quiet"])
    busy.rate = statistics.median(rates["calls"])
    busy.calls_ratio = busy.rate / quiet.rate if quiet.rate > 0 else 0.0
    verdict = "within" if busy.calls_ratio >= CALLS_TARGET else "UNDER"
    note = (
        f"calls ratio {busy.calls_ratio:.2f}, the bot's answer rate with {CALLS_IN_FLIGHT} of"
        f" its own calls in flight over its rate without, {verdict} the target of at least"
        f" {CALLS_TARGET:g} (medians of {CALLS_ROUNDS} interleaved rounds: {busy.rate:.0f}/s"
        f" against {quiet.rate:.0f}/s)"
    )
    busy.note = f"{busy.note}; {note}" if busy.note else note
    return quiet, busy


# -- running ----------------------------------------------------------------------------------


Runner = Callable[[Outcome], Coroutine[Any, Any, None]]


def _scenario(key: str, n: int) -> tuple[Outcome, Runner]:
    """The outcome to fill and the coroutine that fills it, for scenario ``key``."""
    scenarios: dict[str, tuple[str, bool, Runner]] = {
        "unsigned": (
            f"{n} unsigned requests at once",
            True,
            lambda o: _through_simulator(o, _echo),
        ),
        "signed": (
            f"{n} signed requests at once",
            True,
            lambda o: _through_simulator(o, _echo, signed=True),
        ),
        "faults": (
            f"{n} requests, 1 in 5 raising, cancelled, hanging or oversized",
            True,
            lambda o: _through_simulator(
                o, _faulty, serve_options={"concurrency": 128, "handler_timeout": 2.0}
            ),
        ),
        "overflow": (
            f"{n} requests into {OVERFLOW_SLOTS} slots and a queue of {OVERFLOW_QUEUE}",
            True,
            _overflow,
        ),
        "repeats": (f"{n} requestIds, each reported 2 or 3 times", True, _repeated_ids),
        "drop": (
            f"{n} requests into 8 slots, the responder's connection dropped after {n // 4}",
            False,
            lambda o: _through_simulator(
                o, _slower_echo, serve_options={"concurrency": 8}, drop_after=n // 4
            ),
        ),
    }
    title, connected, run = scenarios[key]
    return Outcome(key, title, n, connected), run


def run_scenarios(
    only: list[str] | None = None,
    *,
    quick: bool = False,
    requests: int | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Run the scenarios (all, or ``only``) and return the report: machine and outcomes.

    Each scenario sends ``requests`` requests (default 1,000, or 200 when ``quick``).
    """
    keys = list(only) if only else list(SCENARIOS)
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        fail(f"--only: unknown scenario {unknown[0]!r} (one of {', '.join(SCENARIOS)})")
    n = requests if requests is not None else QUICK_REQUESTS if quick else FULL_REQUESTS
    if n < 4:
        fail("requests: at least 4 per scenario")
    outcomes: list[Outcome] = []
    for key in keys:
        if key == "edge":
            if progress is not None:
                print(
                    f"  edge: serve against the null responder, {4 * n} requests ...",
                    file=progress,
                    flush=True,
                )
            with _counting_logs() as logs:
                try:
                    null, edge = _run_edge(4 * n)
                except (OSError, SimplexRpcError, TimeoutError) as exc:
                    fail(f"scenario edge: {type(exc).__name__}: {exc}")
            edge.log_lines = logs.count
            outcomes += [null, edge]
            continue
        if key == "calls":
            if progress is not None:
                print(
                    f"  calls: a bot answering while its own {CALLS_IN_FLIGHT} calls wait ...",
                    file=progress,
                    flush=True,
                )
            with _counting_logs() as logs:
                try:
                    quiet, busy = _run_calls(n)
                except (OSError, SimplexRpcError, TimeoutError) as exc:
                    fail(f"scenario calls: {type(exc).__name__}: {exc}")
            busy.log_lines = logs.count
            outcomes += [quiet, busy]
            continue
        outcome, run = _scenario(key, n)
        if progress is not None:
            print(f"  {key}: {outcome.title} ...", file=progress, flush=True)
        with _counting_logs() as logs:
            try:
                asyncio.run(run(outcome))
            except (OSError, SimplexRpcError) as exc:  # the loopback, or a core that failed
                fail(f"scenario {key}: {type(exc).__name__}: {exc}")
        outcome.log_lines = logs.count
        outcomes.append(outcome)
    return {"machine": machine(), "requests": n, "outcomes": outcomes}


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.0f} ms"


def report_text(report: dict[str, Any]) -> str:
    """The report for people: the machine and one Markdown table."""
    info = report["machine"]
    lines = [
        f"machine: {info['cpu']}, {info['cpus']} CPU(s), Python {info['python']}"
        f" ({info['system']}), load average {info['load_average']},"
        f" backend {info['active_backend']}",
        "",
    ]
    header = (
        "scenario",
        "req/s",
        "p50",
        "p99",
        "ok",
        "errors",
        "shed",
        "lost",
        "dup",
        "wrong",
        "log",
    )
    rows = []
    outcomes: list[Outcome] = report["outcomes"]
    for o in outcomes:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(o.errors.items()) if k != "rate_limited")
        rows.append(
            (
                f"{o.scenario}: {o.title}",
                f"{o.per_second:.0f}",
                _ms(o.quantile(0.5)),
                _ms(o.quantile(0.99)),
                str(o.ok),
                errors,
                str(o.shed),
                str(o.lost),
                str(o.duplicated),
                str(o.wrong),
                str(o.log_lines),
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def fmt(row: tuple[str, ...]) -> str:
        rest = (cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True))
        cells = [row[0].ljust(widths[0]), *rest]
        return "| " + " | ".join(cells) + " |"

    lines += [fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt(r) for r in rows]
    lines += [
        "",
        "A fault row counts what its fault is meant to cause: errors (raising, cancelled,"
        " hanging, oversized handlers), shed (over the queue) and, in drop, lost after the"
        " connection was dropped. Only lost, duplicated or wrong answers while the responder"
        " held its connection fail the run.",
    ]
    notes = [f"{o.scenario}: {o.note}" for o in outcomes if o.note]
    if notes:
        lines += ["", *notes]
    broken = [o.scenario for o in outcomes if o.broken]
    if broken:
        lines += ["", f"FAILED: lost, duplicated or wrong answers in {', '.join(broken)}"]
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    """``simplex-rpc bench adapter``: run, print the table (or JSON); 1 if an answer was
    lost, duplicated or wrong while the responder had its connection."""
    if args.rounds is not None:
        fail("--rounds applies to the backend benchmark, not to bench adapter")
    only = [k for k in (args.only or "").split(",") if k]
    report = run_scenarios(only, quick=args.quick, progress=None if args.json else sys.stderr)
    outcomes: list[Outcome] = report["outcomes"]
    if args.json:
        emit_json({**report, "outcomes": [o.to_json() for o in outcomes]})
    else:
        sys.stdout.write(report_text(report) + "\n")
    return EXIT_INVALID if any(o.broken for o in outcomes) else EXIT_OK

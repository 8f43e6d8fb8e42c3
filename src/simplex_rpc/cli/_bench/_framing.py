"""``simplex-rpc bench [--quick] [--json]``: the C backend against its baselines.

Method (stable on a noisy shared machine, where best-of-N across processes is
not): every contender of a measure runs in this one process on the same
bytes; each round times every contender once, in an order that alternates
from round to round; a ratio is the median over rounds of the per-round time
ratio, and a time per operation the median over rounds. The garbage
collector is off while a measure runs.

Baselines: the pure-Python backend; raw libsodium (``nacl.bindings.crypto_sign``
and ``crypto_sign_open``) on the same tagged bytes; and a C ``memcpy`` of the
same number of bytes, called through the same cffi module (the floor for
moving those bytes from Python). Ratios are time ratios, contender over
baseline: below 1 is faster.

The engine lives here so that the installed command can run it;
``benchmarks/run.py`` runs it from a checkout and saves the results.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import operator
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from ..._wire import backend as _backend
from ..._wire.agent_block import SMPQueueInfo, SMPServer
from ..._wire.envelope import Request
from ..._wire.keys import SigningKey, session_tag
from ..._wire.padding import PADDED_LENGTH
from .._common import EXIT_OK, emit_json, fail, install_hint, run_interruptible, whole_number
from .._options import add_json_option
from . import _agent as _bench_agent
from ._machine import machine

__all__ = [
    "MEASURES",
    "Measure",
    "Result",
    "Target",
    "machine",
    "register",
    "run_bench",
    "schema_request",
    "structured_request",
    "text_request",
]

BATCH: Final = 1000
PAYLOAD_SIZE: Final = 1000
AD: Final = bytes(range(56)) + bytes(range(100, 156))
SEED: Final = bytes(range(32))
#: The reply queue of every sealed request: one host, client version 4 (as the agent's).
QUEUE: Final = SMPQueueInfo(
    4,
    SMPServer(("smp.example.com",), "", bytes(range(32))),
    bytes(range(24)),
    bytes.fromhex("302a300506032b656e032100") + bytes(range(64, 96)),
    "M",
)

#: The "pure" baseline of a C contender "c NAME" is its twin, "python NAME".
TWIN: Final = "<twin>"

#: The keys of the measures, in the order of the report (``--only`` picks among them).
MEASURES: Final = (
    "pad",
    "unpad",
    "pad_many",
    "unpad_many",
    "seal_unsigned",
    "open_unsigned",
    "seal_signed",
    "open_signed",
    "seal_response",
    "seal_requests",
    "parse_structured",
    "parse_schemas",
    "parse_text",
    "open_parse",
    "open_requests",
    *_bench_agent.KEYS,
)

#: (rounds, seconds per timed sample) of a full and of a quick run.
FULL: Final = (101, 0.004)
QUICK: Final = (9, 0.001)


@dataclass(frozen=True, slots=True)
class Contender:
    """One function under test: ``run()`` does ``ops`` operations."""

    name: str
    run: Callable[[], object]
    ops: int = 1


@dataclass(frozen=True, slots=True)
class Measure:
    """Contenders timed against each other on the same bytes.

    ``bytes_per_op`` gives the throughput; ``baselines`` maps a baseline kind
    (``pure``, ``libsodium``, ``memcpy``) to the contender it names.
    """

    key: str
    title: str
    contenders: tuple[Contender, ...]
    bytes_per_op: int
    baselines: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Result:
    """The timings of one contender in one measure."""

    measure: str
    title: str
    contender: str
    ns_per_op: float
    bytes_per_op: int
    ratios: dict[str, float]  # baseline kind -> median time ratio
    samples: tuple[float, ...] = ()  # ns per operation, one per round

    @property
    def ops_per_second(self) -> float:
        return 1e9 / self.ns_per_op

    @property
    def mb_per_second(self) -> float:
        return self.bytes_per_op / self.ns_per_op * 1e3


@dataclass(frozen=True, slots=True)
class Target:
    """A target of the C backend, evaluated on one run."""

    name: str
    goal: str
    value: float
    shown: str
    met: bool
    reason: str


# -- the measures ---------------------------------------------------------------------


def _payload(index: int, size: int) -> bytes:
    """A JSON request envelope of exactly ``size`` bytes."""
    head = (
        f'{{"protocol":"mcp","request":{{"jsonrpc":"2.0","id":{index},"method":"tools/call",'
        '"params":{"name":"search","arguments":{"q":"'
    )
    tail = '"}}}}'
    return (head + "x" * (size - len(head) - len(tail)) + tail).encode()


def _envelope(request: dict[str, Any]) -> bytes:
    """A compact request envelope around an MCP request."""
    return json.dumps({"protocol": "mcp", "request": request}, separators=(",", ":")).encode()


def structured_request() -> bytes:
    """A structured ``tools/call`` of about 9.5 KB: a hundred small objects."""
    items = [
        {
            "sku": f"A-{i:04d}",
            "name": f"anvil {i}",
            "qty": i % 7 + 1,
            "price": round(12.5 + i * 0.25, 2),
            "tags": ["steel", "heavy"],
            "inStock": i % 3 != 0,
        }
        for i in range(100)
    ]
    return _envelope(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "quote", "arguments": {"items": items, "currency": "EUR"}},
        }
    )


def schema_request() -> bytes:
    """A tool listing with nested JSON schemas, about 9 KB."""
    point = {
        "type": "object",
        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
        "required": ["lat", "lon"],
    }
    tools = [
        {
            "name": f"tool_{i}",
            "description": f"Tool number {i}: looks things up and returns a summary.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "maxLength": 200},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "where": {"type": "object", "properties": {"from": point, "to": point}},
                    "flags": {"type": "array", "items": {"enum": ["fast", "exact", "cached"]}},
                },
                "required": ["query"],
            },
        }
        for i in range(16)
    ]
    return _envelope(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"tools": tools}}
    )


def text_request() -> bytes:
    """A text-heavy request of about 9 KB: one long string argument."""
    words = "Price of two anvils delivered to Lisbon, with the usual terms. " * 142
    return _envelope(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "summarize", "arguments": {"text": words}},
        }
    )


def build_measures(backends: dict[str, _backend.Backend]) -> list[Measure]:
    """Every measure (keys in :data:`MEASURES` order), over every backend present."""
    from nacl.bindings import crypto_sign, crypto_sign_open

    pure = backends["python"]
    c = backends.get("c")
    key = SigningKey.from_seed(SEED)
    payload = _payload(0, PAYLOAD_SIZE)
    sizes = random.Random(7).choices(range(200, 4000), k=BATCH)
    messages = [_payload(i, sizes[i]) for i in range(BATCH)]
    block = pure.pad(payload)
    batch = pure.pad_many(messages)
    out = bytearray(len(batch))
    unsigned = pure.seal_request(payload, AD, reply_queue=QUEUE)
    signed = pure.seal_request(payload, AD, key, reply_queue=QUEUE)
    tagged = session_tag(AD) + payload
    signed_message = crypto_sign(tagged, key._sk)
    raw_pk = key.public_key.raw
    sealed = pure.seal_requests(messages, AD, key, reply_queue=QUEUE)
    payload_bytes = sum(len(m) for m in messages)

    floor = _memcpy_floor()

    def with_baselines(
        key_: str,
        title: str,
        size: int,
        contenders: list[Contender],
        extra: dict[str, str] | None = None,
    ) -> Measure:
        baselines = {"pure": TWIN} if c is not None else {}
        baselines.update(extra or {})
        return Measure(key_, title, tuple(contenders), size, baselines)

    def both(
        name: str, make: Callable[[_backend.Backend], Callable[[], object]], ops: int = 1
    ) -> list[Contender]:
        out_: list[Contender] = []
        if c is not None:
            out_.append(Contender(f"c {name}", make(c), ops))
        out_.append(Contender(f"python {name}", make(pure), ops))
        return out_

    sealed_out = both(  # [c, python], or [python] without C
        "seal_requests(out=)",
        lambda b: lambda: b.seal_requests(messages, AD, reply_queue=QUEUE, out=out),
        BATCH,
    )
    measures = [
        with_baselines(
            "pad",
            f"pad, 1 block ({PAYLOAD_SIZE}-byte message)",
            PADDED_LENGTH,
            [*_floor(floor, PADDED_LENGTH), *both("pad", lambda b: lambda: b.pad(payload))],
            {"memcpy": "memcpy"} if floor else None,
        ),
        with_baselines(
            "unpad",
            "unpad, 1 block",
            PADDED_LENGTH,
            [*_floor(floor, PAYLOAD_SIZE), *both("unpad", lambda b: lambda: b.unpad(block))],
            {"memcpy": "memcpy"} if floor else None,
        ),
        with_baselines(
            "pad_many",
            f"pad_many, {BATCH} blocks (messages of 200 to 4000 bytes)",
            PADDED_LENGTH,
            [
                *_floor(floor, len(batch), BATCH),
                *both("pad_many(out=)", lambda b: lambda: b.pad_many(messages, out=out), BATCH),
                *both("pad_many", lambda b: lambda: b.pad_many(messages), BATCH),
            ],
            {"memcpy": "memcpy"} if floor else None,
        ),
        with_baselines(
            "unpad_many",
            f"unpad_many, {BATCH} blocks",
            PADDED_LENGTH,
            [
                *_floor(floor, payload_bytes, BATCH),
                *(
                    [
                        Contender(
                            "c unpad_many(views)", lambda: c.unpad_many(batch, views=True), BATCH
                        )
                    ]
                    if c is not None
                    else []
                ),
                *both("unpad_many", lambda b: lambda: b.unpad_many(batch), BATCH),
            ],
            {"memcpy": "memcpy"} if floor else None,
        ),
        with_baselines(
            "seal_unsigned",
            "seal_request, unsigned",
            PADDED_LENGTH,
            both("seal_request", lambda b: lambda: b.seal_request(payload, AD, reply_queue=QUEUE)),
        ),
        with_baselines(
            "open_unsigned",
            "open_request, unsigned",
            PADDED_LENGTH,
            both("open_request", lambda b: lambda: b.open_request(unsigned, AD)),
        ),
        with_baselines(
            "seal_signed",
            "seal_request, signed",
            PADDED_LENGTH,
            [
                Contender("libsodium crypto_sign", lambda: crypto_sign(tagged, key._sk)),
                *both(
                    "seal_request",
                    lambda b: lambda: b.seal_request(payload, AD, key, reply_queue=QUEUE),
                ),
            ],
            {"libsodium": "libsodium crypto_sign"},
        ),
        with_baselines(
            "open_signed",
            "open_request, signed",
            PADDED_LENGTH,
            [
                Contender(
                    "libsodium crypto_sign_open",
                    lambda: crypto_sign_open(signed_message, raw_pk),
                ),
                *both("open_request", lambda b: lambda: b.open_request(signed, AD)),
            ],
            {"libsodium": "libsodium crypto_sign_open"},
        ),
        with_baselines(
            "seal_response",
            f"seal_response, PQ off ({PAYLOAD_SIZE}-byte payload, 14,832-byte block)",
            14832,
            [
                *_floor(floor, 14832),
                *both(
                    "seal_response", lambda b: lambda: b.seal_response(payload, pq_support=False)
                ),
            ],
            {"memcpy": "memcpy"} if floor else None,
        ),
        with_baselines(
            "seal_requests",
            f"seal_requests, {BATCH} unsigned agent blocks (payloads of 200 to 4000 bytes)",
            PADDED_LENGTH,
            # The floor and the C contender it bounds sit inside the list: the first and
            # the last contender of a round run twice in a row where the order turns
            # (run_measure alternates it), their 22 MB still in the last-level cache, a
            # head start that would go to one side of the ratio only.
            [
                *sealed_out[-1:],  # python seal_requests(out=)
                *_floor(floor, len(batch), BATCH),
                *sealed_out[:-1],  # c seal_requests(out=)
                *both(
                    "seal_requests",
                    lambda b: lambda: b.seal_requests(messages, AD, reply_queue=QUEUE),
                    BATCH,
                ),
            ],
            {"memcpy": "memcpy"} if floor else None,
        ),
    ]
    # Strict parsing against the standard library on the same bytes: Request.parse runs
    # on the active backend; each backend's validator-and-parse is timed on its own too.
    for key_, title, doc in (
        ("parse_structured", "Request.parse, structured tools/call", structured_request()),
        ("parse_schemas", "Request.parse, tool listing with nested schemas", schema_request()),
        ("parse_text", "Request.parse, text-heavy request (one long string)", text_request()),
    ):
        measures.append(
            with_baselines(
                key_,
                f"{title} ({len(doc)} bytes)",
                len(doc),
                [
                    Contender("json.loads", functools.partial(json.loads, doc)),
                    Contender("Request.parse", functools.partial(Request.parse, doc)),
                    *both("_json.loads", _strict_parse(doc)),
                ],
                {"json.loads": "json.loads"},
            )
        )
    structured = structured_request()
    sealed_structured = pure.seal_request(structured, AD, key, reply_queue=QUEUE)
    structured_message = crypto_sign(session_tag(AD) + structured, key._sk)
    active_ = c if c is not None else pure

    def verify_and_loads() -> object:
        crypto_sign_open(structured_message, raw_pk)
        return json.loads(structured)

    def open_and_parse() -> object:
        return Request.parse(active_.open_request(sealed_structured, AD).payload)

    measures.append(
        Measure(
            "open_parse",
            f"open_request + Request.parse, signed structured ({len(structured)} bytes),"
            f" {active_.name} backend",
            (
                Contender("libsodium verify + json.loads", verify_and_loads),
                Contender("open_request + Request.parse", open_and_parse),
            ),
            PADDED_LENGTH,
            {"verify+loads": "libsodium verify + json.loads"},
        )
    )
    active = c if c is not None else pure
    measures.append(
        Measure(
            "open_requests",
            f"open_requests, {BATCH} signed blocks, {active.name} backend",
            (
                Contender("2 workers", lambda: active.open_requests(sealed, AD, workers=2), BATCH),
                Contender("1 worker", lambda: active.open_requests(sealed, AD, workers=1), BATCH),
            ),
            PADDED_LENGTH,
            {"1 worker": "1 worker"},
        )
    )
    if _bench_agent.available():  # the agent's cryptography: its own module and extras
        measures.extend(_bench_agent.measures(Contender, Measure))
    return measures


def _strict_parse(doc: bytes) -> Callable[[_backend.Backend], Callable[[], object]]:
    """For ``both``: a backend's strict JSON parse of ``doc``."""
    return lambda b: functools.partial(b.json_loads, doc)


def _memcpy_floor() -> Callable[[int], Callable[[], object]] | None:
    """``floor(n)``: a function that copies n bytes in C through cffi, or None without C."""
    try:
        from ..._wire._simplex_rpc_c import ffi, lib
    except ImportError:
        return None

    def make(n: int) -> Callable[[], object]:
        src = ffi.new("unsigned char[]", n)
        dst = ffi.new("unsigned char[]", n)
        return lambda: lib.srpc_copy(dst, n, src, n)

    return make


def _floor(
    floor: Callable[[int], Callable[[], object]] | None, n: int, ops: int = 1
) -> list[Contender]:
    return [] if floor is None else [Contender("memcpy", floor(n), ops)]


# -- timing -----------------------------------------------------------------------------


def _time(run: Callable[[], object], inner: int) -> int:
    start = time.perf_counter_ns()
    for _ in range(inner):
        run()
    return time.perf_counter_ns() - start


def run_measure(
    measure: Measure,
    rounds: int,
    sample_seconds: float,
    progress: Callable[[float], None] | None = None,
) -> list[Result]:
    """Time every contender of ``measure`` over interleaved rounds."""
    inner: dict[str, int] = {}
    for contender in measure.contenders:
        contender.run()  # warm up (and fail early)
        once = max(1, _time(contender.run, 1))
        inner[contender.name] = max(1, min(100_000, round(sample_seconds * 1e9 / once)))
    samples: dict[str, list[float]] = {c.name: [] for c in measure.contenders}
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = measure.contenders if r % 2 == 0 else measure.contenders[::-1]
            for contender in order:
                n = inner[contender.name]
                samples[contender.name].append(_time(contender.run, n) / n / contender.ops)
            if progress is not None:
                progress((r + 1) / rounds)
    finally:
        if enabled:
            gc.enable()
    results = []
    for contender in measure.contenders:
        mine = samples[contender.name]
        ratios = {}
        for kind, base in measure.baselines.items():
            if base == TWIN:
                base = "python " + contender.name.removeprefix("c ")
            if base != contender.name and base in samples and contender.name != "memcpy":
                pairs = zip(mine, samples[base], strict=True)
                ratios[kind] = statistics.median(a / b for a, b in pairs)
        results.append(
            Result(
                measure.key,
                measure.title,
                contender.name,
                statistics.median(mine),
                measure.bytes_per_op,
                ratios,
                tuple(mine),
            )
        )
    return results


# -- targets ------------------------------------------------------------------------------


def _ratio(results: Sequence[Result], measure: str, contender: str, kind: str) -> float | None:
    for r in results:
        if r.measure == measure and r.contender == contender:
            return r.ratios.get(kind)
    return None


def _pair(results: Sequence[Result], measure: str, a: str, b: str) -> float | None:
    """The median over rounds of time(a) / time(b), two contenders of one measure."""
    found = {r.contender: r.samples for r in results if r.measure == measure}
    if a not in found or b not in found:
        return None
    return statistics.median(x / y for x, y in zip(found[a], found[b], strict=True))


def evaluate_targets(results: Sequence[Result], cpus: int) -> list[Target]:
    """The targets of the C backend on this run (empty without the C backend)."""
    out: list[Target] = []

    def add(
        name: str,
        goal: str,
        value: float | None,
        shown: Callable[[float], str],
        met: Callable[[float], bool],
        reason: str,
    ) -> None:
        if value is not None:
            ok = met(value)
            out.append(Target(name, goal, value, shown(value), ok, "" if ok else reason))

    best = _pair(results, "pad_many", "c pad_many(out=)", "python pad_many")
    allocating = _pair(results, "pad_many", "c pad_many", "python pad_many")
    note = "" if allocating is None else f"; {1 / allocating:.1f}x, both allocating"
    add(
        "batch pad, C against pure",
        "at least 3x faster",
        None if best is None else 1 / best,
        lambda v: f"{v:.1f}x faster (out=){note}",
        lambda v: v >= 3,
        "the pure pad_many is itself bytes operations in C: little is left to gain",
    )
    floor = _ratio(results, "pad_many", "c pad_many(out=)", "memcpy")
    add(
        "batch pad (out=), against the memcpy floor",
        "within 2x",
        floor,
        lambda v: f"{v:.2f}x the floor",
        lambda v: v <= 2,
        "gathering 1,000 Python objects (join, lengths) costs more than the C loop itself",
    )
    floor = _ratio(results, "seal_requests", "c seal_requests(out=)", "memcpy")
    add(
        "batch seal of the agent block (out=), against the memcpy floor",
        "within 1.5x",
        floor,
        lambda v: f"{v:.2f}x the floor",
        lambda v: v <= 1.5,
        "the checks of every payload and the gathering of 1,000 Python objects (join,"
        " lengths) cost more than the C loop itself",
    )
    for name, why in (
        (
            "pad",
            "both backends build one block with CPython's own bytes operations (no cffi"
            " call): what is left to gain is the Python around them",
        ),
        (
            "unpad",
            "a cffi call (argument conversion, GIL release) costs as much as the pure"
            " backend's few bytes operations on one block",
        ),
    ):
        value = _ratio(results, name, f"c {name}", "pure")
        add(
            f"single {name}, C against pure",
            "not slower",
            value,
            lambda v: f"{1 / v:.2f}x faster" if v <= 1 else f"{v:.2f}x slower",
            lambda v: v <= 1.0,
            why,
        )
    for name, libsodium, reason in (
        (
            "seal",
            "sign",
            "framing and padding add a fixed cost that shows against a short message's signature",
        ),
        (
            "open",
            "verify",
            "unpadding, decoding and the PublicKey object add a fixed cost per block",
        ),
    ):
        add(
            f"signed {name}, against raw libsodium {libsodium}",
            "at most 1.05x",
            _ratio(results, f"{name}_signed", f"c {name}_request", "libsodium"),
            lambda v: f"{v:.3f}x",
            lambda v: v <= 1.05,
            reason,
        )
    if _backend.active.name == "c":  # Request.parse runs on the active backend
        for key, what, limit in (
            ("parse_structured", "structured tools/call", 1.5),
            ("parse_schemas", "tool listing with nested schemas", 1.5),
            ("parse_text", "text-heavy request", 2.0),
        ):
            add(
                f"Request.parse against json.loads, {what}",
                f"at most {limit}x",
                _ratio(results, key, "Request.parse", "json.loads"),
                lambda v: f"{v:.2f}x",
                functools.partial(operator.ge, limit),
                "the envelope checks and the value the json module builds cost more than"
                " the validator",
            )
        add(
            "(open_request + Request.parse) against (libsodium verify + json.loads)",
            "at most 1.25x",
            _ratio(results, "open_parse", "open_request + Request.parse", "verify+loads"),
            lambda v: f"{v:.3f}x",
            lambda v: v <= 1.25,
            "unpadding, decoding and the PublicKey object add a fixed cost per block",
        )
    value = _ratio(results, "open_requests", "2 workers", "1 worker")
    add(
        "open_requests, 2 workers against 1",
        "at least 1.7x",
        None if value is None else 1 / value,
        lambda v: f"{v:.2f}x",
        lambda v: v >= 1.7,
        f"{cpus} CPU(s) available to this process; other load on the machine takes the second core",
    )
    _bench_agent.targets(results, add, _ratio)
    return out


# -- machine and output -------------------------------------------------------------------


def _time_text(ns: float) -> str:
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns / 1e6:.2f} ms"


def _rate_text(per_second: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if per_second >= scale:
            return f"{per_second / scale:.2f} {unit}"
    return f"{per_second:.0f} "


def format_table(
    results: Sequence[Result],
    targets: Sequence[Target],
    info: dict[str, Any],
    settings: dict[str, Any],
) -> str:
    """The report for people: the machine, the results table and the targets."""
    lines = [
        f"machine: {info['cpu']}, {info['cpus']} CPU(s), Python {info['python']}"
        f" ({info['system']}), load average {info['load_average']}",
        f"settings: {settings['rounds']} rounds, {settings['sample_ms']} ms samples,"
        f" medians of per-round ratios; ratio = time / baseline time (below 1 is faster)",
        "",
    ]
    header = (
        "contender",
        "time/op",
        "ops/s",
        "MB/s",
        "vs pure",
        "vs libsodium",
        "vs memcpy",
        "vs 1 worker",
        "vs json.loads",
        "vs verify+loads",
    )
    kinds = ("pure", "libsodium", "memcpy", "1 worker", "json.loads", "verify+loads")
    rows: list[tuple[str, ...]] = []
    titles: list[tuple[int, str]] = []
    for r in results:
        if not titles or titles[-1][1] != r.title:
            titles.append((len(rows), r.title))
        rows.append(
            (
                r.contender,
                _time_text(r.ns_per_op),
                _rate_text(r.ops_per_second),
                f"{r.mb_per_second:.0f}",
                *(f"{r.ratios[k]:.3f}" if k in r.ratios else "" for k in kinds),
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(row: Sequence[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "| " + " | ".join(cells) + " |"

    lines.append(fmt(header))
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    starts = dict(titles)
    for i, row in enumerate(rows):
        if i in starts:
            lines.append(fmt([f"**{starts[i]}**", *([""] * (len(header) - 1))]))
        lines.append(fmt(row))
    if targets:
        lines += [
            "",
            "| target | goal | measured | met | reason if missed |",
            "|---|---|---|---|---|",
        ]
        for t in targets:
            lines.append(
                f"| {t.name} | {t.goal} | {t.shown} | {'yes' if t.met else 'NO'} | {t.reason} |"
            )
    else:
        lines += [
            "",
            "targets: not evaluated (the C backend is not available:"
            f" {_backend.c_unavailable_reason})",
        ]
    return "\n".join(lines)


_FLOOR_KINDS: Final = ("memcpy", "libsodium", "json.loads", "verify+loads", "floor", "1 worker")
"""The baselines a measure's subject is held against, as ``Result.ratios`` names them."""


@dataclass(frozen=True, slots=True)
class Row:
    """One measure in the narrow table: its subject (the C side) against pure and floor."""

    measure: str
    subject: Result
    pure: Result | None
    floor: Result | None
    ratio: float
    against: str  # the ratio's baseline: "pure" or a floor kind
    target: Target | None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def narrow_rows(results: Sequence[Result], targets: Sequence[Target]) -> list[Row]:
    """One row per measure: the subject (the first contender with a ratio against pure,
    else the first with any ratio), the pure contender of the same name, the floor (the
    baseline with no ratios) and the subject's ratio against the floor (else against
    pure); the target whose value is that measure's ratio (or its inverse)."""
    by_measure: dict[str, list[Result]] = {}
    for r in results:
        by_measure.setdefault(r.measure, []).append(r)
    rows = []
    for measure, group in by_measure.items():
        subject = next((r for r in group if "pure" in r.ratios), None) or next(
            (r for r in group if r.ratios), None
        )
        if subject is None:
            continue
        name = subject.contender.removeprefix("c ")
        pure = next((r for r in group if r.contender == f"python {name}"), None)
        floor = next(
            (r for r in group if not r.ratios and not r.contender.startswith("python ")), None
        )
        against = next((k for k in _FLOOR_KINDS if k in subject.ratios), "pure")
        ratio = subject.ratios.get(against, subject.ratios.get("pure", 0.0))
        target = None
        # The measure's target, and the ratio it is about (against pure or the floor).
        for t in targets:
            for r in group:
                for kind, v in r.ratios.items():
                    if v > 0 and (_close(t.value, v) or _close(t.value, 1 / v)):
                        target, against, ratio = t, kind, v
                        subject = r
                        break
                if target is not None:
                    break
            if target is not None:
                break
        rows.append(Row(measure, subject, pure, floor, ratio, against, target))
    return rows


def format_narrow(
    results: Sequence[Result],
    targets: Sequence[Target],
    info: dict[str, Any],
    settings: dict[str, Any],
) -> str:
    """The report for people, within 100 columns: per measure the C time, the pure time,
    the floor's time, the ratio and the target met or not. ``--wide`` and ``--json``
    have every contender and figure."""
    lines = [
        f"machine: {info['cpus']} CPU(s), Python {info['python']}, load {info['load_average']}",
        f"{settings['rounds']} rounds; ratio = time / baseline (below 1 is faster);"
        " every figure: --wide or --json",
        "",
    ]
    header = ("measure", "C", "pure", "floor", "ratio", "target")
    table = [header]
    for row in narrow_rows(results, targets):
        target = ""
        if row.target is not None:
            target = f"{row.target.goal[:18]} {'ok' if row.target.met else 'NO'}"
        against = "pure" if row.against == "pure" else "floor"
        table.append(
            (
                row.measure[:26],
                _time_text(row.subject.ns_per_op),
                "" if row.pure is None else _time_text(row.pure.ns_per_op),
                "" if row.floor is None else _time_text(row.floor.ns_per_op),
                f"{row.ratio:.2f}x {against}",
                target,
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1], strict=True)
        ]
        lines.append(("  ".join(cells) + "  " + r[-1]).rstrip())
    missed = [t for t in targets if not t.met]
    if missed:
        lines += ["", "targets missed:"]
        for t in missed:
            lines.append(f"  {t.name}: {t.shown}")
            lines.append(f"    {t.reason}" if len(t.reason) <= 96 else f"    {t.reason[:93]}...")
    return "\n".join(lines)


def plot_svg(report: dict[str, Any], path: str) -> None:
    """Draw the run into the SVG file ``path``: each measure's ratio against its target and
    floor (left), and the batch measures' throughput against the batch size (right).
    Needs matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("svg")
        from matplotlib import pyplot as plt
    except ImportError as exc:
        fail(f"--plot needs matplotlib: {install_hint('plot')} ({exc})")
    results: list[Result] = report["results"]
    rows = narrow_rows(results, report["targets"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, max(4, 0.32 * len(rows) + 1.5)))
    names = [r.measure for r in rows]
    ratios = [r.ratio for r in rows]
    positions = list(range(len(rows)))
    bars = left.barh(positions, ratios, color="#4c72b0", label="measured ratio")
    for bar, name in zip(bars.patches, names, strict=True):
        bar.set_gid(f"ratio-{name}")  # each measured bar named in the SVG
    left.axvline(1.0, color="#555555", linestyle="--", linewidth=1, label="floor (1x)")
    goals = [(i, _goal_value(r.target)) for i, r in enumerate(rows) if r.target is not None]
    goals = [(i, g) for i, g in goals if g is not None]
    if goals:
        marks = left.scatter(
            [g for _, g in goals], [i for i, _ in goals], marker="|", s=250, color="#c44e52",
            label="target",
        )  # fmt: skip
        marks.set_gid("targets")
    left.set_yticks(positions, names, fontsize=7)
    left.invert_yaxis()
    left.set_xlabel("time / baseline (below 1 is faster)")
    left.set_title("ratios against their floors and targets")
    left.legend(fontsize=7, loc="lower right")
    # Throughput against batch size: one item per call (pad, unpad) and BATCH items per
    # call (pad_many, unpad_many), per backend.
    batch = int(report["settings"].get("batch", BATCH))
    for name in ("pad", "unpad"):
        for side in ("c", "python"):
            one = _find(results, name, f"{side} {name}")
            many = _find(results, f"{name}_many", f"{side} {name}_many")
            if one is None or many is None:
                continue
            (line,) = right.plot(
                [1, batch],
                [1e9 / one.ns_per_op, 1e9 / many.ns_per_op],
                marker="o",
                label=f"{side} {name}",
            )
            line.set_gid(f"throughput-{side}-{name}")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("batch size (items per call)")
    right.set_ylabel("items per second")
    right.set_title("throughput against batch size")
    right.legend(fontsize=7)
    figure.tight_layout()
    try:
        figure.savefig(path, format="svg")
    except OSError as exc:
        fail(f"--plot: cannot write {path!r}: {exc.strerror}")
    finally:
        plt.close(figure)


def _find(results: Sequence[Result], measure: str, contender: str) -> Result | None:
    return next((r for r in results if r.measure == measure and r.contender == contender), None)


def _goal_value(target: Target | None) -> float | None:
    """The number in a target's goal ("within 1.5x", "at most 1.05x"), as a ratio of
    time; a goal of speed ("at least 3x faster") is its inverse; "not slower" is 1."""
    if target is None:
        return None
    if target.goal == "not slower":
        return 1.0
    import re

    found = re.search(r"([0-9.]+)x", target.goal)
    if found is None:
        return None
    value = float(found.group(1))
    return 1 / value if "at least" in target.goal else value


class _Progress:
    """One line per measure on stderr; a live percentage when stderr is a terminal."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.live = stream.isatty()
        self.index = 0
        self.title = ""
        self.started = time.monotonic()

    def start(self, title: str) -> None:
        self.index += 1
        self.title = title
        if not self.live:
            self.stream.write(f"bench [{self.index}/{self.total}] {title} ...\n")
            self.stream.flush()

    def update(self, fraction: float) -> None:
        if self.live:
            elapsed = time.monotonic() - self.started
            self.stream.write(
                f"\rbench [{self.index}/{self.total}] {self.title}:"
                f" {fraction:4.0%} ({elapsed:.0f}s)\033[K"
            )
            self.stream.flush()

    def done(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


def run_bench(
    quick: bool = False,
    rounds: int | None = None,
    stream: TextIO | None = None,
    only: Sequence[str] = (),
) -> dict[str, Any]:
    """Run every measure (or those named in ``only``); return the report."""
    default_rounds, sample = QUICK if quick else FULL
    rounds = rounds or default_rounds
    measures = build_measures(_backend.backends)
    if only:
        unknown = set(only) - {m.key for m in measures}
        if unknown:
            fail(
                f"--only: no measure {', '.join(sorted(unknown))}; the measures are"
                f" {', '.join(m.key for m in measures)}"
            )
        measures = [m for m in measures if m.key in only]
    progress = _Progress(len(measures), stream or sys.stderr)
    results: list[Result] = []
    for measure in measures:
        progress.start(measure.title)
        results += run_measure(measure, rounds, sample, progress.update)
    progress.done()
    info = machine()
    return {
        "machine": info,
        "settings": {
            "rounds": rounds,
            "sample_ms": sample * 1e3,
            "quick": quick,
            "batch": BATCH,
            "payload_bytes": PAYLOAD_SIZE,
        },
        "results": results,
        "targets": evaluate_targets(results, info["cpus"]),
    }


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    """The report as plain JSON values."""
    return {
        "machine": report["machine"],
        "settings": report["settings"],
        "results": [
            {
                "measure": r.measure,
                "title": r.title,
                "contender": r.contender,
                "ns_per_op": round(r.ns_per_op, 1),
                "ops_per_second": round(r.ops_per_second, 1),
                "mb_per_second": round(r.mb_per_second, 1),
                "ratios": {k: round(v, 4) for k, v in r.ratios.items()},
            }
            for r in report["results"]
        ],
        "targets": [
            {
                "name": t.name,
                "goal": t.goal,
                "value": round(t.value, 4),
                "shown": t.shown,
                "met": t.met,
                "reason": t.reason,
            }
            for t in report["targets"]
        ],
    }


def report_text(report: dict[str, Any], *, wide: bool = False) -> str:
    """The narrow table (within 100 columns), or with ``wide`` every contender and figure."""
    form = format_table if wide else format_narrow
    return form(report["results"], report["targets"], report["machine"], report["settings"])


def _handle(args: argparse.Namespace) -> int:
    # Ctrl-C or SIGTERM: one line, exit 0, no traceback (docs/cli.md, stopping).
    name = f"bench {args.suite}" if args.suite else "bench"
    return run_interruptible(
        lambda: _run(args), stopped=f"simplex-rpc {name}: stopped; the run was cut short"
    )


def _run(args: argparse.Namespace) -> int:
    if args.suite == "adapter":  # the responder under load and faults: _bench_adapter
        from . import _adapter as _bench_adapter

        return _bench_adapter.handle(args)
    if args.suite == "gateway":  # tools/call through serve --mcp-stdio: _bench_gateway
        from . import _gateway as _bench_gateway

        return _bench_gateway.handle(args)
    only = [k for k in (args.only or "").split(",") if k]
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401 - checked before the run, not after it
        except ImportError as exc:
            fail(f"--plot needs matplotlib: {install_hint('plot')} ({exc})")
    report = run_bench(quick=args.quick, rounds=args.rounds, only=only)
    if args.json:
        emit_json(report_json(report))
    else:
        sys.stdout.write(report_text(report, wide=args.wide) + "\n")
    if args.plot is not None:
        plot_svg(report, args.plot)
    return EXIT_OK


_positive = whole_number(1, "{value} is not at least 1")


class _HelpFormatter(argparse.HelpFormatter):
    """Lists ``bench adapter``'s scenarios from their table only when help is shown.

    Importing :mod:`._bench_adapter` pulls in the adapter and the simulator, which
    every other command line would then pay for at start.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is not None and "%(scenarios)s" in text:
            from ._adapter import SCENARIOS

            text = text.replace("%(scenarios)s", ", ".join(SCENARIOS))
        return text


def register(subparsers: Any) -> None:
    """Add ``bench`` to the command line."""
    parser = subparsers.add_parser(
        "bench",
        help="time the C backend against the pure one, libsodium and memcpy",
        description="Time padding, the agent's block, sealing and opening on every backend, in one"
        " process on the same bytes, against the pure backend, raw libsodium and a memcpy"
        " floor; print a table (or JSON) and the targets of the C backend. A full run takes"
        " under a minute; --quick a few seconds. 'bench adapter' runs the Service RPC"
        " responder under load and faults instead.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    add_json_option(parser, "machine-readable output")
    parser.add_argument(
        "--rounds",
        type=_positive,
        default=None,
        help="rounds per measure (default 101, or 9 with --quick)",
    )
    parser.add_argument(
        "--only",
        metavar="KEYS",
        help=f"comma-separated measures to run ({', '.join(MEASURES)})",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="every contender and figure (time, ops/s, MB/s, each ratio) instead of the"
        " narrow table",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.svg",
        help="also draw the run into an SVG file: the ratios against their targets and"
        " floors, and throughput against batch size (needs the plot extra: matplotlib)",
    )
    parser.set_defaults(handler=_handle, suite=None)
    # The suites are subcommands, each with its own --help. Their options leave the
    # values given before the suite's name alone (SUPPRESS), as `bench --quick adapter`.
    suites = parser.add_subparsers(dest="suite", metavar="SUITE")
    adapter = suites.add_parser(
        "adapter",
        help="the Service RPC responder under load and faults",
        description="Run the Service RPC responder (ChatCore.serve) through the simulator"
        " under load and faults: unsigned and signed bursts, handlers that raise, hang or"
        " answer too much, overflow, repeated requestIds and a dropped connection; print one"
        " row per scenario. A fault row counts what the fault is meant to cause (errors,"
        " shed, lost after the drop): only lost, duplicated or wrong answers while the"
        " responder had its connection fail the run (exit status 1).",
        formatter_class=_HelpFormatter,
    )
    _suite_options(adapter)
    adapter.add_argument(
        "--only",
        metavar="SCENARIOS",
        default=argparse.SUPPRESS,
        help="comma-separated scenarios to run (%(scenarios)s)",
    )
    gateway = suites.add_parser(
        "gateway",
        help="an MCP tools/call through serve --mcp-stdio against the SDK's direct call",
        description="Time an MCP tools/call through serve --mcp-stdio and the simulator"
        " against the MCP SDK client's direct call to the same server, interleaved; print"
        " the ratio against its target. Needs the mcp extra. Exit status 1 if a call failed.",
    )
    _suite_options(gateway)


def _suite_options(p: argparse.ArgumentParser) -> None:
    """``--quick`` and ``--json`` of a suite (``bench adapter --quick`` as ``bench --quick
    adapter``)."""
    p.add_argument(
        "--quick", action="store_true", default=argparse.SUPPRESS, help="a smoke run"
    )
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )

"""Idempotent answers (``AnswerStore``, ``SQLiteAnswerStore``, ``adapter._answers.AnswerGate``).

Rules pinned (issue 29, from the badge service: "a timeout hides the outcome,
so the client repeats the identical signed request at its next trigger";
"every command answers a repeat with the stored result and writes nothing"):
an answer is kept by (signer, SHA-256 of the request bytes) for a window of at
least the core's 180 s; a repeat inside it gets the stored answer and the
handler does not run again; a repeat while the first is still running waits
for its answer and starts no second run; a different signer is a different
request; unsigned requests are kept only with ``unsigned=True``; the store is
bounded by a count and by bytes; the SQLite store survives a restart. The
clock is injected: nothing sleeps, nothing is timed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import simplex_rpc as sx
from simplex_rpc.adapter import (
    DEFAULT_ANSWER_WINDOW,
    AnswerKey,
    AnswerStore,
    AnswerStoreProtocol,
    Begun,
    SQLiteAnswerStore,
)
from simplex_rpc.adapter._answers import AnswerGate
from simplex_rpc.errors import SimplexRpcError


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


SIGNER = sx.SigningKey.generate()
A = SIGNER.public_key
B = sx.SigningKey.generate().public_key
REQUEST = b'{"request":{"purchaseKey":"secret-purchase-key","type":"redeem"},"version":1}'
ANSWER = b'{"badge":"gold-credential","type":"ok"}'

Store = AnswerStore | SQLiteAnswerStore
MakeStore = Callable[..., Store]


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Each rule holds for both stores: ``make(clock, **options)``."""
    made: list[Store] = []

    def factory(clock: Clock, **options: Any) -> Store:
        store: Store
        if request.param == "memory":
            store = AnswerStore(clock=clock, **options)
        else:
            store = SQLiteAnswerStore(tmp_path / "answers.db", clock=clock, **options)
        made.append(store)
        return store

    yield factory
    for store in made:
        if isinstance(store, SQLiteAnswerStore):
            store.close()


def answer_once(store: Store, signer: sx.PublicKey | None, request: bytes, answer: bytes) -> None:
    begun = store.begin(signer, request)
    assert begun.state == "new" and begun.key is not None
    assert store.finish(begun.key, answer)


# -- the states ---------------------------------------------------------------------------------


def test_a_repeat_gets_the_stored_answer(make: MakeStore) -> None:
    clock = Clock()
    store = make(clock)
    first = store.begin(A, REQUEST)
    assert first.state == "new" and first.key == AnswerKey.of(A, REQUEST)
    assert store.begin(A, REQUEST).state == "running"  # the first is still running
    assert first.key is not None and store.finish(first.key, ANSWER)
    repeat = store.begin(A, REQUEST)
    assert (repeat.state, repeat.answer) == ("done", ANSWER)
    assert len(store) == 1


def test_a_different_signer_or_request_is_a_different_request(make: MakeStore) -> None:
    store = make(Clock())
    answer_once(store, A, REQUEST, ANSWER)
    assert store.begin(B, REQUEST).state == "new"
    assert store.begin(A, REQUEST + b" ").state == "new"  # the bytes, not their meaning


def test_unsigned_requests_are_kept_only_when_the_service_opts_in(make: MakeStore) -> None:
    """The service cannot tell two unsigned requesters apart."""
    store = make(Clock())
    for _ in range(2):
        begun = store.begin(None, REQUEST)
        assert (begun.state, begun.key) == ("new", None)  # nothing to finish, nothing kept
    opted = make(Clock(), unsigned=True, max_entries=5)
    answer_once(opted, None, REQUEST, ANSWER)
    assert opted.begin(None, REQUEST).answer == ANSWER
    assert opted.begin(A, REQUEST).state == "new"  # a signer is not "unsigned"


def test_an_abandoned_run_leaves_nothing_and_a_repeat_runs_again(make: MakeStore) -> None:
    store = make(Clock())
    begun = store.begin(A, REQUEST)
    assert begun.key is not None
    store.abandon(begun.key)
    assert store.begin(A, REQUEST).state == "new"
    assert len(store) == 0


def test_finish_and_abandon_belong_to_a_running_request(make: MakeStore) -> None:
    store = make(Clock())
    key = AnswerKey.of(A, REQUEST)
    with pytest.raises(SimplexRpcError, match="finish of a request that is not running"):
        store.finish(key, ANSWER)
    with pytest.raises(SimplexRpcError, match="abandon of a request that is not running"):
        store.abandon(key)
    with pytest.raises(TypeError, match="answer: expected bytes"):
        begun = store.begin(A, REQUEST)
        assert begun.key is not None
        store.finish(begun.key, "text")  # type: ignore[arg-type]


# -- the window and the bounds ------------------------------------------------------------------


def test_an_answer_is_kept_for_its_window_from_when_it_was_stored(make: MakeStore) -> None:
    clock = Clock()
    store = make(clock, window=600)
    answer_once(store, A, REQUEST, ANSWER)
    clock.now += 599.5
    assert store.begin(A, REQUEST).state == "done"
    clock.now += 0.5
    assert store.begin(A, REQUEST).state == "new"


def test_the_window_is_at_least_the_cores(make: MakeStore) -> None:
    assert DEFAULT_ANSWER_WINDOW == 180.0
    for window in (179.9, 0, -1, float("inf"), float("nan"), True, "180"):
        with pytest.raises(SimplexRpcError, match=r"^window: expected"):
            make(Clock(), window=window)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_entries": 0}, "^max_entries: expected a positive integer"),
        ({"max_bytes": 1.5}, "^max_bytes: expected a positive integer"),
        ({"unsigned": 1}, "^unsigned: expected True or False"),
    ],
)
def test_the_bounds_are_checked(make: MakeStore, options: dict[str, Any], says: str) -> None:
    with pytest.raises(SimplexRpcError, match=says):
        make(Clock(), **options)


def test_the_count_bound_pushes_the_oldest_out(make: MakeStore) -> None:
    clock = Clock()
    store = make(clock, max_entries=3)
    for n in range(5):
        clock.now += 1
        answer_once(store, A, b"request %d" % n, b"answer %d" % n)
    assert len(store) == 3
    assert [store.begin(A, b"request %d" % n).state for n in (2, 3, 4)] == ["done"] * 3
    assert store.begin(A, b"request 0").state == "new"


def test_the_byte_bound_counts_answers_and_keys(make: MakeStore) -> None:
    """Each answer counts its bytes plus 64 for its key (the signer's 32, the digest's 32)."""
    clock = Clock()
    store = make(clock, max_bytes=3 * (100 + 64))
    for n in range(4):
        clock.now += 1
        answer_once(store, A, b"request %d" % n, bytes(100))
    assert (len(store), store.stored_bytes) == (3, 3 * 164)
    assert store.begin(A, b"request 0").state == "new"
    begun = store.begin(A, b"too long")
    assert begun.key is not None
    assert not store.finish(begun.key, bytes(3 * 164))  # larger than the bound alone: not kept
    assert store.begin(A, b"too long").state == "new"
    assert len(store) == 3


# -- redaction ----------------------------------------------------------------------------------


def test_no_repr_shows_a_request_an_answer_or_a_key(make: MakeStore) -> None:
    store = make(Clock())
    begun = store.begin(A, REQUEST)
    shown = [repr(store), repr(begun), repr(begun.key)]
    assert begun.key is not None
    store.finish(begun.key, ANSWER)
    done = store.begin(A, REQUEST)
    shown += [repr(store), repr(done)]
    assert repr(done) == "Begun('done', AnswerKey(signed), answer=<39 bytes>)"
    for text in shown:
        for secret in ("secret-purchase-key", "gold-credential", A.encode(), SIGNER.encode()):
            assert secret not in text
        assert begun.key.digest.hex() not in text


def test_the_sqlite_file_holds_no_request(tmp_path: Path) -> None:
    """Only the request's SHA-256 is written, never its bytes."""
    path = tmp_path / "answers.db"
    with SQLiteAnswerStore(path, clock=Clock()) as store:
        answer_once(store, A, REQUEST, ANSWER)
    for file in tmp_path.iterdir():
        assert b"secret-purchase-key" not in file.read_bytes()


# -- SQLite: a restart --------------------------------------------------------------------------


def test_sqlite_answers_survive_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "answers.db"
    store = SQLiteAnswerStore(path, clock=clock, window=300)
    answer_once(store, A, REQUEST, ANSWER)
    cut_short = store.begin(B, REQUEST)  # running when the process stops
    assert cut_short.state == "new"
    store.close()
    reopened = SQLiteAnswerStore(path, clock=clock, window=300)
    try:
        assert reopened.begin(A, REQUEST) == Begun("done", AnswerKey.of(A, REQUEST), ANSWER)
        # Nothing runs after a restart: the repeat of a run a crash cut short runs again.
        assert reopened.begin(B, REQUEST).state == "new"
        clock.now += 300
        assert reopened.begin(A, REQUEST).state == "new"  # the window counts across restarts
    finally:
        reopened.close()


def test_sqlite_refuses_a_file_that_is_not_its_store(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(SimplexRpcError, match=r"^answer store '.*garbage\.db': "):
        SQLiteAnswerStore(garbage)
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(SimplexRpcError, match="not an answer store of this library"):
        SQLiteAnswerStore(other)
    with pytest.raises(SimplexRpcError, match=r"^answer store '.*': unable to open"):
        SQLiteAnswerStore(tmp_path / "no such directory" / "answers.db")


def test_a_closed_sqlite_store_says_so(tmp_path: Path) -> None:
    store = SQLiteAnswerStore(tmp_path / "answers.db")
    store.close()
    store.close()
    assert "closed" in repr(store)
    with pytest.raises(SimplexRpcError, match="closed"):
        store.begin(A, REQUEST)


# -- the asyncio gate -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_concurrent_repeat_waits_for_the_first_run(make: MakeStore) -> None:
    store = make(Clock())
    gate = AnswerGate(store)
    runs = 0
    release = asyncio.Event()

    async def handler() -> tuple[bytes, bool]:
        nonlocal runs
        runs += 1
        await release.wait()
        return ANSWER, True

    first = asyncio.create_task(gate.answer(A, REQUEST, handler))
    repeats = [asyncio.create_task(gate.answer(A, REQUEST, handler)) for _ in range(3)]
    await asyncio.sleep(0)  # the behaviour under test: repeats come during the run
    assert runs == 1
    release.set()
    assert (await first).how == "ran"
    assert [(r.answer, r.how) for r in await asyncio.gather(*repeats)] == [(ANSWER, "joined")] * 3
    later = await gate.answer(A, REQUEST, handler)
    assert (later.answer, later.how) == (ANSWER, "stored")
    other = await gate.answer(B, REQUEST, handler)
    assert other.how == "ran"  # a different signer is a different request
    assert runs == 2


@pytest.mark.anyio
async def test_a_failed_run_lets_a_waiter_run(make: MakeStore) -> None:
    store = make(Clock())
    gate = AnswerGate(store)
    calls: list[str] = []
    release = asyncio.Event()

    async def failing() -> tuple[bytes, bool]:
        calls.append("failing")
        await release.wait()
        raise RuntimeError("the handler failed")

    async def working() -> tuple[bytes, bool]:
        calls.append("working")
        return ANSWER, True

    first = asyncio.create_task(gate.answer(A, REQUEST, failing))
    repeat = asyncio.create_task(gate.answer(A, REQUEST, working))
    await asyncio.sleep(0)  # the behaviour under test: the repeat comes during the run
    release.set()
    with pytest.raises(RuntimeError):
        await first
    assert (await repeat).how == "ran"
    assert (await gate.answer(A, REQUEST, working)).how == "stored"
    assert calls == ["failing", "working"]


@pytest.mark.anyio
async def test_a_transient_answer_reaches_the_waiters_and_is_not_kept(make: MakeStore) -> None:
    """An answer with retryAfter is not kept: the next repeat runs again."""
    store = make(Clock())
    gate = AnswerGate(store)
    runs = 0

    async def busy() -> tuple[bytes, bool]:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0)  # the behaviour under test: a run the repeat can join
        return b'{"type":"error","code":"busy","retryAfter":5}', False

    both = await asyncio.gather(gate.answer(A, REQUEST, busy), gate.answer(A, REQUEST, busy))
    assert sorted(a.how for a in both) == ["joined", "ran"]
    assert (await gate.answer(A, REQUEST, busy)).how == "ran"
    assert runs == 2


@pytest.mark.anyio
async def test_cancelling_a_waiter_leaves_the_run_alone(make: MakeStore) -> None:
    store = make(Clock())
    gate = AnswerGate(store)
    release = asyncio.Event()

    async def slow() -> tuple[bytes, bool]:
        await release.wait()
        return ANSWER, True

    first = asyncio.create_task(gate.answer(A, REQUEST, slow))
    waiter = asyncio.create_task(gate.answer(A, REQUEST, slow))
    await asyncio.sleep(0)  # the behaviour under test: the waiter joins the run
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    assert (await first).how == "ran"
    assert store.begin(A, REQUEST).state == "done"


@pytest.mark.anyio
async def test_unsigned_requests_without_opting_in_each_run() -> None:
    gate = AnswerGate(AnswerStore())
    runs = 0

    async def handler() -> tuple[bytes, bool]:
        nonlocal runs
        runs += 1
        return ANSWER, True

    for _ in range(3):
        assert (await gate.answer(None, REQUEST, handler)).how == "ran"
    assert runs == 3


# -- pluggable ----------------------------------------------------------------------------------


class DictStore:
    """A store written to the protocol alone: no bounds, no window, no unsigned answers."""

    def __init__(self) -> None:
        self.done: dict[AnswerKey, bytes] = {}
        self.running: set[AnswerKey] = set()

    def begin(self, signer: sx.PublicKey | None, request: bytes) -> Begun:
        if signer is None:
            return Begun("new", None)
        key = AnswerKey.of(signer, request)
        if key in self.running:
            return Begun("running", key)
        if key in self.done:
            return Begun("done", key, self.done[key])
        self.running.add(key)
        return Begun("new", key)

    def finish(self, key: AnswerKey, answer: bytes) -> bool:
        self.running.discard(key)
        self.done[key] = answer
        return True

    def abandon(self, key: AnswerKey) -> None:
        self.running.discard(key)


@pytest.mark.anyio
async def test_another_store_plugs_into_the_gate(tmp_path: Path) -> None:
    store = DictStore()
    assert isinstance(store, AnswerStoreProtocol)
    assert isinstance(AnswerStore(), AnswerStoreProtocol)
    with SQLiteAnswerStore(tmp_path / "a.db") as sqlite_store:
        assert isinstance(sqlite_store, AnswerStoreProtocol)
    gate = AnswerGate(store)

    async def handler() -> tuple[bytes, bool]:
        return ANSWER, True

    assert (await gate.answer(A, REQUEST, handler)).how == "ran"
    assert (await gate.answer(A, REQUEST, handler)).how == "stored"
    with pytest.raises(SimplexRpcError, match="expected an answer store"):
        AnswerGate({})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_gate_refuses_a_run_it_did_not_start() -> None:
    store = AnswerStore()
    store.begin(A, REQUEST)  # someone else's run
    gate = AnswerGate(store)

    async def handler() -> tuple[bytes, bool]:
        return ANSWER, True

    with pytest.raises(SimplexRpcError, match="one gate drives a store"):
        await gate.answer(A, REQUEST, handler)


def test_an_answer_key_is_what_it_says() -> None:
    with pytest.raises(SimplexRpcError, match="digest"):
        AnswerKey(signer=b"", digest=b"short")
    with pytest.raises(SimplexRpcError, match="signer"):
        AnswerKey(signer=b"x" * 31, digest=bytes(32))
    with pytest.raises(TypeError, match="request: expected bytes"):
        AnswerKey.of(A, "text")  # type: ignore[arg-type]
    assert repr(AnswerKey.of(None, REQUEST)) == "AnswerKey(unsigned)"


def test_an_expired_answer_behind_a_later_one_is_not_given(make: MakeStore) -> None:
    """A clock that steps back puts an answer that expires sooner behind a later one."""
    clock = Clock()
    store = make(clock)
    answer_once(store, A, b"first", ANSWER)
    clock.now -= 500
    answer_once(store, A, b"second", ANSWER)
    clock.now += 180  # "second" is 180 s old; "first" has 500 s more to go
    assert store.begin(A, b"second").state == "new"
    assert store.begin(A, b"first").state == "done"


@pytest.mark.anyio
async def test_an_answer_the_store_cannot_keep_still_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's failure is logged (naming the file, never the request); the answer
    goes to the requester all the same."""
    store = SQLiteAnswerStore(tmp_path / "answers.db")
    gate = AnswerGate(store)
    runs: list[int] = []

    async def handler() -> tuple[bytes, bool]:
        runs.append(1)
        store.close()  # the file goes away while the handler runs
        return ANSWER, True

    with caplog.at_level("ERROR", logger="simplex_rpc.adapter"):
        answered = await gate.answer(A, REQUEST, handler)
    assert (answered.answer, answered.how) == (ANSWER, "ran")
    (record,) = caplog.records
    assert "the answer was not kept" in record.getMessage()
    assert "closed" in record.getMessage()
    assert "secret-purchase-key" not in caplog.text and "gold-credential" not in caplog.text
    with pytest.raises(SimplexRpcError, match="closed"):
        await gate.answer(A, REQUEST, handler)  # begin fails: nothing runs
    assert len(runs) == 1

"""Idempotent answers: a repeated request gets the stored answer, and the handler runs once.

Service RPC does not deduplicate: each ``/_service_request`` is a new
connection with a new ratchet, so a requester that timed out and repeats the
identical signed request (the badge service's rule: "a timeout hides the
outcome, so the client repeats the identical signed request at its next
trigger") reaches the handler again. A store keeps the answer to each
(signer, SHA-256 of the request bytes) for a window the service chooses, at
least the core's 180 s, so that the repeat is answered from the store.

The stores are sans-I/O in the asyncio sense (h11's way): plain methods, no
awaiting, an injected clock. :class:`AnswerStore` keeps answers in memory;
:class:`SQLiteAnswerStore` in a SQLite file (stdlib :mod:`sqlite3`), so that
they survive a restart. Both follow :class:`AnswerStoreProtocol`, which other
stores can implement. A store's state for a key is one of three, returned by
:meth:`~AnswerStoreProtocol.begin` as a :class:`Begun`:

* ``"new"``: nothing stored and nothing running; the caller runs the handler,
  then calls ``finish(key, answer)`` (the answer is kept) or ``abandon(key)``
  (nothing to keep: a transient answer, a failure, a cancellation);
* ``"running"``: the first of these requests is still running; the caller
  waits for its answer and does not start a second run;
* ``"done"``: the stored answer, to send as it is.

:class:`AnswerGate` is the small asyncio layer that drives a store: one run
per key, and repeats while it runs wait for its answer.

Redaction: a request's bytes never reach a store (only their SHA-256), and
no repr or message shows a request, an answer, a digest or a signer's key.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from .._wire.keys import PublicKey
from .._wire.redact import RedactingLogger
from ..errors import SimplexRpcError

__all__ = [
    "DEFAULT_ANSWER_WINDOW",
    "AnswerGate",
    "AnswerKey",
    "AnswerStore",
    "AnswerStoreProtocol",
    "Answered",
    "Begun",
    "SQLiteAnswerStore",
]

#: The shortest window a store accepts, and the default: the core accepts a response
#: within 180 seconds of the request (the protocol text, "Service RPC transport",
#: Requirements), so a repeat can come at least that long after the first.
DEFAULT_ANSWER_WINDOW: Final = 180.0
#: What a stored entry costs beyond its answer: the signer's key (32 bytes) and the digest.
_KEY_BYTES: Final = 32 + 32

Clock = Callable[[], float]

log = RedactingLogger(logging.getLogger("simplex_rpc.adapter"))


@dataclass(frozen=True, slots=True, repr=False)
class AnswerKey:
    """What an answer is stored under: the signer's raw Ed25519 key (``b""`` when the
    request is unsigned) and the SHA-256 of the request bytes.

    Its repr says whether the request was signed, nothing else.
    """

    signer: bytes
    digest: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.signer, bytes) or len(self.signer) not in (0, 32):
            raise SimplexRpcError("answer key: signer: expected 32 bytes of key, or b''")
        if not isinstance(self.digest, bytes) or len(self.digest) != 32:
            raise SimplexRpcError("answer key: digest: expected the 32 bytes of a SHA-256")

    @classmethod
    def of(cls, signer: PublicKey | None, request: bytes) -> AnswerKey:
        """The key of ``request`` (its bytes, as received) signed by ``signer`` (or None)."""
        if signer is not None and not isinstance(signer, PublicKey):
            raise TypeError(f"signer: expected a PublicKey or None, got {type(signer).__name__}")
        if not isinstance(request, (bytes, bytearray, memoryview)):
            raise TypeError(f"request: expected bytes, got {type(request).__name__}")
        return cls(
            signer=b"" if signer is None else signer.raw, digest=hashlib.sha256(request).digest()
        )

    @property
    def signed(self) -> bool:
        """Whether the request was signed."""
        return bool(self.signer)

    def __repr__(self) -> str:
        return f"AnswerKey({'signed' if self.signer else 'unsigned'})"


@dataclass(frozen=True, slots=True, repr=False)
class Begun:
    """A store's decision for a request (see the module's text).

    ``key`` is None when the store does not keep this request's answer (an
    unsigned request, and the store was not made with ``unsigned=True``): the
    caller runs the handler and has nothing to finish. ``answer`` is the
    stored answer when ``state`` is ``"done"``, else None.
    """

    state: Literal["new", "running", "done"]
    key: AnswerKey | None
    answer: bytes | None = None

    def __repr__(self) -> str:
        answer = "" if self.answer is None else f", answer=<{len(self.answer)} bytes>"
        return f"Begun({self.state!r}, {self.key!r}{answer})"


@runtime_checkable
class AnswerStoreProtocol(Protocol):
    """What a responder needs of an answer store; write another store to this.

    The calls are quick and never await. For one key, the caller calls
    :meth:`begin`, and after a ``"new"`` exactly one of :meth:`finish` or
    :meth:`abandon`. A store keeps a key ``"running"`` from that ``begin`` to
    that call, and a finished answer for its window (or until its bounds
    push it out, oldest first).
    """

    def begin(self, signer: PublicKey | None, request: bytes) -> Begun:
        """The decision for ``request`` from ``signer``: new (now running), running, or done."""
        ...

    def finish(self, key: AnswerKey, answer: bytes) -> bool:
        """Keep ``answer`` for ``key`` (no longer running); False when it is not kept."""
        ...

    def abandon(self, key: AnswerKey) -> None:
        """``key`` is no longer running and nothing is kept: a repeat runs again."""
        ...


def _check_bounds(
    window: object, max_entries: object, max_bytes: object, unsigned: object, clock: object
) -> float:
    if isinstance(window, bool) or not isinstance(window, (int, float)):
        raise SimplexRpcError(f"window: expected a number of seconds, got {type(window).__name__}")
    if not DEFAULT_ANSWER_WINDOW <= window < math.inf:
        raise SimplexRpcError(
            f"window: expected at least {DEFAULT_ANSWER_WINDOW:g} seconds (the core's"
            " response window: a repeat can come that long after the first), and finite"
        )
    for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SimplexRpcError(f"{name}: expected a positive integer")
    if not isinstance(unsigned, bool):
        raise SimplexRpcError("unsigned: expected True or False")
    if not callable(clock):
        raise SimplexRpcError("clock: expected a callable returning seconds")
    return float(window)


def _check_answer(answer: object) -> bytes:
    if not isinstance(answer, (bytes, bytearray, memoryview)):
        raise TypeError(f"answer: expected bytes, got {type(answer).__name__}")
    return bytes(answer)


def _check_key(key: object) -> AnswerKey:
    if not isinstance(key, AnswerKey):
        raise TypeError(f"key: expected an AnswerKey, got {type(key).__name__}")
    return key


class _Running:
    """The keys begun and not yet finished or abandoned: in memory in every store.

    A run belongs to this process: after a restart nothing is running, so a
    run that a crash cut short never leaves its repeats waiting.
    """

    def __init__(self) -> None:
        self.keys: set[AnswerKey] = set()

    def end(self, key: AnswerKey, what: str) -> None:
        if key not in self.keys:
            raise SimplexRpcError(f"answers: {what} of a request that is not running")
        self.keys.discard(key)


class AnswerStore:
    """Answers kept in memory, by (signer, SHA-256 of the request bytes).

    An answer is kept for ``window`` seconds from :meth:`finish` (at least
    the core's 180 s), and the store holds at most ``max_entries`` answers
    and ``max_bytes`` bytes (each answer's bytes, plus 64 for its key);
    beyond, the oldest go first, and an answer larger than ``max_bytes``
    alone is not kept. Unsigned requests are kept only with
    ``unsigned=True``: the service cannot tell two unsigned requesters apart,
    so that is safe only for answers that do not depend on who asks.
    ``clock`` gives seconds (monotonic by default).
    """

    def __init__(
        self,
        window: float = DEFAULT_ANSWER_WINDOW,
        *,
        max_entries: int = 10_000,
        max_bytes: int = 32 * 1024 * 1024,
        unsigned: bool = False,
        clock: Clock = time.monotonic,
    ) -> None:
        self.window = _check_bounds(window, max_entries, max_bytes, unsigned, clock)
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.unsigned = unsigned
        self._clock = clock
        # In the order finished, which is the order they expire (the clock does not go back).
        self._done: OrderedDict[AnswerKey, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0
        self._running = _Running()

    def __repr__(self) -> str:
        return (
            f"AnswerStore(window={self.window:g}, entries={len(self._done)},"
            f" bytes={self._bytes}, running={len(self._running.keys)})"
        )

    def __len__(self) -> int:
        """The answers kept now (expired ones are dropped at the next call)."""
        return len(self._done)

    @property
    def stored_bytes(self) -> int:
        """The bytes the kept answers count for (answers plus 64 a key)."""
        return self._bytes

    def begin(self, signer: PublicKey | None, request: bytes) -> Begun:
        """See :meth:`AnswerStoreProtocol.begin`."""
        key = AnswerKey.of(signer, request)
        self._expire(self._clock())
        if not key.signed and not self.unsigned:
            return Begun("new", None)
        if key in self._running.keys:
            return Begun("running", key)
        stored = self._done.get(key)
        if stored is not None:
            if stored[0] > self._clock() - self.window:
                return Begun("done", key, stored[1])
            self._drop(key)  # expired, behind a later one (a clock that stepped back)
        self._running.keys.add(key)
        return Begun("new", key)

    def finish(self, key: AnswerKey, answer: bytes) -> bool:
        """See :meth:`AnswerStoreProtocol.finish`."""
        key, answer = _check_key(key), _check_answer(answer)
        self._running.end(key, "finish")
        size = len(answer) + _KEY_BYTES
        if size > self.max_bytes:
            return False
        self._drop(key)
        self._done[key] = (self._clock(), answer)
        self._bytes += size
        while len(self._done) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._done)))
        return True

    def abandon(self, key: AnswerKey) -> None:
        """See :meth:`AnswerStoreProtocol.abandon`."""
        self._running.end(_check_key(key), "abandon")

    def _drop(self, key: AnswerKey) -> None:
        stored = self._done.pop(key, None)
        if stored is not None:
            self._bytes -= len(stored[1]) + _KEY_BYTES

    def _expire(self, now: float) -> None:
        horizon = now - self.window
        while self._done:
            key, (stored_at, _) = next(iter(self._done.items()))
            if stored_at > horizon:
                break
            self._drop(key)


_SCHEMA: Final = 1


class SQLiteAnswerStore:
    """Answers kept in a SQLite file, so that they survive a restart.

    The same rules as :class:`AnswerStore` (``window``, ``max_entries``,
    ``max_bytes``, ``unsigned``), with a wall clock by default
    (:func:`time.time`): a monotonic clock starts again at a reboot. The
    file holds each answer with its signer's key and the request's SHA-256,
    never the request. What is running is kept in memory: after a restart
    nothing is, so a repeat of a request whose run a crash cut short runs
    again. One responder process uses a file at a time.

    Each call is one short local transaction (WAL journal); a file that is
    not such a store, or fails (another process holding it locked for
    more than half a second too), raises :class:`SimplexRpcError` naming the
    file. Close it with :meth:`close`, or use it as a context manager.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        window: float = DEFAULT_ANSWER_WINDOW,
        *,
        max_entries: int = 100_000,
        max_bytes: int = 256 * 1024 * 1024,
        unsigned: bool = False,
        clock: Clock = time.time,
    ) -> None:
        self.window = _check_bounds(window, max_entries, max_bytes, unsigned, clock)
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a file path, got {type(path).__name__}")
        self.path = os.fspath(path)
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.unsigned = unsigned
        self._clock = clock
        self._running = _Running()
        self._db: sqlite3.Connection | None = None
        try:
            # A short busy timeout: the calls run on the event loop, and a file held by
            # another process is a failure to report, not a wait.
            db = sqlite3.connect(self.path, isolation_level=None, timeout=0.5)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        try:
            self._open(db)
        except sqlite3.Error as exc:
            db.close()
            raise self._error(exc) from None
        except SimplexRpcError:
            db.close()
            raise
        self._db = db

    def _error(self, exc: sqlite3.Error) -> SimplexRpcError:
        return SimplexRpcError(f"answer store {self.path!r}: {exc}")

    def _open(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if version == 0 and not tables:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "CREATE TABLE answers (signer BLOB NOT NULL, digest BLOB NOT NULL,"
                " stored REAL NOT NULL, size INTEGER NOT NULL, answer BLOB NOT NULL,"
                " PRIMARY KEY (signer, digest))"
            )
            db.execute("CREATE INDEX answers_by_time ON answers (stored)")
            db.execute(f"PRAGMA user_version = {_SCHEMA}")
            db.execute("COMMIT")
        elif version != _SCHEMA:
            raise SimplexRpcError(
                f"answer store {self.path!r}: not an answer store of this library"
                f" (schema version {version}, expected {_SCHEMA})"
            )
        db.execute("PRAGMA synchronous = NORMAL")

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise SimplexRpcError(f"answer store {self.path!r}: closed")
        return self._db

    def close(self) -> None:
        """Close the file (the answers stay in it). Closing twice is harmless."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> SQLiteAnswerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._db is None else f"running={len(self._running.keys)}"
        return f"SQLiteAnswerStore({self.path!r}, window={self.window:g}, {state})"

    def __len__(self) -> int:
        """The answers in the file, expired ones included until the next :meth:`finish`."""
        try:
            count: int = self._conn.execute("SELECT count(*) FROM answers").fetchone()[0]
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return count

    @property
    def stored_bytes(self) -> int:
        """The bytes the answers in the file count for (answers plus 64 a key)."""
        try:
            total: int = self._conn.execute(
                "SELECT coalesce(sum(size), 0) FROM answers"
            ).fetchone()[0]
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return total

    def begin(self, signer: PublicKey | None, request: bytes) -> Begun:
        """See :meth:`AnswerStoreProtocol.begin`."""
        key = AnswerKey.of(signer, request)
        db = self._conn
        if not key.signed and not self.unsigned:
            return Begun("new", None)
        if key in self._running.keys:
            return Begun("running", key)
        try:
            row = db.execute(
                "SELECT answer FROM answers WHERE signer = ? AND digest = ? AND stored > ?",
                (key.signer, key.digest, self._clock() - self.window),
            ).fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        if row is not None:
            return Begun("done", key, bytes(row[0]))
        self._running.keys.add(key)
        return Begun("new", key)

    def finish(self, key: AnswerKey, answer: bytes) -> bool:
        """See :meth:`AnswerStoreProtocol.finish`. Expired answers go here, and the
        oldest while the bounds are passed."""
        key, answer = _check_key(key), _check_answer(answer)
        self._running.end(key, "finish")
        size = len(answer) + _KEY_BYTES
        if size > self.max_bytes:
            return False
        db = self._conn
        now = self._clock()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR REPLACE INTO answers (signer, digest, stored, size, answer)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (key.signer, key.digest, now, size, answer),
                )
                db.execute("DELETE FROM answers WHERE stored <= ?", (now - self.window,))
                count, total = db.execute(
                    "SELECT count(*), coalesce(sum(size), 0) FROM answers"
                ).fetchone()
                if count > self.max_entries or total > self.max_bytes:
                    self._evict(db, count, total)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return True

    def _evict(self, db: sqlite3.Connection, count: int, total: int) -> None:
        """Delete the oldest answers until ``count`` and ``total`` are within the bounds."""
        doomed: list[tuple[bytes, bytes]] = []
        for signer, digest, size in db.execute(
            "SELECT signer, digest, size FROM answers ORDER BY stored, rowid"
        ):
            if count <= self.max_entries and total <= self.max_bytes:
                break
            doomed.append((signer, digest))
            count, total = count - 1, total - size
        db.executemany("DELETE FROM answers WHERE signer = ? AND digest = ?", doomed)

    def abandon(self, key: AnswerKey) -> None:
        """See :meth:`AnswerStoreProtocol.abandon`."""
        self._running.end(_check_key(key), "abandon")


@dataclass(frozen=True, slots=True, repr=False)
class Answered:
    """What :meth:`AnswerGate.answer` gives: the answer, and how it was had.

    ``how``: ``"ran"`` (this call ran the handler), ``"stored"`` (the store had
    it), ``"joined"`` (a run in progress for the same request gave it).
    """

    answer: bytes
    how: Literal["ran", "stored", "joined"]

    def __repr__(self) -> str:
        return f"Answered(<{len(self.answer)} bytes>, how={self.how!r})"


Run = Callable[[], Awaitable[tuple[bytes, bool]]]
"""A handler's run for :meth:`AnswerGate.answer`: resolves to the answer's bytes and
whether to keep it (False for a transient answer, one with ``retryAfter``)."""


class AnswerGate:
    """Drives an answer store from asyncio: one run per request, repeats wait for it.

    One gate drives one store (the responder's): the runs in progress are
    this gate's futures, which the store's ``"running"`` state mirrors.
    """

    def __init__(self, store: AnswerStoreProtocol) -> None:
        if not isinstance(store, AnswerStoreProtocol):
            raise SimplexRpcError(
                "answers: expected an answer store (begin, finish, abandon), got"
                f" {type(store).__name__}"
            )
        self.store = store
        self._runs: dict[AnswerKey, asyncio.Future[bytes | None]] = {}

    def __repr__(self) -> str:
        return f"AnswerGate({self.store!r}, runs={len(self._runs)})"

    async def answer(self, signer: PublicKey | None, request: bytes, run: Run) -> Answered:
        """The answer to ``request`` from ``signer``: stored, joined, or from ``run()``.

        A repeat of a request whose run is in progress waits for that run's
        answer (kept or not) and does not run. When the run fails or is
        cancelled, nothing is kept and its waiters begin again: one of them
        runs. Cancelling a waiter leaves the run alone. A store that fails in
        ``begin`` raises its :class:`SimplexRpcError` and nothing runs (the
        caller answers ``internal``: running anyway could run twice what the
        store would have answered); one that fails to keep an answer is
        logged, and the answer stands.
        """
        joined = False
        while True:
            begun = self.store.begin(signer, request)
            if begun.state == "done":
                assert begun.answer is not None
                return Answered(begun.answer, "joined" if joined else "stored")
            key = begun.key
            if begun.state == "running":
                assert key is not None
                future = self._runs.get(key)
                if future is None:
                    raise SimplexRpcError(
                        "answers: the store has a run this gate did not start"
                        " (one gate drives a store)"
                    )
                await asyncio.wait([future])
                result = future.result()
                if result is not None:
                    return Answered(result, "joined")
                joined = True
                continue  # the run failed: begin again
            return await self._run(key, run)

    async def _run(self, key: AnswerKey | None, run: Run) -> Answered:
        if key is None:  # not kept: an unsigned request without unsigned=True
            answer, _keep = await run()
            return Answered(_check_answer(answer), "ran")
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._runs[key] = future
        try:
            answer, keep = await run()
            answer = _check_answer(answer)
        except BaseException:
            self._end(key, future, None)
            self.store.abandon(key)
            raise
        self._end(key, future, answer)
        try:
            if keep:
                self.store.finish(key, answer)
            else:
                self.store.abandon(key)
        except SimplexRpcError as exc:
            # The answer stands (its waiters have it already); only a later repeat
            # runs again. The message names the store's file, never the request.
            log.error("answers: the answer was not kept: %s", exc)
        return Answered(answer, "ran")

    def _end(
        self, key: AnswerKey, future: asyncio.Future[bytes | None], answer: bytes | None
    ) -> None:
        del self._runs[key]
        future.set_result(answer)

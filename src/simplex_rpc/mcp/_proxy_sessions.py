"""The MCP proxy's Streamable HTTP sessions, bounded per client.

The SDK's session manager keeps up to ``max_sessions`` (10,000) sessions, each
until it has been idle for 30 minutes, and answers 503 to every new one while
the table is full: 10,000 ``initialize`` requests that never go on lock the
host out for half an hour (issue 32, item 6). :class:`SessionGuard`, ASGI
middleware in front of the SDK's app, bounds them:

* a session whose client sends nothing more under its id (the
  ``notifications/initialized`` that completes the handshake) within
  ``handshake_timeout`` seconds of its ``initialize`` is closed;
* one client address (every loopback address counting as one) keeps at most
  ``per_client`` sessions; a new one
  displaces that client's oldest unfinished handshake, else its session idle
  the longest; only when all are busy with a request is it refused (503);
* a session idle for ``idle_timeout`` is closed (the SDK's own idle timeout,
  kept here so that the count stays right).

A session is closed the way a client closes it: a ``DELETE`` with its
``Mcp-Session-Id``, sent to the SDK's app in-process. No I/O of its own
besides that; :meth:`SessionGuard.run` drives the timers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._bindings import INTERNAL_ERROR, error_response
from .._listener import client_of, is_loopback
from .._wire import strict_json as _json

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PER_CLIENT",
    "SessionGuard",
]

log = logging.getLogger("simplex_rpc.mcp_proxy")

DEFAULT_PER_CLIENT: Final = 128
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0
DEFAULT_IDLE_TIMEOUT: Final = 30 * 60.0

_SESSION_HEADER: Final = b"mcp-session-id"
_VERSION_HEADER: Final = b"mcp-protocol-version"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(slots=True)
class _Session:
    client: str
    since: float
    established: bool = False
    busy: int = 0


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


def client_key(scope: Scope) -> str:
    """Whose sessions a request counts against: its client address, with every loopback
    address one client (a local process may connect from any of 127.0.0.0/8)."""
    client = client_of(scope)
    return "loopback" if is_loopback(client) else client


def _may_open_a_session(scope: Scope) -> bool:
    """Whether the SDK's manager serves this request on its stateful path, as it decides:
    a POST without a session id, of no revision or one with the initialize handshake
    (a 2026-07-28 request is per-request, with no session)."""
    if scope.get("method") != "POST":
        return False
    version = _header(scope, _VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


class SessionGuard:
    """ASGI middleware bounding the SDK's stateful sessions (see the module's docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str = "/mcp",
        per_client: int = DEFAULT_PER_CLIENT,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.app = app
        self.path = path
        self.per_client = per_client
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, int] = {}

    def sessions_of(self, client: str) -> int:
        """How many sessions ``client`` holds (opened or opening)."""
        held = sum(1 for s in self._sessions.values() if s.client == client)
        return held + self._opening.get(client, 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        sid = _header(scope, _SESSION_HEADER)
        if sid is None:
            if _may_open_a_session(scope):
                await self._open(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        session = self._sessions.get(sid)
        if session is None:
            await self.app(scope, receive, send)
            return
        # Any request under the id: the client read the answer to its initialize.
        session.established = True
        session.busy += 1
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            session.busy -= 1
            session.since = anyio.current_time()
            if scope.get("method") == "DELETE" or status == 404:
                self._sessions.pop(sid, None)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = client_key(scope)
        if self.sessions_of(client) >= self.per_client and not await self._make_room(client):
            log.warning(
                "refused a new MCP session from %s: its %d sessions are all busy",
                client,
                self.per_client,
            )
            body = _json.dumps(
                error_response(None, INTERNAL_ERROR, "too many open sessions for this client")
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode("ascii")),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and int(message["status"]) < 400:
                for name, value in message.get("headers", ()):
                    if bytes(name).lower() == _SESSION_HEADER:
                        opened = bytes(value).decode("latin-1")
            await send(message)

        self._opening[client] = self._opening.get(client, 0) + 1
        try:
            await self.app(scope, receive, watch)
        finally:
            left = self._opening[client] - 1
            if left:
                self._opening[client] = left
            else:
                del self._opening[client]
            if opened is not None:
                self._sessions[opened] = _Session(client, anyio.current_time())

    async def _make_room(self, client: str) -> bool:
        """Close one idle session of ``client``: an unfinished handshake first, the oldest;
        else the session idle the longest. False when every one is busy."""
        idle = [(s.established, s.since, sid) for sid, s in self._sessions.items()]
        candidates = sorted(
            (established, since, sid)
            for established, since, sid in idle
            if self._sessions[sid].client == client and self._sessions[sid].busy == 0
        )
        if not candidates:
            return False
        established, _, sid = candidates[0]
        log.info(
            "closing %s MCP session of %s to make room for a new one",
            "an idle" if established else "an unfinished",
            client,
        )
        await self.close(sid)
        return True

    async def close(self, sid: str) -> None:
        """Close session ``sid`` as its client would: ``DELETE`` with its id, in-process."""
        self._sessions.pop(sid, None)
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode("ascii"),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"localhost"), (_SESSION_HEADER, sid.encode("latin-1"))],
            "client": None,
            "server": None,
            "state": {},
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message: Message) -> None:
            return None

        with anyio.CancelScope(shield=True):
            await self.app(scope, receive, discard)

    def _expired(self, now: float) -> list[str]:
        out = []
        for sid, s in self._sessions.items():
            if s.busy:
                continue
            limit = self.idle_timeout if s.established else self.handshake_timeout
            if now - s.since >= limit:
                out.append(sid)
        return out

    async def run(self) -> None:
        """Close sessions whose handshake or idle time ran out, until cancelled."""
        tick = max(0.05, min(1.0, self.handshake_timeout / 4))
        while True:
            await anyio.sleep(tick)
            expired = self._expired(anyio.current_time())
            if expired:
                log.info(
                    "closing %d MCP session(s) whose handshake or idle time ran out", len(expired)
                )
            for sid in expired:
                await self.close(sid)

    @property
    def open_sessions(self) -> int:
        """How many sessions the guard tracks."""
        return len(self._sessions)

    def __repr__(self) -> str:
        return f"SessionGuard({len(self._sessions)} sessions)"

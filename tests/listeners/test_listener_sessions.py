"""The MCP proxy's sessions bounded per client (issue 32, item 6): ``SessionGuard``.

The SDK's session manager keeps every session until it has been idle for 30 minutes and
refuses new ones while 10,000 are open, so one client's 10,000 unfinished ``initialize``
requests lock the host out. The guard in front of it is checked here against a stand-in
for the SDK's app that opens a session for each POST without an id, closes it on DELETE
(as the MCP specification's session termination says) and answers 404 for an unknown id.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

from _waiting import until
from simplex_rpc.mcp._proxy_sessions import SessionGuard


class StandIn:
    """The SDK's Streamable HTTP app, as far as sessions go."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.deleted: list[str] = []
        self.hold = asyncio.Event()
        self.held = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        sid = headers.get(b"mcp-session-id", b"").decode() or None
        answer: list[tuple[bytes, bytes]] = []
        status = 200
        if sid is None and scope["method"] == "POST":
            if headers.get(b"mcp-protocol-version") != b"2026-07-28":
                new = uuid.uuid4().hex
                self.open.add(new)
                answer.append((b"mcp-session-id", new.encode()))
        elif sid not in self.open:
            status = 404
        elif scope["method"] == "DELETE":
            self.open.discard(sid)
            self.deleted.append(sid)
        elif headers.get(b"x-hold"):
            self.held += 1
            await self.hold.wait()
        await send({"type": "http.response.start", "status": status, "headers": answer})
        await send({"type": "http.response.body", "body": b"{}"})


def _client(app: Any, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1")


async def _open(http: httpx.AsyncClient, **headers: str) -> str | None:
    reply = await http.post("/mcp", content=b"{}", headers=headers)
    return reply.headers.get("mcp-session-id")


async def _use(http: httpx.AsyncClient, sid: str, **headers: str) -> int:
    reply = await http.post("/mcp", content=b"{}", headers={"mcp-session-id": sid, **headers})
    return reply.status_code


@pytest.mark.anyio
async def test_a_flood_of_unfinished_handshakes_displaces_only_itself() -> None:
    """One client's sessions are capped; a new one displaces the oldest unfinished
    handshake, so the host's finished session survives 1,000 initializes."""

    sdk = StandIn()
    guard = SessionGuard(sdk, per_client=4)
    async with _client(guard, "127.0.0.1") as http:
        host = await _open(http)
        assert host is not None and await _use(http, host) == 200  # handshake finished
        opened = [await _open(http) for _ in range(1000)]
        assert all(opened)
        assert len(sdk.open) == 4 and host in sdk.open
        assert await _use(http, host) == 200
        assert sdk.deleted[:3] == opened[:3]  # the oldest unfinished went first


@pytest.mark.anyio
async def test_the_cap_is_per_client_address_and_loopback_is_one_client() -> None:
    """A local process may connect from any address of 127.0.0.0/8 (or ::1): together
    they are one client, so cycling through them does not escape the cap."""

    sdk = StandIn()
    guard = SessionGuard(sdk, per_client=2)
    async with _client(guard, "10.0.0.7") as other:
        for n in range(5):
            async with _client(guard, f"127.0.0.{n + 1}") as local:
                await _open(local)
        async with _client(guard, "::1") as local:
            await _open(local)
        assert await _open(other) is not None
        assert guard.sessions_of("loopback") == 2 and guard.sessions_of("10.0.0.7") == 1
        assert len(sdk.open) == 3


@pytest.mark.anyio
async def test_when_every_session_is_busy_a_new_one_is_503() -> None:
    """A session with a request in flight (an open stream) is never displaced."""

    sdk = StandIn()
    guard = SessionGuard(sdk, per_client=2)
    async with _client(guard, "127.0.0.1") as http:
        first, second = await _open(http), await _open(http)
        assert first and second
        busy = [asyncio.create_task(_use(http, s, **{"x-hold": "1"})) for s in (first, second)]
        await until(lambda: sdk.held >= 2, "both requests held by the SDK")
        reply = await http.post("/mcp", content=b"{}")
        assert reply.status_code == 503
        assert reply.json()["error"]["message"] == "too many open sessions for this client"
        sdk.hold.set()
        assert await asyncio.gather(*busy) == [200, 200]
        assert await _open(http) is not None  # idle again: room is made


@pytest.mark.anyio
async def test_an_unfinished_handshake_expires_a_finished_one_stays() -> None:
    sdk = StandIn()
    guard = SessionGuard(sdk, handshake_timeout=0.2, idle_timeout=3600)
    timers = asyncio.create_task(guard.run())
    try:
        async with _client(guard, "127.0.0.1") as http:
            finished, unfinished = await _open(http), await _open(http)
            assert finished and unfinished
            assert await _use(http, finished) == 200
            await until(lambda: unfinished in sdk.deleted, "the unfinished one expired")
            assert sdk.deleted == [unfinished]
            assert finished in sdk.open and await _use(http, finished) == 200
    finally:
        timers.cancel()


@pytest.mark.anyio
async def test_a_2026_request_opens_no_session_and_displaces_none() -> None:
    """A request of revision 2026-07-28 is served per request by the SDK: not counted."""

    sdk = StandIn()
    guard = SessionGuard(sdk, per_client=1)
    async with _client(guard, "127.0.0.1") as http:
        kept = await _open(http)
        for _ in range(3):
            reply = await http.post(
                "/mcp", content=b"{}", headers={"mcp-protocol-version": "2026-07-28"}
            )
            assert reply.status_code == 200
        assert sdk.deleted == [] and kept in sdk.open


@pytest.mark.anyio
async def test_a_session_the_client_deleted_or_the_sdk_forgot_is_not_counted() -> None:
    sdk = StandIn()
    guard = SessionGuard(sdk)
    async with _client(guard, "127.0.0.1") as http:
        gone, forgotten = await _open(http), await _open(http)
        assert gone and forgotten
        assert (await http.delete("/mcp", headers={"mcp-session-id": gone})).status_code == 200
        sdk.open.discard(forgotten)  # the SDK's own idle timeout
        assert await _use(http, forgotten) == 404
        assert guard.sessions_of("127.0.0.1") == 0

"""Shared helpers of the adapter tests (no tests here; not a test module).

``run`` bounds a test's event loop; ``cores`` connects a responder core
``bob`` and a requester core ``alice`` to the simulator, not yet started;
``pair`` starts them, with ``bob`` serving a handler; ``Held`` is a handler
that answers once the test releases it; ``FakeCore`` is a scripted WebSocket
core for events the simulator never sends (a malformed ``signerKey``, a
hostile ``requestId``), and ``fake_serving`` a core serving a handler over one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from simplex_rpc.adapter import ChatCore, Handler, ServiceRequest
from simplex_rpc.testing import CoreSimulator


def run(main: Callable[[], Awaitable[None]], limit: float = 60) -> None:
    """Run ``main`` in a fresh event loop; a hung test fails after ``limit`` seconds."""

    async def bounded() -> None:
        async with asyncio.timeout(limit):
            await main()

    asyncio.run(bounded())


@contextlib.asynccontextmanager
async def cores(
    response_window: float = 180.0,
) -> AsyncIterator[tuple[CoreSimulator, ChatCore, ChatCore]]:
    """The simulator with two cores connected and not started: ``(sim, bob, alice)``."""
    async with (
        CoreSimulator(response_window=response_window) as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        yield sim, bob, alice


@contextlib.asynccontextmanager
async def background_serve(
    core: ChatCore, handler: Handler, **serve_options: Any
) -> AsyncIterator[asyncio.Task[Any]]:
    """``core`` serving ``handler`` as user 1 in a task, subscribed to events; cancelled after."""
    ready = asyncio.Event()
    task = asyncio.create_task(core.serve(1, handler, ready=ready, **serve_options))
    await ready.wait()  # the responder takes requests
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


@dataclass
class Pair:
    sim: CoreSimulator
    alice: ChatCore
    bob: ChatCore
    link: str
    serving: asyncio.Task[Any]


@contextlib.asynccontextmanager
async def pair(
    handler: Handler,
    *,
    protocols: tuple[str, ...] = ("mcp", "a2a"),
    response_window: float = 180.0,
    **serve_options: Any,
) -> AsyncIterator[Pair]:
    """A responder ``bob`` serving ``handler`` and a requester ``alice``, over the simulator."""
    async with cores(response_window) as (sim, bob, alice):
        assert await bob.start(service_requests=True)
        address = await bob.service_address(1)
        assert await alice.start(service_requests=False)
        async with background_serve(bob, handler, protocols=protocols, **serve_options) as task:
            yield Pair(sim=sim, alice=alice, bob=bob, link=address.link, serving=task)


class Held:
    """A handler that answers ``answer`` to every request once ``release`` is set.

    Create it inside the test's event loop.
    """

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.release = asyncio.Event()

    async def __call__(self, request: ServiceRequest) -> Any:
        await self.release.wait()
        return self.answer


class FakeCore:
    """A scripted chat core: records commands, answers them, sends the events it is given.

    It takes any number of connections, as the chat core does (simplex-chat
    ``apps/simplex-chat/Server.hs``): each runs one command at a time, so a ``silent``
    command (never answered) holds its connection, which reads no other command until
    the test answers it (:meth:`answer_silent`) or the connection closes. Events go to
    one connection: the first open one.
    """

    def __init__(self) -> None:
        self.commands: asyncio.Queue[str] = asyncio.Queue()
        self.connected = asyncio.Event()
        #: The open connections, in the order they were opened.
        self.connections: list[Any] = []
        self._server: Any = None
        # A command name's answer: an object, or a function of the command text.
        self.answers: dict[str, Any] = {}
        self.silent: set[str] = set()
        # The silent commands held, by corrId: answered when the test says so.
        self._held: dict[str, asyncio.Future[Any]] = {}

    async def __aenter__(self) -> FakeCore:
        from websockets.asyncio.server import serve

        self._server = await serve(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    def answer(self, cmd: str) -> Any:
        name = cmd.split(" ", 1)[0]
        if name in self.answers:
            answer = self.answers[name]
            return answer(cmd) if callable(answer) else answer
        if name == "/_service_response":
            return {"type": "serviceReplyAccepted", "user": {"userId": 1}, "connectionId": "c"}
        return {"type": "cmdOk"}

    async def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self.connections.append(ws)
        self.connected.set()
        try:
            async for message in ws:
                msg = json.loads(message)
                await self.commands.put(msg["cmd"])
                if msg["cmd"].split(" ", 1)[0] in self.silent:
                    # Never answered by itself: this connection runs nothing else meanwhile.
                    held = asyncio.get_running_loop().create_future()
                    self._held[str(msg["corrId"])] = held
                    closed = asyncio.ensure_future(ws.wait_closed())
                    await asyncio.wait([held, closed], return_when=asyncio.FIRST_COMPLETED)
                    closed.cancel()
                    if held.done() and held.result() is not None:
                        await ws.send(json.dumps({"corrId": msg["corrId"], "resp": held.result()}))
                    continue
                await ws.send(
                    json.dumps({"corrId": msg["corrId"], "resp": self.answer(msg["cmd"])})
                )
        except ConnectionClosed:
            pass
        finally:
            self.connections.remove(ws)

    def answer_silent(self, corr_id: str, resp: dict[str, Any] | None) -> None:
        """Answer the held silent command ``corr_id`` with ``resp`` (None: the test sent its
        answer itself, with :meth:`send_raw`); its connection goes on."""
        self._held.pop(corr_id).set_result(resp)

    async def send_raw(self, text: str, connection: int = 0) -> None:
        await self.connected.wait()
        await self.connections[connection].send(text)

    async def event(self, resp: dict[str, Any], connection: int = 0) -> None:
        await self.send_raw(json.dumps({"resp": resp}), connection)

    async def close_connection(self, code: int = 1011) -> None:
        """Close every connection abnormally, as a crashed core would."""
        for ws in list(self.connections):
            await ws.close(code=code)


@contextlib.asynccontextmanager
async def fake_serving(
    handler: Handler, *, protocols: tuple[str, ...] = ("mcp",), **serve_options: Any
) -> AsyncIterator[tuple[FakeCore, asyncio.Task[Any]]]:
    """A scripted core and a ``ChatCore`` on it serving ``handler``: ``(fake, serving)``."""
    async with (
        FakeCore() as fake,
        ChatCore.connect(fake.url) as core,
        background_serve(core, handler, protocols=protocols, **serve_options) as task,
    ):
        yield fake, task


def service_request_event(
    request_id: str = "r1",
    *,
    data: Any = None,
    signer: Any = None,
    user_id: int = 1,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "serviceRequest",
        "user": {"userId": user_id},
        "requestId": request_id,
        "requestData": data if data is not None else {"protocol": "mcp", "request": {}},
    }
    if signer is not None:
        event["signerKey"] = signer
    return event

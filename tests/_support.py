"""Shared helpers of the adapter tests (no tests here; not a test module).

``cores`` connects a responder core ``bob`` and a requester core ``alice`` to the
simulator, not yet started; ``pair`` starts them, with ``bob`` serving a handler;
``Held`` is a handler that answers once the test releases it; ``fake_serving`` is a
core serving a handler over ``FakeCore`` (tests/_scripted_core.py, the suite's one
scripted core), for events the simulator never sends (a malformed ``signerKey``, a
hostile ``requestId``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from _scripted_core import FakeCore
from simplex_rpc.adapter import ChatCore, Handler, ServiceRequest
from simplex_rpc.testing import CoreSimulator


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

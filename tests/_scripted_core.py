"""The test suite's scripted core (``simplex_rpc.testing.ScriptedCore``) and its helpers.

``FakeCore`` (below) is the same core with its reply table under the name the older
adapter tests use; ``scripted_serving`` is a scripted core with a ``ChatCore`` serving
on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from simplex_rpc.adapter import ChatCore, Handler
from simplex_rpc.testing import ScriptedCore
from simplex_rpc.testing._scripted import ACCEPTED, RawAnswer

__all__ = [
    "ACCEPTED",
    "FakeCore",
    "RawAnswer",
    "ScriptedCore",
    "request_event",
    "responder_of",
    "scripted_serving",
    "taken",
]


class FakeCore(ScriptedCore):
    """The scripted core with ``answers`` naming its reply table (``replies``), as the
    adapter tests of tests/adapter/test_adapter.py and test_adapter_serve.py script it; the
    WebSocket's default 1 MiB frame limit, as their core had."""

    def __init__(self) -> None:
        super().__init__(max_size=2**20)

    @property
    def answers(self) -> dict[str, Any]:  # type: ignore[override]
        """The reply table: a command name's ``resp`` (or a function of the command)."""
        return self.replies


@contextlib.asynccontextmanager
async def scripted_serving(
    handler: Handler, *, protocols: tuple[str, ...] = ("mcp", "a2a"), **serve_options: Any
) -> AsyncIterator[tuple[ScriptedCore, ChatCore, asyncio.Task[Any]]]:
    """A scripted core and a ``ChatCore`` serving ``handler`` as user 1: ``(fake, core, task)``.

    The task is cancelled when the block ends (if it is still running).
    """
    async with ScriptedCore() as fake, ChatCore.connect(fake.url) as core:
        ready = asyncio.Event()
        task = asyncio.create_task(
            core.serve(1, handler, protocols=protocols, ready=ready, **serve_options)
        )
        await ready.wait()  # the responder takes requests
        try:
            yield fake, core, task
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def responder_of(core: ChatCore) -> Any:
    """The core's one responder (the request sink of its ``serve``), for tests to observe."""
    (responder,) = core._request_sinks
    return responder


def taken(core: ChatCore) -> int:
    """How many requests the core's responder has taken, each stamped as it was read."""
    return len(responder_of(core).seen)


def request_event(
    request_id: str, request: Any = None, *, protocol: str = "mcp", user_id: Any = 1
) -> dict[str, Any]:
    """A ``serviceRequest`` event: user, requestId, requestData (the protocol text,
    "Service RPC transport"); no signerKey, so an unsigned request."""
    return {
        "type": "serviceRequest",
        "user": {"userId": user_id},
        "requestId": request_id,
        "requestData": {"protocol": protocol, "request": request if request is not None else {}},
    }

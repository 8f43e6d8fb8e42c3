"""The responder's promise under the faults a review found (issue 14, review).

The rule pinned throughout is the protocol text's ("Service RPC transport",
Requirements) and cone-agent-protocol's "nothing lost, each request answered
exactly once": every request ends in exactly one answer or one logged reason,
also while ``serve`` stops and while the core is slow to take answers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from _scripted_core import request_event, scripted_serving
from simplex_rpc.adapter import ServiceRequest
from test_adapter_support import run

ADAPTER_LOG = "simplex_rpc.adapter"


def answer_code(envelope: dict[str, Any]) -> str | None:
    error = envelope.get("error")
    return error["code"] if isinstance(error, dict) else None


def test_a_handler_raising_cancelled_error_during_the_stop_is_still_answered() -> None:
    """Exactly once, while stopping: a handler that raises CancelledError of its own (it
    awaited a future someone else cancelled) during the grace period is a failure like any
    other, answered internal; only the responder's own cancellation of it is not."""

    async def main() -> None:
        shared: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        started = asyncio.Event()

        async def handler(request: ServiceRequest) -> str:
            started.set()
            return await shared

        async with scripted_serving(handler, grace=30.0) as (fake, _, task):
            await fake.event(request_event("r1"))
            await started.wait()
            task.cancel()
            await asyncio.sleep(0.2)  # the stop begins: grace for the handler in flight
            assert not task.done()
            shared.cancel()  # someone else's future: the handler raises CancelledError
            with pytest.raises(asyncio.CancelledError):
                await task
            (answer,) = fake.answers["r1"]
            assert answer_code(answer) == "internal"

    run(main)

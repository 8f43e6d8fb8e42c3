"""The I/O edge, issue 21 item 5: deadlines that hold, a bounded connection step, capped answers.

Rules pinned (issue 21, "Smaller problems"):

* "A handler that swallows ``CancelledError`` is answered only when it
  returns, past ``handler_timeout`` [...] Answer at the deadline, and drop its
  late result."
* "``mcp-proxy --timeout`` does not cover the connection step: with a core
  that never answers, each request waits 60 s (the ``/_start`` timeout) even
  with ``--timeout 2``."
* "A real core caps an answer near 11 KB, so the requester checks
  ``MAX_RESPONSE`` and answers what exceeds it as an error": a
  ``responseData`` of 5 MB, or a JSON-RPC error message of 200,000
  characters, is an error for the requester, the MCP SDK client and the proxy.
* "``serve``'s handler deadline, ``grace`` and the outbox bounds are
  documented together in one table."
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from _scripted_core import ScriptedCore, request_event, scripted_serving
from simplex_rpc import Request
from simplex_rpc.adapter import ChatCore, ChatCoreError, ServiceRequest

pytestmark = pytest.mark.edge

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
LINK = "simplex:/a#bot-address-0123456789ab?h=simulator.local"


# -- a handler that swallows its cancellation -------------------------------------------------


@pytest.mark.anyio
async def test_a_handler_that_swallows_cancellation_is_answered_at_its_deadline() -> None:
    """The answer (internal, the deadline's) comes while the handler still runs; its late
    result, when it finally returns, is dropped: one answer per request."""

    release = asyncio.Event()
    returned = asyncio.Event()

    async def stubborn(request: ServiceRequest) -> str:
        try:
            await asyncio.sleep(60)  # the behaviour under test: a handler past its deadline
        except asyncio.CancelledError:
            # Swallows the cancellation and goes on (for at most 8 s: a hung test
            # must still end).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), 8)
        returned.set()
        return "late"

    async with scripted_serving(stubborn, handler_timeout=1.0) as (fake, _core, _task):
        await fake.event(request_event("s1"))
        await fake.wait_answers(1, within=20)  # the handler has not returned
        assert not returned.is_set()
        (answer,) = fake.answers["s1"]
        assert answer["error"]["code"] == "internal"
        release.set()
        await returned.wait()
        await asyncio.sleep(0.3)  # the behaviour under test: the late result sends nothing
        assert len(fake.answers["s1"]) == 1


@pytest.mark.anyio
async def test_a2a_swallowing_handler_is_answered_conversation_required_at_the_deadline() -> None:
    """For a2a the deadline's answer is conversation_required, as for a handler that ends."""

    release = asyncio.Event()

    async def stubborn(request: ServiceRequest) -> str:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 8  # a hung test must still end
        while not release.is_set() and loop.time() < give_up:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.2)  # the behaviour under test: cancellation swallowed
        return "late"

    async with scripted_serving(stubborn, handler_timeout=1.0) as (fake, _core, _task):
        await fake.event(request_event("s2", {"jsonrpc": "2.0"}, protocol="a2a"))
        await fake.wait_answers(1, within=20)
        (answer,) = fake.answers["s2"]
        assert answer["error"]["code"] == "conversation_required"
        release.set()


# -- the requester's cap on an answer ---------------------------------------------------------


def service_response(payload: str) -> Any:
    def answer(corr_id: str, cmd: str) -> str:
        return (
            '{"corrId":"' + corr_id + '","resp":{"type":"serviceResponse","user":{"userId":1},'
            '"requestId":"q","responseData":' + payload + "}}"
        )

    return answer


HUGE_RESULT = json.dumps({"response": {"blob": "x" * 5_000_000}})
HUGE_ERROR = json.dumps(
    {"response": {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "e" * 200_000}}}
)


@pytest.mark.parametrize("payload", [HUGE_RESULT, HUGE_ERROR], ids=["5MB", "200k-message"])
@pytest.mark.anyio
async def test_the_requester_refuses_an_answer_past_max_response(
    scripted_core: ScriptedCore,
    payload: str,
) -> None:
    """service_request: an answer longer than MAX_RESPONSE is an error naming the limit,
    not a Response the caller passes on."""

    async with ChatCore.connect(scripted_core.url) as core:
        scripted_core.raw["/_service_request"] = service_response(payload)
        with pytest.raises(ChatCoreError) as caught:
            await core.service_request(1, LINK, Request(protocol="mcp", request={}))
        assert "MAX_RESPONSE" in str(caught.value) or "11103" in str(caught.value)
        assert len(str(caught.value)) < 1000


@pytest.mark.parametrize("payload", [HUGE_RESULT, HUGE_ERROR], ids=["5MB", "200k-message"])
@pytest.mark.anyio
async def test_the_mcp_sdk_client_answers_an_oversized_response_as_an_mcp_error(
    scripted_core: ScriptedCore,
    payload: str,
) -> None:
    """The MCP SDK client over SimplexTransport: the oversized answer is an MCPError with a
    short message, never the bot's 5 MB or 200,000 characters."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from simplex_rpc.mcp import SimplexTransport

    async with ChatCore.connect(scripted_core.url) as core:
        scripted_core.raw["/_service_request"] = service_response(payload)
        with pytest.raises((MCPError, ExceptionGroup)) as caught:
            async with Client(SimplexTransport(core, 1, LINK, timeout=5)) as client:
                await client.list_tools()
        error = leaf(caught.value)
        assert isinstance(error, MCPError), error
        assert "MAX_RESPONSE" in error.error.message
        assert len(error.error.message) < 2000


def leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what the SDK's task groups wrap."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


# -- mcp-proxy --timeout covers the connection step --------------------------------------------


@pytest.mark.anyio
@pytest.mark.time_limit(90)
async def test_mcp_proxy_timeout_covers_the_connection_step(tmp_path: Path) -> None:
    """A core that never answers /_start: with --timeout 2, a request is an MCP error in
    about 2 seconds (bounded here at 30), not after the 60-second /_start timeout."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.shared.exceptions import MCPError

    with anyio.fail_after(90):
        async with ScriptedCore() as fake:
            fake.raw["/_start"] = lambda corr_id, cmd: None  # never answered
            params = StdioServerParameters(
                command=PY,
                args=["-m", "simplex_rpc", "mcp-proxy", "--core", fake.url, "--timeout", "2", LINK],
            )
            with (tmp_path / "proxy.log").open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog)) as host:
                    with anyio.fail_after(30), pytest.raises(MCPError) as caught:
                        await host.list_tools()
            message = caught.value.error.message
            assert message.startswith("the SimpleX bot could not be reached"), message
            assert "/_start within 2 s" in message, message


# -- the one table ------------------------------------------------------------------------------


def test_serve_bounds_are_documented_together_in_one_table() -> None:
    """docs/adapter.md has one table naming the handler deadline, grace, the queue and the
    outbox bounds (and the hold before serve), each with its default."""
    text = (ROOT / "docs" / "adapter.md").read_text()
    tables = re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M)
    wanted = ("handler_timeout", "grace", "max_queue", "outbox", "event_hold", "event_buffer")
    found = [t for t in tables if all(w in t for w in wanted)]
    assert len(found) == 1, "one table names every bound of serve"
    table = found[0]
    assert "170" in table and "5" in table and "1000" in table.replace(",", "")

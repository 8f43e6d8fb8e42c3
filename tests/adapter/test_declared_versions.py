"""Declared versions are the served ones, in the bindings' form (issue 20, items 3 and 4).

The protocol text, "Profile declarations": "versions: required. The protocol
versions the bot serves, in the bot's order of preference." The MCP binding:
"versions: MCP revisions from 2026-07-28 on, for example 2026-07-28." The A2A
binding: "versions in the protocols declaration: A2A versions in the
Major.Minor form, for example 1.0."
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from mcp.server.mcpserver import MCPServer

from _waiting import until
from simplex_rpc import a2a, mcp
from simplex_rpc.a2a import A2aBridge, Caller
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.declarations import ProtocolDeclaration
from simplex_rpc.errors import DeclarationError
from simplex_rpc.mcp import McpBridge
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.conformance


class Hello(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(
            pb.Message(message_id="r", role=pb.ROLE_AGENT, parts=[pb.Part(text="hi")])
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def a2a_bridge(**options: Any) -> A2aBridge:
    card = pb.AgentCard(name="Hello", description="hi", version="1.0")
    handler = DefaultRequestHandler(
        agent_executor=Hello(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return A2aBridge(handler, **options)


def mcp_bridge() -> McpBridge:
    server = MCPServer("tools")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return McpBridge(server)


SEND = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


async def a2a_answer(bridge: A2aBridge, version: str) -> dict[str, Any]:
    request = a2a.make_request("SendMessage", SEND, id=1, version=version)
    return await bridge.handle(request, caller=Caller.contact(1))


@pytest.mark.parametrize("served", [("1.1",), ("1.0",), ("1.1", "1.0")])
@pytest.mark.anyio
async def test_a2a_bridge_declares_exactly_the_versions_it_serves(served: tuple[str, ...]) -> None:
    """ "versions: ... The protocol versions the bot serves": A2aBridge.supported (what
    serve_calls(declare=True) declares) is supported_versions, and each is served while
    a version outside it gets VersionNotSupportedError."""

    bridge = a2a_bridge(supported_versions=served)
    assert bridge.supported == served
    for version in served:
        answer = await a2a_answer(bridge, version)
        assert "result" in answer, f"{version} is declared but refused: {answer}"
    for version in {"1.0", "1.1", "2.0"} - set(served):
        answer = await a2a_answer(bridge, version)
        assert answer["error"]["code"] == a2a.VERSION_NOT_SUPPORTED


def test_mcp_bridge_declares_exactly_the_revisions_it_serves() -> None:
    """The same for McpBridge: every revision in ``supported`` is served, and the
    -32022 for another one lists exactly ``supported``."""
    bridge = mcp_bridge()
    assert bridge.supported
    for revision in bridge.supported:
        answer = bridge.handle_sync(mcp.make_request("tools/list", id=1, revision=revision))
        assert "result" in answer, f"{revision} is declared but refused: {answer}"
    refused = bridge.handle_sync(mcp.make_request("tools/list", id=2, revision="2099-12-31"))
    assert refused["error"]["code"] == mcp.UNSUPPORTED_PROTOCOL_VERSION
    assert refused["error"]["data"]["supported"] == list(bridge.supported)


@contextlib.asynccontextmanager
async def bot_core() -> AsyncIterator[ChatCore]:
    async with CoreSimulator() as sim, ChatCore.connect(sim.url_for("bot")) as bot:
        await bot.start(service_requests=True)
        sim.set_profile("bot", {"displayName": "bot", "fullName": ""})
        yield bot


@pytest.mark.anyio
async def test_serve_calls_declares_the_versions_the_a2a_bridge_serves() -> None:
    """The issue's case: with supported_versions=("1.1",), serve_calls(declare=True)
    declares a2a ["1.1"], not ["1.0"]."""

    async with bot_core() as bot:
        bridge = a2a_bridge(supported_versions=("1.1",))
        task = asyncio.create_task(bot.serve_calls(1, {"a2a": bridge}, declare=True))
        try:

            async def a2a_declared() -> dict[str, Any]:
                found = await bot.declared(1)
                return found if "a2a" in found else {}

            declared = await until(a2a_declared, "the a2a declaration", within=20)
            assert declared["a2a"].versions == ("1.1",)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.parametrize(
    ("name", "versions", "bad"),
    [
        ("mcp", ["2025-06-18"], "2025-06-18"),
        ("mcp", ["2026-07-28", "2025-11-25"], "2025-11-25"),
        ("mcp", ["v2026"], "v2026"),
        ("mcp", ["2026-02-30"], "2026-02-30"),
        ("mcp", ["2026-7-28"], "2026-7-28"),
        ("a2a", ["1.0.2"], "1.0.2"),
        ("a2a", ["v1"], "v1"),
        ("a2a", ["1"], "1"),
        ("a2a", ["01.0"], "01.0"),
    ],
)
@pytest.mark.anyio
async def test_declared_versions_are_in_the_bindings_form(
    name: str, versions: list[str], bad: str
) -> None:
    """ "MCP revisions from 2026-07-28 on" and "A2A versions in the Major.Minor form":
    declare() refuses anything else with a DeclarationError naming the entry, before
    the profile is written."""

    async with bot_core() as bot:
        entry = {"versions": versions, "transports": {"chat": True}}
        with pytest.raises(DeclarationError, match=rf"protocols\.{name}\.versions") as info:
            await bot.declare(1, {name: entry})
        assert repr(bad) in str(info.value)
        with pytest.raises(DeclarationError, match=name):
            await bot.declare(1, {name: ProtocolDeclaration(versions=tuple(versions))})
        assert await bot.declared(1) == {}


@pytest.mark.anyio
async def test_declared_versions_of_the_known_bindings_and_of_others() -> None:
    """Versions in the bindings' form are written; the versions of a protocol the
    library has no binding for are left alone."""

    async with bot_core() as bot:
        written = await bot.declare(
            1,
            {
                "mcp": {"versions": ["2026-07-28", "2027-01-15"], "transports": {"chat": True}},
                "a2a": {"versions": ["1.0", "1.12"], "transports": {"chat": True}},
                "acme-orders": {"versions": ["v1", "2025-06-18"], "transports": {"rpc": True}},
            },
        )
        assert written["acme-orders"].versions == ("v1", "2025-06-18")
        assert (await bot.declared(1))["mcp"].versions == ("2026-07-28", "2027-01-15")


@pytest.mark.anyio
async def test_serve_and_serve_calls_refuse_to_declare_versions_off_the_form() -> None:
    """The declarations that serve(declare=True) and serve_calls(declare=True) write
    are checked the same way, before anything runs."""

    async def echo(call: Any, send: Any) -> str:
        return "{}"

    def handler(request: ServiceRequest) -> Any:
        return {}

    async with bot_core() as bot:
        await bot.service_address(1)
        with pytest.raises(DeclarationError, match="mcp"):
            await bot.serve_calls(1, {"mcp": echo}, declare=True, versions={"mcp": ["2025-06-18"]})
        with pytest.raises(DeclarationError, match="a2a"):
            await bot.serve(1, handler, protocols=["a2a"], declare=True, versions={"a2a": ["v1"]})
        assert await bot.declared(1) == {}

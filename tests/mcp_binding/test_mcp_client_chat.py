"""The MCP SDK's own client over SimplexTransport in a conversation, and via="auto" (issue 11).

Protocol text, "MCP binding": in a conversation the request follows ``/_call
mcp``; notifications for the request (progress) are replies that quote the
command before the answer, and the reply with the JSON-RPC response ends it.
"Profile declarations": an address declares the transports of each protocol;
``via="auto"`` reads them without connecting (``/_connect plan``) and uses
Service RPC when ``transports.rpc`` is declared.

The bot serves the SDK server of examples/mcp_two_tools.py through
``McpBridge`` with ``ChatCore.serve_calls`` (and ``serve`` for Service RPC),
on the simulator with real contacts and groups.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client, ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, TextContent

from _mcp import two_tools
from simplex_rpc import Response
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.declarations import ProtocolDeclaration
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.mcp import McpBridge, SimplexTransport
from simplex_rpc.testing import CoreSimulator

REVISION = "2026-07-28"


@dataclass
class Scene:
    sim: CoreSimulator
    alice: ChatCore
    bot: ChatCore
    contact: str  # alice's ChatRef of the bot
    group: str  # alice's ChatRef of the group "team" (alice, bot)
    link: str  # the bot's address
    rpc_requests: list[str]


@contextlib.asynccontextmanager
async def scene(*, declare: ProtocolDeclaration | None = None) -> AsyncIterator[Scene]:
    """alice and a bot that answers /_call mcp and Service RPC (catalog: conversation only)."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("alice")) as alice,
        ChatCore.connect(sim.url_for("bot")) as bot,
        McpBridge(two_tools.build_server(), conversation_tools={"catalog"}) as bridge,
    ):
        await bot.start(service_requests=True)
        await alice.start(service_requests=False)
        link = (await bot.service_address(1)).link
        if declare is not None:
            await bot.declare(1, {"mcp": declare})
        at_alice, _ = sim.connect("alice", "bot")
        ids = sim.create_group("team", "alice", ["bot"])
        rpc_requests: list[str] = []

        async def rpc(request: ServiceRequest) -> Response:
            rpc_requests.append(request.request.request["method"])
            return await bridge.rpc_handler(request)

        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [
            asyncio.create_task(bot.serve_calls(1, {"mcp": bridge}, ready=ready[0])),
            asyncio.create_task(bot.serve(1, rpc, protocols=["mcp"], ready=ready[1])),
        ]
        for event in ready:
            await event.wait()  # both loops take their events
        try:
            yield Scene(
                sim=sim,
                alice=alice,
                bot=bot,
                contact=f"@{at_alice}",
                group=f"#{ids[('alice', 1)]}",
                link=link,
                rpc_requests=rpc_requests,
            )
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def text_of(result: Any) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


# -- via="chat" -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_client_lists_and_calls_tools_over_chat() -> None:
    """/_call mcp in the direct chat: the SDK discovers, lists and calls, and a tool marked
    for a conversation works there."""

    async with scene() as s:
        transport = SimplexTransport(s.alice, 1, s.contact, via="chat", timeout=20)
        async with Client(transport) as client:
            assert client.protocol_version == REVISION
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["availability", "catalog"]
            result = await client.call_tool("availability", {"item": "anvil"})
            assert text_of(result) == "12 anvils are in stock."
            result = await client.call_tool("catalog", {"lines": 2})
            assert text_of(result) == "1. anvil\n2. hammer"
        assert s.rpc_requests == []  # nothing went over Service RPC


@pytest.mark.anyio
async def test_a_progress_notification_arrives_over_chat() -> None:
    """The bot's notifications/progress is a reply before the answer; the SDK gets it as a
    notification and calls the call's progress_callback, then the response ends the call."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with scene() as s:
        transport = SimplexTransport(s.alice, 1, s.contact, via="chat", timeout=20)
        async with Client(transport) as client:
            result = await client.call_tool(
                "catalog", {"lines": 3}, progress_callback=on_progress
            )
            assert text_of(result) == "1. anvil\n2. hammer\n3. tongs"
    assert progress == [(0.0, 3.0, "listing")]


@pytest.mark.anyio
async def test_in_a_group_the_call_mentions_the_bot() -> None:
    async with scene() as s:
        transport = SimplexTransport(s.alice, 1, s.group, via="chat", member="bot", timeout=20)
        async with Client(transport) as client:
            result = await client.call_tool("availability", {"item": "tongs"})
            assert text_of(result) == "7 tongss are in stock."


@pytest.mark.anyio
async def test_a_call_refused_before_sending_is_an_mcp_error() -> None:
    """A command that does not fit one message is not sent: the call's error says so."""

    async with scene() as s:
        transport = SimplexTransport(s.alice, 1, s.contact, via="chat", timeout=20)
        async with Client(transport) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("availability", {"item": "x" * 20_000})
            assert caught.value.error.code == INVALID_REQUEST
            assert caught.value.error.message.startswith("not sent: ")
            assert s.sim.stats.messages > 0  # the earlier requests were sent


# -- via="auto" -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_auto_uses_rpc_when_the_address_declares_it() -> None:
    declared = ProtocolDeclaration(versions=(REVISION,), chat=True, rpc=True)

    async with scene(declare=declared) as s:
        async with Client(SimplexTransport(s.alice, 1, s.link, via="auto")) as client:
            await client.call_tool("availability", {"item": "anvil"})
        assert "tools/call" in s.rpc_requests


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        (ProtocolDeclaration(versions=(REVISION,), chat=True), "declares mcp over chat only"),
        (None, "does not declare mcp"),
    ],
)
@pytest.mark.anyio
async def test_auto_without_rpc_declared_is_a_clear_error(
    declared: ProtocolDeclaration | None, says: str
) -> None:
    async with scene(declare=declared) as s:
        transport = SimplexTransport(s.alice, 1, s.link, via="auto")
        with pytest.raises(SimplexRpcError) as caught:
            async with transport:
                pass
        assert says in str(caught.value)
        assert "via='chat'" in str(caught.value)
        assert s.rpc_requests == []


@pytest.mark.anyio
async def test_chat_arguments_are_checked() -> None:
    async with scene() as s:
        with pytest.raises(SimplexRpcError, match="expected a ChatRef"):
            SimplexTransport(s.alice, 1, s.link, via="chat")
        with pytest.raises(SimplexRpcError, match="is a ChatRef: use via='chat'"):
            SimplexTransport(s.alice, 1, s.contact)
        with pytest.raises(SimplexRpcError, match="a direct chat has no members"):
            SimplexTransport(s.alice, 1, s.contact, via="chat", member="bot")
        with pytest.raises(SimplexRpcError, match="only for via='chat'"):
            SimplexTransport(s.alice, 1, s.link, member="bot")


@pytest.mark.anyio
async def test_an_unknown_chat_is_the_requests_error_and_the_transport_stays_up() -> None:
    """The core refuses /_send to a chat it does not have: the SDK gets CONNECTION_CLOSED
    for the probe and for the fallback handshake, never a dead transport."""

    async with scene() as s:
        transport = SimplexTransport(s.alice, 1, "@999", via="chat", timeout=5)
        async with transport as (read, write), ClientSession(read, write) as session:
            for _ in range(2):
                with pytest.raises(MCPError) as caught:
                    await session.discover()
                assert caught.value.error.code == CONNECTION_CLOSED
                assert "could not deliver" in caught.value.error.message

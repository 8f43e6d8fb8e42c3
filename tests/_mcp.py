"""The MCP binding tests' shared pieces (no tests here)."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

from _support import Pair, pair
from simplex_rpc import Response
from simplex_rpc.adapter import ServiceRequest
from simplex_rpc.mcp import McpBridge

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mcp_two_tools.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcp_two_tools", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


two_tools = load_example()


class Street(BaseModel):
    street: str


def ask_street() -> Elicit[Street]:
    return Elicit("Which street in Lisbon?", Street)


def build_server() -> MCPServer:
    """The example's two tools, plus a resource, a prompt and a tool that asks the user."""
    server = two_tools.build_server()

    @server.resource("stock://anvil", description="Anvils in stock")
    def anvil_stock() -> str:
        return "12"

    @server.prompt(description="Ask for a quote")
    def quote(item: str) -> str:
        return f"Quote me a price for one {item}."

    @server.tool(description="Deliver an item; asks for the street", structured_output=False)
    def deliver(item: str, street: Annotated[Street, Resolve(ask_street)]) -> str:
        return f"One {item} to {street.street}."

    return server


Handler = Callable[[ServiceRequest], Awaitable[Response]]


@contextlib.asynccontextmanager
async def bot(
    *, conversation_tools: tuple[str, ...] = (), wrap: Callable[[Handler], Handler] | None = None
) -> AsyncIterator[Pair]:
    """An SDK server behind McpBridge, served by bob; alice is the requester."""
    async with McpBridge(build_server(), conversation_tools=conversation_tools) as bridge:
        handler: Handler = bridge.rpc_handler
        if wrap is not None:
            handler = wrap(handler)
        async with pair(handler, protocols=("mcp",)) as p:
            yield p

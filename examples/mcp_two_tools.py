"""A two-tool MCP server, served over SimpleX on both transports by McpBridge.

The server is an ordinary MCP SDK server (``MCPServer``, FastMCP style); the
bridge puts it behind SimpleX without changing it:

* in a conversation, each ``/_call mcp <request>`` gets one reply
  (``bridge.chat_handler``);
* over Service RPC, each request envelope gets one response envelope
  (``bridge.rpc_handler``, the handler of the adapter's responder).

Run it (``python examples/mcp_two_tools.py``) to see both transports answer
``tools/list`` and ``tools/call`` in memory, with no chat core.
"""

from __future__ import annotations

import asyncio

from mcp.server import MCPServer
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context

from simplex_rpc import Request, chat
from simplex_rpc import mcp as mcp_binding
from simplex_rpc.mcp import McpBridge

STOCK = {"anvil": 12, "hammer": 40, "tongs": 7}


def build_server() -> MCPServer:
    """The two tools: ``availability`` and ``catalog``."""
    server = MCPServer(
        "acme",
        cache_hints={"tools/list": CacheHint(ttl_ms=300_000, scope="public")},
    )

    @server.tool(description="Items in stock", structured_output=False)
    def availability(item: str) -> str:
        return f"{STOCK.get(item, 0)} {item}s are in stock."

    @server.tool(description="The catalog, one line per item", structured_output=False)
    async def catalog(ctx: Context, lines: int = 3) -> str:
        # With a progress token in the request, the caller gets a progress
        # notification: in a conversation, a reply before the answer.
        await ctx.report_progress(0, lines, "listing")
        names = sorted(STOCK)
        return "\n".join(f"{i + 1}. {names[i % len(names)]}" for i in range(lines))

    return server


async def main() -> None:
    async with McpBridge(build_server(), conversation_tools={"catalog"}) as bridge:
        # Chat transport: the command's text in, the reply's text out.
        command = chat.format_call("mcp", mcp_binding.make_request("tools/list", id=1))
        call = chat.parse_call(command)
        print("chat  >", command[:72], "...")
        print("chat  <", (await bridge.chat_handler(call.request))[:72], "...")

        # Service RPC: a request envelope in, a response envelope out.
        request = Request(
            protocol="mcp",
            request=mcp_binding.make_request(
                "tools/call", {"name": "availability", "arguments": {"item": "anvil"}}, id=2
            ),
        )
        print("rpc   >", request.to_json().decode()[:72], "...")
        print("rpc   <", (await bridge.rpc_handler(request)).to_json().decode())

        # catalog is marked as needing a conversation: over Service RPC it is refused.
        request = Request(
            protocol="mcp",
            request=mcp_binding.make_request("tools/call", {"name": "catalog"}, id=3),
        )
        print("rpc   <", (await bridge.rpc_handler(request)).to_json().decode())


if __name__ == "__main__":
    asyncio.run(main())

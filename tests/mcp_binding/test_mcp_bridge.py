"""McpBridge against real MCP SDK servers, over both transports.

The main server is examples/mcp_two_tools.py (``MCPServer`` with two tools).
Each case runs over the chat transport (the request text in, the reply text
out, ``chat_handler``) and over Service RPC (a request envelope in, a
response envelope out, ``rpc_handler``). A lowlevel ``Server`` reproduces the
protocol text's examples to the value; the SDK adds its ``serverInfo`` stamp
in the result's ``_meta`` (MCP 2026-07-28), which the examples leave out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.caching import CacheHint

from _mcp import two_tools
from simplex_rpc import MAX_RESPONSE, PublicKey, Request, Response, SigningKey, chat, mcp
from simplex_rpc.mcp import McpBridge
from simplex_rpc.vectors._examples import (
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_LIST_COMMAND_TEXT,
    mcp_tools_call_response,
    mcp_tools_list_reply,
)

T = TypeVar("T")
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True)
class ServiceRequest:
    """The shape of the adapter's ServiceRequest that a handler sees."""

    request_id: int
    signer: PublicKey | None
    request: Request


async def over_chat(bridge: McpBridge, message: Any) -> dict[str, Any]:
    """The request as the text after ``/_call mcp``; the reply text parsed."""
    command = chat.format_call("mcp", message)
    text = await bridge.chat_handler(command[len("/_call mcp ") :])
    assert chat.fits_message(text)
    reply = json.loads(text)
    assert isinstance(reply, dict)
    return reply


async def over_rpc(bridge: McpBridge, message: Any) -> Response:
    envelope = Request.parse(Request(protocol="mcp", request=message).to_json())
    response = await bridge.rpc_handler(ServiceRequest(1, None, envelope))
    return Response.parse(response.to_json())


async def over_both(bridge: McpBridge, message: Any) -> dict[str, Any]:
    """The answer over both transports, which must be the same JSON-RPC response."""
    reply = await over_chat(bridge, message)
    envelope = await over_rpc(bridge, message)
    assert envelope.ok, envelope.error
    assert envelope.response == reply
    return reply


@pytest.fixture
def bridge() -> McpBridge:
    return McpBridge(two_tools.build_server())


# -- the four kinds of request, over both transports -------------------------------


@pytest.mark.anyio
async def test_server_discover(bridge: McpBridge) -> None:
    """A caller learns the bot's revisions and capabilities with server/discover."""
    reply = await over_both(bridge, mcp.make_request("server/discover", id="d"))
    assert reply["id"] == "d"
    result = reply["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert result["resultType"] == "complete"
    assert bridge.supported == ("2026-07-28",)


@pytest.mark.anyio
async def test_tools_list(bridge: McpBridge) -> None:
    """A server that declares tools answers tools/list: the example's two tools."""
    result = (await over_both(bridge, mcp.make_request("tools/list", id=1)))["result"]
    assert [tool["name"] for tool in result["tools"]] == ["availability", "catalog"]
    availability = result["tools"][0]
    assert availability["description"] == "Items in stock"
    assert availability["inputSchema"]["required"] == ["item"]
    assert result["ttlMs"] == 300_000
    assert result["cacheScope"] == "public"


@pytest.mark.anyio
async def test_tools_call(bridge: McpBridge) -> None:
    message = mcp.make_request(
        "tools/call", {"name": "availability", "arguments": {"item": "anvil"}}, id=2
    )
    result = (await over_both(bridge, message))["result"]
    assert result["content"] == [{"type": "text", "text": "12 anvils are in stock."}]
    assert result["isError"] is False
    assert result["resultType"] == "complete"


@pytest.mark.anyio
async def test_unknown_tool(bridge: McpBridge) -> None:
    """The SDK's answer for an unknown tool passes through: a tool error result."""
    message = mcp.make_request("tools/call", {"name": "anvil-forge", "arguments": {}}, id=3)
    result = (await over_both(bridge, message))["result"]
    assert result["isError"] is True
    assert "anvil-forge" in result["content"][0]["text"]


@pytest.mark.anyio
async def test_unknown_method(bridge: McpBridge) -> None:
    reply = await over_both(bridge, mcp.make_request("anvils/forge", id=4))
    assert reply["error"]["code"] == -32601


@pytest.mark.anyio
async def test_invalid_params_are_the_sdks_answer(bridge: McpBridge) -> None:
    message = mcp.make_request("tools/list", id=5)
    del message["params"]["_meta"][mcp.CLIENT_CAPABILITIES_KEY]
    reply = await over_both(bridge, message)
    assert reply["error"]["code"] == -32602


# -- revisions -------------------------------------------------------------------


@pytest.mark.anyio
async def test_old_revision_gets_the_sdks_unsupported_protocol_version(bridge: McpBridge) -> None:
    """A request of a revision the bot does not serve: -32022 listing the served ones."""
    message = mcp.make_request("tools/list", id=6)
    message["params"]["_meta"][mcp.PROTOCOL_VERSION_KEY] = "2025-11-25"
    reply = await over_both(bridge, message)
    assert reply["id"] == 6
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


@pytest.mark.anyio
async def test_initialize_handshake_gets_unsupported_protocol_version(bridge: McpBridge) -> None:
    """Earlier revisions begin with initialize; the binding carries none of them."""
    message = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    reply = await over_both(bridge, message)
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-06-18"}


@pytest.mark.anyio
async def test_request_without_the_envelope_is_the_sdks_invalid_params(bridge: McpBridge) -> None:
    """No _meta envelope: the SDK's -32602, as on its own modern connection."""
    reply = await over_both(bridge, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert reply["error"]["code"] == -32602
    assert "envelope keys" in reply["error"]["message"]


# -- size rules ------------------------------------------------------------------


def catalog_call(lines: int, rid: int = 10) -> dict[str, Any]:
    return mcp.make_request(
        "tools/call", {"name": "catalog", "arguments": {"lines": lines}}, id=rid
    )


@pytest.mark.anyio
async def test_oversized_result_in_a_conversation_is_internal_error(bridge: McpBridge) -> None:
    """A response above the message limit becomes -32603 with the request's id."""
    reply = await over_chat(bridge, catalog_call(3000))
    assert reply["id"] == 10
    assert reply["error"]["code"] == -32603
    assert reply["error"]["data"]["limit"] == chat.MAX_MESSAGE_JSON


@pytest.mark.anyio
async def test_oversized_result_over_service_rpc_is_too_large(bridge: McpBridge) -> None:
    """Over Service RPC, the envelope error too_large instead."""
    envelope = await over_rpc(bridge, catalog_call(3000))
    assert envelope.error is not None
    assert envelope.error.code == "too_large"


@pytest.mark.anyio
async def test_between_the_limits_a_conversation_carries_what_rpc_refuses(
    bridge: McpBridge,
) -> None:
    """A response of 10,000 to 15,000 bytes fits a message but not the RPC SHOULD."""
    message = catalog_call(900)
    reply = await over_chat(bridge, message)
    assert "result" in reply
    size = len(Response.success(reply).to_json())
    assert 10_000 < size < chat.MAX_MESSAGE_JSON
    assert (await over_rpc(bridge, message)).error is not None
    relaxed = McpBridge(two_tools.build_server(), rpc_limit=MAX_RESPONSE)
    if size <= MAX_RESPONSE:
        assert (await over_rpc(relaxed, message)).response == reply
    else:
        assert (await over_rpc(relaxed, message)).error is not None


# -- conversation_required and the envelope ------------------------------------------


@pytest.mark.anyio
async def test_marked_tool_is_conversation_required_over_rpc_only() -> None:
    bridge = McpBridge(two_tools.build_server(), conversation_tools={"catalog"})
    envelope = await over_rpc(bridge, catalog_call(2))
    assert envelope.error is not None
    assert envelope.error.code == "conversation_required"
    assert "result" in await over_chat(bridge, catalog_call(2))
    other = mcp.make_request(
        "tools/call", {"name": "availability", "arguments": {"item": "x"}}, id=1
    )
    assert (await over_rpc(bridge, other)).ok


@pytest.mark.anyio
async def test_envelope_with_version_is_bad_request(bridge: McpBridge) -> None:
    """The envelope's version is omitted for MCP: the revision is in _meta."""
    envelope = Request(protocol="mcp", request=mcp.make_request("tools/list", id=1), version="x")
    response = await bridge.rpc_handler(envelope)
    assert response.error is not None and response.error.code == "bad_request"


@pytest.mark.anyio
async def test_other_protocol_is_unsupported(bridge: McpBridge) -> None:
    envelope = Request(protocol="a2a", request={})
    response = await bridge.rpc_handler(envelope)
    assert response.error is not None and response.error.code == "unsupported_protocol"


@pytest.mark.anyio
async def test_rpc_handler_takes_a_request_or_a_service_request(bridge: McpBridge) -> None:
    envelope = Request(protocol="mcp", request=mcp.make_request("tools/list", id=1))
    direct = await bridge.rpc_handler(envelope)
    wrapped = await bridge.rpc_handler(ServiceRequest(1, None, envelope))
    assert direct.ok and wrapped.ok
    with pytest.raises(TypeError, match="Request"):
        await bridge.rpc_handler(object())


@pytest.mark.anyio
async def test_not_a_request_over_rpc_is_a_jsonrpc_error(bridge: McpBridge) -> None:
    """The envelope is valid, so the protocol answers: -32600 as the response."""
    envelope = await over_rpc(bridge, [1, 2])
    assert envelope.ok
    assert envelope.response["error"]["code"] == -32600


# -- chat specifics ---------------------------------------------------------------


@pytest.mark.anyio
async def test_chat_text_that_is_not_json_is_parse_error(bridge: McpBridge) -> None:
    for text in ("{", '{"a": 1, "a": 2}', "NaN"):
        reply = json.loads(await bridge.chat_handler(text))
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700


@pytest.mark.anyio
async def test_chat_notification_is_invalid_request(bridge: McpBridge) -> None:
    """The binding carries requests: a message without id gets -32600."""
    reply = json.loads(await bridge.chat_handler('{"jsonrpc": "2.0", "method": "tools/list"}'))
    assert reply == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": reply["error"]["message"],
        },
    }
    assert "notification" in reply["error"]["message"]


@pytest.mark.anyio
async def test_progress_notifications_are_replies_before_the_answer(bridge: McpBridge) -> None:
    """In a conversation the bot MAY send notifications for the request before the
    response, each as a reply: notifications/progress with a progress token."""
    message = mcp.make_request(
        "tools/call",
        {"name": "catalog", "arguments": {"lines": 2}, "_meta": {"progressToken": "p-1"}},
        id=11,
    )
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    last = await bridge.chat_handler(message, send=send)
    assert [json.loads(text) for text in sent] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p-1", "progress": 0, "total": 2, "message": "listing"},
        }
    ]
    answer = json.loads(last)
    assert answer["id"] == 11
    assert chat.ends_answer("mcp", message, answer)
    assert not any(chat.ends_answer("mcp", message, json.loads(text)) for text in sent)
    # Without a progress token there is nothing to report.
    sent.clear()
    await bridge.chat_handler(catalog_call(2), send=send)
    assert sent == []


@pytest.mark.anyio
async def test_subscriptions_listen_is_not_served(bridge: McpBridge) -> None:
    reply = await over_both(bridge, mcp.make_request("subscriptions/listen", {}, id=12))
    assert reply["error"]["code"] == -32601


def test_sync_forms(bridge: McpBridge) -> None:
    listing = mcp.make_request("tools/list", id=1)
    assert bridge.handle_sync(listing)["result"]["tools"][0]["name"] == "availability"
    assert json.loads(bridge.chat_handler_sync(listing)) == bridge.handle_sync(listing)


# -- a lowlevel Server: the protocol text's examples, lifespan, handler errors ----------


def example_server(entered: list[str] | None = None) -> Server[Any]:
    """The server of the protocol text's examples, with the lowlevel API."""

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        if entered is not None:
            entered.append("in")
        yield {}

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="availability",
                    description="Items in stock",
                    input_schema={
                        "type": "object",
                        "properties": {"item": {"type": "string"}},
                        "required": ["item"],
                    },
                )
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "explode":
            raise RuntimeError("secret detail")
        item = (params.arguments or {}).get("item", "")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"12 {item}s are in stock.")],
            is_error=False,
        )

    return Server(
        "acme",
        lifespan=lifespan,
        cache_hints={"tools/list": CacheHint(ttl_ms=300_000, scope="public")},
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def without_server_info(response: dict[str, Any]) -> dict[str, Any]:
    result = dict(response["result"])
    meta = dict(result.pop("_meta"))
    assert meta.pop(SERVER_INFO)["name"] == "acme"
    assert meta == {}
    return {**response, "result": result}


@pytest.mark.anyio
async def test_protocol_text_example_list_over_chat() -> None:
    """Example 1, end to end: the command's reply is the text's reply."""
    bridge = McpBridge(example_server())
    call = chat.parse_call(MCP_TOOLS_LIST_COMMAND_TEXT)
    reply = json.loads(await bridge.chat_handler(call.request))
    assert without_server_info(reply) == mcp_tools_list_reply()


@pytest.mark.anyio
async def test_protocol_text_example_call_over_rpc() -> None:
    """Example 2, end to end: the envelope's response is the text's response."""
    bridge = McpBridge(example_server())
    envelope = Request.parse(MCP_TOOLS_CALL_REQUEST_TEXT)
    response = (await bridge.rpc_handler(envelope)).to_dict()
    expected = mcp_tools_call_response()
    assert {"response": without_server_info(response["response"])} == expected


@pytest.mark.anyio
async def test_handler_exception_is_internal_error_without_its_text() -> None:
    bridge = McpBridge(example_server())
    message = mcp.make_request("tools/call", {"name": "explode", "arguments": {}}, id=13)
    reply = await over_chat(bridge, message)
    assert reply["error"]["code"] == -32603
    assert "secret" not in json.dumps(reply)


@pytest.mark.anyio
async def test_lifespan_is_entered_once_inside_async_with() -> None:
    entered: list[str] = []
    bridge = McpBridge(example_server(entered))
    listing = mcp.make_request("tools/list", id=1)

    async def twice_inside() -> None:
        async with bridge:
            await bridge.handle(listing)
            await bridge.handle(listing)
            with pytest.raises(RuntimeError, match="already"):
                await bridge.__aenter__()

    await twice_inside()
    assert entered == ["in"]
    await bridge.handle(listing)
    await bridge.handle(listing)
    assert entered == ["in", "in", "in"]


def test_bridge_refuses_what_is_not_a_server() -> None:
    with pytest.raises(TypeError, match="Server"):
        McpBridge(object())  # type: ignore[arg-type]
    with pytest.raises(mcp.BindingError, match="conversation_tools"):
        McpBridge(example_server(), conversation_tools="availability")
    with pytest.raises(mcp.BindingError, match="limit"):
        McpBridge(example_server(), rpc_limit=MAX_RESPONSE + 1)


@pytest.mark.anyio
async def test_notification_sink_failure_does_not_fail_the_request(bridge: McpBridge) -> None:
    async def broken(note: dict[str, Any]) -> None:
        raise OSError("chat is gone")

    message = mcp.make_request(
        "tools/call",
        {"name": "catalog", "arguments": {"lines": 1}, "_meta": {"progressToken": 1}},
        id=14,
    )
    handler: Callable[..., Awaitable[dict[str, Any]]] = bridge.handle
    assert "result" in await handler(message, on_notification=broken)


# -- through the adapter's responder and the core simulator --------------------------


@pytest.mark.anyio
async def test_bridge_serves_through_the_adapter_and_the_simulator() -> None:
    """bridge.rpc_handler is the responder's handler: signed and unsigned requests
    over the simulated core, and too_large for an oversized result."""
    from _support import pair

    key = SigningKey.generate()
    bridge = McpBridge(two_tools.build_server(), conversation_tools={"catalog"})
    call = mcp.make_request(
        "tools/call", {"name": "availability", "arguments": {"item": "anvil"}}, id=1
    )

    async with bridge, pair(bridge.rpc_handler, protocols=("mcp",)) as p:
        signed = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=call), timeout=10, sign_key=key
        )
        assert signed.ok
        assert signed.response["result"]["content"][0]["text"] == "12 anvils are in stock."
        marked = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=catalog_call(2)), timeout=10
        )
        assert marked.error is not None and marked.error.code == "conversation_required"
    unmarked = McpBridge(two_tools.build_server())
    async with pair(unmarked.rpc_handler, protocols=("mcp",)) as p:
        big = await p.alice.service_request(
            1, p.link, Request(protocol="mcp", request=catalog_call(3000)), timeout=10
        )
        assert big.error is not None and big.error.code == "too_large"


# -- the documentation and the example run as written ----------------------------------


def test_bindings_doc_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/bindings.md: every Python example runs and prints what its comments say."""
    import re

    doc = Path(__file__).resolve().parents[2] / "docs" / "bindings.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    runnable = [block for block in blocks if "import" in block]
    assert len(runnable) >= 3
    for block in runnable:
        exec(compile(block, str(doc), "exec"), {"__name__": "bindings_doc"})
        printed = capsys.readouterr().out
        for expected in re.findall(r"print\(.*\)[ \t]+# (.+)", block):
            assert expected.strip() in printed


@pytest.mark.anyio
async def test_example_main_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/mcp_two_tools.py: both transports answer, and the marked tool is refused."""
    await two_tools.main()
    printed = capsys.readouterr().out
    assert "12 anvils are in stock." in printed
    assert "conversation_required" in printed

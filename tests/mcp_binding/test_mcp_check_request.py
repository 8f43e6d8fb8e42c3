"""mcp.check_request answers as the MCP SDK does (issue 20, item 6).

The protocol text, "MCP binding": "The request is one JSON-RPC request of MCP
revision 2026-07-28 or later, with its _meta envelope", and "A bot answers a
request of a revision it does not serve with MCP's
UnsupportedProtocolVersionError (code -32022), which lists the revisions it
serves." The envelope's shape is MCP's own rule: the SDK's modern request
ladder answers a missing ``io.modelcontextprotocol/clientCapabilities`` or a
protocol version that is not a string with -32602 (Invalid params), and only a
string revision it does not serve with -32022.

One table runs through :func:`simplex_rpc.mcp.check_request` and through the
installed SDK's own server loop (``serve_dual_era_loop`` on a connection opened
by a 2026-07-28 request, as the SDK serves a modern client): every refusal of
ours is the SDK's error, code, message and data, and what we pass the SDK
passes too.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from simplex_rpc import mcp

pytestmark = pytest.mark.conformance

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META = {VERSION: "2026-07-28", CAPABILITIES: {}}


def ping(params: Any = None, *, method: str = "ping", omit_params: bool = False) -> dict[str, Any]:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
    if not omit_params:
        request["params"] = params
    return request


TABLE: dict[str, dict[str, Any]] = {
    "a valid envelope": ping({"_meta": META}),
    "clientCapabilities missing": ping({"_meta": {VERSION: "2026-07-28"}}),
    "protocolVersion missing": ping({"_meta": {CAPABILITIES: {}}}),
    "both missing": ping({"_meta": {}}),
    "no _meta": ping({}),
    "no params": ping(omit_params=True),
    "_meta not an object": ping({"_meta": 5}),
    "numeric protocolVersion": ping({"_meta": {**META, VERSION: 20260728}}),
    "null protocolVersion": ping({"_meta": {**META, VERSION: None}}),
    "an earlier revision": ping({"_meta": {**META, VERSION: "2025-06-18"}}),
    "a later revision not served": ping({"_meta": {**META, VERSION: "2099-01-01"}}),
    "not a date": ping({"_meta": {**META, VERSION: "latest"}}),
    "clientCapabilities null": ping({"_meta": {**META, CAPABILITIES: None}}),
    "initialize of an earlier revision": ping(
        {"protocolVersion": "2025-06-18", "capabilities": {}}, method="initialize"
    ),
    "initialize without params": ping(method="initialize", omit_params=True),
    "initialize with an envelope": ping(
        {"_meta": META, "protocolVersion": "2026-07-28"}, method="initialize"
    ),
}

_MESSAGE: TypeAdapter[Any] = TypeAdapter(JSONRPCMessage)


async def sdk_answers(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SDK server loop's answer to each request, on one modern connection."""
    server: Server[Any] = Server("table")
    to_server, server_reads = anyio.create_memory_object_stream[Any](len(requests) + 1)
    server_writes, from_server = anyio.create_memory_object_stream[Any](len(requests) + 1)
    answers: dict[Any, dict[str, Any]] = {}
    async with server.lifespan(server) as state, anyio.create_task_group() as group:

        async def serve() -> None:
            await serve_dual_era_loop(server, server_reads, server_writes, lifespan_state=state)

        group.start_soon(serve)
        opening = {"jsonrpc": "2.0", "id": "opening", "method": "ping", "params": {"_meta": META}}
        for i, request in enumerate([opening, *requests]):
            message = dict(request, id=request["id"] if i == 0 else i)
            await to_server.send(SessionMessage(message=_MESSAGE.validate_python(message)))
        with anyio.fail_after(30):
            while len(answers) < len(requests) + 1:
                out = (await from_server.receive()).message
                answers[out.id] = out.model_dump(mode="json", by_alias=True, exclude_none=True)
        group.cancel_scope.cancel()
    return [answers[i] for i in range(1, len(requests) + 1)]


@pytest.mark.anyio
async def test_check_request_matches_the_sdk_on_the_same_table() -> None:
    """Each row of the table through both: check_request refuses exactly what the SDK's
    ladder refuses, with the SDK's error object; what it passes, the SDK serves (the
    bare server answers ping with its own -32601, not with an envelope error)."""
    rows = list(TABLE.items())
    sdk = await sdk_answers([request for _, request in rows])
    for (what, request), theirs in zip(rows, sdk, strict=True):
        ours = mcp.check_request(request, supported=MODERN_PROTOCOL_VERSIONS)
        if ours is None:
            assert theirs.get("error", {}).get("code") not in (-32602, -32022, -32600), (
                f"{what}: we pass what the SDK refuses: {theirs}"
            )
        else:
            assert ours["error"] == theirs["error"], f"{what}: ours {ours}, the SDK's {theirs}"


@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("clientCapabilities missing", -32602),
        ("numeric protocolVersion", -32602),
        ("an earlier revision", mcp.UNSUPPORTED_PROTOCOL_VERSION),
    ],
)
def test_the_issue_cases(what: str, code: int) -> None:
    """The two cases of the issue, and a revision that is not served."""
    answer = mcp.check_request(TABLE[what], supported=MODERN_PROTOCOL_VERSIONS)
    assert answer is not None and answer["error"]["code"] == code


def test_mcp_bridge_answers_the_table_as_the_sdk() -> None:
    """McpBridge gives the same envelope errors as the SDK's loop, row by row."""
    from mcp.server.mcpserver import MCPServer

    from simplex_rpc.mcp import McpBridge

    bridge = McpBridge(MCPServer("table"))
    rows = list(TABLE.items())
    # a loop of its own: handle_sync, the code under test, runs anyio.run in this thread
    sdk = anyio.run(sdk_answers, [request for _, request in rows])
    for (what, request), theirs in zip(rows, sdk, strict=True):
        code = theirs.get("error", {}).get("code")
        if code in (-32602, -32022):
            answer = bridge.handle_sync(request)
            assert answer.get("error") == theirs["error"], f"{what}: {answer} != {theirs}"

"""The MCP SDK's own client over SimplexTransport, against the simulator (issue 11).

Protocol text, "MCP binding": over Service RPC the request is the envelope's
``request`` and the answer the envelope's ``response``; a tool marked as
needing a conversation is answered ``conversation_required``; the requester
repeats an error with ``retryAfter`` after that wait. "Service RPC
transport": a signed request names its key in ``requestKey`` and the
responder sees the verified ``signerKey``.

Each test runs ``mcp.Client(SimplexTransport(...))`` as an application would:
the bot is an SDK server behind ``McpBridge``, served by ``ChatCore.serve``
on one simulated core and called from another.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, ClientSession
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, ElicitRequestParams, ElicitResult, TextContent

from _mcp import Handler, bot
from _support import pair
from simplex_rpc import ErrorCode, Response, SigningKey
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.mcp import SERVICE_RPC_ERROR, SimplexTransport


async def connect_error(transport: SimplexTransport) -> MCPError:
    """The MCPError that entering ``mcp.Client`` raises (the SDK's session wraps it in an
    exception group)."""
    try:
        async with Client(transport):
            pass
    except Exception as exc:
        error: BaseException = exc
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        assert isinstance(error, MCPError), repr(exc)
        return error
    raise AssertionError("the client connected")


def text_of(result: Any) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


# -- the SDK client, unchanged, over Service RPC ------------------------------------------


@pytest.mark.anyio
async def test_mcp_client_lists_and_calls_tools_over_rpc() -> None:
    """The SDK discovers the bot (server/discover at 2026-07-28), lists and calls its tools."""

    async with bot() as p, Client(SimplexTransport(p.alice, 1, p.link)) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools is not None
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["availability", "catalog", "deliver"]
        result = await client.call_tool("availability", {"item": "anvil"})
        assert not result.is_error
        assert text_of(result) == "12 anvils are in stock."
        result = await client.call_tool("catalog", {"lines": 2})
        assert text_of(result) == "1. anvil\n2. hammer"


@pytest.mark.anyio
async def test_client_session_over_the_transports_streams() -> None:
    """The lower-level ClientSession works on the transport's two streams, unchanged:
    server/discover, adopt, then requests; initialize, the handshake of revisions before
    2026-07-28, is answered -32022 by the bot, which the binding does not carry it for."""

    async with bot() as p:
        async with (
            SimplexTransport(p.alice, 1, p.link) as (read, write),
            ClientSession(read, write) as session,
        ):
            session.adopt(await session.discover())
            assert session.protocol_version == "2026-07-28"
            tools = await session.list_tools()
            assert "availability" in [t.name for t in tools.tools]
        async with (
            SimplexTransport(p.alice, 1, p.link) as (read, write),
            ClientSession(read, write) as legacy,
        ):
            with pytest.raises(MCPError) as caught:
                await legacy.initialize()
            assert caught.value.error.code == -32022


@pytest.mark.anyio
async def test_resources_and_prompts_over_rpc() -> None:
    async with bot() as p, Client(SimplexTransport(p.alice, 1, p.link)) as client:
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["stock://anvil"]
        read = await client.read_resource("stock://anvil")
        assert [getattr(c, "text", None) for c in read.contents] == ["12"]
        prompts = await client.list_prompts()
        assert [pr.name for pr in prompts.prompts] == ["quote"]
        prompt = await client.get_prompt("quote", {"item": "anvil"})
        (message,) = prompt.messages
        assert isinstance(message.content, TextContent)
        assert message.content.text == "Quote me a price for one anvil."


@pytest.mark.anyio
async def test_input_required_rounds_work_as_the_sdk_does_them() -> None:
    """MCP 2026-07-28: a tool that needs the user's input answers input_required; the SDK
    asks its elicitation callback and repeats the call, each round one Service RPC request."""
    asked: list[str] = []
    rounds: list[str] = []

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"street": "Rua Augusta"})

    def count(handler: Handler) -> Handler:
        async def counted(request: ServiceRequest) -> Response:
            rounds.append(request.request.request["method"])
            return await handler(request)

        return counted

    async with (
        bot(wrap=count) as p,
        Client(SimplexTransport(p.alice, 1, p.link), elicitation_callback=elicit) as client,
    ):
        result = await client.call_tool("deliver", {"item": "anvil"})
        assert text_of(result) == "One anvil to Rua Augusta."
    assert asked == ["Which street in Lisbon?"]
    # Two rounds of the call (the SDK also lists the tools, to check the result's schema).
    assert [method for method in rounds if method == "tools/call"] == ["tools/call"] * 2


# -- envelope errors ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_marked_for_conversation_is_conversation_required_over_rpc() -> None:
    """The error names the envelope code and says to use the chat transport, in the words
    of both its users: via='chat' (SimplexTransport) and --via chat (mcp-proxy)."""

    async with (
        bot(conversation_tools=("catalog",)) as p,
        Client(SimplexTransport(p.alice, 1, p.link)) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("catalog", {"lines": 1})
        error = caught.value.error
        assert error.code == SERVICE_RPC_ERROR
        assert error.message.startswith("conversation_required: ")
        assert "via='chat'" in error.message and "--via chat" in error.message
        assert error.data == {
            "serviceRpcError": {
                "code": "conversation_required",
                "message": "tool 'catalog' needs a conversation: call it with /_call mcp",
            }
        }
        # The other tools still work.
        assert text_of(await client.call_tool("availability", {"item": "tongs"})).startswith(
            "7 "
        )


@pytest.mark.anyio
async def test_signed_calls_reach_the_bot_with_the_right_signer_key() -> None:
    """Every request is signed with sign_key and names its public key in requestKey; the
    responder sees the verified signerKey."""
    key = SigningKey.generate()
    seen: list[tuple[Any, Any, str]] = []

    def record(handler: Handler) -> Handler:
        async def recorded(request: ServiceRequest) -> Response:
            envelope = request.request
            seen.append((request.signer, envelope.request_key, envelope.request["method"]))
            return await handler(request)

        return recorded

    async with (
        bot(wrap=record) as p,
        Client(SimplexTransport(p.alice, 1, p.link, sign_key=key)) as client,
    ):
        await client.list_tools()
        await client.call_tool("availability", {"item": "anvil"})
    assert [method for _, _, method in seen] == ["server/discover", "tools/list", "tools/call"]
    for signer, request_key, _ in seen:
        assert signer == key.public_key
        assert request_key == key.public_key


@pytest.mark.anyio
async def test_rate_limited_is_repeated_after_retry_after_within_the_bound() -> None:
    """A requester repeats a request answered with retryAfter after that many seconds."""
    answered: list[str] = []

    def limit_first(handler: Handler) -> Handler:
        async def limited(request: ServiceRequest) -> Response:
            method = request.request.request["method"]
            answered.append(method)
            if method == "tools/call" and answered.count("tools/call") == 1:
                return Response.failure(ErrorCode.RATE_LIMITED, "slow down", retry_after=0)
            return await handler(request)

        return limited

    async with bot(wrap=limit_first) as p, Client(SimplexTransport(p.alice, 1, p.link)) as c:
        result = await c.call_tool("availability", {"item": "hammer"})
        assert text_of(result) == "40 hammers are in stock."
    assert [method for method in answered if method == "tools/call"] == ["tools/call"] * 2


@pytest.mark.anyio
async def test_rate_limited_beyond_the_bound_is_the_calls_error() -> None:
    """A wait longer than max_retry_after is not waited for: the call fails at once,
    naming rate_limited and retryAfter."""
    answered: list[str] = []

    def always_limited(handler: Handler) -> Handler:
        async def limited(request: ServiceRequest) -> Response:
            method = request.request.request["method"]
            answered.append(method)
            if method == "tools/call":
                return Response.failure(ErrorCode.RATE_LIMITED, "slow down", retry_after=3600)
            return await handler(request)

        return limited

    async with (
        bot(wrap=always_limited) as p,
        Client(SimplexTransport(p.alice, 1, p.link, max_retry_after=5)) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("availability", {"item": "anvil"})
        message = caught.value.error.message
        assert message.startswith("rate_limited: slow down (retryAfter 3600 s)")
        assert "max_retry_after (5 s)" in message
    assert answered == ["server/discover", "tools/call"]


@pytest.mark.anyio
async def test_a_bot_that_does_not_serve_mcp_fails_the_connection_naming_the_code() -> None:
    """unsupported_protocol: the SDK's probe and its fallback handshake both get the
    envelope error, and entering the client raises it."""

    async with pair(lambda r: "echo", protocols=("echo",)) as p:
        error = (await connect_error(SimplexTransport(p.alice, 1, p.link))).error
        assert error.code == SERVICE_RPC_ERROR
        assert error.message.startswith("unsupported_protocol")


@pytest.mark.anyio
async def test_an_answer_that_is_not_a_json_rpc_response_is_an_error() -> None:
    def garble(handler: Handler) -> Handler:
        async def garbled(request: ServiceRequest) -> Response:
            if request.request.request["method"] == "tools/call":
                return Response.success({"jsonrpc": "2.0", "id": "another", "result": {}})
            return await handler(request)

        return garbled

    async with bot(wrap=garble) as p, Client(SimplexTransport(p.alice, 1, p.link)) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("availability", {"item": "anvil"})
        assert caught.value.error.code == -32603
        assert "another request's id" in caught.value.error.message


@pytest.mark.anyio
async def test_a_null_id_error_of_the_bot_is_the_requests_error_with_its_code_and_message() -> None:
    """JSON-RPC 2.0: an error the server cannot tie to a request (a parse error) has a null
    id. A Service RPC round trip carries exactly one request, so the error is that request's:
    the caller sees the bot's code and message, not "another request's id"."""

    def parse_error(handler: Handler) -> Handler:
        async def answered(request: ServiceRequest) -> Response:
            if request.request.request["method"] == "tools/call":
                error = {"code": -32700, "message": "Parse error"}
                return Response.success({"jsonrpc": "2.0", "id": None, "error": error})
            return await handler(request)

        return answered

    async with (
        bot(wrap=parse_error) as p,
        Client(SimplexTransport(p.alice, 1, p.link)) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("availability", {"item": "anvil"})
        assert caught.value.error.code == -32700
        assert caught.value.error.message == "Parse error"


@pytest.mark.anyio
async def test_a_core_failure_is_the_requests_error_without_the_key() -> None:
    """The core refuses a target it cannot reach: the request fails with the SDK's
    CONNECTION_CLOSED, and the private key is nowhere in the error."""
    key = SigningKey.generate()

    async with pair(lambda r: "x", protocols=("mcp",)) as p:
        transport = SimplexTransport(
            p.alice, 1, "https://simplex.chat/contact#/?v=2&smp=unknown", sign_key=key
        )
        error = (await connect_error(transport)).error
        assert error.code == CONNECTION_CLOSED
        assert error.message.startswith("the chat core could not deliver the request")
        for text in (error.message, repr(error.data), repr(transport)):
            assert key.encode() not in text


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bad_arguments_are_clear_errors() -> None:
    async with pair(lambda r: "x") as p:
        core: ChatCore = p.alice
        with pytest.raises(ValueError, match="via: 'pigeon' is not one of rpc, chat, auto"):
            SimplexTransport(core, 1, p.link, via="pigeon")  # type: ignore[arg-type]
        with pytest.raises(SimplexRpcError, match="timeout: expected a positive"):
            SimplexTransport(core, 1, p.link, timeout=0)
        with pytest.raises(SimplexRpcError, match="max_retry_after"):
            SimplexTransport(core, 1, p.link, max_retry_after=float("inf"))
        with pytest.raises(SimplexRpcError, match="user_id"):
            SimplexTransport(core, 0, p.link)
        with pytest.raises(SimplexRpcError, match="target"):
            SimplexTransport(core, 1, "two words")
        with pytest.raises(TypeError, match="sign_key: expected a SigningKey"):
            SimplexTransport(core, 1, p.link, sign_key=SigningKey.generate().encode())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="core: expected a ChatCore"):
            SimplexTransport("ws://x", 1, p.link)  # type: ignore[arg-type]
        key = SigningKey.generate()
        shown = repr(SimplexTransport(core, 1, p.link, sign_key=key))
        assert key.encode() not in shown and "signed" in shown

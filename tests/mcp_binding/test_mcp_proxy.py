"""``simplex-rpc mcp-proxy`` as a real subprocess under the MCP SDK's stdio client (issue 11).

Three processes, as a user runs them: ``simplex-rpc simulator`` (the chat
cores), ``simplex-rpc serve --mcp-module examples/mcp_two_tools.py:build_server``
(the bot, with ``catalog`` marked for a conversation) and the proxy, started
by the SDK's stdio client as an MCP host starts a local server.

Rules pinned: the host sees the bot's tools whatever revision it speaks
(2026-07-28 per-request envelopes, or the ``initialize`` handshake of earlier
revisions); errors reach the host as MCP errors, never as a dead pipe; the
sign key never appears in the proxy's output.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
)
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from _mcp import Handler, bot
from _simulator_thread import SimulatorThread
from _support import Pair
from simplex_rpc import Response, SigningKey
from simplex_rpc._keeper import Backoff
from simplex_rpc.adapter import ChatCore, ServiceRequest
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.mcp import SERVICE_RPC_ERROR, SimplexTransport
from simplex_rpc.mcp._forward import build_server, upstream_client
from simplex_rpc.mcp._proxy import BotConnection

ROOT = Path(__file__).resolve().parents[2]
BOT = f"{ROOT / 'examples' / 'mcp_two_tools.py'}:build_server"
PY = sys.executable
UNKNOWN = "simplex:/a#nobody-here?h=simulator.local"


@dataclass
class Network:
    url: str
    link: str


def _read_until(stream: Any, pattern: str, what: str) -> str:
    for line in stream:
        match = re.search(pattern, line)
        if match:
            return match.group(1)
    raise AssertionError(f"{what} ended before printing {pattern!r}")


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    """The simulator and the bot, each its own process, for the whole module."""
    sim = subprocess.Popen(
        # -m: the cores' chats wait for /_start, as a bot's simplex-chat -m core does.
        [PY, "-m", "simplex_rpc", "simulator", "-m", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    bot: subprocess.Popen[str] | None = None
    try:
        url = _read_until(sim.stdout, r"^listening: (ws://\S+)", "the simulator")
        bot = subprocess.Popen(
            [
                *(PY, "-m", "simplex_rpc", "serve", "--core", f"{url}/bob"),
                *("--mcp-module", BOT, "--address", "--conversation-tool", "catalog"),
            ],
            stdout=subprocess.PIPE,  # the ready lines (issue 22)
            stderr=subprocess.DEVNULL,
            text=True,
        )
        link = _read_until(bot.stdout, r"^address: (\S+)", "the bot")
        yield Network(url=url, link=link)
    finally:
        for process in (bot, sim):
            if process is not None:
                process.terminate()
                process.wait(timeout=20)


def proxy(network: Network, *extra: str, target: str | None = None) -> StdioServerParameters:
    args = ["-m", "simplex_rpc", "mcp-proxy", "--core", f"{network.url}/alice", *extra]
    return StdioServerParameters(command=PY, args=[*args, target or network.link])


def text_of(result: Any) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.anyio
async def test_a_2026_host_lists_and_calls_the_bots_tools(network: Network) -> None:
    """The host speaks 2026-07-28 (server/discover, the _meta envelope)."""

    async with Client(proxy(network)) as host:
        assert host.protocol_version == "2026-07-28"
        tools = await host.list_tools()
        assert [t.name for t in tools.tools] == ["availability", "catalog"]
        assert tools.tools[0].description == "Items in stock"
        result = await host.call_tool("availability", {"item": "anvil"})
        assert text_of(result) == "12 anvils are in stock."


@pytest.mark.anyio
async def test_an_older_host_with_the_initialize_handshake(network: Network) -> None:
    """A host of a revision before 2026-07-28 begins with initialize: the proxy's SDK
    server answers it, and its SDK client speaks 2026-07-28 to the bot."""

    async with Client(proxy(network), mode="legacy") as host:
        assert host.protocol_version == "2025-11-25"
        assert host.session.initialize_result is not None
        tools = await host.list_tools()
        assert [t.name for t in tools.tools] == ["availability", "catalog"]
        result = await host.call_tool("availability", {"item": "tongs"})
        assert text_of(result) == "7 tongss are in stock."


@pytest.mark.anyio
async def test_a_bot_error_reaches_the_host_as_an_mcp_error(network: Network) -> None:
    """catalog needs a conversation: the host gets conversation_required as an MCP error
    of that call, and the proxy goes on serving."""

    async with Client(proxy(network)) as host:
        with pytest.raises(MCPError) as caught:
            await host.call_tool("catalog", {"lines": 1})
        assert caught.value.error.code == SERVICE_RPC_ERROR
        assert caught.value.error.message.startswith("conversation_required")
        result = await host.call_tool("availability", {"item": "hammer"})
        assert text_of(result) == "40 hammers are in stock."


@pytest.mark.anyio
async def test_an_unreachable_bot_is_an_mcp_error_not_a_dead_pipe(
    network: Network, tmp_path: Path
) -> None:
    """Every request gets an MCP error naming the failure; the sign key (from @FILE) is in
    neither the errors nor the proxy's log."""
    key = SigningKey.generate()
    key_file = tmp_path / "key"
    key_file.write_text(key.encode())
    key_file.chmod(0o600)  # a key file others can read is refused, as ssh does
    log_path = tmp_path / "proxy.log"

    params = proxy(network, "--verbose", "--sign-key", f"@{key_file}", target=UNKNOWN)
    with log_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as host:
            for _ in range(2):
                with pytest.raises(MCPError) as caught:
                    await host.list_tools()
                error = caught.value.error
                assert error.code == CONNECTION_CLOSED
                assert error.message.startswith("the SimpleX bot could not be reached")
                assert key.encode() not in error.message
    log = log_path.read_text()
    assert "could not be reached" in log
    assert key.encode() not in log


# -- the command line ------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "simplex_rpc", "mcp-proxy", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bad_arguments_are_one_line_errors_without_the_key() -> None:
    secret = SigningKey.generate().encode()
    broken = secret[:-4] + "!!!!"
    cases = [
        (["--core", "ws://127.0.0.1:1", "--sign-key", "-", UNKNOWN], "standard input"),
        (["--core", "ws://127.0.0.1:1", "--sign-key", broken, UNKNOWN], "--sign-key"),
        (["--core", "ws://127.0.0.1:1", "two words"], "target"),
        (["--core", "ws://127.0.0.1:1", "--via", "pigeon", UNKNOWN], "--via"),
        (["--core", "ws://127.0.0.1:1", "--timeout", "0", UNKNOWN], "--timeout"),
    ]
    for args, needle in cases:
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert needle in result.stderr
        assert "Traceback" not in result.stderr
        assert result.stdout == ""
        assert secret not in result.stderr and broken not in result.stderr


# -- over /_call -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_proxy_over_chat_passes_progress_to_the_host() -> None:
    """--via chat: the host's tools/call goes as /_call mcp in the direct chat with the bot
    (a `serve --chat` process); the bot's progress notification reaches the host's progress
    callback, and catalog, which needs a conversation, answers."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    with SimulatorThread() as sim:
        bot = subprocess.Popen(
            [
                *(PY, "-m", "simplex_rpc", "serve", "--core", f"{sim.url}/bob", "--chat"),
                *("--mcp-module", BOT, "--conversation-tool", "catalog"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            contact, _ = sim.connect("alice", "bob")
            network = Network(url=sim.url, link=f"@{contact}")

            params = proxy(network, "--via", "chat", "--timeout", "20")
            async with Client(params) as host:
                tools = await host.list_tools()
                assert [t.name for t in tools.tools] == ["availability", "catalog"]
                result = await host.call_tool(
                    "catalog", {"lines": 2}, progress_callback=on_progress
                )
                assert text_of(result) == "1. anvil\n2. hammer"
        finally:
            bot.terminate()
            bot.wait(timeout=20)
    assert progress == [(0.0, 2.0, "listing")]


def test_without_the_sdks_the_library_imports_and_the_proxy_names_the_extra() -> None:
    """The client transports are imported on first use: `import simplex_rpc` and the CLI
    work without the mcp and a2a SDKs, and asking for them names the extra to install."""
    code = """
import sys
sys.modules["mcp"] = None
sys.modules["a2a"] = None
import simplex_rpc.a2a, simplex_rpc.cli, simplex_rpc.mcp
for module, name in ((simplex_rpc.mcp, "SimplexTransport"), (simplex_rpc.a2a, "register_client")):
    try:
        getattr(module, name)
    except ImportError as exc:
        print(exc)
sys.exit(simplex_rpc.cli.main(["mcp-proxy", "--core", "ws://127.0.0.1:1", "simplex:/a#x"]))
"""
    result = subprocess.run(
        [PY, "-c", code], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'simplex-rpc[mcp]'" in result.stdout
    assert "pip install 'simplex-rpc[a2a]'" in result.stdout
    assert "mcp-proxy: needs the mcp SDK: pip install 'simplex-rpc[mcp]'" in result.stderr
    assert "Traceback" not in result.stderr


# -- the proxy in process: the SDK server facing a host, the SDK client facing the bot ------


ProxyConnect = Callable[[], AbstractAsyncContextManager[tuple[ChatCore, Client]]]


def rpc_connect(p: Pair, cores: list[ChatCore] | None = None) -> ProxyConnect:
    """The proxy's connection as ``connector`` makes it: a new core each time, then the
    proxy's own SDK client over SimplexTransport (Service RPC)."""

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
        async with ChatCore.connect(p.sim.url_for("alice")) as core:
            if cores is not None:
                cores.append(core)
            async with upstream_client(SimplexTransport(core, 1, p.link)) as client:
                yield core, client

    return connect


@contextlib.asynccontextmanager
async def proxied(
    connect: ProxyConnect, link: str, backoff: Backoff | None = None, **host: Any
) -> AsyncIterator[Client]:
    """A host (the SDK's client, in process) talking to the proxy's SDK server."""
    upstream = BotConnection(connect, link, backoff=backoff)
    async with anyio.create_task_group() as tg:
        tg.start_soon(upstream.run)
        async with Client(build_server(upstream), cache=None, **host) as client:
            yield client
        tg.cancel_scope.cancel()


BOT_TOOLS = ["availability", "catalog", "deliver"]


@pytest.mark.anyio
async def test_after_the_core_is_lost_the_next_request_waits_for_the_new_connection() -> None:
    """The connection is made again on the next request after the core went away: that
    request waits for the attempt and is answered by the new connection."""
    cores: list[ChatCore] = []

    async with bot() as p, proxied(rpc_connect(p, cores), p.link) as host:
        assert [t.name for t in (await host.list_tools()).tools] == BOT_TOOLS
        await cores[0].close()
        assert [t.name for t in (await host.list_tools()).tools] == BOT_TOOLS
        assert len(cores) == 2 and not cores[1].closed


@pytest.mark.anyio
async def test_after_the_core_is_lost_a_failed_reconnect_is_the_requests_error_with_its_reason(
) -> None:
    """When the new attempt fails, the waiting request's MCP error names the real reason."""
    cores: list[ChatCore] = []

    async with bot() as p:
        first = rpc_connect(p, cores)

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
            if cores:
                raise SimplexRpcError("the core at ws://127.0.0.1:1 refused the connection")
            async with first() as pair:
                yield pair

        async with proxied(connect, p.link) as host:
            await host.list_tools()
            await cores[0].close()
            with pytest.raises(MCPError) as caught:
                await host.list_tools()
            assert caught.value.error.code == CONNECTION_CLOSED
            assert caught.value.error.message == (
                "the SimpleX bot could not be reached:"
                " the core at ws://127.0.0.1:1 refused the connection"
            )


@pytest.mark.anyio
async def test_a_failed_connection_is_made_again_by_the_next_request_and_serves_it() -> None:
    """The proxy's keeper (simplex_rpc._keeper, on demand): a connection that could not be
    made is not retried on its own, but when the next request asks after the backoff's
    wait (none here); once the core answers again, that request is served by the new
    connection."""
    cores: list[ChatCore] = []
    attempts: list[bool] = []
    core_down = True
    with anyio.fail_after(60):
        async with bot() as p:
            working = rpc_connect(p, cores)

            @contextlib.asynccontextmanager
            async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
                attempts.append(core_down)
                if core_down:
                    raise SimplexRpcError("the core at ws://127.0.0.1:1 refused the connection")
                async with working() as pair:
                    yield pair

            # No wait after a failure: the next request may ask for the next attempt.
            async with proxied(connect, p.link, Backoff(first=0.0, cap=0.0)) as host:
                with pytest.raises(MCPError) as caught:
                    await host.list_tools()
                assert "refused the connection" in caught.value.error.message
                assert attempts == [True] or attempts == [True, True]
                tried = len(attempts)
                await anyio.wait_all_tasks_blocked()
                assert len(attempts) == tried  # nobody asked: no attempt
                core_down = False
                assert [t.name for t in (await host.list_tools()).tools] == BOT_TOOLS
                assert attempts[-1] is False and len(cores) == 1


@pytest.mark.anyio
async def test_requests_during_the_backoff_get_the_last_failure_without_a_new_attempt() -> None:
    """The keeper's wait after a failure: each request in it is answered at once with the
    failure, and none of them makes an attempt (a host's burst is not a burst of attempts)."""
    attempts = 0

    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
        nonlocal attempts
        attempts += 1
        raise SimplexRpcError("the core at ws://127.0.0.1:1 refused the connection")
        yield  # pragma: no cover - never reached

    with anyio.fail_after(60):
        async with proxied(connect, UNKNOWN, Backoff(first=3600.0, cap=3600.0)) as host:
            for _ in range(3):
                with pytest.raises(MCPError) as caught:
                    await host.list_tools()
                assert caught.value.error.code == CONNECTION_CLOSED
                assert caught.value.error.message.endswith("refused the connection")
    assert attempts == 1


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
@pytest.mark.anyio
async def test_a_tool_that_needs_the_users_input_asks_the_host(mode: str) -> None:
    """MCP input_required through the proxy: a 2026-07-28 host gets the bot's
    input_required result and answers it with its own elicitation callback; an older host
    (initialize handshake) is asked with elicitation/create while the proxy's client runs
    the rounds with the bot. Either way the tool gets the user's answer."""
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"street": "Rua Augusta"})

    host_mode = {"mode": "legacy"} if mode == "legacy" else {}
    async with (
        bot() as p,
        proxied(rpc_connect(p), p.link, elicitation_callback=elicit, **host_mode) as host,
    ):
        assert host.protocol_version == (
            "2026-07-28" if mode != "legacy" else LATEST_HANDSHAKE_VERSION
        )
        result = await host.call_tool("deliver", {"item": "anvil"})
        assert text_of(result) == "One anvil to Rua Augusta."
    assert asked == ["Which street in Lisbon?"]


def list_answer(change: Callable[[dict[str, Any]], None]) -> Callable[[Handler], Handler]:
    """A bot whose tools/list answers are changed by ``change`` (the result object)."""

    def wrap(handler: Handler) -> Handler:
        async def changed(request: ServiceRequest) -> Response:
            response = await handler(request)
            if request.request.request["method"] != "tools/list" or response.response is None:
                return response
            answer = dict(response.response)
            result = dict(answer["result"])
            change(result)
            answer["result"] = result
            return Response(response=answer)

        return changed

    return wrap


@pytest.mark.anyio
async def test_a_bot_answer_that_is_not_valid_mcp_is_an_internal_error_not_the_hosts_fault() -> (
    None
):
    """The SDK server answers a ValidationError as "Invalid request parameters" (-32602),
    which blames the host: the proxy says the bot's answer is not valid MCP (-32603), and the
    next request is served."""

    def bad_tools(result: dict[str, Any]) -> None:
        result["tools"] = 5

    async with bot(wrap=list_answer(bad_tools)) as p, proxied(rpc_connect(p), p.link) as host:
        with pytest.raises(MCPError) as caught:
            await host.list_tools()
        assert caught.value.error.code == INTERNAL_ERROR
        assert caught.value.error.message == "the bot's tools/list answer is not valid MCP"
        prompts = await host.list_prompts()
        assert [prompt.name for prompt in prompts.prompts] == ["quote"]


@pytest.mark.anyio
async def test_any_other_failure_of_a_forward_is_a_short_internal_error_without_key_material() -> (
    None
):
    """A forward that fails on the way (here: the proxy's client refuses the bot's answer
    with a RuntimeError) reaches the host as -32603 with a bounded, redacted text."""
    key = SigningKey.generate()

    async with bot() as p:
        first = rpc_connect(p)

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[tuple[ChatCore, Client]]:
            async with first() as (core, client):

                async def fail(*args: Any, **kwargs: Any) -> Any:
                    raise RuntimeError(f"the session broke with {key.encode()} " + "x" * 5000)

                client.session.list_prompts = fail  # type: ignore[method-assign]
                yield core, client

        async with proxied(connect, p.link) as host:
            with pytest.raises(MCPError) as caught:
                await host.list_prompts()
            error = caught.value.error
            assert error.code == INTERNAL_ERROR
            assert error.message.startswith("prompts/list could not be forwarded: ")
            assert key.encode() not in error.message
            assert len(error.message) < 300


@pytest.mark.anyio
async def test_conversation_required_through_the_proxy_names_the_proxys_option() -> None:
    """A tool marked for a conversation: the host's error says how a proxy user calls it
    (--via chat), as well as a SimplexTransport user (via='chat')."""

    async with (
        bot(conversation_tools=("catalog",)) as p,
        proxied(rpc_connect(p), p.link) as host,
    ):
        with pytest.raises(MCPError) as caught:
            await host.call_tool("catalog", {"lines": 2})
        message = caught.value.error.message
        assert caught.value.error.code == SERVICE_RPC_ERROR
        assert message.startswith("conversation_required")
        assert "--via chat" in message and "via='chat'" in message

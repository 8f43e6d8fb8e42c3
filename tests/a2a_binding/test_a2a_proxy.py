"""``simplex-rpc a2a-proxy``: any A2A client reaches a SimpleX bot (issue 18, section 3).

The proxy is a local A2A JSON-RPC HTTP server on a2a-sdk's server app; each
JSON-RPC request goes to the bot through the transport of ``register_client``.
The client here is a2a-sdk's own, made from the card the proxy serves at the
well-known URI, as any A2A client would make it; it never learns that SimpleX
is behind the URL.

Processes, as a user runs them: the chat cores (the simulator, in a thread of
the test, which makes alice and the bot contacts), the bot
(``simplex-rpc serve --a2a-module tests/_a2a_upstream.py:build_handler --chat``)
and the proxies (``simplex-rpc a2a-proxy``), one over Service RPC (core carol) and
one in the conversation (core alice). Each program has a core of its own: the core
gives each event to one of its connections (apps/simplex-chat/Server.hs), so a second
program on alice's core could take the conversation's messages.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import UnsupportedOperationError, VersionNotSupportedError

from _gateway import PY, UPSTREAM, World, read_line, stop
from simplex_rpc import SigningKey
from simplex_rpc.testing import CoreSimulator

LISTENING = r"^listening: (http://127\.0\.0\.1:\d+)$"


@dataclass
class Network:
    url: str
    link: str
    contact: str
    rpc_proxy: str
    chat_proxy: str


def _world(sim: CoreSimulator) -> dict[str, Any]:
    at_alice, _ = sim.connect("alice", "bot")
    return {"contact": f"@{at_alice}"}


def start_proxy(*args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [PY, "-m", "simplex_rpc", "a2a-proxy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = read_line(process.stdout, LISTENING, "a2a-proxy")
    return process, url


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    processes: list[subprocess.Popen[str] | None] = []
    with World(_world) as world:
        try:
            bot = subprocess.Popen(
                [
                    *(PY, "-m", "simplex_rpc", "serve", "--core", f"{world.url}/bot"),
                    *("--a2a-module", f"{UPSTREAM}:build_handler", "--chat", "--address"),
                ],
                stdout=subprocess.PIPE,  # the ready lines (issue 22)
                stderr=subprocess.PIPE,
                text=True,
            )
            processes.append(bot)
            link = read_line(bot.stdout, r"^address: (\S+)", "the bot")
            rpc_proxy, rpc_url = start_proxy("--core", f"{world.url}/carol", link)
            processes.append(rpc_proxy)
            chat_proxy, chat_url = start_proxy(
                "--core", f"{world.url}/alice", "--via", "chat", world.facts["contact"]
            )
            processes.append(chat_proxy)
            yield Network(world.url, link, world.facts["contact"], rpc_url, chat_url)
        finally:
            stop(*reversed(processes))


def message(text: str) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)]
        )
    )


async def card_of(proxy: str, http: httpx.AsyncClient) -> pb.AgentCard:
    return await A2ACardResolver(http, proxy).get_agent_card()


@pytest.mark.anyio
async def test_the_card_points_a_json_rpc_interface_at_the_proxy(network: Network) -> None:
    """GET /.well-known/agent-card.json gives the bot's card, with a JSON-RPC interface
    pointing at the proxy's own URL (and no SimpleX interface an HTTP client cannot use)."""

    async with httpx.AsyncClient() as http:
        chat_card = await card_of(network.chat_proxy, http)
        rpc_card = await card_of(network.rpc_proxy, http)
    assert chat_card.name == "Acme anvils"  # the bot's own card, read in the conversation
    assert chat_card.capabilities.streaming
    for card, url in ((chat_card, network.chat_proxy), (rpc_card, network.rpc_proxy)):
        (interface,) = card.supported_interfaces
        assert interface.protocol_binding == "JSONRPC"
        assert interface.url.rstrip("/") == url
        assert interface.protocol_version == "1.0"
    # Service RPC carries no stream: the card says so, and the SDK's client sends SendMessage.
    assert not rpc_card.capabilities.streaming


@pytest.mark.anyio
async def test_the_sdk_client_gets_a_one_shot_task_over_service_rpc(network: Network) -> None:
    """A2A's SendMessage through the proxy is one Service RPC request to the bot; the
    answer is the task at the end of the work."""

    async with httpx.AsyncClient() as http:
        card = await card_of(network.rpc_proxy, http)
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        (event,) = [event async for event in client.send_message(message("quote"))]
    assert event.task.status.state == pb.TASK_STATE_COMPLETED
    assert event.task.artifacts[0].parts[0].text == "Two anvils to Lisbon: 240 EUR."


@pytest.mark.anyio
async def test_the_sdk_client_gets_a_stream_from_the_conversation(network: Network) -> None:
    """SendStreamingMessage through the proxy (--via chat): server-sent events, one per
    StreamResponse of the bot, in order, to the terminal state; then GetTask of that task."""

    async with httpx.AsyncClient() as http:
        card = await card_of(network.chat_proxy, http)
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        events = [event async for event in client.send_message(message("quote"))]
        task_id = next(e.task.id for e in events if e.HasField("task"))
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        events, task = events, task
    assert len(events) > 1
    last = events[-1]
    assert last.HasField("status_update") or last.HasField("task")
    state = last.status_update.status.state if last.HasField("status_update") else None
    assert (state or last.task.status.state) == pb.TASK_STATE_COMPLETED
    assert any(e.HasField("artifact_update") for e in events)
    assert task.status.state == pb.TASK_STATE_COMPLETED


@pytest.mark.anyio
async def test_a_version_the_bot_does_not_serve_is_version_not_supported(network: Network) -> None:
    """A2A-Version is a service parameter: the proxy passes 1.1 to the bot, which serves
    1.0 and answers VersionNotSupportedError, raised by the SDK's client as its own."""

    async with httpx.AsyncClient() as http:
        card = await card_of(network.rpc_proxy, http)
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        context = ClientCallContext(service_parameters={"A2A-Version": "1.1"})
        with pytest.raises(VersionNotSupportedError):
            async for _ in client.send_message(message("quote"), context=context):
                pass


@pytest.mark.anyio
async def test_what_service_rpc_does_not_serve_is_an_a2a_error(network: Network) -> None:
    """Over Service RPC the bot answers a stream conversation_required: the SDK client of
    the rpc proxy gets an A2A error naming it, and the proxy serves on."""

    async with httpx.AsyncClient() as http:
        card = await card_of(network.rpc_proxy, http)
        card.capabilities.streaming = True  # the client insists on a stream
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        with pytest.raises(UnsupportedOperationError, match="conversation_required"):
            async for _ in client.send_message(message("quote")):
                pass
        plain = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        events = [e async for e in plain.send_message(message("quote"))]
        assert events[0].task.status.state == pb.TASK_STATE_COMPLETED


# -- the command line --------------------------------------------------------------------------


def proxy_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "simplex_rpc", "a2a-proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_listen_takes_host_and_port(network: Network) -> None:
    """--listen HOST:PORT; anything else is a one-line error, exit 2."""
    result = proxy_cli("--core", f"{network.url}/carol", "--listen", "nowhere", network.link)
    assert result.returncode == 2
    assert "--listen" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_chat_needs_a_chat_ref(network: Network) -> None:
    """--via chat takes the ChatRef of the conversation: a link is refused, exit 2."""
    result = proxy_cli("--core", f"{network.url}/dave", "--via", "chat", network.link)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_auto_needs_a_declaration_of_a2a_over_rpc(network: Network) -> None:
    """--via auto reads the address's declarations: this bot declares nothing, so the
    proxy says what to do instead, in one line, exit 2."""
    result = proxy_cli("--core", f"{network.url}/carol", "--via", "auto", network.link)
    assert result.returncode == 2
    assert "does not declare a2a" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.anyio
async def test_the_sign_key_reaches_no_output(network: Network, tmp_path: Any) -> None:
    """--sign-key @FILE: requests are signed; the key is in neither stdout nor stderr."""
    key = SigningKey.generate()
    key_file = tmp_path / "key"
    key_file.write_text(key.encode())
    key_file.chmod(0o600)  # a key file others can read is refused, as ssh does
    process = subprocess.Popen(
        [
            *(PY, "-m", "simplex_rpc", "a2a-proxy", "--core", f"{network.url}/carol"),
            *("--sign-key", f"@{key_file}", "--listen", "127.0.0.1:0", network.link),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = read_line(process.stdout, LISTENING, "a2a-proxy")

        async with httpx.AsyncClient() as http:
            card = await card_of(url, http)
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
            (event,) = [e async for e in factory.create(card).send_message(message("quote"))]
        assert event.task.status.state == pb.TASK_STATE_COMPLETED
    finally:
        stop(process)
    out, err = process.communicate(timeout=20)
    assert key.encode() not in out + err


def test_the_service_parameters_are_the_a2a_headers_and_the_cards_api_keys() -> None:
    """The issue: "The A2A service parameters among the HTTP headers (A2A-Version,
    A2A-Extensions, Authorization and the others the card's security schemes name) become
    a2a-service-parameters"; no other header reaches the bot."""
    from a2a.server.context import ServerCallContext

    from simplex_rpc.a2a import _proxy

    card = pb.AgentCard(name="Acme")
    card.security_schemes["key"].api_key_security_scheme.CopyFrom(
        pb.APIKeySecurityScheme(location="header", name="X-Acme-Pass")
    )
    card.security_schemes["query"].api_key_security_scheme.CopyFrom(
        pb.APIKeySecurityScheme(location="query", name="token")
    )
    headers = {
        "host": "127.0.0.1:8765",
        "a2a-version": "1.0",
        "a2a-extensions": "https://example.com/ext",
        "authorization": "Bearer x",
        "x-acme-pass": "p",
        "token": "t",
        "user-agent": "python-httpx",
        "cookie": "c=1",
    }
    pick = _proxy._http_parameters(card)
    assert pick(ServerCallContext(state={"headers": headers})) == {
        "A2A-Version": "1.0",
        "A2A-Extensions": "https://example.com/ext",
        "Authorization": "Bearer x",
        "X-Acme-Pass": "p",
    }

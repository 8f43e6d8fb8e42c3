"""``simplex-rpc serve --a2a-url``: an A2A agent behind a SimpleX bot (issue 18, section 2).

Three processes, as a user runs them: the chat cores (the simulator, in a
thread of the test so that it can make contacts and a group), the upstream
(``tests/_a2a_upstream.py``: an a2a-sdk agent under uvicorn, over its
JSON-RPC HTTP binding) and the bot, ``simplex-rpc serve --a2a-url URL``
fronting it with a2a-sdk's client. Callers speak the A2A binding over both
SimpleX transports; nothing about the upstream is specific to Python (it is
a URL).

Rules pinned (protocol text, "A2A binding", and the issue):
- "A proxy to an HTTP interface sends each service parameter as an HTTP
  header and removes the member from the request";
- Service RPC "answers SendMessage whose message has neither contextId nor
  taskId" with "the task in its state at the end of the work";
- a stream's replies come "in the order of the stream" and end "with the
  reply whose task or status update is in a terminal state";
- "A request that names the context or the task of another caller is
  answered as a request for an unknown task";
- push notification methods get PushNotificationNotSupportedError;
- GetExtendedAgentCard: "For a caller without credentials, it is the public card";
- the Agent Card is the upstream's, with the SimpleX interface added;
- declared versions are the served versions; A2A-Version is checked;
- a credential travels only as a header to the upstream, never to a log.
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from _gateway import (
    PY,
    UPSTREAM,
    Network,
    World,
    _world,
    read_line,
    request,
    rpc,
    seen_by,
    stop,
    user_message,
)
from simplex_rpc import a2a
from simplex_rpc.adapter import ChatCore

SECRET = "sekret-5f3a9c"
CALLER_SECRET = "caller-7d1e0b"
TERMINAL = "TASK_STATE_COMPLETED"


def start_upstream() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [PY, str(UPSTREAM)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = read_line(process.stdout, r"^listening: (http://\S+)", "the upstream agent")
    return process, url


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    """The simulator, the upstream agent and the bot in front of it, for the whole module."""
    log_path = tmp_path_factory.mktemp("gateway") / "bot.log"
    upstream: subprocess.Popen[str] | None = None
    bot: subprocess.Popen[str] | None = None
    with World(_world) as world:
        try:
            upstream, upstream_url = start_upstream()
            with log_path.open("w") as log:
                bot = subprocess.Popen(
                    [
                        *(PY, "-m", "simplex_rpc", "serve", "--core", f"{world.url}/bot"),
                        *("--a2a-url", upstream_url, "--header", f"X-Api-Key: {SECRET}"),
                        *("--chat", "--declare", "--address"),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                assert bot.stderr is not None
                link = read_line(bot.stdout, r"^address: (\S+)", "the bot")

                def drain() -> None:
                    assert bot is not None and bot.stderr is not None
                    for line in bot.stderr:
                        if log.closed:  # the fixture has ended; the bot's last lines are moot
                            return
                        log.write(line)
                        log.flush()

                threading.Thread(target=drain, daemon=True).start()
                yield Network(
                    url=world.url,
                    upstream=upstream_url,
                    link=link,
                    contact=world.facts["contact"],
                    alice_group=world.facts["alice_group"],
                    carol_group=world.facts["carol_group"],
                    bot_log=log_path,
                )
        finally:
            stop(bot, upstream)


async def chat(
    network: Network,
    message: dict[str, Any],
    where: str,
    *,
    core: str = "alice",
    member: str | None = None,
) -> list[dict[str, Any]]:
    """The JSON-RPC responses to ``message`` in a conversation, in the order of arrival."""
    answers: list[dict[str, Any]] = []
    async with ChatCore.connect(f"{network.url}/{core}") as caller:
        await caller.start(service_requests=False)
        async for reply in caller.call_stream(where, "a2a", message, member=member, wait=60):
            assert reply.message is not None, reply.text
            answers.append(reply.message)
            if reply.ends:
                break
    assert answers, "no answer"
    return answers


def state_of(stream_response: dict[str, Any]) -> str | None:
    for kind in ("task", "statusUpdate"):
        event = stream_response.get(kind)
        if isinstance(event, dict):
            state: str = event["status"]["state"]
            return state
    return None


# -- Service RPC -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_one_shot_task_over_service_rpc_is_the_task_at_the_end_of_the_work(
    network: Network,
) -> None:
    """Service RPC: "The response is the task in its state at the end of the work"; the
    upstream got the request from the gateway's a2a-sdk client, the service parameters as
    headers and the operator's --header, the a2a-service-parameters member removed."""
    marker = f"https://example.com/ext/{uuid.uuid4()}"
    parameters = {
        "A2A-Extensions": marker,
        "Authorization": f"Bearer {CALLER_SECRET}",  # the caller's own credential
        "X-Api-Key": "the-callers-guess",  # named like the operator's --header: dropped
        "Content-Length": "0",  # HTTP framing: never the caller's to set
    }

    response = await rpc(network, request("SendMessage", user_message("quote"), **parameters))
    assert response.error is None, response.error
    answer = response.response
    task = answer["result"]["task"]
    assert task["status"]["state"] == TERMINAL
    assert task["artifacts"][0]["parts"][0]["text"] == "Two anvils to Lisbon: 240 EUR."
    records = seen_by(network.upstream)
    (record,) = [r for r in records if r["headers"].get("a2a-extensions") == marker]
    headers = record["headers"]
    assert headers["a2a-version"] == "1.0"
    assert headers["authorization"] == f"Bearer {CALLER_SECRET}"
    assert headers["x-api-key"] == SECRET  # the operator's header wins
    assert headers["content-length"] != "0"
    assert a2a.SERVICE_PARAMETERS_MEMBER not in record["body"]
    assert record["body"]["method"] == "SendMessage"
    # The gateway's own id space: the caller's id is not what the upstream saw.
    assert record["body"]["id"] != answer["id"]


@pytest.mark.anyio
async def test_a_stream_over_service_rpc_is_conversation_required(network: Network) -> None:
    """The text: "Over Service RPC, both methods are answered with the envelope error
    conversation_required"."""

    response = await rpc(network, request("SendStreamingMessage", user_message("quote")))
    assert response.error is not None and response.error.code == "conversation_required"


@pytest.mark.anyio
async def test_a_version_the_upstream_does_not_serve_is_refused(network: Network) -> None:
    """The text: "A bot answers a request of a version it does not serve with A2A's
    VersionNotSupportedError": the versions are the upstream's."""
    message = a2a.make_request("SendMessage", user_message("quote"), id=7, version="2.0")

    response = await rpc(network, message)
    assert response.error is None
    assert response.response["error"]["code"] == a2a.VERSION_NOT_SUPPORTED


@pytest.mark.anyio
async def test_a_task_not_finished_in_time_over_service_rpc_is_conversation_required(
    network: Network,
) -> None:
    """The text: "A bot that cannot finish the task within 180 seconds answers with the
    envelope error conversation_required": the gateway's deadline is below the handler's
    (--deadline 1 here, so the test is short), and the answer arrives before it."""
    upstream, upstream_url = start_upstream()
    bot = subprocess.Popen(
        [
            *(PY, "-m", "simplex_rpc", "serve", "--core", f"{network.url}/frank"),
            *("--a2a-url", upstream_url, "--address", "--deadline", "1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        link = read_line(bot.stdout, r"^address: (\S+)", "the bot")
        local = Network(**{**network.__dict__, "link": link})

        response = await rpc(local, request("SendMessage", user_message("slow")))
        assert response.error is not None, response.response
        assert response.error.code == "conversation_required"
        assert "did not finish" in (response.error.message or "")
    finally:
        stop(bot, upstream)


@pytest.mark.anyio
async def test_an_upstream_that_went_away_is_answered_and_logged(network: Network) -> None:
    """Every request ends in one answer: with the upstream gone, -32603 in a conversation
    and in the Service RPC response, the reason once in the bot's log; the --header
    credential in neither."""
    upstream, upstream_url = start_upstream()
    bot = subprocess.Popen(
        [
            *(PY, "-m", "simplex_rpc", "serve", "--core", f"{network.url}/grace"),
            *("--a2a-url", upstream_url, "--address", "--chat"),
            *("--header", f"Authorization: Bearer {SECRET}"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        link = read_line(bot.stdout, r"^address: (\S+)", "the bot")
        local = Network(**{**network.__dict__, "link": link})
        stop(upstream)

        response = await rpc(local, request("SendMessage", user_message("quote")))
        assert response.error is None
        error = response.response["error"]
        assert error["code"] == -32603
        assert error["message"].startswith("the upstream could not be reached")
        assert SECRET not in json.dumps(response.response)
    finally:
        stop(bot, upstream)
    assert bot.stderr is not None
    log = bot.stderr.read()
    assert "the upstream could not be reached" in log
    assert SECRET not in log


@pytest.mark.anyio
async def test_the_declared_versions_are_the_served_versions(network: Network) -> None:
    """The text: "versions: ... The protocol versions the bot serves": the upstream's 1.0, on both
    transports."""

    async with ChatCore.connect(f"{network.url}/alice") as alice:
        await alice.start(service_requests=False)
        declared = await alice.link_declarations(1, network.link)
    entry = declared.protocols["a2a"]
    assert list(entry.versions) == ["1.0"]
    assert set(entry.transports) == {"rpc", "chat"}


# -- conversations -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_stream_in_a_group_reaches_its_terminal_state_in_order(network: Network) -> None:
    """The text: "Each StreamResponse is one reply ... Replies are sent in the order of the stream.
    The stream ends with the reply whose task or status update is in a terminal state"."""
    message = request("SendStreamingMessage", user_message("quote"))

    answers = await chat(network, message, network.alice_group, member="bot")
    assert all(a["id"] == message["id"] for a in answers)
    events = [a["result"] for a in answers]
    states = [state_of(e) for e in events]
    assert states[-1] == TERMINAL
    assert TERMINAL not in states[:-1]
    assert "TASK_STATE_WORKING" in states
    artifacts = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert artifacts[0]["artifact"]["parts"][0]["text"] == "Two anvils to Lisbon: 240 EUR."
    contexts = {(e.get("task") or e.get("statusUpdate") or {}).get("contextId") for e in events}
    assert len(contexts - {None}) == 1


@pytest.mark.anyio
async def test_another_members_context_and_task_are_unknown_to_them(network: Network) -> None:
    """The text: "A context and its tasks are available only to their caller ... in a group to the
    member who created them. A request that names the context or the task of another
    caller is answered as a request for an unknown task": carol gets exactly the answer a
    task nobody made gets, so she cannot tell that alice's exists; naming alice's task
    among referenceTaskIds, or a context nobody was given, is answered the same."""
    started = request("SendMessage", user_message("ask"))

    (first,) = await chat(network, started, network.alice_group, member="bot")
    task = first["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    get = request("GetTask", {"id": task["id"]})
    (own,) = await chat(network, get, network.alice_group, member="bot")
    (carols,) = await chat(network, get, network.carol_group, core="carol", member="bot")
    nobody = request("GetTask", {"id": str(uuid.uuid4())})
    (unknown,) = await chat(network, nobody, network.carol_group, core="carol", member="bot")
    follow_up = request(
        "SendMessage", user_message("quote", contextId=task["contextId"], taskId=task["id"])
    )
    (continued,) = await chat(
        network, follow_up, network.carol_group, core="carol", member="bot"
    )
    in_context = request("SendMessage", user_message("quote", contextId=task["contextId"]))
    (joined,) = await chat(network, in_context, network.carol_group, core="carol", member="bot")
    listed = request("ListTasks", {"contextId": task["contextId"]})
    (listing,) = await chat(network, listed, network.carol_group, core="carol", member="bot")
    referring = request("SendMessage", user_message("quote", referenceTaskIds=[task["id"]]))
    (referred,) = await chat(
        network, referring, network.carol_group, core="carol", member="bot"
    )
    invented = request("SendMessage", user_message("quote", contextId=str(uuid.uuid4())))
    (nobodys,) = await chat(network, invented, network.carol_group, core="carol", member="bot")
    others = [continued, joined, listing, referred, nobodys]
    assert own["result"]["id"] == task["id"]
    for refused in (carols, *others):
        assert refused["error"]["code"] == a2a.TASK_NOT_FOUND, refused
        assert refused["error"] == unknown["error"]


@pytest.mark.anyio
async def test_subscribe_to_task_follows_the_callers_own_task_only(network: Network) -> None:
    """The text: "A caller that missed replies resumes the stream with SubscribeToTask": the
    task's events as replies, ending at its interrupted state; for another caller the
    task is unknown."""
    started = request("SendMessage", user_message("ask"))

    (first,) = await chat(network, started, network.contact)
    task = first["result"]["task"]
    subscribe = request("SubscribeToTask", {"id": task["id"]})
    own = await chat(network, subscribe, network.contact)
    other = await chat(network, subscribe, network.carol_group, core="carol", member="bot")
    assert own[-1]["result"]["task"]["id"] == task["id"]
    assert state_of(own[-1]["result"]) == "TASK_STATE_INPUT_REQUIRED"
    (refused,) = other
    assert refused["error"]["code"] == a2a.TASK_NOT_FOUND


@pytest.mark.anyio
async def test_list_tasks_lists_only_the_callers_tasks(network: Network) -> None:
    """The upstream sees one client, the gateway: ListTasks gives each caller its own
    tasks, never another caller's (carol's in the group is not in alice's list)."""

    mine_request = request("SendMessage", user_message("quote"))
    (mine,) = await chat(network, mine_request, network.contact)
    (carols,) = await chat(
        network,
        request("SendMessage", user_message("quote")),
        network.carol_group,
        core="carol",
        member="bot",
    )
    (listing,) = await chat(network, request("ListTasks", {}), network.contact)
    (carols_listing,) = await chat(
        network, request("ListTasks", {}), network.carol_group, core="carol", member="bot"
    )
    ids = {t["id"] for t in listing["result"].get("tasks", [])}
    carol_ids = {t["id"] for t in carols_listing["result"].get("tasks", [])}
    assert mine["result"]["task"]["id"] in ids
    assert carols["result"]["task"]["id"] in carol_ids
    assert not ids & carol_ids
    assert listing["result"]["totalSize"] == len(ids)


@pytest.mark.anyio
async def test_push_notification_methods_are_not_supported(network: Network) -> None:
    """The text: "A bot answers the push notification methods with A2A's
    PushNotificationNotSupportedError"."""
    message = request(
        "CreateTaskPushNotificationConfig",
        {"taskId": "t-1", "url": "https://example.com/hook"},
    )

    (answer,) = await chat(network, message, network.contact)
    assert answer["error"]["code"] == a2a.PUSH_NOTIFICATION_NOT_SUPPORTED


@pytest.mark.anyio
async def test_the_card_is_the_upstreams_with_the_simplex_interface_added(network: Network) -> None:
    """The text: "A bot answers GetExtendedAgentCard with its Agent Card. For a caller without
    credentials, it is the public card": the upstream's card, with the SimpleX interface
    (agent_card_interface) added."""

    (answer,) = await chat(network, request("GetExtendedAgentCard", {}), network.contact)
    card = answer["result"]
    assert card["name"] == "Acme anvils"
    assert card["skills"][0]["id"] == "quote"
    interfaces = card["supportedInterfaces"]
    assert a2a.agent_card_interface(network.link, "1.0") in interfaces
    assert any(i["protocolBinding"] == "JSONRPC" for i in interfaces)


def test_the_credential_reaches_no_log(network: Network) -> None:
    """The issue: "A credential travels only as a header to the upstream, and never
    reaches a log"."""
    assert any(r["headers"].get("x-api-key") == SECRET for r in seen_by(network.upstream))
    log = network.bot_log.read_text()
    assert SECRET not in log
    assert CALLER_SECRET not in log


# -- the command line --------------------------------------------------------------------------


def serve_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "simplex_rpc", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_an_upstream_that_refuses_is_a_one_line_error(network: Network) -> None:
    """An --a2a-url nobody listens on: exit 2, one line on stderr naming the card it could
    not read, the --header value in no message."""
    result = serve_cli(
        *("--core", f"{network.url}/dave", "--a2a-url", "http://127.0.0.1:9/"),
        *("--header", f"Authorization: Bearer {SECRET}"),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "agent card" in lines[0].lower()
    assert SECRET not in result.stderr


@pytest.mark.parametrize("bad", ["NoColon", ": value", "Bad Name: x", "X-Ok: line\nbreak"])
def test_a_malformed_header_is_a_one_line_error(network: Network, bad: str) -> None:
    """--header takes 'Name: value'; anything else is refused before connecting."""
    result = serve_cli(
        "--core", f"{network.url}/dave", "--a2a-url", network.upstream, "--header", bad
    )
    assert result.returncode == 2
    assert "--header" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a2a_options_need_an_a2a_server(network: Network) -> None:
    """--header belongs to an upstream URL: with --echo it is refused."""
    result = serve_cli("--core", f"{network.url}/dave", "--echo", "--header", "X-A: b")
    assert result.returncode == 2
    assert "--header" in result.stderr


@pytest.mark.anyio
async def test_the_card_url_may_be_given_whole(network: Network) -> None:
    """--a2a-url may name the card itself (a URL ending in .json) instead of the agent's
    base URL under which the well-known URI is read."""
    bot = subprocess.Popen(
        [
            *(PY, "-m", "simplex_rpc", "serve", "--core", f"{network.url}/henry"),
            *("--a2a-url", f"{network.upstream}/.well-known/agent-card.json", "--address"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        link = read_line(bot.stdout, r"^address: (\S+)", "the bot")
        local = Network(**{**network.__dict__, "link": link})

        response = await rpc(local, request("SendMessage", user_message("hello")))
        assert response.error is None, response.error
        assert response.response["result"]["message"]["parts"][0]["text"] == "Hello from Acme"
    finally:
        stop(bot)


# -- in process: --a2a-module ------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_sdk_agent_in_process_serves_a_one_shot_task(network: Network) -> None:
    """--a2a-module MOD:NAME serves an a2a-sdk RequestHandler in the bot's process, as
    --mcp-module does for MCP; its card gets the SimpleX interface."""
    bot = subprocess.Popen(
        [
            *(PY, "-m", "simplex_rpc", "serve", "--core", f"{network.url}/erin"),
            *("--a2a-module", f"{UPSTREAM}:build_handler", "--address", "--declare"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        link = read_line(bot.stdout, r"^address: (\S+)", "the in-process bot")
        local = Network(**{**network.__dict__, "link": link})

        response = await rpc(local, request("SendMessage", user_message("quote")))
        assert response.error is None, response.error
        assert response.response["result"]["task"]["status"]["state"] == TERMINAL
    finally:
        stop(bot)

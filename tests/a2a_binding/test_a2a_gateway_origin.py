"""``serve --a2a-url``: the operator's credential goes only to the configured origin, and
a remote caller's error names no URL of the way to the upstream (issue 32, items 4 and 9).

The probe: a card that listed ``127.0.0.2`` as its JSON-RPC interface got the
operator's ``--header`` credential sent there; gateway errors showed the internal
upstream URL and redirect targets to remote SimpleX callers. Here the upstream
(``tests/_a2a_upstream.py``) serves a card whose interface is another upstream on
``127.0.0.2`` (another origin), or its own ``/moved`` path, which redirects to an
internal address. The bot is ``simplex-rpc serve`` in its own process.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("a2a")

from _a2a_upstream import INTERNAL_TARGET
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

SECRET = "operator-cred-61f0a2"


def upstream(*options: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [PY, str(UPSTREAM), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = read_line(process.stdout, r"^listening: (http://\S+)", "the upstream agent")
    return process, url


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World(_world) as w:
        yield w


class Bot:
    """``simplex-rpc serve --a2a-url`` in its own process; its stderr kept."""

    def __init__(self, world: World, core: str, *options: str) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "simplex_rpc", "serve", "--core", f"{world.url}/{core}", *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        assert self.proc.stderr is not None
        stream = self.proc.stderr
        self._drain = threading.Thread(target=lambda: self.err.extend(stream), daemon=True)
        self._drain.start()

    def link(self) -> str:
        return read_line(self.proc.stdout, r"^address: (\S+)", "the bot")

    def stop(self) -> str:
        stop(self.proc)  # type: ignore[arg-type]
        self._drain.join(10)
        return "".join(self.err)


def network(world: World, link: str) -> Network:
    return Network(
        url=world.url,
        upstream="",
        link=link,
        contact="",
        alice_group="",
        carol_group="",
        bot_log=Path(),
    )


def credentials_seen(url: str) -> list[str]:
    records = [json.dumps(record["headers"]) for record in seen_by(url)]
    return [headers for headers in records if SECRET in headers]


def test_a_card_pointing_to_another_origin_is_refused_with_a_credential(world: World) -> None:
    """Without --follow-card-url, a card whose JSON-RPC interface is at another origin
    is refused when the operator gave --header: serve stops before serving with one
    line naming --follow-card-url, and nothing reaches the other origin."""
    other, other_url = upstream("--host", "127.0.0.2")
    fronted, fronted_url = upstream("--card-url", f"{other_url}/")
    try:
        bot = Bot(
            world,
            "refused",
            *("--a2a-url", fronted_url, "--header", f"Authorization: Bearer {SECRET}"),
            "--address",
        )
        assert bot.proc.wait(60) == 2
        log = bot.stop()
        assert "--follow-card-url" in log and "127.0.0.2" in log
        assert "Traceback" not in log and SECRET not in log
        assert seen_by(other_url) == []
    finally:
        stop(other, fronted)


@pytest.mark.anyio
async def test_follow_card_url_uses_the_other_origin_without_the_credential(world: World) -> None:
    """With --follow-card-url the card's interface is used, without the --header
    credential (the choice logged once); the request is answered by the other origin,
    which never sees the credential."""
    other, other_url = upstream("--host", "127.0.0.2")
    fronted, fronted_url = upstream("--card-url", f"{other_url}/")
    bot = None
    try:
        bot = Bot(
            world,
            "follows",
            *("--a2a-url", fronted_url, "--header", f"Authorization: Bearer {SECRET}"),
            *("--follow-card-url", "--address"),
        )
        link = bot.link()

        for _ in range(2):  # the gateway keeps answering
            hello = request("SendMessage", user_message("hello"))
            response = await rpc(network(world, link), hello)
            assert response.error is None
            assert "Hello from Acme" in json.dumps(response.response)
        assert len(seen_by(other_url)) == 2
        assert credentials_seen(other_url) == []
    finally:
        log = bot.stop() if bot is not None else ""
        stop(other, fronted)
    lines = [line for line in log.splitlines() if "followed without the --header" in line]
    assert len(lines) == 1 and "127.0.0.2" in lines[0]
    assert SECRET not in log


@pytest.mark.anyio
async def test_the_credential_still_goes_to_the_configured_origin(world: World) -> None:
    """A card at the configured origin: the credential goes with every request there."""
    fronted, fronted_url = upstream()
    bot = None
    try:
        bot = Bot(
            world,
            "same",
            *("--a2a-url", fronted_url, "--header", f"Authorization: Bearer {SECRET}"),
            "--address",
        )
        link = bot.link()

        hello = request("SendMessage", user_message("hello"))
        assert (await rpc(network(world, link), hello)).error is None
        assert len(credentials_seen(fronted_url)) == 1
    finally:
        if bot is not None:
            bot.stop()
        stop(fronted)


@pytest.mark.anyio
async def test_errors_to_remote_callers_name_no_url_or_redirect_target(world: World) -> None:
    """The upstream answers with a redirect to an internal address: the caller's error
    says the upstream could not be reached (HTTP 307) and names neither the upstream's
    URL nor the redirect target; the operator's log has the target."""
    fronted, fronted_url = upstream()
    moved = None
    bot = None
    try:
        moved, moved_url = upstream("--card-url", f"{fronted_url}/moved")
        bot = Bot(world, "moved", "--a2a-url", moved_url, "--address")
        link = bot.link()

        response = await rpc(network(world, link), request("SendMessage", user_message("quote")))
        assert response.error is None
        error = response.response["error"]
        assert error["code"] == -32603
        assert error["message"] == "the upstream could not be reached (HTTP 307)"
        text = json.dumps(response.response)
        for leak in ("10.255.0.1", "127.0.0.1", "/moved", "http"):
            assert leak not in text, leak
    finally:
        log = bot.stop() if bot is not None else ""
        stop(moved, fronted)
    assert INTERNAL_TARGET in log  # the operator sees where it pointed


@pytest.mark.anyio
async def test_credentials_in_the_url_and_header_are_in_no_log_line_at_debug(world: World) -> None:
    """At --log-level debug (httpx's and the A2A SDK's lines shown), neither the URL's user
    part nor the --header value is in any line the bot writes."""
    fronted, fronted_url = upstream()
    bot = None
    user_secret = "a2a-url-pw-7713"
    try:
        credentialed = fronted_url.replace("http://", f"http://op:{user_secret}@")
        bot = Bot(
            world,
            "debugged",
            *("--a2a-url", credentialed, "--header", f"X-Api-Key: {SECRET}"),
            *("--address", "--log-level", "debug"),
        )
        link = bot.link()

        hello = request("SendMessage", user_message("hello"))
        assert (await rpc(network(world, link), hello)).error is None
        assert len(credentials_seen(fronted_url)) == 1  # it did reach the upstream
    finally:
        log = bot.stop() if bot is not None else ""
        stop(fronted)
    assert "HTTP Request:" in log  # httpx's INFO lines are there
    assert user_secret not in log and SECRET not in log

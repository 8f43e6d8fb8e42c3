"""The A2A side, as a user meets it (issue 30, item 4).

* A2A section 5.7: an Agent Card's ``version`` and ``skills`` are REQUIRED. The
  card ``a2a-proxy`` serves has both (skills from the address's declarations),
  and the SDK logs no "not spec-compliant" warning, at start or per fetch.
* A2A section 3.6: a request without ``A2A-Version`` is read as version 0.3.
  The proxy's error says that the header is missing, not that "0.3" (a
  version the caller never sent) is not supported.
* ``examples/a2a_quote_agent.py`` is served by ``serve --a2a-module`` and
  answers ``a2a send`` over Service RPC and in a conversation.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from _cli_serving import bot, core
from _programs import CLI, Running
from simplex_rpc.cli import main

pytest.importorskip("a2a.server")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "a2a_quote_agent.py"


def post(url: str, body: dict[str, object], headers: dict[str, str]) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        result: dict[str, object] = json.loads(answer.read())
        return result


def send(text: str) -> dict[str, object]:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}


def test_the_example_answers_a2a_send_on_both_transports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with bot("--a2a-module", f"{EXAMPLE}:build_handler", "--declare") as bg:
        capsys.readouterr()
        assert main(["a2a", "send", *core(bg), bg.link, "quote anvil"]) == 0
        assert capsys.readouterr().out == "One anvil: 120 EUR.\n"
        assert main(["a2a", "send", *core(bg), "--via", "chat", "@1", "quote tongs"]) == 0
        assert capsys.readouterr().out == "One tongs: 9 EUR.\n"


def test_the_proxys_card_is_complete_and_a_missing_version_header_is_named() -> None:
    with bot("--a2a-module", f"{EXAMPLE}:build_handler", "--declare") as bg:
        proxy = Running.__new__(Running)
        proxy.process = subprocess.Popen(
            [*CLI, "a2a-proxy", "--core", f"{bg.url}/alice", bg.link],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = proxy.line().removeprefix("listening: ")
            with urllib.request.urlopen(f"{url}/.well-known/agent-card.json", timeout=60) as r:
                card = json.loads(r.read())
            assert card["version"]
            (skill,) = card["skills"]
            assert skill["id"] == "message" and "A2A 1.0" in skill["description"]
            assert skill["tags"][0] == "simplex"

            refused = post(f"{url}/", send("quote anvil"), {})
            error = refused["error"]
            assert isinstance(error, dict) and error["code"] == -32009
            assert "no A2A-Version header" in error["message"], error
            assert "A2A-Version: 1.0" in error["message"]
            assert refused["id"] == 7

            answered = post(f"{url}/", send("quote anvil"), {"A2A-Version": "1.0"})
            assert "One anvil: 120 EUR." in json.dumps(answered)
        finally:
            status, _, err = proxy.stop()
        assert status == 0, err
        assert "not spec-compliant" not in err and "Version mismatch" not in err, err

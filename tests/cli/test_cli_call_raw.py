"""``simplex-rpc call --raw JSON``: any service, with the exit statuses of ``call``.

0 for an answer, 1 for an error answer (read with ``--errors``: the protocol
text's ``{"error": ...}`` by default, ``typed`` for ``{"type": "error", ...}``),
2 for a request refused before it is sent or by the core (one line on stderr).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import simplex_rpc as sx
from _cli_serving import Background, call, serving
from simplex_rpc.adapter import AnswerStore, ChatCore
from simplex_rpc.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "badge_style_service.py"


def _badge() -> object:
    spec = importlib.util.spec_from_file_location("badge_style_service_cli", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_call_raw_sends_the_object_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """An envelope is one object among others: the echo bot answers it, and the answer
    object is printed as it is."""
    with serving("--echo", "--protocol", "echo") as bg:
        capsys.readouterr()
        assert main(call(bg, "--raw", '{"protocol": "echo", "request": {"q": 1}}')) == 0
        assert json.loads(capsys.readouterr().out) == {"response": {"q": 1}}
        assert main(call(bg, "--raw", '{"version": 1, "request": {"type": "status"}}')) == 1
        assert json.loads(capsys.readouterr().out)["error"]["code"] == "bad_request"


def test_call_raw_refuses_what_cannot_be_a_raw_request(capsys: pytest.CaptureFixture[str]) -> None:
    with serving("--echo") as bg:
        capsys.readouterr()
        for args, says in [
            (["--raw", "[1]"], "--raw: expected a JSON object"),
            (["--raw", "{not json"], "--raw"),
            (["echo", "{}", "--raw", "{}"], "without PROTOCOL and JSON"),
            (["--raw", "{}", "--version", "1"], "--version: not with --raw"),
            ([], "give PROTOCOL and JSON, or --raw JSON"),
            (["echo", "{}", "--errors", "typed"], "--errors: only with --raw"),
        ]:
            assert main(call(bg, *args)) == 2, args
            err = capsys.readouterr().err
            assert says in err and "Traceback" not in err, (args, err)


def test_call_raw_against_a_service_with_typed_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example badge-style service: a signed redeem (exit 0), its identical repeat
    answered from the store, an unknown code (exit 1, --errors typed)."""
    badge = _badge()
    service = badge.BadgeService({"C1"})  # type: ignore[attr-defined]

    async def responder(bg: Background) -> None:
        assert bg.sim is not None
        async with ChatCore.connect(bg.sim.url_for("bob")) as bob:
            await bob.start(service_requests=True)
            bg.link = (await bob.service_address(1)).link
            bg.ready.set()
            await badge.serve(bob, service, AnswerStore())  # type: ignore[attr-defined]

    key = sx.SigningKey.generate()
    key_file = tmp_path / "key.txt"
    key_file.write_text(key.encode() + "\n")
    key_file.chmod(0o600)
    redeem = json.dumps(badge.redeem_request(key, "C1"))  # type: ignore[attr-defined]
    with Background(responder) as bg:
        signed = ["--sign-key", f"@{key_file}", "--errors", "typed"]
        for _ in range(2):
            assert main(call(bg, "--raw", redeem, *signed)) == 0
            out, err = capsys.readouterr()
            assert json.loads(out) == {"type": "badge", "code": "C1", "serial": 1}
            assert key.encode() not in out + err
        assert service.runs == 1
        unknown = json.dumps(badge.redeem_request(key, "NOPE"))  # type: ignore[attr-defined]
        assert main(call(bg, "--raw", unknown, *signed)) == 1
        assert json.loads(capsys.readouterr().out)["code"] == "unknown_code"

"""``simplex-rpc doctor`` against the simulator, in each state it reports (issue 30, item 7).

One line per finding, a hint where one applies: the backend, the extras, and with a
core whether it answers, whether its chat is started (simplex-chat ``-m`` leaves it
stopped), whether the user's address has ratchet keys on its short link (simplexmq
``A_SERVICE ASENotDRAddress`` otherwise) and whether a service request to it is
answered (``ASETimeout`` otherwise). The doctor changes nothing on the core.
"""

from __future__ import annotations

import json
import socket

import pytest

from _cli_serving import Background, serving
from simplex_rpc.cli import main


def findings(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, dict]]:
    status = main(["doctor", "--json", *args])
    rows = json.loads(capsys.readouterr().out)
    return status, {row["what"]: row for row in rows}


def test_without_a_core_it_reports_the_installation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIMPLEX_RPC_CORE", raising=False)
    status, found = findings(capsys)
    assert status == 0
    assert found["backend"]["status"] in ("ok", "note")
    assert found["extra mcp"]["status"] == "ok"
    assert found["core"]["status"] == "note" and "SIMPLEX_RPC_CORE" in found["core"]["hint"]
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ok   backend: ") or lines[0].startswith("note backend: ")


def test_a_core_that_does_not_answer(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status, found = findings(capsys, "--core", f"ws://127.0.0.1:{port}")
    assert status == 1
    assert found["core"]["status"] == "fail" and "nothing listens" in found["core"]["detail"]


def test_a_core_in_maintenance_mode_with_no_address(capsys: pytest.CaptureFixture[str]) -> None:
    """simplex-chat -m: the chat is not started until /_start; the user has no address."""
    with Background(None) as bg:
        status, found = findings(capsys, "--core", f"{bg.url}/fresh")
        assert bg.sim is not None
    assert status == 1
    assert found["core"]["status"] == "ok"
    assert found["address"]["status"] == "note" and "serve --address" in found["address"]["hint"]
    assert found["chat"] == {
        "status": "fail",
        "what": "chat",
        "detail": "not started",
        "hint": found["chat"]["hint"],
    }
    assert "-m" in found["chat"]["hint"]


def test_a_served_address_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """serve --address: the chat started with service requests on, keys on the short link,
    and the probe answered (unsupported_protocol: the responder ran nothing)."""
    with serving("--echo") as bg:
        capsys.readouterr()
        status, found = findings(capsys, "--core", f"{bg.url}/bob")
    assert status == 0, found
    assert found["chat"]["detail"] == "started"
    assert found["address"]["detail"] == "its short link has ratchet keys"
    assert found["service requests"]["status"] == "ok"
    assert "unsupported_protocol" in found["service requests"]["detail"]


def test_service_requests_off_and_an_address_without_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A chat started without service requests: the probe times out (ASETimeout). An
    address made without ratchet keys: ASENotDRAddress, with the way to add them."""

    async def world(bg: Background) -> None:
        assert bg.sim is not None
        from simplex_rpc.adapter import ChatCore

        bg.sim.create_address("keyed", pq_ratchet=True)
        bg.sim.create_address("plain")
        for name in ("keyed", "plain"):
            async with ChatCore.connect(bg.sim.url_for(name)) as core:
                await core.start(service_requests=False)
        bg.ready.set()

    with Background(world) as bg:
        status, off = findings(capsys, "--core", f"{bg.url}/keyed")
        assert status == 1
        assert off["chat"]["detail"] == "started"
        assert off["address"]["status"] == "ok"
        assert off["service requests"]["status"] == "fail"
        assert "not answered within" in off["service requests"]["detail"]
        status, plain = findings(capsys, "--core", f"{bg.url}/plain")
        assert status == 1
        assert plain["address"]["status"] == "fail"
        assert "no ratchet keys" in plain["address"]["detail"]
        assert "pq_ratchet=on" in plain["address"]["hint"]

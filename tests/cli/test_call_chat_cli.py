"""``simplex-rpc serve --chat`` and ``simplex-rpc call-chat`` against the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _cli_serving import EXAMPLE, Background
from simplex_rpc import mcp
from simplex_rpc.cli import _serve as _cli_serve
from simplex_rpc.cli import build_parser, main

REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"a": [1, 2]}}


def bot(*extra: str) -> Background:
    """core bob runs ``serve --chat``; alice has bob as contact 1 and a group #1 with bob."""

    async def responder(bg: Background) -> Any:
        assert bg.sim is not None
        bg.sim.connect("alice", "bob")
        bg.sim.create_group("team", "alice", ["bob"])
        args = build_parser().parse_args(
            ["serve", "--core", bg.sim.url_for("bob"), "--chat", *extra]
        )

        def ready(link: str) -> None:
            bg.ready.set()

        await _cli_serve.run_serve(args, on_ready=ready)

    return Background(responder)


def call_chat(bg: Background, *args: str) -> list[str]:
    return ["call-chat", "--core", f"{bg.url}/alice", "--wait", "10", *args]


def test_call_chat_prints_each_reply_as_a_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    """serve --chat answers /_call with the same handler; call-chat prints the replies."""
    with bot("--echo", "--protocol", "echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call_chat(bg, "@1", "echo", json.dumps(REQUEST))) == 0
        assert main(call_chat(bg, "#1", "echo", json.dumps(REQUEST), "--member", "bob")) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert line["sender"] == "bob" and line["ends"] is True
        assert line["message"] == {"jsonrpc": "2.0", "id": 7, "result": {"a": [1, 2]}}


def test_call_chat_refusals_are_one_line_with_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * 16_000}))
    with bot("--echo") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        assert main(call_chat(bg, "@1", "echo", f"@{big}")) == 2
        assert "does not fit" in capsys.readouterr().err
        assert main(call_chat(bg, "#1", "echo", "{}", "--member", "nobody")) == 2
        assert "no member" in capsys.readouterr().err
        assert main(call_chat(bg, "alice", "echo", "{}")) == 2
        assert "ChatRef" in capsys.readouterr().err
        assert main(call_chat(bg, "@1", "echo", "[1]")) == 2


def test_serve_chat_with_an_mcp_server(capsys: pytest.CaptureFixture[str]) -> None:
    """serve --chat --mcp-module answers /_call mcp through McpBridge."""
    pytest.importorskip("mcp.server")
    with bot("--mcp-module", f"{EXAMPLE}:build_server") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        request = mcp.make_request("tools/list", id=1)
        assert main(call_chat(bg, "@1", "mcp", json.dumps(request))) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["ends"] and line["message"]["id"] == 1 and "tools" in line["message"]["result"]


def test_serve_chat_declare_declares_both_transports_with_the_servers_versions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """serve --chat --declare declares transports.rpc and transports.chat together (no
    writer loses the other's), with the versions the MCP server serves; the echo
    responder serves no versions, so --declare is refused for it."""
    pytest.importorskip("mcp.server")
    with bot("--mcp-module", f"{EXAMPLE}:build_server", "--declare") as bg:
        capsys.readouterr()  # the responder's ready lines (stdout)
        # Ready means declared and listening: the profile is already written, and a
        # /_call sent now is answered.
        assert bg.sim is not None
        declared = bg.sim.profile("bob")["preferences"]["protocols"]["mcp"]
        assert declared["transports"] == {"chat": True, "rpc": True}
        assert declared["versions"] and all(isinstance(v, str) for v in declared["versions"])
        request = mcp.make_request("tools/list", id=1)
        assert main(call_chat(bg, "@1", "mcp", json.dumps(request))) == 0
        capsys.readouterr()
        argv = ["serve", "--core", f"{bg.url}/carol", "--echo", "--chat", "--declare"]
        assert main(argv) == 2
        assert "--declare" in capsys.readouterr().err

"""Calls a person can type (issue 30): ``mcp tools``, ``mcp call``, ``a2a send``.

The protocol text's "MCP binding" puts the binding's ``_meta`` in every
request and its "A2A binding" the ``a2a-service-parameters`` member: the
commands add them (through the library's own clients), so that a person
types only the tool and its arguments. The raw ``call`` and ``call-chat``
keep their bytes but exit 1 when the answer is an error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli_serving import EXAMPLE, bot, core
from simplex_rpc import mcp
from simplex_rpc.cli import main
from simplex_rpc.cli._common import CliError
from simplex_rpc.cli._mcp_a2a import parse_arguments

pytest.importorskip("mcp.server")

UPSTREAM = Path(__file__).resolve().parents[1] / "_a2a_upstream.py"


def test_arguments_are_httpie_style() -> None:
    """key=value is a string; key:=JSON any JSON value."""
    assert parse_arguments(["item=anvil", "lines:=3", "on:=true", 'x:={"a":[1]}', "e="]) == {
        "item": "anvil",
        "lines": 3,
        "on": True,
        "x": {"a": [1]},
        "e": "",
    }
    for bad in (["item"], ["=x"], ["a=1", "a=2"], ["n:=not json"], [":=1"]):
        with pytest.raises(CliError):
            parse_arguments(bad)


def test_mcp_tools_and_mcp_call(capsys: pytest.CaptureFixture[str]) -> None:
    """The tools are listed and called with no hand-written envelope, over rpc and chat."""
    with bot("--mcp-module", f"{EXAMPLE}:build_server") as bg:
        capsys.readouterr()  # the ready lines
        assert main(["mcp", "tools", *core(bg), bg.link]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == "availability item="
        assert "catalog [lines=]" in out and "Items in stock" in out
        assert main(["mcp", "call", *core(bg), bg.link, "availability", "item=anvil"]) == 0
        assert capsys.readouterr().out == "12 anvils are in stock.\n"
        assert main(["mcp", "call", *core(bg), bg.link, "catalog", "lines:=2"]) == 0
        assert capsys.readouterr().out == "1. anvil\n2. hammer\n"
        assert main(["mcp", "call", *core(bg), "--via", "chat", "@1", "availability",
                     "item=tongs"]) == 0  # fmt: skip
        assert capsys.readouterr().out == "7 tongss are in stock.\n"
        assert main(["mcp", "call", *core(bg), "--json", bg.link, "availability", "item=x"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["content"][0]["text"] == "0 xs are in stock."


def test_mcp_call_errors_exit_1_or_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An error the bot answered is exit status 1, one line; one the call never made is 2."""
    with bot("--mcp-module", f"{EXAMPLE}:build_server") as bg:
        capsys.readouterr()
        assert main(["mcp", "call", *core(bg), bg.link, "no_such_tool"]) == 1
        err = capsys.readouterr().err
        assert "no_such_tool" in err and "Traceback" not in err
        assert main(["mcp", "call", *core(bg), bg.link, "availability", "item"]) == 2
        assert "key=value" in capsys.readouterr().err
        assert main(["mcp", "call", *core(bg), "nowhere", "availability"]) == 2
        err = capsys.readouterr().err.strip()
        assert "neither a link nor a name" in err and len(err.splitlines()) == 1, err
        assert main(["mcp", "call", *core(bg), "simplex:/nowhere", "availability"]) == 2
        err = capsys.readouterr().err.strip()
        assert "invalidConnReq" in err and len(err.splitlines()) == 1, err


def test_the_core_comes_from_simplex_rpc_core(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with bot("--mcp-module", f"{EXAMPLE}:build_server") as bg:
        capsys.readouterr()
        monkeypatch.setenv("SIMPLEX_RPC_CORE", f"{bg.url}/alice")
        assert main(["mcp", "call", bg.link, "availability", "item=anvil"]) == 0
        assert capsys.readouterr().out == "12 anvils are in stock.\n"
    monkeypatch.delenv("SIMPLEX_RPC_CORE")
    with pytest.raises(SystemExit) as stopped:
        main(["mcp", "tools", "simplex:/a#x"])
    assert stopped.value.code == 2
    assert "--core (or set SIMPLEX_RPC_CORE=" in capsys.readouterr().err


def test_raw_call_and_call_chat_exit_1_on_a_json_rpc_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The bytes stay exact (the answer is printed as it came) but the status says error."""
    request = json.dumps(mcp.make_request("tools/list", id=1) | {"params": {}})
    with bot("--mcp-module", f"{EXAMPLE}:build_server") as bg:
        capsys.readouterr()
        status = main(["call", "--core", f"{bg.url}/alice", bg.link, "mcp", request])
        out = json.loads(capsys.readouterr().out)
        assert "error" in out["response"] and status == 1
        status = main(["call-chat", "--core", f"{bg.url}/alice", "@1", "mcp", request])
        line = json.loads(capsys.readouterr().out)
        assert "error" in line["message"] and status == 1
        good = json.dumps(mcp.make_request("tools/list", id=2))
        assert main(["call-chat", "--core", f"{bg.url}/alice", "@1", "mcp", good]) == 0


def test_a2a_send(capsys: pytest.CaptureFixture[str]) -> None:
    """A2A-Version and the service parameters are the client's: the text is all one types."""
    pytest.importorskip("a2a.server")
    with bot("--a2a-module", f"{UPSTREAM}:build_handler", "--declare") as bg:
        capsys.readouterr()
        assert main(["a2a", "send", *core(bg), bg.link, "hello"]) == 0
        assert capsys.readouterr().out == "Hello from Acme\n"
        assert main(["a2a", "send", *core(bg), bg.link, "quote"]) == 0
        assert "240 EUR" in capsys.readouterr().out
        assert main(["a2a", "send", *core(bg), "--via", "chat", "@1", "hello"]) == 0
        assert capsys.readouterr().out == "Hello from Acme\n"

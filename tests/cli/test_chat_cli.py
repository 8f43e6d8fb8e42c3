"""The chat subcommands: ``llms-txt`` and ``call-text``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simplex_rpc.cli import main

LLMS = (
    "# Acme\n\n## Communications\n\n"
    "- [Acme news](https://smp12.simplex.im/c#k): SimpleX updates for people and agents,"
    " weekly. Product news.\n"
    "- [Ask Acme](https://smp12.simplex.im/a#k): SimpleX business contact for agents, MCP, A2A."
    " Orders.\n"
)


def test_llms_txt_prints_addresses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "llms.txt"
    path.write_text(LLMS, encoding="utf-8")
    assert main(["llms-txt", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Acme news\n  url:       https://smp12.simplex.im/c#k" in out
    assert "type:      business contact" in out and "protocols: mcp, a2a" in out


def test_llms_txt_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "llms.txt"
    path.write_text(LLMS, encoding="utf-8")
    assert main(["llms-txt", "--json", str(path)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [a["title"] for a in got["addresses"]] == ["Acme news", "Ask Acme"]
    assert got["addresses"][1]["protocols"] == ["mcp", "a2a"]
    assert got["addresses"][1]["brokenRule"] is None
    assert got["problems"] == []


def test_llms_txt_reports_problems_and_broken_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "llms.txt"
    path.write_text(LLMS.replace("/a#k", "/g#k") + "stray text\n", encoding="utf-8")
    assert main(["llms-txt", str(path)]) == 1
    captured = capsys.readouterr()
    assert "BROKEN:    a SimpleX business contact entry requires a contact address link" in (
        captured.out
    )
    assert f"{path}:7: not a list item of the section: stray text" in captured.err
    assert main(["llms-txt", "--json", str(path)]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["problems"] == [
        {"line": 7, "text": "stray text", "message": "not a list item of the section"}
    ]


def test_llms_txt_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LLMS.encode())))
    assert main(["llms-txt", "-"]) == 0
    assert "Ask Acme" in capsys.readouterr().out


def test_llms_txt_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llms-txt", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"## Communications\n\xff\n")
    assert main(["llms-txt", str(bad)]) == 2
    assert "invalid UTF-8 at byte offset 18" in capsys.readouterr().err


def test_call_text_prints_the_command_and_fit(capsys: pytest.CaptureFixture[str]) -> None:
    request = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    assert main(["call-text", "mcp", request, "--member", "Acme Support"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        '/_call @\'Acme Support\' mcp {"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    )
    assert "fits one message" in captured.err


def test_call_text_json_and_too_large(capsys: pytest.CaptureFixture[str]) -> None:
    big = json.dumps({"x": "y" * 16000})
    assert main(["call-text", "--json", "a2a", big]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["fits"] is False and got["limit"] == 15602
    assert got["encodedSize"] + got["allowance"] > 15602
    assert main(["call-text", "a2a", big]) == 1
    assert "does NOT fit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["call-text", "MCP", "{}"], "not a protocol name"),
        (["call-text", "mcp", "[1]"], "expected a JSON object"),
        (["call-text", "mcp", '{"a":1,"a":1}'], "duplicate member name"),
        (["call-text", "mcp", "{}", "--member", "a'b c"], "member"),
    ],
)
def test_call_text_bad_input(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1

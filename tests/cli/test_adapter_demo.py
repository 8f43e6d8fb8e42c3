"""``simplex-rpc demo``, its second part: the exchange through the simulated chat cores."""

from __future__ import annotations

import io
import json
import sys

import pytest

from simplex_rpc.cli import _demo


@pytest.mark.anyio
async def test_through_core_has_every_outcome() -> None:
    """Signed with requestKey: verified signer, MCP answer; unsigned: no signer; requestKey
    against the signer: bad_request before the handler; an unserved protocol:
    unsupported_protocol."""
    core = await _demo.through_core()
    assert core.ok
    signed, unsigned, mismatch, other = core.exchanges
    assert signed.signer_seen == _demo.demo_signing_key().public_key.encode()
    assert signed.response["response"]["id"] == 1
    assert unsigned.signer_seen is None and unsigned.handler_called
    assert mismatch.code == "bad_request" and not mismatch.handler_called
    assert other.code == "unsupported_protocol"
    assert core.stats == {"requests": 4, "delivered": 4, "responses": 4, "duplicate_responses": 0}


@pytest.mark.anyio
async def test_through_core_without_the_mcp_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the mcp extra the responder answers with the protocol text's example."""
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    core = await _demo.through_core()
    assert core.ok and "not installed" in core.server


def test_the_demo_prints_both_parts_the_same_each_run() -> None:
    first, second = io.StringIO(), io.StringIO()
    assert _demo.run_demo(out=first) == 0
    assert _demo.run_demo(out=second) == 0
    text = first.getvalue()
    assert text == second.getvalue()
    assert "Through a chat core" in text and "ws://" not in text and "simplex:/" not in text
    assert text.rstrip().endswith("All steps as expected.")
    summary = io.StringIO()
    assert _demo.run_demo(json_output=True, out=summary) == 0
    document = json.loads(summary.getvalue())
    assert document["ok"] is True and document["core"]["ok"] is True


@pytest.mark.anyio
async def test_through_chat_is_one_mcp_call_in_a_group_with_a_progress_notification() -> None:
    """make demo shows /_call mcp in a group: a progress notification, then the result,
    both quoting the command and from the mentioned bot."""
    demo = await _demo.through_chat()
    assert demo.ok and demo.quoted_command
    assert demo.command.startswith("/_call @acme mcp ")
    assert [r["ends"] for r in demo.replies] == [False, True]


@pytest.mark.anyio
async def test_through_chat_without_the_mcp_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    demo = await _demo.through_chat()
    assert demo.ok and "not installed" in demo.server


def test_the_demo_text_shows_the_chat_transport_beside_service_rpc() -> None:
    out = io.StringIO()
    assert _demo.run_demo(out=out) == 0
    text = out.getvalue()
    assert text.index("Through a chat core") < text.index("Over the chat transport")
    assert "notifications/progress" in text and "<- ends the answer" in text

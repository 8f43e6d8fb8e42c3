"""``make demo`` ends with the MCP SDK's own client calling the demo bot (issue 11).

``mcp.Client`` over ``SimplexTransport``: over Service RPC (the address), then
over ``/_call`` in the direct chat, where the bot's progress notification
reaches the call's progress callback before the result.
"""

from __future__ import annotations

import io
import sys

import pytest

from simplex_rpc.cli import _demo


@pytest.mark.anyio
async def test_the_sdk_client_calls_the_demo_bot_over_rpc_and_over_chat() -> None:
    demo = await _demo.through_sdk()
    assert demo.installed and demo.ok
    assert demo.tools == ["availability", "catalog"]
    assert demo.rpc_answer == "12 anvils are in stock."
    assert demo.progress == [(0.0, 1.0, "listing")]
    assert demo.chat_answer == "anvil, hammer"


def test_the_demo_ends_with_the_sdk_client() -> None:
    out = io.StringIO()
    assert _demo.run_demo(out=out) == 0
    text = out.getvalue()
    assert text.index("Over the chat transport") < text.index("The MCP SDK's own client")
    assert "progress callback: 0 of 1, 'listing'" in text
    assert text.rstrip().endswith("All steps as expected.")


@pytest.mark.anyio
async def test_without_the_mcp_sdk_the_part_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    demo = await _demo.through_sdk()
    assert not demo.installed and demo.ok
    assert "not installed" in _demo.render([_demo.sdk_section(demo)])

"""The protocol text's examples, each held once, as printed.

The protocol text is "Agent protocols over SimpleX" (revision 2, 2026-10-21,
``shared/seeds/agent-protocols-over-simplex.txt``). Each ``*_TEXT`` constant
is one of its examples character for character, whitespace included, so a
test can find it in the text (``tests/mcp_binding/test_mcp.py`` checks every constant of
this module). The library's vectors and demo and the tests take the examples
from here.

The functions parse an example afresh on every call: callers get their own
objects and may change them without touching anyone else's.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = [
    "A2A_SEND_MESSAGE_REQUEST_TEXT",
    "LLMS_TXT_SECTION_TEXT",
    "MCP_TOOLS_CALL_REQUEST_TEXT",
    "MCP_TOOLS_CALL_RESPONSE_TEXT",
    "MCP_TOOLS_LIST_COMMAND_TEXT",
    "MCP_TOOLS_LIST_REPLY_TEXT",
    "PREFERENCES_TEXT",
    "a2a_send_message_request",
    "mcp_tools_call_request",
    "mcp_tools_call_response",
    "mcp_tools_list_reply",
    "preferences",
]

LLMS_TXT_SECTION_TEXT: Final = """## Communications

- [Acme news](https://smp12.simplex.im/c#…): SimpleX updates for people and agents, weekly. Product news and offers.
- [Acme customers](https://smp12.simplex.im/g#…): SimpleX group for people. Questions and tips from customers.
- [Ask Acme](https://smp12.simplex.im/a#…): SimpleX business contact for agents, MCP, A2A. Orders and availability.
- [Acme support](mailto:support@acme.example): Email contact for people."""  # noqa: E501
"""From "Addresses in llms.txt": the example ``## Communications`` section (no final newline)."""

PREFERENCES_TEXT: Final = """{
  "protocols": {
    "mcp": {
      "versions": ["2026-07-28"],
      "transports": {"chat": true, "rpc": true}
    },
    "a2a": {
      "versions": ["1.0"],
      "transports": {"chat": true, "rpc": true}
    }
  }
}"""
"""From "Profile declarations", "protocols": the example preferences of a contact profile."""

MCP_TOOLS_LIST_COMMAND_TEXT: Final = (
    '/_call mcp {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": '
    '{"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
    '"io.modelcontextprotocol/clientCapabilities": {}}}}'
)
"""From "MCP binding", "Examples": listing tools in a conversation, the ``/_call mcp`` command."""

MCP_TOOLS_LIST_REPLY_TEXT: Final = """{
  "jsonrpc": "2.0",
  "id": 1,
  "result": {
    "resultType": "complete",
    "tools": [
      {
        "name": "availability",
        "description": "Items in stock",
        "inputSchema": {
          "type": "object",
          "properties": {"item": {"type": "string"}},
          "required": ["item"]
        }
      }
    ],
    "ttlMs": 300000,
    "cacheScope": "public"
  }
}"""
"""From "MCP binding", "Examples": listing tools in a conversation, the reply."""

MCP_TOOLS_CALL_REQUEST_TEXT: Final = """{
  "protocol": "mcp",
  "request": {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
      "name": "availability",
      "arguments": {"item": "anvil"},
      "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
      }
    }
  }
}"""
"""From "MCP binding", "Examples": calling a tool over Service RPC, the request envelope."""

MCP_TOOLS_CALL_RESPONSE_TEXT: Final = """{
  "response": {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
      "resultType": "complete",
      "content": [{"type": "text", "text": "12 anvils are in stock."}],
      "isError": false
    }
  }
}"""
"""From "MCP binding", "Examples": calling a tool over Service RPC, the response envelope."""

A2A_SEND_MESSAGE_REQUEST_TEXT: Final = """{
  "protocol": "a2a",
  "request": {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "a2a-service-parameters": {"A2A-Version": "1.0"},
    "params": {
      "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "Price of two anvils delivered to Lisbon"}]
      }
    }
  }
}"""
"""From "A2A binding", "A2A examples": a one-shot task over Service RPC, the request envelope."""


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):  # pragma: no cover - every example is an object
        raise TypeError("an example is not a JSON object")
    return value


def preferences() -> dict[str, Any]:
    """A new parsed copy of :data:`PREFERENCES_TEXT` (an object with ``protocols``)."""
    return _object(PREFERENCES_TEXT)


def mcp_tools_list_reply() -> dict[str, Any]:
    """A new parsed copy of :data:`MCP_TOOLS_LIST_REPLY_TEXT` (a JSON-RPC response)."""
    return _object(MCP_TOOLS_LIST_REPLY_TEXT)


def mcp_tools_call_request() -> dict[str, Any]:
    """A new parsed copy of :data:`MCP_TOOLS_CALL_REQUEST_TEXT` (a request envelope)."""
    return _object(MCP_TOOLS_CALL_REQUEST_TEXT)


def mcp_tools_call_response() -> dict[str, Any]:
    """A new parsed copy of :data:`MCP_TOOLS_CALL_RESPONSE_TEXT` (a response envelope)."""
    return _object(MCP_TOOLS_CALL_RESPONSE_TEXT)


def a2a_send_message_request() -> dict[str, Any]:
    """A new parsed copy of :data:`A2A_SEND_MESSAGE_REQUEST_TEXT` (a request envelope)."""
    return _object(A2A_SEND_MESSAGE_REQUEST_TEXT)

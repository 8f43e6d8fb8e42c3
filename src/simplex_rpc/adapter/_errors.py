"""How the adapter reads the chat core's messages, and how it fails when the core does."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from ..errors import ChatCoreError


class ChatCoreClosed(ChatCoreError):
    """The connection to the chat core is closed or was lost; pending commands fail with it."""


class ChatCoreTimeout(ChatCoreError):
    """The chat core did not answer a command in time."""


def _loads_core(text: str | bytes) -> Any:
    """Parse a message of the local chat core (stdlib JSON, no NaN, bounded by its size)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {type(exc).__name__}") from None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")

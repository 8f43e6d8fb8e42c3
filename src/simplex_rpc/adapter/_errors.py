"""How the adapter reads the chat core's messages, and how it fails when the core does."""

from __future__ import annotations

from typing import Any

from .._wire import strict_json as _json
from ..errors import ChatCoreError


class ChatCoreClosed(ChatCoreError):
    """The connection to the chat core is closed or was lost; pending commands fail with it."""


class ChatCoreTimeout(ChatCoreError):
    """The chat core did not answer a command in time."""


class _AnswerLost(ChatCoreClosed):
    """The connection was lost after the command was sent and before its answer came.

    The core may have run the command: for ``/_service_response``, the answer
    may have been delivered, and only its acknowledgement was lost.
    """


def _loads_core(text: str | bytes) -> Any:
    """Parse a message of the local chat core strictly (the library's JSON rules).

    Raises ValueError (never RecursionError or the like) naming what is wrong.
    """
    try:
        return _json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None

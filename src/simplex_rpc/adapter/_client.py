"""Argument checks shared by the SDK client transports (MCP and A2A).

No SDK imports, so that both client modules can use them.
"""

from __future__ import annotations

from typing import Final

from .._wire.envelope import ErrorInfo, Request
from ._core import check_seconds
from ._service import service_request_command

__all__ = [
    "DEFAULT_MAX_RETRY_AFTER",
    "RETRIES",
    "check_destination",
    "check_seconds",
    "describe_error",
]

DEFAULT_MAX_RETRY_AFTER: Final = 60.0
"""Seconds of ``retryAfter`` honoured by default; a longer wait is returned as the error."""

RETRIES: Final = 3
"""How many times one request is repeated after errors with ``retryAfter``."""

_PROBE = Request(protocol="probe", request=None)


def check_destination(user_id: object, target: object) -> None:
    """Raise :class:`SimplexRpcError` for a user id or a target the core's command refuses.

    The adapter's own command builder checks them, so the rules are the same
    as for every Service RPC request.
    """
    service_request_command(user_id, target, _PROBE, timeout=None)  # type: ignore[arg-type]


def describe_error(error: ErrorInfo, hint: str = "") -> str:
    """The text a client shows for an envelope error.

    The envelope code first, then the bot's message (at most 300 characters),
    its ``retryAfter`` and ``hint`` (what to do instead).
    """
    text = error.code
    if error.message:
        text += f": {error.message[:300]}"
    if error.retry_after is not None:
        text += f" (retryAfter {error.retry_after} s)"
    if hint:
        text += f"; {hint}"
    return text

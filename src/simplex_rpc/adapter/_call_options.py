"""The options a caller's round trip takes, one definition for every binding's transport."""

from __future__ import annotations

from typing import TypedDict

from .._wire.keys import SigningKey

__all__ = ["CallOptions"]


class CallOptions(TypedDict, total=False):
    """The options every binding's client transport takes alike, for the round trip.

    ``sign_key`` signs Service RPC requests (default: unsigned); ``timeout`` is the
    seconds the bot has for each request (default 30); an error with ``retryAfter`` is
    repeated when its wait is at most ``max_retry_after`` seconds (default 60,
    ``adapter._client.DEFAULT_MAX_RETRY_AFTER``); ``member`` is the bot's display name in a group.
    """

    sign_key: SigningKey | None
    timeout: float
    max_retry_after: float
    member: str | None

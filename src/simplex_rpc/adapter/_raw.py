"""The raw layer's values: a request as any JSON object, and the shapes of error answers.

Service RPC carries any JSON object: the protocol text's envelope
(``{protocol, request, version?, requestKey?}``) is one codec among others.
The supporter badge service (simplex-chat ``docs/protocol/badges-rpc.md``)
sends ``{"version", "purchaseKey"?, "request": {"type": …}}`` and answers
objects tagged by ``type``, among them ``{"type": "error", "code",
"message"?, "retryAfter"?}``. The raw responder (``ChatCore.serve_raw``)
must still answer on its own (overload, deadlines, a handler that fails, a
request that is not JSON), and the raw requester must find ``retryAfter``
in an answer: an :class:`ErrorFormat` says how errors look in a service's
answers. Two ship: :data:`ENVELOPE_ERRORS` (the protocol text's ``{"error":
{"code", "message"?, "retryAfter"?}}``, the default) and
:data:`TYPED_ERRORS` (the badge service's ``{"type": "error", "code",
"message"?, "retryAfter"?}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._wire.envelope import MAX_UINT32
from .._wire.keys import PublicKey
from .._wire.redact import show
from ..errors import SimplexRpcError

__all__ = [
    "ENVELOPE_ERRORS",
    "TYPED_ERRORS",
    "EnvelopeErrors",
    "ErrorFormat",
    "RawRequest",
    "TypedErrors",
]


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class RawRequest:
    """One request as a raw responder's handler sees it.

    ``signer`` is the key the core verified the signature with, or None for
    an unsigned request; ``data`` is the request, a JSON object read with the
    library's strict rules. The content is the peer's data: never code. The
    repr names its size, never its content (it may carry credentials).
    """

    request_id: str
    signer: PublicKey | None
    data: dict[str, Any]
    user_id: int

    def __repr__(self) -> str:
        return (
            f"RawRequest(request_id={show(self.request_id, 80)}, signer={self.signer!r},"
            f" data=<an object of {len(self.data)} members>, user_id={self.user_id!r})"
        )


def _uint32(value: object) -> int | None:
    # JTD uint32: a JSON number with a zero fractional part, in range.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UINT32:
        return None
    return value


@runtime_checkable
class ErrorFormat(Protocol):
    """How a service's answers carry an error: built by the responder for the answers it
    gives itself (shed, late, failed), read for budgets, answer stores and retries."""

    def error(self, code: str, message: str, retry_after: int | None = None) -> dict[str, Any]:
        """The answer object of an error: ``code`` (one of the protocol text's codes:
        ``bad_request``, ``rate_limited``, ``internal``, ``too_large``...), a message, and
        ``retryAfter`` when a repeat can succeed."""
        ...

    def code(self, answer: Mapping[str, Any]) -> str | None:
        """The error code of ``answer``, or None when it is not an error."""
        ...

    def retry_after(self, answer: Mapping[str, Any]) -> int | None:
        """The ``retryAfter`` seconds of an error answer (a uint32), or None."""
        ...


class EnvelopeErrors:
    """The protocol text's errors: ``{"error": {"code", "message"?, "retryAfter"?}}``."""

    def __repr__(self) -> str:
        return "ENVELOPE_ERRORS"

    def error(self, code: str, message: str, retry_after: int | None = None) -> dict[str, Any]:
        """See :meth:`ErrorFormat.error`."""
        error: dict[str, Any] = {"code": str(code), "message": message}
        if retry_after is not None:
            error["retryAfter"] = retry_after
        return {"error": error}

    def code(self, answer: Mapping[str, Any]) -> str | None:
        """See :meth:`ErrorFormat.code`."""
        error = answer.get("error")
        if not isinstance(error, dict):
            return None
        code = error.get("code")
        return code if isinstance(code, str) else None

    def retry_after(self, answer: Mapping[str, Any]) -> int | None:
        """See :meth:`ErrorFormat.retry_after`."""
        error = answer.get("error")
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            return None
        return _uint32(error.get("retryAfter"))


class TypedErrors:
    """Errors tagged in the answer object itself, as the badge service writes them:
    ``{"type": "error", "code", "message"?, "retryAfter"?}`` (``tag`` and ``value``
    name the tag member and its value)."""

    def __init__(self, tag: str = "type", value: str = "error") -> None:
        if not isinstance(tag, str) or not tag or tag in ("code", "message", "retryAfter"):
            raise SimplexRpcError(
                "tag: expected a member name other than code, message, retryAfter"
            )
        if not isinstance(value, str):
            raise SimplexRpcError("value: expected a string")
        self.tag = tag
        self.value = value

    def __repr__(self) -> str:
        return f"TypedErrors(tag={self.tag!r}, value={self.value!r})"

    def error(self, code: str, message: str, retry_after: int | None = None) -> dict[str, Any]:
        """See :meth:`ErrorFormat.error`."""
        answer: dict[str, Any] = {self.tag: self.value, "code": str(code), "message": message}
        if retry_after is not None:
            answer["retryAfter"] = retry_after
        return answer

    def code(self, answer: Mapping[str, Any]) -> str | None:
        """See :meth:`ErrorFormat.code`."""
        if answer.get(self.tag) != self.value:
            return None
        code = answer.get("code")
        return code if isinstance(code, str) else None

    def retry_after(self, answer: Mapping[str, Any]) -> int | None:
        """See :meth:`ErrorFormat.retry_after`."""
        if self.code(answer) is None:
            return None
        return _uint32(answer.get("retryAfter"))


#: The protocol text's error shape (the default of ``serve_raw`` and ``service_request_raw``).
ENVELOPE_ERRORS = EnvelopeErrors()
#: The badge service's error shape: ``{"type": "error", "code", "message"?, "retryAfter"?}``.
TYPED_ERRORS = TypedErrors()


def check_error_format(errors: object) -> ErrorFormat:
    if not isinstance(errors, ErrorFormat):
        raise SimplexRpcError(
            "errors: expected an ErrorFormat (error, code, retry_after), got"
            f" {type(errors).__name__}"
        )
    return errors

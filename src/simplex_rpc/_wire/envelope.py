"""Service RPC envelopes (wire.md section 3; the protocol text's JTD schemas).

Parsing is strict (see ``_json``): UTF-8 only, duplicate member names
rejected, bounded depth, no NaN or Infinity. Unknown members are kept in
``extra`` and written back, so a parse/serialize round trip loses nothing.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import EnvelopeError, KeyFormatError
from . import strict_json as _json
from .keys import PublicKey
from .strict_json import json_type

__all__ = [
    "UNSET",
    "ErrorCode",
    "ErrorInfo",
    "Request",
    "Response",
    "check_protocol_name",
    "check_request_key",
]

PROTOCOL_NAME: Final = re.compile(r"[a-z0-9-]+")
MAX_UINT32: Final = 2**32 - 1


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Marks an absent optional member where JSON ``null`` is a valid value."""


class ErrorCode(enum.StrEnum):
    """The seven error codes of the Service RPC response envelope."""

    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    UNSUPPORTED_VERSION = "unsupported_version"
    BAD_REQUEST = "bad_request"
    CONVERSATION_REQUIRED = "conversation_required"
    TOO_LARGE = "too_large"
    RATE_LIMITED = "rate_limited"
    INTERNAL = "internal"


def check_protocol_name(name: object, where: str = "protocol") -> str:
    """Return ``name`` if it is a protocol name: lowercase ASCII letters, digits, hyphens."""
    if not isinstance(name, str):
        raise EnvelopeError(f"{where}: expected a string, got {json_type(name)}")
    if not PROTOCOL_NAME.fullmatch(name):
        raise EnvelopeError(
            f"{where}: {name[:64]!r} is not a protocol name"
            " (lowercase ASCII letters, digits and hyphens)"
        )
    return name


def _load_object(data: bytes | bytearray | memoryview | str, what: str) -> dict[str, Any]:
    try:
        value = _json.loads(data)
    except _json.JsonError as exc:
        raise EnvelopeError(f"{what}: {exc}") from None
    if not isinstance(value, dict):
        raise EnvelopeError(f"{what}: expected a JSON object, got {json_type(value)}")
    return value


def _dump(value: dict[str, Any], what: str) -> bytes:
    try:
        return _json.dumps(value)
    except (_json.JsonError, TypeError) as exc:
        raise EnvelopeError(f"{what}: cannot be serialized as JSON ({exc})") from None


def _shape(value: Any) -> str:
    """A JSON value's type and size, for a repr that must not show the value."""
    if isinstance(value, dict):
        return f"an object of {len(value)} members"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return json_type(value)


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Request:
    """A Service RPC request envelope.

    ``version`` is :data:`UNSET` when absent (JSON ``null`` is a valid version
    for a binding that allows it). ``request_key`` is the requester's public
    key when the request names one. ``extra`` holds unknown members.
    """

    protocol: str
    request: Any
    version: Any = UNSET
    request_key: PublicKey | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_protocol_name(self.protocol, "request envelope: protocol")
        if self.request_key is not None and not isinstance(self.request_key, PublicKey):
            raise TypeError("request_key: expected a PublicKey")
        for name in ("protocol", "request", "version", "requestKey"):
            if name in self.extra:
                raise EnvelopeError(f"request envelope: extra member {name!r} is a known member")

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview | str) -> Request:
        """Parse a request envelope from its JSON; raise :class:`EnvelopeError`."""
        return cls._from_object(_load_object(data, "request envelope"))

    @classmethod
    def _from_object(cls, obj: dict[str, Any]) -> Request:
        """The envelope from its strict JSON reading (``obj`` is consumed)."""
        if "protocol" not in obj:
            raise EnvelopeError("request envelope: member 'protocol' is missing")
        if "request" not in obj:
            raise EnvelopeError("request envelope: member 'request' is missing")
        protocol = check_protocol_name(obj.pop("protocol"), "request envelope: protocol")
        request = obj.pop("request")
        version = obj.pop("version", UNSET)
        key: PublicKey | None = None
        if "requestKey" in obj:
            text = obj.pop("requestKey")
            if not isinstance(text, str):
                raise EnvelopeError(
                    f"request envelope: requestKey: expected a string, got {json_type(text)}"
                )
            try:
                key = PublicKey.decode(text)
            except KeyFormatError as exc:
                raise EnvelopeError(f"request envelope: requestKey: {exc}") from None
        return cls(protocol=protocol, request=request, version=version, request_key=key, extra=obj)

    def __repr__(self) -> str:
        # The request is the peer's data and may carry credentials (an A2A request's
        # service parameters, "Authorization": "Bearer ..."): the repr says what it
        # is, never what it holds (issue 21).
        parts = [f"protocol={self.protocol!r}", f"request=<{_shape(self.request)}>"]
        if self.version is not UNSET:
            parts.append(f"version=<{_shape(self.version)}>")
        if self.request_key is not None:
            parts.append(f"request_key={self.request_key!r}")
        if self.extra:
            parts.append(f"extra=<{len(self.extra)} members>")
        return f"Request({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a JSON object (a new dict)."""
        out: dict[str, Any] = {"protocol": self.protocol, "request": self.request}
        if self.version is not UNSET:
            out["version"] = self.version
        if self.request_key is not None:
            out["requestKey"] = self.request_key.encode()
        out.update(self.extra)
        return out

    def to_json(self) -> bytes:
        """Compact UTF-8 JSON: protocol, request, version, requestKey, then extra members."""
        return _dump(self.to_dict(), "request envelope")


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """The ``error`` member of a response: why the request was not passed on."""

    code: str
    message: str | None = None
    retry_after: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.code, str):
            raise EnvelopeError(f"error: code: expected a string, got {json_type(self.code)}")
        if self.message is not None and not isinstance(self.message, str):
            raise EnvelopeError(f"error: message: expected a string, got {json_type(self.message)}")
        if self.retry_after is not None and (
            isinstance(self.retry_after, bool)
            or not isinstance(self.retry_after, int)
            or not 0 <= self.retry_after <= MAX_UINT32
        ):
            raise EnvelopeError(f"error: retryAfter: {self.retry_after!r} is not a uint32")
        for name in ("code", "message", "retryAfter"):
            if name in self.extra:
                raise EnvelopeError(f"error: extra member {name!r} is a known member")

    def is_final(self) -> bool:
        """False when a repeated request can succeed: the error has ``retryAfter``.

        The protocol text: a requester treats an unknown code as final unless
        the error has ``retryAfter``. Known codes follow the same rule, since
        ``retryAfter`` is what says when a repeat can succeed.
        """
        return self.retry_after is None

    @property
    def known_code(self) -> ErrorCode | None:
        """The code as an :class:`ErrorCode`, or None for a code this library does not know."""
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": str(self.code)}
        if self.message is not None:
            out["message"] = self.message
        if self.retry_after is not None:
            out["retryAfter"] = self.retry_after
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, obj: object) -> ErrorInfo:
        if not isinstance(obj, dict):
            raise EnvelopeError(
                f"response envelope: error: expected an object, got {json_type(obj)}"
            )
        obj = dict(obj)
        if "code" not in obj:
            raise EnvelopeError("response envelope: error: member 'code' is missing")
        code = obj.pop("code")
        if not isinstance(code, str):
            raise EnvelopeError(
                f"response envelope: error: code: expected a string, got {json_type(code)}"
            )
        message = None
        if "message" in obj:
            message = obj.pop("message")
            if not isinstance(message, str):
                raise EnvelopeError(
                    f"response envelope: error: message: expected a string,"
                    f" got {json_type(message)}"
                )
        retry = None
        if "retryAfter" in obj:
            retry = obj.pop("retryAfter")
            # JTD uint32: a JSON number with a zero fractional part, in range.
            if isinstance(retry, float) and retry.is_integer():
                retry = int(retry)
            if (
                isinstance(retry, bool)
                or not isinstance(retry, int)
                or not 0 <= retry <= MAX_UINT32
            ):
                raise EnvelopeError(
                    f"response envelope: error: retryAfter: {str(retry)[:32]} is not a uint32"
                )
        try:
            return cls(code=code, message=message, retry_after=retry, extra=obj)
        except EnvelopeError as exc:
            raise EnvelopeError(f"response envelope: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """A Service RPC response envelope: exactly one of ``response`` and ``error``.

    A success has ``error`` None, and ``response`` is its value (which may be
    JSON ``null``). A failure has ``error`` set and ``response`` None.
    """

    response: Any = None
    error: ErrorInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.error is not None:
            if not isinstance(self.error, ErrorInfo):
                raise TypeError("error: expected an ErrorInfo")
            if self.response is not None:
                raise EnvelopeError("response envelope: has both response and error")
        for name in ("response", "error"):
            if name in self.extra:
                raise EnvelopeError(f"response envelope: extra member {name!r} is a known member")

    @classmethod
    def success(cls, value: Any, **extra: Any) -> Response:
        """A response that carries the protocol's response message ``value``."""
        return cls(response=value, extra=extra)

    @classmethod
    def failure(
        cls, code: str | ErrorCode, message: str | None = None, retry_after: int | None = None
    ) -> Response:
        """A response with ``error``: the request was not passed to the protocol."""
        return cls(error=ErrorInfo(code=str(code), message=message, retry_after=retry_after))

    @property
    def ok(self) -> bool:
        """True for a success."""
        return self.error is None

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview | str) -> Response:
        """Parse a response envelope from its JSON; raise :class:`EnvelopeError`."""
        obj = _load_object(data, "response envelope")
        has_response = "response" in obj
        has_error = "error" in obj
        if has_response == has_error:
            which = "both" if has_response else "neither"
            raise EnvelopeError(
                f"response envelope: has {which} of 'response' and 'error'"
                " (exactly one is required)"
            )
        if has_error:
            error = ErrorInfo.from_dict(obj.pop("error"))
            return cls(error=error, extra=obj)
        return cls(response=obj.pop("response"), extra=obj)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = (
            {"error": self.error.to_dict()}
            if self.error is not None
            else {"response": self.response}
        )
        out.update(self.extra)
        return out

    def to_json(self) -> bytes:
        """Compact UTF-8 JSON: response or error, then extra members."""
        return _dump(self.to_dict(), "response envelope")


def request_from_value(value: object) -> Request:
    """The request envelope from a value the library's strict reader produced (the
    strict reading of a frame that carried it): what :meth:`Request.parse` gives for
    its text, with the same errors, without reading the text again. ``value`` is not
    changed (the envelope's ``request`` is the same object, not a copy)."""
    if not isinstance(value, dict):
        raise EnvelopeError(f"request envelope: expected a JSON object, got {json_type(value)}")
    return Request._from_object(dict(value))


def check_request_key(request: Request, signer: PublicKey | None) -> ErrorInfo | None:
    """The responder's ``bad_request`` rules for ``requestKey``.

    Returns the error to answer with, or None when the request may proceed: a
    request with ``requestKey`` must be signed, by that key (compared as bytes).
    ``signer`` is a :class:`PublicKey` (decode the core's ``signerKey`` text
    with :meth:`PublicKey.decode`); anything else is a TypeError.
    """
    if signer is not None and not isinstance(signer, PublicKey):
        raise TypeError(
            f"signer: expected a PublicKey or None, got {type(signer).__name__}"
            " (decode signerKey text with PublicKey.decode)"
        )
    if request.request_key is None:
        return None
    if signer is None:
        return ErrorInfo(
            code=ErrorCode.BAD_REQUEST.value,
            message="requestKey is present but the request is unsigned",
        )
    if request.request_key != signer:
        return ErrorInfo(
            code=ErrorCode.BAD_REQUEST.value,
            message="requestKey differs from the verified signer key",
        )
    return None

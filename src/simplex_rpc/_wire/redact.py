"""The one redaction function, and the logging helpers built on it.

Everything the adapter and the simulator log passes through :func:`redact`:
their own log lines, the frames the ``websockets`` library logs at DEBUG
level (through :class:`RedactingLogger`), and formatted tracebacks. What a
peer sent is rendered with :func:`show`: escaped and truncated, as data.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any, Final

__all__ = ["REDACTED", "RedactingLogger", "redact", "redact_tree", "show"]

REDACTED: Final = "<redacted>"

# The private key text of `sign_key=` is base64url (or base64) of the 48-byte
# PKCS#8 DER of an Ed25519 key; its first 16 bytes are a fixed prefix, so its
# text always starts with these 21 characters (wire.md section 1).
_PKCS8_TEXT: Final = re.compile(r"MC4CAQAwBQYDK2VwBCIEI[A-Za-z0-9_+/=-]*")
# The same DER written as hex.
_PKCS8_HEX: Final = re.compile(r"(?i)302e020100300506032b657004220420[0-9a-f]*")
# Anything after `sign_key=` up to white space or a quote, whatever its form:
# a truncated or mangled key is still a key.
_SIGN_KEY_OPTION: Final = re.compile(r"(sign_key=)[^\s\"'\\]*")
# PEM blocks of private keys.
_PEM_PRIVATE: Final = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL
)
# Credentials in a URL (ws://user:password@host/).
_URL_USERINFO: Final = re.compile(r"(?i)\b(wss?|https?)://[^/\s@]*@")


# Credentials, which the A2A binding sends as service parameters (HTTP header fields:
# Authorization for the HTTP schemes, a named header for API keys, cookies). In JSON they
# are carried at any depth of escaping: the command text, the event, the escaped JSON of
# a /_call inside a /_send's ComposedMessage, a frame around that.
_SERVICE_PARAMETERS: Final = re.compile(r'a2a-service-parameters(\\*)"\s*:\s*\{')
_JSON_MEMBER: Final = re.compile(r'(\\*)"([A-Za-z0-9_.-]{1,64})\1"\s*:\s*\1"')
_CREDENTIAL_NAME: Final = re.compile(
    r"(?i)(?:proxy-)?authorization|(?:set-)?cookie|[a-z0-9_.-]*(?:api[-_]?key|token|secret"
    r"|passw(?:or)?d|credential|session)[a-z0-9_.-]*"
)
_HEADER_FIELD: Final = re.compile(
    r"(?i)\b((?:proxy-)?authorization|(?:set-)?cookie|x-api-key)(\s*:\s*)[^\r\n\"\\]+"
)
_AUTH_SCHEME: Final = re.compile(r"(?i)\b(bearer|basic|digest)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_QUOTE_OR_BRACE: Final = re.compile(r'(\\*)"|[{}]')
_CREDENTIAL_HINTS: Final = (
    "auth",
    "cookie",
    "token",
    "secret",
    "passw",
    "key",
    "bearer",
    "basic",
    "digest",
    "credential",
    "session",
)


def _is_delimiter(backslashes: int, level: int) -> bool:
    """Whether a quote after ``backslashes`` backslashes delimits a string of JSON that
    was escaped ``level`` backslashes deep (0 for plain JSON, 1 inside a JSON string, 3
    inside a string inside a string): each escaping turns r backslashes into 2r + 1."""
    return backslashes % (2 * level + 2) == level


def _string_end(text: str, pos: int, level: int) -> int:
    """Where the string whose content starts at ``pos`` ends (its closing quote), or the
    end of the text when it is cut off."""
    for match in _QUOTE_OR_BRACE.finditer(text, pos):
        if match.group().endswith('"') and _is_delimiter(len(match.group(1)), level):
            return match.start(1)
    return len(text)


def _object_end(text: str, pos: int, level: int) -> int:
    """Where the object whose ``{`` is at ``pos`` closes (after its ``}``), or the end of
    the text when it is cut off; strings at ``level`` are skipped."""
    depth = 0
    inside = False
    for match in _QUOTE_OR_BRACE.finditer(text, pos):
        token = match.group()
        if token.endswith('"'):
            if _is_delimiter(len(match.group(1)), level):
                inside = not inside
        elif not inside:
            depth += 1 if token == "{" else -1
            if depth == 0:
                return match.end()
    return len(text)


def _redact_parameters(text: str) -> str:
    """Every ``a2a-service-parameters`` object, at any escaping depth, as ``<redacted>``."""
    out: list[str] = []
    at = 0
    while (match := _SERVICE_PARAMETERS.search(text, at)) is not None:
        start = match.end() - 1
        end = _object_end(text, start, len(match.group(1)))
        out += [text[at:start], REDACTED]
        at = end
    out.append(text[at:])
    return "".join(out)


def _redact_members(text: str) -> str:
    """The string value of every member named like a credential, at any escaping depth."""
    out: list[str] = []
    at = 0
    pos = 0
    while (match := _JSON_MEMBER.search(text, pos)) is not None:
        pos = match.end()
        if _CREDENTIAL_NAME.fullmatch(match.group(2)) is None:
            continue
        end = _string_end(text, pos, len(match.group(1)))
        out += [text[at:pos], REDACTED]
        at = pos = end
    out.append(text[at:])
    return "".join(out)


def redact(text: str) -> str:
    """Return ``text`` with every secret this library knows of replaced by ``<redacted>``.

    Removed: the value of a ``sign_key=`` option, the text (base64url,
    base64 or hex) of an Ed25519 PKCS#8 private key anywhere, PEM private key
    blocks, user credentials in a URL, and credentials: every A2A service
    parameter (the ``a2a-service-parameters`` object, in JSON escaped to any
    depth), the string value of a JSON member named like a credential
    (``Authorization``, ``Cookie``, ``X-Api-Key``, ``...token...``,
    ``...secret...``, ``...password...``), such header fields as text
    (``Authorization: ...``) and ``Bearer``/``Basic``/``Digest`` tokens. The
    result is safe to log or to put in an exception message.
    """
    text = _SIGN_KEY_OPTION.sub(r"\g<1>" + REDACTED, text)
    text = _PKCS8_TEXT.sub(REDACTED, text)
    text = _PKCS8_HEX.sub(REDACTED, text)
    text = _PEM_PRIVATE.sub(REDACTED, text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}://{REDACTED}@", text)
    if "a2a-service-parameters" in text:
        text = _redact_parameters(text)
    lowered = text.lower()
    if any(hint in lowered for hint in _CREDENTIAL_HINTS):
        text = _redact_members(text)
        text = _HEADER_FIELD.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return text


def redact_tree(value: Any) -> Any:
    """A copy of a JSON value with :func:`redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    return value


def show(value: object, limit: int = 200) -> str:
    """Render peer-supplied data for a log line: redacted, escaped and truncated.

    Strings and bytes are shown with ``repr`` (so control characters and line
    breaks cannot forge log lines), redacted whole and then cut to ``limit``
    characters with the full length noted. Other values are shown through
    their ``repr``, likewise.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        text = raw.decode("utf-8", "backslashreplace")
        size = len(raw)
        unit = "bytes"
    else:
        text = value if isinstance(value, str) else repr(value)
        size = len(text)
        unit = "chars"
    shown = repr(redact(text)[:limit])
    if size > limit:
        shown += f"... ({size} {unit})"
    return shown


def _summarize(arg: object) -> object:
    """A ``websockets`` data frame as its kind and size only: never its payload.

    The library logs a frame's start and end; a key in the middle of a frame
    could be cut so that its tail stands alone, which no pattern recognizes.
    """
    opcode = getattr(arg, "opcode", None)
    data = getattr(arg, "data", None)
    name = getattr(opcode, "name", None)
    if type(arg).__name__ == "Frame" and name in ("TEXT", "BINARY", "CONT") and data is not None:
        return f"{name} [{len(data)} bytes]"
    return arg


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger adapter that formats each record itself and passes it through :func:`redact`.

    Given to ``websockets`` as its ``logger``, it reduces the data frames that
    library logs at DEBUG level to their kind and size; the adapter and the
    simulator log through it too. Tracebacks (``exc_info``) are formatted here and redacted as well.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        args = tuple(_summarize(arg) for arg in args)
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = " ".join([str(msg), *map(repr, args)])
        exc_info = kwargs.pop("exc_info", None)
        if exc_info:
            if exc_info is True:
                formatted = traceback.format_exc()
            elif isinstance(exc_info, BaseException):
                formatted = "".join(traceback.format_exception(exc_info))
            else:
                formatted = "".join(traceback.format_exception(*exc_info))
            text = f"{text}\n{formatted.rstrip()}"
        kwargs.pop("stack_info", None)
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
        self.logger.log(level, "%s", redact(text), **kwargs)

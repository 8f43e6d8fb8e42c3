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


def redact(text: str) -> str:
    """Return ``text`` with every secret this library knows of replaced by ``<redacted>``.

    Removed: the value of a ``sign_key=`` option, the text (base64url,
    base64 or hex) of an Ed25519 PKCS#8 private key anywhere, PEM private key
    blocks, and user credentials in a URL. The result is safe to log or to
    put in an exception message.
    """
    text = _SIGN_KEY_OPTION.sub(r"\g<1>" + REDACTED, text)
    text = _PKCS8_TEXT.sub(REDACTED, text)
    text = _PKCS8_HEX.sub(REDACTED, text)
    text = _PEM_PRIVATE.sub(REDACTED, text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}://{REDACTED}@", text)


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

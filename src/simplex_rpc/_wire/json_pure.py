"""Strict JSON, shared by every decoder of the library (wire.md section 3).

Accepted: UTF-8 text of one JSON value. Rejected, each with a message that
names what is wrong and where: invalid UTF-8, a byte-order mark, lone
surrogates (also as ``\\uD800`` escapes), duplicate member names, NaN and
Infinity, numbers that overflow to infinity, integers of more than
``MAX_INT_DIGITS`` digits, and nesting deeper than ``MAX_DEPTH``.

This is the pure-Python half, below the backend seam: ``python_loads`` and
the error builders, which word every message once. :mod:`.strict_json`
adds ``loads`` on the active backend (wire.md section 6): the C validator of
``csrc/json_strict.c`` with the json module's scanner, or ``python_loads``.

Serialization is compact and deterministic: ``dumps`` writes members in the
order given, with no whitespace and no ASCII escaping beyond JSON's own.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any, Final, NoReturn

MAX_DEPTH: Final = 64
MAX_INT_DIGITS: Final = 64


class JsonError(ValueError):
    """A strict-JSON violation; callers re-raise it as their own error class."""


def json_type(value: object) -> str:
    """The JSON type of ``value`` in words, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# -- the messages, worded once (the C backend builds its errors with these) ----------


def utf8_error(offset: int) -> JsonError:
    return JsonError(f"invalid UTF-8 at byte offset {offset}")


def bom_error() -> JsonError:
    return JsonError("byte-order mark before the JSON value")


def depth_error() -> JsonError:
    return JsonError(f"nesting deeper than {MAX_DEPTH} levels")


def syntax_error(what: str, offset: int) -> JsonError:
    """A grammar error, in the json module's words, at a character offset."""
    return JsonError(f"{what} at offset {offset}")


def duplicate_error(key: str) -> JsonError:
    # Bounded: a hostile name can be as long as the input.
    shown = repr(key[:64]) + ("..." if len(key) > 64 else "")
    return JsonError(f"duplicate member name {shown}")


def constant_error(name: str) -> JsonError:
    return JsonError(f"{name} is not JSON")


def digits_error(digits: int) -> JsonError:
    return JsonError(f"integer of {digits} digits is too large (at most {MAX_INT_DIGITS})")


def range_error(text: str) -> JsonError:
    return JsonError(f"number {text[:32]!r} is out of range")


def extra_error(offset: int) -> JsonError:
    return JsonError(f"extra data after the JSON value at offset {offset}")


def surrogate_error(code: int) -> JsonError:
    return JsonError(f"lone surrogate \\u{code:04x} in a string")


# -- the pure backend -------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find the first name seen twice
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise duplicate_error(key)
            seen.add(key)
    return out


def _constant(name: str) -> NoReturn:
    raise constant_error(name)


def _int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise digits_error(digits)
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise range_error(text)
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_int, parse_float=_float
)

#: An escape of a surrogate (\\uD800 to \\uDFFF): where a lone surrogate in text
#: decoded from UTF-8 can only come from.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def _check_strings(value: Any) -> None:
    """Refuse the first lone surrogate in document order (names and string values).

    Iterative: the tree may be as deep as the limit allows.
    """
    stack: list[Any] = [iter((value,))]
    while stack:
        for node in stack[-1]:
            if type(node) is tuple:  # a member of an object: (name, value)
                _check_str(node[0])
                node = node[1]
            if isinstance(node, str):
                _check_str(node)
            elif isinstance(node, dict):
                stack.append(iter(node.items()))
                break
            elif isinstance(node, list):
                stack.append(iter(node))
                break
        else:
            stack.pop()


def _encodes(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no surrogate code point)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_str(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise surrogate_error(ord(s[exc.start])) from None


#: A string, as the depth pre-scan sees it: from a quote to the next unescaped
#: quote, or to the end of the text when none closes it.
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS: Final = re.compile(r"[^\[\]{}]+")
_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def _prescan_depth(text: str) -> None:
    """Refuse deep nesting before the C scanner recurses into it.

    Counts brackets outside strings (skipped by a regular expression); it
    keeps memory and stack proportional to ``MAX_DEPTH`` rather than to the
    input. Text with at most ``MAX_DEPTH`` brackets cannot nest deeper.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH:
        raise depth_error()


def python_check(data: bytes | bytearray | memoryview | str) -> None:
    """The pure backend's strict check: None, or the :class:`JsonError` of
    :func:`python_loads` (which it runs: pure Python has no cheaper pass)."""
    python_loads(data)


def python_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The pure backend's strict parse: the value, or :class:`JsonError`.

    The checks run in this order, and the first that fails is reported:
    UTF-8, the byte-order mark, the depth pre-scan, the grammar with the
    number and duplicate-name rules (in the order the json module meets
    them: a number when it is read, a duplicate when its object closes),
    trailing data, and lone surrogates (the first in document order).
    """
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise utf8_error(exc.start) from None
    else:
        raise TypeError(f"expected bytes or str, got {type(data).__name__}")
    if text.startswith("\ufeff"):
        raise bom_error()
    _prescan_depth(text)
    try:
        value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except json.JSONDecodeError as exc:
        raise _syntax(exc, text) from None
    except RecursionError:  # pragma: no cover - the prescan refuses this first
        raise depth_error() from None
    end = _skip_ws(text, end)
    if end != len(text):
        raise extra_error(end)
    # "\\" in text is a memchr: most text has no escape at all.
    if ("\\" in text and _SURROGATE_ESCAPE.search(text)) or (
        text is data and not text.isascii() and not _encodes(text)
    ):
        _check_strings(value)
    return value


def _syntax(exc: json.JSONDecodeError, text: str) -> JsonError:
    """The json module's error in the words of Python 3.11's scanner, on every version.

    Python 3.13 names a trailing comma where 3.11 expects the next value or
    name after it; the 3.11 wording is the contract (and the C backend's).
    """
    msg, pos = exc.msg, exc.pos
    if msg.startswith("Illegal trailing comma before end of "):
        pos = _skip_ws(text, pos + 1)
        if msg.endswith("object"):
            msg = "Expecting property name enclosed in double quotes"
        else:
            msg = "Expecting value"
    # One message of the json module ends in " at" already ("Invalid control character at").
    return syntax_error(msg.removesuffix(" at"), pos)


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\n\r":
        pos += 1
    return pos


# One encoder for every dumps: json.dumps with any option but the defaults builds a
# JSONEncoder per call. encode() keeps no state between calls, so one is shared.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> bytes:
    """Serialize compactly to UTF-8 bytes; refuse NaN and Infinity."""
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonError("lone surrogate in a string") from exc
    except ValueError as exc:
        raise JsonError(str(exc)) from exc
    except RecursionError as exc:
        raise JsonError("value nested too deeply to serialize") from exc


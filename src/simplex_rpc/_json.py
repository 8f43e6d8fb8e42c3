"""Strict JSON, shared by every decoder of the library (wire.md section 3).

Accepted: UTF-8 text of one JSON value. Rejected, each with a message that
names what is wrong and where: invalid UTF-8, a byte-order mark, lone
surrogates (also as ``\\uD800`` escapes), duplicate member names, NaN and
Infinity, numbers that overflow to infinity, integers of more than
``MAX_INT_DIGITS`` digits, and nesting deeper than ``MAX_DEPTH``.

Serialization is compact and deterministic: ``dumps`` writes members in the
order given, with no whitespace and no ASCII escaping beyond JSON's own.
"""

from __future__ import annotations

import json
import math
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


def _fail(msg: str) -> NoReturn:
    raise JsonError(msg)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            # Bounded: a hostile name can be as long as the input.
            shown = repr(key[:64]) + ("..." if len(key) > 64 else "")
            _fail(f"duplicate member name {shown}")
        out[key] = value
    return out


def _constant(name: str) -> NoReturn:
    _fail(f"{name} is not JSON")


def _int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        _fail(f"integer of {digits} digits is too large (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        _fail(f"number {text[:32]!r} is out of range")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_int, parse_float=_float
)


def _check_tree(value: Any) -> None:
    """Check depth and strings without recursion (the tree may be deep)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                _fail(f"nesting deeper than {MAX_DEPTH} levels")
            for key, item in node.items():
                _check_str(key)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                _fail(f"nesting deeper than {MAX_DEPTH} levels")
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            _check_str(node)


def _check_str(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        _fail(f"lone surrogate \\u{ord(s[exc.start]):04x} in a string")


def _prescan_depth(text: str) -> None:
    """Refuse deep nesting before the C scanner recurses into it.

    Counts brackets outside strings; cheap, and it keeps memory and stack
    proportional to ``MAX_DEPTH`` rather than to the input.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    in_str = False
    escape = False
    for ch in text:
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                _fail(f"nesting deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one strict JSON value from UTF-8 bytes or text; raise :class:`JsonError`."""
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            _fail(f"invalid UTF-8 at byte offset {exc.start}")
    else:
        raise TypeError(f"expected bytes or str, got {type(data).__name__}")
    if text.startswith("\ufeff"):
        _fail("byte-order mark before the JSON value")
    _prescan_depth(text)
    try:
        value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except json.JSONDecodeError as exc:
        # One message of the json module ends in " at" already ("Invalid control character at").
        _fail(f"{exc.msg.removesuffix(' at')} at offset {exc.pos}")
    except RecursionError:  # pragma: no cover - the prescan refuses this first
        _fail(f"nesting deeper than {MAX_DEPTH} levels")
    end = _skip_ws(text, end)
    if end != len(text):
        _fail(f"extra data after the JSON value at offset {end}")
    _check_tree(value)
    return value


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\n\r":
        pos += 1
    return pos


def dumps(value: Any) -> bytes:
    """Serialize compactly to UTF-8 bytes; refuse NaN and Infinity."""
    try:
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonError("lone surrogate in a string") from exc
    except ValueError as exc:
        raise JsonError(str(exc)) from exc
    except RecursionError as exc:
        raise JsonError("value nested too deeply to serialize") from exc


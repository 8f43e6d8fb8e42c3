"""Reading the chat core's frames strictly, with the library's JSON rules.

A frame of the WebSocket API is ``{"corrId", "resp"}`` or an event
``{"resp"}`` (simplex-chat ``bots/README.md``); the native library's is
``{"result"}`` or ``{"error"}``. Every frame is read with
:func:`simplex_rpc._wire.strict_json.loads`: duplicate member names, NaN, over-long
integers, lone surrogates and deep nesting are refused, in the core's frames
as in a peer's envelope.

The envelope a frame carries (``requestData`` of a ``serviceRequest``,
``responseData`` of a ``serviceResponse``) is the peer's JSON. Its text is
cut out of the frame as it came and read on its own: so the envelope gets the
whole depth allowance (the frame and the event around it do not use it up),
and the responder hands that very text to ``Request.parse``, with nothing
decoded and encoded again in between. The rest of the frame is read with the
envelope's place held by ``null``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from .._wire import strict_json as _json

#: The members whose value is a peer's envelope, in an object one level into the frame.
ENVELOPE_MEMBERS: Final = frozenset({"requestData", "responseData"})

# A JSON string (escapes included), or one structural character. Numbers and
# literals are not tokens: the scan only needs the nesting and the member names.
_TOKEN: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]', re.DOTALL)
# The corrId of a frame that cannot be read, where the core puts it: first.
_LEADING_CORR_ID: Final = re.compile(r'\A\s*\{\s*"corrId"\s*:\s*(?:"([^"\\]{1,64})"|(\d{1,20}))')


class _Ambiguous:
    """A member given twice in a frame read leniently: neither value is trusted."""

    def __repr__(self) -> str:
        return "<ambiguous>"


AMBIGUOUS: Final = _Ambiguous()


@dataclass(slots=True)
class Frame:
    """One frame, read.

    ``value`` is the strictly parsed frame, each envelope member holding the
    envelope's value (or, when the envelope itself is not strict JSON, its
    text, as the core's JSON-text form of an envelope). ``envelopes`` holds
    the envelopes' texts as they came, by ``(outer member, member)``.

    When the frame is not strict JSON, ``error`` says why; ``value`` is then a
    lenient reading (a member given twice is :data:`AMBIGUOUS`) or None, and
    ``corr_id`` the frame's ``corrId`` if it can be read.
    """

    value: Any
    envelopes: dict[tuple[str, str], str] = field(default_factory=dict)
    error: str | None = None
    corr_id: str | None = None


def _name(token: str) -> str | None:
    """The text of a JSON string token (None if it is not one)."""
    if "\\" not in token:
        return token[1:-1]
    try:
        name = json.loads(token)
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def _cut_envelopes(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The frame with each envelope member's object or array replaced by ``null``,
    and the cut texts as ``(outer member, member, text)``.

    Only the first occurrence of a member is cut: a second one stays in the
    frame, where the strict reader refuses the duplicate name. A text that is
    not JSON may be cut wrongly; the strict reading of the rest refuses it.
    """
    if "\\u" not in text and not any(name in text for name in ENVELOPE_MEMBERS):
        return text, []  # no member name, not even an escaped one
    cuts: list[tuple[int, int, str, str]] = []
    depth = 0
    last_string: str | None = None
    outer: str | None = None
    pending: tuple[str, int] | None = None  # (member, end of its ':')
    pos = 0
    while (match := _TOKEN.search(text, pos)) is not None:
        token = match.group()
        pos = match.end()
        first = token[0]
        was_pending, pending = pending, None
        if first == '"':
            last_string = token
            continue
        if first in "{[":
            if (
                was_pending is not None
                and outer is not None
                and text[was_pending[1] : match.start()].strip() == ""
                and not any(c[2:] == (outer, was_pending[0]) for c in cuts)
            ):
                end = _value_end(text, match.start())
                if end is not None:
                    cuts.append((match.start(), end, outer, was_pending[0]))
                    pos = end
                    last_string = None
                    continue
            depth += 1
        elif first in "}]":
            depth -= 1
        elif first == ":":
            name = _name(last_string) if last_string is not None else None
            if depth == 1:
                outer = name
            elif depth == 2 and name in ENVELOPE_MEMBERS:
                pending = (name, match.end())
        last_string = None
    if not cuts:
        return text, []
    pieces: list[str] = []
    found: list[tuple[str, str, str]] = []
    at = 0
    for start, end, outer_name, member in cuts:
        pieces += [text[at:start], "null"]
        found.append((outer_name, member, text[start:end]))
        at = end
    pieces.append(text[at:])
    return "".join(pieces), found


_SKIPPER: Final = json.JSONDecoder()


def _value_end(text: str, start: int) -> int | None:
    """Where the JSON object or array at ``start`` ends (the json module's scanner, in C);
    None when it is not JSON there (the strict reader refuses it).

    A value too deep for the json module's recursion is followed by counting brackets:
    it is still cut out, so that the rest of the frame (the requestId) can be read and
    the request answered (its envelope's reader refuses the depth).
    """
    try:
        return _SKIPPER.raw_decode(text, start)[1]
    except ValueError:
        return None
    except RecursionError:
        depth = 0
        for match in _TOKEN.finditer(text, start):
            first = match.group()[0]
            if first in "{[":
                depth += 1
            elif first in "}]":
                depth -= 1
                if depth == 0:
                    return match.end()
        return None


def read_frame(text: str | bytes) -> Frame:
    """Read one frame of the core strictly (see the module's text); never raises."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Frame(None, error=f"invalid UTF-8 at byte offset {exc.start}")
    try:
        shell, cut = _cut_envelopes(text)
        value = _json.loads(shell)
        envelopes: dict[tuple[str, str], str] = {}
        for outer, member, envelope in cut:
            holder = value.get(outer) if isinstance(value, dict) else None
            if not isinstance(holder, dict) or holder.get(member, 0) is not None:
                raise _json.JsonError(f"{member} is not where it was found")  # pragma: no cover
            envelopes[(outer, member)] = envelope
            try:
                holder[member] = _json.loads(envelope)
            except _json.JsonError:
                holder[member] = envelope  # the JSON-text form: its reader reports the error
        return Frame(value, envelopes)
    except _json.JsonError as exc:
        lenient = _lenient(text)
        return Frame(lenient, error=str(exc)[:200], corr_id=_corr_id(lenient, text))


def _lenient(text: str) -> Any:
    """The frame read by the json module's rules, a name given twice being ambiguous."""
    try:
        return json.loads(text, object_pairs_hook=_first_or_ambiguous)
    except (ValueError, RecursionError):
        return None


def _first_or_ambiguous(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        out[key] = AMBIGUOUS if key in out else value
    return out


def _corr_id(lenient: Any, text: str) -> str | None:
    """The ``corrId`` of a frame that is not strict JSON, when it can be read unambiguously."""
    if isinstance(lenient, dict):
        corr = lenient.get("corrId")
        if isinstance(corr, int) and not isinstance(corr, bool):
            return str(corr)
        return corr if isinstance(corr, str) and corr else None
    match = _LEADING_CORR_ID.match(text)
    if match is None:
        return None
    return match.group(1) or match.group(2)

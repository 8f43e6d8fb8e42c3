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

# One JSON string, escapes included, matched where it starts: never searched for. A
# search tries again from every later quote, which is quadratic on an unterminated
# string of escaped quotes (issue 21: 1.3 s for 16 KB). Unrolled, so matching is linear.
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_WS: Final = re.compile(r"[ \t\n\r]*")
# A member's name and its colon; the brace that opens an object (and whether it closes at
# once); the comma or brace after a value. Each matched where it starts.
_MEMBER: Final = re.compile(r'[ \t\n\r]*("[^"\\]*(?:\\.[^"\\]*)*")[ \t\n\r]*:[ \t\n\r]*', re.DOTALL)
_OPEN: Final = re.compile(r"\{[ \t\n\r]*(\})?")
_AFTER: Final = re.compile(r"[ \t\n\r]*([,}])")
# The next character that matters when brackets are counted: a quote or a bracket.
_SPECIAL: Final = re.compile(r'["\[\]{}]')
# The corrId of a frame that cannot be read, where the core puts it: first.
_LEADING_CORR_ID: Final = re.compile(r'\A\s*\{\s*"corrId"\s*:\s*(?:"([^"\\]{1,64})"|(\d{1,20}))')
_SKIPPER: Final = json.JSONDecoder()


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
    text, as the core's JSON-text form of an envelope); read with
    ``decode_envelopes=False``, each envelope member holds None until
    :meth:`decode_envelopes` is called. ``envelopes`` holds the envelopes'
    texts as they came, by ``(outer member, member)``.

    When the frame is not strict JSON, ``error`` says why; ``value`` is then a
    lenient reading (a member given twice is :data:`AMBIGUOUS`) or None, and
    ``corr_id`` the frame's ``corrId`` if it can be read.
    """

    value: Any
    envelopes: dict[tuple[str, str], str] = field(default_factory=dict)
    error: str | None = None
    corr_id: str | None = None
    decoded: bool = True

    def decode_envelopes(self) -> None:
        """Put each envelope's value into ``value`` (once): its strict reading, or its
        text when it is not strict JSON (the JSON-text form: its reader reports why)."""
        if self.decoded:
            return
        self.decoded = True
        for (outer, member), envelope in self.envelopes.items():
            holder = self.value[outer]
            try:
                holder[member] = _json.loads(envelope)
            except _json.JsonError:
                holder[member] = envelope


class _Scan:
    """One linear pass over a frame's text.

    Every step adds the characters it looked at to ``work`` (a step that fails
    counts the rest of the text), and no step looks back: so ``work`` bounds
    the pass, and stays within a small multiple of the text's length.
    """

    __slots__ = ("n", "text", "work")

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.work = 0

    def ws(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        end = match.end() if match is not None else pos
        self.work += end - pos + 1
        return end

    def string(self, pos: int) -> tuple[str, int] | None:
        """The string token at ``pos`` and where it ends (None: not a complete string)."""
        match = _STRING.match(self.text, pos)
        if match is None:
            self.work += self.n - pos
            return None
        self.work += match.end() - pos
        return match.group(), match.end()

    def value_end(self, pos: int) -> int | None:
        """Where the JSON value at ``pos`` ends, by the json module's scanner (in C); None
        when it is not JSON there (the strict reader refuses it).

        A value too deep for that scanner's recursion is followed by counting brackets:
        it is still cut out, so that the rest of the frame (the requestId) can be read and
        the request answered (its envelope's reader refuses the depth).
        """
        try:
            end: int = _SKIPPER.raw_decode(self.text, pos)[1]
        except ValueError:
            self.work += self.n - pos
            return None
        except RecursionError:
            self.work += self.n - pos
            return self.bracket_end(pos)
        self.work += end - pos
        return end

    def bracket_end(self, pos: int) -> int | None:
        """Where the object or array at ``pos`` closes, counting brackets outside strings."""
        text = self.text
        depth = 0
        while (match := _SPECIAL.search(text, pos)) is not None:
            at = match.start()
            self.work += at - pos + 1
            char = text[at]
            if char == '"':
                token = self.string(at)
                if token is None:
                    return None
                pos = token[1]
                continue
            pos = at + 1
            if char in "[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return pos
        self.work += self.n - pos
        return None

    def members(
        self, pos: int, cuts: list[tuple[int, int, str, str]], outer: str | None
    ) -> int | None:
        """Walk the object whose ``{`` is at ``pos``: at the frame's level (``outer`` None)
        descend into each member that is an object; one level in, note the envelope
        members (the first of each name only); skip every other value whole. Returns where
        the object ends, or None when the text is not JSON there.

        Each member is three steps: its name and colon (one match), its value (the json
        module's scanner), the comma or brace after it (one match).
        """
        text = self.text
        match = _OPEN.match(text, pos)
        if match is None:  # pragma: no cover - the caller found the brace
            return None
        self.work += match.end() - pos
        pos = match.end()
        if match.group(1):
            return pos  # {}
        while True:
            head = _MEMBER.match(text, pos)
            if head is None:
                self.work += self.n - pos
                return None
            self.work += head.end() - pos
            token = head.group(1)
            name = token[1:-1] if "\\" not in token else _name(token)
            pos = head.end()
            first = text[pos : pos + 1]
            end: int | None
            if outer is None and first == "{" and name is not None:
                end = self.members(pos, cuts, name)
            else:
                end = self.value_end(pos)
                if (
                    end is not None
                    and outer is not None
                    and first in ("{", "[")
                    and name in ENVELOPE_MEMBERS
                    and not any(c[2:] == (outer, name) for c in cuts)
                ):
                    cuts.append((pos, end, outer, name))
            if end is None:
                return None
            after = _AFTER.match(text, end)
            if after is None:
                self.work += self.n - end
                return None
            self.work += after.end() - end
            pos = after.end()
            if after.group(1) == "}":
                return pos


def _name(token: str) -> str | None:
    """The text of a JSON string token (None if it is not one)."""
    if "\\" not in token:
        return token[1:-1]
    try:
        name = json.loads(token)
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def _cut_envelopes(text: str, scan: _Scan | None = None) -> tuple[str, list[tuple[str, str, str]]]:
    """The frame with each envelope member's object or array replaced by ``null``,
    and the cut texts as ``(outer member, member, text)``: one linear pass.

    Only the first occurrence of a member is cut: a second one stays in the
    frame, where the strict reader refuses the duplicate name. A text that is
    not JSON is not cut at all: the strict reader refuses it whole.
    """
    if "\\u" not in text and "requestData" not in text and "responseData" not in text:
        return text, []  # no member name, not even an escaped one
    scan = scan if scan is not None else _Scan(text)
    cuts: list[tuple[int, int, str, str]] = []
    pos = scan.ws(0)
    if pos >= scan.n or text[pos] != "{" or scan.members(pos, cuts, None) is None or not cuts:
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


def scan_work(text: str) -> int:
    """How many characters the envelope scan of ``text`` looks at (for the tests: the
    count that shows the pass is linear in the frame's length)."""
    scan = _Scan(text)
    _cut_envelopes(text, scan)
    return scan.work


def read_frame(
    text: str | bytes, *, decode_envelopes: bool = True, envelope_texts: bool = True
) -> Frame:
    """Read one frame of the core strictly (see the module's text); never raises.

    With ``decode_envelopes=False`` the envelopes are cut out and kept as text
    only (their members hold None): a reader that parses the envelope's text
    itself does not parse it twice (:meth:`Frame.decode_envelopes` fills them in).

    With ``envelope_texts=False`` a frame that is strict JSON as a whole is
    only read (one pass): its envelopes are values of that strict reading, and
    their texts are not looked for (``envelopes`` is empty). The strict
    reading of an envelope inside a strict frame is the strict reading of its
    text (the same rules, and it is within the depth allowance the frame was),
    so a reader that takes the value instead of the text loses nothing. A
    frame that is not strict JSON as a whole is cut as before.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Frame(None, error=f"invalid UTF-8 at byte offset {exc.start}")
    if not envelope_texts:
        try:
            return Frame(_json.loads(text))
        except _json.JsonError:
            pass  # not strict as a whole: an envelope may still be read on its own
    elif "\\u" not in text:
        fast = _strict_whole(text)
        if fast is not None:
            return fast
    try:
        shell, cut = _cut_envelopes(text)
        value = _json.loads(shell)
        envelopes: dict[tuple[str, str], str] = {}
        for outer, member, envelope in cut:
            holder = value.get(outer) if isinstance(value, dict) else None
            if not isinstance(holder, dict) or holder.get(member, 0) is not None:
                raise _json.JsonError(f"{member} is not where it was found")  # pragma: no cover
            envelopes[(outer, member)] = envelope
        frame = Frame(value, envelopes, decoded=not envelopes)
        if decode_envelopes:
            frame.decode_envelopes()
        return frame
    except _json.JsonError as exc:
        lenient = _lenient(text)
        return Frame(lenient, error=str(exc)[:200], corr_id=_corr_id(lenient, text))


def _strict_whole(text: str) -> Frame | None:
    """The common case in one strict reading of the whole frame: a frame that is strict
    JSON as it is, each envelope member name written once (and unescaped). The envelope's
    text is then found as the slice of its value; None sends the frame to the cut
    (:func:`_cut_envelopes`): a frame the strict reader refuses whole (an envelope may
    still be read on its own, with its own depth), or one whose names are ambiguous."""
    try:
        value = _json.loads(text)
    except _json.JsonError:
        return None
    envelopes: dict[tuple[str, str], str] = {}
    if not isinstance(value, dict):
        return Frame(value)
    for member in ENVELOPE_MEMBERS:
        needle = f'"{member}"'
        at = text.find(needle)
        if at < 0:
            continue
        holders = [k for k, v in value.items() if isinstance(v, dict) and member in v]
        if not holders:
            continue  # deeper in the event, or a string: data, not an envelope
        if len(holders) > 1 or text.find(needle, at + 1) >= 0:
            return None  # more than one: the cut walks the frame
        # The member one level in exists, and its name (no escape can spell it: the text
        # has no \u) is written once: this is it.
        match = _WS.match(text, at + len(needle))
        colon = match.end() if match is not None else at + len(needle)
        match = _WS.match(text, colon + 1)
        start = match.end() if match is not None else colon + 1
        if text[start : start + 1] not in ("{", "["):
            continue  # a JSON string (the core's JSON-text form) or another value
        end = _SKIPPER.raw_decode(text, start)[1]
        envelopes[(holders[0], member)] = text[start:end]
    return Frame(value, envelopes)


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

"""Communication addresses in llms.txt (protocol text, "Addresses in llms.txt").

The ``## Communications`` section of an llms.txt file is a file list, one
address a line::

    - [<title>](<url>): <network> updates for <audience>[, <frequency>]. <info>
    - [<title>](<url>): <network> group for <audience>. <info>
    - [<title>](<url>): <network> [business ]contact for <audience>[, <protocol>]*. <info>

:func:`parse_communications` reads the section into
:class:`CommunicationAddress` values and reports, with line numbers, every
line in it that does not follow the grammar (it never guesses);
:func:`format_communications` writes a section that reads back to the same
addresses; :func:`check_address` names the rule a SimpleX entry's link breaks.
No I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, urlsplit

from ._wire import strict_json as _json
from ._wire.envelope import PROTOCOL_NAME
from .declarations import CHANGE_FREQUENCIES
from .errors import LlmsTxtError

__all__ = [
    "AUDIENCES",
    "HEADING",
    "LINK_KINDS",
    "REQUIRED_LINK",
    "TYPES",
    "CommunicationAddress",
    "Communications",
    "LineProblem",
    "check_address",
    "format_communications",
    "link_kind",
    "parse_communications",
]

HEADING: Final = "## Communications"
TYPES: Final = ("updates", "group", "contact")
AUDIENCES: Final = ("people", "agents", "people and agents")
LINK_KINDS: Final = ("contact", "channel", "group", "invitation", "relay")
"""The kinds of SimpleX links :func:`link_kind` tells apart."""

REQUIRED_LINK: Final = {"updates": "channel", "group": "group", "contact": "contact"}
"""For SimpleX entries: the link kind each type requires (``contact`` covers business)."""

# The notes begin with the network and the type. The network is the shortest
# prefix followed by a type: "business" belongs to the type only before "contact".
# The grammar's words are read in any letter case, as a Markdown reader reads
# them; ASCII case only, so that no other character (the Kelvin sign, the long s)
# stands in for a letter of a keyword.
_NOTES: Final = re.compile(
    r"(?P<network>.+?) (?:(?P<type>updates|group) for |(?P<business>business )?contact for )"
    r"(?P<rest>.*)",
    re.DOTALL | re.IGNORECASE | re.ASCII,
)
# What follows the audience: ", item" repeats, then "." and the optional info.
_TAIL: Final = re.compile(r"(?P<items>(?:, [^,.\s]+)*)\.(?: (?P<info>.*))?", re.DOTALL)
_ITEM: Final = re.compile(r"[-*+] \[(?P<title>[^\[\]]*)\]\((?P<url>[^\s()<>]*)\)(?P<after>.*)")
_HEADING_LINE: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)(.*)")
# The optional closing sequence of an ATX heading (CommonMark 4.2): #s preceded by
# a space or a tab (or alone), then only spaces or tabs.
_CLOSING: Final = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE: Final = re.compile(r" {0,3}(```|~~~)")


def _bad_char(text: str) -> str | None:
    # Control characters, lone surrogates and the line and paragraph
    # separators, which would split the line (str.splitlines splits at them).
    for c in text:
        if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp"):
            return c
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommunicationAddress:
    """One address of the ``## Communications`` section.

    ``type`` is ``updates``, ``group`` or ``contact``; ``business`` marks a
    business contact. ``audience`` is ``people``, ``agents`` or ``people and
    agents``. ``frequency`` (a Sitemaps changefreq value) is for updates only,
    ``protocols`` (protocol names, lower case) for contacts only. ``info`` is
    the free text, possibly empty. Construction checks that the address can be
    written as a line that reads back to it; it raises :class:`LlmsTxtError`.
    """

    title: str
    url: str
    network: str
    type: str
    audience: str
    business: bool = False
    frequency: str | None = None
    protocols: tuple[str, ...] = ()
    info: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocols", tuple(self.protocols))
        for name in ("title", "url", "network", "type", "audience", "info"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise LlmsTxtError(f"{name}: expected a string, got {type(value).__name__}")
            bad = _bad_char(value)
            if bad is not None:
                raise LlmsTxtError(f"{name}: contains the character {bad!r}, which breaks a line")
            if value != value.strip():
                raise LlmsTxtError(f"{name}: has leading or trailing spaces")
        if not self.title or "[" in self.title or "]" in self.title:
            raise LlmsTxtError(f"title {self.title!r}: must be non-empty, without '[' or ']'")
        if not self.url or re.search(r"[\s()<>]", self.url):
            raise LlmsTxtError(
                f"url {self.url!r}: must be non-empty, without spaces, '(', ')', '<' or '>'"
            )
        if not self.network:
            raise LlmsTxtError("network: is empty")
        if self.type not in TYPES:
            raise LlmsTxtError(f"type {self.type!r}: expected one of {', '.join(TYPES)}")
        if not isinstance(self.business, bool):
            raise LlmsTxtError("business: expected a boolean")
        if self.business and self.type != "contact":
            raise LlmsTxtError(
                f"business: only a contact can be a business contact, not {self.type}"
            )
        if self.audience not in AUDIENCES:
            raise LlmsTxtError(
                f"audience {self.audience!r}: expected people, agents, or people and agents"
            )
        if self.frequency is not None:
            if self.type != "updates":
                raise LlmsTxtError(f"frequency: only updates have a frequency, not {self.type}")
            if self.frequency not in CHANGE_FREQUENCIES:
                raise LlmsTxtError(
                    f"frequency {self.frequency!r}: expected a Sitemaps changefreq value"
                    f" ({', '.join(CHANGE_FREQUENCIES)})"
                )
        if self.protocols and self.type != "contact":
            raise LlmsTxtError(f"protocols: only contacts list protocols, not {self.type}")
        for protocol in self.protocols:
            if not isinstance(protocol, str) or not PROTOCOL_NAME.fullmatch(protocol):
                raise LlmsTxtError(
                    f"protocols: {protocol!r} is not a protocol name in lower case"
                    " (letters, digits and hyphens)"
                )
        # The network is read as the shortest prefix before a type: it must not
        # contain one itself.
        parsed = _NOTES.fullmatch(self.notes())
        if parsed is None or parsed["network"] != self.network:
            raise LlmsTxtError(
                f"network {self.network!r}: contains a type phrase ('updates for', 'group for',"
                " 'contact for', or ends with 'business' before 'contact'), so it would not"
                " read back"
            )

    @property
    def is_simplex(self) -> bool:
        """True when the network is SimpleX (compared without letter case)."""
        return self.network.casefold() == "simplex"

    def notes(self) -> str:
        """The notes after the link: network, type, audience, frequency or protocols, info."""
        kind = (
            ("business contact" if self.business else "contact")
            if self.type == "contact"
            else self.type
        )
        items = [self.audience]
        if self.frequency is not None:
            items.append(self.frequency)
        items += [p.upper() if p in _UPPER else p for p in self.protocols]
        text = f"{self.network} {kind} for {', '.join(items)}."
        return f"{text} {self.info}" if self.info else text

    def line(self) -> str:
        """The address as a line of the section: ``- [title](url): notes``."""
        return f"- [{self.title}]({self.url}): {self.notes()}"


# Protocol names are read in any letter case; the two of the protocol text are
# written as it writes them.
_UPPER: Final = frozenset({"mcp", "a2a"})


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A line of the section that does not follow the grammar: 1-based ``line``, its text, why."""

    line: int
    text: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class Communications(list[CommunicationAddress]):
    """The addresses of a ``## Communications`` section, a list, with ``problems``.

    ``problems`` are the lines of the section that do not follow the grammar,
    in order; those lines give no address.
    """

    problems: tuple[LineProblem, ...]

    def __init__(
        self, addresses: Iterable[CommunicationAddress] = (), problems: Iterable[LineProblem] = ()
    ) -> None:
        super().__init__(addresses)
        self.problems = tuple(problems)


def _keyword(text: str) -> str | None:
    """``text`` in lower case when it is ASCII (a keyword can be), else None."""
    return text.lower() if text.isascii() else None


def _is_communications(text: str) -> bool:
    """Whether an ATX heading's text (after the #s) is ``Communications``, in any case.

    A closing sequence of #s (``## Communications ##``) is not part of the text.
    """
    text = _CLOSING.sub("", text).strip(" \t")
    return _keyword(text) == "communications"


def _parse_notes(title: str, url: str, notes: str) -> CommunicationAddress | str:
    m = _NOTES.fullmatch(notes)
    if m is None:
        return (
            "the notes do not begin with '<network> updates for', '<network> group for',"
            " '<network> contact for' or '<network> business contact for'"
        )
    network = m["network"]
    type_ = (m["type"] or "contact").lower()
    business = m["business"] is not None
    rest = m["rest"]
    audience = next(
        (a for a in sorted(AUDIENCES, key=len, reverse=True) if _keyword(rest[: len(a)]) == a),
        None,
    )
    if audience is None:
        return f"the audience {rest[:32]!r} is not people, agents, or people and agents"
    tail = _TAIL.fullmatch(rest[len(audience) :])
    if tail is None:
        return (
            f"after the audience {audience!r}: expected ', <item>' parts, then '.' and,"
            " with info, one space"
        )
    items = [item[2:] for item in re.findall(r", [^,.\s]+", tail["items"])]
    info = (tail["info"] or "").strip()
    frequency: str | None = None
    protocols: list[str] = []
    if type_ == "updates":
        if len(items) > 1:
            return "an updates entry has one frequency at most"
        if items:
            if _keyword(items[0]) not in CHANGE_FREQUENCIES:
                return f"{items[0]!r} is not a Sitemaps changefreq value"
            frequency = _keyword(items[0])
    elif type_ == "group":
        if items:
            return "a group entry has no frequency and no protocols"
    else:
        for item in items:
            name = _keyword(item)
            if name is None or not PROTOCOL_NAME.fullmatch(name):
                return f"{item!r} is not a protocol name"
            protocols.append(name)
    try:
        return CommunicationAddress(
            title=title,
            url=url,
            network=network,
            type=type_,
            business=business,
            audience=audience,
            frequency=frequency,
            protocols=tuple(protocols),
            info=info,
        )
    except LlmsTxtError as exc:
        return str(exc)


def _parse_line(line: str) -> CommunicationAddress | str:
    m = _ITEM.fullmatch(line)
    if m is None:
        if re.match(r"[-*+] ", line):
            return "not a link item '- [title](url): notes'"
        return "not a list item of the section"
    title, url, after = m["title"], m["url"], m["after"]
    if not after.startswith(": ") or not after[2:].strip():
        return "the link is not followed by ': ' and notes"
    if title != title.strip() or not title:
        return "the link text (the title) is empty or has leading or trailing spaces"
    if not url:
        return "the link has no URL"
    return _parse_notes(title, url, after[2:].strip())


def parse_communications(markdown: str, *, strict: bool = False) -> Communications:
    """The communication addresses of the ``## Communications`` section(s) of ``markdown``.

    Only lines of a section under a ``## Communications`` heading are read,
    up to the next heading of level 1 or 2. Blank lines are skipped. Every
    other line that does not follow the grammar is reported in the result's
    ``problems`` with its 1-based line number, and gives no address; with
    ``strict=True`` such lines raise :class:`LlmsTxtError` listing them all.

    The grammar's words are read in any letter case, as a Markdown reader
    reads them: the heading (``## communications``, and with a closing
    sequence, ``## Communications ##``), the type (``Contact``,
    ``Business contact``), ``for``, the audience (``People and Agents``), the
    frequency (``Weekly``) and the protocols. They are returned in lower case;
    the network keeps the case it is written in. A note that does not follow
    the grammar is reported, never read as something else.
    """
    if not isinstance(markdown, str):
        raise TypeError(f"expected str, got {type(markdown).__name__}")
    addresses: list[CommunicationAddress] = []
    problems: list[LineProblem] = []
    in_section = False
    fence: str | None = None
    for number, raw in enumerate(markdown.splitlines(), start=1):
        line = raw.rstrip()
        fenced = _FENCE.match(line)
        if fence is None and fenced is None:
            heading = _HEADING_LINE.fullmatch(line)
            if heading is not None and len(heading[1]) <= 2:
                in_section = heading[1] == "##" and _is_communications(heading[2])
                continue
        if fenced is not None:
            fence = None if fence == fenced[1] else (fence or fenced[1])
        if not in_section or not line:
            continue
        if fenced is not None or fence is not None:
            problems.append(LineProblem(number, raw, "a code block inside the section"))
            continue
        result = _parse_line(line)
        if isinstance(result, str):
            problems.append(LineProblem(number, raw, result))
        else:
            addresses.append(result)
    if strict and problems:
        raise LlmsTxtError(
            "lines off the grammar of the Communications section: "
            + "; ".join(str(p) for p in problems)
        )
    return Communications(addresses, problems)


def format_communications(addresses: Iterable[CommunicationAddress]) -> str:
    """The ``## Communications`` section for ``addresses``, one line each.

    :func:`parse_communications` reads it back to the same addresses.
    """
    lines = [HEADING, ""]
    for address in addresses:
        if not isinstance(address, CommunicationAddress):
            raise LlmsTxtError(f"expected a CommunicationAddress, got {type(address).__name__}")
        lines.append(address.line())
    return "\n".join(lines) + "\n"


_SHORT_KINDS: Final = {
    "a": "contact",
    "c": "channel",
    "g": "group",
    "i": "invitation",
    "r": "relay",
}


def link_kind(url: str) -> str | None:
    """The kind of SimpleX link ``url`` is, or None if it is not a SimpleX link.

    Short links are ``https://<router>/<k>#<key>`` or ``simplex:/<k>#<key>?h=<router>``,
    with ``k`` one of ``a`` (contact address), ``c`` (channel), ``g`` (group),
    ``i`` (one-time invitation) and ``r`` (relay): the contact types of
    simplexmq's short links (``CCTContact``, ``CCTChannel``, ``CCTGroup``,
    ``CCTRelay``), as simplex-chat's ``Markdown.hs`` maps them. Full links
    are ``<scheme>/contact#/?...`` (a contact address, or a group link when
    its ``data`` names a ``groupLinkId``) and ``<scheme>/invitation#/?...``.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme == "https":
        if not host:
            return None
    elif parts.scheme != "simplex" or parts.netloc:
        return None
    if not parts.fragment:
        return None
    path = parts.path
    if len(path) == 2 and path[0] == "/" and path[1] in _SHORT_KINDS:
        return _SHORT_KINDS[path[1]]
    if path in ("/contact", "/invitation") and parts.fragment.startswith("/?"):
        if path == "/invitation":
            return "invitation"
        data = parse_qs(parts.fragment[2:]).get("data")
        if data:
            try:
                # Strict JSON: a hostile link's deep nesting is refused, not recursed into.
                client_data = _json.loads(data[0])
            except _json.JsonError:
                client_data = None
            if isinstance(client_data, dict) and "groupLinkId" in client_data:
                return "group"
        return "contact"
    return None


_LINK_NAMES: Final = {
    "contact": "a contact address link (/a#)",
    "channel": "a channel link (/c#)",
    "group": "a group link (/g#)",
    "invitation": "a one-time invitation link (/i#)",
    "relay": "a relay link (/r#)",
}


def check_address(address: CommunicationAddress) -> str | None:
    """The rule of the protocol text that ``address`` breaks, or None.

    For SimpleX entries: ``updates`` requires a channel link, ``group`` a group
    link, and ``contact`` and ``business contact`` a contact address link. A
    SimpleX entry whose URL is no SimpleX link breaks the rule too. Only the
    kind of link is checked, not its key. Entries of other networks break no
    rule the protocol text states.
    """
    if not isinstance(address, CommunicationAddress):
        raise TypeError(f"expected a CommunicationAddress, got {type(address).__name__}")
    if not address.is_simplex:
        return None
    required = REQUIRED_LINK[address.type]
    kind = link_kind(address.url)
    if kind == required:
        return None
    entry = "business contact" if address.business else address.type
    found = "no SimpleX link" if kind is None else _LINK_NAMES[kind]
    return (
        f"a SimpleX {entry} entry requires {_LINK_NAMES[required]},"
        f" and {address.url[:80]!r} is {found}"
    )

"""``simplex-rpc discover URL``: the addresses a website lists, and what their links declare.

The first step of the protocol text's overview: the caller "reads the
addresses from the website", then "retrieves the link data with the link,
without connecting" and "reads the declarations". This command fetches
``URL/llms.txt`` over HTTPS (httpx, with a timeout and a size limit read as
the body streams), reads its ``## Communications`` section
(:func:`simplex_rpc.llms_txt.parse_communications`), and, given ``--core``,
asks the chat core for each SimpleX link's data with ``/_connect plan``
(:meth:`ChatCore.link_declarations`), which does not connect.

"The values in the public group record and in the address link data take
precedence over the values on a website" (the protocol text, "Contact
address peers"): where the link data was read, its type, audience,
frequency and protocols are the ones shown, and each value the website
states otherwise is shown as a disagreement.

``/.well-known/simplex.json`` and link relations are not read: their format
is not yet published.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import unicodedata
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..adapter import ChatCore, LinkDeclarations
from ..declarations import ProtocolDeclaration
from ..errors import ChatCoreError, SimplexRpcError, install_hint
from ..llms_txt import CommunicationAddress, check_address, link_kind, parse_communications
from ._common import EXIT_INVALID, EXIT_OK, CliError, emit_json, positive_seconds, whole_number
from ._options import add_json_option, add_start_option, core_url

#: The default limit on llms.txt's size: far above what a list of addresses needs.
DEFAULT_MAX_BYTES: Final = 1024 * 1024
#: The default limit on the whole fetch, connection to last byte, in seconds.
DEFAULT_TIMEOUT: Final = 10.0
_MAX_REDIRECTS: Final = 5

# The website's audience as the link data's peer types (the protocol text: "people,
# agents, or people and agents"; audience and serves hold "human, bot, business, agent").
_PEERS: Final = {
    "people": ("human",),
    "agents": ("agent",),
    "people and agents": ("human", "agent"),
}


def _clean(text: str, limit: int = 200) -> str:
    """``text`` for a terminal: control and format characters escaped, cut to ``limit``."""
    out = "".join(
        c if unicodedata.category(c)[0] != "C" else f"\\u{ord(c):04x}" for c in text[:limit]
    )
    return out + ("..." if len(text) > limit else "")


# -- the website ------------------------------------------------------------------------


def llms_txt_url(url: str) -> str:
    """The llms.txt of ``url``: ``URL/llms.txt``, or ``url`` itself when it names the file.

    Only ``https`` URLs are taken, without credentials: a :class:`CliError` otherwise.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise CliError(f"URL: {exc}") from None
    if parts.scheme != "https" or not host:
        raise CliError(f"URL: expected an https:// URL of a website, got {_clean(url, 80)!r}")
    if parts.username is not None or parts.password is not None:
        raise CliError("URL: must not carry credentials")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise CliError("URL: must not contain white space or control characters")
    path = parts.path
    if not path.endswith("/llms.txt"):
        path = path.rstrip("/") + "/llms.txt"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


async def fetch_llms_txt(
    url: str, *, timeout: float, max_bytes: int, cacert: str | None = None
) -> str:
    """The text of the llms.txt at ``url``, fetched over HTTPS.

    At most ``max_bytes`` are read (a declared ``Content-Length`` above it is
    refused before the body is read), the whole fetch takes at most
    ``timeout`` seconds, redirects are followed up to 5 times and only to
    ``https`` URLs, and the body must be UTF-8 (a leading byte order mark is
    dropped). ``cacert`` is a PEM file of
    certificate authorities to trust instead of the system's. Every failure
    is a one-line :class:`CliError`.
    """
    try:
        import httpx
    except ImportError:
        raise CliError("discover needs httpx: " + install_hint("discover")) from None
    verify: ssl.SSLContext | bool = True
    if cacert is not None:
        try:
            verify = ssl.create_default_context(cafile=cacert)
        except (OSError, ssl.SSLError) as exc:
            raise CliError(f"--cacert: cannot read {cacert!r}: {exc}") from None

    async def https_only(request: httpx.Request) -> None:
        if request.url.scheme != "https":
            raise CliError(f"{url}: redirected to a URL that is not https ({request.url.scheme})")

    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async with httpx.AsyncClient(
                verify=verify,
                timeout=httpx.Timeout(timeout),
                follow_redirects=True,
                max_redirects=_MAX_REDIRECTS,
                event_hooks={"request": [https_only]},
                trust_env=False,
            ) as client:
                async with client.stream("GET", url, headers={"Accept": "text/*"}) as response:
                    if response.status_code != 200:
                        raise CliError(f"{url}: the server answered HTTP {response.status_code}")
                    declared = response.headers.get("content-length")
                    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                        raise CliError(
                            f"{url}: the response is {int(declared)} bytes, over the limit of"
                            f" {max_bytes} (--max-bytes)"
                        )
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise CliError(
                                f"{url}: the response is over the limit of {max_bytes} bytes"
                                " (--max-bytes)"
                            )
    except (TimeoutError, httpx.TimeoutException):
        # The whole fetch's limit, or httpx's own for one step: the same limit either way.
        raise CliError(f"{url}: no complete answer within {timeout:g} s (--timeout)") from None
    except httpx.TooManyRedirects:
        raise CliError(f"{url}: more than {_MAX_REDIRECTS} redirects") from None
    except httpx.HTTPError as exc:
        raise CliError(f"{url}: {_clean(str(exc) or type(exc).__name__)}") from None
    try:
        return body.decode("utf-8-sig")  # a leading byte order mark is not text
    except UnicodeDecodeError as exc:
        raise CliError(f"{url}: not UTF-8 text (at byte offset {exc.start})") from None


# -- the website's entry against the link data ---------------------------------------------


@dataclass(slots=True)
class Entry:
    """One address of the section, with what its link declares.

    ``link`` is None when the link data was not read (another network, no
    ``--core``, or the core refused: ``error``). ``problem`` is the rule of
    the protocol text the website's entry breaks (:func:`check_address`).
    """

    address: CommunicationAddress
    link: LinkDeclarations | None = None
    error: str | None = None
    problem: str | None = None
    disagreements: list[str] = field(default_factory=list)

    @property
    def read(self) -> bool:
        """Whether the link data (or the profile the core knows) was read."""
        return self.link is not None and self.link.source is not None

    def type(self) -> str:
        """The address's type: the website's, unless the link is of another kind or its
        data says whether it is a business address."""
        site = self.address
        if not self.read or self.link is None:
            return "business contact" if site.business else site.type
        if self.link.kind == "contact":
            business = self.link.business if self.link.source == "link" else site.business
            return "business contact" if business else "contact"
        return site.type if site.type != "contact" else "group"

    def audience(self) -> list[str]:
        """The peer types the address is made for: the link data's, else the website's."""
        if self.read and self.link is not None:
            peers = self.link.serves if self.link.kind == "contact" else self.link.audience
            if peers is not None:
                return list(peers)
        return list(_PEERS[self.address.audience])

    def frequency(self) -> str | None:
        if self.read and self.link is not None and self.link.change_frequency is not None:
            return self.link.change_frequency
        return self.address.frequency

    def protocols(self) -> dict[str, ProtocolDeclaration | None]:
        """The protocols declared: the link data's, with their transports; else the names
        the website lists (their versions and transports unknown: None)."""
        if self.read and self.link is not None:
            return dict(self.link.protocols)
        return dict.fromkeys(self.address.protocols)


def compare(address: CommunicationAddress, link: LinkDeclarations) -> list[str]:
    """What the website states otherwise than the link data, one sentence each.

    Compared: the kind of address (a contact address or a group link), a
    business address, the audience (people as ``human``, agents as ``agent``;
    the link's other peer types are not stated on a website), a channel's
    frequency, and a contact's protocols.
    """
    if link.source is None:
        return []
    out: list[str] = []
    site_kind = "contact" if address.type == "contact" else "group"
    if link.kind != site_kind:
        out.append(
            f"type: the website says {address.type}, the link is"
            f" {'a contact address' if link.kind == 'contact' else 'a group or channel link'}"
        )
    elif link.kind == "contact" and link.source == "link" and address.business != link.business:
        out.append(
            "business: the website says "
            + ("a business contact" if address.business else "a contact")
            + ", the link data "
            + ("a business address" if link.business else "not a business address")
        )
    peers = link.serves if link.kind == "contact" else link.audience
    if peers is not None:
        stated = set(_PEERS[address.audience])
        declared = {p for p in peers if p in ("human", "agent")}
        if stated != declared:
            out.append(
                f"audience: the website says {address.audience}, the link data"
                f" {', '.join(peers) if peers else 'none it knows'}"
            )
    if (
        address.frequency is not None
        and link.change_frequency is not None
        and address.frequency != link.change_frequency
    ):
        out.append(
            f"frequency: the website says {address.frequency}, the link data"
            f" {link.change_frequency}"
        )
    if address.type == "contact" and link.kind == "contact":
        listed, declared_names = set(address.protocols), set(link.protocols)
        if listed != declared_names:
            out.append(
                "protocols: the website lists "
                + (", ".join(address.protocols) or "none")
                + ", the link data declares "
                + (", ".join(sorted(declared_names)) or "none")
            )
    return out


async def read_links(
    addresses: Sequence[CommunicationAddress], core: ChatCore | None, user_id: int
) -> list[Entry]:
    """Each address with its link data, read through ``core`` (when given) for SimpleX
    links; a link the core refuses keeps the core's error, and the others are read."""
    entries: list[Entry] = []
    for address in addresses:
        entry = Entry(address=address, problem=check_address(address))
        if core is not None and address.is_simplex and link_kind(address.url) is not None:
            try:
                entry.link = await core.link_declarations(user_id, address.url)
            except SimplexRpcError as exc:
                entry.error = _clean(str(exc))
            else:
                entry.disagreements = compare(address, entry.link)
        entries.append(entry)
    return entries


# -- output ---------------------------------------------------------------------------------


def _protocols_json(protocols: dict[str, ProtocolDeclaration | None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, declaration in protocols.items():
        if declaration is None:
            out.append({"name": name, "versions": None, "transports": None})
        else:
            transports = [t for t in ("chat", "rpc") if getattr(declaration, t)]
            out.append(
                {"name": name, "versions": list(declaration.versions), "transports": transports}
            )
    return out


def entry_json(entry: Entry) -> dict[str, Any]:
    """One address for ``--json``: the values shown (the link data's where read), the
    website's entry as written, and what was read from the link."""
    site = entry.address
    link = entry.link
    return {
        "title": site.title,
        "url": site.url,
        "network": site.network,
        "type": entry.type(),
        "audience": entry.audience(),
        "frequency": entry.frequency(),
        "protocols": _protocols_json(entry.protocols()),
        "source": (link.source if link is not None else None),
        "name": (link.name if link is not None else None),
        "website": {
            "type": site.type,
            "business": site.business,
            "audience": site.audience,
            "frequency": site.frequency,
            "protocols": list(site.protocols),
            "info": site.info,
        },
        "disagreements": list(entry.disagreements),
        "problem": entry.problem,
        "error": entry.error,
    }


def _protocols_text(protocols: dict[str, ProtocolDeclaration | None]) -> str:
    parts = []
    for name, declaration in protocols.items():
        if declaration is None:
            parts.append(name)
        else:
            transports = "+".join(t for t in ("chat", "rpc") if getattr(declaration, t))
            versions = ",".join(declaration.versions[:3]) + (
                ",..." if len(declaration.versions) > 3 else ""
            )
            parts.append(f"{name} {versions} ({transports or 'no transport'})")
    return "; ".join(parts) or "-"


def table(entries: Sequence[Entry]) -> str:
    """The addresses as a table, each note (read, differs, rule, error) under its row."""
    header = ("ADDRESS", "TYPE", "AUDIENCE", "PROTOCOLS")
    rows = []
    for entry in entries:
        audience = ", ".join(entry.audience()) or "-"
        if entry.frequency() is not None:
            audience += f" ({entry.frequency()})"
        rows.append(
            (
                _clean(entry.address.title, 60),
                entry.type(),
                audience,
                _protocols_text(entry.protocols()),
            )
        )
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(3)]
    lines = []
    for i, row in enumerate((header, *rows)):
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
        if i == 0:
            continue
        entry = entries[i - 1]
        lines.append(f"  link: {_clean(entry.address.url, 120)}")
        if entry.address.is_simplex:
            if entry.error is not None:
                lines.append(f"  link data: not read: {entry.error}")
            elif entry.link is None:
                lines.append("  link data: not read (no --core)")
            elif not entry.read:
                lines.append("  link data: none (the core has none for this link)")
        for text in entry.disagreements:
            lines.append(f"  differs: {text}; the link data's value is shown")
        if entry.problem is not None:
            lines.append(f"  rule: {_clean(entry.problem)}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


# -- the command ----------------------------------------------------------------------------


async def run_discover(args: argparse.Namespace) -> int:
    """Fetch, read and print; 0 when the section lists addresses, 1 when it has none."""
    url = llms_txt_url(args.url)
    text = await fetch_llms_txt(
        url, timeout=args.timeout, max_bytes=args.max_bytes, cacert=args.cacert
    )
    section = parse_communications(text)
    if not section and not section.problems:
        message = f"{url}: no addresses (no ## Communications section, or an empty one)"
        if args.json:
            emit_json({"url": url, "addresses": [], "problems": [], "error": message})
        else:
            print(message)
        return EXIT_INVALID
    if args.core is None:
        entries = await read_links(section, None, args.user)
    else:
        try:
            async with ChatCore.connect(args.core) as core:
                if args.start:
                    await core.start(service_requests=False)
                entries = await read_links(section, core, args.user)
        except ChatCoreError as exc:
            raise CliError(f"--core: {exc}") from None
    problems = [{"line": p.line, "message": p.message} for p in section.problems]
    if args.json:
        emit_json(
            {
                "url": url,
                "addresses": [entry_json(e) for e in entries],
                "problems": problems,
                "error": None,
            }
        )
    else:
        print(f"{url}: {len(entries)} address{'' if len(entries) == 1 else 'es'}")
        if entries:
            print(table(entries), end="")
        for problem in section.problems:
            print(f"llms.txt line {problem.line}: {_clean(problem.message)} (skipped)")
    return EXIT_OK if entries else EXIT_INVALID


def _cmd_discover(args: argparse.Namespace) -> int:
    return asyncio.run(run_discover(args))


def _max_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:32]!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of bytes")
    return value


def register(subparsers: Any) -> None:
    """Add ``discover`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "discover",
        help="list the addresses a website's llms.txt gives, with what their links declare",
        description="Fetch URL/llms.txt over HTTPS, read its ## Communications section and,"
        " with --core, ask the chat core for each SimpleX link's data without connecting"
        " (/_connect plan). Prints each address, its type, audience and the protocols and"
        " transports it declares; the link data's values take precedence over the website's,"
        " and a disagreement is shown. /.well-known/simplex.json and link relations are not"
        " read: their format is not yet published. Exit status 0 when the section lists"
        " addresses, 1 when there are none, 2 when the site or the core cannot be read.",
    )
    p.add_argument("url", metavar="URL", help="the website, for example https://example.com")
    p.add_argument(
        "--core",
        type=core_url,
        metavar="URL",
        help="the chat core's WebSocket API (for example ws://127.0.0.1:5225), to read"
        " each link's data; without it only the website's entries are shown",
    )
    p.add_argument(
        "--user",
        type=whole_number(1, "{value} is not a user id (1 or more)"),
        default=1,
        metavar="ID",
        help="the user id (default 1)",
    )
    add_start_option(p)
    p.add_argument(
        "--cacert",
        metavar="FILE",
        help="trust the certificate authorities in this PEM file instead of the system's",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds for the whole fetch (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--max-bytes",
        type=_max_bytes,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"the largest llms.txt read, in bytes (default {DEFAULT_MAX_BYTES})",
    )
    add_json_option(p, "print a JSON object: each address with its link data")
    p.set_defaults(handler=_cmd_discover)

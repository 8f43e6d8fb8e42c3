"""Chat-transport subcommands of ``simplex-rpc``: ``llms-txt`` and ``call-text``.

``llms-txt FILE`` prints the communication addresses of an llms.txt file
(``-`` reads stdin); lines of the section off the grammar go to stderr with
their numbers. ``call-text PROTOCOL JSON`` prints the ``/_call`` command for a
request (JSON given literally, as ``@FILE`` or ``-``) and says on stderr
whether it fits one chat message. ``--json`` prints one JSON object for
programs. Exit status: 0 when everything is valid, 1 when a line is off the
grammar, an entry breaks a rule or a command does not fit, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..chat import MAX_MESSAGE_JSON, command_allowance, encoded_size, fits_message, format_call
from ..llms_txt import CommunicationAddress, check_address, parse_communications
from ._common import EXIT_INVALID, EXIT_OK, emit_json, fail, load_json, read_file
from ._options import add_json_option


def _read_text(path: str) -> str:
    """The text of the file at ``path`` (``-`` is stdin): UTF-8, a leading BOM dropped."""
    data = read_file(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(f"{path}: invalid UTF-8 at byte offset {exc.start}")


def _address_json(address: CommunicationAddress) -> dict[str, Any]:
    return {
        "title": address.title,
        "url": address.url,
        "network": address.network,
        "type": address.type,
        "business": address.business,
        "audience": address.audience,
        "frequency": address.frequency,
        "protocols": list(address.protocols),
        "info": address.info,
        "brokenRule": check_address(address),
    }


def _cmd_llms_txt(args: argparse.Namespace) -> int:
    found = parse_communications(_read_text(args.file))
    broken = [check_address(a) for a in found]
    if args.json:
        emit_json(
            {
                "addresses": [_address_json(a) for a in found],
                "problems": [
                    {"line": p.line, "text": p.text, "message": p.message} for p in found.problems
                ],
            }
        )
    else:
        if not found and not found.problems:
            print("no addresses (no '## Communications' section, or it is empty)", file=sys.stderr)
        for address, rule in zip(found, broken, strict=True):
            kind = (
                ("business contact" if address.business else "contact")
                if (address.type == "contact")
                else address.type
            )
            print(address.title)
            print(f"  url:       {address.url}")
            print(f"  network:   {address.network}")
            print(f"  type:      {kind}")
            print(f"  audience:  {address.audience}")
            if address.frequency is not None:
                print(f"  frequency: {address.frequency}")
            if address.protocols:
                print(f"  protocols: {', '.join(address.protocols)}")
            if address.info:
                print(f"  info:      {address.info}")
            if rule is not None:
                print(f"  BROKEN:    {rule}")
        for problem in found.problems:
            print(
                f"{args.file}:{problem.line}: {problem.message}: {problem.text.strip()}",
                file=sys.stderr,
            )
    if found.problems or any(rule is not None for rule in broken):
        return EXIT_INVALID
    return EXIT_OK


def _cmd_call_text(args: argparse.Namespace) -> int:
    request = load_json(args.request, what="request")
    if not isinstance(request, dict):
        fail("request: expected a JSON object")
    text = format_call(args.protocol, request, member=args.member)
    size = encoded_size(text)
    allowance = command_allowance(args.member)
    fits = fits_message(text)
    if args.json:
        emit_json(
            {
                "command": text,
                "encodedSize": size,
                "allowance": allowance,
                "limit": MAX_MESSAGE_JSON,
                "fits": fits,
            }
        )
    else:
        print(text)
        verdict = "fits one message" if fits else "does NOT fit one message"
        print(
            f"{verdict}: {size} + {allowance} bytes of message JSON, limit {MAX_MESSAGE_JSON}",
            file=sys.stderr,
        )
    return EXIT_OK if fits else EXIT_INVALID


_JSON_HELP = "print one JSON object for programs"


def register(subparsers: Any) -> None:
    """Add ``llms-txt`` and ``call-text``."""
    p = subparsers.add_parser(
        "llms-txt",
        help="print the communication addresses of an llms.txt file",
        description="Read the '## Communications' section of an llms.txt file: print each"
        " address, the rule a SimpleX entry breaks, and (on stderr) the lines off the grammar."
        " Exit 1 if there are any.",
    )
    p.add_argument("file", metavar="FILE", help="the llms.txt file, or - for stdin")
    add_json_option(p, _JSON_HELP)
    p.set_defaults(handler=_cmd_llms_txt)

    p = subparsers.add_parser(
        "call-text",
        help="write a /_call command and say whether it fits one message",
        description="Print '/_call [@MEMBER ]PROTOCOL REQUEST' with the request as compact JSON,"
        " and on stderr whether it fits one chat message (exit 1 if not).",
    )
    p.add_argument("protocol", metavar="PROTOCOL", help="protocol name, for example mcp or a2a")
    p.add_argument("request", metavar="JSON", help="the request: a JSON object, @FILE or -")
    p.add_argument("--member", metavar="NAME", help="the group member to mention")
    add_json_option(p, _JSON_HELP)
    p.set_defaults(handler=_cmd_call_text)

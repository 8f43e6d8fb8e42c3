"""``llms-txt FILE``: the communication addresses of an llms.txt file.

It prints each address (``-`` reads stdin) and the rule a SimpleX entry breaks;
lines of the section off the grammar go to stderr with their numbers. ``--json``
prints one JSON object for programs. Exit status: 0 when everything is valid, 1
when a line is off the grammar or an entry breaks a rule, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..llms_txt import CommunicationAddress, check_address, parse_communications
from ._common import EXIT_INVALID, EXIT_OK, emit_json, fail, read_file
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


def register(subparsers: Any) -> None:
    """Add ``llms-txt`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "llms-txt",
        help="print the communication addresses of an llms.txt file",
        description="Read the '## Communications' section of an llms.txt file: print each"
        " address, the rule a SimpleX entry breaks, and (on stderr) the lines off the grammar."
        " Exit 1 if there are any.",
    )
    p.add_argument("file", metavar="FILE", help="the llms.txt file, or - for stdin")
    add_json_option(p, "print one JSON object for programs")
    p.set_defaults(handler=_cmd_llms_txt)


__all__ = ["register"]

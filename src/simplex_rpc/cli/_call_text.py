"""``call-text PROTOCOL JSON``: the ``/_call`` command for a request, and whether it fits.

It prints the command (the request given literally, as ``@FILE`` or ``-``) and
says on stderr whether it fits one chat message. ``--json`` prints one JSON
object for programs. Exit status: 0 when it fits, 1 when it does not, 2 on bad
usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..chat import MAX_MESSAGE_JSON, command_allowance, encoded_size, fits_message, format_call
from ._common import EXIT_INVALID, EXIT_OK, emit_json, fail, load_json
from ._options import add_json_option


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


def register(subparsers: Any) -> None:
    """Add ``call-text`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "call-text",
        help="write a /_call command and say whether it fits one message",
        description="Print '/_call [@MEMBER ]PROTOCOL REQUEST' with the request as compact JSON,"
        " and on stderr whether it fits one chat message (exit 1 if not).",
    )
    p.add_argument("protocol", metavar="PROTOCOL", help="protocol name, for example mcp or a2a")
    p.add_argument("request", metavar="JSON", help="the request: a JSON object, @FILE or -")
    p.add_argument("--member", metavar="NAME", help="the group member to mention")
    add_json_option(p, "print one JSON object for programs")
    p.set_defaults(handler=_cmd_call_text)


__all__ = ["register"]

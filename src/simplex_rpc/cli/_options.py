"""The options that several commands share, defined once: each ``add_*`` gives a subcommand
one option (or one set) with the same name, type, default and help wherever it appears.

``--core`` (and ``$SIMPLEX_RPC_CORE``), ``--user``, ``--json``, ``--no-start``,
and the route of a call to a bot (``add_route_options``: ``--core``, ``--user``,
``--via``, ``--member``, ``--sign-key``, ``--timeout``, ``--no-start`` and the
target), which ``mcp``/``a2a`` calls and both proxies take. Option types
(``whole_number``, ``positive_seconds``, ``listen_address``) are in ``_common``.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse
from typing import Final

from .._wire.redact import redact
from ._common import positive_seconds, whole_number

VIAS: Final = ("rpc", "chat", "auto")
"""The ``--via`` choices (the clients' ``VIAS``, without importing an SDK)."""

#: The bot's time to answer each request: the protocol's default ``timeout`` of a
#: ``/_service_request`` ("Service RPC transport"), as the library's clients wait.
DEFAULT_TIMEOUT: Final = 30.0

#: argparse ``type=`` for a count of 1 or more, and of 0 or more.
positive_int = whole_number(1, "must be at least 1")
non_negative_int = whole_number(0, "must not be negative")

CORE_ENV: Final = "SIMPLEX_RPC_CORE"
"""The environment variable that gives ``--core`` its default."""


def add_core_option(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Give a subcommand ``--core URL`` (``args.core``), defaulting to ``$SIMPLEX_RPC_CORE``.

    Read when the parser is built: a command that needs a core and has neither
    is a usage error naming both.
    """
    default = os.environ.get(CORE_ENV) or None
    p.add_argument(
        "--core",
        required=required and default is None,
        default=default,
        type=core_url,
        metavar="URL",
        help="the chat core's WebSocket API, for example ws://127.0.0.1:5225 (simplex-chat"
        f" -p 5225 -m; the simulator alone uses a path, to pick one of its simulated cores);"
        f" default ${CORE_ENV}" + (f" (now {redact(default)})" if default else ""),
    )


def core_url(text: str) -> str:
    """An argparse ``type=``: the chat core's WebSocket URL, ``ws://HOST:PORT[/PATH]``."""
    parsed = urllib.parse.urlsplit(text)
    try:
        parsed.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: the port is not a number") from None
    if parsed.scheme not in ("ws", "wss") or not parsed.hostname:
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a WebSocket URL: expected ws://HOST:PORT,"
            " for example ws://127.0.0.1:5225"
        )
    return text


def add_json_option(parser: argparse.ArgumentParser, help: str = "print a JSON object") -> None:
    """Give a subcommand the ``--json`` flag (``args.json``): output for programs."""
    parser.add_argument("--json", action="store_true", help=help)


def add_user_option(p: argparse.ArgumentParser) -> None:
    """``--user ID`` (``args.user``): the core's user, 1 by default."""
    p.add_argument(
        "--user", type=positive_int, default=1, metavar="ID", help="the user id (default 1)"
    )


def add_start_option(p: argparse.ArgumentParser) -> None:
    """``--no-start`` (``args.start``, True unless given): skip ``/_start main=on``."""
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on first (a running core answers chatRunning)",
    )


def add_route_options(
    p: argparse.ArgumentParser, *, target_metavar: str = "TARGET", json_help: str | None = None
) -> None:
    """How a call reaches a bot: ``--core``, ``--user``, ``--via``, ``--member``,
    ``--sign-key``, ``--timeout``, ``--no-start``, ``--json`` (when ``json_help``) and the
    positional target, added last (``args.target``)."""
    add_core_option(p)
    add_user_option(p)
    p.add_argument(
        "--via",
        choices=VIAS,
        default="rpc",
        help="how requests reach the bot: rpc (Service RPC, one request and one response,"
        f" the default), chat (/_call in the conversation {target_metavar}: everything, streams"
        " included) or auto (rpc when the address declares the protocol over rpc)",
    )
    p.add_argument(
        "--member",
        metavar="NAME",
        help="with --via chat in a group: the bot's display name, mentioned in each call",
    )
    p.add_argument(
        "--sign-key",
        metavar="KEY",
        help="sign every Service RPC request with this private key: use @FILE (a 0600 file,"
        " as keygen -o writes; a file others can read is refused, as ssh does); sign_key="
        " text and - (standard input, unless it carries the host's protocol) work too, but"
        " a key on the command line is visible to other users of the machine",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds the bot has to answer each request (default {DEFAULT_TIMEOUT:g}, the"
        " protocol's default; up to 180, the core's window, for slow bots)",
    )
    add_start_option(p)
    if json_help is not None:
        add_json_option(p, json_help)
    p.add_argument(
        "target",
        metavar=target_metavar,
        help="the bot's contact address link or SimpleX name; with --via chat, the ChatRef of"
        " the conversation (@CONTACT_ID or #GROUP_ID)",
    )


__all__ = [
    "CORE_ENV",
    "DEFAULT_TIMEOUT",
    "VIAS",
    "add_core_option",
    "add_json_option",
    "add_route_options",
    "add_start_option",
    "add_user_option",
    "core_url",
    "non_negative_int",
    "positive_int",
]

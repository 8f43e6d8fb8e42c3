"""The options and the run of the two proxies, ``mcp-proxy`` and ``a2a-proxy``: one definition.

Both forward every request of a local host to the bot at ``TARGET`` through the
chat core, so they take the same options with the same defaults: the route to
the bot (``_options.add_route_options``, as ``mcp call`` and ``a2a send`` take
it: ``--timeout`` 30 s, the protocol's default wait of a requester),
``--listen`` with the listener's options (``_listener_options``) and
``--verbose``. What differs is said by the caller: whether ``--listen`` has a
default (the MCP proxy serves stdio without it), and whether standard input is
the host's channel (then ``--sign-key -`` is refused).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from .._wire.keys import SigningKey
from ..errors import SimplexRpcError
from ._common import CliError, listen_address, load_sign_key, run_until_signal
from ._listener_options import add_listener_options, check_before_start, listener_policy
from ._options import add_route_options


def add_proxy_parser(
    subparsers: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    texts: tuple[str, str],
    listen: tuple[tuple[str, int] | None, str],
) -> None:
    """Add the proxy command ``name`` (its ``texts``: the help line and the description),
    run by ``handler``, with the proxies' options (``listen``: ``--listen``'s default and
    help)."""
    help_line, description = texts
    p = subparsers.add_parser(name, help=help_line, description=description)
    add_proxy_options(p, listen_default=listen[0], listen_help=listen[1])
    p.set_defaults(handler=handler)


def add_proxy_options(
    p: argparse.ArgumentParser, *, listen_default: tuple[str, int] | None, listen_help: str
) -> None:
    """Give a proxy subcommand its options: the route to the bot, ``--listen`` (optional
    when ``listen_default`` is None: standard input and output carry the host's protocol
    without it), the listener's options and ``--verbose``."""
    add_route_options(p)
    p.add_argument(
        "--listen",
        type=listen_address,
        default=listen_default,
        metavar="HOST:PORT",
        help=listen_help,
    )
    add_listener_options(p)
    p.add_argument("--verbose", action="store_true", help="log connections on standard error")


def check_route(args: argparse.Namespace, *, group_needs_member: bool) -> None:
    """``TARGET``, ``--via`` and ``--member`` agree: a ChatRef with ``--via chat`` (and, when
    ``group_needs_member``, a member for a group), ``--member`` only with it."""
    from ..adapter._chat import check_chat_ref

    if args.via == "chat":
        try:
            check_chat_ref(args.target, "TARGET")
        except SimplexRpcError as exc:
            raise CliError(f"{exc} (with --via chat, TARGET is @CONTACT_ID or #GROUP_ID)") from None
        if group_needs_member and args.target.startswith("#") and args.member is None:
            raise CliError("--member: TARGET is a group: name the bot's member display name")
    elif args.member is not None:
        raise CliError("--member: only with --via chat in a group")


def proxy_sign_key(args: argparse.Namespace, *, stdin_is_channel: bool) -> SigningKey | None:
    """``--sign-key``'s key, or None; ``-`` is refused when standard input is the host's."""
    spec: str | None = args.sign_key
    if spec is None:
        return None
    if spec == "-" and stdin_is_channel:
        raise CliError("--sign-key: standard input carries MCP here; give the key as @FILE")
    # The messages never contain the key; the text itself is not echoed.
    return load_sign_key(spec)


def listening_policy(args: argparse.Namespace) -> Any:
    """The listener's policy for ``--listen`` (checked before any connection), or None
    without it; the listener's options without ``--listen`` are a usage error."""
    if args.listen is None:
        if args.token is not None or args.allow_host or args.allow_origin:
            raise CliError("--token, --allow-host and --allow-origin go with --listen")
        return None
    policy = listener_policy(args, *args.listen)
    check_before_start(policy)
    return policy


def prepare(args: argparse.Namespace, *, group_needs_member: bool) -> tuple[Any, SigningKey | None]:
    """The checks before any connection, then the listener's policy (None: stdio) and the
    signing key: over stdio, standard input is the host's channel, so no ``--sign-key -``."""
    check_route(args, group_needs_member=group_needs_member)
    policy = listening_policy(args)
    return policy, proxy_sign_key(args, stdin_is_channel=policy is None)


def log_to_stderr(command: str, args: argparse.Namespace) -> None:
    """Log lines go to standard error (standard output carries the host's protocol or the
    listening line): warnings, or connections too with ``--verbose``."""
    logging.basicConfig(
        level=logging.WARNING if not args.verbose else logging.INFO,
        stream=sys.stderr,
        format=f"simplex-rpc {command}: %(message)s",
    )


def run_listening(
    command: str, run: Callable[[Any, Callable[[str], None]], Coroutine[Any, Any, Any]]
) -> int:
    """Run ``run(stopper, listening)`` until it ends or a signal stops it; ``listening(url)``
    is called once the listener is bound. A listener that cannot start is a usage error."""
    from .._listener import ListenerError, Stopper

    where: list[str] = []
    stopper = Stopper()
    try:
        return run_until_signal(
            run(stopper, where.append),
            stop=stopper.stop,
            stopped=lambda: (
                f"simplex-rpc {command}: stopped"
                + (f"; no longer listening on {where[0]}" if where else "")
            ),
        )
    except ListenerError as exc:
        raise CliError(str(exc)) from None


__all__ = [
    "add_proxy_options",
    "add_proxy_parser",
    "check_route",
    "listening_policy",
    "log_to_stderr",
    "prepare",
    "proxy_sign_key",
    "run_listening",
]

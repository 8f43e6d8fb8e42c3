"""The ``a2a-proxy`` subcommand: a local A2A JSON-RPC HTTP server for a bot over SimpleX.

``simplex-rpc a2a-proxy --core ws://127.0.0.1:5225 TARGET`` listens on
127.0.0.1 (a free port unless ``--listen HOST:PORT``), prints
``listening: http://HOST:PORT`` once ready and forwards every A2A request to
the bot (``simplex_rpc.a2a._proxy``). It needs the ``a2a`` extra, imported
only when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .._wire.keys import SigningKey
from ..errors import SimplexRpcError
from ._common import (
    CliError,
    add_core_option,
    install_hint,
    load_sign_key,
    positive_seconds,
    run_until_signal,
    whole_number,
)
from ._listener_options import add_listener_options, check_before_start, listener_policy

VIAS = ("rpc", "chat", "auto")
"""The ``--via`` choices (``simplex_rpc.a2a._proxy.PROXY_VIAS``, without importing the SDK)."""

_positive_int = whole_number(1, "must be at least 1")


def _listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6); port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text[:64]!r}: expected HOST:PORT, for example 127.0.0.1:8080 (port 0 for any)"
        )
    return host, int(port)


def _load_sign_key(spec: str) -> SigningKey:
    # The messages never contain the key; a key file others can read is refused.
    return load_sign_key(spec)


async def _run(args: argparse.Namespace, settings: Any, stopper: Any, where: list[str]) -> None:
    from ..a2a import _proxy
    from ..adapter import ChatCore

    async with ChatCore.connect(args.core) as core:
        if args.start:
            # A core that is running already answers chatRunning and is unchanged.
            await core.start(service_requests=False)
        await _proxy.run_proxy(core, settings, on_ready=where.append, stopper=stopper)


def _cmd_a2a_proxy(args: argparse.Namespace) -> int:
    try:
        from ..a2a import _proxy
    except ImportError as exc:
        raise CliError(f"needs the a2a-sdk: {install_hint('a2a')} ({exc})") from None
    from ..adapter._chat import check_chat_ref

    if args.via == "chat":
        try:
            check_chat_ref(args.target, "TARGET")
        except SimplexRpcError as exc:
            raise CliError(f"{exc} (with --via chat, TARGET is @CONTACT_ID or #GROUP_ID)") from None
        if args.target.startswith("#") and args.member is None:
            raise CliError("--member: TARGET is a group: name the bot's member display name")
    elif args.member is not None:
        raise CliError("--member: only with --via chat in a group")
    host, port = args.listen
    policy = listener_policy(args, host, port)
    check_before_start(policy)
    sign_key = _load_sign_key(args.sign_key) if args.sign_key is not None else None
    settings = _proxy.ProxySettings(
        user_id=args.user,
        target=args.target,
        via=args.via,
        member=args.member,
        sign_key=sign_key,
        timeout=args.timeout,
        host=host,
        port=port,
        listener=policy,
    )
    # Standard output carries the listening line: log lines go to standard error.
    logging.basicConfig(
        level=logging.WARNING if not args.verbose else logging.INFO,
        stream=sys.stderr,
        format="simplex-rpc a2a-proxy: %(message)s",
    )
    from .._listener import ListenerError, Stopper

    stopper = Stopper()
    where: list[str] = []
    try:
        return run_until_signal(
            _run(args, settings, stopper, where),
            stop=stopper.stop,
            stopped=lambda: "simplex-rpc a2a-proxy: stopped"
            + (f"; no longer listening on {where[0]}" if where else ""),
        )
    except ListenerError as exc:
        raise CliError(str(exc)) from None


def register(subparsers: Any) -> None:
    """Add ``a2a-proxy`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "a2a-proxy",
        help="serve a SimpleX bot to local A2A clients over A2A's JSON-RPC HTTP binding",
        description="A local A2A JSON-RPC HTTP server (a2a-sdk's server app): GET"
        " /.well-known/agent-card.json gives the bot's card with a JSON-RPC interface at this"
        " server, and each request goes to the bot at TARGET through the chat core, streams"
        " as server-sent events. Prints 'listening: http://HOST:PORT' on stdout once ready."
        " Needs the a2a extra.",
    )
    add_core_option(p)
    p.add_argument(
        "--user", type=_positive_int, default=1, metavar="ID", help="the user id (default 1)"
    )
    p.add_argument(
        "target",
        metavar="TARGET",
        help="the bot's contact address link or name; with --via chat, the ChatRef of the"
        " conversation (@CONTACT_ID or #GROUP_ID)",
    )
    p.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:0, a free port)",
    )
    p.add_argument(
        "--via",
        choices=VIAS,
        default="rpc",
        help="how requests reach the bot: rpc (Service RPC: one-shot SendMessage, the"
        " default), chat (/_call in the conversation TARGET: everything, streams included)"
        " or auto (rpc when the address declares a2a over rpc)",
    )
    p.add_argument(
        "--member",
        metavar="NAME",
        help="with --via chat in a group: the bot's display name, mentioned in each call",
    )
    p.add_argument(
        "--sign-key",
        metavar="KEY",
        help="sign every Service RPC request with this private key (sign_key= text, @FILE"
        " or -); prefer @FILE: a key on the command line is visible to other users",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=180.0,
        metavar="S",
        help="seconds the bot has to answer each request (default 180, the Service RPC window)",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on first (a running core answers chatRunning)",
    )
    add_listener_options(p)
    p.add_argument("--verbose", action="store_true", help="log on standard error")
    p.set_defaults(handler=_cmd_a2a_proxy)


__all__ = ["register"]

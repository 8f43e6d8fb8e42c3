"""The ``mcp-proxy`` subcommand: an MCP host's local server for a bot over SimpleX.

``simplex-rpc mcp-proxy --core ws://127.0.0.1:5225 TARGET`` serves MCP on
stdin and stdout (or, with ``--listen HOST:PORT``, as a Streamable HTTP server
at ``http://HOST:PORT/mcp``) and forwards every request to the bot at
``TARGET`` (``simplex_rpc.mcp._proxy``). It needs the ``mcp`` extra, imported only when
the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .._wire.keys import SigningKey
from ._common import (
    CliError,
    add_core_option,
    install_hint,
    listen_address,
    load_sign_key,
    positive_seconds,
    run_until_signal,
    whole_number,
)
from ._listener_options import add_listener_options, check_before_start, listener_policy

VIAS = ("rpc", "chat", "auto")
"""The ``--via`` choices (``simplex_rpc.mcp._client.VIAS``, without importing the SDK)."""

_positive_int = whole_number(1, "must be at least 1")


def _load_sign_key(spec: str) -> SigningKey:
    # Standard input is the host's MCP channel, so the key comes from text or a file.
    if spec == "-":
        raise CliError("--sign-key: standard input carries MCP here; give the key as @FILE")
    # The messages never contain the key; the text itself is not echoed.
    return load_sign_key(spec)


def _cmd_mcp_proxy(args: argparse.Namespace) -> int:
    try:
        from ..mcp import _proxy as _mcp_proxy
    except ImportError as exc:
        raise CliError(f"needs the mcp SDK: {install_hint('mcp')} ({exc})") from None
    policy = None
    if args.listen is not None:
        policy = listener_policy(args, *args.listen)
        check_before_start(policy)
    elif args.token is not None or args.allow_host or args.allow_origin:
        raise CliError("--token, --allow-host and --allow-origin go with --listen")
    sign_key = _load_sign_key(args.sign_key) if args.sign_key is not None else None
    connect = _mcp_proxy.connector(
        args.core,
        args.user,
        args.target,
        via=args.via,
        sign_key=sign_key,
        timeout=args.timeout,
        start=args.start,
        member=args.member,
    )
    # Standard output is the MCP channel: log lines go to standard error.
    logging.basicConfig(
        level=logging.WARNING if not args.verbose else logging.INFO,
        stream=sys.stderr,
        format="simplex-rpc mcp-proxy: %(message)s",
    )
    if policy is None:
        # A signal stops reading stdin, as its end does: what was read is still answered.
        outcome = _mcp_proxy.StdioOutcome()
        return run_until_signal(
            _mcp_proxy.run_proxy(connect, args.target, outcome=outcome, drain=args.timeout + 5),
            stop=outcome.stop,
            stopped=lambda: f"simplex-rpc mcp-proxy: {outcome.line()}",
        )
    from .._listener import ListenerError, Stopper

    where: list[str] = []

    def listening(url: str) -> None:
        # The line a host's launcher (or a test) waits for: the URL to configure.
        where.append(url)
        print(f"listening: {url}", flush=True)

    stopper = Stopper()
    try:
        return run_until_signal(
            _mcp_proxy.run_proxy_http(connect, args.target, policy, listening, stopper=stopper),
            stop=stopper.stop,
            stopped=lambda: "simplex-rpc mcp-proxy: stopped"
            + (f"; no longer listening on {where[0]}" if where else ""),
        )
    except ListenerError as exc:
        raise CliError(str(exc)) from None


def register(subparsers: Any) -> None:
    """Add ``mcp-proxy`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "mcp-proxy",
        help="serve a SimpleX bot's MCP tools to a local MCP host (stdio, or HTTP with --listen)",
        description="A stdio MCP server for an MCP host (desktop app, IDE), or with --listen a"
        " Streamable HTTP one for hosts that take a URL: every request is"
        " forwarded to the bot at TARGET through the chat core. The host may speak any MCP"
        " revision, the initialize handshake of revisions before 2026-07-28 included."
        " Needs the mcp extra.",
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
        "--via",
        choices=VIAS,
        default="rpc",
        help="how requests reach the bot: rpc (Service RPC, the default), chat (/_call in"
        " the conversation TARGET) or auto (rpc when the address declares it)",
    )
    p.add_argument(
        "--member",
        metavar="NAME",
        help="with --via chat in a group: the bot's display name, mentioned in each call",
    )
    p.add_argument(
        "--sign-key",
        metavar="KEY",
        help="sign every request with this private key: use @FILE (a 0600 file, as keygen"
        " -o writes; a file others can read is refused, as ssh does); sign_key= text works too, but"
        " a key on the command line is visible to other users of the machine",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds the bot has to answer each request (default 30)",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on first (a running core answers chatRunning)",
    )
    p.add_argument(
        "--listen",
        type=listen_address,
        default=None,
        metavar="HOST:PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio, for hosts that"
        " take a URL (port 0 picks one); prints 'listening: URL' on stdout once ready",
    )
    add_listener_options(p)
    p.add_argument("--verbose", action="store_true", help="log connections on standard error")
    p.set_defaults(handler=_cmd_mcp_proxy)


__all__ = ["register"]

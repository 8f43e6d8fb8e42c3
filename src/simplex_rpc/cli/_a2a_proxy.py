"""The ``a2a-proxy`` subcommand: a local A2A JSON-RPC HTTP server for a bot over SimpleX.

``simplex-rpc a2a-proxy --core ws://127.0.0.1:5225 TARGET`` listens on
127.0.0.1 (a free port unless ``--listen HOST:PORT``), prints
``listening: http://HOST:PORT`` once ready and forwards every A2A request to
the bot (``simplex_rpc.a2a._proxy``). It needs the ``a2a`` extra, imported
only when the command runs. Its options are ``mcp-proxy``'s (``_proxy_options``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ._common import CliError, install_hint
from ._proxy_options import add_proxy_parser, log_to_stderr, prepare, run_listening

#: ``--help``'s line and the description of ``a2a-proxy``.
_TEXTS = (
    "serve a SimpleX bot to local A2A clients over A2A's JSON-RPC HTTP binding",
    "A local A2A JSON-RPC HTTP server (a2a-sdk's server app): GET"
    " /.well-known/agent-card.json gives the bot's card with a JSON-RPC interface at this"
    " server, and each request goes to the bot at TARGET through the chat core, streams"
    " as server-sent events. Prints 'listening: http://HOST:PORT' on stdout once ready."
    " Needs the a2a extra.",
)
#: ``--listen``'s default and help.
_LISTEN = (("127.0.0.1", 0), "where to listen (default 127.0.0.1:0, a free port)")


def _cmd_a2a_proxy(args: argparse.Namespace) -> int:
    try:
        from ..a2a import _proxy
    except ImportError as exc:
        raise CliError(f"needs the a2a-sdk: {install_hint('a2a')} ({exc})") from None
    from ..adapter import ChatCore

    # In a group any member could answer a call: the A2A binding names the bot's member.
    policy, sign_key = prepare(args, group_needs_member=True)
    host, port = args.listen
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
    log_to_stderr("a2a-proxy", args)

    async def run(stopper: Any, ready: Callable[[str], None]) -> None:
        async with ChatCore.connect(args.core) as core:
            if args.start:
                # A core that is running already answers chatRunning and is unchanged.
                await core.start(service_requests=False)
            await _proxy.run_proxy(core, settings, on_ready=ready, stopper=stopper)

    return run_listening("a2a-proxy", run)


def register(subparsers: Any) -> None:
    """Add ``a2a-proxy`` to the ``simplex-rpc`` parser."""
    add_proxy_parser(subparsers, "a2a-proxy", _cmd_a2a_proxy, texts=_TEXTS, listen=_LISTEN)


__all__ = ["register"]

"""The ``mcp-proxy`` subcommand: an MCP host's local server for a bot over SimpleX.

``simplex-rpc mcp-proxy --core ws://127.0.0.1:5225 TARGET`` serves MCP on
stdin and stdout (or, with ``--listen HOST:PORT``, as a Streamable HTTP server
at ``http://HOST:PORT/mcp``) and forwards every request to the bot at
``TARGET`` (``simplex_rpc.mcp._proxy``). It needs the ``mcp`` extra, imported only when
the command runs. Its options are ``a2a-proxy``'s (``_proxy_options``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ._common import CliError, install_hint, run_until_signal
from ._proxy_options import add_proxy_parser, log_to_stderr, prepare, run_listening

#: ``--help``'s line and the description of ``mcp-proxy``.
_TEXTS = (
    "serve a SimpleX bot's MCP tools to a local MCP host (stdio, or HTTP with --listen)",
    "A stdio MCP server for an MCP host (desktop app, IDE), or with --listen a"
    " Streamable HTTP one for hosts that take a URL: every request is"
    " forwarded to the bot at TARGET through the chat core. The host may speak any MCP"
    " revision, the initialize handshake of revisions before 2026-07-28 included."
    " Needs the mcp extra.",
)
#: ``--listen``'s default and help.
_LISTEN = (
    None,
    "serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio, for hosts"
    " that take a URL (port 0 picks one); prints 'listening: URL' on stdout once ready",
)


def _cmd_mcp_proxy(args: argparse.Namespace) -> int:
    try:
        from ..mcp import _proxy as _mcp_proxy
    except ImportError as exc:
        raise CliError(f"needs the mcp SDK: {install_hint('mcp')} ({exc})") from None
    policy, sign_key = prepare(args, group_needs_member=False)
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
    log_to_stderr("mcp-proxy", args)
    if policy is None:
        # A signal stops reading stdin, as its end does: what was read is still answered.
        outcome = _mcp_proxy.StdioOutcome()
        return run_until_signal(
            _mcp_proxy.run_proxy(connect, args.target, outcome=outcome, drain=args.timeout + 5),
            stop=outcome.stop,
            stopped=lambda: f"simplex-rpc mcp-proxy: {outcome.line()}",
        )

    def run(stopper: Any, ready: Callable[[str], None]) -> Any:
        def listening(url: str) -> None:
            # The line a host's launcher (or a test) waits for: the URL to configure.
            ready(url)
            print(f"listening: {url}", flush=True)

        return _mcp_proxy.run_proxy_http(connect, args.target, policy, listening, stopper=stopper)

    return run_listening("mcp-proxy", run)


def register(subparsers: Any) -> None:
    """Add ``mcp-proxy`` to the ``simplex-rpc`` parser."""
    add_proxy_parser(subparsers, "mcp-proxy", _cmd_mcp_proxy, texts=_TEXTS, listen=_LISTEN)


__all__ = ["register"]

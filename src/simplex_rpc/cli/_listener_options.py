"""The options of the HTTP listeners, shared by ``mcp-proxy --listen`` and ``a2a-proxy``.

``--token @FILE`` (or ``SIMPLEX_RPC_TOKEN``), ``--allow-host``,
``--allow-origin`` and the caps: ``--max-body-size``, ``--max-connections``,
``--read-timeout``. The defaults are ``simplex_rpc._listener``'s; that module
(and the SDKs it needs) is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import TYPE_CHECKING, Any

from ._common import CliError, positive_seconds, read_file, whole_number

if TYPE_CHECKING:
    from .._listener import ListenerPolicy, Token

# The defaults, repeated here so that --help needs no SDK (a test keeps them equal).
MAX_BODY = 4 * 1024 * 1024
MAX_CONNECTIONS = 256
READ_TIMEOUT = 10.0
TOKEN_ENV = "SIMPLEX_RPC_TOKEN"


def add_listener_options(parser: argparse.ArgumentParser) -> None:
    """Give a listening subcommand the token, allow-lists and caps."""
    parser.add_argument(
        "--token",
        metavar="@FILE",
        help="require 'Authorization: Bearer TOKEN' from every client, the token read from"
        f" FILE (or from the environment variable {TOKEN_ENV}); needed to listen on an"
        " address other than loopback",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="also answer requests whose Host header is NAME (at the listening port, or"
        " PORT); by default only the address listened on (and localhost on loopback)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also answer browser requests from ORIGIN (for example https://app.example),"
        " with CORS headers; by default a request with a foreign Origin is refused",
    )
    parser.add_argument(
        "--max-body-size",
        type=whole_number(1, "must be at least 1 byte"),
        default=MAX_BODY,
        metavar="BYTES",
        help=f"the largest request body accepted (default {MAX_BODY}, 4 MiB)",
    )
    parser.add_argument(
        "--max-connections",
        type=whole_number(1, "must be at least 1"),
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections kept open at once; more are answered 503 (default {MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--read-timeout",
        type=positive_seconds,
        default=READ_TIMEOUT,
        metavar="S",
        help="seconds a client has to send a request's headers, and again its body"
        f" (default {READ_TIMEOUT:g})",
    )


def _token(args: argparse.Namespace) -> Token | None:
    from .._listener import ListenerError, Token

    spec: str | None = args.token
    if spec is None:
        from_env = os.environ.get(TOKEN_ENV)
        if not from_env:
            return None
        text, where = from_env, TOKEN_ENV
    else:
        if not spec.startswith("@") or len(spec) == 1:
            raise CliError(
                "--token: give the token as @FILE (or in the environment variable"
                f" {TOKEN_ENV}): a token on the command line is visible to every local user"
            )
        path = spec[1:]
        _warn_if_others_read(path)
        try:
            text = read_file(path, what="--token").decode("utf-8")
        except UnicodeDecodeError:
            raise CliError("--token: the file is not UTF-8 text") from None
        where = "--token"
    try:
        return Token(text, where=where)
    except ListenerError as exc:
        raise CliError(str(exc)) from None


def _warn_if_others_read(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the read that follows names the problem
    if stat.S_ISREG(mode) and mode & 0o077:
        print(
            f"simplex-rpc: warning: --token file {path!r} is readable by others"
            f" (mode {stat.S_IMODE(mode):04o}): chmod 600 {path}",
            file=sys.stderr,
        )


def listener_policy(args: argparse.Namespace, host: str, port: int) -> ListenerPolicy:
    """The listener's policy from the options; a bad value is a :class:`CliError`."""
    from .._listener import ListenerError, ListenerPolicy

    token = _token(args)
    try:
        return ListenerPolicy(
            address=host,
            port=port,
            allow_hosts=tuple(args.allow_host),
            allow_origins=tuple(args.allow_origin),
            token=token,
            max_body=args.max_body_size,
            max_connections=args.max_connections,
            read_timeout=args.read_timeout,
        )
    except ListenerError as exc:
        raise CliError(str(exc)) from None


def check_before_start(policy: Any) -> None:
    """Refuse an address other machines reach without a token, before connecting anywhere."""
    from .._listener import ListenerError, check_exposure

    try:
        check_exposure(policy.address, policy.port, policy.token)
    except ListenerError as exc:
        raise CliError(str(exc)) from None


__all__ = ["add_listener_options", "check_before_start", "listener_policy"]

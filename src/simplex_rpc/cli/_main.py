"""The ``simplex-rpc`` entry point: the parser and :func:`main`.

Each group of subcommands lives in its own module of this package with a
``register(subparsers)`` function, listed in ``COMMAND_MODULES`` in the order
of ``--help``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NoReturn

from ..errors import SimplexRpcError
from . import (
    _a2a_proxy,
    _agent,
    _bench,
    _blocks,
    _call,
    _call_text,
    _demo,
    _discover,
    _doctor,
    _keys,
    _llms_txt,
    _mcp_a2a,
    _mcp_proxy,
    _serve,
    _simulator,
    _vectors,
)
from ._common import (
    EXIT_OK,
    EXIT_USAGE,
    LOG_LEVELS,
    CliError,
    forget_log_choices,
    remove_logging,
    setup_logging,
)
from ._options import CORE_ENV

#: Modules that add subcommands, in the order of ``--help``.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    _keys,
    _blocks,
    _vectors,
    _demo,
    _agent,
    _call,
    _serve,
    _simulator,
    _mcp_a2a,
    _llms_txt,
    _call_text,
    _discover,
    _doctor,
    _bench,
    _mcp_proxy,
    _a2a_proxy,
)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required: --core"):
            message += f" (or set {CORE_ENV}=ws://HOST:PORT)"
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """``--version``: the text as written (argparse's own action rewraps its lines)."""

    def __init__(self, option_strings: list[str], version: str, dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.version = version

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(self.version)
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simplex-rpc",
        description="Service RPC for SimpleX agent protocols: keys, signed padded requests,"
        " envelopes, vectors and tools.",
    )
    from .. import __version__, backend_info

    info = backend_info()
    # Both backends are named: which one runs, and why the other does not.
    version = f"simplex-rpc {__version__}\nbackend: {info.name} ({info.reason})"
    if info.extension is not None:
        version += f"\nextension: {info.extension}"
    parser.add_argument(
        "--version", action=_Version, version=version, help="print the version and the backend"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    _add_log_level(parser)
    return parser


def _add_log_level(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every (sub)command under it ``--log-level``.

    Added here, once, so that every command has it, whichever module registers it;
    unset (``SUPPRESS``) unless given, so that a subcommand's default never hides
    the value given before its name.
    """
    parser.add_argument(
        "--log-level",
        choices=list(LOG_LEVELS),
        default=argparse.SUPPRESS,
        help="what goes to standard error: debug, info, warning (the default; info with"
        " --verbose) or error; for every logger, third-party ones included, redacted",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _add_log_level(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    root = logging.getLogger()
    saved_level = root.level
    try:
        args = parser.parse_args(argv)
        # Every command's log lines go to stderr through one redacting handler, at the
        # level of --log-level (serve and the proxies keep their own default levels).
        setup_logging(
            args.command,
            verbose=getattr(args, "verbose", False) is True,
            level=getattr(args, "log_level", None),
        )
        handler: Callable[[argparse.Namespace], int] = args.handler
        return _run(args, handler)
    finally:
        remove_logging()
        forget_log_choices()
        root.setLevel(saved_level)


def _run(args: argparse.Namespace, handler: Callable[[argparse.Namespace], int]) -> int:
    try:
        try:
            return handler(args)
        except BaseExceptionGroup as group:
            # anyio's task groups wrap what a command raises: one error is its own line.
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            if isinstance(leaf, (CliError, SimplexRpcError, KeyboardInterrupt)):
                raise leaf from None
            raise
    except (CliError, SimplexRpcError) as exc:
        print(f"simplex-rpc {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"simplex-rpc {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (for example `| head`): not an error of ours.
        try:
            sys.stdout.close()
        except Exception:
            pass
        return EXIT_OK

"""The ``simplex-rpc`` command line: a Unix tool over the library.

Each group of subcommands lives in its own ``_cli_*`` module with a
``register(subparsers)`` function, listed in ``COMMAND_MODULES``. Errors are
one line on stderr with exit status 2, never a traceback; ``--json`` output
is for programs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .errors import SimplexRpcError

#: Modules that add subcommands, in the order of ``--help``.
COMMAND_MODULES: tuple[str, ...] = ("_cli_core", "_cli_adapter", "_cli_chat", "_cli_bench")

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def fail(message: str) -> NoReturn:
    raise CliError(message)


def read_input(spec: str, *, what: str, binary: bool = True) -> bytes:
    """Read ``spec``: ``-`` is stdin, ``@PATH`` a file, anything else the literal text."""
    if spec == "-":
        data = sys.stdin.buffer.read()
    elif spec.startswith("@"):
        try:
            with open(spec[1:], "rb") as f:
                data = f.read()
        except OSError as exc:
            fail(f"{what}: cannot read {spec[1:]!r}: {exc.strerror}")
    else:
        try:
            data = spec.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"{what}: the argument is not valid UTF-8")
    return data


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simplex-rpc",
        description="Service RPC for SimpleX agent protocols: keys, signed padded requests,"
        " envelopes, vectors and tools.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"simplex-rpc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        module = importlib.import_module(f".{name}", __package__)
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
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

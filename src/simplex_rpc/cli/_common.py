"""What every command group of the CLI shares: exit statuses, errors, input and output.

Errors are one line on stderr with exit status 2, never a traceback
(:class:`CliError`, :func:`fail`); ``--json`` output is for programs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .._wire import strict_json as _json

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` (one line on stderr, exit status 2)."""
    raise CliError(message)


def _read_path(path: str, what: str | None) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        prefix = "" if what is None else f"{what}: "
        fail(f"{prefix}cannot read {path!r}: {exc.strerror}")


def read_file(path: str, *, what: str | None = None) -> bytes:
    """Read the file at ``path`` (``-`` is stdin); a failure names ``what``, if given."""
    if path == "-":
        return sys.stdin.buffer.read()
    return _read_path(path, what)


def read_input(spec: str, *, what: str) -> bytes:
    """Read ``spec``: ``-`` is stdin, ``@PATH`` a file, anything else the literal text."""
    if spec == "-":
        return sys.stdin.buffer.read()
    if spec.startswith("@"):
        return _read_path(spec[1:], what)
    try:
        return spec.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"{what}: the argument is not valid UTF-8")


def load_json(spec: str, *, what: str) -> Any:
    """Read ``spec`` as ``read_input`` does and decode it as strict JSON.

    Text that is not JSON fails with the decoder's message, after ``what``.
    """
    try:
        return _json.loads(read_input(spec, what=what))
    except _json.JsonError as exc:
        fail(f"{what}: {exc}")


def emit_json(value: Any) -> None:
    """Print ``value`` on stdout as indented JSON (non-ASCII kept), one newline after."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def add_json_option(parser: argparse.ArgumentParser, help: str = "print a JSON object") -> None:
    """Give a subcommand the ``--json`` flag (``args.json``): output for programs."""
    parser.add_argument("--json", action="store_true", help=help)


def whole_number(minimum: int, too_small: str) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number of at least ``minimum``.

    Other text, or a smaller number, is a usage error (exit status 2); ``too_small``
    is the message for a smaller number, with ``{value}`` standing for it.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(too_small.format(value=value))
        return value

    return parse


def positive_seconds(text: str) -> float:
    """An argparse ``type=``: a positive, finite number of seconds.

    Other text (echoed at most 32 characters), zero, a negative number, inf or
    nan is a usage error (exit status 2).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:32]!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value

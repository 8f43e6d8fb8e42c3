"""Input and output of the commands that take keys, payloads and binary blocks.

``keygen``/``sign``/``verify`` (``_keys``), ``seal``/``open`` (``_blocks``) and
``agent`` (``_agent``) read their inputs as a literal argument, ``@PATH`` or
``-`` (stdin, for one input at most), and write binary to ``-o FILE``, a pipe,
or as hex; private material goes only to a new file of mode 0600.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import emit_json, fail, read_input, read_signing_key

if TYPE_CHECKING:
    from .._wire.keys import SigningKey

#: The inputs' rule, for the commands' ``--help``.
INPUTS = "Inputs: a literal argument, @PATH for a file, or - for stdin (one input at most)."

#: How an associated data is given.
AD_HELP = "HEX, @FILE (raw bytes) or -"

_HEX = re.compile(r"[0-9a-fA-F]*")


def check_one_stdin(*specs: str | None) -> None:
    """At most one of the inputs ``specs`` is ``-`` (stdin)."""
    if sum(1 for s in specs if s == "-") > 1:
        fail("only one input can come from stdin ('-')")


def parse_hex(text: str, what: str) -> bytes:
    """Strict hex: digits only (either case), an even count; whitespace around is ignored."""
    text = text.strip()
    if not _HEX.fullmatch(text):
        bad = next(i for i, ch in enumerate(text) if ch not in "0123456789abcdefABCDEF")
        fail(f"{what}: character at offset {bad} is not a hex digit")
    if len(text) % 2:
        fail(f"{what}: {len(text)} hex digits is an odd count")
    return bytes.fromhex(text)


def read_binary(spec: str, what: str) -> bytes:
    """A literal argument is hex; ``@PATH`` and ``-`` give raw bytes."""
    if spec == "-" or spec.startswith("@"):
        return read_input(spec, what=what)
    return parse_hex(spec, what)


def read_binary_file(spec: str, *, as_hex: bool, what: str) -> bytes:
    """A binary ``what`` from a path (``@PATH`` too) or ``-``; with ``as_hex``, hex text."""
    if spec != "-" and not spec.startswith("@"):
        spec = "@" + spec  # a plain path
    data = read_input(spec, what=what)
    if not as_hex:
        return data
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        fail(f"{what}: --hex input is not ASCII text")
    return parse_hex(text, what)


def signing_key(spec: str) -> SigningKey:
    """``--key``: a private key's text, ``@FILE`` (refused when others can read it) or ``-``."""
    return read_signing_key(spec, what="key")


def add_payload(p: argparse.ArgumentParser) -> None:
    """``--payload``: the exact bytes, as text, ``@FILE`` or ``-``."""
    p.add_argument(
        "--payload", required=True, metavar="PAYLOAD", help="TEXT, @FILE or - (exact bytes)"
    )


def add_binary_output(p: argparse.ArgumentParser, what: str) -> None:
    """``-o FILE`` and ``--hex`` for a command that writes a binary ``what``."""
    p.add_argument("-o", "--output", metavar="FILE", help=f"write the {what} to FILE")
    p.add_argument("--hex", action="store_true", help=f"write the {what} as hex text")


def add_binary_input(p: argparse.ArgumentParser, what: str) -> None:
    """The positional input (a file, or ``-``) and ``--hex`` for a command that reads a
    binary ``what``."""
    p.add_argument(
        "input", nargs="?", default="-", metavar=what.upper(), help="a file, or - (default)"
    )
    p.add_argument("--hex", action="store_true", help=f"the {what} is hex text")


def write_binary(data: bytes, output: str | None, *, as_hex: bool, what: str) -> None:
    """Write ``data`` (a binary ``what``) to the file ``output`` (None or ``-``: stdout), as
    hex when ``as_hex``; never raw to a terminal."""
    if output not in (None, "-"):
        try:
            Path(output).write_bytes(data.hex().encode() + b"\n" if as_hex else data)
        except OSError as exc:
            fail(f"-o: cannot write {output!r}: {exc.strerror}")
        return
    if as_hex:
        sys.stdout.write(data.hex() + "\n")
        return
    if sys.stdout.isatty():
        fail(f"refusing to write a binary {what} to a terminal: use -o FILE, --hex, or a pipe")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def write_payload(data: bytes) -> None:
    """Write a payload's exact bytes; a newline is added only for a terminal."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    if sys.stdout.isatty() and not data.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()


def write_private(path: str, text: str, option: str, what: str) -> None:
    """Private ``text`` (a ``what``) to a new 0600 file at ``path``, never overwriting one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(f"{option}: {path!r} exists; not overwriting a {what}")
    except OSError as exc:
        fail(f"{option}: cannot create {path!r}: {exc.strerror}")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text + "\n")


def emit_keys(
    public: str, private: str, output: str | None, *, noun: str, option: str, fields: Any
) -> None:
    """The end of a keygen, its key (``noun``) made: with ``output`` ``-``, the private text
    alone on stdout (the public one on stderr, for the person at the terminal); with a path,
    the private text to that new 0600 file; then the public text and the private one (or
    where it went), as two lines for people, or after ``fields`` as one JSON object when
    ``fields`` is a dict."""
    if output == "-":
        print(f"public {noun}:  {public}", file=sys.stderr)
        print(private, flush=True)
        return
    if output is not None:
        write_private(output, private, option, f"{noun} file" if noun == "key" else "private file")
    if isinstance(fields, dict):
        out = dict(fields)
        if output is None:
            out[f"private_{noun}"] = private
        else:
            out[f"private_{noun}_file"] = output
        emit_json(out)
        return
    print(f"public {noun}:  {public}")
    if output is None:
        print(f"private {noun}: {private}")
    else:
        print(f"private {noun}: written to {output} (mode 0600)")


def text_or_none(data: bytes) -> str | None:
    """``data`` as UTF-8 text, or None when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


__all__ = [
    "AD_HELP",
    "INPUTS",
    "add_binary_input",
    "add_binary_output",
    "add_payload",
    "check_one_stdin",
    "emit_keys",
    "parse_hex",
    "read_binary",
    "read_binary_file",
    "signing_key",
    "text_or_none",
    "write_binary",
    "write_payload",
    "write_private",
]

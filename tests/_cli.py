"""``simplex-rpc`` run in this process: :func:`run_cli` gives what a subprocess would.

The CLI's tests call :func:`simplex_rpc.cli.main` with ``argv``, standard input
given as bytes and standard output and error captured as bytes (text and
binary writes alike, neither a terminal), and get a :class:`CliResult` with
``returncode``, ``stdout`` and ``stderr``, as ``subprocess.run`` gives them. A
test spawns ``python -m simplex_rpc`` only where a real process is the point:
signals, pipes between processes, a terminal, the entry point, a missing extra.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from simplex_rpc.cli import main


@dataclass(frozen=True)
class CliResult:
    """The exit status and the bytes written, as ``subprocess.CompletedProcess`` has them."""

    returncode: int
    stdout: bytes
    stderr: bytes


class _Capture(io.TextIOWrapper):
    """A text stream over bytes (``.buffer`` takes binary writes), never a terminal."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8", write_through=True)

    def captured(self) -> bytes:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue()


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None] | None) -> Iterator[None]:
    """``env``'s variables set (None: unset) for the run, the others kept."""
    saved = {name: os.environ.get(name) for name in env or {}}
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_cli(
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    cwd: Path | str | None = None,
    env: Mapping[str, str | None] | None = None,
) -> CliResult:
    """Run ``simplex-rpc ARGV`` in this process; its exit status and output."""
    out, err, given = _Capture(), _Capture(), _Capture(stdin)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = given, out, err
    try:
        with _environment(env), contextlib.chdir(cwd if cwd is not None else os.getcwd()):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: --help, --version, a usage error
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return CliResult(code, out.captured(), err.captured())


__all__ = ["CliResult", "run_cli"]

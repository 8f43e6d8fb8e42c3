"""The cffi build script of the C backend (out-of-line API mode).

``setup.py`` registers :func:`make_ffi` through ``cffi_modules``, so the
extension ``simplex_rpc._wire._simplex_rpc_c`` is compiled at ``pip install``
(cffi calls it for the ``FFI``; importing this module builds nothing). The
declarations come from ``csrc/simplex_rpc.h`` (its preprocessor lines are
dropped for ``cdef``); the code is ``csrc/simplex_rpc.c`` and ``csrc/json_strict.c``.

Run as a script, it compiles the extension into a directory of your choice,
optionally with AddressSanitizer and UndefinedBehaviorSanitizer
(``make sanitize`` does this)::

    python src/simplex_rpc/_build_c.py --outdir build/sanitize/src --sanitize

``SIMPLEX_RPC_CFLAGS`` adds compiler flags to any build.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from cffi import FFI

MODULE_NAME = "simplex_rpc._wire._simplex_rpc_c"

#: The C files of the extension, in csrc/: a new one is one more entry here (the
#: sdist takes every csrc/*.c and *.h through MANIFEST.in).
C_SOURCES = ("simplex_rpc.c", "json_strict.c")
#: The headers they include; the first is read for ``cdef``.
C_HEADERS = ("simplex_rpc.h",)

#: Flags of the sanitizer build: every finding aborts, so a test run that
#: passes is clean.
SANITIZE_FLAGS = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g",
]


def _root() -> Path:
    """The project directory: where ``csrc/`` is (this file is src/simplex_rpc/_build_c.py)."""
    return Path(__file__).resolve().parents[2]


def _cdef(header: str) -> str:
    """The header without preprocessor lines, which ``cdef`` does not read."""
    return "\n".join(line for line in header.splitlines() if not line.lstrip().startswith("#"))


def make_ffi(extra_flags: list[str] | None = None, *, absolute: bool = False) -> FFI:
    """A configured ``FFI`` for the extension; ``extra_flags`` go to compiler and linker.

    ``absolute`` names the C files by absolute path (``FFI.compile`` changes
    directory); setuptools wants them relative to the project directory.
    """
    root = _root()
    csrc = root / "csrc"
    header = (csrc / C_HEADERS[0]).read_text(encoding="utf-8")
    flags = ["-std=c11", "-Wall", "-Wextra", "-Wconversion", "-Wno-sign-conversion"]
    flags += shlex.split(os.environ.get("SIMPLEX_RPC_CFLAGS", ""))
    flags += extra_flags or []
    ffi = FFI()
    ffi.cdef(_cdef(header))
    rel = str(csrc) if absolute or Path.cwd().resolve() != root else "csrc"
    ffi.set_source(
        MODULE_NAME,
        '#include "simplex_rpc.h"',
        sources=[os.path.join(rel, name) for name in C_SOURCES],
        include_dirs=[rel],
        extra_compile_args=flags,
        extra_link_args=[f for f in (extra_flags or []) if f.startswith("-fsanitize")],
        depends=[os.path.join(rel, name) for name in C_HEADERS],
    )
    return ffi


def main(argv: list[str] | None = None) -> int:
    """Compile the extension into ``--outdir`` (as ``simplex_rpc/_wire/_simplex_rpc_c*.so``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", required=True, help="directory that receives simplex_rpc/")
    parser.add_argument(
        "--sanitize", action="store_true", help="build with -fsanitize=address,undefined"
    )
    args = parser.parse_args(argv)
    ffi = make_ffi(SANITIZE_FLAGS if args.sanitize else None, absolute=True)
    path = ffi.compile(tmpdir=args.outdir, verbose=False)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Report the valgrind memcheck errors of a Python run that involve simplex-rpc's C code.

Usage: ``python fuzz/valgrind_filter.py LOG``. CPython itself is not clean under
memcheck (its allocator and ``getrandom`` give "uninitialised value" noise),
so ``make fuzz`` runs the C backend's tests with ``PYTHONMALLOC=malloc`` and
keeps only the error records whose stack passes through the C functions of
``csrc/`` (``srpc_*``) or the extension ``_simplex_rpc_c``. Prints them and
exits 1 if there is any; exits 0 when there is none.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OURS = re.compile(r"\bsrpc_\w+|_simplex_rpc_c")
RECORD_END = re.compile(r"^==\d+== ?$")
ERROR_START = re.compile(
    r"^==\d+== (Invalid (read|write|free)|Conditional jump|Use of uninitialised|"
    r"Syscall param|Source and destination overlap|Mismatched free|Argument '.*' of function)"
)


def records(lines: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        if RECORD_END.match(line):
            if current:
                out.append(current)
            current = []
        else:
            current.append(line)
    if current:
        out.append(current)
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lines = Path(sys.argv[1]).read_text(errors="replace").splitlines()
    ours = [
        r for r in records(lines)
        if r and ERROR_START.match(r[0]) and any(OURS.search(line) for line in r)
    ]
    for record in ours:
        print("\n".join(record), end="\n\n")
    if ours:
        print(f"valgrind: {len(ours)} memcheck error(s) in simplex-rpc's C code")
        return 1
    print("valgrind: no memcheck error in simplex-rpc's C code")
    return 0


if __name__ == "__main__":
    sys.exit(main())

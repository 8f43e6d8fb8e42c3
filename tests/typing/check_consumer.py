"""Type-check the consumer scripts with ``mypy --strict``: one must pass, one must fail.

Usage: ``python tests/typing/check_consumer.py [MYPY_ARGS...]``, with the
simplex-rpc to check importable by that Python (an installed wheel, or the
source tree with ``MYPYPATH=src``). ``consumer.py`` must type-check clean;
``consumer_wrong.py`` must fail with a wrong-argument error on every line
marked ``# wrong`` and nowhere else: ``[arg-type]``, or ``[call-overload]`` for
an overloaded function (``pad_many``, ``unpad_many``), where no variant takes
it. Exit status 0 when both hold.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: mypy's codes for an argument of the wrong type.
WRONG_ARGUMENT = ("[arg-type]", "[call-overload]")


def mypy(path: Path, extra: list[str]) -> tuple[int, str]:
    """Run mypy --strict on ``path`` (no cache: the check must not see a stale package)."""
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *extra, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def main(extra: list[str]) -> int:
    status, output = mypy(HERE / "consumer.py", extra)
    if status != 0:
        print(f"consumer.py: mypy --strict failed (exit {status}):\n{output}", file=sys.stderr)
        return 1
    print("consumer.py: mypy --strict passes")
    wrong = HERE / "consumer_wrong.py"
    marked = {
        n for n, line in enumerate(wrong.read_text().splitlines(), 1) if line.endswith("# wrong")
    }
    status, output = mypy(wrong, extra)
    flagged = {
        int(m.group(1))
        for m in re.finditer(
            r"consumer_wrong\.py:(\d+): error: .*\[(?:arg-type|call-overload)\]", output
        )
    }
    other = [
        line
        for line in output.splitlines()
        if ": error:" in line and not line.rstrip().endswith(WRONG_ARGUMENT)
    ]
    if status != 1 or flagged != marked or other:
        print(
            f"consumer_wrong.py: expected mypy to fail with {'/'.join(WRONG_ARGUMENT)} on lines"
            f" {sorted(marked)}, got exit {status}, lines {sorted(flagged)}:\n{output}",
            file=sys.stderr,
        )
        return 1
    print(f"consumer_wrong.py: mypy --strict fails as it must, on lines {sorted(marked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

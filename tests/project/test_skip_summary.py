"""`make test` summarizes skips in one line per reason (issue 22, item 8).

"The pure-backend run prints about 170 `SKIPPED ... C backend unavailable` lines.
Summarize the skips in one line per reason." tests/conftest.py folds the short
summary's skip lines by reason alone, with their count, so the pure run of a file
with many C cases says it once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pure_run_prints_one_skip_line_per_reason() -> None:
    env = dict(os.environ, SIMPLEX_RPC_PURE="1")
    env.pop("SIMPLEX_RPC_BUILD_C", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-ra",
         "tests/wire/test_padding.py", "tests/agent/test_agent_block.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    reasons = [line.split(": ", 1)[1] for line in skipped]
    assert len(skipped) == len(set(reasons)), "\n".join(skipped)
    assert len(skipped) == 1, "\n".join(skipped)
    count = re.search(r"(\d+) skipped", done.stdout)
    assert count is not None
    # The one line carries the count of all the skips it stands for.
    assert f"SKIPPED [{count.group(1)}]" in skipped[0], skipped
    assert "C backend unavailable" in skipped[0]

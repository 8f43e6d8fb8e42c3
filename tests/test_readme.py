"""README's examples run as written (from the repository root, as a reader would).

The responder and caller examples talk to a simulator that the reader starts
on port 5225; ``tests/test_adapter_docs.py`` runs that pair against a
simulator of its own.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text("utf-8"), re.S)
STANDALONE = [b for b in BLOCKS if "127.0.0.1:5225" not in b]


def test_readme_has_examples() -> None:
    assert len(STANDALONE) >= 8


@pytest.mark.parametrize("index", range(len(STANDALONE)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"readme_{index}.py"
    script.write_text(STANDALONE[index], "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]

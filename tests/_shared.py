"""Where the project's shared design tree is, for tests that compare with it.

CI and developers' checkouts have ``shared/`` beside the repository (the
protocol text is ``shared/seeds/agent-protocols-over-simplex.txt``). Tests
that only check that our copies of the protocol text's examples are verbatim
skip, with this reason, when the tree is absent; everything else the suite
needs lives in ``tests/data``.
"""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def protocol_text_path() -> Path:
    """The protocol text beside the checkout (or the workplace's copy)."""
    for root in (_REPO.parent / "shared", Path("/work/shared")):
        candidate = root / "seeds/agent-protocols-over-simplex.txt"
        if candidate.exists():
            return candidate
    return _REPO.parent / "shared/seeds/agent-protocols-over-simplex.txt"

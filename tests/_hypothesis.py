"""How many examples a property test tries (no tests here).

Each property test names the count it is written for, ``examples(N)``; a run tries
a share of it, chosen with ``SIMPLEX_RPC_HYPOTHESIS``:

* ``quick`` (the default, what ``make test`` runs): half, at least 10;
* ``full``: N, the count each test names;
* ``deep``: ten times N, for a long run before a release.

The properties and the strategies are the same in every mode: a quick run checks
every rule, on fewer inputs. Tests with no count of their own use the profile of
the same name (tests/conftest.py), 100 examples at ``full``.
"""

from __future__ import annotations

import os

SHARES = {"quick": 0.5, "full": 1.0, "deep": 10.0}
MODE = os.environ.get("SIMPLEX_RPC_HYPOTHESIS", "quick")
if MODE not in SHARES:
    raise ValueError(f"SIMPLEX_RPC_HYPOTHESIS: expected one of {', '.join(SHARES)}, got {MODE!r}")


def examples(count: int) -> int:
    """The number of examples to try of a test written for ``count``."""
    return max(10, round(count * SHARES[MODE]))

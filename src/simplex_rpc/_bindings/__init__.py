"""The bindings' data, below the adapter: no I/O and no SDK.

* :mod:`.shared`: what both bindings share (JSON-RPC shapes, the size rules,
  the caller of a ``/_call``, the handler argument and call policy types).
  Its names are this package's names too.
* :mod:`.mcp` and :mod:`.a2a`: each binding's messages, re-exported by
  :mod:`simplex_rpc.mcp` and :mod:`simplex_rpc.a2a`. They import the shared
  module and never each other (import-linter contracts in ``pyproject.toml``).

:func:`call_policy` is how the adapter applies a binding's rule for what a
caller may send (credentials in groups, for A2A) without knowing the binding.
"""

from __future__ import annotations

from typing import Final

from . import a2a
from .shared import *  # noqa: F403 (the shared data is the package's own)
from .shared import CallPolicy
from .shared import __all__ as _shared_names

__all__ = [*_shared_names, "call_policy"]

# Each binding's call policy, by the protocol name of its /_call. MCP has none: a
# caller may send any request it builds.
_CALL_POLICIES: Final[dict[str, CallPolicy]] = {a2a.PROTOCOL: a2a.call_policy}


def call_policy(protocol: str) -> CallPolicy | None:
    """The call policy the binding of ``protocol`` supplies, or None (no rule)."""
    return _CALL_POLICIES.get(protocol)

"""``simplex-rpc bench``: the benchmarks, one module per suite.

* :mod:`._framing`: the command (``register``) and the default suite, the
  framing and signing of the C backend against its baselines;
* :mod:`._agent`: the agent's cryptography, measured within that suite;
* :mod:`._adapter`: ``bench adapter``, the Service RPC responder under load
  and under faults;
* :mod:`._gateway`: ``bench gateway``, ``tools/call`` through ``serve --mcp-stdio``;
* :mod:`._machine`: the machine a report was measured on.

They stay in the package (benchmarking the framing is one of its uses) and are
imported only by the CLI's parser and by ``benchmarks/run.py``.
"""

from __future__ import annotations

from ._framing import register

__all__ = ["register"]

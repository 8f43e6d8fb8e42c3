"""The ``simplex-rpc`` command line: a Unix tool over the library.

``main`` is the console script (``simplex-rpc``, ``python -m simplex_rpc``);
the command groups are private modules of this package.
"""

from ._common import CliError
from ._main import build_parser, main

__all__ = ["CliError", "build_parser", "main"]

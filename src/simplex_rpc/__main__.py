"""``python -m simplex_rpc``: the same as the ``simplex-rpc`` command."""

from .cli import main

raise SystemExit(main())

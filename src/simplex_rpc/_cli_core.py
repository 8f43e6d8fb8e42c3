"""The core subcommands of ``simplex-rpc``: keys, signatures, blocks, vectors, demo."""

from __future__ import annotations

import argparse
from typing import Any


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(json_output=args.json)


def register(subparsers: Any) -> None:
    """Add the core subcommands to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "demo",
        help="show one Service RPC round trip, step by step",
        description="One signed, padded Service RPC round trip with fixed demo keys:"
        " every step shown, and a tampered block and a copied signature refused.",
    )
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.set_defaults(handler=_cmd_demo)

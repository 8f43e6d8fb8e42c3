"""Run the benchmark of docs/c-backend.md and keep its results.

    .venv/bin/python benchmarks/run.py            # full run (about a minute)
    .venv/bin/python benchmarks/run.py --quick    # a smoke run

The measurement engine is ``simplex_rpc.cli._bench`` (also ``simplex-rpc
bench``). This script prints the report and writes it to
``benchmarks/results/latest.md`` and ``latest.json``, the table quoted in
docs/c-backend.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simplex_rpc.cli import _bench as _cli_bench

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per measure")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    report = _cli_bench.run_bench(quick=args.quick, rounds=args.rounds)
    text = _cli_bench.report_text(report)
    print(text)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "latest.md").write_text(text + "\n", encoding="utf-8")
        (RESULTS / "latest.json").write_text(
            json.dumps(_cli_bench.report_json(report), indent=2) + "\n", encoding="utf-8"
        )
        print(f"\nsaved: {RESULTS / 'latest.md'}, {RESULTS / 'latest.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

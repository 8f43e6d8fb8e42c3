"""Run the benchmark of docs/c-backend.md and write its report.

    .venv/bin/python benchmarks/run.py            # full run (about a minute)
    .venv/bin/python benchmarks/run.py --quick    # a smoke run
    .venv/bin/python benchmarks/run.py --save     # update the table docs/c-backend.md quotes

The measurement engine is ``simplex_rpc.cli._bench._framing`` (also ``simplex-rpc
bench``). This script prints the report and writes it as ``latest.md`` and
``latest.json`` to ``build/benchmarks/`` (ignored by git: a run leaves the
checkout clean) or to ``--out DIR``. Only ``--save`` writes the tracked
``benchmarks/results/latest.{md,json}``, the table quoted in docs/c-backend.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simplex_rpc.cli._bench import _framing as _cli_bench

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"  # tracked: written with --save only
UNTRACKED = ROOT / "build" / "benchmarks"  # the default: /build/ is in .gitignore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="By default the report goes to build/benchmarks/ (untracked); --save writes"
        " the tracked benchmarks/results/latest.{md,json} instead.",
    )
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per measure")
    parser.add_argument(
        "--only", default="", metavar="KEYS", help="comma-separated measures (as simplex-rpc bench)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--save",
        action="store_true",
        help="write the tracked benchmarks/results/latest.{md,json} (the table the docs quote)",
    )
    where.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="write the report into DIR"
    )
    where.add_argument("--no-save", action="store_true", help="print only, write nothing")
    args = parser.parse_args(argv)
    only = [key for key in args.only.split(",") if key]
    report = _cli_bench.run_bench(quick=args.quick, rounds=args.rounds, only=only)
    text = _cli_bench.report_text(report)
    print(text)
    if args.no_save:
        return 0
    target = RESULTS if args.save else (args.out or UNTRACKED)
    target.mkdir(parents=True, exist_ok=True)
    (target / "latest.md").write_text(text + "\n", encoding="utf-8")
    (target / "latest.json").write_text(
        json.dumps(_cli_bench.report_json(report), indent=2) + "\n", encoding="utf-8"
    )
    print(f"\nwritten: {target / 'latest.md'}, {target / 'latest.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

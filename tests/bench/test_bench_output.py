"""`simplex-rpc bench` output a person can read (issue 30, item 6).

* The default table is narrow: measure, C, pure, floor, ratio, target, every line
  within 100 columns; every other figure is in `--wide` and `--json`.
* `--plot FILE.svg` draws the ratios against their targets and floors and the
  throughput against batch size (matplotlib, the `plot` extra): a valid SVG that
  holds the measured series.
* Each `make bench` section says what a fault row means.

No timing is asserted: only the shape of what is printed and drawn.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from _cli import run_cli
from simplex_rpc import backend_info
from simplex_rpc.cli._bench._framing import Result, Target, format_narrow, narrow_rows

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
INFO = {"cpus": 2, "python": "3.11", "load_average": [1.0, 1.0, 1.0], "cpu": "x", "system": "y"}
SETTINGS = {"rounds": 9, "sample_ms": 1.0, "quick": True, "batch": 1000, "payload_bytes": 1}


def result(measure: str, contender: str, ns: float, **ratios: float) -> Result:
    return Result(measure, measure, contender, ns, 1000, dict(ratios))


RESULTS = [
    result("pad", "memcpy", 300),
    result("pad", "c pad", 600, pure=0.8, memcpy=2.0),
    result("pad", "python pad", 750, memcpy=2.5),
    result("agent_open_nopq_unsigned_with_a_long_name", "primitive floor", 6e5),
    result("agent_open_nopq_unsigned_with_a_long_name", "open_service_request", 7e5, floor=1.17),
]
TARGETS = [
    Target("single pad, C against pure", "not slower", 0.8, "1.25x faster", True, ""),
    Target("agent open, against the floor", "within 1.3x", 1.17, "1.17x", True, ""),
]


def test_the_narrow_table_fits_100_columns_with_its_six_columns() -> None:
    text = format_narrow(RESULTS, TARGETS, INFO, SETTINGS)
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    header = next(line for line in lines if line.startswith("measure"))
    assert header.split() == ["measure", "C", "pure", "floor", "ratio", "target"]
    pad = next(line for line in lines if line.startswith("pad "))
    assert pad.split() == ["pad", "600", "ns", "750", "ns", "300", "ns", "0.80x", "pure",
                           "not", "slower", "ok"]  # fmt: skip
    assert "--wide" in text


def test_each_row_uses_the_ratio_its_target_is_about() -> None:
    rows = {r.measure: r for r in narrow_rows(RESULTS, TARGETS)}
    assert rows["pad"].against == "pure" and rows["pad"].target is TARGETS[0]
    agent = rows["agent_open_nopq_unsigned_with_a_long_name"]
    assert agent.against == "floor" and agent.pure is None and agent.floor is not None


@dataclass(frozen=True)
class Bench:
    returncode: int
    stdout: str
    stderr: str


def bench(*args: str) -> Bench:
    """``simplex-rpc bench --quick --rounds 3 ARGS``, in this process; the output as text."""
    done = run_cli(["bench", "--quick", "--rounds", "3", *args])
    return Bench(done.returncode, done.stdout.decode(), done.stderr.decode())


def test_plot_draws_a_valid_svg_with_the_measured_series(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    svg = tmp_path / "bench.svg"
    done = bench("--only", "pad,unpad,pad_many,unpad_many", "--plot", str(svg))
    assert done.returncode == 0, done.stderr
    assert all(len(line) <= 100 for line in done.stdout.splitlines())
    root = ET.parse(svg).getroot()  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    ids = {element.get("id") for element in root.iter()}
    for measure in ("pad", "unpad", "pad_many", "unpad_many"):
        assert f"ratio-{measure}" in ids, sorted(i for i in ids if i)
    c = backend_info().name == "c"  # the pure backend's run has no C rows and no targets
    for side in ("c", "python") if c else ("python",):
        for name in ("pad", "unpad"):
            assert f"throughput-{side}-{name}" in ids
    if c:
        assert "targets" in ids  # the targets drawn against the ratios


def test_wide_keeps_every_figure() -> None:
    done = bench("--only", "pad", "--wide")
    assert done.returncode == 0, done.stderr
    assert "contender" in done.stdout and "ops/s" in done.stdout and "vs memcpy" in done.stdout


def test_plot_without_matplotlib_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from simplex_rpc.cli import main\n"
        f"sys.exit(main(['bench', '--quick', '--only', 'pad', '--plot', r'{tmp_path}/x.svg']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "simplex-rpc[plot]" in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_each_make_bench_section_says_what_a_fault_row_means() -> None:
    text = (ROOT / "Makefile").read_text()
    body = text.split("\nbench: $(STAMP)\n", 1)[1].split("\n\n", 1)[0]
    sections = body.count("@echo \"== ")
    assert sections == 4
    assert body.count("fault") >= 4

"""``simplex-rpc bench`` (issue 3 "Benchmarks and targets"), without timed assertions.

Rules pinned: the bench measures every contender in one process on the same
bytes and reports time per operation, throughput and the ratio to each
baseline (pure backend, raw libsodium, memcpy floor); it prints a table or
JSON, shows progress on stderr, and evaluates the targets. Nothing here
asserts a speed: timings are not tests.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

import simplex_rpc as sx
from simplex_rpc.cli import main
from simplex_rpc.cli._bench import _agent as _bench_agent
from simplex_rpc.cli._bench import _framing as _cli_bench

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend


def test_rule_every_contender_of_a_measure_works_on_the_same_bytes() -> None:
    measures = {m.key: m for m in _cli_bench.build_measures(sx.backends)}
    assert set(measures) == {
        "pad",
        "unpad",
        "pad_many",
        "unpad_many",
        "seal_unsigned",
        "open_unsigned",
        "seal_signed",
        "open_signed",
        "seal_response",
        "seal_requests",
        "parse_structured",
        "parse_schemas",
        "parse_text",
        "open_parse",
        "open_requests",
        *_bench_agent.KEYS,  # the agent's cryptography (tests/bench/test_agent_crypto_bench.py)
    }
    # MEASURES, which --only's help lists, names them all, in the order of the report.
    assert tuple(measures) == _cli_bench.MEASURES
    # The contenders of one measure compute the same thing.
    outputs = {c.name: c.run() for c in measures["pad"].contenders if c.name != "memcpy"}
    assert len({bytes(v) for v in outputs.values()}) == 1  # type: ignore[arg-type]
    for key in ("seal_unsigned", "open_unsigned", "open_signed"):
        values = [c.run() for c in measures[key].contenders if "libsodium" not in c.name]
        assert all(v == values[0] for v in values), key
    for key in ("parse_structured", "parse_schemas", "parse_text"):
        values = [c.run() for c in measures[key].contenders]
        requests = [v.request if isinstance(v, sx.Request) else v["request"] for v in values]
        assert all(r == requests[0] for r in requests), key
    parsed = [c.run() for c in measures["open_parse"].contenders]
    assert parsed[0]["request"] == parsed[1].request  # type: ignore[index,attr-defined]
    opened = [c.run() for c in measures["open_requests"].contenders]
    assert all(r.ok and len(r) == _cli_bench.BATCH for r in opened)  # type: ignore[attr-defined]


def test_rule_ratios_are_medians_of_per_round_ratios() -> None:
    ticks = iter(range(0, 10**9, 7))

    measure = _cli_bench.Measure(
        "x",
        "x",
        (
            _cli_bench.Contender("c f", lambda: next(ticks)),
            _cli_bench.Contender("python f", lambda: next(ticks)),
        ),
        10,
        {"pure": _cli_bench.TWIN},
    )
    results = _cli_bench.run_measure(measure, 5, 0.0001)
    assert [r.contender for r in results] == ["c f", "python f"]
    assert set(results[0].ratios) == {"pure"} and results[1].ratios == {}
    assert results[0].ns_per_op > 0 and results[0].bytes_per_op == 10


def test_rule_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["bench", "--quick", "--json", "--rounds", "1", "--only", "pad,seal_signed"])
    out = capsys.readouterr()
    assert status == 0
    report = json.loads(out.out)
    assert set(report) == {"machine", "settings", "results", "targets"}
    assert report["machine"]["cpus"] >= 1 and report["machine"]["python"]
    names = {(r["measure"], r["contender"]) for r in report["results"]}
    assert ("seal_signed", "libsodium crypto_sign") in names
    assert ("pad", "python pad") in names
    for r in report["results"]:
        assert r["ns_per_op"] > 0 and r["ops_per_second"] > 0
    if "c" in sx.backends:
        assert ("pad", "memcpy") in names
        c_pad = next(r for r in report["results"] if r["contender"] == "c pad")
        assert set(c_pad["ratios"]) == {"pure", "memcpy"}
        assert {t["name"] for t in report["targets"]} >= {
            "single pad, C against pure",
            "signed seal, against raw libsodium sign",
        }
        for t in report["targets"]:
            assert t["met"] or t["reason"], t
    assert "bench [1/2]" in out.err  # progress


def test_rule_table_report(capsys: pytest.CaptureFixture[str]) -> None:
    """The narrow table by default (issue 30: within 100 columns), every figure with --wide."""
    assert main(["bench", "--rounds", "1", "--only", "unpad"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("machine: ")
    assert "measure" in text and "unpad " in text and all(len(x) <= 100 for x in text.split("\n"))
    assert main(["bench", "--rounds", "1", "--only", "unpad", "--wide"]) == 0
    text = capsys.readouterr().out
    assert "| contender" in text and "| python unpad" in text
    assert "time/op" in text and "vs pure" in text and "vs memcpy" in text


def test_rule_unknown_measure_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simplex_rpc", "bench", "--only", "nothing"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no measure nothing" in result.stderr and "Traceback" not in result.stderr


def test_rule_live_progress_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = _cli_bench._Progress(2, stream)
    progress.start("first")
    progress.update(0.5)
    progress.done()
    assert "[1/2] first:  50%" in stream.getvalue()


def test_rule_only_help_lists_every_measure_and_every_adapter_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``bench --help`` names what ``--only`` accepts, for ``bench`` and ``bench adapter``."""
    from simplex_rpc.cli._bench import _adapter as _bench_adapter

    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    keys = text[text.index("--only KEYS") :]
    assert "(" + ", ".join(_cli_bench.MEASURES) + ")" in keys
    # bench adapter has its own help (issue 30), which names its scenarios.
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "adapter", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(" + ", ".join(_bench_adapter.SCENARIOS) + ")" in text

"""``simplex-rpc bench gateway`` (issue "Across the process boundary", Benchmark): a
``tools/call`` through ``serve --mcp-stdio`` and the simulator, and with the SDK's client
straight to the same stdio server, interleaved in one run, with the ratio against the 3x
target. Reported, not asserted: the test checks the report, never a time."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from simplex_rpc.cli import main
from simplex_rpc.cli._bench._gateway import TARGET, WAYS, report_text, run_gateway_bench


@pytest.mark.anyio
async def test_the_report_has_every_way_its_ratio_and_the_target() -> None:
    report = await run_gateway_bench(3)
    assert report["calls"] == 3 and report["target"] == TARGET == 3.0
    assert report["failures"] == dict.fromkeys(WAYS, 0)
    assert all(report["median_ms"][way] is not None for way in WAYS)
    assert set(report["ratio"]) == {"rpc", "chat"} == set(report["met"])
    text = report_text(report)
    assert "target <= 3x" in text and "serve --mcp-stdio" in text


def test_bench_gateway_refuses_the_backend_options(capsys: pytest.CaptureFixture[str]) -> None:
    # --rounds and --only are not options of the gateway suite (issue 30: the suites are
    # subcommands with their own options and --help): a usage error naming the option.
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "gateway", "--rounds", "3"])
    assert exit_.value.code == 2
    assert "--rounds" in capsys.readouterr().err

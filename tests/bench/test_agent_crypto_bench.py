"""The bench rows of the agent's cryptography: each contender runs, and the rows are listed."""

from __future__ import annotations

from simplex_rpc import agent
from simplex_rpc.cli._bench import _agent as _bench_agent
from simplex_rpc.cli._bench import _framing as _bench


def test_every_row_runs_and_opens_what_it_seals() -> None:
    rows = _bench_agent.measures(_bench.Contender, _bench.Measure)
    assert [m.key for m in rows] == list(_bench_agent.KEYS)
    assert set(_bench_agent.KEYS) <= set(_bench.MEASURES)
    for row in rows:
        assert row.contenders[0].name == "primitive floor"
        assert row.baselines == {"floor": "primitive floor"}
        for contender in row.contenders:
            result = contender.run()
            if contender.name == "seal_service_request":
                assert isinstance(result, agent.SealedRequest)
            elif contender.name == "open_service_request":
                assert isinstance(result, agent.OpenedServiceRequest)
                assert result.payload == _bench_agent.PAYLOAD
                assert (result.signer is not None) == row.key.endswith("_signed")

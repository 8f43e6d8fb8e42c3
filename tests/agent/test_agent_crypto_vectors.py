"""vectors/agent_crypto.json: opened and resealed by the library on both backends, and
opened by the independent stand-in from each case's address alone."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import _agent_crypto_standin as standin
from simplex_rpc._wire import backend
from simplex_rpc.vectors._files import verify_document

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "agent_crypto.json"
DOC = json.loads(VECTORS.read_bytes())
REQUESTS = [c for c in DOC["cases"] if c["type"] == "request"]


def test_every_case_holds_on_both_backends() -> None:
    """The library opens each message, reseals it to the same bytes, and refuses each error."""
    impls = list(backend.backends.values())
    assert sorted(b.name for b in impls) == ["c", "python"] or len(impls) == 1
    assert verify_document("agent_crypto", DOC, backends=impls) == []


def _address(fields: dict[str, Any]) -> standin.Address:
    def h(name: str) -> bytes | None:
        return None if fields[name] is None else bytes.fromhex(fields[name])

    return standin.Address(h("queue_dh") or b"", h("k1") or b"", h("k2") or b"",
                           h("kem_secret"), h("kem_public"), h("key_id") or b"",
                           fields["pq_support"])


@pytest.mark.parametrize("case", REQUESTS, ids=lambda c: c["name"])
def test_the_standin_opens_every_message_from_its_address_alone(case: dict[str, Any]) -> None:
    got = standin.service_open(bytes.fromhex(case["message"]), _address(case["address"]))
    assert got["payload"].hex() == case["payload"]
    assert got["ad"].hex() == case["rc_ad"]
    assert hashlib.sha256(got["padded_block"]).hexdigest() == case["inner_padded_sha256"]
    seed = case["seed"]
    if seed is None:
        assert got["signer"] is None
    else:  # the stand-in verified the signature over SHA3-256("SimpleXService" ‖ rcAD) ‖ payload
        assert got["signer"] == standin.ed25519_sign(bytes.fromhex(seed), b"")[0]


@pytest.mark.parametrize("case", REQUESTS, ids=lambda c: c["name"])
def test_the_standin_answers_with_the_recorded_bytes(case: dict[str, Any]) -> None:
    got = standin.service_open(bytes.fromhex(case["message"]), _address(case["address"]))
    r = {k: None if v is None else bytes.fromhex(v)
         for k, v in case["response_randomness"].items()}
    block = case["response_type"].encode() + bytes.fromhex(case["response_payload"])
    assert standin.service_answer(block, got["reply"], r).hex() == case["response_message"]


def test_the_error_cases_name_a_layer_for_every_agent_crypto_error() -> None:
    errors = [c for c in DOC["cases"] if "error" in c]
    assert {c["error"] for c in errors} == {"AgentCryptoError", "BadSignature"}
    layers = {c["layer"] for c in errors if c["error"] == "AgentCryptoError"}
    assert layers >= {"request envelope", "request box", "client message",
                      "encrypted ratchet header", "ratchet header GCM", "ratchet message GCM",
                      "response envelope", "response box"}


def test_without_the_extra_the_check_names_what_it_did_not_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The other kinds are still checked; agent_crypto is a named problem, not a pass."""
    from simplex_rpc.errors import SimplexRpcError
    from simplex_rpc.vectors import check_vectors, generate

    monkeypatch.setitem(sys.modules, "pqcrypto.kem", None)
    problems = check_vectors(VECTORS.parent)  # the library's default: a problem
    assert len(problems) == 1
    assert problems[0].startswith("agent_crypto.json: not checked: ")
    assert "simplex-rpc[sntrup761]" in problems[0]
    noted: list[str] = []  # the command line's way: the others pass, this one is named
    assert check_vectors(VECTORS.parent, not_checked=noted) == []
    assert noted == problems
    with pytest.raises(SimplexRpcError, match=r"simplex-rpc\[sntrup761\]"):
        generate(tmp_path)


def test_the_command_line_checks_the_rest_and_names_agent_crypto(tmp_path: Path) -> None:
    """`simplex-rpc vectors check` without pqcrypto: exit 0, agent_crypto named on stderr."""
    import os
    import subprocess

    hidden = tmp_path / "pqcrypto"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('pqcrypto hidden for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "simplex_rpc", "vectors", "check"], env=env,
                          capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert b"agent_crypto.json: not checked: " in done.stderr
    assert b"simplex-rpc[sntrup761]" in done.stderr
    assert b"every case holds" in done.stdout
    assert b"not checked: agent_crypto.json (see stderr)" in done.stdout
    assert b"every checked file is as generated" in done.stdout

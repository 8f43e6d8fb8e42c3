"""The vector files of ``vectors/`` (wire.md section 7).

They must be exactly what the generator writes (deterministic: a second run
gives the same bytes), the CBOR files must hold the same cases as the JSON
ones, every field wire.md names must be present, and every case must hold:
against the library on every backend, and, where a second implementation
exists (cryptography's Ed25519 and DER, hashlib), against that too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import cbor2
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from simplex_rpc import vectors as _vectors
from simplex_rpc._wire import backend as _backend
from simplex_rpc.vectors import _files as _vector_files

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

VECTORS = Path(__file__).resolve().parents[2] / "vectors"
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")  # wire.md 1, written out
FILES = ["README.md"] + [f"{k}.{ext}" for k in _vectors.KINDS for ext in ("json", "cbor")]


def load(kind: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VECTORS / f"{kind}.json").read_bytes())
    return doc


def cases(kind: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = load(kind)["cases"]
    return result


def positives(kind: str) -> list[dict[str, Any]]:
    return [c for c in cases(kind) if "error" not in c]


def negatives(kind: str) -> list[dict[str, Any]]:
    return [c for c in cases(kind) if "error" in c]


# -- the files are what the generator writes ------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_file_exists(name: str) -> None:
    assert (VECTORS / name).is_file(), f"vectors/{name} is missing: run `make vectors`"


def test_files_are_exactly_what_the_generator_writes() -> None:
    """wire.md 7: 'the same generator run gives byte-identical files'."""
    expected = _vectors.render_files()
    assert sorted(expected) == sorted(FILES)
    for name, data in expected.items():
        assert (VECTORS / name).read_bytes() == data, f"vectors/{name} differs from the generator"


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first = _vectors.generate(tmp_path / "a")
    assert all(changed for _, changed in first)
    again = _vectors.generate(tmp_path / "a")
    assert [changed for _, changed in again] == [False] * len(FILES)
    _vectors.generate(tmp_path / "b")
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_check_vectors_passes_on_the_committed_files() -> None:
    assert _vectors.check_vectors(VECTORS) == []


@pytest.mark.parametrize("name", [f"{k}.json" for k in _vectors.KINDS])
def test_json_formatting_is_stable(name: str) -> None:
    """Sorted keys, two-space indent, ASCII only, one final newline."""
    data = (VECTORS / name).read_bytes()
    data.decode("ascii")
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
    assert data == (json.dumps(json.loads(data), indent=2, sort_keys=True) + "\n").encode()


# -- CBOR ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_cbor_holds_the_same_cases_as_json(kind: str) -> None:
    raw = cbor2.loads((VECTORS / f"{kind}.cbor").read_bytes())
    assert _vectors.from_cbor_document(raw) == load(kind)


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_cbor_is_canonical_with_bytes_as_byte_strings(kind: str) -> None:
    data = (VECTORS / f"{kind}.cbor").read_bytes()
    raw = cbor2.loads(data)
    assert cbor2.dumps(raw, canonical=True) == data
    for case in raw["cases"]:
        for field, value in case.items():
            if field in _vectors.HEX_FIELDS:
                assert value is None or isinstance(value, bytes), (kind, case["name"], field)
            else:
                assert not isinstance(value, bytes), (kind, case["name"], field)


# -- structure: every field wire.md names -----------------------------------------------


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_document_header(kind: str) -> None:
    doc = load(kind)
    assert doc["format"] == "simplex-rpc-vectors"
    assert doc["version"] == 1
    assert doc["kind"] == kind
    assert isinstance(doc["cases"], list)


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_every_case_has_a_unique_name_and_known_error_kind(kind: str) -> None:
    names = [c["name"] for c in cases(kind)]
    assert all(isinstance(n, str) and n for n in names)
    assert len(set(names)) == len(names)
    known = {"KeyFormatError", "BadSignature", "PaddingError", "PayloadTooLarge"}
    known |= {"FrameError", "EnvelopeError", "SimplexRpcError", "AgentCryptoError"}
    assert {c["error"] for c in negatives(kind)} <= known
    assert positives(kind) and negatives(kind), "each file has positive and negative cases"


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_bytes_are_lowercase_hex(kind: str) -> None:
    for case in cases(kind):
        for field, value in case.items():
            if field in _vectors.HEX_FIELDS and value is not None:
                assert isinstance(value, str), (case["name"], field)
                assert value == value.lower() and len(value) % 2 == 0, (case["name"], field)
                bytes.fromhex(value)


KEY_FIELDS = {"seed", "public_key_raw", "public_key_der", "public_key"}
KEY_FIELDS |= {"private_key_der", "private_key"}


def test_keys_fields() -> None:
    full = [c for c in cases("keys") if "private_key" in c]
    assert len(full) >= 5
    for case in full:
        assert KEY_FIELDS <= set(case), case["name"]
        assert len(case["public_key"]) == 60 and case["public_key"].endswith("=")
        assert len(case["private_key"]) == 64
    for case in negatives("keys"):
        assert {"text", "error", "key_type"} <= set(case), case["name"]
        assert case["key_type"] in ("public", "private")


def test_keys_negative_coverage() -> None:
    """wire.md 1: the strict decoding rules each have a case."""
    names = " | ".join(c["name"] for c in negatives("keys"))
    for needle in (
        "alphabet",
        "'+'",
        "'/'",
        "space",
        "newline",
        "padding",
        "trailing bits",
        "DER one byte short",
        "wrong outer length",
        "X25519",
        "Ed448",
        "P-256",
        "RSA",
    ):
        assert needle in names, needle


SIG_FIELDS = {"seed", "ad", "payload", "session_tag", "signature", "public_key", "valid"}


def test_signatures_fields() -> None:
    for case in cases("signatures"):
        assert SIG_FIELDS <= set(case), case["name"]
        assert isinstance(case["valid"], bool)
        assert ("error" in case) == (not case["valid"])
    names = " | ".join(c["name"] for c in cases("signatures") if not c["valid"])
    for needle in ("other AD", "other payload", "trailing '#'", "flipped bit", "S + L"):
        assert needle in names, needle
    assert "small-order public key" in names


def test_padding_fields_and_limits() -> None:
    pads = [c for c in positives("padding") if c["op"] == "pad"]
    for case in pads:
        assert {"message", "length", "padded_sha256", "padded_head"} <= set(case), case["name"]
    failures = [c for c in negatives("padding") if c["op"] == "pad"]
    for case in failures:
        assert {"message_length", "length", "error"} <= set(case), case["name"]
    fits = {(len(c["message"]) // 2, c["length"]) for c in pads}
    refused = {(c["message_length"], c["length"]) for c in failures}
    # wire.md 5: 11,104 bytes fit the 11,106 block, 11,105 do not; maxMsgLen = 65,533.
    assert (11104, 11106) in fits and (11105, 11106) in refused
    assert (65533, 65535) in fits and any(size == 65534 for size, _ in refused)
    assert (0, 11106) in fits and (0, 1) in refused


QUEUE_FIELDS = {"client_version", "hosts", "port", "key_hash", "sender_id", "dh_public_key"}
QUEUE_FIELDS |= {"queue_mode"}


def test_agent_messages_fields() -> None:
    """The fields of each case type (the issue's list)."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for case in cases("agent_messages"):
        by_type.setdefault(case["type"], []).append(case)
    for case in by_type["smp_queue_info"]:
        assert QUEUE_FIELDS | {"uri", "encoded"} <= set(case), case["name"]
        assert case["queue_mode"] in ("M", "C", None)
    for case in by_type["service_request"]:
        assert {"reply_queues", "payload", "message", "padded_length", "padded_sha256"} <= set(case)
        assert all(set(q) == QUEUE_FIELDS for q in case["reply_queues"]), case["name"]
        assert ("seed" in case) == ("ad" in case), case["name"]
    for kind, body in (("service_response", "payload"), ("rejection", "reason")):
        for case in by_type[kind]:
            assert {body, "pq_support", "message", "padded_length", "padded_sha256"} <= set(case)
            assert case["padded_length"] == (11106 if case["pq_support"] else 14832)
    for case in by_type["message_error"]:
        assert {"message", "expect", "error"} <= set(case), case["name"]
    assert {c["error"] for c in by_type["too_large"]} == {"PayloadTooLarge"}


def _queue_bytes(q: dict[str, Any]) -> bytes:
    """SMPQueueInfo rebuilt by hand from its fields (Agent/Protocol.hs, client versions 2 to 4)."""

    def bs(data: bytes) -> bytes:
        return bytes([len(data)]) + data

    version = q["client_version"]
    assert version >= 2, "the legacy form is not rebuilt here"
    out = version.to_bytes(2, "big") + bytes([len(q["hosts"])])
    out += b"".join(bs(h.encode()) for h in q["hosts"])
    out += bs(q["port"].encode()) + bs(bytes.fromhex(q["key_hash"]))
    out += bs(bytes.fromhex(q["sender_id"])) + bs(bytes.fromhex(q["dh_public_key"]))
    mode = q["queue_mode"]
    if version >= 4 and mode:
        out += mode.encode()
    elif version == 3 and mode == "M":
        out += b"T"
    return out


def test_agent_messages_match_the_grammar() -> None:
    """wire.md 4, rebuilt by hand: 'A' count queues ('0' / '1' 44 key 64 sig) payload,
    'P' payload, 'J' reason; padded to 11,106 (14,832 without PQ)."""
    for case in cases("agent_messages"):
        if case["type"] == "smp_queue_info" and case["client_version"] >= 2:
            assert _queue_bytes(case).hex() == case["encoded"], case["name"]
        if case["type"] == "service_request":
            payload = bytes.fromhex(case["payload"])
            head = b"A" + bytes([len(case["reply_queues"])])
            head += b"".join(_queue_bytes(q) for q in case["reply_queues"])
            if "seed" in case:
                private = ed25519.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(case["seed"]))
                der = SPKI_PREFIX + private.public_key().public_bytes_raw()
                ad = bytes.fromhex(case["ad"])
                tag = hashlib.sha3_256(b"SimpleXService" + ad).digest()
                sig = private.sign(tag + payload)
                head += b"1" + bytes([44]) + der + bytes([64]) + sig
            else:
                head += b"0"
            message = head + payload
        elif case["type"] == "service_response":
            message = b"P" + bytes.fromhex(case["payload"])
        elif case["type"] == "rejection":
            message = b"J" + bytes.fromhex(case["reason"])
        else:
            continue
        assert message.hex() == case["message"], case["name"]
        padded = _pad(message, case["padded_length"])
        assert hashlib.sha256(padded).hexdigest() == case["padded_sha256"], case["name"]


def test_envelopes_fields() -> None:
    for case in cases("envelopes"):
        assert {"json", "valid", "envelope"} <= set(case), case["name"]
        assert ("error" in case) == (not case["valid"])
        if case["json"] is None:
            assert "json_hex" in case
    names = " | ".join(c["name"] for c in negatives("envelopes"))
    for needle in ("duplicate", "65 levels", "NaN", "surrogate", "UTF-8", "missing protocol"):
        assert needle in names, needle
    for needle in ("both", "neither", "retryAfter", "protocol name", "requestKey"):
        assert needle in names, needle


def test_envelopes_include_the_protocol_text_examples() -> None:
    valid = {c["name"]: c for c in positives("envelopes")}
    mcp = json.loads(valid["protocol text: MCP tools/call over Service RPC"]["json"])
    assert mcp["protocol"] == "mcp" and mcp["request"]["method"] == "tools/call"
    assert mcp["request"]["params"]["arguments"] == {"item": "anvil"}
    answer = json.loads(valid["protocol text: MCP tools/call response"]["json"])
    assert answer["response"]["result"]["content"][0]["text"] == "12 anvils are in stock."
    a2a = json.loads(valid["protocol text: A2A one-shot SendMessage"]["json"])
    assert a2a["protocol"] == "a2a" and a2a["request"]["method"] == "SendMessage"


# -- every case holds against the library -------------------------------------------------


@pytest.mark.parametrize("kind", _vectors.KINDS)
def test_every_case_holds_on_backend(kind: str, backend: _backend.Backend) -> None:
    assert _vectors.verify_document(kind, load(kind), backends=[backend]) == []


# -- and against a second implementation ------------------------------------------------


def test_keys_match_cryptography() -> None:
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pkcs8 = (
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    for case in cases("keys"):
        if "private_key" not in case:
            continue
        key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(case["seed"]))
        assert key.public_key().public_bytes(*spki).hex() == case["public_key_der"]
        assert key.private_bytes(*pkcs8).hex() == case["private_key_der"]


def test_signatures_match_cryptography() -> None:
    """Valid cases verify under cryptography's Ed25519 over SHA3-256(domain || AD) || payload."""
    for case in cases("signatures"):
        if case["session_tag"] is None:
            continue
        ad = bytes.fromhex(case["ad"])
        tag = hashlib.sha3_256(b"SimpleXService" + ad).digest()
        assert tag.hex() == case["session_tag"], case["name"]
        if not case["valid"]:
            continue
        key = ed25519.Ed25519PublicKey.from_public_bytes(bytes.fromhex(case["public_key_raw"]))
        message = tag + bytes.fromhex(case["payload"])
        try:
            key.verify(bytes.fromhex(case["signature"]), message)
        except InvalidSignature:  # pragma: no cover - a failure is the finding
            pytest.fail(f"{case['name']}: cryptography rejects a valid case")


def _pad(message: bytes, length: int) -> bytes:
    return len(message).to_bytes(2, "big") + message + b"#" * (length - 2 - len(message))


def test_padding_matches_a_reimplementation() -> None:
    for case in positives("padding"):
        if case["op"] != "pad":
            continue
        padded = _pad(bytes.fromhex(case["message"]), case["length"])
        assert hashlib.sha256(padded).hexdigest() == case["padded_sha256"], case["name"]
        assert padded[:64].hex() == case["padded_head"], case["name"]


# -- the checker finds what is wrong ----------------------------------------------------


def test_check_names_file_and_case_of_a_change(tmp_path: Path) -> None:
    shutil.copytree(VECTORS, tmp_path / "v")
    doc = load("signatures")
    target = doc["cases"][0]
    target["signature"] = "00" + target["signature"][2:]
    (tmp_path / "v" / "signatures.json").write_text(_vector_files.render_json(doc).decode())
    problems = _vectors.check_vectors(tmp_path / "v")
    assert problems
    assert all(p.startswith("signatures.json: ") for p in problems)
    assert any(repr(target["name"]) in p and "signature" in p for p in problems)


def test_check_reports_missing_extra_and_damaged_files(tmp_path: Path) -> None:
    shutil.copytree(VECTORS, tmp_path / "v")
    (tmp_path / "v" / "keys.cbor").unlink()
    (tmp_path / "v" / "extra.json").write_text("{}\n")
    damaged = (tmp_path / "v" / "padding.cbor").read_bytes()[:-10]
    (tmp_path / "v" / "padding.cbor").write_bytes(damaged)
    problems = _vectors.check_vectors(tmp_path / "v")
    assert any(p.startswith("keys.cbor: missing") for p in problems)
    assert any(p.startswith("extra.json: ") for p in problems)
    assert any(p.startswith("padding.cbor: ") for p in problems)


def test_check_reports_reformatted_file(tmp_path: Path) -> None:
    shutil.copytree(VECTORS, tmp_path / "v")
    doc = load("agent_messages")
    (tmp_path / "v" / "agent_messages.json").write_text(json.dumps(doc, sort_keys=True) + "\n")
    problems = _vectors.check_vectors(tmp_path / "v")
    assert problems == [
        "agent_messages.json: same cases, but the bytes differ from the generator's formatting"
    ]


def _first(kind: str, predicate: Any) -> tuple[dict[str, Any], int]:
    doc = copy.deepcopy(load(kind))
    index = next(i for i, c in enumerate(doc["cases"]) if predicate(c))
    return doc, index


@pytest.mark.parametrize(
    ("kind", "predicate", "field", "value"),
    [
        ("keys", lambda c: "private_key" in c, "public_key", "MCowBQYDK2VwAyEA" + "A" * 43 + "="),
        ("keys", lambda c: "error" in c, "error", "FrameError"),
        ("signatures", lambda c: c["valid"], "payload", "00"),
        ("signatures", lambda c: not c["valid"], "valid", True),
        ("padding", lambda c: c["op"] == "pad" and "error" not in c, "length", 11107),
        ("padding", lambda c: "message_length" in c, "message_length", 3),
        ("agent_messages", lambda c: c["type"] == "service_request", "padded_sha256", "00" * 32),
        ("agent_messages", lambda c: c["type"] == "smp_queue_info", "port", "443"),
        ("agent_messages", lambda c: c["type"] == "message_error", "error", "BadSignature"),
        ("agent_messages", lambda c: "offset" in c, "offset", 9999),
        ("envelopes", lambda c: c["valid"], "valid", False),
        ("envelopes", lambda c: not c["valid"], "json", '{"protocol":"x","request":1}'),
    ],
)
def test_verify_document_catches_a_wrong_case(
    kind: str, predicate: Any, field: str, value: Any
) -> None:
    doc, index = _first(kind, predicate)
    doc["cases"][index][field] = value
    problems = _vectors.verify_document(kind, doc)
    assert problems and repr(doc["cases"][index]["name"]) in problems[0]


def test_verify_document_rejects_a_wrong_header() -> None:
    doc = load("keys")
    doc["format"] = "other"
    assert _vectors.verify_document("keys", doc)[0].startswith("keys.json: field 'format'")

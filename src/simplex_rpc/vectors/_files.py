"""The documents of every kind, their files (JSON, CBOR, README) and the checks of files on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import cbor2

from .._wire import backend as _backend
from .._wire.backend import Backend
from ._agent_crypto import _agent_crypto_document, _verify_agent_crypto
from ._agent_messages import _agent_messages_document, _verify_agent_message
from ._common import (
    ERROR_CLASSES,
    FORMAT,
    HEX_FIELDS,
    KINDS,
    VERSION,
    Case,
    Document,
    VectorError,
    _Checker,
    _is_hex,
)
from ._envelopes import _envelopes_document, _verify_envelope
from ._keys import _keys_document, _verify_key
from ._padding import _padding_document, _verify_padding
from ._signatures import _signatures_document, _verify_signature

_BUILDERS: Final[dict[str, Callable[[], Document]]] = {
    "keys": _keys_document,
    "signatures": _signatures_document,
    "padding": _padding_document,
    "agent_messages": _agent_messages_document,
    "envelopes": _envelopes_document,
    "agent_crypto": _agent_crypto_document,
}


def build_documents() -> dict[str, Document]:
    """Build every vector document, checked against the library on every backend.

    Raises :class:`VectorError` when a case and the library disagree.
    """
    docs = {kind: _BUILDERS[kind]() for kind in KINDS}  # ExtraMissing: one clear line
    problems = [p for kind, doc in docs.items() for p in verify_document(kind, doc)]
    if problems:
        raise VectorError(
            f"{len(problems)} generated cases disagree with the library; first: {problems[0]}"
        )
    return docs


def render_json(doc: Document) -> bytes:
    """The JSON file of a document: sorted keys, two-space indent, ASCII, final newline."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def to_cbor_document(value: Any, field: str | None = None) -> Any:
    """The CBOR data model of a JSON document: every ``HEX_FIELDS`` string as bytes."""
    if isinstance(value, dict):
        return {k: to_cbor_document(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [to_cbor_document(v, field) for v in value]
    if field in HEX_FIELDS and isinstance(value, str):
        return bytes.fromhex(value)
    return value


def from_cbor_document(value: Any) -> Any:
    """The inverse of :func:`to_cbor_document`: byte strings back to lowercase hex."""
    if isinstance(value, dict):
        return {k: from_cbor_document(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_cbor_document(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def render_cbor(doc: Document) -> bytes:
    """The canonical CBOR file of a document (RFC 7049 canonical, as cbor2 writes it)."""
    return cbor2.dumps(to_cbor_document(doc), canonical=True)


def render_files(
    docs: dict[str, Document] | None = None, kinds: Iterable[str] = KINDS
) -> dict[str, bytes]:
    """Every file of ``vectors/``, by name: ``<kind>.json``, ``<kind>.cbor``, ``README.md``."""
    if docs is None:
        docs = build_documents()
    files: dict[str, bytes] = {"README.md": _README.encode("utf-8")}
    for kind in kinds:
        files[f"{kind}.json"] = render_json(docs[kind])
        files[f"{kind}.cbor"] = render_cbor(docs[kind])
    return files


def generate(directory: str | os.PathLike[str]) -> list[tuple[str, bool]]:
    """Write the vector files into ``directory`` (created if needed).

    Returns ``(file name, changed)`` for every file; an unchanged file is not
    rewritten.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in render_files().items():
        target = path / name
        changed = not target.is_file() or target.read_bytes() != data
        if changed:
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        out.append((name, changed))
    return out


def check_vectors(
    directory: str | os.PathLike[str], *, not_checked: list[str] | None = None
) -> list[str]:
    """Check the files in ``directory``; return the problems (empty when all is well).

    Each file must equal, byte for byte, what the generator writes now, and
    every case of every JSON file must hold against the library on every
    backend. A message names the file and, where it can, the case. A kind whose
    optional extra is missing (``agent_crypto`` needs ``sntrup761``) cannot be
    checked: it is a problem, unless ``not_checked`` is given, which then
    receives one line per such file, naming what to install.
    """
    path = Path(directory)
    if not path.is_dir():
        return [f"{path}: not a directory"]
    problems: list[str] = []
    missing = _kinds_missing_an_extra()
    for kind, reason in missing.items():  # never called checked: named, to the caller
        line = f"{kind}.json: not checked: {reason}"
        (problems if not_checked is None else not_checked).append(line)
    present = [kind for kind in KINDS if kind not in missing]
    docs = {kind: _BUILDERS[kind]() for kind in present}
    bad = [p for kind, doc in docs.items() for p in verify_document(kind, doc)]
    if bad:
        raise VectorError(f"{len(bad)} generated cases disagree with the library; first: {bad[0]}")
    expected = render_files(docs, kinds=present)
    for kind in missing:
        expected.pop(f"{kind}.json", None)
    for name, data in expected.items():
        target = path / name
        if not target.is_file():
            problems.append(f"{name}: missing (run `simplex-rpc vectors generate {path}`)")
            continue
        actual = target.read_bytes()
        if actual != data:
            problems.extend(_describe_difference(name, actual, data))
    for extra in sorted(path.glob("*.json")) + sorted(path.glob("*.cbor")):
        if extra.name not in expected and extra.stem not in missing:
            problems.append(f"{extra.name}: not a file the generator writes")
    for kind in present:
        target = path / f"{kind}.json"
        if not target.is_file():
            continue
        try:
            doc = json.loads(target.read_bytes())
        except ValueError as exc:
            problems.append(f"{kind}.json: not JSON ({exc})")
            continue
        problems.extend(verify_document(kind, doc, file_name=f"{kind}.json"))
    return problems


def _load_any(name: str, data: bytes) -> Any:
    if name.endswith(".cbor"):
        return from_cbor_document(cbor2.loads(data))
    return json.loads(data)


def _describe_difference(name: str, actual: bytes, expected: bytes) -> list[str]:
    """Say which cases of a file differ from the generator's, by name."""
    if not name.endswith((".json", ".cbor")):
        return [f"{name}: differs from what the generator writes"]
    try:
        got = _load_any(name, actual)
    except Exception as exc:  # any decoder failure: the file is damaged
        return [f"{name}: differs from the generator and cannot be read ({exc})"]
    want = _load_any(name, expected)
    if not isinstance(got, dict) or not isinstance(got.get("cases"), list):
        return [f"{name}: differs from the generator: not a vector document"]
    out = []
    for field in sorted(set(got) | set(want)):
        if field != "cases" and got.get(field) != want.get(field):
            out.append(f"{name}: top-level field {field!r} differs from the generator")
    got_cases = {c.get("name"): c for c in got["cases"] if isinstance(c, dict)}
    want_cases = {c["name"]: c for c in want["cases"]}
    for case_name, case in want_cases.items():
        if case_name not in got_cases:
            out.append(f"{name}: case {case_name!r} is missing")
        elif got_cases[case_name] != case:
            fields = sorted(
                k
                for k in set(case) | set(got_cases[case_name])
                if case.get(k) != got_cases[case_name].get(k)
            )
            out.append(f"{name}: case {case_name!r} differs in {', '.join(fields)}")
    for case_name in got_cases:
        if case_name not in want_cases:
            out.append(f"{name}: case {case_name!r} is not one the generator writes")
    if not out and [c.get("name") for c in got["cases"] if isinstance(c, dict)] != list(want_cases):
        out.append(f"{name}: cases are in a different order than the generator's")
    if not out:
        out.append(f"{name}: same cases, but the bytes differ from the generator's formatting")
    return out


def verify_document(
    kind: str,
    doc: Any,
    *,
    file_name: str | None = None,
    backends: Iterable[Backend] | None = None,
) -> list[str]:
    """Check every case of a vector document against the library.

    Returns the problems found (empty when every case holds). Framing and
    padding cases run on every backend (or those given).
    """
    name = file_name or f"{kind}.json"
    if not isinstance(doc, dict):
        return [f"{name}: not a JSON object"]
    head = [
        f"{name}: field {field!r} is {doc.get(field)!r}, not {value!r}"
        for field, value in (("format", FORMAT), ("version", VERSION), ("kind", kind))
        if doc.get(field) != value
    ]
    cases = doc.get("cases")
    if not isinstance(cases, list) or not cases:
        return [*head, f"{name}: 'cases' is not a non-empty list"]
    checker = _Checker(name)
    seen: set[str] = set()
    impls = list(backends) if backends is not None else list(_backend.backends.values())
    verify = _VERIFIERS[kind]
    for case in cases:
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            checker.problems.append(f"{name}: a case without a name: {str(case)[:60]}")
            continue
        if case["name"] in seen:
            checker.fail(case, "duplicate case name")
        seen.add(case["name"])
        if "error" in case and case["error"] not in ERROR_CLASSES:
            checker.fail(case, f"unknown error kind {case['error']!r}")
            continue
        for field, value in case.items():
            if field in HEX_FIELDS and value is not None and not _is_hex(value):
                checker.fail(case, f"field {field!r} is not lowercase hex")
        try:
            verify(checker, case, impls)
        except (KeyError, TypeError, ValueError) as exc:
            checker.fail(case, f"malformed case ({type(exc).__name__}: {exc})")
    return head + checker.problems


def _kinds_missing_an_extra() -> dict[str, str]:
    """Kinds that need an optional extra that is not installed, with what to install."""
    from ._agent_crypto import missing_extra

    reason = missing_extra()
    return {} if reason is None else {"agent_crypto": reason}


_VERIFIERS: Final[dict[str, Callable[[_Checker, Case, list[Backend]], None]]] = {
    "keys": _verify_key,
    "signatures": _verify_signature,
    "padding": _verify_padding,
    "agent_messages": _verify_agent_message,
    "envelopes": _verify_envelope,
    "agent_crypto": _verify_agent_crypto,
}


_README: Final = """\
# simplex-rpc test vectors

Generated by `simplex-rpc vectors generate`; checked by `simplex-rpc vectors check`
(regenerates in memory, compares byte for byte, and re-verifies every case against
the library). Do not edit by hand. The byte contract is wire.md; the file format is
described in full in docs/core-cli.md ("Vector file format").

Each `<kind>.json` is `{"format": "simplex-rpc-vectors", "version": 1, "kind": ...,
"description": ..., "cases": [...]}`, written with sorted keys, two-space indent,
ASCII only and a final newline. Bytes are lowercase hex. Every case has a unique
`name`; a negative case has `"error"`, the name of the library error class that
must be raised (`KeyFormatError`, `BadSignature`, `PaddingError`,
`PayloadTooLarge`, `FrameError`, `EnvelopeError`, `AgentCryptoError`, or `SimplexRpcError` for a
refused argument such as an empty AD). `<kind>.cbor` holds the same document as
canonical CBOR, with every hex field as a byte string instead.

Fields, positive cases first, then negative ones:

- keys: `seed`, `public_key_raw`, `public_key_der`, `public_key`, `private_key_der`,
  `private_key`; or `key_type` and a `text` that decodes to `public_key_raw` (and
  `seed`). Negative: `key_type`, `text`, optional `der` (what the text decodes to),
  `error`.
- signatures: `seed` (null when no seed exists), `ad`, `payload`, `session_tag`,
  `signature`, `public_key`, `public_key_raw`, `valid`; `error` when not valid.
- padding: `op: "pad"` with `message`, `length`, `padded_sha256`, `padded_head`
  (first 64 bytes), or `message_length`, `length`, `error`; `op: "unpad"` with
  `block`, `length` (the exact size required, or null), `strict`, and `message` or
  `error`.
- agent_messages: the SimpleX agent's own Service RPC block (agent v8), each case with
  a `type`. `smp_queue_info`: `client_version`, `hosts` (a list), `port`, `key_hash`,
  `sender_id`, `dh_public_key` (X25519 SPKI DER), `queue_mode` (`"M"`, `"C"` or
  null), `uri` (simplexmq's text form) and `encoded`; where the printed URI does not
  read back, `uri_reads_as` (the hosts and port simplexmq reads) or `uri_error`.
  `service_request`: `reply_queues` (objects with the fields above, without
  `encoded` and `uri`), `seed` and `ad` when signed, `payload`, `message` (unpadded),
  `padded_length`, `padded_sha256`. `service_response`: `payload`, `pq_support`,
  `message`, `padded_length`, `padded_sha256`. `rejection`: `reason`, `pq_support`,
  `message`, `padded_length`, `padded_sha256`. Negative: `message_error` with
  `message`, `expect` (`request` or `response`: how the padded message is opened),
  `error`, `offset` (the offset the error names, from the message's first byte)
  and `ad` for a signature that does not verify; `too_large` with `reply_queues` and
  `signed` (or `pq_support`), `payload_length` and `error`; `smp_queue_info_error`
  with `encoded`; `uri_error` with `uri`.
- envelopes: `envelope` (`request` or `response`), `json` (the input's text, or null
  with `json_hex` when the input is not UTF-8), `valid`; what the parse gives when
  valid (`protocol`, `request_key_raw`; `ok`, `error_code`, `retry_after`, `final`),
  and `error`, `code` when not.
- agent_crypto: Service RPC messages as they cross an SMP server (wire.md section 8).
  `request`: `address` (`queue_dh`, `k1`, `k2`, `kem_secret`, `kem_public`, `key_id`,
  `pq_support`), `reply_queue` (the fields of agent_messages), `payload`, `seed`,
  `agent_version`, `client_version`, `request_randomness`, `message`, `rc_ad`,
  `inner_padded_sha256`, `response_type` (`P` or `J`), `response_payload`,
  `response_randomness`, `response_message`. Negative: `message_error` with
  `address`, `message`, `error` and `layer` (of an `AgentCryptoError`);
  `response_error` with a request's inputs, a damaged `response_message`, `error`
  and `layer`.
"""

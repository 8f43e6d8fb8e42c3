"""Write the seed corpus of ``make fuzz`` from ``vectors/`` (and a few texts of the protocol).

Usage: ``python fuzz/make_corpus.py`` (from the repository root). Writes
``fuzz/corpus/<target>/<name>`` for the atheris targets of
``fuzz_decoders.py``, the libFuzzer harness ``fuzz_c.c`` (target ``c``) and the
JSON validator's harnesses ``fuzz_json.c`` and ``fuzz_json_diff.c`` (target ``json``).
Deterministic: the same vectors give the same files. Seeds longer than
``MAX_SEED`` bytes are left out, so the corpus stays small; the fuzzers grow
their own working corpus under ``build/fuzz/``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "vectors"
CORPUS = ROOT / "fuzz" / "corpus"
MAX_SEED = 2048

# libFuzzer harness operations (fuzz_c.c): op byte, flags byte, 16-bit parameter.
(OP_UNPAD, OP_UNPAD_MANY, OP_SEAL_PARTS, OP_SIGNED, OP_PAD, OP_SIGNED_MESSAGE, OP_PAD_MANY,
 OP_SEAL_PARTS_MANY, OP_REQUEST_HEAD) = range(9)
FLAG_EXACT, FLAG_STRICT = 1, 2

TEXT_SEEDS = [
    '/_call mcp {"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":'
    '{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}',
    "/_call @'Acme Support' a2a {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"method\":\"GetTask\"}",
    '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}',
    "# Acme\n\n## Communications\n\n"
    "- [Acme news](https://smp12.simplex.im/c#k): SimpleX updates for people and agents,"
    " weekly. News.\n"
    "- [Ask Acme](https://smp12.simplex.im/a#k): SimpleX business contact for agents, MCP,"
    " A2A. Orders.\n"
    "- [Acme](simplex:/contact#/?v=2&data=%7B%22groupLinkId%22%3A%22x%22%7D): SimpleX group"
    " for people.\n- [Mail](mailto:a@acme.example): Email contact for people.\n",
    '{"protocols":{"mcp":{"versions":["2026-07-28"],"transports":{"chat":true,"rpc":true}},'
    '"a2a":{"versions":["1.0"],"transports":{"rpc":true},"x":1}}}',
    '{"audience":["agent","human"],"changeFrequency":"weekly","serves":["bot"]}',
]


def _cases(kind: str) -> list[dict[str, object]]:
    doc = json.loads((VECTORS / f"{kind}.json").read_text())
    cases: list[dict[str, object]] = doc["cases"]
    return cases


def _hex(case: dict[str, object], field: str) -> bytes | None:
    value = case.get(field)
    return bytes.fromhex(value) if isinstance(value, str) else None


def _pad(message: bytes, length: int) -> bytes:
    return len(message).to_bytes(2, "big") + message + b"#" * (length - 2 - len(message))


def _c_seed(op: int, flags: int, param: int, data: bytes) -> bytes:
    return struct.pack(">BBH", op, flags, param & 0xFFFF) + data


def seeds() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {"keys": [], "messages": [], "open": [], "envelopes": [],
                                   "text": [], "c": [], "json": []}
    for case in _cases("keys"):
        for field in ("public_key", "private_key", "text"):
            value = case.get(field)
            if isinstance(value, str):
                out["keys"].append(value.encode("utf-8", "surrogatepass"))
        for field in ("public_key_der", "private_key_der", "der"):
            der = _hex(case, field)
            if der is not None:
                out["keys"].append(der)
    for case in _cases("agent_messages"):
        for field in ("message", "encoded"):
            message = _hex(case, field)
            if message is None:
                continue
            out["messages"].append(message)
            out["open"].append(message)
            head = min(len(message), 200)  # the C ops take a head length byte first
            out["c"].append(_c_seed(OP_SEAL_PARTS, 0, len(message) + 10,
                                    bytes([head]) + message))
            out["c"].append(_c_seed(OP_SEAL_PARTS_MANY, 0, len(message) + 10,
                                    bytes([head, 2]) + message))
            out["c"].append(_c_seed(OP_SIGNED, 0, len(message) + 200, message))
            out["c"].append(_c_seed(OP_SIGNED_MESSAGE, 0, 0, message))
            if message[:1] == b"A":  # a request: its head, read in C
                out["c"].append(_c_seed(OP_REQUEST_HEAD, 0, 0, message))
    for case in _cases("padding"):
        message = _hex(case, "message")
        unpad_block = _hex(case, "block")
        length = case.get("length")
        if unpad_block is not None:
            out["messages"].append(unpad_block)
            flags = (FLAG_EXACT if isinstance(length, int) else 0) | (
                FLAG_STRICT if case.get("strict") else 0)
            out["c"].append(_c_seed(OP_UNPAD, flags, length if isinstance(length, int) else 0,
                                    unpad_block))
            out["c"].append(_c_seed(OP_UNPAD_MANY, 0, 16, unpad_block))
        if message is not None and isinstance(length, int):
            out["c"].append(_c_seed(OP_PAD, 0, length, message))
            out["c"].append(_c_seed(OP_PAD_MANY, 0, length, bytes([3, 1, 2, 3]) + message))
    for case in _cases("envelopes"):
        text = case.get("json")
        if isinstance(text, str):
            out["envelopes"].append(text.encode("utf-8", "surrogatepass"))
        # The C JSON validator's seeds (fuzz/fuzz_json.c): every envelope, also the non-UTF-8.
        raw = _hex(case, "json_hex")
        out["json"].append(raw if raw is not None else str(text).encode("utf-8", "surrogatepass"))
    for text in TEXT_SEEDS:
        out["text"].append(text.encode())
    return out


def main() -> None:
    for target, items in seeds().items():
        directory = CORPUS / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for data in items:
            if len(data) > MAX_SEED:
                continue
            name = hashlib.sha1(data).hexdigest()[:16]  # libFuzzer's naming style
            (directory / name).write_bytes(data)
    for target in sorted(seeds()):
        files = list((CORPUS / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()

"""The ``padding`` vectors: SimpleX padding to a fixed block (wire.md section 5)."""

from __future__ import annotations

import hashlib

from .._wire.backend import Backend
from .._wire.padding import PADDED_LENGTH
from ._common import Case, Document, _Checker, _compact, _document, _h, _pattern
from ._examples import (
    MCP_TOOLS_CALL_REQUEST_TEXT,
)


def _pad_case(name: str, message: bytes, length: int = PADDED_LENGTH) -> Case:
    padded = (
        len(message).to_bytes(2, "big") + message + b"#" * (length - 2 - len(message))
    )  # simplexmq's pad, written out independently of the library
    return {
        "name": name,
        "op": "pad",
        "message": message.hex(),
        "length": length,
        "padded_sha256": hashlib.sha256(padded).hexdigest(),
        "padded_head": padded[:64].hex(),
    }


def _padding_document() -> Document:
    cases: list[Case] = [
        _pad_case("empty message", b""),
        _pad_case("short message", b"hello"),
        _pad_case("message ending in '#'", b"ab##"),
        _pad_case("message of only '#'", b"#" * 10),
        _pad_case("MCP tools/call request", _compact(MCP_TOOLS_CALL_REQUEST_TEXT)),
        _pad_case("largest message for 11106 (11104 bytes)", _pattern(11104, "max")),
        _pad_case("empty message in the smallest block (2)", b"", 2),
        _pad_case("three bytes in a block of 5, no fill", b"abc", 5),
        _pad_case("message of 256 bytes (length field 0x0100)", _pattern(256, "x"), 300),
        _pad_case(
            "largest message (65533 bytes, simplexmq maxMsgLen), no fill",
            _pattern(65533, "maxMsgLen"),
            65535,
        ),
    ]

    def pad_error(name: str, size: int, length: int) -> None:
        cases.append(
            {
                "name": name,
                "op": "pad",
                "message_length": size,
                "length": length,
                "error": "PaddingError",
            }
        )

    pad_error("11105 bytes do not fit 11106", 11105, PADDED_LENGTH)
    pad_error("11106 bytes do not fit 11106", 11106, PADDED_LENGTH)
    pad_error("65534 bytes exceed maxMsgLen though the block has room", 65534, 65536)
    pad_error("65534 bytes exceed maxMsgLen", 65534, 65537)
    pad_error("empty message does not fit a block of 1", 0, 1)
    pad_error("empty message does not fit a block of 0", 0, 0)
    pad_error("4 bytes do not fit a block of 5", 4, 5)

    msg = b"hello"
    block = len(msg).to_bytes(2, "big") + msg + b"#" * (PADDED_LENGTH - 7)

    def unpad_case(
        name: str,
        blk: bytes,
        *,
        length: int | None = None,
        strict: bool = False,
        message: bytes | None = None,
        error: str | None = None,
    ) -> None:
        case: Case = {
            "name": name,
            "op": "unpad",
            "block": blk.hex(),
            "length": length,
            "strict": strict,
        }
        if error is None:
            assert message is not None
            case["message"] = message.hex()
        else:
            case["error"] = error
        cases.append(case)

    small = block[:16]  # "hello" padded to a 16-byte block: the same rules, short hex
    unpad_case("unpad: 11106-byte block", block, length=PADDED_LENGTH, strict=True, message=msg)
    unpad_case("unpad: 16-byte block", small, length=16, strict=True, message=msg)
    unpad_case("unpad: the smallest block", b"\x00\x00", length=2, strict=True, message=b"")
    nohash = small[:-1] + b"\x00"
    unpad_case("unpad: fill not '#' is accepted when not strict", nohash, message=msg)
    unpad_case("unpad: fill not '#' refused when strict", nohash, strict=True, error="PaddingError")
    unpad_case(
        "unpad: first fill byte not '#', strict",
        small[:7] + b"\x00" + small[8:],
        strict=True,
        error="PaddingError",
    )
    unpad_case("unpad: no fill at all, strict", small[:7], strict=True, message=msg)
    unpad_case(
        "unpad: block one byte short of the required length",
        small[:-1],
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: block one byte over the required length",
        small + b"#",
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: 11105-byte block where 11106 are required",
        block[:-1],
        length=PADDED_LENGTH,
        error="PaddingError",
    )
    unpad_case("unpad: empty block", b"", error="PaddingError")
    unpad_case("unpad: one-byte block", b"\x00", error="PaddingError")
    unpad_case(
        "unpad: length field one more than the bytes that follow",
        b"\x00\x04abc",
        error="PaddingError",
    )
    unpad_case(
        "unpad: length field 0xffff in a 16-byte block",
        b"\xff\xff" + small[2:],
        length=16,
        error="PaddingError",
    )
    unpad_case(
        "unpad: length field exactly the bytes that follow",
        b"\x00\x03abc",
        strict=True,
        message=b"abc",
    )
    return _document("padding", cases)


def _verify_padding(c: _Checker, case: Case, impls: list[Backend]) -> None:
    for b in impls:
        _verify_padding_on(c, case, b)


def _verify_padding_on(c: _Checker, case: Case, b: Backend) -> None:
    op = case["op"]
    length = case["length"]
    if op == "pad" and "error" in case:
        zeros = bytes(case["message_length"])
        c.raises(case, lambda: b.pad(zeros, length), b, "pad")
        c.raises(case, lambda: b.pad_many([zeros], length), b, "pad_many")
    elif op == "pad":
        message = _h(case, "message")

        def pad_ok() -> None:
            padded = b.pad(message, length)
            c.expect(case, len(padded) == length, "padded length differs", b)
            digest = hashlib.sha256(padded).digest()
            c.expect(case, digest == _h(case, "padded_sha256"), "padded_sha256 differs", b)
            c.expect(case, padded[:64] == _h(case, "padded_head"), "padded_head differs", b)
            back = b.unpad(padded, length=length, strict=True)
            c.expect(case, back == message, "unpad does not give the message back", b)
            c.expect(case, b.pad_many([message], length) == padded, "pad_many differs", b)
            many = b.unpad_many(padded, length, strict=True)
            c.expect(case, many == [message], "unpad_many differs", b)

        c.run(case, pad_ok, b)
    elif op == "unpad":
        block = _h(case, "block")
        strict = case["strict"]
        if not isinstance(strict, bool) or not (length is None or isinstance(length, int)):
            raise ValueError("'strict' or 'length' has the wrong type")
        if "error" in case:
            c.raises(case, lambda: b.unpad(block, length=length, strict=strict), b, "unpad")
        else:
            message = _h(case, "message")

            def unpad_ok() -> None:
                got = b.unpad(block, length=length, strict=strict)
                c.expect(case, got == message, "unpad gives another message", b)

            c.run(case, unpad_ok, b)
    else:
        raise ValueError(f"op {op!r}")

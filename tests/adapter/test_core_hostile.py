"""Hostile input to every core decoder (issue 7).

The guarantee: a decoder either returns a value or raises the library's own
error class for that decoder (a ``SimplexRpcError``), with a one-line message
of bounded length. It never raises another exception type, crashes or hangs.
A wrong Python argument type (``None`` where bytes are expected) is a
programming error and raises ``TypeError``; it is never an ``AttributeError``,
``IndexError`` or the like from deep inside.

Each decoder gets, from one valid input: truncation at every offset, every
bit flipped (or every bit of the header, for a padded block), each length
field and tag set to every other value, trailing bytes, and empty input.
"""

from __future__ import annotations

import array
import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import simplex_rpc as sx
from _queues import QUEUE
from simplex_rpc._wire import backend as _backend
from simplex_rpc._wire.keys import SPKI_PREFIX
from simplex_rpc.agent import AgentServiceRequest, RequestSignature, decode_message

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.hostile]

SEED = bytes(range(32))
KEY = sx.SigningKey.from_seed(SEED)
PUBLIC = KEY.public_key
AD = bytes(range(56)) + bytes(range(100, 156))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
SIGNED_MESSAGE = AgentServiceRequest(
    (QUEUE,), RequestSignature(PUBLIC, KEY.sign_request(AD, PAYLOAD)), PAYLOAD
).encode()
UNSIGNED_MESSAGE = AgentServiceRequest((QUEUE,), None, PAYLOAD).encode()
RESPONSE_MESSAGE = b'P{"response":1}'
REJECTION_MESSAGE = b"Jnot now"
SIG_AT = 2 + len(QUEUE.encode())  # the message offset of the signature's Maybe tag
SIGNED_BLOCK = sx.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)
MAX_MESSAGE = 500

Decoder = Callable[[Any], Any]


def outcome(decode: Decoder, data: object, error: type[sx.SimplexRpcError]) -> tuple[str, Any]:
    """("value", v) or ("error", exc); any exception other than ``error`` fails the test."""
    try:
        return ("value", decode(data))
    except sx.SimplexRpcError as exc:
        assert isinstance(exc, error), f"{type(exc).__name__} where {error.__name__} expected"
        message = str(exc)
        assert message and "\n" not in message, repr(message)
        assert len(message) <= MAX_MESSAGE, message[:400]
        return ("error", exc)


def truncations(data: bytes) -> Iterator[tuple[int, memoryview]]:
    view = memoryview(data)
    for i in range(len(data)):
        yield i, view[:i]


def bit_flips(data: bytes, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    for bit in range(8 * (len(data) if limit is None else min(limit, len(data)))):
        mutated = bytearray(data)
        mutated[bit // 8] ^= 1 << (bit % 8)
        yield bit, bytes(mutated)


def with_byte(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + bytes([value]) + data[offset + 1 :]


TRAILERS = [b"\x00", b"=", b"A", b"\n", b" ", b"#", b"\xff", b"==", b"AAAA"]
WRONG_TYPES: list[object] = [None, 0, 1.5, [], {}, object(), ["a"], {"a": 1}]


# --------------------------------------------------------------------------
# Errors raised for a memoryview input survive garbage collection

_GC_SCRIPT = """
import gc
import simplex_rpc as sx
impl = sx.backends[{name!r}]
calls = [
    lambda v: impl.unpad(v),
    lambda v: impl.unpad(v, length=11106),
    lambda v: impl.unpad_many(v, 16),
    lambda v: impl.open_request(v, b"ad"),
    lambda v: impl.open_response(v),
]
def keep_error(call, view):
    try:
        call(view)
    except sx.SimplexRpcError as exc:
        kept = exc  # exc -> traceback -> this frame -> kept: a reference cycle
        return kept
    return None
for call in calls:
    for data in (b"", b"\\x00", b"\\xff\\xff\\x00", bytes(37)):
        keep_error(call, memoryview(bytearray(data)))
        keep_error(call, memoryview(b"xx" + data)[2:])
        gc.collect()
print("collected")
"""


def test_errors_for_memoryview_input_survive_garbage_collection(
    backend: _backend.Backend,
) -> None:
    """A decoder error for a memoryview input, kept in a reference cycle, is collectable.

    Run in a child process, so that a crash fails this test instead of the suite.
    If C holds the view's buffer (``ffi.from_buffer``) in the frame that raises,
    the collector meets a memoryview with an exported buffer ("BufferError:
    memoryview has 1 exported buffer" in tp_clear) and CPython crashes; the
    wrapper must release the buffer (``ffi.release``) before raising.
    """
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _GC_SCRIPT.format(name=backend.name)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "collected" in result.stdout, (
        f"exit status {result.returncode}: {result.stderr[-600:]}"
    )


# --------------------------------------------------------------------------
# Keys: base64url text, DER, PEM


KEY_DECODERS: dict[str, tuple[Decoder, bytes]] = {
    "PublicKey.decode": (sx.PublicKey.decode, PUBLIC.encode().encode()),
    "SigningKey.decode": (sx.SigningKey.decode, KEY.encode().encode()),
    "PublicKey.from_der": (sx.PublicKey.from_der, PUBLIC.der),
    "SigningKey.from_der": (sx.SigningKey.from_der, KEY.der),
    "PublicKey.from_pem": (sx.PublicKey.from_pem, PUBLIC.to_pem().encode()),
}


def _same_key(value: object) -> bool:
    return value in (PUBLIC, KEY)


@pytest.mark.parametrize("name", list(KEY_DECODERS))
def test_key_truncated_at_every_offset(name: str) -> None:
    decode, valid = KEY_DECODERS[name]
    for i, cut in truncations(valid):
        kind, value = outcome(decode, bytes(cut), sx.KeyFormatError)
        if kind == "value":
            # Only the padded text without its '=' (the unpadded form) is still the key;
            # a PEM cut inside its END line may still parse as the same key.
            assert _same_key(value), i
            assert name in ("PublicKey.decode", "PublicKey.from_pem"), i


@pytest.mark.parametrize("name", list(KEY_DECODERS))
def test_key_every_bit_flipped(name: str) -> None:
    decode, valid = KEY_DECODERS[name]
    for bit, mutated in bit_flips(valid):
        kind, _ = outcome(decode, mutated, sx.KeyFormatError)
        if kind == "value" and name.endswith("from_der"):
            # A flip in the DER prefix is refused; one in the 32 key bytes is another key.
            prefix = 12 if name.startswith("Public") else 16
            assert bit // 8 >= prefix, bit


@pytest.mark.parametrize("name", [n for n in KEY_DECODERS if not n.endswith("from_pem")])
@pytest.mark.parametrize("trailer", TRAILERS, ids=repr)
def test_key_trailing_bytes_refused(name: str, trailer: bytes) -> None:
    decode, valid = KEY_DECODERS[name]
    kind, _ = outcome(decode, valid + trailer, sx.KeyFormatError)
    assert kind == "error"


@pytest.mark.parametrize("name", [n for n in KEY_DECODERS if n.endswith(".decode")])
@pytest.mark.parametrize(
    "variant",
    [
        lambda t: t.replace(b"-", b"+").replace(b"_", b"/"),  # standard alphabet
        lambda t: b" " + t,
        lambda t: t[:10] + b"\n" + t[10:],
        lambda t: t[:10] + b"\t" + t[10:],
        lambda t: t[:10] + b"\x00" + t[10:],
        lambda t: t[:10] + b"=" + t[11:],
        lambda t: t[:10] + "é".encode() + t[12:],
        lambda t: t.rstrip(b"=") + b"===",
        lambda t: t.rstrip(b"=") + b"=" * 4,
        lambda t: t.lower(),
        lambda t: t.upper(),
        lambda t: base64.b64encode(base64.urlsafe_b64decode(t + b"==")),
    ],
    ids=[
        "std-alphabet", "leading-space", "newline", "tab", "nul", "inner-pad", "non-ascii",
        "three-pads", "four-pads", "lower", "upper", "std-b64",
    ],
)
def test_key_text_variants(name: str, variant: Callable[[bytes], bytes]) -> None:
    """Strict base64url (wire.md section 1): other spellings are refused or decode exactly."""
    decode, valid = KEY_DECODERS[name]
    mutated = variant(valid)
    for form in (mutated, mutated.decode("latin-1")):
        kind, value = outcome(decode, form, sx.KeyFormatError)
        if kind == "value":
            assert mutated.rstrip(b"=") == valid.rstrip(b"=") and _same_key(value)


@pytest.mark.parametrize("name", [n for n in KEY_DECODERS if n.endswith("from_der")])
def test_key_every_byte_value_at_every_offset_of_der(name: str) -> None:
    """Every byte of the DER prefix, set to every other value, is refused."""
    decode, valid = KEY_DECODERS[name]
    prefix = 12 if name.startswith("Public") else 16
    for offset in range(prefix):
        for value in range(256):
            if value != valid[offset]:
                kind, _ = outcome(decode, with_byte(valid, offset, value), sx.KeyFormatError)
                assert kind == "error", (offset, value)


@pytest.mark.parametrize("name", list(KEY_DECODERS))
@pytest.mark.parametrize("data", [b"", "", b"=", "====", b"\x00" * 44, "A" * 100_000],
                         ids=["empty-bytes", "empty-str", "pad", "pads", "zeros", "long"])
def test_key_degenerate_inputs(name: str, data: bytes | str) -> None:
    decode, _ = KEY_DECODERS[name]
    if isinstance(data, str) and name.endswith("from_der"):
        data = data.encode()
    kind, _ = outcome(decode, data, sx.KeyFormatError)
    assert kind == "error"


def _pem(der: bytes, label: str = "PUBLIC KEY") -> bytes:
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN {label}-----\n{body}-----END {label}-----\n".encode()


PEM_CASES: dict[str, bytes] = {
    "ed448 OID": _pem(bytes.fromhex("3043300506032b6571033a00") + bytes(57)),
    "unknown OID": _pem(bytes.fromhex("302a300506032b6579032100") + bytes(32)),
    "unsupported curve": _pem(
        bytes.fromhex("3032301006072a8648ce3d020106052b81040006031e0004") + bytes(28)
    ),
    "x25519 key": _pem(bytes.fromhex("302a300506032b656e032100") + bytes(range(32))),
    "ed25519 with NULL parameters": _pem(
        bytes.fromhex("302c300706032b65700500032100") + PUBLIC.raw
    ),
    "private key block": _pem(KEY.der, "PRIVATE KEY"),
    "certificate label": _pem(PUBLIC.der, "CERTIFICATE"),
    "garbage body": b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n",
    "no end line": b"-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(PUBLIC.der),
    "truncated DER": _pem(PUBLIC.der[:-1]),
    "long DER": _pem(PUBLIC.der + b"\x00"),
    "non-ascii": "-----BEGIN PUBLIC KEY-----\né\n-----END PUBLIC KEY-----\n".encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", list(PEM_CASES))
def test_pem_hostile(name: str) -> None:
    """PEM input that is not one Ed25519 SPKI is a KeyFormatError, never the crypto library's."""
    data = PEM_CASES[name]
    for form in (data, data.decode("latin-1")):
        kind, _ = outcome(sx.PublicKey.from_pem, form, sx.KeyFormatError)
        assert kind == "error"


# --------------------------------------------------------------------------
# The agent's messages (wire.md section 4): one decoder, then every backend's opener


MESSAGES = {
    "signed": SIGNED_MESSAGE,
    "unsigned": UNSIGNED_MESSAGE,
    "response": RESPONSE_MESSAGE,
    "rejection": REJECTION_MESSAGE,
}
HEADER = {"signed": SIG_AT + 111, "unsigned": SIG_AT + 1, "response": 1, "rejection": 1}


def _body(value: Any) -> bytes:
    return value.reason if hasattr(value, "reason") else value.payload  # type: ignore[no-any-return]


@pytest.mark.parametrize("which", list(MESSAGES))
def test_message_truncated_at_every_offset(which: str) -> None:
    """A cut inside the head is a FrameError; a cut in the payload is a shorter payload."""
    message = MESSAGES[which]
    for i, cut in truncations(message):
        kind, value = outcome(decode_message, cut, sx.FrameError)
        if i < HEADER[which]:
            assert kind == "error", i
        else:
            assert kind == "value", i
            assert _body(value) == message[HEADER[which] : i]


@pytest.mark.parametrize("which", list(MESSAGES))
def test_message_every_bit_flipped(which: str) -> None:
    """Every flip gives a message or a FrameError; a flip in the payload keeps the head."""
    message = MESSAGES[which]
    original = decode_message(message)
    for bit, mutated in bit_flips(message):
        kind, value = outcome(decode_message, mutated, sx.FrameError)
        if kind == "value" and bit // 8 >= HEADER[which]:
            assert type(value) is type(original)
            if which in ("signed", "unsigned"):
                assert value.reply_queues == original.reply_queues  # type: ignore[attr-defined]
                assert value.signature == original.signature  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("which", "offset", "allowed"),
    [
        ("signed", 0, {ord("A"), ord("P"), ord("J")}),
        ("response", 0, {ord("A"), ord("P"), ord("J")}),
        ("signed", 1, set(range(1, 256))),  # a count: 0 is the only value refused at offset 1
        ("signed", SIG_AT, {ord("0"), ord("1")}),
        ("unsigned", SIG_AT, {ord("0"), ord("1")}),
        ("signed", SIG_AT + 1, {44}),
        ("signed", SIG_AT + 46, {64}),
    ],
    ids=["tag-request", "tag-response", "count", "maybe-signed", "maybe-unsigned", "keylen",
         "siglen"],
)
def test_message_tag_and_length_bytes_take_every_value(
    which: str, offset: int, allowed: set[int]
) -> None:
    """Each tag, count, Maybe byte and length byte: any value but the defined ones names
    its offset."""
    message = MESSAGES[which]
    for value in range(256):
        kind, result = outcome(decode_message, with_byte(message, offset, value), sx.FrameError)
        if value in allowed:
            continue  # another reading of the same bytes, or an error further on
        assert kind == "error", value
        assert f"offset {offset}" in str(result), str(result)


def test_message_signer_key_prefix_every_value() -> None:
    """The signer key must be an Ed25519 SPKI: a byte off its prefix names its own offset."""
    for offset in range(SIG_AT + 2, SIG_AT + 2 + len(SPKI_PREFIX)):
        for value in range(256):
            if value == SIGNED_MESSAGE[offset]:
                continue
            kind, exc = outcome(
                decode_message, with_byte(SIGNED_MESSAGE, offset, value), sx.FrameError
            )
            assert kind == "error" and f"offset {offset}" in str(exc), (offset, value)


@pytest.mark.parametrize("which", list(MESSAGES))
@pytest.mark.parametrize("trailer", TRAILERS, ids=repr)
def test_message_trailing_bytes_are_payload(which: str, trailer: bytes) -> None:
    """The payload is a Tail, the rest of the message: trailing bytes join it."""
    message = MESSAGES[which]
    kind, value = outcome(decode_message, message + trailer, sx.FrameError)
    assert kind == "value" and _body(value) == message[HEADER[which] :] + trailer


@pytest.mark.parametrize("data", [b"", b"A", b"A\x01", b"A\x01\x00\x04", b"A\x01\x00"])
def test_message_short_inputs(data: bytes) -> None:
    kind, _ = outcome(decode_message, data, sx.FrameError)
    assert kind == "error"


def test_message_errors_are_the_same_on_every_backend(backend: _backend.Backend) -> None:
    """Every bit flip of a signed request's head, opened on a backend, fails (or opens)
    exactly as the one decoder says (the signature aside; a changed tag is named against
    what each expects: any message for the decoder, a request for open_request)."""
    for bit, mutated in bit_flips(SIGNED_MESSAGE[: SIG_AT + 111]):
        if bit < 8:
            continue
        message = mutated + PAYLOAD
        try:
            decode_message(message)
        except sx.FrameError as exc:
            with pytest.raises(sx.FrameError) as info:
                backend.open_request(backend.pad(message), AD)
            assert str(info.value) == str(exc)


# --------------------------------------------------------------------------
# Padding (wire.md section 5), on every backend


BLOCK_MESSAGE = b"hello, service"
BLOCK = sx.pad(BLOCK_MESSAGE)


def test_unpad_truncated_at_every_offset(backend: _backend.Backend) -> None:
    """With the exact length required, every cut is refused; without it, a cut in the
    message is refused and a cut in the fill still gives the message."""
    for i, cut in truncations(BLOCK):
        kind, _ = outcome(
            lambda b: backend.unpad(b, length=sx.PADDED_LENGTH), cut, sx.PaddingError
        )
        assert kind == "error", i
        kind, value = outcome(backend.unpad, cut, sx.PaddingError)
        if i < 2 + len(BLOCK_MESSAGE):
            assert kind == "error", i
        else:
            assert value == BLOCK_MESSAGE, i


def test_unpad_length_field_every_value(backend: _backend.Backend) -> None:
    """Every value of the 2-byte length field: at most the bytes that follow, or refused."""
    block = sx.pad(BLOCK_MESSAGE, 300)
    for n in range(65536):
        mutated = n.to_bytes(2, "big") + block[2:]
        kind, value = outcome(backend.unpad, mutated, sx.PaddingError)
        if n <= len(block) - 2:
            assert kind == "value" and value == block[2 : 2 + n], n
        else:
            assert kind == "error" and "offset 0" in str(value), n


def test_unpad_strict_every_fill_byte(backend: _backend.Backend) -> None:
    """Strict mode: any non-'#' fill byte is refused, naming its offset."""
    block = sx.pad(BLOCK_MESSAGE, 200)
    for offset in range(2 + len(BLOCK_MESSAGE), len(block)):
        for value in (0x00, 0x22, 0x24, 0xA3, 0xFF):
            mutated = with_byte(block, offset, value)
            kind, exc = outcome(lambda b: backend.unpad(b, strict=True), mutated, sx.PaddingError)
            assert kind == "error" and f"offset {offset}" in str(exc), (offset, value)
            assert backend.unpad(mutated) == BLOCK_MESSAGE


@pytest.mark.parametrize("trailer", TRAILERS, ids=repr)
def test_unpad_trailing_bytes(backend: _backend.Backend, trailer: bytes) -> None:
    kind, _ = outcome(
        lambda b: backend.unpad(b, length=sx.PADDED_LENGTH), BLOCK + trailer, sx.PaddingError
    )
    assert kind == "error"
    assert backend.unpad(BLOCK + trailer) == BLOCK_MESSAGE
    kind, _ = outcome(lambda b: backend.unpad(b, strict=True), BLOCK + trailer, sx.PaddingError)
    assert kind == ("value" if trailer in (b"#",) else "error")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff", b"\xff\xff", b"\x00\x01"])
def test_unpad_short_inputs(backend: _backend.Backend, data: bytes) -> None:
    kind, _ = outcome(backend.unpad, data, sx.PaddingError)
    assert kind == "error"


def test_unpad_many_truncated_at_every_offset(backend: _backend.Backend) -> None:
    """A buffer cut anywhere but a block boundary is refused; at a boundary, fewer blocks."""
    length = 24
    messages = [b"", b"a", b"b" * 22, b"cd"]
    buffer = backend.pad_many(messages, length)
    for i, cut in truncations(buffer):
        kind, value = outcome(lambda b: backend.unpad_many(b, length), cut, sx.PaddingError)
        if i % length:
            assert kind == "error", i
        else:
            assert value == messages[: i // length], i


def test_unpad_many_names_the_bad_block(backend: _backend.Backend) -> None:
    length = 24
    buffer = bytearray(backend.pad_many([b"x"] * 5, length))
    buffer[3 * length : 3 * length + 2] = b"\xff\xff"
    kind, exc = outcome(lambda b: backend.unpad_many(b, length), bytes(buffer), sx.PaddingError)
    assert kind == "error" and "block 3" in str(exc)


@pytest.mark.parametrize("length", [-1, 0, 1])
def test_unpad_many_degenerate_lengths(backend: _backend.Backend, length: int) -> None:
    kind, _ = outcome(lambda b: backend.unpad_many(b, length), b"\x00\x00", sx.PaddingError)
    assert kind == "error"


# --------------------------------------------------------------------------
# Opening blocks: unpad, decode, verify, on every backend

OPEN_ERRORS = (sx.PaddingError, sx.FrameError, sx.BadSignature)


def _open_outcome(backend: _backend.Backend, block: bytes, strict: bool = False) -> tuple[str, Any]:
    try:
        return ("value", backend.open_request(block, AD, strict=strict))
    except OPEN_ERRORS as exc:
        assert "\n" not in str(exc) and len(str(exc)) <= MAX_MESSAGE
        return ("error", exc)


def test_open_request_truncated_at_every_offset(backend: _backend.Backend) -> None:
    for i, cut in truncations(SIGNED_BLOCK):
        kind, exc = _open_outcome(backend, cut)
        assert kind == "error" and isinstance(exc, sx.PaddingError), i


def test_open_request_every_header_bit_flipped(backend: _backend.Backend) -> None:
    """No flip of the length field, message or payload opens as signed by the key with
    another payload; the only value that can come out with a changed payload is unsigned."""
    end = 2 + len(SIGNED_MESSAGE)
    for bit, mutated in bit_flips(SIGNED_BLOCK, end + 4):
        for strict in (False, True):
            kind, value = _open_outcome(backend, mutated, strict)
            if kind == "value":
                if value.signer is not None:
                    # A flip inside the reply queue may leave another valid queue: the
                    # queue is not signed (V8 signServiceReq), the payload still is.
                    assert value.signer == PUBLIC and value.payload == PAYLOAD, bit
                else:
                    # The Maybe tag '1' flipped to '0': an unsigned request, claiming nothing.
                    assert bit // 8 == 2 + SIG_AT, bit


def test_open_request_fill_bytes(backend: _backend.Backend) -> None:
    """A changed fill byte leaves the request intact, unless strict fill is asked for."""
    start = 2 + len(SIGNED_MESSAGE)
    for offset in range(start, len(SIGNED_BLOCK), 97):
        mutated = with_byte(SIGNED_BLOCK, offset, 0x00)
        kind, value = _open_outcome(backend, mutated)
        assert kind == "value" and value.payload == PAYLOAD and value.signer == PUBLIC
        kind, exc = _open_outcome(backend, mutated, strict=True)
        assert kind == "error" and isinstance(exc, sx.PaddingError)


@pytest.mark.parametrize("trailer", TRAILERS, ids=repr)
def test_open_request_trailing_bytes(backend: _backend.Backend, trailer: bytes) -> None:
    kind, exc = _open_outcome(backend, SIGNED_BLOCK + trailer)
    assert kind == "error" and isinstance(exc, sx.PaddingError)


def test_open_request_of_a_response_and_back(backend: _backend.Backend) -> None:
    response = sx.seal_response(b"{}")
    kind, exc = _open_outcome(backend, response)
    assert kind == "error" and isinstance(exc, sx.FrameError)
    with pytest.raises(sx.FrameError):
        backend.open_response(SIGNED_BLOCK)


def test_open_response_every_header_bit_flipped(backend: _backend.Backend) -> None:
    block = sx.seal_response(b'{"response":true}')
    for bit, mutated in bit_flips(block, 24):
        try:
            backend.open_response(mutated)
        except (sx.PaddingError, sx.FrameError) as exc:
            assert "\n" not in str(exc), bit


def test_open_request_empty_and_short(backend: _backend.Backend) -> None:
    for data in (b"", b"\x00", b"\x00\x00", sx.pad(b"")):
        kind, _ = _open_outcome(backend, data)
        assert kind == "error"


def test_open_request_empty_ad_is_own_error(backend: _backend.Backend) -> None:
    with pytest.raises(sx.SimplexRpcError):
        backend.open_request(SIGNED_BLOCK, b"")


# --------------------------------------------------------------------------
# Wrong Python argument types and unusual buffers


BYTE_DECODERS: dict[str, Callable[[_backend.Backend], Decoder]] = {
    "decode_message": lambda b: decode_message,
    "unpad": lambda b: b.unpad,
    "unpad_many": lambda b: b.unpad_many,
    "open_request": lambda b: lambda x: b.open_request(x, AD),
    "open_response": lambda b: b.open_response,
}
TEXT_DECODERS: dict[str, Decoder] = {
    "PublicKey.decode": sx.PublicKey.decode,
    "SigningKey.decode": sx.SigningKey.decode,
    "PublicKey.from_der": sx.PublicKey.from_der,
    "SigningKey.from_der": sx.SigningKey.from_der,
    "PublicKey.from_pem": sx.PublicKey.from_pem,
    "Request.parse": sx.Request.parse,
    "Response.parse": sx.Response.parse,
}


def _type_outcome(decode: Decoder, data: object) -> type[BaseException] | None:
    """None for a value; the class of TypeError or of the library's error; anything else fails."""
    try:
        decode(data)
    except (TypeError, sx.SimplexRpcError) as exc:
        return type(exc)
    return None


@pytest.mark.parametrize("name", list(BYTE_DECODERS))
def test_byte_decoders_wrong_types(backend: _backend.Backend, name: str) -> None:
    """A wrong argument type raises TypeError (or the decoder's own error), nothing else."""
    decode = BYTE_DECODERS[name](backend)
    for data in [*WRONG_TYPES, "text", "\x00\x01R0"]:
        assert _type_outcome(decode, data) is not None, data


def _result_of(decode: Decoder, data: object) -> object:
    """The value, or the library error's class and message (for comparing two calls)."""
    try:
        return decode(data)
    except sx.SimplexRpcError as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("name", list(BYTE_DECODERS))
def test_byte_decoders_accept_any_buffer(backend: _backend.Backend, name: str) -> None:
    """bytes, bytearray and memoryview give the same result; odd views raise TypeError at worst."""
    decode = BYTE_DECODERS[name](backend)
    data = {"decode_message": SIGNED_MESSAGE, "unpad": BLOCK, "unpad_many": BLOCK,
            "open_request": SIGNED_BLOCK, "open_response": sx.seal_response(b"{}")}[name]
    expected = decode(data)
    assert decode(bytearray(data)) == expected
    assert decode(memoryview(data)) == expected
    assert decode(memoryview(b"xx" + data)[2:]) == expected
    for odd in (
        memoryview(data + data)[::2],  # not contiguous
        memoryview(array.array("H", data[: len(data) // 2 * 2])),  # items of 2 bytes
        memoryview(data).toreadonly(),
    ):
        # Either the decoder reads the view's bytes, exactly as if given them, or it
        # refuses the view with TypeError; never a wrong reading or another error.
        try:
            result = _result_of(decode, odd)
        except TypeError:
            continue
        assert result == _result_of(decode, odd.tobytes())


@pytest.mark.parametrize("name", list(TEXT_DECODERS))
def test_text_decoders_wrong_types(name: str) -> None:
    decode = TEXT_DECODERS[name]
    for data in WRONG_TYPES:
        assert _type_outcome(decode, data) is not None, data

"""The request's head read in C (``srpc_request_head``, ``srpc_open_request``) against the codec.

Rules pinned (wire.md section 4; V8 = simplexmq commit 22815214468d4eb79a5e98df7a1ba2daa5d07ad7,
``src/Simplex/Messaging/Agent/Protocol.hs``): a request is ``'A'`` ‖ ``NonEmpty
SMPQueueInfo`` ‖ ``Maybe RequestSignature`` ‖ payload (``instance Encoding AgentMessage``),
each queue encoded as ``instance Encoding SMPQueueInfo`` writes it for its client version.
C reads the usual head only and must accept nothing the strict codec
(``agent_block.parse_request_head``) refuses, to the very values the codec builds; on any
other head it defers (``SRPC_HEAD_DEFER``) and the codec reads it, so that ``open_request``
of both backends gives the same bytes, or the same error class, message and offset. The
hostile inputs: truncation at every offset of a head, every queue count byte (0, 1 to
255), every value of the ``Maybe`` byte, every value of each length and prefix byte of a
head, hosts and ports at the edges of what C reads itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from _hypothesis import examples
from _queues import X25519_SPKI_PREFIX, queue
from simplex_rpc._wire import backend as _backend
from simplex_rpc._wire.agent_block import parse_request_head
from simplex_rpc.agent import AgentServiceRequest, RequestSignature, SMPQueueInfo, SMPServer

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

PURE = sx.backends["python"]
AD = bytes(range(112))
KEY = sx.SigningKey.from_seed(bytes(range(1, 33)))
N = sx.PADDED_LENGTH


@pytest.fixture
def c(c_backend: _backend.Backend) -> Any:
    """The compiled module: ``c.ffi`` and ``c.lib``."""
    from simplex_rpc._wire import _simplex_rpc_c

    return _simplex_rpc_c


def outcome(backend: _backend.Backend, block: bytes, ad: bytes = AD) -> tuple[Any, ...]:
    """("ok", payload, signer, queues and their encodings) or ("error", class, message)."""
    try:
        opened = backend.open_request(block, ad)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    encodings = [q.encode() for q in opened.reply_queues]
    return ("ok", opened.payload, opened.signer, opened.reply_queues, encodings)


def same_open(c_backend: _backend.Backend, message: bytes) -> tuple[Any, ...]:
    """``message`` padded and opened by both backends: identical outcomes, returned."""
    block = PURE.pad(message[: N - 2])
    want = outcome(PURE, block)
    got = outcome(c_backend, block)
    assert got == want, f"C gave {got!r:.400}, pure gave {want!r:.400}"
    if want[0] == "error":
        assert issubclass(want[1], sx.SimplexRpcError), want
    return want


def c_head(c: Any, message: bytes) -> tuple[int, list[int]]:
    """``srpc_request_head`` of ``message`` (offsets from the message's start)."""
    res = c.ffi.new("size_t[]", c.lib.SRPC_HEAD_RESULT_LENGTH)
    status = c.lib.srpc_request_head(message, len(message), 0, res, len(res))
    return status, list(res)


def signed_message(queues: tuple[SMPQueueInfo, ...], payload: bytes = b'{"a":1}') -> bytes:
    signature = RequestSignature(KEY.public_key, KEY.sign_request(AD, payload))
    return AgentServiceRequest(queues, signature, payload).encode()


def unsigned_message(queues: tuple[SMPQueueInfo, ...], payload: bytes = b'{"a":1}') -> bytes:
    return AgentServiceRequest(queues, None, payload).encode()


#: Heads C reads itself: plain domain hosts, client versions 2 to 4 and beyond, each mode
#: smpEncode writes, a port, empty and long ids, up to SRPC_HEAD_QUEUES queues.
C_READS: list[tuple[SMPQueueInfo, ...]] = [
    (queue(),),
    (queue(("smp.example.com", "smp2.example.com", "x-1.b2.c3")),),
    (queue(port="5223"),),
    (queue(port="65535", mode="C"),),
    (queue(port="1", mode=None),),
    (queue(version=3, mode="M"),),  # 'T' (sndSecure) at sndAuthKeySMPClientVersion
    (queue(version=3, mode=None),),
    (queue(version=2, mode=None),),
    (queue(version=0xFFFF, mode="C"),),
    (queue(key_hash=b"", sender_id=b""),),
    (queue(key_hash=bytes(255), sender_id=bytes(range(255))),),
    (queue(("-",)),),
    (queue(("a" * 255,)),),
    (queue(), queue(("other.example.org",), "443", mode="C")),
    tuple(queue((f"smp{i}.example.com",)) for i in range(4)),
]

#: Valid heads C leaves to the codec (it words nothing for them, only defers).
CODEC_READS: list[tuple[SMPQueueInfo, ...]] = [
    (queue(("smp.example.com", "abcdefghijklmnop.onion", "192.0.2.7"), "5223", mode="C"),),
    (queue(("192.0.2.7",)),),
    (queue(("::1",)),),
    (queue(("smp4.simplex.im",), version=1, mode=None),),  # legacy, updateSMPServerHosts
    tuple(queue((f"smp{i}.example.com",)) for i in range(5)),  # more than SRPC_HEAD_QUEUES
]


# -- what C reads, it reads as the codec does ------------------------------------------


@pytest.mark.parametrize("queues", C_READS, ids=lambda q: f"{len(q)}q-v{q[0].client_version}")
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_rule_c_reads_the_usual_head_to_the_codecs_values(
    c: Any, c_backend: _backend.Backend, queues: tuple[SMPQueueInfo, ...], signed: bool
) -> None:
    """C takes these heads itself (no deferral) and reports the codec's offsets and values."""
    message = signed_message(queues) if signed else unsigned_message(queues)
    status, res = c_head(c, message)
    assert status == c.lib.SRPC_OK
    pure_queues, signature, payload_at = parse_request_head(message)
    assert res[0] == len(message)
    assert res[1] == payload_at
    assert res[3] == len(queues)
    if signed:
        assert signature is not None
        assert message[res[2] : res[2] + 32] == signature.key.raw
    else:
        assert signature is None and res[2] == 0
    for i, want in enumerate(pure_queues):
        start, sender_at, dh_at, end, version, mode = res[4 + 6 * i : 10 + 6 * i]
        assert message[start:end] == want.encode()
        assert message[sender_at + 1 : dh_at] == want.sender_id
        assert message[dh_at + 1 : dh_at + 45] == want.dh_public_key
        assert version == want.client_version
        assert mode == (ord(want.queue_mode) if want.queue_mode else 0)
    same_open(c_backend, message)


@pytest.mark.parametrize("queues", CODEC_READS, ids=lambda q: f"{len(q)}q-{q[0].server.hosts[0]}")
def test_rule_c_defers_other_valid_heads_and_both_backends_agree(
    c: Any, c_backend: _backend.Backend, queues: tuple[SMPQueueInfo, ...]
) -> None:
    for message in (unsigned_message(queues), signed_message(queues)):
        status, res = c_head(c, message)
        assert status == c.lib.SRPC_HEAD_DEFER
        assert res[0] == len(message)
        assert same_open(c_backend, message)[0] == "ok"


def test_rule_open_request_takes_cs_reading_for_the_usual_head(
    c_backend: _backend.Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C backend's open_request builds the queue from C's offsets, not the codec's reader:
    with the codec's reader broken, the usual head still opens (to the same value)."""
    from simplex_rpc._wire import cbackend

    block = PURE.seal_request(b"{}", AD, KEY, reply_queue=queue())
    want = PURE.open_request(block, AD)

    def broken(*_: Any, **__: Any) -> Any:
        raise AssertionError("the codec's reader was called")

    monkeypatch.setattr(cbackend, "parse_request_head", broken)
    assert c_backend.open_request(block, AD) == want
    with pytest.raises(AssertionError, match="codec's reader"):  # and a deferred head uses it
        c_backend.open_request(PURE.seal_request(b"{}", AD, reply_queue=CODEC_READS[0][0]), AD)


# -- hostile heads: identical outcomes ---------------------------------------------------


def _heads() -> Iterator[tuple[str, bytes]]:
    for i, queues in enumerate(C_READS + CODEC_READS):
        yield f"unsigned-{i}", unsigned_message(queues, b"")
        yield f"signed-{i}", signed_message(queues, b"")


HEADS = dict(_heads())


@pytest.mark.parametrize("name", list(HEADS))
def test_rule_truncation_at_every_offset_of_a_head(c_backend: _backend.Backend, name: str) -> None:
    """Every prefix of a head (the payload is empty, so the head is the whole message)."""
    message = HEADS[name]
    outcomes = [same_open(c_backend, message[:k])[0] for k in range(len(message) + 1)]
    assert outcomes[-1] == "ok"
    assert "ok" not in outcomes[:-1]  # no prefix of a head is a head


@pytest.mark.parametrize("count", range(256))
def test_rule_every_queue_count_byte(c_backend: _backend.Backend, count: int) -> None:
    """V8 ``NonEmpty SMPQueueInfo``: a count of 0 is refused; 1 to 255 are read (and run out)."""
    base = unsigned_message(tuple(queue((f"smp{i}.example.com",)) for i in range(4)))
    result = same_open(c_backend, base[:1] + bytes([count]) + base[2:])
    assert (result[0] == "ok") == (count == 4)


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_rule_every_maybe_byte(c_backend: _backend.Backend, signed: bool) -> None:
    """Encoding.hs ``Maybe``: '0' or '1'; every other byte is the codec's error, from both."""
    message = signed_message((queue(),)) if signed else unsigned_message((queue(),))
    at = 2 + len(queue().encode())
    errors = 0
    for value in range(256):
        result = same_open(c_backend, message[:at] + bytes([value]) + message[at + 1 :])
        errors += result[0] == "error"
    assert errors >= 254


def _hot_offsets(message: bytes, queue_: SMPQueueInfo) -> list[int]:
    """The count, version, host count, length, port, key hash, sender id and DH key bytes of
    the first queue, its mode byte, and the signature field's tag and length bytes."""
    q = queue_.encode()
    host = len(queue_.server.hosts[0])
    sender = 2 + 1 + 1 + host + 1 + len(queue_.server.port) + 1 + len(queue_.server.key_hash)
    dh = sender + 1 + len(queue_.sender_id)
    sig = 2 + len(q)
    port_at = 2 + 2 + 1 + 1 + host
    key_hash_at = port_at + 1 + len(queue_.server.port)
    offsets = [1, 2, 3, 4, 5, 6, port_at, key_hash_at, 2 + sender, 2 + dh]
    offsets += [2 + dh + 1 + i for i in range(13)]  # the DH key's SPKI prefix, and a key byte
    offsets += [sig - 1, sig, sig + 1, sig + 2, sig + 13, sig + 14, sig + 46, sig + 47]
    return [o for o in offsets if o < len(message)]


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
@pytest.mark.parametrize("port", ["", "5223"])
def test_rule_every_value_of_each_head_byte(
    c_backend: _backend.Backend, signed: bool, port: str
) -> None:
    """Each length, count, prefix and tag byte of the usual head set to every value."""
    queue_ = queue(port=port)
    message = signed_message((queue_,)) if signed else unsigned_message((queue_,))
    for at in _hot_offsets(message, queue_):
        for value in range(256):
            same_open(c_backend, message[:at] + bytes([value]) + message[at + 1 :])


HOSTS = [
    "smp.example.com", "SMP.example.com", "123", "1.2.3.4", "1.2.3.400", "01.2.3.4", "12.example",
    "a.1", "a..b", "a.", ".a", "", "-", "a-", "a_b", "a b", "a:b", "a/b", "a#b", "a,b", "a;b",
    "x.onion", "abc.onion", "a.onionx", "a.onion.b", "onion", "a.Onion", "::", "::1", "[::1]",
    "fe80::1%eth0", "\xe9t\xe9.example", "a\x00b", "a\nb", "a" * 255,
]


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("version", [1, 2, 4])
def test_rule_hosts_at_the_edges_of_what_c_reads(
    c_backend: _backend.Backend, host: str, version: int
) -> None:
    """A host of each kind, written as raw bytes into the usual head, opened alike."""
    template = queue(("h" * max(1, len(host)),), version=version, mode=None if version < 3 else "M")
    message = unsigned_message((template,))
    if host:
        message = message.replace(b"h" * len(host), host.encode("latin-1"), 1)
    else:  # the encoder refuses an empty host: its length byte set to 0 by hand
        message = message.replace(b"\x01h", b"\x00", 1)
    same_open(c_backend, message)


@pytest.mark.parametrize(
    "port", ["", "0", "00", "01", "1", "443", "65535", "65536", "99999", "123456", "12a", " 1",
             "\xb2", "-1", "+1"]
)
def test_rule_ports_at_the_edges_of_what_c_reads(c_backend: _backend.Backend, port: str) -> None:
    """Protocol.hs ``ProtocolServer``'s port ByteString, written by hand (the encoder takes
    only canonical ports): "" or a decimal of 1 to 65535 without a leading zero (ours)."""
    host = b"smp.example.com"
    raw = port.encode("latin-1")
    field = host + bytes([len(raw)]) + raw
    message = unsigned_message((queue(),)).replace(host + b"\x00", field, 1)
    result = same_open(c_backend, message)
    assert (result[0] == "ok") == (port in ("", "1", "443", "65535"))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 0x0100, 0xFFFF])
@pytest.mark.parametrize("mode", [None, *b"MCTFmX0"])
def test_rule_queue_mode_byte_for_each_version(
    c_backend: _backend.Backend, version: int, mode: int | None
) -> None:
    """``queueModeP`` after the DH key: only the byte smpEncode writes for the version is
    read; 'M', 'C', 'T' or 'F' otherwise is refused, another byte starts the Maybe tag."""
    base = queue(version=version, mode=None)
    q = base.encode()
    tail = b"" if mode is None else bytes([mode])
    for rest in (b"0{}", b"1" + RequestSignature(KEY.public_key, bytes(64)).encode()):
        same_open(c_backend, b"A\x01" + q + tail + rest)


@pytest.mark.parametrize("version", [0, 1])
def test_rule_versions_0_and_1_are_the_legacy_encoding(
    c: Any, c_backend: _backend.Backend, version: int
) -> None:
    """V8 ``smpP`` of SMPQueueInfo: up to initialSMPClientVersion the server is the legacy one
    (``legacyServerP``: one host, no count). Bytes that read as a valid modern queue under
    version 0 or 1 are not that queue: C leaves them to the codec, which reads them as the
    legacy server (here the host's length byte becomes the host, then the port runs out)."""
    dh = X25519_SPKI_PREFIX + bytes(32)
    modern = b"\x01\x01a" + b"\x00" + b"\x00" + b"\x00" + bytes([44]) + dh
    message = b"A\x01" + bytes([0, version]) + modern + b"0{}"
    assert c_head(c, message)[0] == c.lib.SRPC_HEAD_DEFER
    assert same_open(c_backend, message)[0] == "error"
    assert c_head(c, b"A\x01\x00\x02" + modern + b"0{}")[0] == c.lib.SRPC_OK  # as version 2


SETTINGS = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(
    data=st.data(),
    hosts=st.lists(st.text("abz09-.", min_size=1, max_size=12), min_size=1, max_size=3),
    port=st.sampled_from(["", "1", "5223", "65535"]),
    version=st.sampled_from([2, 3, 4, 7]),
    count=st.integers(1, 5),
    signed=st.booleans(),
)
def test_rule_random_heads_and_their_mutations(
    c: Any,
    c_backend: _backend.Backend,
    data: st.DataObject,
    hosts: list[str],
    port: str,
    version: int,
    count: int,
    signed: bool,
) -> None:
    """Random queues (hosts of domain characters, valid or not), then byte mutations."""
    mode = None if version == 2 else "M"
    dh = X25519_SPKI_PREFIX + bytes(32)
    try:
        server = SMPServer(tuple(hosts), port, bytes(data.draw(st.integers(0, 40))))
    except sx.FrameError:  # not a host the encoder takes: write its bytes by hand
        server = SMPServer(("h",), port, b"")
        raw = b"".join(bytes([len(h)]) + h.encode() for h in hosts)
        head = bytes([len(hosts)]) + raw
        q = SMPQueueInfo(version, server, b"id", dh, mode).encode()
        encoded = q[:2] + head + q[2 + 3 :]
    else:
        encoded = SMPQueueInfo(version, server, b"id", dh, mode).encode()
    if data.draw(st.booleans()):  # the non-legacy layout under a legacy version (0 or 1)
        encoded = bytes([0, data.draw(st.sampled_from([0, 1]))]) + encoded[2:]
    queues = b"".join([encoded] * count)
    tail = b"1" + RequestSignature(KEY.public_key, bytes(64)).encode() if signed else b"0"
    message = bytearray(b"A" + bytes([count]) + queues + tail + b"payload")
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(message) - 1))
        message[at] = data.draw(st.integers(0, 255))
    message = message[: data.draw(st.integers(0, len(message)))]
    same_open(c_backend, bytes(message))
    status, res = c_head(c, bytes(message))
    if status == c.lib.SRPC_OK:  # C never accepts what the codec refuses, nor reads it apart
        queues, _, payload_at = parse_request_head(bytes(message))
        assert (res[1], res[3]) == (payload_at, len(queues))


# -- the C functions' own contract -------------------------------------------------------


def test_rule_request_head_arguments(c: Any) -> None:
    """A NULL result, a short result array or an offset base that would overflow is
    SRPC_E_ARGUMENT, never a write."""
    message = unsigned_message((queue(),))
    res = c.ffi.new("size_t[]", c.lib.SRPC_HEAD_RESULT_LENGTH)
    lib, null = c.lib, c.ffi.NULL
    assert lib.srpc_request_head(message, len(message), 0, null, 28) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_request_head(message, len(message), 0, res, 27) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_request_head(null, 5, 0, res, 28) == lib.SRPC_E_ARGUMENT
    huge = int(c.ffi.cast("size_t", -1))
    assert lib.srpc_request_head(message, len(message), huge, res, 28) == lib.SRPC_E_ARGUMENT
    assert lib.srpc_request_head(null, 0, 0, res, 28) == lib.SRPC_HEAD_DEFER  # empty: no 'A'
    assert lib.srpc_request_head(message, len(message), 2, res, 28) == lib.SRPC_OK
    assert res[4] == 2 + 2  # offsets count from the base


def test_rule_open_request_layout_and_arguments(c: Any) -> None:
    """srpc_open_request: unpad's status for a bad block, sig || tag || payload for a signed
    one (as srpc_signed_message lays it out), and SRPC_E_ARGUMENT for a short sm."""
    lib, ffi = c.lib, c.ffi
    payload = b'{"x":2}'
    block = PURE.seal_request(payload, AD, KEY, reply_queue=queue())
    tag = sx.session_tag(AD)
    res = ffi.new("size_t[]", lib.SRPC_HEAD_RESULT_LENGTH)
    sm = ffi.new("unsigned char[]", 96 + len(payload))
    err = ffi.new("srpc_error *")
    status = lib.srpc_open_request(block, len(block), 1, tag, sm, len(sm), res, len(res), err)
    assert status == lib.SRPC_OK
    at = res[1]
    assert ffi.buffer(sm)[:] == block[at - 64 : at] + tag + payload
    short = ffi.new("unsigned char[]", 95 + len(payload))
    status = lib.srpc_open_request(block, len(block), 1, tag, short, len(short), res, 28, err)
    assert status == lib.SRPC_E_ARGUMENT
    status = lib.srpc_open_request(block[:-1], N - 1, 0, tag, sm, len(sm), res, 28, err)
    assert status == lib.SRPC_E_UNPAD_BLOCK_SIZE == err.status
    assert (err.value, err.bound) == (N - 1, N)
    assert lib.srpc_open_request(block, N, 0, ffi.NULL, sm, len(sm), res, 28, err) < 0
    assert lib.srpc_open_request(block, N, 0, tag, ffi.NULL, 0, res, 28, ffi.NULL) == lib.SRPC_OK


def test_rule_threads_open_distinct_blocks_alike(c_backend: _backend.Backend) -> None:
    """open_request's buffers are per thread: 4 workers opening 96 distinct blocks (each its
    own queue, signer state and payload) give exactly the pure backend's results."""
    blocks = [
        PURE.seal_request(
            b'{"n":%d}' % i * (i % 7 + 1),
            AD,
            KEY if i % 2 else None,
            reply_queue=queue((f"smp{i % 5}.example.com",), str(1000 + i), sender_id=bytes([i])),
        )
        for i in range(96)
    ]
    last = 2 + int.from_bytes(blocks[41][:2], "big") - 1  # the signed payload's last byte
    blocks[41] = blocks[41][:last] + bytes([blocks[41][last] ^ 1]) + blocks[41][last + 1 :]
    want = PURE.open_requests(blocks, AD, workers=1)
    got = c_backend.open_requests(blocks, AD, workers=4)
    assert got == want
    assert [f.index for f in got.failures] == [41]

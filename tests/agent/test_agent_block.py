"""The agent's own values and their strict codecs (wire.md section 4, ``simplex_rpc.agent``).

Each rule names the simplexmq code it pins: V8 Agent/Protocol.hs (commit 22815214)
for ``SMPQueueInfo`` and ``AgentMessage``; Protocol.hs, Transport/Client.hs,
Encoding.hs and Agent/QueryString.hs on master for the primitives. The
``agent_messages`` vectors are decoded and re-encoded here, and every negative
case is fed to both backends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import simplex_rpc as sx
from _queues import QUEUE, THREE_HOSTS, queue
from simplex_rpc import FrameError, SigningKey
from simplex_rpc._wire import backend as _backend
from simplex_rpc._wire.agent_block import check_host
from simplex_rpc.agent import (
    AgentRejection,
    AgentServiceRequest,
    AgentServiceResponse,
    RequestSignature,
    SMPQueueInfo,
    SMPServer,
    decode_message,
    max_request_payload,
)
from simplex_rpc.vectors._agent_messages import _padded, _queue_of

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "vectors/agent_messages.json").read_text()
)["cases"]
DH = QUEUE.dh_public_key


def _cases(kind: str) -> list[dict[str, Any]]:
    return [c for c in VECTORS if c["type"] == kind]


# -- SMPQueueInfo: binary ---------------------------------------------------------


def test_rule_queue_encoding_by_client_version() -> None:
    """instance Encoding SMPQueueInfo: from version 4 the mode byte ('M'/'C' or nothing);
    at 3, 'T' for messaging only; at 2 nothing; at 1 the legacy server (first host only)."""
    body = QUEUE.encode()[2:-1]  # server, sender id, key
    assert queue(version=4, mode="M").encode() == b"\x00\x04" + body + b"M"
    assert queue(version=4, mode="C").encode() == b"\x00\x04" + body + b"C"
    assert queue(version=4, mode=None).encode() == b"\x00\x04" + body
    assert queue(version=3, mode="M").encode() == b"\x00\x03" + body + b"T"
    assert queue(version=3, mode="C").encode() == b"\x00\x03" + body
    assert queue(version=2, mode="M").encode() == b"\x00\x02" + body
    legacy = queue(("smp.example.com", "b.example.com"), version=1).encode()
    assert legacy == b"\x00\x01" + body[1:]  # no host count: one ByteString host


def test_rule_server_encoding_is_hosts_port_key_hash() -> None:
    """Protocol.hs: smpEncode (host, port, keyHash): a NonEmpty of ByteString hosts (their
    strEncode), the port as a ByteString ('' for the default), the key hash."""
    server = SMPServer(("a.example", "192.0.2.1"), "5223", b"\x01\x02")
    assert server.encode() == b"\x02\x09a.example\x09192.0.2.1\x045223\x02\x01\x02"


def test_rule_legacy_queue_on_a_preset_host_gains_its_onion_host() -> None:
    """Agent/Protocol.hs updateSMPServerHosts: a version 1 queue of a preset server reads
    with that server's onion host added."""
    legacy = queue(("smp8.simplex.im",), version=1, mode=None)
    decoded = SMPQueueInfo.decode(legacy.encode())
    assert decoded.server.hosts == (
        "smp8.simplex.im",
        "beccx4yfxxbvyhqypaavemqurytl6hozr47wfc7uuecacjqdvwpw2xid.onion",
    )
    assert decoded.encode() == legacy.encode()


@pytest.mark.parametrize(
    ("data", "offset", "what"),
    [
        (b"", 0, "ends"),
        (b"\x00\x04\x00", 2, "host count 0"),
        (QUEUE.encode() + b"x", len(QUEUE.encode()), "after"),
        (QUEUE.encode()[:-1] + b"T", len(QUEUE.encode()) - 1, "mode byte 'T'"),
        (queue(version=2, mode=None).encode() + b"M", len(QUEUE.encode()) - 1, "mode byte 'M'"),
    ],
)
def test_rule_queue_decoding_is_strict(data: bytes, offset: int, what: str) -> None:
    """parseAll smpP, and only the bytes smpEncode writes (ours): the error names the offset."""
    with pytest.raises(FrameError, match=rf"{what}.*offset {offset}\b|offset {offset}\b.*{what}"):
        SMPQueueInfo.decode(data)


def test_queue_values_are_checked_on_construction() -> None:
    """A queue or server that simplexmq could not carry is refused when it is built."""
    for bad in (
        lambda: SMPServer((), "", b""),
        lambda: SMPServer(("FE80::1",), "", b""),  # not canonical: prints as fe80::1
        lambda: SMPServer(("a.b.onion",), "", b""),
        lambda: SMPServer(("h",), "0", b""),
        lambda: SMPServer(("h",), "x", b""),
        lambda: queue(mode="X"),
        lambda: SMPQueueInfo(4, QUEUE.server, b"", DH[:-1], None),
        lambda: SMPQueueInfo(4, QUEUE.server, b"", bytes.fromhex("302a300506032b6570032100")
                             + bytes(32), None),
        lambda: SMPQueueInfo(65536, QUEUE.server, b"", DH, None),
    ):
        with pytest.raises(FrameError):
            bad()


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("smp.example.com", True),
        ("192.0.2.1", True),
        ("2001:db8::1", True),
        # iproute shows an IPv4-mapped address with dots, where ipv6StrP stops: unreadable
        ("::ffff:192.0.2.1", False),
        ("abcdefghijklmnop.onion", True),
        ("x.y.onion", False),  # a domain may not end in .onion; an onion name has one label
        ("2001:DB8::1", False),  # not canonical
        ("2001:db8:0:0:0:0:0:1", False),  # not canonical
        ("01.2.3.4", False),
        ("1.2.3.4.5", False),  # IPv4 wins the choice, then text is left over
        ("a:b", False),
        ("", False),
    ],
)
def test_rule_transport_host_text(text: str, ok: bool) -> None:
    """Transport/Client.hs TransportHost strP: IPv4, IPv6, onion, domain, in that order; a
    host is kept in the form strEncode prints (IPv6 as iproute's show: RFC 5952)."""
    if ok:
        assert check_host(text) == text
    else:
        with pytest.raises(ValueError):
            check_host(text)


# -- the queue URI ------------------------------------------------------------------


def test_rule_queue_uri_form() -> None:
    """StrEncoding SMPQueueUri (versionToRange v): smp://keyHash@hosts[:port]/senderId#/?v=..&dh=..
    with the query escaped as http-types renderSimpleQuery ('=' of base64 as %3D)."""
    uri = THREE_HOSTS.uri()
    assert uri.startswith("smp://AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=@"
                          "smp.example.com,abcdefghijklmnop.onion,192.0.2.7:5223/"
                          "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX#/?v=4&dh=MCowBQYDK2VuAyEA")
    assert uri.endswith("%3D&q=c")
    assert SMPQueueInfo.from_uri(uri) == THREE_HOSTS


def test_rule_queue_uri_below_version_4_adds_k_s_and_version_1_srv() -> None:
    """strEncode: k=s for a messaging queue below version 4; below version 2 the first host
    only, the others in srv."""
    assert queue(version=3).uri().endswith("&q=m&k=s")
    v1 = queue(("smp.example.com", "b.example.com"), version=1, mode=None).uri()
    assert "@smp.example.com/" in v1 and v1.endswith("&srv=b.example.com")
    assert SMPQueueInfo.from_uri(v1).server.hosts == ("smp.example.com", "b.example.com")


def test_rule_queue_uri_reads_as_simplexmq_reads() -> None:
    """strP: a version range gives its maximum; k=s alone means messaging; an IPv6 host may
    be in brackets; hex case is free; the old form with the key in the fragment reads too."""
    base = QUEUE.uri()
    assert SMPQueueInfo.from_uri(base.replace("v=4", "v=1-4")) == QUEUE
    assert SMPQueueInfo.from_uri(base.replace("&q=m", "&k=s")).queue_mode == "M"
    assert SMPQueueInfo.from_uri(base.replace("&q=m", "")).queue_mode is None
    v6 = queue(("2001:db8::1",), "5223").uri().replace("@2001:db8::1:5223", "@[2001:DB8::1]:5223")
    read = SMPQueueInfo.from_uri(v6)
    assert read.server.hosts == ("2001:db8::1",) and read.server.port == "5223"


def test_rule_ipv6_with_port_and_empty_key_hash_do_not_read_back() -> None:
    """The two known cases where simplexmq's printed form does not read back: an IPv6 host
    prints without brackets, so its port joins the address; an empty key hash prints as
    smp://@..., which base64urlP (non-empty) refuses."""
    printed = queue(("fe80::1",), "5223").uri()
    assert "@fe80::1:5223/" in printed
    read = SMPQueueInfo.from_uri(printed)
    assert (read.server.hosts, read.server.port) == (("fe80::1:5223",), "")
    empty = queue(key_hash=b"").uri()
    assert empty.startswith("smp://@")
    with pytest.raises(FrameError, match=r"key hash.*offset 6"):
        SMPQueueInfo.from_uri(empty)


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "http://x",
        QUEUE.uri().replace("=@", "=:pass@", 1),
        QUEUE.uri().replace("v=4", "v=5-4"),
        QUEUE.uri().replace("v=4&", ""),
        QUEUE.uri().replace("#/?", "#/?x=1 "),
        QUEUE.uri().replace("smp.example.com", "1.2.3.300"),
    ],
)
def test_rule_bad_queue_uris_are_refused(uri: str) -> None:
    """The URI parser refuses what strP refuses (and a last IPv4 number over 255, ours)."""
    with pytest.raises(FrameError, match=r"queue URI: .* at offset \d+"):
        SMPQueueInfo.from_uri(uri)


# -- messages -----------------------------------------------------------------------


def test_rule_messages_encode_as_the_agent() -> None:
    """instance Encoding AgentMessage: ('A', queues, sig_, Tail), ('P', Tail), ('J', Tail)."""
    key = SigningKey.from_seed(bytes(32))
    sig = RequestSignature(key.public_key, bytes(64))
    request = AgentServiceRequest((QUEUE,), sig, b"{}")
    assert request.encode() == (
        b"A\x01" + QUEUE.encode() + b"1\x2c" + key.public_key.der + b"\x40" + bytes(64) + b"{}"
    )
    assert decode_message(request.encode()) == request
    assert AgentServiceResponse(b"x").encode() == b"Px"
    assert AgentRejection(b"r").encode() == b"Jr"
    assert decode_message(b"Px") == AgentServiceResponse(b"x")
    assert decode_message(b"J") == AgentRejection(b"")


def test_rule_several_reply_queues_decode() -> None:
    """NonEmpty SMPQueueInfo: a count of 1 to 255; the agent sends one and answers through
    the first (replyQueue :| _)."""
    two = AgentServiceRequest((QUEUE, THREE_HOSTS), None, b"p")
    assert decode_message(two.encode()) == two


def test_rule_other_agent_messages_are_not_service_rpc() -> None:
    """The other AgentMessage tags ('I', 'D', 'R', 'M') are named and refused."""
    for tag, name in ((b"I", "AgentConnInfo"), (b"D", "AgentConnInfoReply"),
                      (b"R", "AgentRatchetInfo"), (b"M", "AgentMessage")):
        with pytest.raises(FrameError, match=rf"{name}.*offset 0|offset 0.*{name}"):
            decode_message(tag + b"x")


# -- the vectors, on both backends ---------------------------------------------------


@pytest.mark.parametrize("case", _cases("smp_queue_info"), ids=lambda c: c["name"])
def test_vectors_queue_cases_decode_and_re_encode(case: dict[str, Any]) -> None:
    """agent_messages.json smp_queue_info: the fields encode to `encoded`, which decodes to
    them and re-encodes to the same bytes; `uri` is the text form."""
    value = _queue_of(case)
    encoded = bytes.fromhex(case["encoded"])
    assert value.encode() == encoded
    assert SMPQueueInfo.decode(encoded) == value
    assert SMPQueueInfo.decode(encoded).encode() == encoded
    assert value.uri() == case["uri"]


@pytest.mark.parametrize(
    "case",
    _cases("service_request") + _cases("service_response") + _cases("rejection"),
    ids=lambda c: c["name"],
)
def test_vectors_message_cases_on_both_backends(
    case: dict[str, Any], backend: _backend.Backend
) -> None:
    """agent_messages.json: `message` decodes and re-encodes to the same bytes; the padded
    block each backend opens gives the payload (or the rejection's reason)."""
    message = bytes.fromhex(case["message"])
    value = decode_message(message)
    assert value.encode() == message
    length = case["padded_length"]
    block = _padded(message, length)
    if case["type"] == "service_request":
        ad = bytes.fromhex(case.get("ad", "00"))
        opened = backend.open_request(block, ad, strict=True)
        assert isinstance(value, AgentServiceRequest)
        assert opened.payload == value.payload == bytes.fromhex(case["payload"])
        assert opened.reply_queues == value.reply_queues
        assert [_queue_of(q) for q in case["reply_queues"]] == list(value.reply_queues)
    elif case["type"] == "service_response":
        assert backend.open_response(block, strict=True) == bytes.fromhex(case["payload"])
    else:
        with pytest.raises(sx.ServiceRejected) as info:
            backend.open_response(block, strict=True)
        assert info.value.reason == bytes.fromhex(case["reason"])


@pytest.mark.parametrize("case", _cases("message_error"), ids=lambda c: c["name"])
def test_vectors_negative_cases_same_error_on_both_backends(case: dict[str, Any]) -> None:
    """Every negative case: each backend raises the same library error class with the same
    message, naming the case's offset."""
    message = bytes.fromhex(case["message"])
    block = _padded(message, 11106)
    ad = bytes.fromhex(case["ad"]) if "ad" in case else bytes(112)
    seen = []
    for backend in sx.backends.values():
        with pytest.raises(sx.SimplexRpcError) as info:
            if case["expect"] == "request":
                backend.open_request(block, ad)
            else:
                backend.open_response(block)
        assert type(info.value).__name__ == case["error"]
        if "offset" in case:
            assert f"offset {case['offset']}" in str(info.value)
        seen.append(str(info.value))
    assert len(set(seen)) == 1


@pytest.mark.parametrize("case", _cases("too_large"), ids=lambda c: c["name"])
def test_vectors_too_large_on_both_backends(case: dict[str, Any], backend: Any) -> None:
    """A payload one byte over its limit is refused with PayloadTooLarge."""
    payload = bytes(case["payload_length"])
    with pytest.raises(sx.PayloadTooLarge):
        if "reply_queues" in case:
            q = _queue_of(case["reply_queues"][0])
            assert case["payload_length"] == max_request_payload(q, case["signed"]) + 1
            key = SigningKey.from_seed(bytes(32)) if case["signed"] else None
            backend.seal_request(payload, b"ad", key, reply_queue=q)
        else:
            backend.seal_response(payload, pq_support=case["pq_support"])


def test_vectors_cover_the_required_shapes() -> None:
    """The cases the issue asks for: one and several hosts, onion, IPv6, a port, an empty
    key hash, each queue mode, both PQ settings, payloads at the limit and one over."""
    queues = _cases("smp_queue_info")
    assert any(len(c["hosts"]) == 1 for c in queues) and any(len(c["hosts"]) >= 3 for c in queues)
    assert any(h.endswith(".onion") for c in queues for h in c["hosts"])
    assert any(":" in h for c in queues for h in c["hosts"])
    assert any(c["port"] for c in queues) and any(c["key_hash"] == "" for c in queues)
    assert {c["queue_mode"] for c in queues} == {"M", "C", None}
    assert {c["pq_support"] for c in _cases("service_response")} == {True, False}
    assert any("at the limit" in c["name"] for c in _cases("service_request"))
    assert len(_cases("too_large")) >= 3


# -- the fast path of the common head reads as the general reader --------------------------


def _general(message: bytes) -> object:
    from simplex_rpc._wire.agent_block import _Reader

    try:
        reader = _Reader(message, "request", 1)
        queues, signature = reader.request_head()
        return queues, signature, reader.at
    except FrameError as exc:
        return str(exc)


def test_the_common_head_fast_path_agrees_with_the_general_reader() -> None:
    """_common_head reads the usual request (one queue, version 4, plain hosts) fast; on
    every prefix and every one-byte change of such heads it gives the general reader's
    value, or declines (None) so that the general reader decides."""
    from simplex_rpc._wire.agent_block import _common_head

    key = SigningKey.from_seed(bytes(32))
    heads = [
        AgentServiceRequest((q,), sig, b"{}").encode()
        for q in (QUEUE, THREE_HOSTS, queue(("a.example", "b-2.example"), "443", mode=None))
        for sig in (None, RequestSignature(key.public_key, bytes(64)))
    ]
    checked = 0
    for head in heads:
        variants = [head[:i] for i in range(1, len(head) + 1)]
        variants += [head[:i] + bytes([v]) + head[i + 1 :] for i in range(1, len(head))
                     for v in (0x00, 0x01, 0x2C, 0x30, 0x31, 0x40, 0x43, 0x4D, 0x54, 0xFF)]
        for message in variants:
            fast = _common_head(message, 0, len(message))
            if fast is None:
                continue
            checked += 1
            assert fast == _general(message), message.hex()
    assert checked > 100

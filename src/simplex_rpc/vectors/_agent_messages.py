"""The ``agent_messages`` vectors: the agent's Service RPC block (wire.md section 4).

Reply queues (``SMPQueueInfo``, binary and URI), requests (``'A'``), responses
(``'P'``) and rejections (``'J'``), padded as the agent pads them, and every
decoding failure with the error class and offset a decoder must report.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Final

from .._wire.agent_block import (
    AgentRejection,
    AgentServiceRequest,
    AgentServiceResponse,
    RequestSignature,
    SMPQueueInfo,
    SMPServer,
    decode_message,
)
from .._wire.backend import Backend
from .._wire.envelope import Request
from .._wire.keys import SigningKey
from .._wire.seal import (
    REQUEST_PADDED_LENGTH,
    max_request_payload,
    max_response_payload,
    response_length,
)
from ..errors import ServiceRejected, SimplexRpcError
from ._common import (
    ERROR_CLASSES,
    Case,
    Document,
    _ad,
    _Checker,
    _compact,
    _derived,
    _document,
    _h,
    _pattern,
    _seed,
)
from ._examples import MCP_TOOLS_CALL_REQUEST_TEXT, MCP_TOOLS_CALL_RESPONSE_TEXT

_X25519_PREFIX: Final = bytes.fromhex("302a300506032b656e032100")
_ED25519_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")
_UNSIGNED_CHECK_AD: Final = b"any AD: an unsigned request does not depend on it"


def _dh(label: str) -> bytes:
    return _X25519_PREFIX + _derived(f"dh {label}")


def _queue(
    label: str,
    hosts: tuple[str, ...],
    port: str = "",
    *,
    version: int = 4,
    mode: str | None = "M",
    key_hash: bytes | None = None,
) -> SMPQueueInfo:
    kh = _derived(f"key hash {label}") if key_hash is None else key_hash
    server = SMPServer(hosts, port, kh)
    return SMPQueueInfo(version, server, _derived(f"sender id {label}", 24), _dh(label), mode)  # type: ignore[arg-type]


def _queue_fields(q: SMPQueueInfo) -> dict[str, Any]:
    return {
        "client_version": q.client_version,
        "hosts": list(q.server.hosts),
        "port": q.server.port,
        "key_hash": q.server.key_hash.hex(),
        "sender_id": q.sender_id.hex(),
        "dh_public_key": q.dh_public_key.hex(),
        "queue_mode": q.queue_mode,
    }


def _queue_of(fields: dict[str, Any]) -> SMPQueueInfo:
    server = SMPServer(tuple(fields["hosts"]), fields["port"], bytes.fromhex(fields["key_hash"]))
    return SMPQueueInfo(
        fields["client_version"],
        server,
        bytes.fromhex(fields["sender_id"]),
        bytes.fromhex(fields["dh_public_key"]),
        fields["queue_mode"],
    )


def _padded(message: bytes, length: int) -> bytes:
    return len(message).to_bytes(2, "big") + message + b"#" * (length - 2 - len(message))


# -- the queues of the cases -----------------------------------------------------------

ONE_HOST: Final = _queue("one host", ("smp8.simplex.im",))
THREE_HOSTS: Final = _queue(
    "three hosts",
    ("smp.example.com", "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrstuvwx.onion",
     "192.0.2.7"),
    "5223",
    mode="C",
)


def _queue_cases() -> list[Case]:
    cases: list[Case] = []

    def case(name: str, q: SMPQueueInfo, **extra: Any) -> None:
        cases.append({"name": name, "type": "smp_queue_info", **_queue_fields(q),
                      "uri": q.uri(), "encoded": q.encode().hex(), **extra})

    case("one host, messaging queue (client version 4)", ONE_HOST)
    case("three hosts (domain, onion, IPv4) and a port, contact queue", THREE_HOSTS)
    case("no queue mode (client version 4)", _queue("no mode", ("smp.example.net",), mode=None))
    case("onion host only", _queue("onion", ("abcdefghijklmnop.onion",), mode="C"))
    case("IPv6 host, default port", _queue("ipv6", ("2001:db8::7",)))
    case("IPv4 host and port 443", _queue("ipv4", ("198.51.100.23",), "443", mode=None))
    case(
        "IPv6 host and a port: the printed URI reads back as one longer address, no port",
        _queue("ipv6 port", ("fe80::1",), "5223"),
        uri_reads_as={"hosts": ["fe80::1:5223"], "port": ""},
    )
    case(
        "empty key hash: prints as smp://@..., which simplexmq's parser refuses",
        _queue("empty key hash", ("smp.example.org",), key_hash=b""),
        uri_error="FrameError",
    )
    case("client version 3, messaging: the sndSecure byte 'T'",
         _queue("v3", ("smp.example.com",), version=3))
    case("client version 2: no queue mode byte", _queue("v2", ("smp.example.com",), version=2,
                                                        mode=None))
    case(
        "client version 5, above the agent's range (1 to 4): read as smpP reads it",
        _queue("v5", ("smp.example.com",), version=5),
    )
    case(
        "client version 1 (legacy server) on a preset host: the onion host is added",
        _queue("v1", ("smp4.simplex.im",
                      "o5vmywmrnaxalvz6wi3zicyftgio6psuvyniis6gco6bp6ekl4cqj4id.onion"),
               version=1, mode=None),
    )
    return cases


# -- requests, responses, rejections ------------------------------------------------


def _request_case(
    name: str,
    queue: SMPQueueInfo,
    payload: bytes,
    key: SigningKey | None = None,
    ad: bytes | None = None,
) -> Case:
    case: Case = {"name": name, "type": "service_request", "reply_queues": [_queue_fields(queue)]}
    signature = None
    if key is not None:
        assert ad is not None
        signature = RequestSignature(key.public_key, key.sign_request(ad, payload))
        case |= {"seed": key.seed().hex(), "ad": ad.hex()}
    message = AgentServiceRequest((queue,), signature, payload).encode()
    padded = _padded(message, REQUEST_PADDED_LENGTH)
    return case | {
        "payload": payload.hex(),
        "message": message.hex(),
        "padded_length": len(padded),
        "padded_sha256": hashlib.sha256(padded).hexdigest(),
    }


def _response_case(name: str, payload: bytes, pq_support: bool) -> Case:
    message = AgentServiceResponse(payload).encode()
    padded = _padded(message, response_length(pq_support))
    return {
        "name": name,
        "type": "service_response",
        "payload": payload.hex(),
        "pq_support": pq_support,
        "message": message.hex(),
        "padded_length": len(padded),
        "padded_sha256": hashlib.sha256(padded).hexdigest(),
    }


def _rejection_case(name: str, reason: bytes, pq_support: bool) -> Case:
    message = AgentRejection(reason).encode()
    padded = _padded(message, response_length(pq_support))
    return {
        "name": name,
        "type": "rejection",
        "reason": reason.hex(),
        "pq_support": pq_support,
        "message": message.hex(),
        "padded_length": len(padded),
        "padded_sha256": hashlib.sha256(padded).hexdigest(),
    }


def _agent_messages_document() -> Document:
    key = SigningKey.from_seed(_seed(30))
    ad = _ad("agent messages")
    request = Request.parse(MCP_TOOLS_CALL_REQUEST_TEXT)
    signed_payload = Request(
        protocol=request.protocol, request=request.request, request_key=key.public_key
    ).to_json()
    one_signed = max_request_payload(ONE_HOST, True)
    three_signed = max_request_payload(THREE_HOSTS, True)
    three_unsigned = max_request_payload(THREE_HOSTS, False)
    cases = _queue_cases()
    cases += [
        _request_case("unsigned MCP request, one-host reply queue", ONE_HOST,
                      _compact(MCP_TOOLS_CALL_REQUEST_TEXT)),
        _request_case("signed MCP request with requestKey, one-host reply queue", ONE_HOST,
                      signed_payload, key, ad),
        _request_case("signed MCP request, three-host reply queue", THREE_HOSTS,
                      signed_payload, key, ad),
        _request_case("signed request, empty payload", ONE_HOST, b"", key, ad),
        _request_case("signed request, binary payload", ONE_HOST, bytes(range(256)), key, ad),
        _request_case(f"signed request at the limit of a one-host queue ({one_signed})",
                      ONE_HOST, _pattern(one_signed, "signed"), key, ad),
        _request_case(f"signed request at the limit of a three-host queue ({three_signed})",
                      THREE_HOSTS, _pattern(three_signed, "signed"), key, ad),
        _request_case(f"unsigned request at the limit of a three-host queue ({three_unsigned})",
                      THREE_HOSTS, _pattern(three_unsigned, "unsigned")),
        _response_case("MCP response, PQ support on", _compact(MCP_TOOLS_CALL_RESPONSE_TEXT), True),
        _response_case("MCP response, PQ support off", _compact(MCP_TOOLS_CALL_RESPONSE_TEXT),
                       False),
        _response_case("response, empty payload", b"", True),
        _response_case(f"response at the limit, PQ on ({max_response_payload(True)})",
                       _pattern(max_response_payload(True), "resp"), True),
        _response_case(f"response at the limit, PQ off ({max_response_payload(False)})",
                       _pattern(max_response_payload(False), "resp"), False),
        _rejection_case("rejection with a reason, PQ on", b"not accepting requests", True),
        _rejection_case("rejection with an empty reason, PQ off", b"", False),
    ]
    signed = bytes.fromhex(cases[[c["name"] for c in cases].index(
        "signed MCP request with requestKey, one-host reply queue")]["message"])
    q_len = len(ONE_HOST.encode())
    sig_at = 2 + q_len  # the Maybe tag, after 'A', the count and the queue

    def bad(name: str, message: bytes, offset: int | None, error: str = "FrameError",
            expect: str = "request", **extra: Any) -> None:
        case: Case = {"name": name, "type": "message_error", "message": message.hex(),
                      "expect": expect}
        for field, value in extra.items():
            case[field] = value.hex() if isinstance(value, bytes) else value
        if offset is not None:
            case["offset"] = offset
        case["error"] = error
        cases.append(case)

    q = ONE_HOST.encode()
    head = b"A\x01"
    host_at = 2 + 2 + 1  # after 'A', the count, the version, the host count
    bad("empty message", b"", 0)
    bad("unknown tag 'X'", b"X" + signed[1:], 0)
    bad("tag 'M' (AgentMessage): not a Service RPC message", b"M" + signed[1:], 0)
    bad("a rejection where a request is expected", b"Jno", 0)
    bad("a response where a request is expected", b"P{}", 0)
    bad("request ends before its reply queue count", b"A", 1)
    bad("reply queue count 0 (NonEmpty)", b"A\x00" + q + b"0{}", 1)
    bad("ends inside the queue's client version", b"A\x01\x00", 3)
    bad("server host count 0 (NonEmpty)", head + q[:2] + b"\x00" + q[3:] + b"0{}", 4)
    bad("ends inside a host", head + q[:10], 12)
    bad("host is not a TransportHost ('a:b')", head + q[:2] + b"\x01\x03a:b" + q[3 + 1 + 15:]
        + b"0{}", host_at + 1)
    bad("host not in its canonical form ('FE80::1')", head + q[:2] + b"\x01\x07FE80::1"
        + q[3 + 1 + 15:] + b"0{}", host_at + 1)
    bad("a domain ending in .onion that is not an onion name ('a.b.onion')",
        head + q[:2] + b"\x01\x09a.b.onion" + q[3 + 1 + 15:] + b"0{}", host_at + 1)
    port_at = host_at + 1 + 15
    bad("port that is not a decimal ('http')", head + q[:port_at - 2] + b"\x04http"
        + q[port_at - 2 + 1:] + b"0{}", port_at + 1)
    dh_at = 2 + len(q) - 45 - 1  # the DH key's length byte (queue ends with 'M')
    raw_dh = head + q[: dh_at - 2] + b"\x20" + q[dh_at - 2 + 13 : -1] + b"M0{}"
    bad("queue DH key of 32 bytes (raw, not SPKI)", raw_dh, dh_at)
    ed = head + q[: dh_at - 2 + 1] + _ED25519_PREFIX + q[dh_at - 2 + 13 :] + b"0{}"
    bad("queue DH key is an Ed25519 SPKI (wrong curve)", ed, dh_at + 1 + 8)
    bad("queue mode 'T' at client version 4 (simplexmq writes 'M')",
        head + q[:-1] + b"T0{}", 2 + len(q) - 1)
    bad("ends before the signature's Maybe tag", head + q, sig_at)
    bad("signature Maybe tag '2'", head + q + b"2{}", sig_at)
    bad("signature Maybe tag 0x01 (not the character '1')", head + q + b"\x01" + signed[sig_at
        + 1:], sig_at)
    bad("signer key length 32 (raw key)", signed[: sig_at + 1] + b"\x20" + signed[sig_at + 2:],
        sig_at + 1)
    x25519 = signed[: sig_at + 2 + 8] + b"\x6e" + signed[sig_at + 2 + 9 :]
    bad("signer key is an X25519 SPKI (not Ed25519)", x25519, sig_at + 2 + 8)
    bad("signature length 63", signed[: sig_at + 46] + b"\x3f" + signed[sig_at + 47:],
        sig_at + 46)
    bad("ends inside the signature", signed[: sig_at + 100], sig_at + 100)
    bad("signed request opened in another session (other AD)", signed, None, "BadSignature",
        ad=_ad("agent messages, another session"))
    tampered = bytearray(signed)
    tampered[-5] ^= 0x20
    bad("signed request with one payload byte flipped", bytes(tampered), None, "BadSignature",
        ad=ad)
    bad("empty response message", b"", 0, expect="response")
    bad("a request where a response is expected", signed, 0, expect="response")
    bad("unknown tag 'S' (frame v1's response) where a response is expected", b"S{}", 0,
        expect="response")

    def too_large(name: str, queue: SMPQueueInfo, signed_: bool) -> None:
        cases.append({"name": name, "type": "too_large", "reply_queues": [_queue_fields(queue)],
                      "signed": signed_,
                      "payload_length": max_request_payload(queue, signed_) + 1,
                      "error": "PayloadTooLarge"})

    too_large(f"signed request of {one_signed + 1} bytes, one-host queue", ONE_HOST, True)
    too_large(f"signed request of {three_signed + 1} bytes, three-host queue", THREE_HOSTS, True)
    too_large(f"unsigned request of {three_unsigned + 1} bytes, three-host queue",
              THREE_HOSTS, False)
    for pq in (True, False):
        cases.append({"name": f"response of {max_response_payload(pq) + 1} bytes, PQ"
                              f" {'on' if pq else 'off'}",
                      "type": "too_large", "pq_support": pq,
                      "payload_length": max_response_payload(pq) + 1, "error": "PayloadTooLarge"})
    cases.append({"name": "queue: 2 bytes after it", "type": "smp_queue_info_error",
                  "encoded": (ONE_HOST.encode() + b"0{").hex(), "offset": len(q),
                  "error": "FrameError"})
    cases.append({"name": "queue URI with basic auth", "type": "uri_error",
                  "uri": ONE_HOST.uri().replace("=@", "=:secret@", 1), "error": "FrameError"})
    cases.append({"name": "queue URI of an ntf:// server", "type": "uri_error",
                  "uri": "ntf" + ONE_HOST.uri()[3:], "error": "FrameError"})
    return _document("agent_messages", cases)


# -- checks ------------------------------------------------------------------------------


def _raises_same(c: _Checker, case: Case, actions: dict[str, Any]) -> None:
    """Every action raises the case's error class, with one message, naming its offset."""
    want = ERROR_CLASSES[case["error"]]
    messages = {}
    for what, action in actions.items():
        try:
            action()
        except SimplexRpcError as exc:
            if type(exc) is not want:
                c.fail(case, f"{what}: raised {type(exc).__name__}: {exc}")
            messages[what] = str(exc)
            continue
        except Exception as exc:
            c.fail(case, f"{what}: raised {type(exc).__name__}: {exc}")
            continue
        c.fail(case, f"{what}: succeeded where {case['error']} is expected")
    # The openers of every backend say the same; decode_message names its own expectation.
    if len({m for what, m in messages.items() if what != "decode_message"}) > 1:
        c.fail(case, f"the errors differ: {messages}")
    offset = case.get("offset")
    for what, message in messages.items():
        if offset is not None and f"offset {offset}" not in message:
            c.fail(case, f"{what}: the error does not name offset {offset}: {message}")


def _verify_agent_message(c: _Checker, case: Case, impls: list[Backend]) -> None:
    kind = case["type"]
    if kind == "smp_queue_info":
        _check_queue(c, case)
    elif kind == "service_request":
        _check_request(c, case, impls)
    elif kind in ("service_response", "rejection"):
        _check_response(c, case, impls)
    elif kind == "message_error":
        message = _h(case, "message")
        ad = _h(case, "ad") if "ad" in case else _ad("agent messages")
        actions: dict[str, Any] = {}
        wrong_kind = message[:1] in ((b"P", b"J") if case["expect"] == "request" else (b"A",))
        if case["error"] != "BadSignature" and not wrong_kind:
            actions["decode_message"] = lambda: decode_message(message)
        padded = _padded(message, REQUEST_PADDED_LENGTH)
        for b in impls:
            if case["expect"] == "request":
                actions[f"{b.name}.open_request"] = lambda b=b: b.open_request(padded, ad)
            else:
                actions[f"{b.name}.open_response"] = lambda b=b: b.open_response(padded)
        _raises_same(c, case, actions)
    elif kind == "too_large":
        for b in impls:
            c.raises(case, functools.partial(_seal_too_large, b, case), b, "seal")
    elif kind == "smp_queue_info_error":
        encoded = _h(case, "encoded")
        _raises_same(c, case, {"SMPQueueInfo.decode": lambda: SMPQueueInfo.decode(encoded)})
    elif kind == "uri_error":
        _raises_same(c, case, {"SMPQueueInfo.from_uri": lambda: SMPQueueInfo.from_uri(case["uri"])})
    else:
        raise ValueError(f"type {kind!r}")


def _seal_too_large(b: Backend, case: Case) -> bytes:
    """Seal the ``too_large`` case's payload on ``b`` (which must refuse it)."""
    payload = bytes(case["payload_length"])
    if "reply_queues" not in case:
        return b.seal_response(payload, pq_support=case["pq_support"])
    queue = _queue_of(case["reply_queues"][0])
    key = SigningKey.from_seed(bytes(32)) if case["signed"] else None
    return b.seal_request(payload, _UNSIGNED_CHECK_AD, key, reply_queue=queue)


def _check_queue(c: _Checker, case: Case) -> None:
    queue = _queue_of(case)
    encoded = _h(case, "encoded")
    c.expect(case, queue.encode() == encoded, "encode() differs from encoded")
    c.run(case, lambda: c.expect(case, SMPQueueInfo.decode(encoded) == queue,
                                 "decode(encoded) gives another queue"))
    c.expect(case, queue.uri() == case["uri"], "uri() differs from uri")
    if "uri_error" in case:
        c.raises(case | {"error": case["uri_error"]}, lambda: SMPQueueInfo.from_uri(case["uri"]),
                 None, "from_uri")
        return
    reads = case.get("uri_reads_as")

    def parse() -> None:
        got = SMPQueueInfo.from_uri(case["uri"])
        if reads is None:
            c.expect(case, got == queue, "from_uri(uri) gives another queue")
        else:
            same = list(got.server.hosts) == reads["hosts"] and got.server.port == reads["port"]
            c.expect(case, same, "from_uri(uri) differs from uri_reads_as")

    c.run(case, parse)


def _check_request(c: _Checker, case: Case, impls: list[Backend]) -> None:
    queues = tuple(_queue_of(f) for f in case["reply_queues"])
    payload = _h(case, "payload")
    message = _h(case, "message")
    key = SigningKey.from_seed(_h(case, "seed")) if "seed" in case else None
    ad = _h(case, "ad") if "ad" in case else _UNSIGNED_CHECK_AD
    signature = None
    if key is not None:
        signature = RequestSignature(key.public_key, key.sign_request(ad, payload))
    value = AgentServiceRequest(queues, signature, payload)
    c.expect(case, value.encode() == message, "encode() differs from message")
    c.run(case, lambda: c.expect(case, decode_message(message) == value,
                                 "decode_message(message) gives another request"))
    padded = _padded(message, REQUEST_PADDED_LENGTH)
    c.expect(case, len(padded) == case["padded_length"], "padded_length differs")
    c.expect(case, hashlib.sha256(padded).hexdigest() == case["padded_sha256"],
             "padded_sha256 differs")
    for b in impls:
        def run(b: Backend = b) -> None:
            block = b.seal_request(payload, ad, key, reply_queue=queues[0])
            c.expect(case, block == padded, "seal_request differs from the padded message", b)
            opened = b.open_request(block, ad, strict=True)
            c.expect(case, opened.payload == payload, "open_request gives another payload", b)
            c.expect(case, opened.reply_queues == queues, "open_request gives other queues", b)
            c.expect(case, opened.signer == (key and key.public_key),
                     "open_request gives another signer", b)

        c.run(case, run, b)


def _check_response(c: _Checker, case: Case, impls: list[Backend]) -> None:
    pq = case["pq_support"]
    message = _h(case, "message")
    rejection = case["type"] == "rejection"
    body = _h(case, "reason" if rejection else "payload")
    value = AgentRejection(body) if rejection else AgentServiceResponse(body)
    c.expect(case, value.encode() == message, "encode() differs from message")
    c.run(case, lambda: c.expect(case, decode_message(message) == value,
                                 "decode_message(message) gives another value"))
    padded = _padded(message, response_length(pq))
    c.expect(case, len(padded) == case["padded_length"], "padded_length differs")
    c.expect(case, hashlib.sha256(padded).hexdigest() == case["padded_sha256"],
             "padded_sha256 differs")
    for b in impls:
        def run(b: Backend = b) -> None:
            seal = b.seal_rejection if rejection else b.seal_response
            block = seal(body, pq_support=pq)
            c.expect(case, block == padded, "sealed block differs from the padded message", b)
            if not rejection:
                c.expect(case, b.open_response(block, strict=True) == body,
                         "open_response gives another payload", b)
                return
            try:
                b.open_response(block, strict=True)
            except ServiceRejected as exc:
                c.expect(case, exc.reason == body, "ServiceRejected carries another reason", b)
            else:
                c.fail(case, "open_response of a rejection did not raise ServiceRejected", b)

        c.run(case, run, b)

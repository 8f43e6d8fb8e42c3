"""The ``agent_crypto`` vectors: Service RPC messages as they cross an SMP server (agent v8).

Each ``request`` case gives an address's raw private keys, a reply queue, a payload
(and the seed of its signing key, or null), every random input of the requester
and of the service, and the outputs: the request's SMP message body, rcAD, the
SHA-256 of the padded ``'A'`` block, and the answer's message body. Another
implementation can open every ``message`` from ``address`` alone. The
``message_error`` and ``response_error`` cases are messages with one bit flipped
(or one field changed) in each layer, with the error class (and, for
``AgentCryptoError``, the layer) a reader must report. The rules: docs/wire.md,
"The agent's cryptography".

The cryptography needs ``cryptography`` and ``pqcrypto`` (the ``sntrup761`` extra);
this module imports them only when vectors of this kind are built or checked.
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any, Final

import nacl.bindings

from .._wire.agent_block import SMPQueueInfo, SMPServer
from .._wire.backend import Backend
from .._wire.keys import SigningKey
from .._wire.seal import max_request_payload, max_response_payload
from ..errors import AgentCryptoError, ServiceRejected, SimplexRpcError, install_hint

# The reply queue's fields are those of agent_messages.json (issue 27): one codec.
from ._agent_messages import _queue_fields, _queue_of
from ._common import Case, Document, VectorError, _Checker, _derived, _document, _h, _pattern
from ._examples import MCP_TOOLS_CALL_REQUEST_TEXT, MCP_TOOLS_CALL_RESPONSE_TEXT

if TYPE_CHECKING:
    from .._wire import agent_crypto as ac

_X25519_PREFIX: Final = bytes.fromhex("302a300506032b656e032100")

#: (name, has a KEM, PQ support): the combinations simplexmq makes.
_SETTINGS: Final = (
    ("pq_address", True, True),  # IKUsePQ: a KEM in the link, PQ support
    ("pq_support_no_kem", False, True),  # IKPQOn: no KEM in the link, PQ support
    ("no_pq", False, False),  # IKPQOff
)


def missing_extra() -> str | None:
    """None when the cryptography can run; else what to install, in one line."""
    try:
        import cryptography  # noqa: F401
        from pqcrypto.kem import sntrup_761  # noqa: F401
    except ImportError as exc:
        return f"the agent's cryptography needs {install_hint('sntrup761')} ({exc})"
    return None


def _crypto() -> Any:
    reason = missing_extra()
    if reason is not None:
        raise VectorError(f"agent_crypto vectors: {reason}")
    from .._wire import agent_crypto

    return agent_crypto


def _kem() -> Any:
    from . import _agent_crypto_kem

    return _agent_crypto_kem


def _address(label: str, kem: bool, pq: bool) -> ac.AddressKeys:
    k = _kem()
    keys: ac.AddressKeys = _crypto().AddressKeys.from_raw(
        queue_dh=_derived(f"agent crypto {label} queue dh"),
        k1=_derived(f"agent crypto {label} k1", 56),
        k2=_derived(f"agent crypto {label} k2", 56),
        kem=(k.ADDRESS_SECRET, k.ADDRESS_PUBLIC) if kem else None,
        key_id=_derived(f"agent crypto {label} key id", 16),
        pq_support=pq,
    )
    return keys


def _address_fields(keys: ac.AddressKeys) -> dict[str, Any]:
    raw = keys.raw()
    kem = raw["kem"]
    return {
        "queue_dh": raw["queue_dh"].hex(),
        "k1": raw["k1"].hex(),
        "k2": raw["k2"].hex(),
        "kem_secret": None if kem is None else kem[0].hex(),
        "kem_public": None if kem is None else kem[1].hex(),
        "key_id": raw["key_id"].hex(),
        "pq_support": raw["pq_support"],
    }


def _address_of(fields: dict[str, Any]) -> ac.AddressKeys:
    kem = None
    if fields["kem_secret"] is not None:
        kem = (bytes.fromhex(fields["kem_secret"]), bytes.fromhex(fields["kem_public"]))
    keys: ac.AddressKeys = _crypto().AddressKeys.from_raw(
        queue_dh=bytes.fromhex(fields["queue_dh"]),
        k1=bytes.fromhex(fields["k1"]),
        k2=bytes.fromhex(fields["k2"]),
        kem=kem,
        key_id=bytes.fromhex(fields["key_id"]),
        pq_support=fields["pq_support"],
    )
    return keys


def _queue(label: str, hosts: tuple[str, ...], mode: str | None = "M") -> SMPQueueInfo:
    server = SMPServer(hosts, "", _derived(f"agent crypto {label} key hash"))
    placeholder = _X25519_PREFIX + bytes(32)  # the sealing puts the queue's new key here
    return SMPQueueInfo(4, server, _derived(f"agent crypto {label} sender id", 24),
                        placeholder, mode)  # type: ignore[arg-type]


def _request_randomness(label: str, keys: ac.AddressPublicKeys) -> ac.RequestRandomness:
    k = _kem()
    with_kem = keys.kem is not None
    r: ac.RequestRandomness = _crypto().RequestRandomness(
        e2e_k1=_derived(f"agent crypto {label} e2e k1", 56),
        e2e_k2=_derived(f"agent crypto {label} e2e k2", 56),
        ratchet_key=_derived(f"agent crypto {label} ratchet key", 56),
        kem_secret=k.REQUESTER_SECRET,
        kem_public=k.REQUESTER_PUBLIC,
        kem_ciphertext=k.TO_ADDRESS_CIPHERTEXT if with_kem else None,
        kem_shared=k.TO_ADDRESS_SHARED if with_kem else None,
        box_key=_derived(f"agent crypto {label} box key"),
        nonce=_derived(f"agent crypto {label} nonce", 24),
        reply_dh=_derived(f"agent crypto {label} reply dh"),
    )
    return r


def _response_randomness(label: str, pq: bool, mode: str | None) -> ac.ResponseRandomness:
    k = _kem()
    r: ac.ResponseRandomness = _crypto().ResponseRandomness(
        ratchet_key=_derived(f"agent crypto {label} service ratchet key", 56),
        kem_secret=k.SERVICE_SECRET if pq else None,
        kem_public=k.SERVICE_PUBLIC if pq else None,
        kem_ciphertext=k.TO_REQUESTER_CIPHERTEXT if pq else None,
        kem_shared=k.TO_REQUESTER_SHARED if pq else None,
        e2e_key=_derived(f"agent crypto {label} service e2e key"),
        nonce=_derived(f"agent crypto {label} service nonce", 24),
        auth_seed=None if mode == "M" else _derived(f"agent crypto {label} service auth"),
    )
    return r


def _randomness_of(cls: type, fields: dict[str, Any]) -> Any:
    return cls(**{k: None if v is None else bytes.fromhex(v) for k, v in fields.items()})


def _request_case(
    name: str,
    keys: ac.AddressKeys,
    queue: SMPQueueInfo,
    payload: bytes,
    seed: bytes | None,
    response: bytes,
    *,
    rejection: bool = False,
) -> Case:
    c = _crypto()
    r = _request_randomness(name, keys.public)
    key = SigningKey.from_seed(seed) if seed is not None else None
    sent = c.seal_service_request(payload, keys.public, reply_queue=queue, sign_key=key,
                                  randomness=r)
    got = c.open_service_request(sent.message, keys)
    rr = _response_randomness(name, keys.pq_support, queue.queue_mode)
    seal = c.seal_service_rejection if rejection else c.seal_service_response
    answer = seal(response, got.reply, randomness=rr)
    return {
        "name": name,
        "type": "request",
        "address": _address_fields(keys),
        "reply_queue": _queue_fields(sent.state.reply_queue),
        "payload": payload.hex(),
        "seed": None if seed is None else seed.hex(),
        "agent_version": 8,
        "client_version": 4,
        "request_randomness": r.as_hex(),
        "message": sent.message.hex(),
        "rc_ad": sent.ad.hex(),
        "inner_padded_sha256": hashlib.sha256(sent.padded_block).hexdigest(),
        "response_type": "J" if rejection else "P",
        "response_payload": response.hex(),
        "response_randomness": rr.as_hex(),
        "response_message": answer.hex(),
    }


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def _rebox(
    message: bytes, r: ac.RequestRandomness, queue_dh: bytes, client_message: bytes
) -> bytes:
    """The request's envelope around another ``ClientMessage`` (same keys and nonce)."""
    padded = len(client_message).to_bytes(2, "big") + client_message
    padded += b"#" * (15904 - len(padded))
    boxed = nacl.bindings.crypto_box(padded, r.nonce, queue_dh, r.box_key)
    return message[: len(message) - len(boxed)] + boxed


def _error_case(name: str, keys: ac.AddressKeys, message: bytes, error: str,
                layer: str | None) -> Case:
    return {
        "name": name,
        "type": "message_error",
        "address": _address_fields(keys),
        "message": message.hex(),
        "error": error,
        "layer": layer,
    }


def _negative_cases() -> list[Case]:
    c = _crypto()
    keys = _address("negative", True, True)
    queue = _queue("negative", ("smp.example.net",))
    r = _request_randomness("negative", keys.public)
    seed = _derived("agent crypto negative seed")
    sent = c.seal_service_request(b'{"q":1}', keys.public, reply_queue=queue,
                                  sign_key=SigningKey.from_seed(seed), randomness=r)
    m = sent.message
    inner = nacl.bindings.crypto_box_open(
        m[2 + 1 + 45 + 24 :], r.nonce, keys.public.queue_dh, r.box_key
    )
    cm = inner[2 : 2 + int.from_bytes(inner[:2], "big")]
    enc = len(cm) - (2 + 2346 + 16 + 11106)  # the start of the EncRatchetMessage
    kem_at = 1 + 2 + 1 + 2 + 69 + 69  # the KEM's Maybe byte in the ClientMessage
    a = keys.public.queue_dh

    def rebox(client_message: bytes) -> bytes:
        return _rebox(m, r, a, client_message)

    # a signature bound to another rcAD: the block signed under another request's AD
    moved = c.seal_request_on(_OtherAd(), b'{"q":1}', keys.public, reply_queue=queue,
                              sign_key=SigningKey.from_seed(seed), randomness=r).message
    cases = [
        _error_case("client_version_newer", keys, _flip(m, 0), "AgentCryptoError",
                    "request envelope"),
        _error_case("no_sender_key", keys, m[:2] + b"0" + m[3:], "AgentCryptoError",
                    "request envelope"),
        _error_case("sender_key_not_x25519", keys, _flip(m, 10), "AgentCryptoError",
                    "request envelope"),
        _error_case("box_truncated", keys, m[:-1], "AgentCryptoError", "request envelope"),
        _error_case("nonce_flipped", keys, _flip(m, 60), "AgentCryptoError", "request box"),
        _error_case("box_flipped", keys, _flip(m, 500), "AgentCryptoError", "request box"),
        _error_case("private_header_k", keys, rebox(b"K" + cm[1:]), "AgentCryptoError",
                    "client message"),
        _error_case("agent_version_9", keys, rebox(cm[:1] + b"\x00\x09" + cm[3:]),
                    "AgentCryptoError", "client message"),
        _error_case("envelope_tag_m", keys, rebox(cm[:3] + b"M" + cm[4:]), "AgentCryptoError",
                    "client message"),
        _error_case("e2e_version_2", keys, rebox(cm[:4] + b"\x00\x02" + cm[6:]),
                    "AgentCryptoError", "client message"),
        _error_case("k1_not_x448", keys, rebox(_flip(cm, 8)), "AgentCryptoError",
                    "client message"),
        _error_case("kem_tag_unknown", keys, rebox(cm[: kem_at + 1] + b"X" + cm[kem_at + 2 :]),
                    "AgentCryptoError", "client message"),
        _error_case("kem_ciphertext_1038_bytes",
                    keys, rebox(cm[: kem_at + 2] + b"\x04\x0e" + cm[kem_at + 4 :]),
                    "AgentCryptoError", "client message"),
        _error_case("ratchet_key_id_unknown", keys, rebox(_flip(cm, enc - 1)), "AgentCryptoError",
                    "client message"),
        _error_case("ratchet_version_4", keys, rebox(cm[: enc + 2] + b"\x00\x04" + cm[enc + 4 :]),
                    "AgentCryptoError", "encrypted ratchet header"),
        _error_case("header_iv_flipped", keys, rebox(_flip(cm, enc + 5)), "AgentCryptoError",
                    "ratchet header GCM"),
        _error_case("header_body_flipped", keys, rebox(_flip(cm, enc + 2 + 2 + 32 + 2 + 9)),
                    "AgentCryptoError", "ratchet header GCM"),
        _error_case("message_tag_flipped", keys, rebox(_flip(cm, enc + 2 + 2346)),
                    "AgentCryptoError", "ratchet message GCM"),
        _error_case("message_body_flipped", keys, rebox(_flip(cm, len(cm) - 1)),
                    "AgentCryptoError", "ratchet message GCM"),
        _error_case("signature_of_another_request", keys, moved, "BadSignature", None),
    ]
    return cases


class _OtherAd:
    """A backend stand-in that signs the block under another request's AD (a moved signature)."""

    name = "moved"

    def seal_request(self, payload: bytes, ad: bytes, key: Any, *, reply_queue: Any) -> bytes:
        from .._wire import backend

        other = _derived("agent crypto another request's rcAD", 112)
        return backend.active.seal_request(payload, other, key, reply_queue=reply_queue)


def _response_error_cases(base: Case) -> list[Case]:
    answer = _h(base, "response_message")
    cases = []
    for name, message, layer in (
        ("response_client_version_newer", _flip(answer, 0), "response envelope"),
        ("response_box_flipped", _flip(answer, 9000), "response box"),
    ):
        case = {k: v for k, v in base.items() if k not in ("name", "type", "response_message")}
        case.update(name=name, type="response_error", response_message=message.hex(),
                    error="AgentCryptoError", layer=layer)
        cases.append(case)
    return cases


def _agent_crypto_document() -> Document:
    request = MCP_TOOLS_CALL_REQUEST_TEXT.encode()
    response = MCP_TOOLS_CALL_RESPONSE_TEXT.encode()
    cases: list[Case] = []
    for label, kem, pq in _SETTINGS:
        keys = _address(label, kem, pq)
        queue = _queue(label, ("smp.example.net",))
        for signed in (True, False):
            seed = _derived(f"agent crypto {label} seed") if signed else None
            name = f"{label}_{'signed' if signed else 'unsigned'}"
            cases.append(_request_case(name, keys, queue, request, seed, response))
    keys = _address("limits", True, True)
    three = _queue("limits", ("smp1.example.net", "smp2.example.net",
                              "jjbyvoemxysm7qxap7m5d5m35jzv5qq6gnlv7s4rsn7tdwwmuqciwpid.onion"))
    limit = max_request_payload(three, signed=True)
    cases.append(_request_case("request_payload_at_limit", keys, three, _pattern(limit, "q"),
                               _derived("agent crypto limits seed"),
                               _pattern(max_response_payload(pq_support=True), "a")))
    keys = _address("limits_no_pq", False, False)
    queue = _queue("limits_no_pq", ("smp.example.net",))
    cases.append(_request_case("response_payload_at_limit_no_pq", keys, queue, b"{}", None,
                               _pattern(max_response_payload(pq_support=False), "a")))
    keys = _address("contact_queue", False, True)
    for mode, name in (("C", "reply_queue_contact_mode"), (None, "reply_queue_no_mode")):
        queue = _queue(name, ("smp.example.net",), mode)
        cases.append(_request_case(name, keys, queue, b'{"m":1}', None, b'{"r":2}'))
    keys = _address("rejection", True, True)
    cases.append(_request_case("rejection", keys, _queue("rejection", ("smp.example.net",)),
                               b'{"m":1}', None, b"busy", rejection=True))
    cases.extend(_negative_cases())
    cases.extend(_response_error_cases(cases[4]))
    return _document("agent_crypto", cases)


# -- checking ---------------------------------------------------------------------------------


def _verify_agent_crypto(c: _Checker, case: Case, impls: list[Backend]) -> None:
    kind = case["type"]
    if kind == "request":
        for b in impls:
            c.run(case, functools.partial(_check_request, c, case, b), b)
    elif kind == "message_error":
        keys = _address_of(case["address"])
        message = _h(case, "message")
        for b in impls:
            _raises_layer(c, case, lambda b=b: _crypto().open_request_on(b, message, keys), b)
    elif kind == "response_error":
        answer = _h(case, "response_message")
        for b in impls:
            state = _reseal(case, b).state
            _raises_layer(
                c, case, lambda b=b, s=state: _crypto().open_response_on(b, answer, s), b
            )
    else:
        raise ValueError(f"type {kind!r}")


def _raises_layer(c: _Checker, case: Case, action: Any, b: Backend) -> None:
    try:
        action()
    except SimplexRpcError as exc:
        c.expect(case, type(exc).__name__ == case["error"],
                 f"raised {type(exc).__name__} ({exc}), not {case['error']}", b)
        if isinstance(exc, AgentCryptoError):
            c.expect(case, exc.layer == case["layer"],
                     f"layer {exc.layer!r}, not {case['layer']!r}", b)
        return
    c.fail(case, f"no error, where {case['error']} is due", b)


def _reseal(case: Case, b: Backend) -> Any:
    ac = _crypto()
    keys = _address_of(case["address"])
    seed = case["seed"]
    return ac.seal_request_on(
        b,
        _h(case, "payload"),
        keys.public,
        reply_queue=_queue_of(case["reply_queue"]),
        sign_key=None if seed is None else SigningKey.from_seed(bytes.fromhex(seed)),
        randomness=_randomness_of(ac.RequestRandomness, case["request_randomness"]),
        agent_version=case["agent_version"],
        client_version=case["client_version"],
    )


def _check_request(c: _Checker, case: Case, b: Backend) -> None:
    ac = _crypto()
    keys = _address_of(case["address"])
    message = _h(case, "message")
    got = ac.open_request_on(b, message, keys)
    c.expect(case, got.payload == _h(case, "payload"), "the opened payload differs", b)
    c.expect(case, got.ad == _h(case, "rc_ad"), "rcAD differs", b)
    c.expect(case, hashlib.sha256(got.padded_block).hexdigest() == case["inner_padded_sha256"],
             "the padded block's SHA-256 differs", b)
    seed = case["seed"]
    want = None if seed is None else SigningKey.from_seed(bytes.fromhex(seed)).public_key
    c.expect(case, got.signer == want, "the signer differs", b)
    sent = _reseal(case, b)
    c.expect(case, sent.message == message, "resealing gives other bytes", b)
    rr = _randomness_of(ac.ResponseRandomness, case["response_randomness"])
    response = _h(case, "response_payload")
    answer = _h(case, "response_message")
    if case["response_type"] == "J":
        again = ac.seal_service_rejection(response, got.reply, randomness=rr)
        try:
            ac.open_response_on(b, answer, sent.state)
        except ServiceRejected as exc:
            c.expect(case, exc.reason == response, "the rejection's reason differs", b)
        else:
            c.fail(case, "the rejection opened as a response", b)
    else:
        again = ac.seal_response_on(b, response, got.reply, randomness=rr)
        c.expect(case, ac.open_response_on(b, answer, sent.state) == response,
                 "the answer opens to another payload", b)
    c.expect(case, again == answer, "resealing the answer gives other bytes", b)

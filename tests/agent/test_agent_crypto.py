"""Service RPC cryptography (agent v8) against an independent stand-in of both parties.

The stand-in (tests/_agent_crypto_standin.py) is the tests' own code, written from
simplexmq's rules (commit 22815214…) with another cryptography library. The library
and the stand-in are given the same randomness and must produce the same bytes, and
each opens what the other seals.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from typing import Any

import pytest
from pqcrypto.kem import sntrup_761

import _agent_crypto_standin as standin
from simplex_rpc import BadSignature, PayloadTooLarge, SigningKey
from simplex_rpc._wire import agent_crypto as ac
from simplex_rpc.agent import SMPQueueInfo, SMPServer, max_request_payload, max_response_payload
from simplex_rpc.errors import AgentCryptoError, FrameError, PaddingError, ServiceRejected

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

# (has a KEM, PQ support): the three combinations simplexmq makes (IKUsePQ, IKPQOn, IKPQOff)
SETTINGS = [(True, True), (False, True), (False, False)]


def fixed(label: str, n: int) -> bytes:
    return hashlib.shake_256(label.encode()).digest(n)


_KEM_PAIRS: dict[str, tuple[bytes, bytes]] = {}


def kem_pair(label: str) -> tuple[bytes, bytes]:
    """An sntrup761 pair (secret, public), the same for a label within a test run."""
    if label not in _KEM_PAIRS:
        public, secret = sntrup_761.keygen()
        _KEM_PAIRS[label] = (bytes(secret), bytes(public))
    return _KEM_PAIRS[label]


def address(label: str, kem: bool, pq_support: bool) -> ac.AddressKeys:
    return ac.AddressKeys.from_raw(
        queue_dh=fixed(label + "dh", 32),
        k1=fixed(label + "k1", 56),
        k2=fixed(label + "k2", 56),
        kem=kem_pair(label) if kem else None,
        key_id=fixed(label + "id", 16),
        pq_support=pq_support,
    )


def request_randomness(label: str, keys: ac.AddressPublicKeys) -> ac.RequestRandomness:
    secret, public = kem_pair(label + "requester")
    ct = ss = None
    if keys.kem is not None:
        ct, ss = (bytes(x) for x in sntrup_761.encaps(keys.kem))
    return ac.RequestRandomness(
        e2e_k1=fixed(label + "e1", 56),
        e2e_k2=fixed(label + "e2", 56),
        ratchet_key=fixed(label + "rk", 56),
        kem_secret=secret,
        kem_public=public,
        kem_ciphertext=ct,
        kem_shared=ss,
        box_key=fixed(label + "box", 32),
        nonce=fixed(label + "nonce", 24),
        reply_dh=fixed(label + "reply", 32),
    )


def response_randomness(
    label: str, reply: ac.ServiceReply, mode: str | None = "M"
) -> ac.ResponseRandomness:
    secret = public = ct = ss = None
    if reply.pq_support:
        secret, public = kem_pair(label + "service")
        ct, ss = (bytes(x) for x in sntrup_761.encaps(reply._peer_kem))
    return ac.ResponseRandomness(
        ratchet_key=fixed(label + "srk", 56),
        kem_secret=secret,
        kem_public=public,
        kem_ciphertext=ct,
        kem_shared=ss,
        e2e_key=fixed(label + "e2e", 32),
        nonce=fixed(label + "snonce", 24),
        auth_seed=None if mode == "M" else fixed(label + "auth", 32),
    )


_NO_KEY = bytes.fromhex("302a300506032b656e032100") + bytes(32)  # replaced by the sealing


def queue(mode: str | None = "M", hosts: tuple[str, ...] = ("smp.example.net",)) -> SMPQueueInfo:
    server = SMPServer(hosts, "5223", fixed("kh", 32))
    return SMPQueueInfo(4, server, fixed("sid", 24), _NO_KEY, mode)  # type: ignore[arg-type]


def standin_address(keys: ac.AddressKeys) -> standin.Address:
    raw = keys.raw()
    kem = raw["kem"]
    return standin.Address(
        raw["queue_dh"], raw["k1"], raw["k2"], kem and kem[0], kem and kem[1], raw["key_id"],
        raw["pq_support"],
    )


def standin_public(keys: ac.AddressPublicKeys) -> dict[str, Any]:
    return {"queue_dh": keys.queue_dh, "k1": keys.k1, "k2": keys.k2, "kem": keys.kem,
            "key_id": keys.key_id}


def standin_queue(q: SMPQueueInfo) -> dict[str, Any]:
    return {"hosts": list(q.server.hosts), "port": q.server.port, "key_hash": q.server.key_hash,
            "sender_id": q.sender_id, "client_version": q.client_version,
            "queue_mode": q.queue_mode}


def rand_dict(r: Any) -> dict[str, Any]:
    return {name: getattr(r, name) for name in r.__dataclass_fields__}


# -- interoperability ------------------------------------------------------------------------


@pytest.mark.parametrize(("kem", "pq"), SETTINGS)
@pytest.mark.parametrize("signed", [False, True])
def test_library_request_opened_by_standin_and_standin_answer_opened_by_library(
    kem: bool, pq: bool, signed: bool
) -> None:
    """joinConnSrv' (library) -> smpContactRequest (stand-in) -> prepareReply (stand-in)."""
    service = address("a", kem, pq)
    key = SigningKey.from_seed(fixed("seed", 32)) if signed else None
    sent = ac.seal_service_request(
        b'{"method":"ping"}', service.public, reply_queue=queue(), sign_key=key,
        randomness=request_randomness("r", service.public),
    )
    got = standin.service_open(sent.message, standin_address(service))
    assert got["payload"] == b'{"method":"ping"}'
    assert got["ad"] == sent.ad and len(sent.ad) == 112  # pubKeyBytes sk1 <> pubKeyBytes rk1
    assert got["signer"] == (key.public_key.raw if key else None)
    assert got["padded_block"] == sent.padded_block and len(sent.padded_block) == 11106
    rr = {"ratchet_key": fixed("s1", 56), "e2e_key": fixed("s2", 32), "nonce": fixed("s3", 24),
          "kem_secret": None, "kem_public": None, "kem_ciphertext": None, "kem_shared": None,
          "auth_seed": None}
    if pq:
        secret, public = kem_pair("standin-service")
        ct, ss = sntrup_761.encaps(got["reply"]["peer_kem"])
        rr.update(kem_secret=secret, kem_public=public, kem_ciphertext=ct, kem_shared=ss)
    answer = standin.service_answer(b"P" + b'{"result":"pong"}', got["reply"], rr)
    assert ac.open_service_response(answer, sent.state) == b'{"result":"pong"}'


@pytest.mark.parametrize(("kem", "pq"), SETTINGS)
@pytest.mark.parametrize("signed", [False, True])
def test_standin_request_opened_by_library_and_library_answer_opened_by_standin(
    kem: bool, pq: bool, signed: bool
) -> None:
    """joinConnSrv' (stand-in) -> smpContactRequest (library) -> prepareReply (library)."""
    service = address("b", kem, pq)
    r = request_randomness("q", service.public)
    seed = fixed("seed2", 32) if signed else None
    message, state = standin.requester_seal(
        b"payload", standin_public(service.public), standin_queue(queue()), seed, rand_dict(r)
    )
    got = ac.open_service_request(message, service)
    assert got.payload == b"payload"
    assert got.ad == state["ad"]
    assert got.signer == (SigningKey.from_seed(seed).public_key if seed else None)
    assert got.reply_queues[0] == dataclasses.replace(
        queue(), dh_public_key=standin.X25519_PREFIX + standin.x25519_pub(r.reply_dh)
    )
    answer = ac.seal_service_response(b"answer", got.reply,
                                      randomness=response_randomness("s", got.reply))
    assert standin.requester_open(answer, state) == ("P", b"answer")


@pytest.mark.parametrize(("kem", "pq"), SETTINGS)
@pytest.mark.parametrize("mode", ["M", "C", None])
def test_same_randomness_same_bytes_in_both_implementations(
    kem: bool, pq: bool, mode: str | None
) -> None:
    """Fixed inputs give byte-identical requests and answers, from the library and the stand-in."""
    service = address("c", kem, pq)
    r = request_randomness("same", service.public)
    key = SigningKey.from_seed(fixed("seed3", 32))
    sent = ac.seal_service_request(b"x" * 100, service.public, reply_queue=queue(mode),
                                   sign_key=key, randomness=r)
    again = ac.seal_service_request(b"x" * 100, service.public, reply_queue=queue(mode),
                                    sign_key=key, randomness=r)
    theirs, _ = standin.requester_seal(b"x" * 100, standin_public(service.public),
                                       standin_queue(queue(mode)), fixed("seed3", 32),
                                       rand_dict(r))
    assert sent.message == again.message == theirs
    assert len(sent.message) == 2 + 1 + 45 + 24 + 15920  # PubHeader, nonce, box of 15,904
    got = ac.open_service_request(sent.message, service)
    rr = response_randomness("same", got.reply, mode)
    ours = ac.seal_service_response(b"y" * 50, got.reply, randomness=rr)
    their_reply = standin.service_open(sent.message, standin_address(service))["reply"]
    assert ours == standin.service_answer(b"P" + b"y" * 50, their_reply, rand_dict(rr))
    # sendConfirmation: '_' on a messaging queue, 'K' and the Ed25519 auth key otherwise
    header = standin.unbox(ours, r.reply_dh)[1][:1]
    assert header == (b"_" if mode == "M" else b"K")
    assert ac.open_service_response(ours, sent.state) == b"y" * 50


@pytest.mark.parametrize(("kem", "pq"), SETTINGS)
def test_answer_padding_follows_pq_support(kem: bool, pq: bool) -> None:
    """e2eEncConnInfoLength: 11,106 with PQ support, 14,832 without; paddedHeaderLen 2,310 or 88."""
    service = address("d", kem, pq)
    sent = ac.seal_service_request(b"q", service.public, reply_queue=queue(),
                                   randomness=request_randomness("d", service.public))
    got = ac.open_service_request(sent.message, service)
    limit = max_response_payload(pq_support=pq)
    assert limit == (11103 if pq else 14829)
    answer = ac.seal_service_response(b"z" * limit, got.reply,
                                      randomness=response_randomness("d", got.reply))
    kind, payload = standin.requester_open(answer, {**_state(sent)})
    assert (kind, payload) == ("P", b"z" * limit)
    _, cm = standin.unbox(answer, sent.state._reply_dh)
    em = standin.Cursor(cm[5:]).lg()  # after "_", the agent version, "C" and "0"
    assert len(em) == 2 + 16 + 16 + 2 + (2310 if pq else 88)
    with pytest.raises(PayloadTooLarge):
        ac.seal_service_response(b"z" * (limit + 1), got.reply)


def _state(sent: ac.SealedRequest) -> dict[str, Any]:
    s = sent.state
    return {"ad": s.ad, "root": s._root_key, "nhk": s._nhk, "ratchet_key": s._ratchet_key,
            "kem_secret": s._kem_secret, "reply_dh": s._reply_dh}


def test_request_payload_at_the_limit_and_one_over() -> None:
    service = address("e", True, True)
    for hosts in (("a.example",), ("a.example", "b.example", "c.onion")):
        for key in (None, SigningKey.from_seed(fixed("k", 32))):
            q = queue(hosts=hosts)
            limit = max_request_payload(q, signed=key is not None)
            payload = bytes(range(256)) * (limit // 256) + b"!" * (limit % 256)
            sent = ac.seal_service_request(payload, service.public, reply_queue=q, sign_key=key,
                                           randomness=request_randomness("e", service.public))
            assert ac.open_service_request(sent.message, service).payload == payload
            assert sent.padded_block[-1:] != b"#" or len(payload) == 0
            with pytest.raises(PayloadTooLarge) as info:
                ac.seal_service_request(payload + b"!", service.public, reply_queue=q,
                                        sign_key=key)
            assert info.value.limit == limit


def test_rejection_is_an_error_carrying_the_reason() -> None:
    service = address("f", False, True)
    sent = ac.seal_service_request(b"q", service.public, reply_queue=queue(),
                                   randomness=request_randomness("f", service.public))
    got = ac.open_service_request(sent.message, service)
    answer = ac.seal_service_rejection(b"busy", got.reply)
    with pytest.raises(ServiceRejected) as info:
        ac.open_service_response(answer, sent.state)
    assert info.value.reason == b"busy"


# -- binding and keys ------------------------------------------------------------------------------


def test_signature_moved_to_another_request_fails() -> None:
    """verifyServiceReq: the signature is over SHA3-256("SimpleXService" ‖ rcAD) ‖ payload."""
    service = address("g", True, True)
    key = SigningKey.from_seed(fixed("mover", 32))
    one = ac.seal_service_request(b"same payload", service.public, reply_queue=queue(),
                                  sign_key=key)
    other = request_randomness("h", service.public)
    # the stand-in seals a second request whose signature is the first's (another rcAD)
    got = standin.service_open(one.message, standin_address(service))
    sig = got["padded_block"][2:][-(len(b"same payload") + 64) : -len(b"same payload")]
    message, _ = _reseal_with_signature(service, other, key.public_key.raw, sig, b"same payload")
    with pytest.raises(BadSignature):
        ac.open_service_request(message, service)


def _reseal_with_signature(
    service: ac.AddressKeys, r: ac.RequestRandomness, public: bytes, sig: bytes, payload: bytes
) -> tuple[bytes, dict[str, Any]]:
    """A request whose 'A' block carries a given (key, signature): the stand-in's sealing."""
    original = standin.ed25519_sign
    standin.ed25519_sign = lambda seed, msg: (public, sig)  # type: ignore[assignment]
    try:
        return standin.requester_seal(payload, standin_public(service.public),
                                      standin_queue(queue()), b"\0" * 32, rand_dict(r))
    finally:
        standin.ed25519_sign = original  # type: ignore[assignment]


def test_message_opened_with_another_address_fails() -> None:
    one = address("i", True, True)
    two = address("j", True, True)
    sent = ac.seal_service_request(b"q", one.public, reply_queue=queue())
    with pytest.raises(AgentCryptoError) as info:
        ac.open_service_request(sent.message, two)
    assert info.value.layer == "request box"
    # the same queue key, other ratchet keys: the ratchetKeyId no longer matches
    three = ac.AddressKeys.from_raw(**{**one.raw(), "key_id": fixed("other", 16)})
    with pytest.raises(AgentCryptoError) as info:
        ac.open_service_request(sent.message, three)
    assert info.value.layer == "client message" and "ratchetKeyId" in str(info.value)
    # the same queue key and key id, other X448 keys: the header does not decrypt
    four = ac.AddressKeys.from_raw(**{**one.raw(), "k1": fixed("k1'", 56)})
    with pytest.raises(AgentCryptoError) as info:
        ac.open_service_request(sent.message, four)
    assert info.value.layer == "ratchet header GCM"


def test_link_data_is_address_ratchet_keys() -> None:
    """AddressRatchetKeys = (RatchetKeyId, RcvE2ERatchetParamsUri 'X448), V8 UserContactData."""
    keys = address("k", True, True).public
    data = keys.link_data()
    c = standin.Cursor(data)
    assert c.bs() == keys.key_id
    assert (c.u16(), c.u16()) == (3, 3)
    assert standin.read_key(c, standin.X448_PREFIX) == keys.k1
    assert standin.read_key(c, standin.X448_PREFIX) == keys.k2
    assert standin.read_kem(c) == (None, keys.kem)
    assert c.rest() == b""
    assert ac.AddressPublicKeys.from_link_data(data, queue_dh=keys.queue_dh) == keys
    assert ac.AddressPublicKeys.decode(keys.encode()) == keys
    without = address("k", False, False).public
    assert without.link_data().endswith(b"0")
    bad = data[:-1]
    with pytest.raises(AgentCryptoError) as info:
        ac.AddressPublicKeys.from_link_data(bad, queue_dh=keys.queue_dh)
    assert info.value.offset is not None
    # an incompatible E2E version range
    wrong = data[:17] + b"\0\x04\0\x05" + data[21:]
    with pytest.raises(AgentCryptoError, match="do not include 3"):
        ac.AddressPublicKeys.from_link_data(wrong, queue_dh=keys.queue_dh)


def test_private_keys_round_trip_and_never_show() -> None:
    keys = address("l", True, True)
    assert ac.AddressKeys.decode(keys.encode()) == keys
    raw = keys.raw()
    shown = repr(keys) + str(keys) + repr(keys.public)
    for secret in (raw["queue_dh"], raw["k1"], raw["k2"], raw["kem"][0]):
        assert secret.hex()[:16] not in shown
    sent = ac.seal_service_request(b"q", keys.public, reply_queue=queue())
    got = ac.open_service_request(sent.message, keys)
    r = request_randomness("l", keys.public)
    for value in (repr(sent), repr(sent.state), repr(got), repr(got.reply), repr(r)):
        assert "redacted" in value or "bytes" in value
        assert r.box_key.hex()[:16] not in value
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(keys)


def test_a_kem_without_pq_support_is_refused() -> None:
    with pytest.raises(AgentCryptoError, match="without PQ support"):
        address("m", True, False)


def test_generate_defaults() -> None:
    pq = ac.AddressKeys.generate(pq=True)
    assert pq.public.kem is not None and pq.pq_support
    plain = ac.AddressKeys.generate(pq=False)
    assert plain.public.kem is None and not plain.pq_support
    assert ac.AddressKeys.generate(pq=False, pq_support=True).pq_support


# -- strict decoding: a flipped bit in each layer -----------------------------------------------


def _flip(message: bytes, at: int) -> bytes:
    return message[:at] + bytes([message[at] ^ 0x01]) + message[at + 1 :]


def test_a_flipped_bit_in_each_layer_names_it() -> None:
    service = address("n", True, True)
    r = request_randomness("n", service.public)
    sent = ac.seal_service_request(b"q" * 10, service.public, reply_queue=queue(), randomness=r)
    cases = {
        0: "request envelope",  # the SMP client version becomes 0x0104
        2: "request envelope",  # the Maybe of the sender key
        3: "request envelope",  # the SPKI's length
        10: "request envelope",  # the SPKI's prefix
        60: "request box",  # the nonce
        100: "request box",  # the box
    }
    for at, layer in cases.items():
        with pytest.raises(AgentCryptoError) as info:
            ac.open_service_request(_flip(sent.message, at), service)
        assert info.value.layer == layer, (at, str(info.value))


def _rebox(service: ac.AddressKeys, r: ac.RequestRandomness, client_message: bytes) -> bytes:
    boxed = standin.box(client_message, r.nonce, service.public.queue_dh, r.box_key)
    return (b"\0\x04" + b"1" + standin.bs(standin.X25519_PREFIX + standin.x25519_pub(r.box_key))
            + r.nonce + boxed)


def test_inner_layers_decode_strictly() -> None:
    """Inside the box: the private header, the envelope, E2E parameters, ratchet, GCM tags."""
    service = address("o", True, True)
    r = request_randomness("o", service.public)
    sent = ac.seal_service_request(b"q" * 10, service.public, reply_queue=queue(), randomness=r)
    _, cm = standin.unbox(sent.message, service.raw()["queue_dh"])
    enc_start = len(cm) - (2 + 2346 + 16 + 11106)

    def fails(client_message: bytes) -> AgentCryptoError:
        with pytest.raises(AgentCryptoError) as info:
            ac.open_service_request(_rebox(service, r, client_message), service)
        return info.value

    assert fails(b"K" + cm[1:]).layer == "client message"  # not PHEmpty
    err = fails(cm[:1] + b"\0\x09" + cm[3:])  # agent version 9
    assert (err.layer, err.offset) == ("client message", 1)
    err = fails(cm[:3] + b"C" + cm[4:])  # AgentConfirmation where a contact request is due
    assert (err.layer, err.offset) == ("client message", 3)
    err = fails(cm[:4] + b"\0\x02" + cm[6:])  # E2E version 2
    assert (err.layer, err.offset) == ("client message", 4)
    kem_at = 4 + 2 + 69 + 69
    err = fails(cm[: kem_at + 2] + b"\x04\x0e" + cm[kem_at + 4 :])  # ciphertext 1038 bytes long
    assert err.layer == "client message" and "sntrup761 ciphertext" in str(err)
    assert fails(cm[: kem_at + 1] + b"X" + cm[kem_at + 2 :]).offset == kem_at + 1
    header_body = enc_start + 2 + 2 + 16 + 16 + 2 + 5
    assert fails(_flip(cm, header_body)).layer == "ratchet header GCM"
    assert fails(_flip(cm, enc_start + 2 + 2 + 3)).layer == "ratchet header GCM"  # the header IV
    err = fails(cm[: enc_start + 2] + b"\0\x04" + cm[enc_start + 4 :])  # ratchet version 4
    assert (err.layer, err.offset) == ("encrypted ratchet header", 0)
    assert fails(_flip(cm, len(cm) - 1)).layer == "ratchet message GCM"
    assert fails(_flip(cm, enc_start + 2 + 2346)).layer == "ratchet message GCM"  # the tag
    err = fails(cm[:enc_start] + b"\xff\xff" + cm[enc_start + 2 :])
    assert err.layer == "ratchet message"


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (b"\x00\x03X12" + b"#" * 11101, FrameError),  # a tag that is not the agent's
        (b"\x00\x02A\x00" + b"#" * 11102, FrameError),  # no reply queue (NonEmpty)
        (b"\x00\x01P" + b"#" * 11103, FrameError),  # a response where a request is due
        (b"\x00\x01A" + b"#" * 11102 + b"!", PaddingError),  # fill that is not '#' (ours)
        (b"\x00\x01A" + b"#" * 11000, PaddingError),  # padded to 11,003, not 11,106
    ],
)
def test_the_padded_block_decodes_strictly(block: bytes, error: type[Exception]) -> None:
    """Inside a ratchet message that decrypts, the block is the wire layer's to refuse."""
    service = address("s", False, True)
    r = request_randomness("s", service.public)
    message, _ = standin.requester_seal(b"", standin_public(service.public),
                                        standin_queue(queue()), None, rand_dict(r),
                                        block_override=block)
    with pytest.raises(error):
        ac.open_service_request(message, service)


def test_answers_decode_strictly() -> None:
    service = address("p", False, False)
    sent = ac.seal_service_request(b"q", service.public, reply_queue=queue(),
                                   randomness=request_randomness("p", service.public))
    got = ac.open_service_request(sent.message, service)
    answer = ac.seal_service_response(b"a", got.reply,
                                      randomness=response_randomness("p", got.reply))
    for at, layer in ((0, "response envelope"), (80, "response box"), (5000, "response box")):
        with pytest.raises(AgentCryptoError) as info:
            ac.open_service_response(_flip(answer, at), sent.state)
        assert info.value.layer == layer
    # the request itself, sent back as an answer, is refused by the box (another key)
    with pytest.raises(AgentCryptoError):
        ac.open_service_response(sent.message, sent.state)


def test_without_the_sntrup761_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """One clear error naming the extra for PQ work; the rest works with injected randomness."""
    plain = address("q", False, False)
    r = request_randomness("q", plain.public)  # the requester's KEM pair made beforehand
    monkeypatch.setitem(sys.modules, "pqcrypto.kem", None)
    with pytest.raises(AgentCryptoError, match=r"simplex-rpc\[sntrup761\]"):
        ac.AddressKeys.generate(pq=True)
    with pytest.raises(AgentCryptoError, match=r"simplex-rpc\[sntrup761\]"):
        ac.seal_service_request(b"q", plain.public, reply_queue=queue())
    sent = ac.seal_service_request(b"q", plain.public, reply_queue=queue(), randomness=r)
    got = ac.open_service_request(sent.message, plain)
    answer = ac.seal_service_response(b"a", got.reply)
    assert ac.open_service_response(answer, sent.state) == b"a"
    pq = address("q2", True, True)
    with pytest.raises(AgentCryptoError, match=r"simplex-rpc\[sntrup761\]"):
        ac.open_service_request(
            ac.seal_service_request(b"q", pq.public, reply_queue=queue(),
                                    randomness=_prepared(pq)).message,
            pq,
        )


def _prepared(keys: ac.AddressKeys) -> ac.RequestRandomness:
    return _PREPARED[keys.key_id]


_PREPARED: dict[bytes, ac.RequestRandomness] = {}


@pytest.fixture(autouse=True)
def _prepare_pq_randomness() -> None:
    pq = address("q2", True, True)
    if pq.key_id not in _PREPARED:
        _PREPARED[pq.key_id] = request_randomness("q2", pq.public)


def test_keys_of_small_order_are_library_errors() -> None:
    """libsodium and OpenSSL refuse an all-zero shared secret: the library names the layer."""
    service = address("t", False, False)
    p = service.public
    zero_queue = ac.AddressPublicKeys(queue_dh=bytes(32), k1=p.k1, k2=p.k2, kem=None,
                                      key_id=p.key_id)
    with pytest.raises(AgentCryptoError) as info:
        ac.seal_service_request(b"x", zero_queue, reply_queue=queue())
    assert info.value.layer == "box"
    zero_k1 = ac.AddressPublicKeys(queue_dh=p.queue_dh, k1=bytes(56), k2=p.k2, kem=None,
                                   key_id=p.key_id)
    with pytest.raises(AgentCryptoError, match="small order"):
        ac.seal_service_request(b"x", zero_k1, reply_queue=queue())
    sent = ac.seal_service_request(b"x", p, reply_queue=queue())
    at = 2 + 1 + 1 + 12  # the sender key's raw bytes inside its SPKI
    zero_sender = sent.message[:at] + bytes(32) + sent.message[at + 32 :]
    with pytest.raises(AgentCryptoError) as info:
        ac.open_service_request(zero_sender, service)
    assert info.value.layer == "request box"
    with pytest.raises(AgentCryptoError, match="client_version"):
        ac.seal_service_request(b"x", p, reply_queue=queue(), client_version=70000)


def test_mangled_private_texts_never_show_key_material() -> None:
    """Decode errors of private keys, states and reply contexts name offsets, never bytes."""
    import copy

    keys = address("u", True, True)
    sent = ac.seal_service_request(b"x", keys.public, reply_queue=queue(),
                                   randomness=request_randomness("u", keys.public))
    got = ac.open_service_request(sent.message, keys)
    for value, cls in ((keys, ac.AddressKeys), (sent.state, ac.RequesterState),
                       (got.reply, ac.ServiceReply)):
        text = value.encode()
        with pytest.raises(TypeError):
            copy.deepcopy(value)
        assert cls.decode(text).encode() == text
        refused = 0
        for at in range(0, len(text), max(1, len(text) // 40)):
            for mangled in (text[:at] + "!" + text[at + 1 :], text[:at]):
                try:
                    cls.decode(mangled)
                except (AgentCryptoError, FrameError) as exc:
                    shown = str(exc)
                    assert all(text[i : i + 12] not in shown for i in range(0, len(text) - 12, 6))
                    refused += 1
        assert refused >= 40, cls


def test_the_replay_key_is_the_agents_duplicate_request_hash() -> None:
    """smpContactRequest's duplicateRequest: sha256(pubKeyBytes k1 <> pubKeyBytes k2)."""
    service = address("v", False, True)
    r = request_randomness("v", service.public)
    sent = ac.seal_service_request(b"x", service.public, reply_queue=queue(), randomness=r)
    got = ac.open_service_request(sent.message, service)
    k1, k2 = standin.x448_pub(r.e2e_k1), standin.x448_pub(r.e2e_k2)
    assert got.replay_key == hashlib.sha256(k1 + k2).digest()
    again = ac.open_service_request(sent.message, service)  # stateless: the caller dedupes
    assert again.replay_key == got.replay_key

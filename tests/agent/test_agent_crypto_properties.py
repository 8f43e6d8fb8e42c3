"""Round-trip properties of the Service RPC cryptography (agent v8), with hypothesis.

Random payloads, keys and PQ settings: a request seals and opens to its payload and
AD, its answer opens to the response; a signature moved between two requests fails
(verifyServiceReq binds it to rcAD), and a message opened with another address's
keys fails.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pqcrypto.kem import sntrup_761

from _hypothesis import examples
from simplex_rpc import BadSignature, SigningKey
from simplex_rpc._wire import agent_crypto as ac
from simplex_rpc._wire import backend
from simplex_rpc.agent import SMPQueueInfo, SMPServer, max_request_payload, max_response_payload
from simplex_rpc.errors import AgentCryptoError, SimplexRpcError

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

# sntrup761 key generation takes tens of milliseconds: a few pairs serve every example.
_PAIRS = [tuple(bytes(x) for x in reversed(sntrup_761.keygen())) for _ in range(3)]
SETTINGS = [(True, True), (False, True), (False, False)]


def _kem(index: int) -> tuple[bytes, bytes]:
    secret, public = _PAIRS[index % len(_PAIRS)]
    return secret, public


@st.composite
def addresses(draw: st.DrawFn) -> ac.AddressKeys:
    kem, pq = draw(st.sampled_from(SETTINGS))
    return ac.AddressKeys.from_raw(
        queue_dh=draw(st.binary(min_size=32, max_size=32)),
        k1=draw(st.binary(min_size=56, max_size=56)),
        k2=draw(st.binary(min_size=56, max_size=56)),
        kem=_kem(draw(st.integers(0, 2))) if kem else None,
        key_id=draw(st.binary(min_size=1, max_size=32)),
        pq_support=pq,
    )


def _randomness(seed: bytes, keys: ac.AddressPublicKeys) -> ac.RequestRandomness:
    def part(label: str, n: int) -> bytes:
        return hashlib.shake_256(seed + label.encode()).digest(n)

    ct = ss = None
    if keys.kem is not None:
        ct, ss = (bytes(x) for x in sntrup_761.encaps(keys.kem))
    secret, public = _kem(seed[0] if seed else 0)
    return ac.RequestRandomness(
        e2e_k1=part("1", 56), e2e_k2=part("2", 56), ratchet_key=part("r", 56),
        kem_secret=secret, kem_public=public, kem_ciphertext=ct, kem_shared=ss,
        box_key=part("b", 32), nonce=part("n", 24), reply_dh=part("q", 32),
    )


QUEUE = SMPQueueInfo(4, SMPServer(("smp.example.net",)), b"s" * 24,
                     bytes.fromhex("302a300506032b656e032100") + bytes(32), "M")
SLOW = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SLOW
@given(
    address=addresses(),
    payload=st.binary(max_size=max_request_payload(QUEUE, signed=True)),
    response=st.binary(max_size=max_response_payload(pq_support=False)),
    seed=st.binary(min_size=1, max_size=8),
    signed=st.booleans(),
)
def test_request_and_answer_round_trip(
    address: ac.AddressKeys, payload: bytes, response: bytes, seed: bytes, signed: bool
) -> None:
    key = SigningKey.from_seed(hashlib.sha256(seed).digest()) if signed else None
    sent = ac.seal_service_request(payload, address.public, reply_queue=QUEUE, sign_key=key,
                                   randomness=_randomness(seed, address.public))
    got = ac.open_service_request(sent.message, address)
    assert (got.payload, got.ad) == (payload, sent.ad)
    assert got.signer == (key.public_key if key else None)
    response = response[: max_response_payload(pq_support=address.pq_support)]
    answer = ac.seal_service_response(response, got.reply)
    assert ac.open_service_response(answer, sent.state) == response


@SLOW
@given(
    one=addresses(),
    two=addresses(),
    payload=st.binary(max_size=300),
    seed=st.binary(min_size=1, max_size=8),
)
def test_a_signature_moved_between_two_requests_fails(
    one: ac.AddressKeys, two: ac.AddressKeys, payload: bytes, seed: bytes
) -> None:
    """The signature of a request to ``one`` put into a request to ``two`` fails there."""
    key = SigningKey.from_seed(hashlib.sha256(seed).digest())
    first = ac.seal_service_request(payload, one.public, reply_queue=QUEUE, sign_key=key,
                                    randomness=_randomness(seed, one.public))
    # the second request carries the first's signature: made over the first's rcAD
    second = ac.seal_request_on(_SignsUnder(first.ad), payload, two.public, reply_queue=QUEUE,
                                sign_key=key, randomness=_randomness(seed + b"2", two.public))
    assert second.ad != first.ad
    try:
        ac.open_service_request(second.message, two)
    except BadSignature:
        return
    raise AssertionError("a moved signature verified")


class _SignsUnder:
    """A backend for the block that signs under a given AD (another request's rcAD)."""

    name = "moved"

    def __init__(self, ad: bytes) -> None:
        self.ad = ad

    def seal_request(
        self, payload: bytes, ad: bytes, key: SigningKey | None, *, reply_queue: SMPQueueInfo
    ) -> bytes:
        return backend.active.seal_request(payload, self.ad, key, reply_queue=reply_queue)


@SLOW
@given(one=addresses(), two=addresses(), payload=st.binary(max_size=300))
def test_a_message_opened_with_another_address_fails(
    one: ac.AddressKeys, two: ac.AddressKeys, payload: bytes
) -> None:
    # another address: other keys (the KEM alone does not make one: a request that
    # proposes a KEM opens at an address with the same X448 keys, as pqX3dhRcv allows)
    def keys(a: ac.AddressKeys) -> tuple[bytes, ...]:
        return (a.public.queue_dh, a.public.k1, a.public.k2, a.key_id)

    assume(keys(two) != keys(one))
    sent = ac.seal_service_request(payload, one.public, reply_queue=QUEUE,
                                   randomness=_randomness(b"x", one.public))
    try:
        ac.open_service_request(sent.message, two)
    except AgentCryptoError as exc:
        # the box (another queue key), the ratchetKeyId, or the header's GCM tag (other X448
        # keys), or the KEM state (an accepted KEM at an address without one)
        assert exc.layer in ("request box", "client message", "ratchet header GCM")
        return
    raise AssertionError("opened with another address's keys")


_ADDRESS = ac.AddressKeys.from_raw(
    queue_dh=bytes(range(32)), k1=bytes(range(56)), k2=bytes(range(1, 57)), kem=_kem(0),
    key_id=b"k" * 16,
)
_SENT = ac.seal_service_request(b'{"q":1}', _ADDRESS.public, reply_queue=QUEUE,
                                randomness=_randomness(b"hostile", _ADDRESS.public))
_REPLY = ac.open_service_request(_SENT.message, _ADDRESS).reply
_ANSWER = ac.seal_service_response(b'{"a":2}', _REPLY)


# Messages of the SMP body's size are built from a short random head and a random
# tail size, not drawn whole: 16,000 drawn bytes trip Hypothesis's data_too_large
# health check on a loaded machine.
_NEAR_BODY_SIZE = st.builds(
    lambda head, fill, size: (head + bytes([fill]) * size)[: max(size, len(head))],
    st.binary(max_size=64),
    st.integers(0, 255),
    st.integers(15990, 16000),
)


@settings(max_examples=examples(200), deadline=None)
@given(data=st.binary(max_size=400) | _NEAR_BODY_SIZE)
def test_arbitrary_bytes_are_refused_with_the_library_errors(data: bytes) -> None:
    """Hostile input: never a crash, only the library's own errors."""
    for action in (lambda: ac.open_service_request(data, _ADDRESS),
                   lambda: ac.open_service_response(data, _SENT.state)):
        try:
            action()
        except SimplexRpcError:
            continue
        raise AssertionError("opened arbitrary bytes")


# The PubHeader: the version (2 bytes), Just ('1'), the key's length (1 byte), then the
# X25519 key as X.509 SubjectPublicKeyInfo (12 bytes of prefix, 32 of key): its last byte.
_X25519_TOP_BYTE = 2 + 1 + 1 + 44 - 1


def test_the_x25519_keys_top_bit_is_ignored_as_rfc_7748_says() -> None:
    """X25519 masks the most significant bit of the u-coordinate's last byte (RFC 7748,
    section 5: "implementations of X25519 MUST mask the most significant bit in the
    final byte"), so a message whose PubHeader key differs there opens as the original
    does, here as in the agent (simplexmq decodes the key with crypton's X25519, which
    masks it too). Every other bit of the key is noticed (the property below)."""
    for message in (_SENT.message, _ANSWER):
        assert message[4:16] == bytes.fromhex("302a300506032b656e032100")  # X25519 SPKI
    flipped = bytearray(_SENT.message)
    flipped[_X25519_TOP_BYTE] ^= 0x80
    opened = ac.open_service_request(bytes(flipped), _ADDRESS)
    original = ac.open_service_request(_SENT.message, _ADDRESS)
    # The same request, the same rcAD: only the key's bytes as sent differ (in the reply).
    assert (opened.payload, opened.ad, opened.reply_queues) == (
        original.payload, original.ad, original.reply_queues)
    assert opened.payload == b'{"q":1}'
    flipped = bytearray(_ANSWER)
    flipped[_X25519_TOP_BYTE] ^= 0x80
    assert ac.open_service_response(bytes(flipped), _SENT.state) == b'{"a":2}'


@settings(max_examples=examples(200), deadline=None)
@given(at=st.integers(2, len(_SENT.message) - 1), bit=st.integers(0, 7))
def test_any_flipped_bit_is_refused(at: int, bit: int) -> None:
    """A flipped bit anywhere: the request or the answer no longer opens, with a library error.

    Not in the first two bytes: the PubHeader's SMP client version is outside the box,
    and a lower version (4 -> 0) is one the agent accepts (``phVer <= agreed``). Not the
    top bit of the X25519 key's last byte either: X25519 ignores it (RFC 7748, section 5),
    see the test below.
    """
    assume((at % len(_ANSWER), bit) != (_X25519_TOP_BYTE, 7))
    for message, action in ((_SENT.message, lambda m: ac.open_service_request(m, _ADDRESS)),
                            (_ANSWER, lambda m: ac.open_service_response(m, _SENT.state))):
        flipped = bytearray(message)
        flipped[at % len(message)] ^= 1 << bit
        try:
            action(bytes(flipped))
        except SimplexRpcError:
            continue
        raise AssertionError(f"a flipped bit at {at} was not noticed")

"""Domain separation of session-bound signatures (wire.md section 2, issue 7).

``signed_bytes = SHA3-256("SimpleXService" || AD) || payload``. A signature
made for one AD never verifies under another; a signature over one payload
never verifies another payload, even one that differs only in trailing fill
bytes of the padded block; and a raw Ed25519 signature is never a request
signature, nor the other way round. Each property is checked on
``PublicKey.verify_request`` and on ``open_request`` of every backend.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from _hypothesis import examples
from _queues import QUEUE
from simplex_rpc.agent import AgentServiceRequest, RequestSignature

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.security]

KEY = sx.SigningKey.from_seed(bytes(range(32)))
PUBLIC = KEY.public_key
ads = st.binary(min_size=1, max_size=160)
payloads = st.binary(max_size=300)


def _refused_everywhere(block: bytes, ad: bytes) -> None:
    for impl in sx.backends.values():
        with pytest.raises(sx.BadSignature):
            impl.open_request(block, ad)


@settings(max_examples=examples(150), deadline=None)
@given(ad1=ads, ad2=ads, payload=payloads)
def test_signature_for_one_ad_never_verifies_under_another(
    ad1: bytes, ad2: bytes, payload: bytes
) -> None:
    """A signature is bound to its session: another AD refuses it."""
    assume(ad1 != ad2)
    signature = KEY.sign_request(ad1, payload)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify_request(ad2, payload, signature)
    block = sx.seal_request(payload, ad1, KEY, reply_queue=QUEUE)
    _refused_everywhere(block, ad2)
    for impl in sx.backends.values():
        assert impl.open_request(block, ad1).signer == PUBLIC


@settings(max_examples=examples(150), deadline=None)
@given(ad=ads, payload=payloads, cut=st.integers(min_value=1, max_value=40))
def test_ad_and_payload_boundary_cannot_shift(ad: bytes, payload: bytes, cut: int) -> None:
    """Moving bytes between the end of the AD and the start of the payload breaks the signature.

    The AD is hashed into a fixed 32-byte tag, so (ad || x, payload) and
    (ad, x || payload) are different signed bytes.
    """
    signature = KEY.sign_request(ad, payload)
    moved = payload[:cut]
    assume(moved)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify_request(ad + moved, payload[len(moved) :], signature)
    if len(ad) > 1:
        shifted = ad[-cut:] if cut < len(ad) else ad[1:]
        with pytest.raises(sx.BadSignature):
            PUBLIC.verify_request(ad[: len(ad) - len(shifted)], shifted + payload, signature)


@settings(max_examples=examples(150), deadline=None)
@given(ad=ads, payload=payloads, other=payloads)
def test_signature_over_a_payload_never_verifies_another(
    ad: bytes, payload: bytes, other: bytes
) -> None:
    assume(payload != other)
    signature = KEY.sign_request(ad, payload)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify_request(ad, other, signature)


@settings(max_examples=examples(100), deadline=None)
@given(ad=ads, payload=payloads, extra=st.integers(min_value=1, max_value=64))
def test_payload_extended_into_the_fill_is_refused(ad: bytes, payload: bytes, extra: int) -> None:
    """Raising the block's length field takes '#' fill bytes into the payload: refused.

    This is the one change to a sealed block that keeps every byte and every
    frame field; it must still break the signature.
    """
    block = bytearray(sx.seal_request(payload, ad, KEY, reply_queue=QUEUE))
    length = int.from_bytes(block[:2], "big")
    block[:2] = (length + extra).to_bytes(2, "big")
    _refused_everywhere(bytes(block), ad)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify_request(ad, payload + b"#" * extra, KEY.sign_request(ad, payload))


@settings(max_examples=examples(100), deadline=None)
@given(ad=ads, payload=payloads.filter(bool), short=st.integers(min_value=1, max_value=64))
def test_payload_cut_short_into_the_fill_is_refused(ad: bytes, payload: bytes, short: int) -> None:
    """Lowering the length field turns the payload's tail into fill: refused."""
    short = min(short, len(payload))
    block = bytearray(sx.seal_request(payload, ad, KEY, reply_queue=QUEUE))
    length = int.from_bytes(block[:2], "big")
    block[:2] = (length - short).to_bytes(2, "big")
    _refused_everywhere(bytes(block), ad)


def test_payload_ending_in_fill_bytes_is_its_own_payload() -> None:
    """A payload that itself ends in '#' signs and verifies only as sent.

    Padding never strips '#': the length field, not the fill, fixes the payload.
    """
    ad = b"\x01" * 112
    for payload in (b"#", b"{}#", b"{}" + b"#" * 100):
        block = sx.seal_request(payload, ad, KEY, reply_queue=QUEUE)
        for impl in sx.backends.values():
            assert impl.open_request(block, ad).payload == payload
        with pytest.raises(sx.BadSignature):
            PUBLIC.verify_request(ad, payload.rstrip(b"#"), KEY.sign_request(ad, payload))


@settings(max_examples=examples(100), deadline=None)
@given(ad=ads, payload=payloads)
def test_raw_and_request_signatures_are_not_interchangeable(ad: bytes, payload: bytes) -> None:
    """``sign(payload)`` is not a request signature, and a request signature is not raw.

    The 32-byte session tag is always in front of the payload in the signed
    bytes; a raw signature over the payload alone never verifies as a request.
    """
    raw = KEY.sign(payload)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify_request(ad, payload, raw)
    request = KEY.sign_request(ad, payload)
    with pytest.raises(sx.BadSignature):
        PUBLIC.verify(payload, request)
    # The request signature is exactly a raw signature over tag || payload.
    PUBLIC.verify(sx.session_tag(ad) + payload, request)


@settings(max_examples=examples(100), deadline=None)
@given(ad=ads)
def test_session_tag_is_domain_separated(ad: bytes) -> None:
    """The tag is SHA3-256 over the domain then the AD, never the AD alone or another hash."""
    tag = sx.session_tag(ad)
    assert tag == hashlib.sha3_256(b"SimpleXService" + ad).digest()
    assert tag != hashlib.sha3_256(ad).digest()
    assert tag != hashlib.sha256(b"SimpleXService" + ad).digest()
    assert sx.SIGNING_DOMAIN == b"SimpleXService"


@settings(max_examples=examples(60), deadline=None)
@given(ad=ads, payload=payloads, seed=st.binary(min_size=32, max_size=32))
def test_signature_under_another_key_is_refused(ad: bytes, payload: bytes, seed: bytes) -> None:
    """A request whose key is replaced by another key (same signature) is refused."""
    other = sx.SigningKey.from_seed(seed).public_key
    assume(other != PUBLIC)
    signature = RequestSignature(other, KEY.sign_request(ad, payload))
    message = AgentServiceRequest((QUEUE,), signature, payload).encode()
    _refused_everywhere(sx.pad(message), ad)


def test_unsigned_request_has_no_signer_under_any_ad() -> None:
    """An unsigned block opens under any AD, with no signer: nothing is claimed."""
    block = sx.seal_request(b"{}", b"a", reply_queue=QUEUE)
    for impl in sx.backends.values():
        assert impl.open_request(block, b"b").signer is None


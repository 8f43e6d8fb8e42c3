"""The verification policy: strict, as libsodium (wire.md section 2, issue 7).

A signature is valid only when S < L, R and A are canonical encodings of
points that are not of small order, and the cofactorless equation
``[S]B == R + [k]A`` holds with R compared as bytes. The policy is the same
for every entry point (``PublicKey.verify``, ``verify_request``,
``open_request`` on every backend, ``open_requests``).

The tests use two small reference verifiers written from RFC 8032 section
5.1 in pure Python (in ``_ed25519_ref``): ``strict_verify`` (the policy
above) and ``donna_verify`` (cofactorless, top three bits of S only, no
canonical or small-order checks, as ed25519-donna, which the SimpleX core's
agent uses through crypton). The crafted cases of "Taming the many EdDSAs"
(Chalkias, Garillot, Nikolaenko, 2020) are built with them: each case that
the strict policy refuses but ``donna_verify`` accepts is one where the core
accepts a request that this library refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import nacl.bindings
import nacl.exceptions
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplex_rpc as sx
from _ed25519_ref import (
    BASE,
    IDENTITY,
    SMALL_ORDER_ENCODINGS,
    T8,
    TORSION,
    L,
    P,
    Point,
    add,
    challenge,
    decode_point,
    donna_verify,
    encode_point,
    equal,
    is_small_order,
    mul,
    recover_x,
    secret_scalar,
    strict_verify,
)
from _hypothesis import examples
from _queues import QUEUE
from simplex_rpc.agent import AgentServiceRequest, RequestSignature

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = [pytest.mark.backend, pytest.mark.security]

# --------------------------------------------------------------------------
# libsodium's verdict, beside the reference ones of _ed25519_ref.


def libsodium_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        nacl.bindings.crypto_sign_open(signature + message, public)
    except nacl.exceptions.BadSignatureError:
        return False
    return True


def _sig(r_point: Point, s: int) -> bytes:
    return encode_point(r_point) + s.to_bytes(32, "little")


# --------------------------------------------------------------------------
# Every entry point of the library, on one (key, signature, AD, payload).

AD = bytes(range(56)) + bytes(range(100, 156))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
MESSAGE = sx.session_tag(AD) + PAYLOAD


def _block(public: bytes, signature: bytes, payload: bytes = PAYLOAD) -> bytes:
    signed = RequestSignature(sx.PublicKey.from_raw(public), signature)
    return sx.pad(AgentServiceRequest((QUEUE,), signed, payload).encode())


def _accepts(call: Callable[[], object]) -> bool:
    try:
        call()
    except sx.BadSignature:
        return False
    return True


def entry_point_results(
    public: bytes, signature: bytes, ad: bytes = AD, payload: bytes = PAYLOAD
) -> dict[str, bool]:
    """Whether each entry point accepts the signature (``BadSignature`` is a refusal)."""
    key = sx.PublicKey.from_raw(public)
    message = sx.session_tag(ad) + payload
    block = _block(public, signature, payload)
    results = {
        "PublicKey.verify": _accepts(lambda: key.verify(message, signature)),
        "PublicKey.verify_request": _accepts(lambda: key.verify_request(ad, payload, signature)),
    }
    for name, impl in sx.backends.items():
        results[f"{name}.open_request"] = _accepts(lambda impl=impl: impl.open_request(block, ad))
        results[f"{name}.open_request(strict)"] = _accepts(
            lambda impl=impl: impl.open_request(block, ad, strict=True)
        )
        batch = getattr(impl, "open_requests", None)
        if batch is not None:
            results[f"{name}.open_requests"] = _batch_accepts(batch, [block], ad)[0]
    if hasattr(sx, "open_requests"):
        results["open_requests"] = _batch_accepts(sx.open_requests, [block], ad)[0]
    return results


def _batch_accepts(
    open_requests: Callable[..., Sequence[object]], blocks: list[bytes], ad: bytes, **kw: object
) -> list[bool]:
    """Per block, whether the batch entry point opened it (an OpenedRequest, not a failure)."""
    results = list(open_requests(blocks, ad, **kw))
    assert len(results) == len(blocks)
    return [isinstance(r, sx.OpenedRequest) for r in results]


# --------------------------------------------------------------------------
# Crafted cases


@dataclass(frozen=True)
class Case:
    name: str
    public: bytes
    signature: bytes
    strict: bool  # what the policy says
    lax: bool  # what ed25519-donna (the core's agent) says


SEED = bytes(range(32))
SECRET = secret_scalar(SEED)
HONEST_A = mul(SECRET, BASE)
HONEST_PUBLIC = encode_point(HONEST_A)
assert HONEST_PUBLIC == sx.SigningKey.from_seed(SEED).public_key.raw


def _honest_signature(message: bytes = MESSAGE) -> bytes:
    return sx.SigningKey.from_seed(SEED).sign(message)


def _mixed_order_signature(cofactorless: bool) -> tuple[bytes, bytes]:
    """A key ``aB + T8`` and a signature with a known nonce.

    With ``cofactorless``, R carries the torsion part that makes the
    cofactorless equation hold; otherwise only the cofactored one holds.
    """
    a_point = add(HONEST_A, T8)
    public = encode_point(a_point)
    for r in range(1, 10_000):
        for torsion in TORSION if cofactorless else [IDENTITY]:
            r_point = add(mul(r, BASE), torsion)
            k = challenge(encode_point(r_point), public, MESSAGE)
            works = equal(add(torsion, mul(k, T8)), IDENTITY)
            if works == cofactorless:
                return public, _sig(r_point, (r + k * SECRET) % L)
    raise AssertionError("no nonce found")  # pragma: no cover - 1/8 chance per try


def _small_order_key_signature(public: bytes) -> bytes:
    """A signature that satisfies donna's equation under a small-order key."""
    a_point = decode_point(public, canonical=False)
    assert a_point is not None
    for r in range(0, 10_000):
        for torsion in TORSION:
            r_point = add(mul(r, BASE), torsion)
            r_bytes = encode_point(r_point)
            if equal(add(torsion, mul(challenge(r_bytes, public, MESSAGE), a_point)), IDENTITY):
                return r_bytes + r.to_bytes(32, "little")
    raise AssertionError("no nonce found")  # pragma: no cover


def _with_s(signature: bytes, s: int) -> bytes:
    return signature[:32] + s.to_bytes(32, "little")


def _crafted_cases() -> list[Case]:
    honest = _honest_signature()
    s = int.from_bytes(honest[32:], "little")
    assert s + L < 2**253
    top_bit = honest[:63] + bytes([honest[63] | 0x80])
    cases = [
        Case("honest signature", HONEST_PUBLIC, honest, True, True),
        Case("S + L: S >= L, top bits clear", HONEST_PUBLIC, _with_s(honest, s + L), False, True),
        Case("S + 2L: top bits set", HONEST_PUBLIC, _with_s(honest, s + 2 * L), False, False),
        Case("S = L exactly", HONEST_PUBLIC, _with_s(honest, L), False, False),
        Case("S with the top bit set", HONEST_PUBLIC, top_bit, False, False),
    ]
    # A small-order R under an honest key: R = identity, S = k * a.
    identity = encode_point(IDENTITY)
    k = challenge(identity, HONEST_PUBLIC, MESSAGE)
    small_r = identity + (k * SECRET % L).to_bytes(32, "little")
    cases.append(Case("small-order R (identity), honest key", HONEST_PUBLIC, small_r, False, True))
    # Small-order A, in each of its fourteen encodings (canonical or not).
    for enc in SMALL_ORDER_ENCODINGS:
        label = f"small-order A {enc.hex()[:8]}...{enc.hex()[-4:]}, mixed R"
        cases.append(Case(label, enc, _small_order_key_signature(enc), False, True))
    both = identity + bytes(32)
    cases.append(Case("small-order A and R (identity), S = 0", identity, both, False, True))
    noncanonical_r = (P + 1).to_bytes(32, "little") + bytes(32)
    cases.append(Case("non-canonical R (p + 1), A = O", identity, noncanonical_r, False, False))
    # Mixed-order keys: libsodium checks A for small order only.
    public, sig = _mixed_order_signature(cofactorless=True)
    cases.append(Case("mixed-order A, cofactorless equation holds", public, sig, True, True))
    public, sig = _mixed_order_signature(cofactorless=False)
    cases.append(Case("mixed-order A, only cofactored equation holds", public, sig, False, False))
    # A non-canonical A of large order: the smallest y on the curve, as y + p.
    y = next(
        y
        for y in range(2, 19)
        if (pt := decode_point(y.to_bytes(32, "little"))) is not None and not is_small_order(pt)
    )
    noncanonical_a = (y + P).to_bytes(32, "little")
    cases.append(Case(f"non-canonical A (y = {y} + p)", noncanonical_a, honest, False, False))
    off_curve = _not_on_curve()
    cases.append(Case("R not on the curve", HONEST_PUBLIC, off_curve + honest[32:], False, False))
    cases.append(Case("A not on the curve", off_curve, honest, False, False))
    return cases


def _not_on_curve() -> bytes:
    y = 2
    while recover_x(y, 0) is not None:
        y += 1
    return y.to_bytes(32, "little")


CASES = _crafted_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_crafted_case_reference_and_libsodium_agree(case: Case) -> None:
    """wire.md section 2: the policy is libsodium's; donna's verdict is what the core does."""
    assert strict_verify(case.public, case.signature, MESSAGE) is case.strict
    assert libsodium_verify(case.public, case.signature, MESSAGE) is case.strict
    assert donna_verify(case.public, case.signature, MESSAGE) is case.lax


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_crafted_case_every_entry_point(case: Case) -> None:
    """One policy for every entry point and every backend."""
    results = entry_point_results(case.public, case.signature)
    assert results == dict.fromkeys(results, case.strict)


def test_crafted_cases_in_one_batch_on_worker_threads() -> None:
    """open_requests over all crafted cases at once, on two threads: the same verdicts."""
    blocks = [_block(c.public, c.signature) for c in CASES]
    expected = [c.strict for c in CASES]
    for name, impl in sx.backends.items():
        batch = getattr(impl, "open_requests", None)
        if batch is None:
            pytest.skip(f"backend {name} has no open_requests")
        for workers in (1, 2):
            assert _batch_accepts(batch, blocks, AD, workers=workers) == expected, (name, workers)


def test_cases_the_core_accepts_and_we_refuse_exist() -> None:
    """docs/security.md: crafted keys and signatures that the core accepts are refused here."""
    refused = [c.name for c in CASES if c.lax and not c.strict]
    assert any("S + L" in n for n in refused)
    assert any("small-order A" in n for n in refused)
    assert any("small-order R" in n for n in refused)


def test_wycheproof_agrees_on_every_entry_point() -> None:
    """Every Wycheproof case whose signature is 64 bytes gets the same verdict everywhere."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data/wycheproof/ed25519_test.json"
    data = json.loads(path.read_text())
    checked = 0
    for group in data["testGroups"]:
        public = bytes.fromhex(group["publicKey"]["pk"])
        for test in group["tests"]:
            sig, msg = bytes.fromhex(test["sig"]), bytes.fromhex(test["msg"])
            if len(sig) != 64:
                continue
            expected = test["result"] == "valid"
            key = sx.PublicKey.from_raw(public)
            assert _accepts(lambda k=key, m=msg, s=sig: k.verify(m, s)) is expected, test["tcId"]
            assert strict_verify(public, sig, msg) is expected, test["tcId"]
            checked += 1
    assert checked > 100


# --------------------------------------------------------------------------
# Differential: our verifier against libsodium and the reference, random and mutated.


def _mutate(signature: bytes, public: bytes, kind: int, index: int) -> tuple[bytes, bytes]:
    sig = bytearray(signature)
    pub = bytearray(public)
    if kind == 0:
        sig[index % 64] ^= 1 << (index % 8)
    elif kind == 1:
        pub[index % 32] ^= 1 << (index % 8)
    elif kind == 2:
        s = int.from_bytes(sig[32:], "little") + L * (1 + index % 3)
        sig[32:] = (s % 2**256).to_bytes(32, "little")
    elif kind == 3:
        pub[:] = SMALL_ORDER_ENCODINGS[index % len(SMALL_ORDER_ENCODINGS)]
    elif kind == 4:
        r = decode_point(bytes(sig[:32]))
        if r is not None:
            sig[:32] = encode_point(add(r, TORSION[index % 8]))
    elif kind == 5:
        sig[:32] = SMALL_ORDER_ENCODINGS[index % len(SMALL_ORDER_ENCODINGS)]
    elif kind == 6:
        sig[32:] = bytes(32)
    return bytes(sig), bytes(pub)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.binary(min_size=32, max_size=32),
    ad=st.binary(min_size=1, max_size=128),
    payload=st.binary(max_size=256),
    kind=st.integers(min_value=-1, max_value=6),
    index=st.integers(min_value=0, max_value=511),
)
def test_differential_mutated_signatures(
    seed: bytes, ad: bytes, payload: bytes, kind: int, index: int
) -> None:
    """Ours, libsodium's and the reference verdicts agree, on every entry point."""
    key = sx.SigningKey.from_seed(seed)
    signature = key.sign_request(ad, payload)
    public = key.public_key.raw
    if kind >= 0:
        signature, public = _mutate(signature, public, kind, index)
    message = sx.session_tag(ad) + payload
    expected = libsodium_verify(public, signature, message)
    assert strict_verify(public, signature, message) is expected
    results = entry_point_results(public, signature, ad, payload)
    assert results == dict.fromkeys(results, expected)


@settings(max_examples=examples(60), deadline=None)
@given(
    public=st.binary(min_size=32, max_size=32),
    signature=st.binary(min_size=64, max_size=64),
    payload=st.binary(max_size=64),
)
def test_differential_random_bytes(public: bytes, signature: bytes, payload: bytes) -> None:
    """Random keys and signatures: the same verdict (refusal, nearly always) everywhere."""
    expected = libsodium_verify(public, signature, MESSAGE[:32] + payload)
    assert strict_verify(public, signature, MESSAGE[:32] + payload) is expected
    results = entry_point_results(public, signature, AD, payload)
    assert results == dict.fromkeys(results, expected)

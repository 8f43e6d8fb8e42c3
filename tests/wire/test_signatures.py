"""Session-bound signatures: wire.md section 2, with the published anchors.

- RFC 8032 section 7.1, the five Ed25519 test vectors (TEST 1, 2, 3, 1024 and
  SHA(abc)), values as the RFC prints them.
- FIPS 202 SHA3-256, and the session tag computed two independent ways.
- Wycheproof's ed25519_test.json: all 151 cases through ``PublicKey.from_der``
  and ``PublicKey.verify``.
- Cross-checks with ``cryptography`` and pycryptodome, both directions.
- The verification policy (strict, as libsodium) with cases in the manner of
  "Taming the many EdDSAs" (Chalkias, Garillot, Nikolaenko, 2020): each case
  is one that a lax verifier accepts (checked with the reference curve
  arithmetic of RFC 8032 section 5.1 in ``_ed25519_ref``) and that this
  library refuses.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from Crypto.Hash import SHA3_256
from Crypto.PublicKey import ECC
from Crypto.Signature import eddsa
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519

import simplex_rpc as sx
from _ed25519_ref import (
    BASE,
    IDENTITY,
    T8,
    L,
    P,
    add,
    challenge,
    cofactorless_equation_holds,
    encode_point,
    equal,
    mul,
    point_with_y,
    secret_scalar,
)
from _queues import QUEUE
from simplex_rpc import BadSignature, PublicKey, SigningKey, SimplexRpcError, session_tag

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

WYCHEPROOF = Path(__file__).resolve().parents[1] / "data/wycheproof/ed25519_test.json"

AD = bytes(range(56)) + bytes(range(100, 156))  # the agent's shape: two X448 keys


# -- RFC 8032 section 7.1 -------------------------------------------------------

_TEST_1024_MESSAGE = (
    "08b8b2b733424243760fe426a4b54908632110a66c2f6591eabd3345e3e4eb98"
    "fa6e264bf09efe12ee50f8f54e9f77b1e355f6c50544e23fb1433ddf73be84d8"
    "79de7c0046dc4996d9e773f4bc9efe5738829adb26c81b37c93a1b270b20329d"
    "658675fc6ea534e0810a4432826bf58c941efb65d57a338bbd2e26640f89ffbc"
    "1a858efcb8550ee3a5e1998bd177e93a7363c344fe6b199ee5d02e82d522c4fe"
    "ba15452f80288a821a579116ec6dad2b3b310da903401aa62100ab5d1a36553e"
    "06203b33890cc9b832f79ef80560ccb9a39ce767967ed628c6ad573cb116dbef"
    "efd75499da96bd68a8a97b928a8bbc103b6621fcde2beca1231d206be6cd9ec7"
    "aff6f6c94fcd7204ed3455c68c83f4a41da4af2b74ef5c53f1d8ac70bdcb7ed1"
    "85ce81bd84359d44254d95629e9855a94a7c1958d1f8ada5d0532ed8a5aa3fb2"
    "d17ba70eb6248e594e1a2297acbbb39d502f1a8c6eb6f1ce22b3de1a1f40cc24"
    "554119a831a9aad6079cad88425de6bde1a9187ebb6092cf67bf2b13fd65f270"
    "88d78b7e883c8759d2c4f5c65adb7553878ad575f9fad878e80a0c9ba63bcbcc"
    "2732e69485bbc9c90bfbd62481d9089beccf80cfe2df16a2cf65bd92dd597b07"
    "07e0917af48bbb75fed413d238f5555a7a569d80c3414a8d0859dc65a46128ba"
    "b27af87a71314f318c782b23ebfe808b82b0ce26401d2e22f04d83d1255dc51a"
    "ddd3b75a2b1ae0784504df543af8969be3ea7082ff7fc9888c144da2af58429e"
    "c96031dbcad3dad9af0dcbaaaf268cb8fcffead94f3c7ca495e056a9b47acdb7"
    "51fb73e666c6c655ade8297297d07ad1ba5e43f1bca32301651339e22904cc8c"
    "42f58c30c04aafdb038dda0847dd988dcda6f3bfd15c4b4c4525004aa06eeff8"
    "ca61783aacec57fb3d1f92b0fe2fd1a85f6724517b65e614ad6808d6f6ee34df"
    "f7310fdc82aebfd904b01e1dc54b2927094b2db68d6f903b68401adebf5a7e08"
    "d78ff4ef5d63653a65040cf9bfd4aca7984a74d37145986780fc0b16ac451649"
    "de6188a7dbdf191f64b5fc5e2ab47b57f7f7276cd419c17a3ca8e1b939ae49e4"
    "88acba6b965610b5480109c8b17b80e1b7b750dfc7598d5d5011fd2dcc5600a3"
    "2ef5b52a1ecc820e308aa342721aac0943bf6686b64b2579376504ccc493d97e"
    "6aed3fb0f9cd71a43dd497f01f17c0e2cb3797aa2a2f256656168e6c496afc5f"
    "b93246f6b1116398a346f1a641f3b041e989f7914f90cc2c7fff357876e506b5"
    "0d334ba77c225bc307ba537152f3f1610e4eafe595f6d9d90d11faa933a15ef1"
    "369546868a7f3a45a96768d40fd9d03412c091c6315cf4fde7cb68606937380d"
    "b2eaaa707b4c4185c32eddcdd306705e4dc1ffc872eeee475a64dfac86aba41c"
    "0618983f8741c5ef68d3a101e8a3b8cac60c905c15fc910840b94c00a0b9d0"
)

# (name, SECRET KEY, PUBLIC KEY, MESSAGE, SIGNATURE), RFC 8032 section 7.1.
RFC8032 = [
    (
        "TEST 1",
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "TEST 2",
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "TEST 3",
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
        "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
    (
        "TEST 1024",
        "f5e5767cf153319517630f226876b86c8160cc583bc013744c6bf255f5cc0ee5",
        "278117fc144c72340f67d0f2316e8386ceffbf2b2428c9c51fef7c597f1d426e",
        _TEST_1024_MESSAGE,
        "0aab4c900501b3e24d7cdf4663326a3a87df5e4843b2cbdb67cbf6e460fec350"
        "aa5371b1508f9f4528ecea23c436d94b5e8fcd4f681e30a6ac00a9704a188a03",
    ),
    (
        "TEST SHA(abc)",
        "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
        "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
        "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    ),
]


def test_rfc8032_vector_messages_are_as_described() -> None:
    """RFC 8032 7.1: TEST 1024 has a 1023-byte message; SHA(abc)'s is SHA-512("abc")."""
    assert len(bytes.fromhex(_TEST_1024_MESSAGE)) == 1023
    assert bytes.fromhex(RFC8032[4][3]) == hashlib.sha512(b"abc").digest()


@pytest.mark.parametrize(
    ("secret", "public", "message", "signature"),
    [pytest.param(*row[1:], id=row[0]) for row in RFC8032],
)
def test_rule_rfc8032_pure_ed25519(secret: str, public: str, message: str, signature: str) -> None:
    """§2: signature = Ed25519-Sign(private_key, ...), RFC 8032 pure Ed25519: the 7.1 vectors."""
    key = SigningKey.from_seed(bytes.fromhex(secret))
    msg = bytes.fromhex(message)
    sig = bytes.fromhex(signature)
    assert key.public_key.raw == bytes.fromhex(public)
    assert key.sign(msg) == sig
    assert len(key.sign(msg)) == 64
    assert key.public_key.verify(msg, sig) is None
    assert PublicKey.from_raw(bytes.fromhex(public)).verify(msg, sig) is None
    for position in (0, 31, 32, 63):
        bad = bytearray(sig)
        bad[position] ^= 0x01
        with pytest.raises(BadSignature):
            key.public_key.verify(msg, bytes(bad))
    with pytest.raises(BadSignature):
        key.public_key.verify(msg + b"\x00", sig)


# -- session_tag (FIPS 202 SHA3-256) --------------------------------------------


def test_sha3_256_fips202_anchors() -> None:
    """FIPS 202: the hash of the session tag is SHA3-256 (its published values of '' and 'abc')."""
    assert hashlib.sha3_256(b"").hexdigest() == (
        "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
    )
    assert hashlib.sha3_256(b"abc").hexdigest() == (
        "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532"
    )


def test_rule_signing_domain() -> None:
    """§2: the domain is the 14 ASCII bytes "SimpleXService"."""
    assert sx.SIGNING_DOMAIN == b"SimpleXService"
    assert len(sx.SIGNING_DOMAIN) == 14


@pytest.mark.parametrize("ad", [b"\x00", b"x", AD, bytes(range(256)) * 4], ids=len)
def test_rule_session_tag_is_sha3_256_of_domain_and_ad(ad: bytes) -> None:
    """§2: session_tag = SHA3-256("SimpleXService" || AD), checked with hashlib and pycryptodome."""
    tag = session_tag(ad)
    assert len(tag) == 32
    assert tag == hashlib.sha3_256(b"SimpleXService" + ad).digest()
    independent = SHA3_256.new()
    independent.update(b"SimpleXService")
    independent.update(ad)
    assert tag == independent.digest()


def test_rule_session_tag_known_value() -> None:
    """§2: one tag written out, for implementations in other languages (112-byte AD)."""
    reference = SHA3_256.new(b"SimpleXService" + AD).hexdigest()
    assert session_tag(AD).hex() == reference
    assert session_tag(bytearray(AD)) == session_tag(memoryview(AD)) == bytes.fromhex(reference)


def test_rule_empty_ad_is_an_error_everywhere() -> None:
    """§2: the library accepts any non-empty AD and says so in an error for an empty one."""
    key = SigningKey.from_seed(bytes(32))
    signature = key.sign_request(b"ad", b"{}")
    calls = [
        lambda: session_tag(b""),
        lambda: key.sign_request(b"", b"{}"),
        lambda: key.public_key.verify_request(b"", b"{}", signature),
        lambda: sx.seal_request(b"{}", b"", reply_queue=QUEUE),
        lambda: sx.seal_request(b"{}", b"", key, reply_queue=QUEUE),
        lambda: sx.open_request(sx.seal_request(b"{}", b"ad", reply_queue=QUEUE), b""),
    ]
    for call in calls:
        with pytest.raises(SimplexRpcError, match=r"must not be empty"):
            call()


def test_session_tag_rejects_non_bytes() -> None:
    """The AD is bytes: text is a TypeError, never silently encoded."""
    with pytest.raises(TypeError):
        session_tag("ad")  # type: ignore[arg-type]


# -- sign_request / verify_request -----------------------------------------------


def test_rule_signed_bytes_are_tag_then_payload() -> None:
    """§2: signed_bytes = session_tag || payload, and the signature is plain Ed25519 over them."""
    seed = bytes.fromhex(RFC8032[0][1])
    key = SigningKey.from_seed(seed)
    payload = b'{"protocol":"mcp","request":{}}'
    signature = key.sign_request(AD, payload)
    signed = hashlib.sha3_256(b"SimpleXService" + AD).digest() + payload
    assert len(signed) == 32 + len(payload)
    assert signature == key.sign(signed)
    ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key().verify(signature, signed)
    assert signature == ed25519.Ed25519PrivateKey.from_private_bytes(seed).sign(signed)
    key.public_key.verify_request(AD, payload, signature)
    key.public_key.verify(signed, signature)


def test_rule_signature_copied_into_another_session_fails() -> None:
    """§2 / protocol text: a signature copied into another session (AD) fails verification."""
    key = SigningKey.from_seed(bytes(32))
    payload = b'{"protocol":"mcp","request":1}'
    signature = key.sign_request(AD, payload)
    other_ad = AD[:-1] + bytes([AD[-1] ^ 1])
    with pytest.raises(BadSignature, match=r"session \(AD\)"):
        key.public_key.verify_request(other_ad, payload, signature)
    with pytest.raises(BadSignature):
        key.public_key.verify_request(AD + b"\x00", payload, signature)
    with pytest.raises(BadSignature):
        key.public_key.verify_request(AD, payload + b" ", signature)
    with pytest.raises(BadSignature):
        SigningKey.from_seed(b"\x01" * 32).public_key.verify_request(AD, payload, signature)
    # Without the tag, the raw signature is not valid over the payload alone either.
    with pytest.raises(BadSignature):
        key.public_key.verify(payload, signature)


@pytest.mark.parametrize("size", [0, 1, 63, 65, 128])
def test_signature_must_be_64_bytes(size: int) -> None:
    """§2: the signature is 64 bytes; any other length is a BadSignature naming the length."""
    key = SigningKey.from_seed(bytes(32)).public_key
    with pytest.raises(BadSignature, match=rf"{size} bytes where 64"):
        key.verify(b"m", bytes(size))
    with pytest.raises(BadSignature):
        key.verify_request(AD, b"m", bytes(size))


def test_verify_returns_none_and_takes_bytes_like() -> None:
    """verify and verify_request return None on success; they take any bytes-like."""
    key = SigningKey.from_seed(bytes(32))
    sig = key.sign_request(AD, b"p")
    assert key.public_key.verify_request(bytearray(AD), memoryview(b"p"), bytearray(sig)) is None
    with pytest.raises(TypeError):
        key.public_key.verify("m", key.sign(b"m"))  # type: ignore[arg-type]


# -- Wycheproof ------------------------------------------------------------------


def _wycheproof_cases() -> list[Any]:
    data = json.loads(WYCHEPROOF.read_text())
    cases = []
    for group in data["testGroups"]:
        for test in group["tests"]:
            cases.append(
                pytest.param(
                    group["publicKeyDer"],
                    group["publicKey"]["pk"],
                    group["publicKeyPem"],
                    test,
                    id=f"tc{test['tcId']}-{test['result']}",
                )
            )
    return cases


WYCHEPROOF_CASES = _wycheproof_cases()


def test_wycheproof_file_has_151_cases() -> None:
    """The reference file: 151 cases, as its header says; all of them run below."""
    data = json.loads(WYCHEPROOF.read_text())
    assert data["algorithm"] == "EDDSA"
    assert data["numberOfTests"] == 151
    assert len(WYCHEPROOF_CASES) == 151


@pytest.mark.parametrize(("der", "raw", "pem", "test"), WYCHEPROOF_CASES)
def test_rule_strict_verifier_agrees_with_wycheproof(
    der: str, raw: str, pem: str, test: dict[str, Any]
) -> None:
    """§2 verification policy: a strict verifier agrees with every Wycheproof case."""
    key = PublicKey.from_der(bytes.fromhex(der))
    assert key == PublicKey.from_raw(bytes.fromhex(raw))
    assert key == PublicKey.from_pem(pem)
    assert key.der.hex() == der
    message = bytes.fromhex(test["msg"])
    signature = bytes.fromhex(test["sig"])
    assert test["result"] in ("valid", "invalid")
    if test["result"] == "valid":
        assert key.verify(message, signature) is None
    else:
        with pytest.raises(BadSignature):
            key.verify(message, signature)


# -- cross-checks ----------------------------------------------------------------

CROSS_SEEDS = [bytes(32), bytes(range(32)), bytes.fromhex(RFC8032[3][1])]
CROSS_MESSAGES = [b"", b"x", session_tag(AD) + b'{"protocol":"mcp","request":{}}', bytes(5000)]


@pytest.mark.parametrize("seed", CROSS_SEEDS, ids=lambda s: s[:2].hex())
def test_our_signatures_verify_under_cryptography_and_pycryptodome(seed: bytes) -> None:
    """Cross-check: our signatures verify under cryptography and pycryptodome ('rfc8032')."""
    key = SigningKey.from_seed(seed)
    theirs_c = ed25519.Ed25519PublicKey.from_public_bytes(key.public_key.raw)
    theirs_p = eddsa.new(ECC.import_key(key.public_key.der), "rfc8032")
    for message in CROSS_MESSAGES:
        signature = key.sign(message)
        theirs_c.verify(signature, message)
        theirs_p.verify(message, signature)
        request_sig = key.sign_request(AD, message)
        theirs_c.verify(request_sig, session_tag(AD) + message)
        theirs_p.verify(session_tag(AD) + message, request_sig)
        with pytest.raises(InvalidSignature):
            theirs_c.verify(request_sig, message)
        with pytest.raises(ValueError):
            theirs_p.verify(message, request_sig)


@pytest.mark.parametrize("seed", CROSS_SEEDS, ids=lambda s: s[:2].hex())
def test_their_signatures_verify_under_ours(seed: bytes) -> None:
    """Cross-check: signatures of cryptography and pycryptodome verify under ours, byte-equal."""
    public = SigningKey.from_seed(seed).public_key
    signer_c = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    signer_p = eddsa.new(eddsa.import_private_key(seed), "rfc8032")
    assert (
        PublicKey.from_raw(
            bytes(eddsa.import_private_key(seed).public_key().export_key(format="raw"))
        )
        == public
    )
    for message in CROSS_MESSAGES:
        sig_c = signer_c.sign(message)
        sig_p = signer_p.sign(message)
        assert sig_c == sig_p == SigningKey.from_seed(seed).sign(message)  # deterministic
        public.verify(message, sig_c)
        public.verify(message, sig_p)
    tagged = session_tag(AD) + b"payload"
    public.verify_request(AD, b"payload", signer_c.sign(tagged))
    public.verify_request(AD, b"payload", signer_p.sign(tagged))


# -- strict policy: "Taming the many EdDSAs" style cases ------------------------
#
# The reference arithmetic (tests/_ed25519_ref.py) builds signatures that
# satisfy the cofactorless verification equation [S]B = R + [k]A when point
# encodings are read leniently (y reduced mod p, S not range-checked, no
# small-order checks): ``cofactorless_equation_holds``, the "lax" verifier.

SEED = bytes(range(32))
SECRET = secret_scalar(SEED)
PUBLIC = SigningKey.from_seed(SEED).public_key.raw
SMALL_ORDER = {
    "identity (order 1)": IDENTITY,
    "(0, -1) (order 2)": point_with_y(P - 1),
    "(sqrt(-1), 0) (order 4)": point_with_y(0),
    "order 8": T8,
}


def _message_with(predicate: Any, r: bytes, a: bytes) -> tuple[bytes, int]:
    """A message whose k = H(R || A || M) satisfies ``predicate`` (found by counting)."""
    for i in range(1000):
        message = b"taming-%d" % i
        k = challenge(r, a, message)
        if predicate(k):
            return message, k
    raise AssertionError("no message found")  # pragma: no cover


def _refused(public: bytes, message: bytes, signature: bytes) -> None:
    assert cofactorless_equation_holds(public, signature, message), (
        "the case must satisfy the lax equation"
    )
    with pytest.raises(BadSignature):
        PublicKey.from_raw(public).verify(message, signature)


def test_reference_arithmetic_matches_libsodium() -> None:
    """The reference arithmetic derives RFC 8032 TEST 1's public key and accepts its signature."""
    _, secret, public, message, signature = RFC8032[0]
    assert encode_point(mul(secret_scalar(bytes.fromhex(secret)), BASE)).hex() == public
    assert cofactorless_equation_holds(
        bytes.fromhex(public), bytes.fromhex(signature), bytes.fromhex(message)
    )
    assert encode_point(mul(SECRET, BASE)) == PUBLIC
    for point in SMALL_ORDER.values():
        assert equal(mul(8, point), IDENTITY)


@pytest.mark.parametrize("multiple", [1, 2, 15])
def test_policy_s_at_least_l_is_rejected(multiple: int) -> None:
    """§2 policy: reject S >= L (malleability): S + nL satisfies the lax equation."""
    key = SigningKey.from_seed(SEED)
    message = b"S >= L"
    signature = key.sign(message)
    s = int.from_bytes(signature[32:], "little")
    assert s < L
    key.public_key.verify(message, signature)
    if s + multiple * L >= 2**256:  # pragma: no cover - depends on S
        pytest.skip("S + nL does not fit 32 bytes")
    malleated = signature[:32] + (s + multiple * L).to_bytes(32, "little")
    _refused(PUBLIC, message, malleated)


@pytest.mark.parametrize("name", list(SMALL_ORDER))
def test_policy_small_order_public_key_is_rejected(name: str) -> None:
    """§2 policy: reject small-order A: with [k]A = 0, R = [r]B and S = r verify laxly."""
    a = encode_point(SMALL_ORDER[name])
    r_scalar = 1234567
    r = encode_point(mul(r_scalar, BASE))
    message, _ = _message_with(lambda k: k % 8 == 0, r, a)
    _refused(a, message, r + r_scalar.to_bytes(32, "little"))


def test_policy_small_order_public_key_trivial_forgery() -> None:
    """§2 policy: the identity as A with R = identity and S = 0 "verifies" every message laxly."""
    identity = encode_point(IDENTITY)
    for message in (b"", b"any message at all"):
        _refused(identity, message, identity + bytes(32))


def test_policy_small_order_r_is_rejected() -> None:
    """§2 policy: reject small-order R: R = identity, S = k*a verifies laxly."""
    r = encode_point(IDENTITY)
    message = b"small R"
    k = challenge(r, PUBLIC, message)
    _refused(PUBLIC, message, r + (k * SECRET % L).to_bytes(32, "little"))


def test_policy_small_order_r_with_mixed_order_key_is_rejected() -> None:
    """§2 policy: reject small-order R even when A (mixed order) makes the lax equation hold."""
    a = encode_point(add(mul(SECRET, BASE), T8))
    r_point = mul(7, T8)  # = -T8; messages with k = 1 mod 8 give [k]T8 = -R
    r = encode_point(r_point)
    # [S]B = R + [k]A = R + [k*a]B + [k]T8: holds with S = k*a when [k]T8 = -R.
    message, k = _message_with(lambda k: equal(add(mul(k, T8), r_point), IDENTITY), r, a)
    _refused(a, message, r + (k * SECRET % L).to_bytes(32, "little"))


# Non-canonical encodings: y >= p (only y < 19 have one), or x = 0 with the sign
# bit set. Every such point of the curve is of small order, as in the paper.
NON_CANONICAL = {
    "y = p (reads as 0)": P.to_bytes(32, "little"),
    "y = p + 1 (reads as the identity)": (P + 1).to_bytes(32, "little"),
    "identity with the sign bit set": (1 | 1 << 255).to_bytes(32, "little"),
    "(0, -1) with the sign bit set": (P - 1 | 1 << 255).to_bytes(32, "little"),
}


@pytest.mark.parametrize("name", list(NON_CANONICAL))
def test_policy_non_canonical_public_key_is_rejected(name: str) -> None:
    """§2 policy: reject non-canonical A (read leniently, the signature would verify)."""
    a = NON_CANONICAL[name]
    r_scalar = 424242
    r = encode_point(mul(r_scalar, BASE))
    message, _ = _message_with(lambda k: k % 8 == 0, r, a)
    _refused(a, message, r + r_scalar.to_bytes(32, "little"))


@pytest.mark.parametrize(
    "name", ["y = p + 1 (reads as the identity)", "identity with the sign bit set"]
)
def test_policy_non_canonical_r_is_rejected(name: str) -> None:
    """§2 policy: reject non-canonical R: the identity encoded two other ways, S = k*a."""
    r = NON_CANONICAL[name]
    message = b"non-canonical R"
    k = challenge(r, PUBLIC, message)
    _refused(PUBLIC, message, r + (k * SECRET % L).to_bytes(32, "little"))


def test_policy_mixed_order_public_key_is_accepted_as_libsodium() -> None:
    """§2 policy is libsodium's: a mixed-order A (not small order) with a valid signature verifies.

    Pinned so that a change of policy shows: libsodium refuses small-order and
    non-canonical points and S >= L, and verifies cofactorless otherwise.
    """
    a = encode_point(add(mul(SECRET, BASE), T8))
    r_scalar = 99
    r = encode_point(mul(r_scalar, BASE))
    message, k = _message_with(lambda k: k % 8 == 0, r, a)
    signature = r + ((r_scalar + k * SECRET) % L).to_bytes(32, "little")
    assert cofactorless_equation_holds(a, signature, message)
    PublicKey.from_raw(a).verify(message, signature)


def test_policy_errors_are_bad_signature_with_no_detail_about_the_key() -> None:
    """§2: a refused signature is BadSignature (a SimplexRpcError and ValueError)."""
    with pytest.raises(BadSignature) as info:
        PublicKey.from_raw(encode_point(IDENTITY)).verify(b"", encode_point(IDENTITY) + bytes(32))
    assert isinstance(info.value, SimplexRpcError)
    assert isinstance(info.value, ValueError)

"""Keys: wire.md section 1 ("Keys"), both ways, with negative cases.

Every test names the rule of the section it pins. The DER and text forms are
checked against what the ``cryptography`` package writes, so that they are
the RFC 8410 encodings and not merely this library's own idea of them.
"""

from __future__ import annotations

import base64
import pickle
import re

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, x25519

import simplex_rpc as sx
from simplex_rpc import KeyFormatError, PublicKey, SigningKey, SimplexRpcError

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")

# Fixed seeds: RFC 8032 TEST 1 and TEST 2, all zeros, all ones, a counter.
SEEDS = [
    bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"),
    bytes.fromhex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"),
    bytes(32),
    b"\xff" * 32,
    bytes(range(32)),
]


def _crypto_public_der(seed: bytes) -> bytes:
    return (
        ed25519.Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def _crypto_private_der(seed: bytes) -> bytes:
    return ed25519.Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _seed_with_std_chars() -> tuple[bytes, int, int]:
    """A seed whose public text has '-' and '_' (standard base64: '+' and '/').

    Returns the seed and the offsets of one '-' and one '_' in its text.
    """
    for i in range(10_000):
        seed = i.to_bytes(32, "big")
        text = SigningKey.from_seed(seed).public_key.encode()
        if "-" in text and "_" in text:
            return seed, text.index("-"), text.index("_")
    raise AssertionError("no seed with both '-' and '_' in its public text")  # pragma: no cover


KEY = SigningKey.from_seed(SEEDS[0])
PUBLIC_TEXT = KEY.public_key.encode()
PRIVATE_TEXT = KEY.encode()


# -- the table of section 1: exact bytes and text forms -----------------------


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s[:4].hex())
def test_rule_public_der_is_spki_prefix_plus_raw_as_cryptography_writes(seed: bytes) -> None:
    """§1 table: SPKI DER = 302a300506032b6570032100 ‖ raw, 44 bytes, as cryptography writes."""
    public = SigningKey.from_seed(seed).public_key
    der = _crypto_public_der(seed)
    assert public.der == der
    assert len(public.der) == 44
    assert public.der == SPKI_PREFIX + public.raw
    assert len(public.raw) == 32
    assert PublicKey.from_der(der) == public


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s[:4].hex())
def test_rule_private_der_is_pkcs8_prefix_plus_seed_as_cryptography_writes(seed: bytes) -> None:
    """§1 table: PKCS#8 v1 DER = 302e020100300506032b657004220420 ‖ seed, 48 bytes."""
    key = SigningKey.from_seed(seed)
    der = _crypto_private_der(seed)
    assert key.der == der
    assert len(key.der) == 48
    assert key.der == PKCS8_PREFIX + seed
    assert key.seed() == seed
    assert SigningKey.from_der(der) == key


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s[:4].hex())
def test_rule_public_text_is_padded_base64url_of_der_60_chars(seed: bytes) -> None:
    """§1 table: the public text form is base64url, padded: 60 characters ending in '='."""
    public = SigningKey.from_seed(seed).public_key
    text = public.encode()
    assert len(text) == 60
    assert text.endswith("=") and not text.endswith("==")
    assert re.fullmatch(r"[A-Za-z0-9_-]{59}=", text)
    assert text == base64.urlsafe_b64encode(_crypto_public_der(seed)).decode("ascii")
    assert PublicKey.decode(text) == public


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s[:4].hex())
def test_rule_private_text_is_base64url_of_pkcs8_64_chars(seed: bytes) -> None:
    """§1 table: the private text form (sign_key=) is base64url of the PKCS#8 DER: 64 chars."""
    key = SigningKey.from_seed(seed)
    text = key.encode()
    assert len(text) == 64
    assert re.fullmatch(r"[A-Za-z0-9_-]{64}", text)
    assert text == base64.urlsafe_b64encode(_crypto_private_der(seed)).decode("ascii")
    assert SigningKey.decode(text) == key
    assert SigningKey.decode(text).public_key == key.public_key


def test_rule_known_text_of_rfc8032_test1_key() -> None:
    """§1: the text forms of RFC 8032 TEST 1's key, written out for other implementations."""
    assert PUBLIC_TEXT == "MCowBQYDK2VwAyEA11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo="
    assert PRIVATE_TEXT == "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v_VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g"


def test_rule_public_and_private_text_accept_bytes() -> None:
    """§1: the decoders take the text as str or as ASCII bytes, with the same result."""
    assert PublicKey.decode(PUBLIC_TEXT.encode()) == KEY.public_key
    assert SigningKey.decode(PRIVATE_TEXT.encode()) == KEY


# -- padded and unpadded; equality by bytes -----------------------------------


def test_rule_padding_may_be_absent_and_names_the_same_key() -> None:
    """§1: padding present (exactly right) or absent; both texts decode to one key."""
    unpadded = PUBLIC_TEXT.rstrip("=")
    assert len(unpadded) == 59
    padded_key = PublicKey.decode(PUBLIC_TEXT)
    unpadded_key = PublicKey.decode(unpadded)
    assert padded_key == unpadded_key
    assert hash(padded_key) == hash(unpadded_key)
    assert {padded_key: "x"}[unpadded_key] == "x"
    assert unpadded != PUBLIC_TEXT  # as text they differ, as keys they are equal
    assert unpadded_key.encode() == PUBLIC_TEXT  # encode always writes the padded form


def test_rule_private_text_without_padding_is_the_same() -> None:
    """§1: the private text has no padding at all (48 bytes is a multiple of 3)."""
    assert "=" not in PRIVATE_TEXT
    assert SigningKey.decode(PRIVATE_TEXT) == KEY


def test_rule_keys_compare_as_bytes() -> None:
    """§1: compare keys as bytes: equality and hash by the 32 key bytes."""
    a = PublicKey.from_raw(KEY.public_key.raw)
    b = PublicKey.from_der(KEY.public_key.der)
    c = PublicKey.decode(PUBLIC_TEXT)
    assert a == b == c
    assert len({a, b, c}) == 1
    other = SigningKey.from_seed(SEEDS[1]).public_key
    assert a != other
    assert a != KEY.public_key.raw  # a key is not equal to its bytes
    assert (a == "text") is False
    assert len({a, other}) == 2


def test_signing_key_equality_by_seed() -> None:
    """§1: two SigningKeys of one seed are equal and hash alike; different seeds differ."""
    assert SigningKey.from_seed(SEEDS[0]) == KEY
    assert hash(SigningKey.from_seed(SEEDS[0])) == hash(KEY)
    assert SigningKey.from_seed(SEEDS[1]) != KEY
    assert KEY != KEY.public_key


# -- strict base64url: every rejection ----------------------------------------


def _bad_public_texts() -> list[tuple[str, str | bytes]]:
    body = PUBLIC_TEXT.rstrip("=")
    std_seed, dash_at, under_at = _seed_with_std_chars()
    std_text = base64.b64encode(_crypto_public_der(std_seed)).decode("ascii")
    assert std_text[dash_at] == "+" and std_text[under_at] == "/"
    last = body[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # 44 bytes in 59 characters: the last character carries 2 unused bits.
    nonzero_tail = alphabet[alphabet.index(last) | 1]
    assert alphabet.index(last) & 3 == 0
    return [
        ("standard alphabet '+' and '/'", std_text),
        ("'+' in place of '-'", std_text[:under_at] + "_" + std_text[under_at + 1 :]),
        ("'/' in place of '_'", std_text[:dash_at] + "-" + std_text[dash_at + 1 :]),
        ("leading space", " " + PUBLIC_TEXT),
        ("trailing space", PUBLIC_TEXT + " "),
        ("trailing newline", PUBLIC_TEXT + "\n"),
        ("trailing CRLF", PUBLIC_TEXT + "\r\n"),
        ("newline inside", PUBLIC_TEXT[:30] + "\n" + PUBLIC_TEXT[30:]),
        ("tab inside", PUBLIC_TEXT[:30] + "\t" + PUBLIC_TEXT[30:]),
        ("space before padding", body + " ="),
        ("two padding characters where one is required", body + "=="),
        ("three padding characters", body + "==="),
        ("padding inside the text", body[:8] + "=" + body[8:]),
        ("padding on a body that needs none", body[:56] + "="),
        ("padding on a body that needs two, one given", body[:58] + "="),
        ("padding only", "===="),
        ("non-zero trailing bits", body[:-1] + nonzero_tail),
        ("non-zero trailing bits, padded", body[:-1] + nonzero_tail + "="),
        ("non-ASCII letter", PUBLIC_TEXT[:10] + "é" + PUBLIC_TEXT[11:]),
        ("full-width letter", PUBLIC_TEXT[:10] + "\uff21" + PUBLIC_TEXT[11:]),
        ("non-ASCII byte", PUBLIC_TEXT.encode()[:10] + b"\xff" + PUBLIC_TEXT.encode()[11:]),
        ("NUL character", PUBLIC_TEXT[:10] + "\x00" + PUBLIC_TEXT[11:]),
        ("impossible length 4k+1", body[:57]),
        ("empty", ""),
        ("one character short (43 DER bytes)", body[:58]),
        ("DER with a trailing byte", base64.urlsafe_b64encode(KEY.public_key.der + b"\0").decode()),
        ("DER one byte short", base64.urlsafe_b64encode(KEY.public_key.der[:-1]).decode()),
        ("raw key without DER", base64.urlsafe_b64encode(KEY.public_key.raw).decode()),
        ("private key text where a public key is expected", PRIVATE_TEXT),
    ]


@pytest.mark.parametrize("text", [pytest.param(t, id=why) for why, t in _bad_public_texts()])
def test_rule_strict_base64url_public_key_rejections(text: str | bytes) -> None:
    """§1 decoding is strict: alphabet, padding, whitespace, trailing bits, DER length."""
    with pytest.raises(KeyFormatError) as info:
        PublicKey.decode(text)
    assert str(info.value).startswith("public key")
    assert isinstance(info.value, SimplexRpcError) and isinstance(info.value, ValueError)


def test_rule_bad_character_error_names_the_offset() -> None:
    """§1 + house rule: the error names what is wrong and where (the offset)."""
    with pytest.raises(KeyFormatError, match=r"offset 10"):
        PublicKey.decode(PUBLIC_TEXT[:10] + "+" + PUBLIC_TEXT[11:])
    with pytest.raises(KeyFormatError, match=r"non-ASCII character at offset 10"):
        PublicKey.decode(PUBLIC_TEXT[:10] + "é" + PUBLIC_TEXT[11:])
    with pytest.raises(KeyFormatError, match=r"character '\\n' at offset 60"):
        PublicKey.decode(PUBLIC_TEXT + "\n")  # blamed on the newline, not on the '='
    with pytest.raises(KeyFormatError, match=r"byte 0xff at offset 3"):
        PublicKey.decode(b"MCo\xff" + PUBLIC_TEXT.encode()[4:])
    with pytest.raises(KeyFormatError, match=r"padding character '=' at offset 8 is not at"):
        PublicKey.decode(PUBLIC_TEXT[:8] + "=" + PUBLIC_TEXT[8:])
    with pytest.raises(KeyFormatError, match=r"trailing bits"):
        body = PUBLIC_TEXT.rstrip("=")
        PublicKey.decode(body[:-1] + "R")  # 'Q' is ...00, 'R' is ...01
    with pytest.raises(KeyFormatError, match=r"2 padding characters where 1"):
        PublicKey.decode(PUBLIC_TEXT + "=")


def test_decoded_keys_are_remembered_and_errors_are_raised_every_time() -> None:
    """PublicKey.decode remembers the text of keys it decoded (a requester names its key
    in every request): the same key comes back, padded and unpadded text name equal
    keys, text that is not a key raises each time, and the memory stays bounded."""
    from simplex_rpc._wire import keys as _keys

    text = SigningKey.from_seed(SEEDS[0]).public_key.encode()
    first = PublicKey.decode(text)
    assert PublicKey.decode(text) is first
    assert PublicKey.decode(text.rstrip("=")) == first
    assert PublicKey.decode(text.encode()) == first  # bytes text: decoded, not remembered
    bad = text[:-5] + "!===="
    for _ in range(2):
        with pytest.raises(KeyFormatError):
            PublicKey.decode(bad)
    assert bad not in _keys._DECODED

    class Sub(PublicKey):
        __slots__ = ()

    assert type(Sub.decode(text)) is Sub  # a subclass gets its own class, never the memo
    for n in range(_keys._DECODED_MAX + 5):
        PublicKey.decode(SigningKey.from_seed(n.to_bytes(32, "big")).public_key.encode())
    assert len(_keys._DECODED) <= _keys._DECODED_MAX


def test_rule_not_the_lenient_stdlib_decoder() -> None:
    """§1: base64.urlsafe_b64decode drops invalid characters; our decoder must not."""
    dirty = PUBLIC_TEXT[:20] + "!" + PUBLIC_TEXT[20:]
    # The standard library silently drops '!' (non-strict mode) and yields the key:
    assert base64.urlsafe_b64decode(dirty) == KEY.public_key.der
    with pytest.raises(KeyFormatError, match=r"offset 20"):
        PublicKey.decode(dirty)


@pytest.mark.parametrize("index", range(12))
def test_rule_public_der_prefix_every_byte(index: int) -> None:
    """§1: the DER must be exactly the SPKI prefix plus 32 bytes: each prefix byte is checked."""
    der = bytearray(KEY.public_key.der)
    der[index] ^= 0x01
    with pytest.raises(KeyFormatError, match=rf"byte {index}\b"):
        PublicKey.from_der(bytes(der))
    with pytest.raises(KeyFormatError, match=rf"byte {index}\b"):
        PublicKey.decode(base64.urlsafe_b64encode(bytes(der)).decode())


@pytest.mark.parametrize("index", range(16))
def test_rule_private_der_prefix_every_byte(index: int) -> None:
    """§1: the PKCS#8 DER must be exactly its prefix plus the 32-byte seed."""
    der = bytearray(KEY.der)
    der[index] ^= 0x01
    with pytest.raises(KeyFormatError, match=rf"byte {index}\b"):
        SigningKey.from_der(bytes(der))
    with pytest.raises(KeyFormatError, match=r"private key DER"):
        SigningKey.decode(base64.urlsafe_b64encode(bytes(der)).decode())


def test_rule_other_curves_are_not_ed25519() -> None:
    """§1: any other key encoding is either not DER or not Ed25519 (X25519, Ed448, P-256)."""
    x = x25519.X25519PrivateKey.from_private_bytes(bytes(range(32))).public_key()
    x_der = x.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert len(x_der) == 44  # same length, OID 1.3.101.110
    with pytest.raises(KeyFormatError, match=r"byte 8\b"):
        PublicKey.from_der(x_der)
    e448 = ed448.Ed448PrivateKey.from_private_bytes(bytes(57)).public_key()
    e448_der = e448.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(KeyFormatError, match=r"69 bytes where 44"):
        PublicKey.from_der(e448_der)
    with pytest.raises(KeyFormatError):
        PublicKey.decode(base64.urlsafe_b64encode(e448_der).decode())


@pytest.mark.parametrize("size", [0, 1, 31, 33, 64])
def test_rule_raw_public_key_is_32_bytes(size: int) -> None:
    """§1 table: a raw Ed25519 public key is 32 bytes."""
    with pytest.raises(KeyFormatError, match=rf"{size} bytes where 32"):
        PublicKey.from_raw(bytes(size))


@pytest.mark.parametrize("size", [0, 43, 45, 88])
def test_rule_public_der_is_44_bytes(size: int) -> None:
    """§1 table: the SPKI DER is 44 bytes."""
    der = (KEY.public_key.der * 2)[:size]
    with pytest.raises(KeyFormatError, match=rf"{size} bytes where 44"):
        PublicKey.from_der(der)


@pytest.mark.parametrize("size", [0, 31, 33])
def test_rule_seed_is_32_bytes(size: int) -> None:
    """§1 table: the private key is a 32-byte RFC 8032 seed."""
    with pytest.raises(KeyFormatError, match=rf"{size} bytes where 32"):
        SigningKey.from_seed(bytes(size))


@pytest.mark.parametrize("size", [0, 47, 49, 83])
def test_rule_private_der_is_48_bytes(size: int) -> None:
    """§1 table: the PKCS#8 v1 DER is 48 bytes (a v2 one with the public key is refused)."""
    with pytest.raises(KeyFormatError, match=rf"{size} bytes where 48"):
        SigningKey.from_der((KEY.der * 2)[:size])


def test_key_constructors_reject_non_bytes() -> None:
    """Wrong types are a TypeError, not a silent conversion."""
    with pytest.raises(TypeError):
        PublicKey.from_raw("x" * 32)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.from_der(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.decode(12)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SigningKey.from_seed("x" * 32)  # type: ignore[arg-type]


def test_key_constructors_take_bytes_like() -> None:
    """bytearray and memoryview are taken as their bytes."""
    raw = KEY.public_key.raw
    assert PublicKey.from_raw(bytearray(raw)) == KEY.public_key
    assert PublicKey.from_der(memoryview(KEY.public_key.der)) == KEY.public_key
    assert SigningKey.from_seed(bytearray(SEEDS[0])) == KEY


# -- private key text: strict, and never echoed -------------------------------


def _bad_private_texts() -> list[str | bytes]:
    body = PRIVATE_TEXT
    return [
        body + "=",
        body + "\n",
        " " + body,
        body[:20] + "+" + body[21:],
        body[:20] + "/" + body[21:],
        body[:20] + "é" + body[21:],
        body.encode()[:20] + b"\xff" + body.encode()[21:],
        body[:63],
        body[:62],
        body[:61],
        base64.urlsafe_b64encode(bytes([0x31]) + KEY.der[1:]).decode(),
        base64.urlsafe_b64encode(KEY.der + b"\x00").decode(),
        PUBLIC_TEXT,
    ]


@pytest.mark.parametrize("text", _bad_private_texts())
def test_rule_private_key_errors_never_echo_the_text(text: str | bytes) -> None:
    """§1 + house rule: no key material in messages: the text is never echoed, not even a piece."""
    with pytest.raises(KeyFormatError) as info:
        SigningKey.decode(text)
    exc = info.value
    assert str(exc).startswith("private key")
    shown = str(exc) + repr(exc) + repr(exc.args)
    if exc.__context__ is not None:
        shown += str(exc.__context__)
    assert exc.__cause__ is None
    raw = text if isinstance(text, str) else text.decode("latin-1")
    for i in range(len(raw) - 7):
        assert raw[i : i + 8] not in shown, f"message shows text at {i}"
    for i in range(len(PRIVATE_TEXT) - 7):
        assert PRIVATE_TEXT[i : i + 8] not in shown
    assert SEEDS[0].hex()[:16] not in shown


def test_rule_private_key_bad_character_names_offset_not_character() -> None:
    """§1 + house rule: the private-key error says where, never which character."""
    with pytest.raises(KeyFormatError) as info:
        SigningKey.decode(PRIVATE_TEXT[:20] + "+" + PRIVATE_TEXT[21:])
    assert "offset 20" in str(info.value)
    assert "'+'" not in str(info.value)


def test_rule_private_text_unpadded_and_strict() -> None:
    """§1: the private text follows the same strict base64url rules as the public one."""
    with pytest.raises(KeyFormatError, match=r"padding"):
        SigningKey.decode(PRIVATE_TEXT + "==")


# -- SigningKey: no key material in repr/str ----------------------------------


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s[:4].hex())
def test_signing_key_repr_and_str_carry_no_private_material(seed: bytes) -> None:
    """House rule: repr and str of a SigningKey show the public key only."""
    key = SigningKey.from_seed(seed)
    for shown in (repr(key), str(key), f"{key}", f"{key!r}", repr([key]), repr({"k": key})):
        assert key.public_key.encode() in shown
        assert seed.hex() not in shown
        assert seed.hex().upper() not in shown
        assert key.encode() not in shown
        assert key.encode()[16:40] not in shown  # no piece of the seed's text either
        assert key.der.hex() not in shown
        assert base64.urlsafe_b64encode(seed).decode().rstrip("=") not in shown
        assert base64.b64encode(seed).decode().rstrip("=") not in shown
        assert repr(seed) not in shown


def test_signing_key_is_not_pickled_and_is_immutable() -> None:
    """A SigningKey leaves the object only through encode()/seed()/der, asked for explicitly."""
    with pytest.raises(TypeError):
        pickle.dumps(KEY)
    with pytest.raises(AttributeError):
        KEY._seed = bytes(32)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        KEY.public_key._raw = bytes(32)  # type: ignore[misc]
    assert not hasattr(KEY, "__dict__")


def test_public_key_repr_pickle_and_text() -> None:
    """A PublicKey's repr is its text form; it pickles by its bytes."""
    public = KEY.public_key
    assert repr(public) == f"PublicKey.decode({PUBLIC_TEXT!r})"
    assert pickle.loads(pickle.dumps(public)) == public


def test_generate_gives_distinct_valid_keys() -> None:
    """SigningKey.generate draws a fresh seed; its text round-trips."""
    a, b = SigningKey.generate(), SigningKey.generate()
    assert a != b
    assert a.public_key != b.public_key
    assert SigningKey.decode(a.encode()) == a
    assert _crypto_public_der(a.seed()) == a.public_key.der


# -- PEM ----------------------------------------------------------------------


def _pem_of(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_from_pem_reads_what_cryptography_writes() -> None:
    """from_pem takes a PEM PUBLIC KEY block of an Ed25519 SPKI, as bytes or str."""
    pem = _pem_of(ed25519.Ed25519PrivateKey.from_private_bytes(SEEDS[0]).public_key())
    assert PublicKey.from_pem(pem) == KEY.public_key
    assert PublicKey.from_pem(pem.decode()) == KEY.public_key
    assert KEY.public_key.to_pem().encode() == pem
    assert PublicKey.from_pem(KEY.public_key.to_pem()) == KEY.public_key


def test_from_pem_rejects_other_keys_and_garbage() -> None:
    """from_pem: anything other than an Ed25519 public key is a KeyFormatError."""
    x_pem = _pem_of(x25519.X25519PrivateKey.from_private_bytes(bytes(range(32))).public_key())
    p256 = ec.derive_private_key(12345, ec.SECP256R1()).public_key()
    private_pem = ed25519.Ed25519PrivateKey.from_private_bytes(SEEDS[0]).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    for bad in (x_pem, _pem_of(p256), private_pem, b"", b"not a pem", "é-----BEGIN"):
        with pytest.raises(KeyFormatError, match=r"public key PEM"):
            PublicKey.from_pem(bad)
    assert b"PRIVATE" in private_pem


def test_from_pem_unknown_algorithm_is_a_key_format_error() -> None:
    """from_pem: an SPKI of any other algorithm is a KeyFormatError naming the DER."""
    # An EC key on a curve cryptography does not support (sect163k1, 1.3.132.0.1)
    # and an OID that names no key type (1.3.101.200): the fixed-prefix decoder
    # refuses both without knowing what they are.
    unsupported_curve = bytes.fromhex("3040301006072a8648ce3d020106052b81040001032c00") + bytes(43)
    unknown_oid = bytes.fromhex("302a300506032b65c8032100") + bytes(32)
    for der in (unsupported_curve, unknown_oid):
        body = base64.encodebytes(der).decode("ascii")
        pem = f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n"
        with pytest.raises(KeyFormatError, match=r"public key PEM"):
            PublicKey.from_pem(pem)


@pytest.mark.parametrize("seed", SEEDS, ids=range(len(SEEDS)))
def test_rule_pem_is_base64_of_the_spki_der_as_cryptography_writes(seed: bytes) -> None:
    """§1: a PEM PUBLIC KEY is the base64 of the 44-byte DER; from_pem reads cryptography's.

    Decoded by the fixed-prefix decoder (no cryptography at run time), in every
    layout a PEM writer uses: CRLF line ends, short lines, surrounding blank lines.
    """
    crypto_key = ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key()
    pem = _pem_of(crypto_key)
    key = SigningKey.from_seed(seed).public_key
    assert key.raw == crypto_key.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    body = base64.b64encode(_crypto_public_der(seed)).decode()
    short_lines = "\n".join(body[i : i + 16] for i in range(0, len(body), 16))
    for form in (
        pem,
        pem.decode(),
        pem.replace(b"\n", b"\r\n"),
        bytearray(pem),
        memoryview(pem),
        b"\n\n  " + pem + b"\n \n",
        f"-----BEGIN PUBLIC KEY-----\n{short_lines}\n-----END PUBLIC KEY-----",
    ):
        assert PublicKey.from_pem(form) == key
    assert serialization.load_pem_public_key(key.to_pem().encode()) == crypto_key


_BODY = base64.b64encode(SPKI_PREFIX + bytes(range(32))).decode()
_TRAILING_BITS = _BODY[:-2] + chr(ord(_BODY[-2]) + 1) + "="  # same bytes, other text


def _block(body: str, begin: str = "PUBLIC KEY", end: str = "PUBLIC KEY") -> str:
    return f"-----BEGIN {begin}-----\n{body}\n-----END {end}-----\n"


PEM_RULES: list[tuple[str, str | bytes, str]] = [
    ("empty", "", "empty"),
    ("whitespace only", b" \n\t\n", "empty"),
    ("not PEM", "MCowBQYDK2VwAyEA", "does not start with a -----BEGIN PUBLIC KEY----- line"),
    ("text before the block", "Key:\n" + _block(_BODY), "does not start with a -----BEGIN"),
    ("private key label", _block(_BODY, "PRIVATE KEY", "PRIVATE KEY"),
     "the BEGIN line names a 'PRIVATE KEY' block, not 'PUBLIC KEY'"),
    ("mismatched END label", _block(_BODY, end="CERTIFICATE"),
     "the END line names a 'CERTIFICATE' block, not 'PUBLIC KEY'"),
    ("malformed BEGIN line", _block(_BODY).replace("KEY-----", "KEY----", 1),
     "the BEGIN line is not -----BEGIN PUBLIC KEY-----"),
    ("no END line", _block(_BODY).split("-----END")[0], "no -----END PUBLIC KEY----- line"),
    ("two blocks", _block(_BODY) * 2, "text after the END line (one block only)"),
    ("text after the block", _block(_BODY) + "x", "text after the END line (one block only)"),
    ("no body", "-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----", "no base64 body"),
    ("space inside a line", _block(_BODY[:10] + " " + _BODY[10:]),
     "body line 1, column 11: ' ' is not base64"),
    ("blank body line", _block(_BODY[:20] + "\n\n" + _BODY[20:]),
     "body line 2, column 1: an empty line is not base64"),
    ("RFC 1421 header", _block("Proc-Type: 4,ENCRYPTED\n" + _BODY),
     "body line 1, column 5: '-' is not base64"),
    ("base64url alphabet", _block(_BODY.replace("+", "-").replace("/", "_") + "-_"),
     "is not base64"),
    ("missing padding", _block(_BODY.rstrip("=")), "not strict base64"),
    ("padding inside", _block(_BODY[:8] + "=" + _BODY[9:]), "not strict base64"),
    ("non-zero trailing bits", _block(_TRAILING_BITS), "non-zero trailing bits"),
    ("non-ASCII text", _block("é" + _BODY), "non-ASCII character at offset 27"),
    ("non-ASCII bytes", _block(_BODY).encode() + b"\xff", "non-ASCII byte at offset 113"),
    ("43-byte DER", _block(base64.b64encode((SPKI_PREFIX + bytes(32))[:-1]).decode()),
     "not an Ed25519 public key's DER (43 bytes where 44 are required)"),
    ("X25519 SPKI", _block(base64.b64encode(bytes.fromhex("302a300506032b656e032100")
                                             + bytes(32)).decode()),
     "not an Ed25519 public key's DER (byte 8 is 0x6e, not the Ed25519 SPKI prefix)"),
]


@pytest.mark.parametrize(("name", "pem", "message"), PEM_RULES, ids=[r[0] for r in PEM_RULES])
def test_rule_pem_is_exactly_one_strict_public_key_block(
    name: str, pem: str | bytes, message: str
) -> None:
    """§1: from_pem reads one PUBLIC KEY block of strict base64, and names what else it got."""
    with pytest.raises(KeyFormatError, match="^public key PEM: .*" + re.escape(message)):
        PublicKey.from_pem(pem)


def test_public_api_names_of_section_1() -> None:
    """§1 as exported: the package exports the key classes and errors the issue fixes."""
    assert sx.PublicKey is PublicKey
    assert sx.SigningKey is SigningKey
    assert issubclass(sx.KeyFormatError, sx.SimplexRpcError)
    assert issubclass(sx.SimplexRpcError, ValueError)

"""The agent's double ratchet, as far as one request and its answer need it (agent v8).

Every rule is simplexmq's, at commit ``22815214468d4eb79a5e98df7a1ba2daa5d07ad7``,
``src/Simplex/Messaging/Crypto/Ratchet.hs`` (``pqX3dh``, ``rootKdf``, ``chainKdf``,
``MsgHeader``, ``EncMessageHeader``, ``EncRatchetMessage``) and ``Crypto.hs``
(``encryptAEAD``, ``decryptAEAD``, ``hkdf``, ``pad``). The primitives are
``cryptography``'s (X448, AES-256-GCM, HKDF-SHA512); nothing here is hand-written
that it does. The byte reader (:class:`Reader`) names the layer and offset of
every decoding failure.
"""

from __future__ import annotations

from typing import Final, NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x448 import X448PrivateKey, X448PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import AgentCryptoError

E2E_VERSION: Final = 3  # currentE2EEncryptVersion; supportedE2EEncryptVRange is 3..3
HEADER_PADDED_PQ: Final = 2310  # paddedHeaderLen PQSupportOn
HEADER_PADDED_NO_PQ: Final = 88  # paddedHeaderLen PQSupportOff
IV_LENGTH: Final = 16  # ivSize @AES256: the ratchet's GCM takes a 16-byte IV
TAG_LENGTH: Final = 16  # authTagSize
X448_LENGTH: Final = 56
X448_SPKI_PREFIX: Final = bytes.fromhex("3042300506032b656f033900")
KEM_PUBLIC_LENGTH: Final = 1158  # SNTRUP761_PUBLICKEY_SIZE
KEM_SECRET_LENGTH: Final = 1763
KEM_CIPHERTEXT_LENGTH: Final = 1039
KEM_SHARED_LENGTH: Final = 32

_X3DH_SALT: Final = bytes(64)


# -- strict reading ------------------------------------------------------------------


class Reader:
    """A cursor over one layer's bytes; every failure names the layer and the offset."""

    __slots__ = ("data", "layer", "pos")

    def __init__(self, data: bytes, layer: str) -> None:
        self.data = data
        self.layer = layer
        self.pos = 0

    def fail(self, what: str, at: int | None = None) -> NoReturn:
        offset = self.pos if at is None else at
        raise AgentCryptoError(
            f"{self.layer}: {what} at offset {offset}", layer=self.layer, offset=offset
        )

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            self.fail(f"{what}: {n} bytes needed, {len(self.data) - self.pos} left")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def byte(self, what: str) -> int:
        return self.take(1, what)[0]

    def char(self, what: str, allowed: bytes) -> int:
        at = self.pos
        value = self.byte(what)
        if value not in allowed:
            shown = "/".join(repr(chr(c)) for c in allowed)
            self.fail(f"{what}: {chr(value)!r} (0x{value:02x}) is not {shown}", at)
        return value

    def word16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "big")

    def word32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "big")

    def short(self, what: str) -> bytes:
        """``ByteString``: a 1-byte length, then the bytes."""
        return self.take(self.byte(f"{what} length"), what)

    def large(self, what: str) -> bytes:
        """``Large``: a 2-byte length, then the bytes."""
        return self.take(self.word16(f"{what} length"), what)

    def maybe(self, what: str) -> bool:
        """``Maybe``: ``'0'`` (False) or ``'1'`` (True)."""
        return self.char(what, b"01") == 0x31

    def tail(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out

    def end(self, what: str) -> None:
        if self.pos != len(self.data):
            self.fail(f"{len(self.data) - self.pos} bytes after the {what}")


def short(data: bytes) -> bytes:
    """``smpEncode`` of a ``ByteString``: 1-byte length, then the bytes."""
    if len(data) > 255:
        raise ValueError(f"a ByteString of {len(data)} bytes (at most 255)")
    return bytes((len(data),)) + data


def large(data: bytes) -> bytes:
    """``smpEncode`` of ``Large``: 2-byte length, then the bytes."""
    return len(data).to_bytes(2, "big") + data


# -- keys ------------------------------------------------------------------------------


def x448_private(raw: bytes, what: str) -> X448PrivateKey:
    if len(raw) != X448_LENGTH:
        raise AgentCryptoError(
            f"{what}: {len(raw)} bytes where an X448 private key has {X448_LENGTH}",
            layer="keys",
        )
    return X448PrivateKey.from_private_bytes(raw)


def x448_public_raw(private: X448PrivateKey) -> bytes:
    return private.public_key().public_bytes_raw()


def x448_spki(raw: bytes) -> bytes:
    """The 68-byte X.509 SPKI of a raw X448 public key (``encodePubKey``)."""
    return X448_SPKI_PREFIX + raw


def read_x448(reader: Reader, what: str) -> bytes:
    """An X448 public key as ``smpEncode`` writes it: ``ByteString`` of its SPKI; its raw bytes."""
    at = reader.pos
    der = reader.short(what)
    if len(der) != len(X448_SPKI_PREFIX) + X448_LENGTH or not der.startswith(X448_SPKI_PREFIX):
        reader.fail(f"{what}: not the 68-byte X.509 SPKI of an X448 key", at)
    return der[len(X448_SPKI_PREFIX) :]


def dh(public_raw: bytes, private: X448PrivateKey, layer: str) -> bytes:
    """``dhBytes' (dh' public private)``: the raw 56-byte X448 shared secret."""
    try:
        return private.exchange(X448PublicKey.from_public_bytes(public_raw))
    except ValueError:  # an all-zero result: a key of small order
        raise AgentCryptoError(
            f"{layer}: an X448 key of small order (the shared secret is zero)", layer=layer
        ) from None


# -- key derivation (Ratchet.hs) ---------------------------------------------------------


def hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    """``hkdf`` of Crypto.hs: HKDF-SHA512 (RFC 5869)."""
    return HKDF(algorithm=hashes.SHA512(), length=length, salt=salt, info=info).derive(ikm)


def x3dh(
    dh1: bytes, dh2: bytes, dh3: bytes, kem_shared: bytes | None
) -> tuple[bytes, bytes, bytes]:
    """``pqX3dh``: the header key, the next header key and the root key (``hk, nhk, sk``)."""
    ikm = dh1 + dh2 + dh3 + (kem_shared or b"")
    out = hkdf(_X3DH_SALT, ikm, b"SimpleXX3DH", 128)
    return out[:32], out[32:64], out[64:96]


def root_kdf(
    root_key: bytes, dh_out: bytes, kem_shared: bytes | None
) -> tuple[bytes, bytes, bytes]:
    """``rootKdf``: the next root key, a chain key and the next header key."""
    out = hkdf(root_key, dh_out + (kem_shared or b""), b"SimpleXRootRatchet", 96)
    return out[:32], out[32:64], out[64:96]


def chain_kdf(chain_key: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """``chainKdf``: the next chain key, the message key, its IV and the header IV."""
    out = hkdf(b"", chain_key, b"SimpleXChainRatchet", 96)
    return out[:32], out[32:64], out[64:80], out[80:96]


# -- AEAD (Crypto.hs encryptAEAD / decryptAEAD) -------------------------------------------


def pad(message: bytes, length: int) -> bytes:
    """``pad``: a 2-byte length, the message, ``'#'`` fill to ``length``."""
    fill = length - 2 - len(message)
    if fill < 0:
        raise ValueError(f"a message of {len(message)} bytes does not fit {length}")
    return len(message).to_bytes(2, "big") + message + b"#" * fill


def unpad(block: bytes, layer: str, lengths: tuple[int, ...]) -> bytes:
    """The message in a padded block of one of ``lengths`` bytes, fill all ``'#'`` (ours)."""
    if len(block) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise AgentCryptoError(
            f"{layer}: padded block of {len(block)} bytes where {want} are required",
            layer=layer,
            offset=0,
        )
    n = int.from_bytes(block[:2], "big")
    if n > len(block) - 2:
        raise AgentCryptoError(
            f"{layer}: padding length {n} at offset 0 exceeds the {len(block) - 2} bytes"
            " that follow",
            layer=layer,
            offset=0,
        )
    fill = block[2 + n :]
    if fill.count(b"#") != len(fill):
        at = 2 + n + next(i for i, b in enumerate(fill) if b != 0x23)
        raise AgentCryptoError(
            f"{layer}: padding byte at offset {at} is not '#'", layer=layer, offset=at
        )
    return block[2 : 2 + n]


def seal_aead(key: bytes, iv: bytes, ad: bytes, padded: bytes) -> tuple[bytes, bytes]:
    """``encryptAEAD`` after its padding: AES-256-GCM with a 16-byte IV; (tag, ciphertext)."""
    sealed = AESGCM(key).encrypt(iv, padded, ad)
    return sealed[-TAG_LENGTH:], sealed[:-TAG_LENGTH]


def decrypt_aead(key: bytes, iv: bytes, ad: bytes, body: bytes, tag: bytes, layer: str) -> bytes:
    """``decryptAEAD`` without the unpadding: the padded plaintext, or the layer's error."""
    try:
        return AESGCM(key).decrypt(iv, body + tag, ad)
    except InvalidTag:
        raise AgentCryptoError(
            f"{layer}: the AES-GCM tag does not verify (wrong keys, or the bytes were changed)",
            layer=layer,
        ) from None


# -- the ratchet's messages ----------------------------------------------------------------


KemParams = tuple[bytes | None, bytes]  # (ciphertext or None for a proposal, public key)


def encode_kem(kem: KemParams | None) -> bytes:
    """``Maybe ARKEMParams``: ``'0'``, ``'1' 'P' pk`` or ``'1' 'A' ct pk`` (``Large`` each)."""
    if kem is None:
        return b"0"
    ciphertext, public = kem
    if ciphertext is None:
        return b"1P" + large(public)
    return b"1A" + large(ciphertext) + large(public)


def read_kem(reader: Reader, what: str) -> KemParams | None:
    """Read ``Maybe ARKEMParams``; the KEM key and ciphertext must have sntrup761's sizes."""
    if not reader.maybe(what):
        return None
    tag = reader.char(f"{what} state", b"PA")
    ciphertext = None
    if tag == 0x41:
        at = reader.pos
        ciphertext = reader.large(f"{what} ciphertext")
        if len(ciphertext) != KEM_CIPHERTEXT_LENGTH:
            reader.fail(
                f"{what}: an sntrup761 ciphertext of {len(ciphertext)} bytes"
                f" (it has {KEM_CIPHERTEXT_LENGTH})",
                at,
            )
    at = reader.pos
    public = reader.large(f"{what} public key")
    if len(public) != KEM_PUBLIC_LENGTH:
        reader.fail(
            f"{what}: an sntrup761 public key of {len(public)} bytes (it has {KEM_PUBLIC_LENGTH})",
            at,
        )
    return ciphertext, public


def encode_header(dh_public: bytes, kem: KemParams | None) -> bytes:
    """``MsgHeader`` of a ratchet's first message: max version 3, the DH key, KEM, PN 0, Ns 0."""
    return (
        E2E_VERSION.to_bytes(2, "big")
        + short(x448_spki(dh_public))
        + encode_kem(kem)
        + bytes(8)
    )


def decode_header(data: bytes) -> tuple[bytes, KemParams | None]:
    """Read a first message's ``MsgHeader``: its DH key and KEM parameters.

    The versions must be simplexmq's only E2E version (3), and PN and Ns 0, as in a
    ratchet's first message (ours: the agent would skip message keys instead).
    """
    reader = Reader(data, "ratchet header")
    at = reader.pos
    version = reader.word16("max version")
    if version != E2E_VERSION:
        reader.fail(f"E2E version {version}, not {E2E_VERSION}", at)
    dh_public = read_x448(reader, "DH key")
    kem = read_kem(reader, "KEM parameters")
    at = reader.pos
    pn = reader.word32("PN")
    ns = reader.word32("Ns")
    if pn or ns:
        reader.fail(f"PN {pn} and Ns {ns}: not the ratchet's first message", at)
    reader.end("header")
    return dh_public, kem


def encrypt_message(
    *,
    ad: bytes,
    header_key: bytes,
    chain_key: bytes,
    padded_header: bytes,
    padded_message: bytes,
) -> bytes:
    """``rcEncryptHeader`` then ``rcEncryptMsg``: the encoded ``EncRatchetMessage``.

    Both parts come padded (``encryptAEAD`` pads before it encrypts): the header to
    2,310 or 88 bytes, the message to its block length.
    """
    _, message_key, iv, header_iv = chain_kdf(chain_key)
    header_tag, header_body = seal_aead(header_key, header_iv, ad, padded_header)
    em_header = E2E_VERSION.to_bytes(2, "big") + header_iv + header_tag + large(header_body)
    tag, body = seal_aead(message_key, iv, ad + em_header, padded_message)
    return large(em_header) + tag + body


class EncryptedMessage:
    """An ``EncRatchetMessage`` read strictly: its header (encrypted) and body."""

    __slots__ = ("body", "em_header", "header_body", "header_iv", "header_tag", "tag")

    def __init__(self, data: bytes) -> None:
        reader = Reader(data, "ratchet message")
        self.em_header = reader.large("encrypted header")
        self.tag = reader.take(TAG_LENGTH, "message auth tag")
        self.body = reader.tail()
        header = Reader(self.em_header, "encrypted ratchet header")
        at = header.pos
        version = header.word16("ratchet version")
        if version != E2E_VERSION:
            header.fail(f"ratchet version {version}, not {E2E_VERSION}", at)
        self.header_iv = header.take(IV_LENGTH, "header IV")
        self.header_tag = header.take(TAG_LENGTH, "header auth tag")
        self.header_body = header.large("header body")
        header.end("encrypted header")

    def header(self, key: bytes, ad: bytes, lengths: tuple[int, ...]) -> bytes:
        """The decrypted, unpadded ``MsgHeader`` bytes."""
        padded = decrypt_aead(
            key, self.header_iv, ad, self.header_body, self.header_tag, "ratchet header GCM"
        )
        return unpad(padded, "ratchet header padding", lengths)

    def open(self, chain_key: bytes, ad: bytes) -> bytes:
        """The decrypted message, still padded, under the chain key's first message key."""
        _, message_key, iv, _ = chain_kdf(chain_key)
        return decrypt_aead(
            message_key, iv, ad + self.em_header, self.body, self.tag, "ratchet message GCM"
        )

"""Ed25519 keys in the encodings of the SimpleX core (wire.md section 1)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final, NoReturn

import nacl.bindings
import nacl.exceptions

from . import _b64
from .errors import BadSignature, KeyFormatError, SimplexRpcError

__all__ = ["SIGNING_DOMAIN", "PublicKey", "SigningKey", "session_tag"]

SIGNING_DOMAIN: Final = b"SimpleXService"

# RFC 8410: the only DER encodings of an Ed25519 key are these prefixes and
# the 32 key bytes. Any other byte string is either not DER or not Ed25519.
SPKI_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")
PKCS8_PREFIX: Final = bytes.fromhex("302e020100300506032b657004220420")
SPKI_LENGTH: Final = len(SPKI_PREFIX) + 32  # 44
PKCS8_LENGTH: Final = len(PKCS8_PREFIX) + 32  # 48
SIGNATURE_LENGTH: Final = 64


def _as_bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what}: expected a bytes-like object, got {type(value).__name__}")


def _brief(exc: Exception) -> str:
    """The crypto library's message, bounded: it can quote the input (a PEM label)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:200] + "..."


def session_tag(ad: bytes) -> bytes:
    """Return SHA3-256(SIGNING_DOMAIN ‖ ad), the 32 bytes that bind a signature to a session.

    ``ad`` is the double ratchet's associated data; it must not be empty.
    """
    ad = _as_bytes(ad, "ad")
    if not ad:
        raise SimplexRpcError("ad: the associated data must not be empty")
    return hashlib.sha3_256(SIGNING_DOMAIN + ad).digest()


class PublicKey:
    """An Ed25519 public key.

    Equal and hashed by its 32 key bytes, so the padded and unpadded text of
    one key name the same ``PublicKey``.
    """

    __slots__ = ("_raw",)
    _raw: bytes

    def __init__(self, raw: bytes) -> None:
        raw = _as_bytes(raw, "public key")
        if len(raw) != 32:
            raise KeyFormatError(f"public key: {len(raw)} bytes where 32 are required")
        object.__setattr__(self, "_raw", raw)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("PublicKey is immutable")

    # -- constructors -------------------------------------------------------

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        """Build a key from its 32 raw bytes."""
        return cls(raw)

    @classmethod
    def from_der(cls, der: bytes) -> PublicKey:
        """Build a key from its X.509 SubjectPublicKeyInfo DER (exactly 44 bytes)."""
        der = _as_bytes(der, "public key DER")
        if len(der) != SPKI_LENGTH:
            raise KeyFormatError(
                f"public key DER: {len(der)} bytes where {SPKI_LENGTH} are required"
            )
        for i, (got, want) in enumerate(zip(der, SPKI_PREFIX, strict=False)):
            if got != want:
                raise KeyFormatError(
                    f"public key DER: byte {i} is 0x{got:02x}, not the Ed25519 SPKI prefix"
                )
        return cls(der[len(SPKI_PREFIX) :])

    @classmethod
    def from_pem(cls, pem: bytes | str) -> PublicKey:
        """Build a key from a PEM ``PUBLIC KEY`` block holding an Ed25519 SPKI.

        Needs the ``crypto`` extra (cryptography parses the PEM and its DER):
        without it, :class:`SimplexRpcError` says what to install.
        """
        try:
            from cryptography.exceptions import UnsupportedAlgorithm
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ed25519
        except ImportError:
            raise SimplexRpcError(
                "public key PEM: reading PEM needs cryptography:"
                " pip install 'simplex-rpc[crypto]' (or give the key as DER or text)"
            ) from None

        if isinstance(pem, str):
            try:
                pem = pem.encode("ascii")
            except UnicodeEncodeError:
                raise KeyFormatError("public key PEM: not ASCII text") from None
        pem = _as_bytes(pem, "public key PEM")
        try:
            key = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as exc:
            raise KeyFormatError(f"public key PEM: not a PEM public key ({_brief(exc)})") from None
        except UnsupportedAlgorithm as exc:
            # An SPKI of an unknown algorithm or curve: not an Ed25519 key either.
            raise KeyFormatError(
                f"public key PEM: the key is not an Ed25519 key ({_brief(exc)})"
            ) from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise KeyFormatError("public key PEM: the key is not an Ed25519 key")
        der = key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls.from_der(der)

    @classmethod
    def decode(cls, text: str | bytes) -> PublicKey:
        """Decode ``signerKey``/``requestKey`` text: base64url SPKI DER, padded or not."""
        try:
            der = _b64.decode(text, "public key")
        except ValueError as exc:
            raise KeyFormatError(str(exc)) from None
        return cls.from_der(der)

    # -- encodings ----------------------------------------------------------

    @property
    def raw(self) -> bytes:
        """The 32 raw key bytes."""
        return self._raw

    @property
    def der(self) -> bytes:
        """The 44-byte X.509 SubjectPublicKeyInfo DER."""
        return SPKI_PREFIX + self._raw

    def encode(self) -> str:
        """The padded base64url text of the DER, as the core writes ``signerKey``."""
        return _b64.encode(self.der)

    def to_pem(self) -> str:
        """The PEM ``PUBLIC KEY`` block of the key."""
        import base64

        body = base64.encodebytes(self.der).decode("ascii")
        return f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n"

    # -- verification -------------------------------------------------------

    def verify(self, message: bytes, signature: bytes) -> None:
        """Verify a raw Ed25519 signature over ``message``.

        Returns None when the signature is valid; raises :class:`BadSignature`
        otherwise. The policy is libsodium's strict one: S < L, canonical R
        and A, neither of small order.
        """
        message = _as_bytes(message, "message")
        signature = _as_bytes(signature, "signature")
        if len(signature) != SIGNATURE_LENGTH:
            raise BadSignature(
                f"signature: {len(signature)} bytes where {SIGNATURE_LENGTH} are required"
            )
        try:
            nacl.bindings.crypto_sign_open(signature + message, self._raw)
        except nacl.exceptions.BadSignatureError:
            raise BadSignature("signature: does not verify under the key") from None
        except nacl.exceptions.CryptoError:  # pragma: no cover - defensive
            raise BadSignature("signature: does not verify under the key") from None

    def verify_request(self, ad: bytes, payload: bytes, signature: bytes) -> None:
        """Verify a session-bound request signature (wire.md section 2)."""
        self._verify_tagged(session_tag(ad), payload, signature)

    def _verify_tagged(self, tag: bytes, payload: bytes, signature: bytes) -> None:
        """As :meth:`verify_request`, with the session tag already computed."""
        payload = _as_bytes(payload, "payload")
        try:
            self.verify(tag + payload, signature)
        except BadSignature:
            raise BadSignature(
                "signature: does not verify for this key, session (AD) and payload"
            ) from None

    # -- value semantics ----------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PublicKey):
            return NotImplemented
        return hmac.compare_digest(self._raw, other._raw)

    def __hash__(self) -> int:
        return hash((PublicKey, self._raw))

    def __repr__(self) -> str:
        return f"PublicKey.decode({self.encode()!r})"

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        return (PublicKey, (self._raw,))


class SigningKey:
    """An Ed25519 private key.

    Its ``repr`` and ``str`` show only the public key; the private key leaves
    the object only through :meth:`encode` and :meth:`seed`, which a caller
    asks for explicitly.
    """

    __slots__ = ("_public", "_seed", "_sk")
    _seed: bytes
    _sk: bytes
    _public: PublicKey

    def __init__(self, seed: bytes) -> None:
        seed = _as_bytes(seed, "seed")
        if len(seed) != 32:
            raise KeyFormatError(f"seed: {len(seed)} bytes where 32 are required")
        pk, sk = nacl.bindings.crypto_sign_seed_keypair(seed)
        object.__setattr__(self, "_seed", seed)
        object.__setattr__(self, "_sk", sk)
        object.__setattr__(self, "_public", PublicKey(pk))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("SigningKey is immutable")

    @classmethod
    def generate(cls) -> SigningKey:
        """A new key from the operating system's random generator."""
        import os

        return cls(os.urandom(32))

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """The key of a 32-byte RFC 8032 seed (the private key bytes)."""
        return cls(seed)

    @classmethod
    def from_der(cls, der: bytes) -> SigningKey:
        """Build a key from its 48-byte PKCS#8 v1 DER (RFC 8410)."""
        der = _as_bytes(der, "private key DER")
        if len(der) != PKCS8_LENGTH:
            raise KeyFormatError(
                f"private key DER: {len(der)} bytes where {PKCS8_LENGTH} are required"
            )
        for i, (got, want) in enumerate(zip(der, PKCS8_PREFIX, strict=False)):
            if got != want:
                raise KeyFormatError(
                    f"private key DER: byte {i} is not the Ed25519 PKCS#8 prefix"
                )
        return cls(der[len(PKCS8_PREFIX) :])

    @classmethod
    def decode(cls, text: str | bytes) -> SigningKey:
        """Decode the text of ``sign_key=``: base64url PKCS#8 DER, padded or not."""
        try:
            der = _b64.decode(text, "private key", secret=True)
        except ValueError as exc:
            raise KeyFormatError(str(exc)) from None
        return cls.from_der(der)

    def seed(self) -> bytes:
        """The 32-byte seed: private key material."""
        return self._seed

    @property
    def der(self) -> bytes:
        """The 48-byte PKCS#8 DER: private key material."""
        return PKCS8_PREFIX + self._seed

    def encode(self) -> str:
        """The base64url PKCS#8 text that ``sign_key=`` takes: private key material."""
        return _b64.encode(self.der)

    @property
    def public_key(self) -> PublicKey:
        """The key's public half."""
        return self._public

    def sign(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of ``message`` (RFC 8032, pure Ed25519)."""
        message = _as_bytes(message, "message")
        return nacl.bindings.crypto_sign(message, self._sk)[:SIGNATURE_LENGTH]

    def sign_request(self, ad: bytes, payload: bytes) -> bytes:
        """The 64-byte session-bound signature of ``payload`` (wire.md section 2)."""
        payload = _as_bytes(payload, "payload")
        return self.sign(session_tag(ad) + payload)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SigningKey):
            return NotImplemented
        return hmac.compare_digest(self._seed, other._seed)

    def __hash__(self) -> int:
        return hash((SigningKey, self._public.raw))

    def __repr__(self) -> str:
        return f"<SigningKey public_key={self._public.encode()}>"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("SigningKey is not picklable: encode() it explicitly if you must")

"""Ed25519 keys in the encodings of the SimpleX core (wire.md section 1)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from typing import Final, NoReturn

import nacl.bindings
import nacl.exceptions

from ..errors import BadSignature, KeyFormatError, SimplexRpcError
from . import b64 as _b64

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


_PEM_BEGIN: Final = b"-----BEGIN PUBLIC KEY-----"
_PEM_END: Final = b"-----END PUBLIC KEY-----"
_NOT_BASE64: Final = re.compile(rb"[^A-Za-z0-9+/=]")
#: PublicKey.decode's memory: key text to key, at most _DECODED_MAX entries (then cleared).
_DECODED: Final[dict[str, PublicKey]] = {}
_DECODED_MAX: Final = 1024


def _pem_line(line: bytes, kind: str, want: bytes) -> None:
    """Refuse a BEGIN or END line other than ``want``, naming its label if it has one."""
    if line == want:
        return
    head = f"-----{kind} ".encode()
    if line.startswith(head) and line.endswith(b"-----") and len(line) > len(head) + 5:
        label = line[len(head) : -5].decode("ascii")
        shown = repr(label[:40] + ("..." if len(label) > 40 else ""))
        raise KeyFormatError(
            f"public key PEM: the {kind} line names a {shown} block, not 'PUBLIC KEY'"
        )
    raise KeyFormatError(f"public key PEM: the {kind} line is not {want.decode()}")


def _pem_der(pem: object) -> bytes:
    """The DER inside one PEM ``PUBLIC KEY`` block (see ``PublicKey.from_pem``)."""
    if isinstance(pem, str):
        if not pem.isascii():
            at = next(i for i, ch in enumerate(pem) if ord(ch) > 127)
            raise KeyFormatError(f"public key PEM: non-ASCII character at offset {at}")
        data = pem.encode("ascii")
    else:
        data = _as_bytes(pem, "public key PEM")
        if not data.isascii():
            at = next(i for i, byte in enumerate(data) if byte > 127)
            raise KeyFormatError(f"public key PEM: non-ASCII byte at offset {at}")
    if not data.strip():
        raise KeyFormatError("public key PEM: empty")
    lines = [line.removesuffix(b"\r") for line in data.strip().split(b"\n")]
    if not lines[0].startswith(b"-----BEGIN "):
        raise KeyFormatError(
            "public key PEM: does not start with a -----BEGIN PUBLIC KEY----- line"
        )
    _pem_line(lines[0], "BEGIN", _PEM_BEGIN)
    end = next((i for i, line in enumerate(lines) if line.startswith(b"-----END ")), None)
    if end is None:
        raise KeyFormatError("public key PEM: no -----END PUBLIC KEY----- line")
    _pem_line(lines[end], "END", _PEM_END)
    if end != len(lines) - 1:
        raise KeyFormatError("public key PEM: text after the END line (one block only)")
    body = lines[1:end]
    if not body:
        raise KeyFormatError("public key PEM: no base64 body between BEGIN and END")
    for number, line in enumerate(body, 1):
        bad = _NOT_BASE64.search(line)
        if bad is not None or not line:
            column = bad.start() + 1 if bad is not None else 1
            shown = repr(chr(line[bad.start()])) if bad is not None else "an empty line"
            raise KeyFormatError(
                f"public key PEM: body line {number}, column {column}: {shown} is not base64"
            )
    text = b"".join(body)
    try:
        der = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error as exc:
        raise KeyFormatError(f"public key PEM: the body is not strict base64 ({exc})") from None
    if base64.b64encode(der) != text:
        raise KeyFormatError("public key PEM: non-zero trailing bits in the base64 body")
    return der


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
        if not der.startswith(SPKI_PREFIX):  # one comparison; the loop only names the byte
            for i, (got, want) in enumerate(zip(der, SPKI_PREFIX, strict=False)):
                if got != want:
                    raise KeyFormatError(
                        f"public key DER: byte {i} is 0x{got:02x}, not the Ed25519 SPKI prefix"
                    )
        return cls(der[len(SPKI_PREFIX) :])

    @classmethod
    def from_pem(cls, pem: bytes | str) -> PublicKey:
        """Build a key from a PEM ``PUBLIC KEY`` block holding an Ed25519 SPKI.

        Exactly one block (RFC 7468): the ``-----BEGIN PUBLIC KEY-----`` line,
        base64 body lines (strict: the standard alphabet, no whitespace inside a
        line, padding only at the end, no stray bits), the ``-----END PUBLIC
        KEY-----`` line; whitespace around the block, and CRLF line ends, are
        allowed. The body is the 44-byte DER that :meth:`from_der` decodes.
        Anything else raises :class:`KeyFormatError` naming what is wrong.
        """
        der = _pem_der(pem)
        try:
            return cls.from_der(der)
        except KeyFormatError as exc:
            detail = str(exc).removeprefix("public key DER: ")
            raise KeyFormatError(
                f"public key PEM: the body is not an Ed25519 public key's DER ({detail})"
            ) from None

    @classmethod
    def decode(cls, text: str | bytes) -> PublicKey:
        """Decode ``signerKey``/``requestKey`` text: base64url SPKI DER, padded or not."""
        # A requester signs with few keys, and each request names its key again: the
        # text of the last few keys decoded maps to the (immutable) key. Only valid
        # text is remembered, so every error is raised as before.
        memo: str | None = None  # the text, when it is remembered
        if cls is PublicKey and type(text) is str:
            memo = text
            key = _DECODED.get(memo)
            if key is not None:
                return key
        try:
            der = _b64.decode(text, "public key")
        except ValueError as exc:
            raise KeyFormatError(str(exc)) from None
        key = cls.from_der(der)
        if memo is not None:
            if len(_DECODED) >= _DECODED_MAX:
                _DECODED.clear()
            _DECODED[memo] = key
        return key

    @classmethod
    def _checked(cls, raw: bytes) -> PublicKey:
        """A key of 32 raw bytes the caller has already checked (the C backend's hot
        path): the slot set directly, without ``__init__``'s checks."""
        key = object.__new__(cls)
        _set_raw(key, raw)
        return key

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


_set_raw: Final = PublicKey.__dict__["_raw"].__set__  # the slot, past __setattr__


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

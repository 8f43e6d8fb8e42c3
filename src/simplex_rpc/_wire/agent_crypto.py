"""Service RPC cryptography end to end, as the SimpleX agent v8 does it.

A requester seals a request to a service address's ratchet keys
(:func:`seal_service_request`); the service opens it (:func:`open_service_request`)
and answers on the reply queue (:func:`seal_service_response`); the requester
reads the answer (:func:`open_service_response`). Every rule is simplexmq's at
commit ``22815214468d4eb79a5e98df7a1ba2daa5d07ad7``:

- ``Agent.hs``: ``joinConnSrv'`` and ``createRatchet_`` (the requester),
  ``smpContactRequest``, ``initRcvRatchet_`` and ``verifyServiceReq`` (the service),
  ``prepareReply``, ``storeConfirmation`` and ``newSndQueue`` (the answer),
  ``serviceReqBinding`` and ``signServiceReq`` (the signature);
- ``Agent/Client.hs``: ``agentCbEncryptOnce`` (the request's box) and
  ``sendConfirmation``/``agentCbEncrypt`` (the answer's box, ``'_'`` or ``'K'``);
- ``Agent/Protocol.hs``: ``AgentMsgEnvelope`` (``'A'`` contact request, ``'C'``
  confirmation), ``AddressRatchetKeys``, ``e2eEncConnInfoLength``;
- ``Protocol.hs``: ``ClientMsgEnvelope``, ``PubHeader``, ``ClientMessage``,
  ``e2eEncConfirmationLength`` (15,904);
- ``Crypto/Ratchet.hs``: see :mod:`.ratchet`.

Every random input can be injected (:class:`RequestRandomness`,
:class:`ResponseRandomness`), so that fixed inputs give the same bytes on every
run. Private keys never appear in a ``repr``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any, Final

import nacl.bindings
import nacl.exceptions

from ..errors import AgentCryptoError, install_hint
from . import b64 as _b64
from . import backend as _backend
from . import ratchet as _r
from .agent_block import X25519_SPKI_PREFIX, SMPQueueInfo
from .backend import Backend
from .keys import SPKI_LENGTH as ED25519_SPKI_LENGTH
from .keys import SPKI_PREFIX as ED25519_SPKI_PREFIX
from .keys import PublicKey, SigningKey
from .seal import NO_PQ_PADDED_LENGTH, PQ_PADDED_LENGTH

__all__ = [
    "AddressKeys",
    "AddressPublicKeys",
    "OpenedServiceRequest",
    "RequestRandomness",
    "RequesterState",
    "ResponseRandomness",
    "SealedRequest",
    "ServiceReply",
    "open_service_request",
    "open_service_response",
    "seal_service_rejection",
    "seal_service_request",
    "seal_service_response",
]

AGENT_VERSION: Final = 8  # currentSMPAgentVersion = rpcAddressSMPAgentVersion
CONN_INFO_PQ: Final = PQ_PADDED_LENGTH  # e2eEncConnInfoLength PQSupportOn: 11,106
CONN_INFO_NO_PQ: Final = NO_PQ_PADDED_LENGTH  # e2eEncConnInfoLength PQSupportOff: 14,832
CONFIRMATION_LENGTH: Final = 15904  # e2eEncConfirmationLength
BOX_LENGTH: Final = CONFIRMATION_LENGTH + 16
NONCE_LENGTH: Final = 24
KEY_ID_LENGTH: Final = 16  # generateAddressRatchetKeys: randomBytes 16
X25519_LENGTH: Final = 32
_EXTRA_HINT: Final = "install the sntrup761 extra: " + install_hint("sntrup761")


# -- sntrup761, optional ---------------------------------------------------------------


def _sntrup(what: str) -> ModuleType:
    """pqcrypto's sntrup761, or one clear error naming the extra."""
    try:
        from pqcrypto.kem import sntrup_761
    except ImportError:
        raise AgentCryptoError(
            f"sntrup761: {what} needs the post-quantum KEM; {_EXTRA_HINT}", layer="sntrup761"
        ) from None
    module: ModuleType = sntrup_761
    return module


def _kem_keypair(what: str) -> tuple[bytes, bytes]:
    """A new sntrup761 key pair: (secret, public)."""
    public, secret = _sntrup(what).keygen()
    return bytes(secret), bytes(public)


def _kem_encapsulate(public: bytes, what: str) -> tuple[bytes, bytes]:
    """(ciphertext, shared secret) encapsulated to ``public``."""
    ciphertext, shared = _sntrup(what).encaps(public)
    return bytes(ciphertext), bytes(shared)


def _kem_decapsulate(secret: bytes, ciphertext: bytes, what: str) -> bytes:
    return bytes(_sntrup(what).decaps(secret, ciphertext))


# -- values ------------------------------------------------------------------------------


def _bytes(value: object, what: str, length: int | None = None) -> bytes:
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise TypeError(f"{what}: expected bytes, got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise AgentCryptoError(
            f"{what}: {len(value)} bytes where {length} are required", layer="keys"
        )
    return value


def _check_type(value: object, cls: type, what: str) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"{what}: expected {cls.__name__}, got {type(value).__name__}")


def _x25519_public(private: bytes) -> bytes:
    return nacl.bindings.crypto_scalarmult_base(private)


def x25519_spki(raw: bytes) -> bytes:
    """The 44-byte X.509 SPKI of a raw X25519 public key."""
    return X25519_SPKI_PREFIX + raw


def read_x25519(reader: _r.Reader, what: str) -> bytes:
    """An X25519 key as ``smpEncode`` writes it (``ByteString`` of its SPKI); its raw bytes."""
    at = reader.pos
    der = reader.short(what)
    if len(der) != len(X25519_SPKI_PREFIX) + X25519_LENGTH or not der.startswith(
        X25519_SPKI_PREFIX
    ):
        reader.fail(f"{what}: not the 44-byte X.509 SPKI of an X25519 key", at)
    return der[len(X25519_SPKI_PREFIX) :]


def read_ed25519(reader: _r.Reader, what: str) -> bytes:
    """An Ed25519 key as ``smpEncode`` writes it; its raw bytes."""
    at = reader.pos
    der = reader.short(what)
    if len(der) != ED25519_SPKI_LENGTH or not der.startswith(ED25519_SPKI_PREFIX):
        reader.fail(f"{what}: not the 44-byte X.509 SPKI of an Ed25519 key", at)
    return der[len(ED25519_SPKI_PREFIX) :]


def _secret_reader(text: str | bytes, what: str) -> _r.Reader:
    """A reader over the base64url text of private material (errors name offsets only)."""
    try:
        data = _b64.decode(text, what, secret=True)
    except ValueError as exc:
        raise AgentCryptoError(str(exc), layer=what) from None
    return _r.Reader(data, what)


def _secret_repr(obj: object, shown: dict[str, object]) -> str:
    inner = ", ".join(f"{k}={v}" for k, v in shown.items())
    return f"<{type(obj).__name__} {inner} (private keys redacted)>"


class AddressPublicKeys:
    """A service address's public keys, as a requester reads them from its link.

    ``queue_dh``: the address queue's X25519 key (32 raw bytes, ``dh=`` of its queue
    URI); ``k1``, ``k2``: the ratchet's X448 keys (56 raw bytes each); ``kem``: the
    sntrup761 public key (1,158 bytes) or None; ``key_id``: the ``ratchetKeyId``.
    The last four are ``AddressRatchetKeys`` in the link's ``UserContactData``
    (:meth:`link_data`).
    """

    __slots__ = ("k1", "k2", "kem", "key_id", "queue_dh")
    queue_dh: bytes
    k1: bytes
    k2: bytes
    kem: bytes | None
    key_id: bytes

    def __init__(
        self, *, queue_dh: bytes, k1: bytes, k2: bytes, kem: bytes | None, key_id: bytes
    ) -> None:
        object.__setattr__(self, "queue_dh", _bytes(queue_dh, "queue_dh", 32))
        object.__setattr__(self, "k1", _bytes(k1, "k1", _r.X448_LENGTH))
        object.__setattr__(self, "k2", _bytes(k2, "k2", _r.X448_LENGTH))
        kem = None if kem is None else _bytes(kem, "kem", _r.KEM_PUBLIC_LENGTH)
        object.__setattr__(self, "kem", kem)
        key_id = _bytes(key_id, "key_id")
        if not 1 <= len(key_id) <= 255:
            raise AgentCryptoError(
                f"key_id: {len(key_id)} bytes (a ratchetKeyId has 1 to 255)", layer="keys"
            )
        object.__setattr__(self, "key_id", key_id)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("AddressPublicKeys is immutable")

    def link_data(self) -> bytes:
        """``smpEncode`` of ``AddressRatchetKeys``: the ``ratchetKeys`` of ``UserContactData``.

        ``ratchetKeyId`` (``ByteString``), then ``E2ERatchetParamsUri``: the E2E
        version range (3, 3), ``k1`` and ``k2`` (``ByteString`` of the X448 SPKI)
        and ``Maybe`` of the KEM proposal (``'P'`` and the ``Large`` key). In the
        link data it follows the ``Maybe`` byte ``'1'``.
        """
        kem = None if self.kem is None else (None, self.kem)
        return (
            _r.short(self.key_id)
            + _r.E2E_VERSION.to_bytes(2, "big") * 2
            + _r.short(_r.x448_spki(self.k1))
            + _r.short(_r.x448_spki(self.k2))
            + _r.encode_kem(kem)
        )

    @classmethod
    def from_link_data(cls, data: bytes, *, queue_dh: bytes) -> AddressPublicKeys:
        """Read ``AddressRatchetKeys`` (:meth:`link_data`) strictly, with the queue's key.

        The version range must hold E2E version 3 (``compatibleVersion``), and a KEM
        must be a proposal (``RcvE2ERatchetParamsUri`` is ``'RKSProposed``).
        """
        reader = _r.Reader(_bytes(data, "link data"), "address ratchet keys")
        at = reader.pos
        key_id = reader.short("ratchetKeyId")
        if not key_id:
            reader.fail("empty ratchetKeyId", at)
        at = reader.pos
        low = reader.word16("E2E min version")
        high = reader.word16("E2E max version")
        if low > high:
            reader.fail(f"E2E version range {low}-{high} is empty", at)
        if not low <= _r.E2E_VERSION <= high:
            reader.fail(f"E2E versions {low}-{high} do not include {_r.E2E_VERSION}", at)
        k1 = _r.read_x448(reader, "k1")
        k2 = _r.read_x448(reader, "k2")
        at = reader.pos
        kem = _r.read_kem(reader, "KEM")
        if kem is not None and kem[0] is not None:
            reader.fail("KEM: an accepted KEM where the address proposes one ('P')", at)
        reader.end("ratchet keys")
        return cls(
            queue_dh=queue_dh, k1=k1, k2=k2, kem=None if kem is None else kem[1], key_id=key_id
        )

    def encode(self) -> str:
        """The keys as text (ours): base64url of the X25519 SPKI and :meth:`link_data`."""
        return _b64.encode(_r.short(x25519_spki(self.queue_dh)) + self.link_data())

    @classmethod
    def decode(cls, text: str | bytes) -> AddressPublicKeys:
        """Read :meth:`encode`'s text strictly."""
        try:
            data = _b64.decode(text, "address public keys")
        except ValueError as exc:
            raise AgentCryptoError(str(exc), layer="address public keys") from None
        reader = _r.Reader(data, "address public keys")
        queue_dh = read_x25519(reader, "queue DH key")
        return cls.from_link_data(reader.tail(), queue_dh=queue_dh)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AddressPublicKeys):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash((AddressPublicKeys, self.queue_dh, self.k1, self.k2, self.kem, self.key_id))

    def __repr__(self) -> str:
        kem = "sntrup761" if self.kem is not None else "None"
        return f"<AddressPublicKeys key_id={self.key_id.hex()} kem={kem}>"


class AddressKeys:
    """A service address's private keys, and its PQ support.

    ``queue_dh``: the address queue's X25519 private key (32 bytes); ``k1``, ``k2``:
    the X448 private keys (56 bytes each); ``kem``: the sntrup761 pair
    ``(secret, public)`` or None; ``key_id``: the ``ratchetKeyId``. ``pq_support``
    is the address connection's PQ support, which pads the answer to 11,106 (on)
    or 14,832 (off) bytes; it defaults to having a KEM. simplexmq makes three
    combinations (``generateAddressRatchetKeys``, ``connPQEncryption``): a KEM and PQ
    support (``IKUsePQ``), no KEM with PQ support (``IKPQOn``), neither
    (``IKPQOff``); a KEM without PQ support is refused. Private keys are shown
    nowhere: not in ``repr``, not in any error.
    """

    __slots__ = (
        "_k1",
        "_k1_key",
        "_k2",
        "_k2_key",
        "_kem",
        "_queue_dh",
        "key_id",
        "pq_support",
        "public",
    )
    _queue_dh: bytes
    _k1: bytes
    _k2: bytes
    _k1_key: Any  # X448PrivateKey, loaded once (loading costs as much as an exchange)
    _k2_key: Any
    _kem: tuple[bytes, bytes] | None
    key_id: bytes
    pq_support: bool
    public: AddressPublicKeys

    def __init__(
        self,
        *,
        queue_dh: bytes,
        k1: bytes,
        k2: bytes,
        kem: tuple[bytes, bytes] | None,
        key_id: bytes,
        pq_support: bool | None = None,
    ) -> None:
        queue_dh = _bytes(queue_dh, "queue_dh", 32)
        k1 = _bytes(k1, "k1", _r.X448_LENGTH)
        k2 = _bytes(k2, "k2", _r.X448_LENGTH)
        if kem is not None:
            if not isinstance(kem, tuple) or len(kem) != 2:
                raise TypeError("kem: expected (secret, public), the sntrup761 pair, or None")
            secret, public = kem
            kem = (
                _bytes(secret, "kem secret", _r.KEM_SECRET_LENGTH),
                _bytes(public, "kem public", _r.KEM_PUBLIC_LENGTH),
            )
        if pq_support is None:
            pq_support = kem is not None
        if kem is not None and not pq_support:
            raise AgentCryptoError(
                "address keys: a KEM without PQ support (simplexmq makes the KEM only with"
                " IKUsePQ, whose connection has PQ support)",
                layer="keys",
            )
        set_ = object.__setattr__
        set_(self, "_queue_dh", queue_dh)
        set_(self, "_k1", k1)
        set_(self, "_k2", k2)
        set_(self, "_kem", kem)
        set_(self, "pq_support", bool(pq_support))
        set_(self, "_k1_key", _r.x448_private(k1, "k1"))
        set_(self, "_k2_key", _r.x448_private(k2, "k2"))
        set_(
            self,
            "public",
            AddressPublicKeys(
                queue_dh=_x25519_public(queue_dh),
                k1=_r.x448_public_raw(self._k1_key),
                k2=_r.x448_public_raw(self._k2_key),
                kem=None if kem is None else kem[1],
                key_id=key_id,
            ),
        )
        set_(self, "key_id", self.public.key_id)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("AddressKeys is immutable")

    @classmethod
    def from_raw(
        cls,
        *,
        queue_dh: bytes,
        k1: bytes,
        k2: bytes,
        kem: tuple[bytes, bytes] | None,
        key_id: bytes,
        pq_support: bool | None = None,
    ) -> AddressKeys:
        """The keys from their raw private bytes (the sntrup761 pair as (secret, public))."""
        return cls(queue_dh=queue_dh, k1=k1, k2=k2, kem=kem, key_id=key_id, pq_support=pq_support)

    @classmethod
    def generate(cls, *, pq: bool = True, pq_support: bool | None = None) -> AddressKeys:
        """New keys from the system's randomness; ``pq`` adds an sntrup761 key pair."""
        kem = _kem_keypair("an address with a KEM") if pq else None
        return cls(
            queue_dh=os.urandom(32),
            k1=os.urandom(_r.X448_LENGTH),
            k2=os.urandom(_r.X448_LENGTH),
            kem=kem,
            key_id=os.urandom(KEY_ID_LENGTH),
            pq_support=pq_support,
        )

    def raw(self) -> dict[str, Any]:
        """The raw private keys, as :meth:`from_raw` takes them: private key material."""
        return {
            "queue_dh": self._queue_dh,
            "k1": self._k1,
            "k2": self._k2,
            "kem": self._kem,
            "key_id": self.key_id,
            "pq_support": self.pq_support,
        }

    def encode(self) -> str:
        """The private keys as text (ours): private key material.

        base64url of: the X25519 key, ``k1`` and ``k2`` (``ByteString`` each),
        ``Maybe`` the sntrup761 pair (``Large`` secret, ``Large`` public), the
        ``ratchetKeyId`` (``ByteString``) and PQ support (``'T'``/``'F'``).
        """
        kem = b"0" if self._kem is None else b"1" + _r.large(self._kem[0]) + _r.large(self._kem[1])
        data = (
            _r.short(self._queue_dh)
            + _r.short(self._k1)
            + _r.short(self._k2)
            + kem
            + _r.short(self.key_id)
            + (b"T" if self.pq_support else b"F")
        )
        return _b64.encode(data)

    @classmethod
    def decode(cls, text: str | bytes) -> AddressKeys:
        """Read :meth:`encode`'s text strictly; errors name offsets, never key bytes."""
        try:
            data = _b64.decode(text, "address private keys", secret=True)
        except ValueError as exc:
            raise AgentCryptoError(str(exc), layer="address private keys") from None
        reader = _r.Reader(data, "address private keys")
        queue_dh = reader.short("queue DH key")
        k1 = reader.short("k1")
        k2 = reader.short("k2")
        kem = None
        if reader.maybe("KEM"):
            kem = (reader.large("KEM secret"), reader.large("KEM public key"))
        key_id = reader.short("ratchetKeyId")
        pq = reader.char("PQ support", b"TF") == 0x54
        reader.end("keys")
        return cls(queue_dh=queue_dh, k1=k1, k2=k2, kem=kem, key_id=key_id, pq_support=pq)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AddressKeys):
            return NotImplemented
        return hmac.compare_digest(self.encode(), other.encode())

    def __hash__(self) -> int:
        return hash((AddressKeys, self.public))

    def __repr__(self) -> str:
        kem = "sntrup761" if self._kem is not None else "None"
        return _secret_repr(
            self, {"key_id": self.key_id.hex(), "kem": kem, "pq_support": self.pq_support}
        )

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("AddressKeys is not picklable: encode() it explicitly if you must")


# -- randomness ----------------------------------------------------------------------------


class _Randomness:
    """Injected random inputs: bytes fields, shown by name only."""

    def __repr__(self) -> str:
        names = ", ".join(f.name for f in fields(self))  # type: ignore[arg-type]
        return f"<{type(self).__name__} {names} (values redacted)>"

    def as_hex(self) -> dict[str, str | None]:
        """Each field as hex (None stays None): for test vectors."""
        return {
            f.name: (None if getattr(self, f.name) is None else getattr(self, f.name).hex())
            for f in fields(self)  # type: ignore[arg-type]
        }


@dataclass(frozen=True, repr=False)
class RequestRandomness(_Randomness):
    """Every random input of a request (``createRatchet_``, ``agentCbEncryptOnce``, Q_A).

    ``e2e_k1``, ``e2e_k2``: the requester's X448 keys sent in ``E2ERatchetParams``;
    ``ratchet_key``: its first ratchet X448 key (``rcDHRs``); ``kem_secret``,
    ``kem_public``: its sntrup761 pair (the agent always makes one: requests use
    ``PQSupportOn``); ``kem_ciphertext``, ``kem_shared``: the encapsulation to the
    address's KEM key (None without one); ``box_key``: the ephemeral X25519 key of
    the box; ``nonce``: the box's 24-byte nonce; ``reply_dh``: the reply queue's
    X25519 private key.
    """

    e2e_k1: bytes
    e2e_k2: bytes
    ratchet_key: bytes
    kem_secret: bytes
    kem_public: bytes
    kem_ciphertext: bytes | None
    kem_shared: bytes | None
    box_key: bytes
    nonce: bytes
    reply_dh: bytes

    @classmethod
    def generate(cls, address: AddressPublicKeys) -> RequestRandomness:
        """Fresh randomness from the system (the KEM from sntrup761)."""
        kem_secret, kem_public = _kem_keypair("a request (the agent always proposes a KEM)")
        ciphertext = shared = None
        if address.kem is not None:
            ciphertext, shared = _kem_encapsulate(address.kem, "a request to a PQ address")
        return cls(
            e2e_k1=os.urandom(_r.X448_LENGTH),
            e2e_k2=os.urandom(_r.X448_LENGTH),
            ratchet_key=os.urandom(_r.X448_LENGTH),
            kem_secret=kem_secret,
            kem_public=kem_public,
            kem_ciphertext=ciphertext,
            kem_shared=shared,
            box_key=os.urandom(32),
            nonce=os.urandom(NONCE_LENGTH),
            reply_dh=os.urandom(32),
        )


@dataclass(frozen=True, repr=False)
class ResponseRandomness(_Randomness):
    """Every random input of an answer (``ratchetStep``, ``newSndQueue``, ``agentCbEncrypt``).

    ``ratchet_key``: the service's next ratchet X448 key; ``kem_secret``,
    ``kem_public``: its next sntrup761 pair and ``kem_ciphertext``, ``kem_shared``:
    the encapsulation to the requester's KEM key (all None without PQ support);
    ``e2e_key``: the X25519 key of its sending queue; ``nonce``: the box's nonce;
    ``auth_seed``: the Ed25519 seed of its queue auth key, sent in ``'K'`` when the
    reply queue is not a messaging queue (None otherwise).
    """

    ratchet_key: bytes
    kem_secret: bytes | None
    kem_public: bytes | None
    kem_ciphertext: bytes | None
    kem_shared: bytes | None
    e2e_key: bytes
    nonce: bytes
    auth_seed: bytes | None

    @classmethod
    def generate(cls, reply: ServiceReply) -> ResponseRandomness:
        """Fresh randomness from the system for answering ``reply``."""
        kem_secret = kem_public = ciphertext = shared = None
        if reply.pq_support:
            kem_secret, kem_public = _kem_keypair("an answer with PQ support")
            if reply._peer_kem is not None:
                ciphertext, shared = _kem_encapsulate(reply._peer_kem, "an answer with PQ support")
        return cls(
            ratchet_key=os.urandom(_r.X448_LENGTH),
            kem_secret=kem_secret,
            kem_public=kem_public,
            kem_ciphertext=ciphertext,
            kem_shared=shared,
            e2e_key=os.urandom(32),
            nonce=os.urandom(NONCE_LENGTH),
            auth_seed=None if reply.reply_queue.queue_mode == "M" else os.urandom(32),
        )


# -- the requester's side -------------------------------------------------------------------


class RequesterState:
    """What a requester keeps to read the answer (private key material, never shown)."""

    __slots__ = ("_kem_secret", "_nhk", "_ratchet_key", "_reply_dh", "_root_key", "ad",
                 "reply_queue")
    _kem_secret: bytes
    _nhk: bytes
    _ratchet_key: bytes
    _reply_dh: bytes
    _root_key: bytes
    ad: bytes
    reply_queue: SMPQueueInfo

    def __init__(
        self,
        *,
        ad: bytes,
        root_key: bytes,
        nhk: bytes,
        ratchet_key: bytes,
        kem_secret: bytes,
        reply_dh: bytes,
        reply_queue: SMPQueueInfo,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "ad", ad)
        set_(self, "_root_key", root_key)
        set_(self, "_nhk", nhk)
        set_(self, "_ratchet_key", ratchet_key)
        set_(self, "_kem_secret", kem_secret)
        set_(self, "_reply_dh", reply_dh)
        set_(self, "reply_queue", reply_queue)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RequesterState is immutable")

    def encode(self) -> str:
        """The state as text (ours), to keep until the answer comes: private key material.

        base64url of ``'1'`` (the format) and, each ``Large``: rcAD, the root key, the
        next header key, the ratchet's X448 key, the sntrup761 secret, the reply
        queue's X25519 key and its ``SMPQueueInfo``.
        """
        parts = (self.ad, self._root_key, self._nhk, self._ratchet_key, self._kem_secret,
                 self._reply_dh, self.reply_queue.encode())
        return _b64.encode(b"1" + b"".join(_r.large(p) for p in parts))

    @classmethod
    def decode(cls, text: str | bytes) -> RequesterState:
        """Read :meth:`encode`'s text strictly; errors name offsets, never key bytes."""
        reader = _secret_reader(text, "requester state")
        reader.char("format", b"1")
        fields = [reader.large(what) for what in (
            "rcAD", "root key", "header key", "ratchet key", "KEM secret", "reply key", "queue"
        )]
        reader.end("state")
        return cls(
            ad=_bytes(fields[0], "rcAD", 112),
            root_key=_bytes(fields[1], "root key", 32),
            nhk=_bytes(fields[2], "header key", 32),
            ratchet_key=_bytes(fields[3], "ratchet key", _r.X448_LENGTH),
            kem_secret=_bytes(fields[4], "KEM secret", _r.KEM_SECRET_LENGTH),
            reply_dh=_bytes(fields[5], "reply key", X25519_LENGTH),
            reply_queue=SMPQueueInfo.decode(fields[6]),
        )

    def __repr__(self) -> str:
        return _secret_repr(self, {"ad_sha256": hashlib.sha256(self.ad).hexdigest()[:16]})

    def __reduce__(self) -> Any:
        raise TypeError("RequesterState holds private keys and is not picklable")


@dataclass(frozen=True)
class SealedRequest:
    """A sealed request: ``message``, the SMP message body for the address queue;
    ``state``, what the requester keeps; ``ad``, the ratchet's AD (rcAD, 112 bytes);
    ``padded_block``, the padded ``'A'`` block (11,106 bytes) inside it."""

    message: bytes
    state: RequesterState
    ad: bytes
    padded_block: bytes = b""

    def __repr__(self) -> str:
        return f"<SealedRequest message={len(self.message)} bytes>"


def _box(message: bytes, nonce: bytes, their_public: bytes, our_private: bytes) -> bytes:
    """``cbEncrypt``: X25519 ``crypto_box`` of the message padded to 15,904 (tag first)."""
    try:
        return nacl.bindings.crypto_box(
            _r.pad(message, CONFIRMATION_LENGTH), nonce, their_public, our_private
        )
    except (nacl.exceptions.CryptoError, RuntimeError):  # libsodium refuses a small-order key
        raise AgentCryptoError(
            "box: the X25519 key is of small order (libsodium refuses the shared secret)",
            layer="box",
        ) from None


def _client_envelope(version: int, our_private: bytes, nonce: bytes, boxed: bytes) -> bytes:
    """``ClientMsgEnvelope``: ``PubHeader`` (version, ``Just`` the X25519 key), nonce, box."""
    return (
        version.to_bytes(2, "big")
        + b"1"
        + _r.short(x25519_spki(_x25519_public(our_private)))
        + nonce
        + boxed
    )


def _check_randomness(r: RequestRandomness, address: AddressPublicKeys) -> None:
    for name, length in (
        ("e2e_k1", _r.X448_LENGTH),
        ("e2e_k2", _r.X448_LENGTH),
        ("ratchet_key", _r.X448_LENGTH),
        ("kem_secret", _r.KEM_SECRET_LENGTH),
        ("kem_public", _r.KEM_PUBLIC_LENGTH),
        ("box_key", X25519_LENGTH),
        ("nonce", NONCE_LENGTH),
        ("reply_dh", X25519_LENGTH),
    ):
        _bytes(getattr(r, name), f"randomness {name}", length)
    if address.kem is not None:
        if r.kem_ciphertext is None or r.kem_shared is None:
            raise AgentCryptoError(
                "randomness: the address has a KEM key: kem_ciphertext and kem_shared are due",
                layer="keys",
            )
        _bytes(r.kem_ciphertext, "randomness kem_ciphertext", _r.KEM_CIPHERTEXT_LENGTH)
        _bytes(r.kem_shared, "randomness kem_shared", _r.KEM_SHARED_LENGTH)
    elif r.kem_ciphertext is not None or r.kem_shared is not None:
        raise AgentCryptoError(
            "randomness: a KEM encapsulation, but the address has no KEM key", layer="keys"
        )


def _with_key(queue: SMPQueueInfo, reply_dh: bytes) -> SMPQueueInfo:
    """The reply queue with the public half of its X25519 pair (as the agent makes Q_A)."""
    return dataclasses.replace(queue, dh_public_key=x25519_spki(_x25519_public(reply_dh)))


def seal_service_request(
    payload: bytes,
    address: AddressPublicKeys,
    *,
    reply_queue: SMPQueueInfo,
    sign_key: SigningKey | None = None,
    randomness: RequestRandomness | None = None,
    agent_version: int = AGENT_VERSION,
    client_version: int = 4,
) -> SealedRequest:
    """Seal ``payload`` as the agent's ``sendServiceRequest'`` does (:func:`seal_request_on`)."""
    return seal_request_on(
        _backend.active,
        payload,
        address,
        reply_queue=reply_queue,
        sign_key=sign_key,
        randomness=randomness,
        agent_version=agent_version,
        client_version=client_version,
    )


def seal_request_on(
    impl: Backend,
    payload: bytes,
    address: AddressPublicKeys,
    *,
    reply_queue: SMPQueueInfo,
    sign_key: SigningKey | None = None,
    randomness: RequestRandomness | None = None,
    agent_version: int = AGENT_VERSION,
    client_version: int = 4,
) -> SealedRequest:
    """Seal ``payload`` as the agent's ``sendServiceRequest'`` does, the block on ``impl``.

    The request is ``AgentServiceRequest`` (the reply queue, the optional signature
    over SHA3-256("SimpleXService" ‖ rcAD) ‖ payload) padded to 11,106, the first
    message of a double ratchet begun by X3DH with the address's keys (``'A'``
    ``AgentContactRequest``), in a ``ClientMessage`` boxed to the address queue's
    key and padded to 15,904. ``reply_queue`` names the server, the sender id, the
    client version and the mode; its ``dh_public_key`` is replaced by the public
    half of the queue's key pair, made with the randomness (``reply_dh``), whose
    private half the state keeps. ``client_version`` is the address queue's SMP
    client version in the ``PubHeader``. Raises :class:`PayloadTooLarge` when the
    block would exceed 11,106 bytes.
    """
    payload = _bytes(payload, "payload")
    for name, value, top in (("agent_version", agent_version, AGENT_VERSION),
                             ("client_version", client_version, 4)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise AgentCryptoError(f"{name}: {value!r} is not a version from 1 to {top}",
                                   layer="keys")
    _check_type(address, AddressPublicKeys, "address")
    _check_type(reply_queue, SMPQueueInfo, "reply_queue")
    if sign_key is not None:
        _check_type(sign_key, SigningKey, "sign_key")
    if randomness is not None:
        _check_type(randomness, RequestRandomness, "randomness")
    r = randomness if randomness is not None else RequestRandomness.generate(address)
    _check_randomness(r, address)
    queue = _with_key(reply_queue, r.reply_dh)
    spk1 = _r.x448_private(r.e2e_k1, "e2e_k1")
    spk2 = _r.x448_private(r.e2e_k2, "e2e_k2")
    rc_dhrs = _r.x448_private(r.ratchet_key, "ratchet_key")
    # pqX3dhSnd: dh' rk1 spk2, dh' rk2 spk1, dh' rk2 spk2, and the KEM secret when accepted
    kem_shared = r.kem_shared if address.kem is not None else None
    hk, nhk, sk = _r.x3dh(
        _r.dh(address.k1, spk2, "X3DH"),
        _r.dh(address.k2, spk1, "X3DH"),
        _r.dh(address.k2, spk2, "X3DH"),
        kem_shared,
    )
    spk1_public = _r.x448_public_raw(spk1)
    ad = spk1_public + address.k1  # pqX3dh's assocData: pubKeyBytes sk1 <> pubKeyBytes rk1
    # the padded 'A' block: the wire layer's codec (the active backend), signed over rcAD
    block = impl.seal_request(payload, ad, sign_key, reply_queue=queue)
    # initSndRatchet: the first sending chain from the address's k2 and rcDHRs
    root_key, chain_key, _ = _r.root_kdf(sk, _r.dh(address.k2, rc_dhrs, "ratchet"), kem_shared)
    kem: _r.KemParams = (r.kem_ciphertext if address.kem is not None else None, r.kem_public)
    header = _r.encode_header(_r.x448_public_raw(rc_dhrs), kem)
    enc_conn_info = _r.encrypt_message(
        ad=ad,
        header_key=hk,
        chain_key=chain_key,
        padded_header=_r.pad(header, _r.HEADER_PADDED_PQ),
        padded_message=block,
    )
    e2e_params = (
        _r.E2E_VERSION.to_bytes(2, "big")
        + _r.short(_r.x448_spki(spk1_public))
        + _r.short(_r.x448_spki(_r.x448_public_raw(spk2)))
        + _r.encode_kem(kem)
    )
    envelope = (
        agent_version.to_bytes(2, "big")
        + b"A"
        + e2e_params
        + _r.short(address.key_id)
        + enc_conn_info
    )
    boxed = _box(b"_" + envelope, r.nonce, address.queue_dh, r.box_key)
    message = _client_envelope(client_version, r.box_key, r.nonce, boxed)
    state = RequesterState(
        ad=ad,
        root_key=root_key,
        nhk=nhk,
        ratchet_key=r.ratchet_key,
        kem_secret=r.kem_secret,
        reply_dh=r.reply_dh,
        reply_queue=queue,
    )
    return SealedRequest(message, state, ad, block)


# -- the service's side -----------------------------------------------------------------------


class ServiceReply:
    """What the service needs to answer one request (private key material, never shown).

    The receiving half of the ratchet step is done (``rcDecrypt``); the sending half,
    with its randomness, is :func:`seal_service_response`'s.
    """

    __slots__ = (
        "_nhk",
        "_peer_dh",
        "_peer_kem",
        "_root_key",
        "ad",
        "agent_version",
        "pq_support",
        "reply_queue",
    )
    _nhk: bytes
    _peer_dh: bytes
    _peer_kem: bytes | None
    _root_key: bytes
    ad: bytes
    agent_version: int
    pq_support: bool
    reply_queue: SMPQueueInfo

    def __init__(self, **kw: Any) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, kw[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ServiceReply is immutable")

    def encode(self) -> str:
        """The reply context as text (ours), to answer later: private key material.

        base64url of ``'1'`` (the format), the agent version (2 bytes), PQ support
        (``'T'``/``'F'``) and, each ``Large``: the next header key, the requester's
        ratchet key, its sntrup761 key (empty when none), the root key, rcAD and the
        reply queue's ``SMPQueueInfo``.
        """
        parts = (self._nhk, self._peer_dh, self._peer_kem or b"", self._root_key, self.ad,
                 self.reply_queue.encode())
        head = b"1" + self.agent_version.to_bytes(2, "big") + (b"T" if self.pq_support else b"F")
        return _b64.encode(head + b"".join(_r.large(p) for p in parts))

    @classmethod
    def decode(cls, text: str | bytes) -> ServiceReply:
        """Read :meth:`encode`'s text strictly; errors name offsets, never key bytes."""
        reader = _secret_reader(text, "service reply")
        reader.char("format", b"1")
        version = reader.word16("agent version")
        pq = reader.char("PQ support", b"TF") == 0x54
        fields = [reader.large(what) for what in (
            "header key", "peer ratchet key", "peer KEM key", "root key", "rcAD", "queue"
        )]
        reader.end("reply")
        peer_kem = fields[2] and _bytes(fields[2], "peer KEM key", _r.KEM_PUBLIC_LENGTH)
        return cls(
            _nhk=_bytes(fields[0], "header key", 32),
            _peer_dh=_bytes(fields[1], "peer ratchet key", _r.X448_LENGTH),
            _peer_kem=peer_kem or None,
            _root_key=_bytes(fields[3], "root key", 32),
            ad=_bytes(fields[4], "rcAD", 112),
            agent_version=version,
            pq_support=pq,
            reply_queue=SMPQueueInfo.decode(fields[5]),
        )

    def __repr__(self) -> str:
        return _secret_repr(self, {"pq_support": self.pq_support})

    def __reduce__(self) -> Any:
        raise TypeError("ServiceReply holds ratchet keys and is not picklable")


@dataclass(frozen=True)
class OpenedServiceRequest:
    """An opened request: ``payload``; ``signer``, the verified key or None;
    ``reply_queues``; ``ad`` (rcAD, 112 bytes); ``reply``, to answer with;
    ``padded_block``, the 11,106-byte ``'A'`` block; ``replay_key``, what the agent
    keeps to refuse the same request twice (``duplicateRequest``: SHA-256 of the
    requester's raw X448 keys ``k1`` and ``k2``). Opening is stateless: a service
    that must refuse a replayed request keeps the replay keys it has seen."""

    payload: bytes
    signer: PublicKey | None
    reply_queues: tuple[SMPQueueInfo, ...]
    ad: bytes
    reply: ServiceReply
    padded_block: bytes
    replay_key: bytes = b""

    def __repr__(self) -> str:
        return f"<OpenedServiceRequest payload={len(self.payload)} bytes signer={self.signer!r}>"


def _client_message(message: bytes, private: bytes, layer: str) -> bytes:
    """Read a ``ClientMsgEnvelope`` and open its box: the unpadded ``ClientMessage``."""
    reader = _r.Reader(_bytes(message, "message"), f"{layer} envelope")
    at = reader.pos
    version = reader.word16("SMP client version")
    # processClientMsg: phVer `isCompatible` 1..4 || phVer <= the agreed version (<= 4)
    if version > 4:
        reader.fail(f"SMP client version {version} is newer than 4", at)
    if not reader.maybe("sender key"):
        reader.fail(
            "no sender key (a PubHeader without a key: the agent's 'no keys')", reader.pos - 1
        )
    sender = read_x25519(reader, "sender key")
    nonce = reader.take(NONCE_LENGTH, "nonce")
    at = reader.pos
    boxed = reader.tail()
    if len(boxed) != BOX_LENGTH:
        reader.fail(f"box of {len(boxed)} bytes where {BOX_LENGTH} are required", at)
    try:
        padded = nacl.bindings.crypto_box_open(boxed, nonce, sender, private)
    except (nacl.exceptions.CryptoError, RuntimeError):  # a wrong key, or one of small order
        raise AgentCryptoError(
            f"{layer} box: crypto_box does not open (wrong key, or the bytes were changed)",
            layer=f"{layer} box",
        ) from None
    return _r.unpad(padded, f"{layer} box padding", (CONFIRMATION_LENGTH,))


def _agent_version(reader: _r.Reader) -> int:
    at = reader.pos
    version = reader.word16("agent version")
    # checkConfVersions: isCompatible 6..8 || <= the agreed version (8)
    if version > AGENT_VERSION:
        reader.fail(f"agent version {version} is newer than {AGENT_VERSION}", at)
    return version


def open_service_request(message: bytes, address: AddressKeys) -> OpenedServiceRequest:
    """Open a request as ``smpContactRequest`` does (see :func:`open_request_on`)."""
    return open_request_on(_backend.active, message, address)


def open_request_on(impl: Backend, message: bytes, address: AddressKeys) -> OpenedServiceRequest:
    """Open a request as ``smpContactRequest`` does, the block on ``impl``; verify it.

    Every layer is read strictly: a failure raises :class:`AgentCryptoError` naming
    the layer and the offset, or, inside the padded block, the wire layer's
    :class:`FrameError`. A signature that does not verify over
    SHA3-256("SimpleXService" ‖ rcAD) ‖ payload, with rcAD computed here from the
    X3DH keys, raises :class:`BadSignature`.
    """
    _check_type(address, AddressKeys, "address")
    client_message = _client_message(message, address._queue_dh, "request")
    reader = _r.Reader(client_message, "client message")
    reader.char("private header", b"_")
    agent_version = _agent_version(reader)
    reader.char("envelope tag", b"A")
    at = reader.pos
    e2e_version = reader.word16("E2E version")
    if e2e_version != _r.E2E_VERSION:  # initRcvRatchet_: isCompatible 3..3
        reader.fail(f"E2E version {e2e_version}, not {_r.E2E_VERSION}", at)
    sk1 = _r.read_x448(reader, "k1")
    sk2 = _r.read_x448(reader, "k2")
    at_kem = reader.pos
    snd_kem = _r.read_kem(reader, "KEM")
    at = reader.pos
    key_id = reader.short("ratchetKeyId")
    if not hmac.compare_digest(key_id, address.key_id):
        reader.fail("unknown ratchetKeyId (not this address's keys)", at)
    enc_conn_info = reader.tail()
    # pqX3dhRcv: an accepted KEM needs the address's KEM pair
    kem_shared = None
    if snd_kem is not None and snd_kem[0] is not None:
        if address._kem is None:
            reader.fail("KEM: an accepted KEM, but the address has no KEM key", at_kem)
        kem_shared = _kem_decapsulate(address._kem[0], snd_kem[0], "a request to a PQ address")
    rpk1 = address._k1_key
    rpk2 = address._k2_key
    hk, nhk, sk = _r.x3dh(
        _r.dh(sk2, rpk1, "X3DH"), _r.dh(sk1, rpk2, "X3DH"), _r.dh(sk2, rpk2, "X3DH"), kem_shared
    )
    ad = sk1 + address.public.k1
    encrypted = _r.EncryptedMessage(enc_conn_info)
    # initRcvRatchet: rcNHKr = hk; rcDecrypt's decryptNextHeader
    header = encrypted.header(hk, ad, (_r.HEADER_PADDED_PQ,))
    peer_dh, msg_kem = _r.decode_header(header)
    # pqRatchetStep's sharedSecret: an accepted KEM is decapsulated with the address's pair
    kem_ss = None
    if msg_kem is not None and msg_kem[0] is not None:
        if address._kem is None:
            raise AgentCryptoError(
                "ratchet header: an accepted KEM, but the address has no KEM key",
                layer="ratchet header",
            )
        if snd_kem is not None and msg_kem[0] == snd_kem[0]:
            kem_ss = kem_shared  # the agent sends the same ciphertext twice: decapsulated once
        else:
            kem_ss = _kem_decapsulate(address._kem[0], msg_kem[0], "a request to a PQ address")
    root_key, chain_key, _ = _r.root_kdf(sk, _r.dh(peer_dh, rpk2, "ratchet"), kem_ss)
    padded = encrypted.open(chain_key, ad)
    # the padded 'A' block: the wire layer's codec, strict fill (ours), signature over rcAD
    opened = impl.open_request(padded, ad, strict=True)
    reply = ServiceReply(
        _nhk=nhk,
        _peer_dh=peer_dh,
        _peer_kem=None if msg_kem is None else msg_kem[1],
        _root_key=root_key,
        ad=ad,
        agent_version=agent_version,
        pq_support=address.pq_support,
        reply_queue=opened.reply_queues[0],  # smpContactRequest: replyQueue :| _
    )
    return OpenedServiceRequest(
        opened.payload,
        opened.signer,
        opened.reply_queues,
        ad,
        reply,
        padded,
        hashlib.sha256(sk1 + sk2).digest(),  # duplicateRequest's rkHash
    )


def _seal_answer(block: bytes, reply: ServiceReply, randomness: ResponseRandomness | None) -> bytes:
    if randomness is not None:
        _check_type(randomness, ResponseRandomness, "randomness")
    r = randomness if randomness is not None else ResponseRandomness.generate(reply)
    _bytes(r.ratchet_key, "randomness ratchet_key", _r.X448_LENGTH)
    _bytes(r.e2e_key, "randomness e2e_key", X25519_LENGTH)
    _bytes(r.nonce, "randomness nonce", NONCE_LENGTH)
    # pqRatchetStep, sending half: with PQ support, a new pair, and an encapsulation to the
    # requester's KEM key (when its header had one)
    kem: _r.KemParams | None = None
    kem_ss = None
    if reply.pq_support:
        if r.kem_secret is None or r.kem_public is None:
            raise AgentCryptoError(
                "randomness: an answer with PQ support needs kem_secret and kem_public",
                layer="keys",
            )
        _bytes(r.kem_public, "randomness kem_public", _r.KEM_PUBLIC_LENGTH)
        ciphertext = None
        if reply._peer_kem is not None:
            if r.kem_ciphertext is None or r.kem_shared is None:
                raise AgentCryptoError(
                    "randomness: an answer with PQ support needs kem_ciphertext and kem_shared",
                    layer="keys",
                )
            ciphertext = _bytes(
                r.kem_ciphertext, "randomness kem_ciphertext", _r.KEM_CIPHERTEXT_LENGTH
            )
            kem_ss = _bytes(r.kem_shared, "randomness kem_shared", _r.KEM_SHARED_LENGTH)
        kem = (ciphertext, r.kem_public)
    rc_dhrs = _r.x448_private(r.ratchet_key, "ratchet_key")
    _, chain_key, _ = _r.root_kdf(
        reply._root_key, _r.dh(reply._peer_dh, rc_dhrs, "ratchet"), kem_ss
    )
    header = _r.encode_header(_r.x448_public_raw(rc_dhrs), kem)
    header_padded = _r.HEADER_PADDED_PQ if reply.pq_support else _r.HEADER_PADDED_NO_PQ
    enc_conn_info = _r.encrypt_message(
        ad=reply.ad,
        header_key=reply._nhk,
        chain_key=chain_key,
        padded_header=_r.pad(header, header_padded),
        padded_message=block,
    )
    confirmation = reply.agent_version.to_bytes(2, "big") + b"C0" + enc_conn_info
    # sendConfirmation: '_' when the sender can secure the queue (a messaging queue),
    # else 'K' and the queue's auth key (sndAuthAlg: Ed25519)
    if reply.reply_queue.queue_mode == "M":
        private_header = b"_"
    else:
        if r.auth_seed is None:
            raise AgentCryptoError(
                "randomness: the reply queue is not a messaging queue: auth_seed is due",
                layer="keys",
            )
        auth = SigningKey(_bytes(r.auth_seed, "randomness auth_seed", 32)).public_key
        private_header = b"K" + _r.short(auth.der)
    reply_dh = reply.reply_queue.dh_public_key[len(X25519_SPKI_PREFIX) :]
    boxed = _box(private_header + confirmation, r.nonce, reply_dh, r.e2e_key)
    return _client_envelope(reply.reply_queue.client_version, r.e2e_key, r.nonce, boxed)


def seal_service_response(
    payload: bytes, reply: ServiceReply, *, randomness: ResponseRandomness | None = None
) -> bytes:
    """The SMP message body of the answer to the reply queue (``prepareReply``).

    ``AgentServiceResponse`` padded to 11,106 (PQ support) or 14,832 (the wire
    layer's codec), encrypted by the ratchet the request began, as
    ``AgentConfirmation``, boxed to the reply queue's key with ``'_'`` (a messaging
    queue) or ``'K'`` and the auth key. A payload too large raises
    :class:`PayloadTooLarge`.
    """
    return seal_response_on(_backend.active, payload, reply, randomness=randomness)


def seal_response_on(
    impl: Backend,
    payload: bytes,
    reply: ServiceReply,
    *,
    randomness: ResponseRandomness | None = None,
) -> bytes:
    """:func:`seal_service_response` with the block sealed on ``impl``."""
    _check_type(reply, ServiceReply, "reply")
    block = impl.seal_response(payload, pq_support=reply.pq_support)
    return _seal_answer(block, reply, randomness)


def seal_service_rejection(
    reason: bytes, reply: ServiceReply, *, randomness: ResponseRandomness | None = None
) -> bytes:
    """As :func:`seal_service_response`, with ``AgentRejection`` (``'J'``) and ``reason``."""
    _check_type(reply, ServiceReply, "reply")
    block = _backend.active.seal_rejection(reason, pq_support=reply.pq_support)
    return _seal_answer(block, reply, randomness)


def open_service_response(message: bytes, state: RequesterState) -> bytes:
    """Read the answer as the requester's ``smpConfirmation`` does (:func:`open_response_on`)."""
    return open_response_on(_backend.active, message, state)


def open_response_on(impl: Backend, message: bytes, state: RequesterState) -> bytes:
    """Read the answer as the requester's ``smpConfirmation`` does, the block on ``impl``.

    A rejection (``'J'``) raises :class:`ServiceRejected` with its reason. Ours: the
    body's padding must follow the header's (2,310 and 11,106 bytes with PQ support,
    88 and 14,832 without).
    """
    _check_type(state, RequesterState, "state")
    client_message = _client_message(message, state._reply_dh, "response")
    reader = _r.Reader(client_message, "client message")
    at = reader.pos
    private_header = reader.char("private header", b"_K")
    if private_header == 0x4B:
        read_ed25519(reader, "sender auth key")
    elif state.reply_queue.queue_mode != "M":
        reader.fail("no sender key ('_') for a queue the sender cannot secure", at)
    _agent_version(reader)
    reader.char("envelope tag", b"C")
    if reader.maybe("E2E parameters"):
        reader.fail(
            "E2E parameters in the answer (the ratchet began with the request)", reader.pos - 1
        )
    encrypted = _r.EncryptedMessage(reader.tail())
    header = encrypted.header(
        state._nhk, state.ad, (_r.HEADER_PADDED_PQ, _r.HEADER_PADDED_NO_PQ)
    )
    peer_dh, msg_kem = _r.decode_header(header)
    pq = len(encrypted.header_body) == _r.HEADER_PADDED_PQ
    kem_ss = None
    if msg_kem is not None and msg_kem[0] is not None:
        kem_ss = _kem_decapsulate(state._kem_secret, msg_kem[0], "an answer with PQ support")
    _, chain_key, _ = _r.root_kdf(
        state._root_key,
        _r.dh(peer_dh, _r.x448_private(state._ratchet_key, "ratchet_key"), "ratchet"),
        kem_ss,
    )
    padded = encrypted.open(chain_key, state.ad)
    want = CONN_INFO_PQ if pq else CONN_INFO_NO_PQ
    if len(padded) != want:
        raise AgentCryptoError(
            f"ratchet message padding: a block of {len(padded)} bytes where the header's"
            f" padding calls for {want}",
            layer="ratchet message padding",
            offset=0,
        )
    return impl.open_response(padded, strict=True)

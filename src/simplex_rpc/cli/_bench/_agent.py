"""Bench rows of the agent's cryptography: a whole request sealed and opened, against its floor.

The floor of each row is the sum of the primitive calls the operation must make,
timed in the same interleaved run: X448 (sealing loads three new private keys and
takes their public halves; both make four exchanges), sntrup761 encapsulation
(sealing to an address with a KEM) or decapsulation (opening one), the two
AES-256-GCM operations (the header and the 11,106-byte block), one ``crypto_box``
of 15,904 bytes (with its two X25519 public keys when sealing), and one Ed25519
signature or verification (signed rows). The requester's sntrup761 pair is made
beforehand: its generation (about 20 ms) is in neither. The target is at most
1.3x the floor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Final

KEYS: Final = tuple(
    f"agent_{op}_{kem}_{sig}"
    for op in ("seal", "open")
    for kem in ("pq", "nopq")
    for sig in ("signed", "unsigned")
)
TARGET: Final = 1.3
PAYLOAD: Final = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}' * 14


def available() -> bool:
    """Whether cryptography and pqcrypto are importable (the rows need both)."""
    try:
        import cryptography  # noqa: F401
        from pqcrypto.kem import sntrup_761  # noqa: F401
    except ImportError:
        return False
    return True


def measures(Contender: Any, Measure: Any) -> list[Any]:
    """The eight rows (:data:`KEYS` order): seal and open, with and without a KEM, signed or not.

    ``Contender`` and ``Measure`` are ``_bench``'s classes (passed in: no import cycle).
    """
    import nacl.bindings
    from cryptography.hazmat.primitives.asymmetric.x448 import X448PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from pqcrypto.kem import sntrup_761

    from ..._wire import agent_crypto as ac
    from ..._wire.agent_block import SMPQueueInfo, SMPServer
    from ..._wire.keys import SigningKey

    queue = SMPQueueInfo(4, SMPServer(("smp.example.net",)), bytes(24),
                         bytes.fromhex("302a300506032b656e032100") + bytes(32), "M")
    key = SigningKey.from_seed(bytes(range(32)))
    requester_public, requester_secret = (bytes(x) for x in sntrup_761.keygen())
    x448 = [os.urandom(56) for _ in range(4)]
    x448_keys = [X448PrivateKey.from_private_bytes(k) for k in x448]
    x448_public = [k.public_key() for k in x448_keys]
    aes = AESGCM(os.urandom(32))
    iv = os.urandom(16)
    header = bytes(2310)
    block = bytes(11106)
    sealed_header = aes.encrypt(iv, header, b"")
    sealed_block = aes.encrypt(iv, block, b"")
    box_sk = os.urandom(32)
    box_pk = nacl.bindings.crypto_scalarmult_base(os.urandom(32))
    boxed = nacl.bindings.crypto_box(bytes(15904), bytes(24), box_pk, box_sk)
    sign_input = bytes(32) + PAYLOAD
    signed_message = nacl.bindings.crypto_sign(sign_input, key._sk)
    out: list[Any] = []
    for kem in (True, False):
        address = ac.AddressKeys.generate(pq=kem)
        public = address.public
        kem_ct = bytes(sntrup_761.encaps(public.kem)[0]) if public.kem is not None else b""

        def fresh(public: Any = public) -> Any:
            ct = ss = None
            if public.kem is not None:
                ct, ss = (bytes(x) for x in sntrup_761.encaps(public.kem))
            return ac.RequestRandomness(
                e2e_k1=os.urandom(56), e2e_k2=os.urandom(56), ratchet_key=os.urandom(56),
                kem_secret=requester_secret, kem_public=requester_public,
                kem_ciphertext=ct, kem_shared=ss, box_key=os.urandom(32),
                nonce=os.urandom(24), reply_dh=os.urandom(32),
            )

        for signed in (True, False):
            sign_key = key if signed else None
            message = ac.seal_service_request(PAYLOAD, public, reply_queue=queue,
                                              sign_key=sign_key, randomness=fresh()).message

            def seal(public: Any = public, sign_key: Any = sign_key) -> object:
                return ac.seal_service_request(PAYLOAD, public, reply_queue=queue,
                                               sign_key=sign_key, randomness=fresh(public))

            def opened(message: bytes = message, address: Any = address) -> object:
                return ac.open_service_request(message, address)

            def seal_floor(kem: bool = kem, signed: bool = signed, public: Any = public) -> None:
                for k in x448[:3]:  # spk1, spk2 and rcDHRs: loaded, and their public halves
                    X448PrivateKey.from_private_bytes(k).public_key().public_bytes_raw()
                for i in range(4):  # dh1, dh2, dh3 and the ratchet's first DH
                    x448_keys[i].exchange(x448_public[3 - i])
                if kem:
                    sntrup_761.encaps(public.kem)
                aes.encrypt(iv, header, b"")
                aes.encrypt(iv, block, b"")
                nacl.bindings.crypto_scalarmult_base(box_sk)  # the box key's public half
                nacl.bindings.crypto_scalarmult_base(box_sk)  # the reply queue key's
                nacl.bindings.crypto_box(bytes(15904), bytes(24), box_pk, box_sk)
                if signed:
                    nacl.bindings.crypto_sign(sign_input, key._sk)

            secret = address.raw()["kem"][0] if kem else b""

            def open_floor(
                kem: bool = kem, signed: bool = signed, ct: bytes = kem_ct, secret: bytes = secret
            ) -> None:
                nacl.bindings.crypto_box_open(boxed, bytes(24), box_pk, box_sk)
                if kem:  # the X3DH's ciphertext; the header repeats it (decapsulated once)
                    sntrup_761.decaps(secret, ct)
                for i in range(4):  # the address's keys are loaded once, with the address
                    x448_keys[i].exchange(x448_public[3 - i])
                aes.decrypt(iv, sealed_header, b"")
                aes.decrypt(iv, sealed_block, b"")
                if signed:
                    nacl.bindings.crypto_sign_open(signed_message, key.public_key.raw)

            suffix = f"{'pq' if kem else 'nopq'}_{'signed' if signed else 'unsigned'}"
            what = (f"{'a KEM and PQ support' if kem else 'no KEM, no PQ support'},"
                    f" {'signed' if signed else 'unsigned'}, {len(PAYLOAD)}-byte payload")
            out.append(Measure(
                f"agent_seal_{suffix}", f"seal_service_request, {what}",
                (Contender("primitive floor", seal_floor), Contender("seal_service_request", seal)),
                len(message), {"floor": "primitive floor"},
            ))
            out.append(Measure(
                f"agent_open_{suffix}", f"open_service_request, {what}",
                (Contender("primitive floor", open_floor),
                 Contender("open_service_request", opened)),
                len(message), {"floor": "primitive floor"},
            ))
    order = {k: i for i, k in enumerate(KEYS)}
    return sorted(out, key=lambda m: order[m.key])


def targets(
    results: Sequence[Any],
    add: Callable[..., None],
    ratio: Callable[[Sequence[Any], str, str, str], float | None],
) -> None:
    """Add one target per row: the operation within 1.3x its primitive floor."""
    for key in KEYS:
        op = "seal_service_request" if "_seal_" in key else "open_service_request"
        add(
            f"{key.replace('_', ' ')}, against the primitive floor",
            f"within {TARGET}x",
            ratio(results, key, op, "floor"),
            lambda v: f"{v:.2f}x the floor",
            lambda v: v <= TARGET,
            "the encodings, HKDF-SHA512 (three derivations), the padding and the checks of"
            " every layer are Python around the primitives",
        )

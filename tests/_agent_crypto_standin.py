"""An independent stand-in of a Service RPC service and requester (agent v8), for the tests.

Written from simplexmq's rules at commit 22815214468d4eb79a5e98df7a1ba2daa5d07ad7
(Agent.hs, Agent/Client.hs, Agent/Protocol.hs, Crypto/Ratchet.hs; Crypto.hs and
Protocol.hs for the primitives), not from the library: its own encodings and
parsers, and another cryptography library (pycryptodome: X448, AES-256-GCM with a
16-byte nonce, HKDF-SHA512, SHA3-256, Ed25519). The box is NaCl's crypto_box
(PyNaCl) and the KEM pqcrypto's sntrup761, as simplexmq's are the same functions.

Randomness is a dict of named byte strings (the names of the library's
RequestRandomness and ResponseRandomness), so that both implementations can be
given the same inputs and compared byte for byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import nacl.bindings
from Crypto.Cipher import AES
from Crypto.Hash import SHA3_256, SHA512
from Crypto.Protocol.DH import import_x448_private_key, import_x448_public_key, key_agreement
from Crypto.Protocol.KDF import HKDF
from Crypto.Signature import eddsa
from pqcrypto.kem import sntrup_761

X448_PREFIX = bytes.fromhex("3042300506032b656f033900")
X25519_PREFIX = bytes.fromhex("302a300506032b656e032100")
ED25519_PREFIX = bytes.fromhex("302a300506032b6570032100")


class StandinError(Exception):
    """The stand-in refused its input."""


# -- encodings (Encoding.hs) ----------------------------------------------------------------


def bs(b: bytes) -> bytes:
    assert len(b) < 256
    return bytes([len(b)]) + b


def lg(b: bytes) -> bytes:
    return struct.pack(">H", len(b)) + b


def w16(n: int) -> bytes:
    return struct.pack(">H", n)


class Cursor:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.i = 0

    def n(self, k: int) -> bytes:
        if self.i + k > len(self.d):
            raise StandinError("truncated")
        out = self.d[self.i : self.i + k]
        self.i += k
        return out

    def u8(self) -> int:
        return self.n(1)[0]

    def u16(self) -> int:
        return int(struct.unpack(">H", self.n(2))[0])

    def bs(self) -> bytes:
        return self.n(self.u8())

    def lg(self) -> bytes:
        return self.n(self.u16())

    def rest(self) -> bytes:
        out = self.d[self.i :]
        self.i = len(self.d)
        return out


def padded(msg: bytes, n: int) -> bytes:
    if len(msg) > n - 2:
        raise StandinError("too large")
    return w16(len(msg)) + msg + b"#" * (n - 2 - len(msg))


def unpadded(block: bytes) -> bytes:
    n = struct.unpack(">H", block[:2])[0]
    if n > len(block) - 2:
        raise StandinError("bad padding")
    return block[2 : 2 + n]


# -- primitives (Crypto.hs, Ratchet.hs) --------------------------------------------------------


def x448_pub(priv: bytes) -> bytes:
    return bytes(import_x448_private_key(priv).public_key().export_key(format="raw"))


def x448_dh(pub: bytes, priv: bytes) -> bytes:
    return bytes(
        key_agreement(
            static_priv=import_x448_private_key(priv),
            static_pub=import_x448_public_key(pub),
            kdf=lambda x: x,
        )
    )


def hkdf(salt: bytes, ikm: bytes, info: bytes, n: int) -> bytes:
    out = HKDF(ikm, n, salt, SHA512, 1, context=info)
    assert isinstance(out, bytes)
    return out


def aead_enc(key: bytes, iv: bytes, ad: bytes, plain: bytes) -> tuple[bytes, bytes]:
    c = AES.new(key, AES.MODE_GCM, nonce=iv, mac_len=16)
    c.update(ad)
    ct, tag = c.encrypt_and_digest(plain)
    return tag, ct


def aead_dec(key: bytes, iv: bytes, ad: bytes, ct: bytes, tag: bytes) -> bytes:
    c = AES.new(key, AES.MODE_GCM, nonce=iv, mac_len=16)
    c.update(ad)
    try:
        return bytes(c.decrypt_and_verify(ct, tag))
    except ValueError:
        raise StandinError("AES-GCM") from None


def chain(ck: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    o = hkdf(b"", ck, b"SimpleXChainRatchet", 96)
    return o[:32], o[32:64], o[64:80], o[80:96]


def root(rk: bytes, ikm: bytes) -> tuple[bytes, bytes, bytes]:
    o = hkdf(rk, ikm, b"SimpleXRootRatchet", 96)
    return o[:32], o[32:64], o[64:96]


def x25519_pub(priv: bytes) -> bytes:
    return bytes(nacl.bindings.crypto_scalarmult_base(priv))


def binding(ad: bytes) -> bytes:
    return bytes(SHA3_256.new(b"SimpleXService" + ad).digest())


def ed25519_sign(seed: bytes, msg: bytes) -> tuple[bytes, bytes]:
    key = eddsa.import_private_key(seed)
    public = bytes(key.public_key().export_key(format="raw"))
    return public, bytes(eddsa.new(key, "rfc8032").sign(msg))


def ed25519_verify(public: bytes, msg: bytes, sig: bytes) -> bool:
    key = eddsa.import_public_key(public)
    try:
        eddsa.new(key, "rfc8032").verify(msg, sig)
    except ValueError:
        return False
    return True


def kem_params(ct: bytes | None, pk: bytes) -> bytes:
    return b"1P" + lg(pk) if ct is None else b"1A" + lg(ct) + lg(pk)


def read_kem(c: Cursor) -> tuple[bytes | None, bytes] | None:
    if c.n(1) == b"0":
        return None
    tag = c.n(1)
    ct = c.lg() if tag == b"A" else None
    return ct, c.lg()


def read_key(c: Cursor, prefix: bytes) -> bytes:
    der = c.bs()
    if not der.startswith(prefix):
        raise StandinError("key")
    return der[len(prefix) :]


def queue_info(q: dict[str, Any], dh_pub: bytes) -> bytes:
    srv = bytes([len(q["hosts"])]) + b"".join(bs(h.encode()) for h in q["hosts"])
    srv += bs(q["port"].encode()) + bs(q["key_hash"])
    mode = (q["queue_mode"] or "").encode()
    return w16(q["client_version"]) + srv + bs(q["sender_id"]) + bs(X25519_PREFIX + dh_pub) + mode


def read_queue_info(c: Cursor) -> dict[str, Any]:
    v = c.u16()
    hosts = [c.bs().decode() for _ in range(c.u8())]
    port = c.bs().decode()
    kh = c.bs()
    sid = c.bs()
    dh = read_key(c, X25519_PREFIX)
    mode = None
    if c.i < len(c.d) and c.d[c.i : c.i + 1] in (b"M", b"C"):
        mode = c.n(1).decode()
    return {"client_version": v, "hosts": hosts, "port": port, "key_hash": kh,
            "sender_id": sid, "queue_mode": mode, "dh": dh}


def header(dh_pub: bytes, kem: bytes) -> bytes:
    return w16(3) + bs(X448_PREFIX + dh_pub) + kem + b"\0" * 8


def encrypt(ad: bytes, hk: bytes, ck: bytes, hdr: bytes, hpad: int, msg: bytes, mpad: int) -> bytes:
    _, mk, iv, ehiv = chain(ck)
    htag, hbody = aead_enc(hk, ehiv, ad, padded(hdr, hpad))
    em = w16(3) + ehiv + htag + lg(hbody)
    tag, body = aead_enc(mk, iv, ad + em, padded(msg, mpad))
    return lg(em) + tag + body


def decrypt_header(enc: bytes, hk: bytes, ad: bytes) -> tuple[bytes, bytes, bytes, bytes, int]:
    c = Cursor(enc)
    em = c.lg()
    tag = c.n(16)
    body = c.rest()
    h = Cursor(em)
    h.u16()
    ehiv, ehtag, hbody = h.n(16), h.n(16), h.lg()
    hdr = unpadded(aead_dec(hk, ehiv, ad, hbody, ehtag))
    return em, tag, body, hdr, len(hbody)


def box(msg: bytes, nonce: bytes, their_pub: bytes, our_priv: bytes) -> bytes:
    return bytes(nacl.bindings.crypto_box(padded(msg, 15904), nonce, their_pub, our_priv))


def unbox(env: bytes, our_priv: bytes) -> tuple[int, bytes]:
    c = Cursor(env)
    v = c.u16()
    if c.n(1) != b"1":
        raise StandinError("no key")
    sender = read_key(c, X25519_PREFIX)
    nonce = c.n(24)
    try:
        plain = nacl.bindings.crypto_box_open(c.rest(), nonce, sender, our_priv)
    except Exception:
        raise StandinError("box") from None
    return v, unpadded(bytes(plain))


# -- the two parties ---------------------------------------------------------------------


@dataclass
class Address:
    """Raw private keys of an address, as the vectors record them."""

    queue_dh: bytes
    k1: bytes
    k2: bytes
    kem_secret: bytes | None
    kem_public: bytes | None
    key_id: bytes
    pq_support: bool


def service_open(message: bytes, a: Address) -> dict[str, Any]:
    """smpContactRequest: the payload, the signer, rcAD, the padded block, and the reply."""
    _, cm = unbox(message, a.queue_dh)
    c = Cursor(cm)
    if c.n(1) != b"_":
        raise StandinError("header")
    agent_version = c.u16()
    if c.n(1) != b"A":
        raise StandinError("not a contact request")
    if c.u16() != 3:
        raise StandinError("e2e version")
    sk1 = read_key(c, X448_PREFIX)
    sk2 = read_key(c, X448_PREFIX)
    skem = read_kem(c)
    if c.bs() != a.key_id:
        raise StandinError("key id")
    enc = c.rest()
    ss = None
    if skem is not None and skem[0] is not None:
        assert a.kem_secret is not None
        ss = sntrup_761.decaps(a.kem_secret, skem[0])
    dhs = x448_dh(sk2, a.k1) + x448_dh(sk1, a.k2) + x448_dh(sk2, a.k2) + (ss or b"")
    x = hkdf(b"\0" * 64, dhs, b"SimpleXX3DH", 128)
    hk, nhk, sk = x[:32], x[32:64], x[64:96]
    ad = sk1 + x448_pub(a.k1)
    em, tag, body, hdr, _ = decrypt_header(enc, hk, ad)
    h = Cursor(hdr)
    h.u16()
    peer_dh = read_key(h, X448_PREFIX)
    hkem = read_kem(h)
    ss2 = None
    if hkem is not None and hkem[0] is not None:
        assert a.kem_secret is not None
        ss2 = sntrup_761.decaps(a.kem_secret, hkem[0])
    rk, ckr, _ = root(sk, x448_dh(peer_dh, a.k2) + (ss2 or b""))
    _, mk, iv, _ = chain(ckr)
    block_padded = aead_dec(mk, iv, ad + em, body, tag)
    b = Cursor(unpadded(block_padded))
    if b.n(1) != b"A":
        raise StandinError("not a request")
    queues = [read_queue_info(b) for _ in range(b.u8())]
    signer = None
    sig = None
    if b.n(1) == b"1":
        signer = read_key(b, ED25519_PREFIX)
        sig = b.bs()
    payload = b.rest()
    if signer is not None and not ed25519_verify(signer, binding(ad) + payload, sig or b""):
        raise StandinError("bad signature")
    peer_kem = None if hkem is None else hkem[1]
    reply = {"root": rk, "nhk": nhk, "peer_dh": peer_dh, "peer_kem": peer_kem, "ad": ad,
             "agent_version": agent_version, "queue": queues[0], "pq": a.pq_support}
    return {"payload": payload, "signer": signer, "ad": ad, "padded_block": block_padded,
            "reply": reply}


def service_answer(block: bytes, reply: dict[str, Any], r: dict[str, bytes | None]) -> bytes:
    """prepareReply / storeConfirmation / sendConfirmation: the answer's message body."""
    pq = reply["pq"]
    kem = b"0"
    ss = None
    if pq:
        ct = None
        if reply["peer_kem"] is not None:
            ct, ss = r["kem_ciphertext"], r["kem_shared"]
        kem = kem_params(ct, r["kem_public"] or b"")
    rkey = r["ratchet_key"] or b""
    _, cks, _ = root(reply["root"], x448_dh(reply["peer_dh"], rkey) + (ss or b""))
    hdr = header(x448_pub(rkey), kem)
    enc = encrypt(reply["ad"], reply["nhk"], cks, hdr, 2310 if pq else 88, block,
                  11106 if pq else 14832)
    conf = w16(reply["agent_version"]) + b"C0" + enc
    q = reply["queue"]
    if q["queue_mode"] == "M":
        ph = b"_"
    else:
        public, _ = ed25519_sign(r["auth_seed"] or b"", b"")
        ph = b"K" + bs(ED25519_PREFIX + public)
    e2e = r["e2e_key"] or b""
    nonce = r["nonce"] or b""
    return (w16(q["client_version"]) + b"1" + bs(X25519_PREFIX + x25519_pub(e2e)) + nonce
            + box(ph + conf, nonce, q["dh"], e2e))


def requester_seal(
    payload: bytes,
    addr: dict[str, Any],
    queue: dict[str, Any],
    sign_seed: bytes | None,
    r: dict[str, Any],
    client_version: int = 4,
    block_override: bytes | None = None,
) -> tuple[bytes, dict[str, Any]]:
    """joinConnSrv' / createRatchet_ / agentCbEncryptOnce: the request and the kept state."""
    accepted = addr["kem"] is not None
    ss = r["kem_shared"] if accepted else None
    dhs = (x448_dh(addr["k1"], r["e2e_k2"]) + x448_dh(addr["k2"], r["e2e_k1"])
           + x448_dh(addr["k2"], r["e2e_k2"]) + (ss or b""))
    x = hkdf(b"\0" * 64, dhs, b"SimpleXX3DH", 128)
    hk, nhk, sk = x[:32], x[32:64], x[64:96]
    ad = x448_pub(r["e2e_k1"]) + addr["k1"]
    rk, cks, _ = root(sk, x448_dh(addr["k2"], r["ratchet_key"]) + (ss or b""))
    kem = kem_params(r["kem_ciphertext"] if accepted else None, r["kem_public"])
    sig = b"0"
    if sign_seed is not None:
        public, s = ed25519_sign(sign_seed, binding(ad) + payload)
        sig = b"1" + bs(ED25519_PREFIX + public) + bs(s)
    block = b"A\x01" + queue_info(queue, x25519_pub(r["reply_dh"])) + sig + payload
    hdr = padded(header(x448_pub(r["ratchet_key"]), kem), 2310)
    plain = padded(block, 11106) if block_override is None else block_override  # as given
    _, mk, iv, ehiv = chain(cks)
    htag, hbody = aead_enc(hk, ehiv, ad, hdr)
    em = w16(3) + ehiv + htag + lg(hbody)
    tag, body = aead_enc(mk, iv, ad + em, plain)
    enc = lg(em) + tag + body
    params = (w16(3) + bs(X448_PREFIX + x448_pub(r["e2e_k1"]))
              + bs(X448_PREFIX + x448_pub(r["e2e_k2"])) + kem)
    env = w16(8) + b"A" + params + bs(addr["key_id"]) + enc
    message = (w16(client_version) + b"1" + bs(X25519_PREFIX + x25519_pub(r["box_key"]))
               + r["nonce"] + box(b"_" + env, r["nonce"], addr["queue_dh"], r["box_key"]))
    state = {"ad": ad, "root": rk, "nhk": nhk, "ratchet_key": r["ratchet_key"],
             "kem_secret": r["kem_secret"], "reply_dh": r["reply_dh"]}
    return message, state


def requester_open(message: bytes, state: dict[str, Any]) -> tuple[str, bytes]:
    """smpConfirmation (RcvConnection, no E2E parameters): ('P' or 'J', bytes)."""
    _, cm = unbox(message, state["reply_dh"])
    c = Cursor(cm)
    if c.n(1) == b"K":
        read_key(c, ED25519_PREFIX)
    c.u16()
    if c.n(2) != b"C0":
        raise StandinError("not a confirmation")
    enc = c.rest()
    em, tag, body, hdr, _ = decrypt_header(enc, state["nhk"], state["ad"])
    h = Cursor(hdr)
    h.u16()
    peer_dh = read_key(h, X448_PREFIX)
    hkem = read_kem(h)
    ss = None
    if hkem is not None and hkem[0] is not None:
        ss = sntrup_761.decaps(state["kem_secret"], hkem[0])
    _, ckr, _ = root(state["root"], x448_dh(peer_dh, state["ratchet_key"]) + (ss or b""))
    _, mk, iv, _ = chain(ckr)
    block = unpadded(aead_dec(mk, iv, state["ad"] + em, body, tag))
    return chr(block[0]), block[1:]


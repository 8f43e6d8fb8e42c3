"""The SimpleX agent's Service RPC messages (agent v8), as values with strict codecs.

The one definition of the inner message both backends seal and open (wire.md
section 4). Every rule cites simplexmq: ``Agent/Protocol.hs`` at commit
22815214468d4eb79a5e98df7a1ba2daa5d07ad7 ("V8") for the messages and
``SMPQueueInfo``; ``Encoding.hs``, ``Protocol.hs``, ``Transport/Client.hs``,
``Version.hs``, ``Agent/QueryString.hs`` and ``Server/QueueStore/QueueInfo.hs``
on ``master`` for the primitives. Read to learn from; no code is copied.

::

    request   = 'A' replyQueues requestSignature payload   ; AgentServiceRequest
    response  = 'P' payload                                 ; AgentServiceResponse
    rejection = 'J' reason                                  ; AgentRejection (Tail)

Decoding is strict: it takes what simplexmq's ``smpP`` takes, and of that only
the bytes simplexmq's ``smpEncode`` writes (**ours**: a value is read only from
its one encoding, so that decoding and re-encoding give the same bytes). Every
error is a :class:`~simplex_rpc.FrameError` naming the offset of what is wrong.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import unquote_to_bytes

from ..errors import FrameError
from . import b64 as _b64
from .keys import SIGNATURE_LENGTH, SPKI_LENGTH, SPKI_PREFIX, PublicKey

__all__ = [
    "AgentRejection",
    "AgentServiceRequest",
    "AgentServiceResponse",
    "RequestSignature",
    "SMPQueueInfo",
    "SMPServer",
    "decode_message",
]

Buffer = bytes | bytearray | memoryview
QueueMode = Literal["M", "C"]

#: Protocol.hs: initialSMPClientVersion 1, srvHostnamesSMPClientVersion 2,
#: sndAuthKeySMPClientVersion 3, shortLinksSMPClientVersion 4 = currentSMPClientVersion.
INITIAL_CLIENT_VERSION: Final = 1
SRV_HOSTNAMES_CLIENT_VERSION: Final = 2
SND_AUTH_KEY_CLIENT_VERSION: Final = 3
SHORT_LINKS_CLIENT_VERSION: Final = 4
CURRENT_CLIENT_VERSION: Final = 4

#: RFC 8410: the DER prefix of an X25519 SubjectPublicKeyInfo (OID 1.3.101.110).
X25519_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b656e032100")

REQUEST_TAG: Final = ord("A")
RESPONSE_TAG: Final = ord("P")
REJECTION_TAG: Final = ord("J")
#: The other tags of ``instance Encoding AgentMessage`` (V8): not Service RPC messages.
_OTHER_TAGS: Final = {ord("I"): "AgentConnInfo", ord("D"): "AgentConnInfoReply",
                      ord("R"): "AgentRatchetInfo", ord("M"): "AgentMessage"}

#: ``'1' ‖ key (1 + 44) ‖ signature (1 + 64)``: a present ``Maybe RequestSignature``.
SIGNATURE_FIELD_LENGTH: Final = 1 + 1 + SPKI_LENGTH + 1 + SIGNATURE_LENGTH  # 111

#: V8 Agent/Protocol.hs ``extraSMPServerHosts``: the onion host ``updateSMPServerHosts``
#: adds to a preset server read from a legacy (client version 1) queue.
EXTRA_SMP_SERVER_HOSTS: Final = {
    "smp4.simplex.im": "o5vmywmrnaxalvz6wi3zicyftgio6psuvyniis6gco6bp6ekl4cqj4id.onion",
    "smp5.simplex.im": "jjbyvoemxysm7qxap7m5d5m35jzv5qq6gnlv7s4rsn7tdwwmuqciwpid.onion",
    "smp6.simplex.im": "bylepyau3ty4czmn77q4fglvperknl4bi2eb2fdy2bh4jxtf32kf73yd.onion",
    "smp8.simplex.im": "beccx4yfxxbvyhqypaavemqurytl6hozr47wfc7uuecacjqdvwpw2xid.onion",
    "smp9.simplex.im": "jssqzccmrcws6bhmn77vgmhfjmhwlyr3u7puw4erkyoosywgl67slqqd.onion",
    "smp10.simplex.im": "rb2pbttocvnbrngnwziclp2f4ckjq65kebafws6g4hy22cdaiv5dwjqd.onion",
}


def _error(message: str) -> FrameError:
    return FrameError(f"agent message: {message}")


# -- TransportHost (Transport/Client.hs) --------------------------------------------------

_IPV4: Final = re.compile(rb"(\d+)\.(\d+)\.(\d+)\.(\d+)")
_IPV6_CHARS: Final = re.compile(rb"[0-9A-Fa-f:]+")
_ONION: Final = re.compile(rb"[a-z0-9]*\.onion")
_DOMAIN: Final = re.compile(rb"[^:#,;/ \n\r\t]+")


def _ipv6_text(packed: bytes) -> str:
    """An IPv6 address as iproute's ``show`` prints it (RFC 5952, as glibc's inet_ntop)."""
    words = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
    if words[:5] == [0] * 5 and words[5] == 0xFFFF:
        return "::ffff:" + ".".join(str(b) for b in packed[12:])
    if words[:6] == [0] * 6 and words[6] != 0:  # IPv4-compatible (iproute: a4 >= 0x10000)
        return "::" + ".".join(str(b) for b in packed[12:])
    best_at, best_len, at = -1, 0, 0
    while at < 8:
        if words[at] == 0:
            end = at
            while end < 8 and words[end] == 0:
                end += 1
            if end - at > best_len:
                best_at, best_len = at, end - at
            at = end
        else:
            at += 1
    if best_len < 2:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:best_at])
    tail = ":".join(f"{w:x}" for w in words[best_at + best_len :])
    return f"{head}::{tail}"


def host_at(data: bytes, at: int) -> tuple[str, int] | None:
    """``strP`` of a TransportHost at ``at``: its text as parsed and where it ends.

    The alternatives in simplexmq's order, each committed once it matches: IPv4
    (three ``decimal '.'`` of at most 255, then a decimal), IPv6 (``[...]`` or a
    run of hex digits and colons that reads as an address), onion (lowercase
    letters and digits, then ``.onion``), domain (up to ``:#,;/``, space or a
    line break; not ending in ``.onion``). Returns None when none matches, and
    the canonical text (``strEncode`` of the value) otherwise.
    """
    m = _IPV4.match(data, at)
    if m and all(int(g) <= 255 for g in m.groups()[:3]):
        octets = [int(g) for g in m.groups()]
        octets[3] %= 256  # attoparsec's decimal :: Word8 wraps; canonicity is checked by callers
        return ".".join(str(o) for o in octets), m.end()
    if data[at : at + 1] == b"[":
        close = data.find(b"]", at + 1)
        token, end = (data[at + 1 : close], close + 1) if close > at + 1 else (b"", -1)
    else:
        m6 = _IPV6_CHARS.match(data, at)
        token, end = (m6.group(), m6.end()) if m6 else (b"", -1)
    if end > 0:
        try:
            packed = ipaddress.IPv6Address(token.decode("latin-1")).packed
        except ValueError:
            pass
        else:
            if b"%" not in token:
                return _ipv6_text(packed), end
    m = _ONION.match(data, at)
    if m:
        return m.group().decode("latin-1"), m.end()
    m = _DOMAIN.match(data, at)
    if m and not m.group().endswith(b".onion"):
        return m.group().decode("latin-1"), m.end()
    return None


#: A plain domain name: every alternative before the domain's fails on it (no colon, so
#: no IPv6; a first label with a letter, so no IPv4; no ".onion" anywhere), and its
#: text is its canonical form. The common case, checked without the full parser.
_PLAIN_DOMAIN: Final = re.compile(r"(?!.*\.onion)[a-z0-9-]*[a-z-][a-z0-9-]*(\.[a-z0-9-]+)*")


def check_host(text: str) -> str:
    """``text`` if it is a canonical TransportHost text; else ValueError saying why."""
    if _PLAIN_DOMAIN.fullmatch(text):
        return text
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"host {text!r} has a character outside Latin-1") from None
    parsed = host_at(raw, 0)
    if parsed is None:
        raise ValueError(f"host {text!r} is not a TransportHost")
    canonical, end = parsed
    if end != len(raw):
        raise ValueError(f"host {text!r} has text after offset {end} that is not part of it")
    if canonical != text:
        raise ValueError(f"host {text!r} is not in its canonical form {canonical!r}")
    return text


def _check_port(port: str) -> str:
    if port and not (port.isascii() and port.isdigit() and str(int(port)) == port
                     and 0 < int(port) <= 65535):
        raise ValueError(f"port {port!r} is not empty or a decimal from 1 to 65535")
    return port


# -- values ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SMPServer:
    """An SMP server (Protocol.hs ``ProtocolServer``): hosts, port and key hash.

    ``hosts`` are TransportHost texts in their canonical form (an IPv4 or IPv6
    address, an onion name or a domain); ``port`` is ``""`` (the default) or a
    decimal; ``key_hash`` is the server certificate's fingerprint (may be empty).
    """

    hosts: tuple[str, ...]
    port: str = ""
    key_hash: bytes = b""

    def __post_init__(self) -> None:
        hosts = tuple(self.hosts) if not isinstance(self.hosts, str) else (self.hosts,)
        object.__setattr__(self, "hosts", hosts)
        object.__setattr__(self, "key_hash", bytes(self.key_hash))
        try:
            if not hosts:
                raise ValueError("hosts: a server has at least one host")
            if len(hosts) > 255:
                raise ValueError(f"hosts: {len(hosts)} hosts, at most 255 fit the encoding")
            for host in hosts:
                if not isinstance(host, str):
                    raise ValueError(f"hosts: expected str, got {type(host).__name__}")
                check_host(host)
                if len(host.encode("latin-1")) > 255:
                    raise ValueError(f"host {host[:20]!r}...: longer than 255 bytes")
            if not isinstance(self.port, str):
                raise ValueError(f"port: expected str, got {type(self.port).__name__}")
            _check_port(self.port)
            if len(self.key_hash) > 255:
                raise ValueError(f"key hash of {len(self.key_hash)} bytes, at most 255")
        except ValueError as exc:
            raise FrameError(f"SMP server: {exc}") from None

    @classmethod
    def _checked(cls, hosts: tuple[str, ...], port: str, key_hash: bytes) -> SMPServer:
        """A server of fields the decoder has already checked (no second check)."""
        server = object.__new__(cls)
        object.__setattr__(server, "hosts", hosts)
        object.__setattr__(server, "port", port)
        object.__setattr__(server, "key_hash", key_hash)
        return server

    def encode(self) -> bytes:
        """``smpEncode (host, port, keyHash)``: NonEmpty of ByteString hosts, port, key hash."""
        out = bytearray([len(self.hosts)])
        for host in self.hosts:
            out += _bs(host.encode("latin-1"))
        out += _bs(self.port.encode("ascii")) + _bs(self.key_hash)
        return bytes(out)

    def _legacy(self) -> bytes:
        """``legacyEncodeServer``: the first host only."""
        return _bs(self.hosts[0].encode("latin-1")) + _bs(self.port.encode()) + _bs(self.key_hash)

    def uri(self, hosts: Sequence[str] | None = None) -> str:
        """``strEncode``: ``smp://<keyHash>@<host,host>[:<port>]`` (Protocol.hs strEncodeServer)."""
        shown = ",".join(self.hosts if hosts is None else hosts)
        port = f":{self.port}" if self.port else ""
        return f"smp://{_b64.encode(self.key_hash)}@{shown}{port}"


def _bs(data: bytes) -> bytes:
    if len(data) > 255:
        raise FrameError(f"agent message: a ByteString of {len(data)} bytes (at most 255)")
    return bytes([len(data)]) + data


@dataclass(frozen=True, slots=True)
class SMPQueueInfo:
    """A reply queue (V8 Agent/Protocol.hs ``SMPQueueInfo``).

    ``client_version`` is the SMP client version the queue is encoded for;
    ``dh_public_key`` the X25519 key as 44 bytes of X.509 SPKI DER; ``queue_mode``
    ``"M"`` (messaging), ``"C"`` (contact) or None. Encoding follows the version
    (``instance Encoding SMPQueueInfo``): from version 4 the mode byte when
    there is one; at 3, ``'T'`` for messaging; at 2 nothing; at 1 (or 0) the
    legacy server with one host.
    """

    client_version: int
    server: SMPServer
    sender_id: bytes
    dh_public_key: bytes
    queue_mode: QueueMode | None = None
    _encoded: bytes = field(default=b"", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sender_id", bytes(self.sender_id))
        object.__setattr__(self, "dh_public_key", bytes(self.dh_public_key))
        v = self.client_version
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0xFFFF:
            raise FrameError(f"SMP queue: client version {v!r} is not a 16-bit version")
        if not isinstance(self.server, SMPServer):
            raise TypeError(f"SMP queue: server: expected SMPServer, got {type(self.server)}")
        if len(self.sender_id) > 255:
            raise FrameError(f"SMP queue: sender id of {len(self.sender_id)} bytes, at most 255")
        if (len(self.dh_public_key) != SPKI_LENGTH
                or not self.dh_public_key.startswith(X25519_SPKI_PREFIX)):
            raise FrameError("SMP queue: dh_public_key is not 44 bytes of X25519 SPKI DER")
        if self.queue_mode not in (None, "M", "C"):
            raise FrameError(f"SMP queue: queue mode {self.queue_mode!r} is not 'M', 'C' or None")
        object.__setattr__(self, "_encoded", self._encode())

    @classmethod
    def _checked(
        cls, version: int, server: SMPServer, sender_id: bytes, dh: bytes,
        mode: QueueMode | None, encoded: bytes,
    ) -> SMPQueueInfo:
        """A queue of fields the decoder has already checked, with its encoding."""
        queue = object.__new__(cls)
        for name, value in (("client_version", version), ("server", server),
                            ("sender_id", sender_id), ("dh_public_key", dh),
                            ("queue_mode", mode), ("_encoded", encoded)):
            object.__setattr__(queue, name, value)
        return queue

    def _encode(self) -> bytes:
        v, mode = self.client_version, self.queue_mode
        head = v.to_bytes(2, "big")
        if v <= INITIAL_CLIENT_VERSION:
            return head + self.server._legacy() + _bs(self.sender_id) + _bs(self.dh_public_key)
        body = head + self.server.encode() + _bs(self.sender_id) + _bs(self.dh_public_key)
        if v >= SHORT_LINKS_CLIENT_VERSION:
            return body + (mode.encode() if mode else b"")
        if v >= SND_AUTH_KEY_CLIENT_VERSION and mode == "M":
            return body + b"T"  # smpEncode sndSecure (True)
        return body

    def encode(self) -> bytes:
        """``smpEncode`` of the queue, as the agent writes it for ``client_version``."""
        return self._encoded

    @classmethod
    def decode(cls, data: Buffer) -> SMPQueueInfo:
        """Decode exactly one encoded queue (``parseAll smpP``), strictly."""
        raw = bytes(data)
        reader = _Reader(raw, "SMP queue")
        queue = reader.queue()
        reader.end()
        return queue

    def uri(self) -> str:
        """``strEncode`` (V8 ``instance StrEncoding SMPQueueInfo``): the SMP queue URI.

        ``smp://<keyHash>@<hosts>[:port]/<senderId>#/?v=<v>&dh=<key>[&q=m|c][&k=s]``,
        query escaped as http-types' ``renderSimpleQuery``; below version 2 the
        server shows its first host and the others go to ``srv``.
        """
        v, mode = self.client_version, self.queue_mode
        params = [("v", str(v)), ("dh", _b64.encode(self.dh_public_key))]
        if mode is not None:
            params.append(("q", mode.lower()))
        if mode == "M" and v < SHORT_LINKS_CLIENT_VERSION:
            params.append(("k", "s"))
        if v >= SRV_HOSTNAMES_CLIENT_VERSION:
            server = self.server.uri()
        else:
            server = self.server.uri(self.server.hosts[:1])
            if len(self.server.hosts) > 1:
                params.append(("srv", ",".join(self.server.hosts[1:])))
        query = "&".join(f"{_escape(k)}={_escape(val)}" for k, val in params)
        return f"{server}/{_b64.encode(self.sender_id)}#/?{query}"

    @classmethod
    def from_uri(cls, text: str) -> SMPQueueInfo:
        """``strDecode`` of an SMP queue URI (``strP`` of ``SMPQueueUri``, then its
        ``maxVersion``). A host is read as simplexmq reads it; the value must then
        be one the binary codec carries (a FrameError otherwise)."""
        return _parse_uri(text)


_UNRESERVED: Final = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
)


def _escape(text: str) -> str:
    """http-types ``urlEncode True``: unreserved bytes as they are, others ``%XX`` (upper hex)."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode("latin-1"))


@dataclass(frozen=True, slots=True)
class RequestSignature:
    """``RequestSignature PublicKeyEd25519 (Signature Ed25519)``: the signer and its signature."""

    key: PublicKey
    signature: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.key, PublicKey):
            raise TypeError(f"signature: key: expected PublicKey, got {type(self.key).__name__}")
        object.__setattr__(self, "signature", bytes(self.signature))
        if len(self.signature) != SIGNATURE_LENGTH:
            raise FrameError(
                f"agent message: signature of {len(self.signature)} bytes where 64 are required"
            )

    def encode(self) -> bytes:
        """``smpEncode (key, sig)``: two ByteStrings, the SPKI DER key and the raw signature."""
        return bytes([SPKI_LENGTH]) + self.key.der + bytes([SIGNATURE_LENGTH]) + self.signature


@dataclass(frozen=True, slots=True)
class AgentServiceRequest:
    """``AgentServiceRequest (NonEmpty SMPQueueInfo) (Maybe RequestSignature) MsgBody``."""

    reply_queues: tuple[SMPQueueInfo, ...]
    signature: RequestSignature | None
    payload: bytes

    def __post_init__(self) -> None:
        queues = tuple(self.reply_queues)
        object.__setattr__(self, "reply_queues", queues)
        object.__setattr__(self, "payload", bytes(self.payload))
        if not 1 <= len(queues) <= 255:
            raise FrameError(f"agent message: {len(queues)} reply queues (1 to 255)")
        for queue in queues:
            if not isinstance(queue, SMPQueueInfo):
                raise TypeError(f"reply_queues: expected SMPQueueInfo, got {type(queue).__name__}")

    def head(self) -> bytes:
        """The bytes before the payload."""
        return request_head(self.reply_queues, self.signature)

    def encode(self) -> bytes:
        """``smpEncode ('A', queues, sig_, Tail body)``."""
        return self.head() + self.payload


@dataclass(frozen=True, slots=True)
class AgentServiceResponse:
    """``AgentServiceResponse MsgBody``: ``'P'`` then the payload."""

    payload: bytes

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload", bytes(self.payload))

    def encode(self) -> bytes:
        """``smpEncode ('P', Tail body)``."""
        return b"P" + self.payload


@dataclass(frozen=True, slots=True)
class AgentRejection:
    """``AgentRejection ByteString``: ``'J'`` then the reason (a ``Tail``)."""

    reason: bytes

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", bytes(self.reason))

    def encode(self) -> bytes:
        """``smpEncode ('J', Tail reason)``."""
        return b"J" + self.reason


AgentServiceMessage = AgentServiceRequest | AgentServiceResponse | AgentRejection


def request_head(queues: Sequence[SMPQueueInfo], signature: RequestSignature | None) -> bytes:
    """``'A' ‖ NonEmpty SMPQueueInfo ‖ Maybe RequestSignature``: a request before its payload."""
    body = b"".join(q._encoded for q in queues)
    sig = b"0" if signature is None else b"1" + signature.encode()
    return b"A" + bytes([len(queues)]) + body + sig


# -- decoding ------------------------------------------------------------------------


class _Reader:
    """A cursor over an encoded message: each read names the offset of a failure."""

    __slots__ = ("at", "base", "data", "stop", "what")

    def __init__(self, data: bytes, what: str, at: int = 0, *, base: int = 0,
                 stop: int | None = None) -> None:
        self.data = data
        self.at = at
        self.base = base  # offsets in messages count from here
        self.stop = len(data) if stop is None else stop
        self.what = what

    def fail(self, message: str, at: int | None = None) -> FrameError:
        return _error(f"{message} at offset {(self.at if at is None else at) - self.base}")

    def take(self, n: int, field: str) -> bytes:
        end = self.at + n
        if end > self.stop:
            raise _error(f"ends at offset {self.stop - self.base}, inside {field} (offsets"
                         f" {self.at - self.base} to {end - 1 - self.base})")
        out = self.data[self.at : end]
        self.at = end
        return out

    def byte(self, field: str) -> int:
        if self.at >= self.stop:
            raise _error(f"ends before {field} at offset {self.at - self.base}")
        b = self.data[self.at]
        self.at += 1
        return b

    def bytestring(self, field: str) -> bytes:
        n = self.byte(f"the length of {field}")
        return self.take(n, field)

    def end(self) -> None:
        if self.at != self.stop:
            raise self.fail(f"{self.stop - self.at} bytes after the {self.what}")

    def host(self, field: str) -> str:
        at = self.at + 1
        raw = self.bytestring(field)
        try:
            return check_host(raw.decode("latin-1"))
        except ValueError as exc:
            raise self.fail(f"{field}: {exc}", at) from None

    def server(self, legacy: bool) -> SMPServer:
        if legacy:
            hosts = [self.host("the server host")]
        else:
            count_at = self.at
            count = self.byte("the server's host count")
            if count == 0:
                raise self.fail("server host count 0 (a NonEmpty list)", count_at)
            hosts = [self.host(f"server host {i}") for i in range(count)]
        port_at = self.at + 1
        port = self.bytestring("the server port")
        try:
            text = _check_port(port.decode("latin-1"))
        except ValueError as exc:
            raise self.fail(f"server {exc}", port_at) from None
        key_hash = self.bytestring("the server key hash")
        if legacy and len(hosts) == 1 and hosts[0] in EXTRA_SMP_SERVER_HOSTS:
            hosts.append(EXTRA_SMP_SERVER_HOSTS[hosts[0]])  # updateSMPServerHosts
        return SMPServer._checked(tuple(hosts), text, key_hash)

    def queue(self) -> SMPQueueInfo:
        start = self.at
        version = int.from_bytes(self.take(2, "the queue's client version"), "big")
        server = self.server(legacy=version <= INITIAL_CLIENT_VERSION)
        sender_id = self.bytestring("the queue's sender id")
        key_at = self.at
        n = self.byte("the length of the queue's DH key")
        if n != SPKI_LENGTH:
            raise self.fail(f"queue DH key length {n} is not 44 (X25519 SPKI DER)", key_at)
        key = self.take(n, "the queue's DH key")
        for i, (got, want) in enumerate(zip(key, X25519_SPKI_PREFIX, strict=False)):
            if got != want:
                raise self.fail("queue DH key is not an X25519 SPKI (byte differs)",
                                key_at + 1 + i)
        mode: QueueMode | None = None
        mode_at = self.at
        if self.at < self.stop:  # queueModeP: a QueueMode, else a Bool, else nothing
            b = self.data[self.at]
            if b in b"MCTF":
                self.at += 1
                mode = "M" if b in b"MT" else "C"
                # The one byte smpEncode writes: 'M'/'C' from version 4, 'T' at 3 (ours:
                # simplexmq also reads 'T'/'F' and 'M'/'C' at any version).
                if b not in (b"MC" if version >= SHORT_LINKS_CLIENT_VERSION
                             else b"T" if version == SND_AUTH_KEY_CLIENT_VERSION else b""):
                    raise self.fail(
                        f"queue mode byte {chr(b)!r} is not the one simplexmq writes for client"
                        f" version {version}",
                        mode_at,
                    )
        return SMPQueueInfo._checked(
            version, server, sender_id, key, mode, self.data[start : self.at]
        )

    def signature(self) -> RequestSignature | None:
        at = self.at
        flag = self.byte("the signature's Maybe tag")
        if flag == 0x30:
            return None
        if flag != 0x31:
            raise self.fail(f"signature Maybe tag 0x{flag:02x} is not '0' or '1'", at)
        key_at = self.at
        n = self.byte("the signer key's length")
        if n != SPKI_LENGTH:
            raise self.fail(f"signer key length {n} is not 44 (Ed25519 SPKI DER)", key_at)
        der = self.take(n, "the signer key")
        for i, (got, want) in enumerate(zip(der, SPKI_PREFIX, strict=False)):
            if got != want:
                raise self.fail("signer key is not an Ed25519 SPKI (byte differs)", key_at + 1 + i)
        sig_at = self.at
        m = self.byte("the signature's length")
        if m != SIGNATURE_LENGTH:
            raise self.fail(f"signature length {m} is not 64", sig_at)
        sig = self.take(m, "the signature")
        signature = object.__new__(RequestSignature)  # both fields checked above
        object.__setattr__(signature, "key", PublicKey(der[len(SPKI_PREFIX) :]))
        object.__setattr__(signature, "signature", sig)
        return signature

    def request_head(self) -> tuple[tuple[SMPQueueInfo, ...], RequestSignature | None]:
        count_at = self.at
        count = self.byte("the reply queue count")
        if count == 0:
            raise self.fail("reply queue count 0 (a NonEmpty list)", count_at)
        queues = tuple(self.queue() for _ in range(count))
        return queues, self.signature()


_MODE_BYTES: Final = {ord("M"): "M", ord("C"): "C"}


def _common_head(
    data: bytes, start: int, stop: int
) -> tuple[tuple[SMPQueueInfo, ...], RequestSignature | None, int] | None:
    """The head of the common request, read fast: one reply queue of client version 4 or
    more, plain domain hosts, a decimal port or none. None for anything else, which the
    general reader (``_Reader``) then reads, or refuses with its error: this path never
    raises and accepts only what that reader accepts, to the same values."""
    try:
        at = start + 1
        if data[at] != 1:
            return None
        q = at + 1
        version = (data[q] << 8) | data[q + 1]
        count = data[q + 2]
        if version < SHORT_LINKS_CLIENT_VERSION or count == 0:
            return None
        at = q + 3
        hosts = []
        for _ in range(count):
            n = data[at]
            host = data[at + 1 : at + 1 + n].decode("latin-1")
            if len(host) != n or not _PLAIN_DOMAIN.fullmatch(host):
                return None
            hosts.append(host)
            at += 1 + n
        n = data[at]
        port = data[at + 1 : at + 1 + n].decode("latin-1")
        at += 1 + n
        if port and (not port.isdigit() or not port.isascii() or port[0] == "0"
                     or int(port) > 65535):
            return None
        n = data[at]
        key_hash = data[at + 1 : at + 1 + n]
        at += 1 + n
        n = data[at]
        sender_id = data[at + 1 : at + 1 + n]
        at += 1 + n
        if data[at] != SPKI_LENGTH or data[at + 1 : at + 13] != X25519_SPKI_PREFIX:
            return None
        dh = data[at + 1 : at + 45]
        at += 45
        mode = _MODE_BYTES.get(data[at])
        if mode is not None:
            at += 1
        if at >= stop or len(dh) != SPKI_LENGTH:  # the Maybe tag must be inside the message
            return None
        server = SMPServer._checked(tuple(hosts), port, key_hash)
        queue = SMPQueueInfo._checked(version, server, sender_id, dh, mode, data[q:at])  # type: ignore[arg-type]
        flag = data[at]
        if flag == 0x30:
            return (queue,), None, at + 1
        if (flag != 0x31 or data[at + 1] != SPKI_LENGTH or data[at + 46] != SIGNATURE_LENGTH
                or data[at + 2 : at + 14] != SPKI_PREFIX or at + 111 > stop):
            return None
        signature = object.__new__(RequestSignature)
        object.__setattr__(signature, "key", PublicKey(data[at + 14 : at + 46]))
        object.__setattr__(signature, "signature", data[at + 47 : at + 111])
        return (queue,), signature, at + 111
    except IndexError:
        return None


# -- queues whose bytes C has checked (the C backend's open_request) -----------------------

#: Servers of the reply queues read from checked bytes, by their encoding (hosts, port,
#: key hash): a responder meets few SMP servers (the presets and a few of its
#: requesters'), while each request's queue (sender id, DH key) is new. Cleared at
#: _SERVERS_MAX entries, so it stays bounded whatever arrives.
_SERVERS: Final[dict[bytes, SMPServer]] = {}
_SERVERS_MAX: Final = 256
_MODE_OF: Final[dict[int, QueueMode | None]] = {0: None, ord("M"): "M", ord("C"): "C"}


def _checked_server(encoded: bytes) -> SMPServer:
    """The server of ``encoded`` (``count ‖ hosts ‖ port ‖ key hash``), whose fields C has
    checked as the codec checks them (plain domain hosts, a canonical port)."""
    server = _SERVERS.get(encoded)
    if server is None:
        at = 1
        hosts = []
        for _ in range(encoded[0]):
            n = encoded[at]
            hosts.append(encoded[at + 1 : at + 1 + n].decode("latin-1"))
            at += 1 + n
        n = encoded[at]
        port = encoded[at + 1 : at + 1 + n].decode("latin-1")
        at += 1 + n
        server = SMPServer._checked(tuple(hosts), port, encoded[at + 1 :])
        if len(_SERVERS) >= _SERVERS_MAX:
            _SERVERS.clear()
        _SERVERS[encoded] = server
    return server


def _checked_queue_builder() -> Callable[[bytes, int, int, int, int, int, int], SMPQueueInfo]:
    # Everything the builder uses is bound here once (closure cells read as fast as
    # locals): it runs for every request the C backend opens. The slots of the frozen
    # value are set directly, as object.__setattr__ would, without the name lookup.
    new = object.__new__
    cls = SMPQueueInfo
    set_version, set_server, set_sender, set_dh, set_mode, set_encoded = (
        SMPQueueInfo.__dict__[name].__set__
        for name in ("client_version", "server", "sender_id", "dh_public_key", "queue_mode",
                     "_encoded")
    )
    servers = _SERVERS
    modes = _MODE_OF
    server_of = _checked_server

    def checked_queue(
        data: bytes, start: int, sender_at: int, dh_at: int, end: int, version: int, mode: int
    ) -> SMPQueueInfo:
        """The reply queue at ``data[start:end]`` from the offsets of its fields, which C's
        ``srpc_request_head`` has read and checked exactly as :meth:`_Reader.queue` does
        (csrc/simplex_rpc.h): the same value that reader builds, without a second check.

        ``sender_at`` and ``dh_at`` are the length bytes of the sender id and of the DH
        key (44 bytes); ``mode`` is ``ord("M")``, ``ord("C")`` or 0.
        """
        queue = new(cls)
        set_version(queue, version)
        key = data[start + 2 : sender_at]
        set_server(queue, servers.get(key) or server_of(key))
        set_sender(queue, data[sender_at + 1 : dh_at])
        set_dh(queue, data[dh_at + 1 : dh_at + 45])
        set_mode(queue, modes[mode])
        set_encoded(queue, data[start:end])
        return queue

    return checked_queue


checked_queue: Final = _checked_queue_builder()


def parse_request_head(
    message: Buffer, start: int = 0, stop: int | None = None
) -> tuple[tuple[SMPQueueInfo, ...], RequestSignature | None, int]:
    """Decode a request's head: its reply queues, signature, and where the payload starts.

    The message is ``message[start:stop]`` (by default all of it), unpadded; it
    must start with ``'A'``. Error offsets count from ``start``; the returned
    payload offset is an index into ``message``.
    """
    data = message if type(message) is bytes else bytes(message)
    end = len(data) if stop is None else stop
    if start >= end:
        raise _error("empty, no tag at offset 0")
    if data[start] != REQUEST_TAG:
        raise tag_error(data[start], "a request ('A')")
    common = _common_head(data, start, end)
    if common is not None:
        return common
    reader = _Reader(data, "request", start + 1, base=start, stop=end)
    queues, signature = reader.request_head()
    return queues, signature, reader.at


def tag_error(tag: int, expected: str) -> FrameError:
    """A message whose tag at offset 0 is not the ``expected`` one."""
    if tag in (REQUEST_TAG, RESPONSE_TAG, REJECTION_TAG):
        kind = {REQUEST_TAG: "a request", RESPONSE_TAG: "a response",
                REJECTION_TAG: "a rejection"}[tag]
        return _error(f"{kind} ('{chr(tag)}') where {expected} was expected (offset 0)")
    if tag in _OTHER_TAGS:
        return _error(f"tag '{chr(tag)}' ({_OTHER_TAGS[tag]}) at offset 0 is not a Service RPC"
                      f" message; {expected} was expected")
    return _error(f"unknown tag 0x{tag:02x} at offset 0; {expected} was expected")


def decode_message(message: Buffer) -> AgentServiceMessage:
    """Decode an unpadded Service RPC message (``'A'``, ``'P'`` or ``'J'``) strictly."""
    data = bytes(message)
    if not data:
        raise _error("empty, no tag at offset 0")
    tag = data[0]
    if tag == RESPONSE_TAG:
        return AgentServiceResponse(data[1:])
    if tag == REJECTION_TAG:
        return AgentRejection(data[1:])
    if tag != REQUEST_TAG:
        raise tag_error(tag, "'A', 'P' or 'J'")
    queues, signature, at = parse_request_head(data)
    return AgentServiceRequest(queues, signature, data[at:])


# -- the queue URI (strP of SMPQueueUri) ---------------------------------------------------


def _uri_error(message: str, at: int) -> FrameError:
    return FrameError(f"queue URI: {message} at offset {at}")


_B64: Final = re.compile(rb"[A-Za-z0-9_-]+=*")


def _b64_at(raw: bytes, at: int, what: str) -> tuple[bytes, int]:
    """``base64urlP``: a non-empty run of the alphabet, then padding."""
    m = _B64.match(raw, at)
    if not m:
        raise _uri_error(f"{what}: no base64url text", at)
    try:
        return _b64.decode(m.group(), what), m.end()
    except ValueError as exc:
        raise _uri_error(str(exc), at) from None


def _hosts_at(raw: bytes, at: int) -> tuple[list[str], int]:
    """``TransportHosts`` strP: hosts separated by ``,``, each read as simplexmq reads it
    and kept in its canonical form (an IPv6 address in brackets or not, hex in any case)."""
    hosts = []
    while True:
        parsed = host_at(raw, at)
        if parsed is None:
            raise _uri_error("no TransportHost", at)
        canonical, end = parsed
        m = _IPV4.match(raw, at)
        if m and m.end() == end and int(m.group(4)) > 255:
            # attoparsec would wrap it to a byte: refused instead (ours)
            raise _uri_error(f"IPv4 host's last number {int(m.group(4))} is over 255", at)
        hosts.append(canonical)
        at = end
        if raw[at : at + 1] != b",":
            return hosts, at
        at += 1


def _query(raw: bytes) -> list[tuple[bytes, bytes]]:
    """http-types ``parseSimpleQuery``: ``&`` or ``;`` separated, ``+`` is a space."""
    out = []
    for part in re.split(rb"[&;]", raw):
        if not part:
            continue
        name, _, value = part.partition(b"=")
        out.append((unquote_to_bytes(name.replace(b"+", b" ")),
                    unquote_to_bytes(value.replace(b"+", b" "))))
    return out


def _param(query: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    return next((v for k, v in query if k == name), None)


_VERSION_RANGE: Final = re.compile(rb"(\d+)(?:-(\d+))?")


def _parse_uri(text: str) -> SMPQueueInfo:
    if not isinstance(text, str):
        raise TypeError(f"queue URI: expected str, got {type(text).__name__}")
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        at = next(i for i, ch in enumerate(text) if ord(ch) > 255)
        raise _uri_error("a character outside Latin-1", at) from None
    if not raw.startswith(b"smp://"):
        scheme = raw.split(b"://", 1)[0] if b"://" in raw else b""
        why = f"scheme {scheme.decode('latin-1')!r} is not 'smp'" if scheme else "no smp://"
        raise _uri_error(why, 0)
    at = 6
    key_hash, at = _b64_at(raw, at, "key hash")
    if raw[at : at + 1] == b":":
        raise _uri_error("ProtocolServer with basic auth not allowed", at)
    if raw[at : at + 1] != b"@":
        raise _uri_error("expected '@' after the key hash", at)
    hosts, at = _hosts_at(raw, at + 1)
    port = ""
    if raw[at : at + 1] == b":":
        m = re.compile(rb"\d+").match(raw, at + 1)
        if not m:
            raise _uri_error("expected a port after ':'", at + 1)
        port, at = str(int(m.group())), m.end()
    if raw[at : at + 1] != b"/":
        raise _uri_error("expected '/' after the server", at)
    sender_id, at = _b64_at(raw, at + 1, "sender id")
    if raw[at : at + 1] == b"/":
        at += 1
    if raw[at : at + 1] != b"#":
        raise _uri_error("expected '#' after the sender id", at)
    at += 1
    dh: bytes | None = None
    extra_hosts: list[str] = []
    mode: QueueMode | None = None
    if _B64.match(raw, at) and raw[at : at + 1] != b"?":
        dh, after = _b64_at(raw, at, "DH key")
        if after == len(raw):  # the unversioned form: version 1, the key alone
            return _queue_of_uri(1, hosts, port, key_hash, sender_id, dh, None, [], 0)
        at = after
    if raw[at : at + 1] == b"/":
        at += 1
    if raw[at : at + 1] != b"?":
        raise _uri_error("expected '?' before the query", at)
    query_at = at + 1
    stop = re.compile(rb"[ \n]").search(raw, query_at)
    if stop:
        raise _uri_error("a space or line break in the query", stop.start())
    query = _query(raw[query_at:])
    v = _param(query, b"v")
    if v is None:
        raise _uri_error("no qs param v", query_at)
    m = _VERSION_RANGE.fullmatch(v)
    if not m or int(m.group(1)) > 0xFFFF or int(m.group(2) or m.group(1)) > 0xFFFF:
        raise _uri_error(f"v={v.decode('latin-1')!r} is not a version range", query_at)
    v_min, v_max = int(m.group(1)), int(m.group(2) or m.group(1))
    if v_min > v_max:
        raise _uri_error("invalid version range", query_at)
    if dh is None:
        value = _param(query, b"dh")
        if value is None:
            raise _uri_error("no qs param dh", query_at)
        try:
            dh = _b64.decode(value, "dh")
        except ValueError as exc:
            raise _uri_error(str(exc), query_at) from None
    srv = _param(query, b"srv")
    if srv:
        extra_hosts, end = _hosts_at(srv, 0)
        if end != len(srv):
            raise _uri_error("srv: text after the hosts", query_at)
    q = _param(query, b"q")
    if q == b"m":
        mode = "M"
    elif q == b"c":
        mode = "C"
    elif _param(query, b"k") == b"s":
        mode = "M"
    return _queue_of_uri(v_max, hosts, port, key_hash, sender_id, dh, mode, extra_hosts, query_at)


def _queue_of_uri(
    version: int, hosts: list[str], port: str, key_hash: bytes, sender_id: bytes,
    dh: bytes, mode: QueueMode | None, extra_hosts: Iterable[str], at: int,
) -> SMPQueueInfo:
    all_hosts = [*hosts, *extra_hosts]
    if version < SRV_HOSTNAMES_CLIENT_VERSION and len(all_hosts) == 1:
        extra = EXTRA_SMP_SERVER_HOSTS.get(all_hosts[0])
        if extra is not None:
            all_hosts.append(extra)  # updateSMPServerHosts
    try:
        server = SMPServer(tuple(all_hosts), port, key_hash)
        return SMPQueueInfo(version, server, sender_id, dh, mode)
    except FrameError as exc:
        raise _uri_error(str(exc), at) from None

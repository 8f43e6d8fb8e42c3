"""``simplex-rpc demo``: one Service RPC round trip, every step shown.

The demo is deterministic: the requester's Ed25519 key and the two X448
identity keys that make the session's AD come from fixed seeds, so two runs
print the same bytes. It uses the library the way an application does, and
checks every outcome it claims: a signed MCP ``tools/call`` request is sealed
into the 11,106-byte padded block, opened and verified on the responder's
side, answered, and a tampered block and a signature copied into another
session are both refused with :class:`BadSignature`.

Each scenario is computed first (:func:`round_trip`, :func:`through_core`,
:func:`through_chat`, :func:`through_sdk`: plain data), made into a
:class:`Section` of numbered :class:`Step` rows and its ``--json`` object
second (``*_section``, no printing), and one renderer prints them all
(:func:`render`: text, or one JSON document).

Then the same exchange goes through a chat core (:func:`through_core`): a
:class:`~simplex_rpc.testing.CoreSimulator` started on a free loopback port,
a responder core serving an MCP server (through ``McpBridge`` when the
``mcp`` SDK is installed) with the adapter's ``ChatCore.serve``, and a
requester core sending with ``ChatCore.service_request``: the signed
``tools/call`` and its response, the same request unsigned, and refused
ones. Nothing random is printed (no port, link or request id), so the output
stays the same from run to run.

It ends with the MCP SDK's own client (:func:`through_sdk`): ``mcp.Client``
over :class:`~simplex_rpc.mcp.SimplexTransport` calls the demo bot over
Service RPC, then over ``/_call`` with a progress notification.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from .._wire import backend as _backend
from .._wire.agent_block import SMPQueueInfo, SMPServer
from .._wire.envelope import Request, Response, check_request_key
from .._wire.keys import PublicKey, SigningKey, session_tag
from .._wire.padding import PADDED_LENGTH
from ..errors import BadSignature, SimplexRpcError, install_hint
from ..vectors._examples import mcp_tools_call_request, mcp_tools_call_response
from ._options import add_json_option

__all__ = [
    "DEMO_AD_LABELS",
    "ChatDemo",
    "CoreResult",
    "DemoResult",
    "SdkDemo",
    "Section",
    "Step",
    "chat_section",
    "core_section",
    "demo_ad",
    "demo_signing_key",
    "register",
    "render",
    "round_trip",
    "round_trip_section",
    "run_demo",
    "sdk_section",
    "through_chat",
    "through_core",
    "through_sdk",
]

#: Labels hashed into the demo's fixed seeds. Public on purpose: the demo key
#: is a published test key, never one to use for anything real.
_REQUESTER_SEED_LABEL: Final = b"simplex-rpc demo: requester Ed25519 key"
DEMO_AD_LABELS: Final = (
    b"simplex-rpc demo: requester X448 identity key",
    b"simplex-rpc demo: responder X448 identity key",
)
_OTHER_AD_LABELS: Final = (
    b"simplex-rpc demo: requester X448 identity key, another session",
    b"simplex-rpc demo: responder X448 identity key, another session",
)

_HEAD_BYTES: Final = 48


def _tools_call() -> dict[str, Any]:
    """The MCP binding's example ``tools/call`` request (a new copy); the demo adds requestKey."""
    request: dict[str, Any] = mcp_tools_call_request()["request"]
    return request


def _tools_call_result() -> dict[str, Any]:
    """The protocol text's example JSON-RPC response to that request (a new copy)."""
    result: dict[str, Any] = mcp_tools_call_response()["response"]
    return result


def demo_signing_key() -> SigningKey:
    """The demo requester's key: seed = SHA-256 of a fixed label (a public test key)."""
    return SigningKey.from_seed(hashlib.sha256(_REQUESTER_SEED_LABEL).digest())


#: The X448 public keys of the demo's labels, as ``_x448_from_label`` computes them
#: with cryptography. Stored so that ``simplex-rpc demo`` runs on a plain install
#: (cryptography is the ``crypto`` extra); tests/project/test_distribution.py recomputes them.
_KNOWN_X448: Final = {
    DEMO_AD_LABELS[0]: bytes.fromhex(
        "4959eff8aee8b68f769d16f7d5a579291e19b7f72f307c221f227094407f64f9"
        "ae1cbd4bd67d60cc223eed25f34e42b9dc1ac5faeaa0061b"
    ),
    DEMO_AD_LABELS[1]: bytes.fromhex(
        "474775757d206aa2742ace425cc18a43f7547d28c8492ff96e8863786f421da7"
        "76060519b65651ee90a2abd0d514d33528f5dfba03316a20"
    ),
    _OTHER_AD_LABELS[0]: bytes.fromhex(
        "70d4043ce96004d5b713f84c4b46b00cd3cf9e37fa13ff1c003fc0739637d9fe"
        "2bfad11cc407ac1a2acd31bea789f219fd53fbf3ab02802f"
    ),
    _OTHER_AD_LABELS[1]: bytes.fromhex(
        "868a5c87db2c3e0cd6c0a41a464a0a9ca937a5549e3e00ee5177ab54b9d565f9"
        "a40c62afa176505defbf534506f3699895c4c40cbb1cbe6f"
    ),
}


def _x448_from_label(label: bytes) -> bytes:
    """The 56-byte X448 public key whose private key is SHAKE-256(label), by cryptography."""
    try:
        from cryptography.hazmat.primitives.asymmetric import x448
    except ImportError:
        raise SimplexRpcError(
            "demo AD: X448 keys of labels other than the demo's need cryptography: "
            + install_hint("crypto")
        ) from None
    secret = hashlib.shake_256(label).digest(56)
    return x448.X448PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()


def _x448_public(label: bytes) -> bytes:
    """The 56-byte X448 public key whose private key is SHAKE-256(label)."""
    known = _KNOWN_X448.get(label)
    return known if known is not None else _x448_from_label(label)


def demo_reply_queue() -> SMPQueueInfo:
    """The demo requester's reply queue: a fixed SMP queue (client version 4, messaging)
    on an example server, its ids and key derived from fixed labels."""
    dh = bytes.fromhex("302a300506032b656e032100") + hashlib.sha256(b"demo reply dh").digest()
    server = SMPServer(("smp.example.com",), "", hashlib.sha256(b"demo server").digest())
    return SMPQueueInfo(4, server, hashlib.sha256(b"demo sender id").digest()[:24], dh, "M")


def demo_ad(labels: tuple[bytes, bytes] = DEMO_AD_LABELS) -> bytes:
    """A 112-byte AD shaped as the agent's rcAD: two raw X448 keys, the requester's first
    (new for each request) and the address's (rotated with its ratchet keys)."""
    return _x448_public(labels[0]) + _x448_public(labels[1])


@dataclass(slots=True)
class Refusal:
    """What happened when a block that must be refused was opened."""

    what: str
    refused: bool
    error: str | None
    message: str | None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class DemoResult:
    """Every value of the round trip, for rendering or for tests."""

    backend: str
    public_key: PublicKey
    ad: bytes
    request_json: bytes
    tag: bytes
    signature: bytes
    block: bytes
    opened_payload: bytes
    signer: PublicKey | None
    request_key_error: str | None
    response_json: bytes
    response_block: bytes
    response_payload: bytes
    response_value: Any
    unsigned_with_key_error: str | None
    refusals: list[Refusal]

    @property
    def ok(self) -> bool:
        """True when every step did what the protocol says it must."""
        return (
            self.signer == self.public_key
            and self.opened_payload == self.request_json
            and self.request_key_error is None
            and self.response_payload == self.response_json
            and self.unsigned_with_key_error is not None
            and all(r.refused for r in self.refusals)
        )


def _payload_at(block: bytes) -> int:
    """Where a signed request's payload starts in its block: after 'A', the queues, the
    signature (``AgentServiceRequest``)."""
    return 2 + 1 + 1 + len(demo_reply_queue().encode()) + 111


def _try_open(what: str, block: bytes, ad: bytes, **detail: Any) -> Refusal:
    try:
        _backend.active.open_request(block, ad)
    except BadSignature as exc:
        return Refusal(what, True, type(exc).__name__, str(exc), dict(detail))
    return Refusal(what, False, None, None, dict(detail))


def round_trip() -> DemoResult:
    """Run the demo's round trip and return every value it produced."""
    impl = _backend.active
    key = demo_signing_key()
    ad = demo_ad()

    # Requester: the MCP example, naming its key, signed and sealed.
    request = Request(protocol="mcp", request=_tools_call(), request_key=key.public_key)
    request_json = request.to_json()
    tag = session_tag(ad)
    signature = key.sign_request(ad, request_json)
    queue = demo_reply_queue()
    block: bytes = impl.seal_request(request_json, ad, key, reply_queue=queue)

    # Responder: open (which verifies), parse the verified bytes, check requestKey.
    opened = impl.open_request(block, ad)
    parsed = Request.parse(opened.payload)
    problem = check_request_key(parsed, opened.signer)
    problem_text = None if problem is None else f"{problem.code}: {problem.message}"

    # The answer: the protocol text's example response, sealed and opened.
    response_json = Response.success(_tools_call_result()).to_json()
    response_block: bytes = impl.seal_response(response_json)
    response_payload: bytes = impl.open_response(response_block)
    response = Response.parse(response_payload)

    # The same request unsigned: requestKey without a signature is bad_request.
    unsigned = impl.open_request(impl.seal_request(request_json, ad, reply_queue=queue), ad)
    unsigned_problem = check_request_key(Request.parse(unsigned.payload), unsigned.signer)
    unsigned_text = (
        None if unsigned_problem is None else f"{unsigned_problem.code}: {unsigned_problem.message}"
    )

    # One byte flipped inside the payload: the 'a' of "anvil" becomes 'A'.
    at = _payload_at(block) + request_json.index(b'"anvil"') + 1
    tampered = bytearray(block)
    tampered[at] ^= 0x20
    refusals = [
        _try_open(
            "tampered block",
            bytes(tampered),
            ad,
            offset=at,
            before=f"0x{block[at]:02x}",
            after=f"0x{tampered[at]:02x}",
        ),
        _try_open(
            "the same signed block in another session (other AD)",
            block,
            demo_ad(_OTHER_AD_LABELS),
        ),
    ]

    return DemoResult(
        backend=impl.name,
        public_key=key.public_key,
        ad=ad,
        request_json=request_json,
        tag=tag,
        signature=signature,
        block=block,
        opened_payload=opened.payload,
        signer=opened.signer,
        request_key_error=problem_text,
        response_json=response_json,
        response_block=response_block,
        response_payload=response_payload,
        response_value=response.response,
        unsigned_with_key_error=unsigned_text,
        refusals=refusals,
    )


def _hex(data: bytes, limit: int | None = None) -> str:
    if limit is not None and len(data) > limit:
        return data[:limit].hex() + "…"
    return data.hex()


def _fill(block: bytes) -> int:
    return len(block) - 2 - int.from_bytes(block[:2], "big")


@dataclass(slots=True)
class Step:
    """One numbered step: its title and its detail rows (each printed under the title,
    indented to the title's text)."""

    number: int
    title: str
    rows: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Section:
    """What a scenario shows: a title, its steps, whether it went as the protocol says, and
    its ``--json`` object (under ``key``; the round trip's, key None, is the document's
    top level)."""

    title: str
    steps: list[Step]
    ok: bool
    key: str | None
    data: dict[str, Any]


def render(sections: list[Section], *, json_output: bool = False) -> str:
    """The demo's one renderer: the sections as text (each title, then its steps, each
    separated by a blank line, and one closing line), or as one JSON document."""
    ok = all(section.ok for section in sections)
    if json_output:
        document: dict[str, Any] = {}
        for section in sections:
            if section.key is None:
                document |= section.data | {"ok": ok}
            else:
                document[section.key] = section.data
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    lines: list[str] = []
    for section in sections:
        lines += [section.title, ""]
        for step in section.steps:
            head = f"{step.number}. "
            lines += [head + step.title, *(" " * len(head) + row for row in step.rows), ""]
    lines.append("All steps as expected." if ok else "SOMETHING WENT WRONG: see above.")
    return "\n".join(lines) + "\n"


def _round_trip_data(result: DemoResult) -> dict[str, Any]:
    """The round trip's ``--json`` object: a stable, machine-readable summary."""
    block = result.block
    return {
        "ok": result.ok,
        "backend": result.backend,
        "requester": {
            "public_key": result.public_key.encode(),
            "public_key_raw": result.public_key.raw.hex(),
        },
        "ad": result.ad.hex(),
        "ad_length": len(result.ad),
        "request": {
            "json": result.request_json.decode("utf-8"),
            "length": len(result.request_json),
            "session_tag": result.tag.hex(),
            "signature": result.signature.hex(),
        },
        "block": {
            "length": len(block),
            "message_length": int.from_bytes(block[:2], "big"),
            "reply_queue": demo_reply_queue().uri(),
            "fill_length": _fill(block),
            "head": block[:64].hex(),
            "sha256": hashlib.sha256(block).hexdigest(),
        },
        "responder": {
            "verified": result.signer is not None,
            "signer": None if result.signer is None else result.signer.encode(),
            "signer_is_request_key": result.signer == result.public_key,
            "check_request_key": result.request_key_error,
        },
        "response": {
            "json": result.response_json.decode("utf-8"),
            "length": len(result.response_json),
            "block_length": len(result.response_block),
            "block_head": result.response_block[:64].hex(),
            "block_sha256": hashlib.sha256(result.response_block).hexdigest(),
            "opened_equal": result.response_payload == result.response_json,
        },
        "unsigned_with_request_key": result.unsigned_with_key_error,
        "refused": [
            {"what": r.what, "refused": r.refused, "error": r.error, "message": r.message}
            | r.detail
            for r in result.refusals
        ],
    }


def round_trip_section(result: DemoResult) -> Section:
    """Steps 1 to 7: the library's round trip, as data."""
    block = result.block
    message_length = int.from_bytes(block[:2], "big")
    queue = demo_reply_queue()
    q_end = 4 + len(queue.encode())
    at = _payload_at(block)
    pretty_request = json.dumps(json.loads(result.request_json), indent=2, ensure_ascii=False)
    refused = [
        "unsigned request naming a requestKey -> "
        + (result.unsigned_with_key_error or "NOT REFUSED")
    ]
    for refusal in result.refusals:
        where = ""
        if "offset" in refusal.detail:
            where = (
                f" (byte {refusal.detail['offset']}: {refusal.detail['before']}"
                f" -> {refusal.detail['after']}, 'anvil' -> 'Anvil')"
            )
        outcome = f"{refusal.error}: {refusal.message}" if refusal.refused else "NOT REFUSED"
        refused.append(f"{refusal.what}{where} -> {outcome}")
    steps = [
        Step(
            1,
            "Requester key (Ed25519, from a fixed demo seed; the private key is not shown)",
            [
                f"public key    {result.public_key.encode()}",
                "              base64url of the 44-byte X.509 SPKI DER, as the core's signerKey",
                f"raw           {result.public_key.raw.hex()}",
            ],
        ),
        Step(
            2,
            "Session AD (the ratchet's rcAD: two X448 keys, the requester's first; the",
            [
                "requester's is new for each request, the address's rotates with its ratchet keys)",
                f"requester     {result.ad[:56].hex()}",
                f"responder     {result.ad[56:].hex()}",
                f"length        {len(result.ad)} bytes",
            ],
        ),
        Step(
            3,
            "Signed MCP tools/call request (the protocol text's example, with requestKey)",
            [
                *pretty_request.splitlines(),
                f"payload       {len(result.request_json)} bytes of compact JSON, signed as sent",
                f"session tag   {result.tag.hex()}",
                '              SHA3-256("SimpleXService" || AD)',
                f"signature     {result.signature.hex()}",
                "              Ed25519 over session tag || payload",
            ],
        ),
        Step(
            4,
            f"The agent's request, padded: {len(block)} bytes (every request is {PADDED_LENGTH})",
            [
                f"length field  {block[:2].hex()}  = {message_length}-byte message",
                f"tag, count    {block[2:4].hex()}  'A' (AgentServiceRequest), 1 reply queue",
                f"reply queue   {_hex(block[4:q_end], 16)}  ({q_end - 4} bytes)",
                f"              {queue.uri()}",
                f"signed        {block[q_end : q_end + 1].hex()}  '1' (Just RequestSignature)",
                f"key           {block[q_end + 1 : q_end + 2].hex()} +"
                f" {_hex(block[q_end + 2 : q_end + 46], 16)}  (44-byte SPKI DER)",
                f"signature     {block[at - 65 : at - 64].hex()} + {_hex(block[at - 64 : at], 16)}"
                "  (64 bytes)",
                f"payload       {_hex(block[at : 2 + message_length], 24)}",
                f"fill          {_fill(block)} bytes of '#'",
                f"head (hex)    {_hex(block, _HEAD_BYTES)}",
                f"sha256        {hashlib.sha256(block).hexdigest()}",
            ],
        ),
        Step(
            5,
            "Responder opens the block with its AD",
            [
                f"signature     verified; signer"
                f" {result.signer.encode() if result.signer else 'none'}",
                f"payload       {len(result.opened_payload)} bytes, the same bytes that were"
                f" signed: {'yes' if result.opened_payload == result.request_json else 'NO'}",
                "requestKey    "
                + (
                    "equals the signer key (check_request_key: ok)"
                    if result.request_key_error is None
                    else f"refused: {result.request_key_error}"
                ),
            ],
        ),
        Step(
            6,
            "Response (the protocol text's example)",
            [
                f"json          {result.response_json.decode('utf-8')}",
                f"block         {len(result.response_block)} bytes, head"
                f" {_hex(result.response_block, 8)}  (length, 'P' AgentServiceResponse)",
                f"opened        {len(result.response_payload)} bytes, equal to what was sealed:"
                f" {'yes' if result.response_payload == result.response_json else 'NO'}",
                f"result text   {result.response_value['result']['content'][0]['text']}",
            ],
        ),
        Step(7, "What must be refused", refused),
    ]
    return Section(
        f"simplex-rpc demo: one Service RPC round trip (backend: {result.backend})",
        steps,
        result.ok,
        None,
        _round_trip_data(result),
    )


# -- the same exchange through a chat core (the simulator) ---------------------------


@dataclass(slots=True, kw_only=True)
class CoreExchange:
    """One request sent through the simulated chat cores, and what came back."""

    what: str
    signed: bool
    request_key: bool
    signer_seen: str | None
    handler_called: bool
    response: dict[str, Any]

    @property
    def code(self) -> str | None:
        error = self.response.get("error")
        return error.get("code") if isinstance(error, dict) else None


@dataclass(slots=True, kw_only=True)
class CoreResult:
    """The simulator part of the demo: setup answers, exchanges, counters."""

    server: str
    started: bool
    address_has_ratchet_keys: bool
    exchanges: list[CoreExchange]
    stats: dict[str, int]

    @property
    def ok(self) -> bool:
        """True when each exchange had the outcome the protocol requires."""
        if len(self.exchanges) != 4 or not (self.started and self.address_has_ratchet_keys):
            return False
        signed, unsigned, mismatch, other = self.exchanges
        return (
            signed.code is None
            and signed.signer_seen == demo_signing_key().public_key.encode()
            and _result_text(signed.response) == "12 anvils are in stock."
            and unsigned.code is None
            and unsigned.signer_seen is None
            and mismatch.code == "bad_request"
            and mismatch.signer_seen == signed.signer_seen
            and not mismatch.handler_called
            and other.code == "unsupported_protocol"
            and not other.handler_called
            and self.stats.get("duplicate_responses") == 0
        )


def _result_text(response: dict[str, Any]) -> str | None:
    try:
        return str(response["response"]["result"]["content"][0]["text"])
    except (KeyError, IndexError, TypeError):
        return None


def _mcp_handler() -> tuple[str, Any, Any]:
    """The responder's MCP server: the SDK behind McpBridge, or the protocol text's example."""
    try:
        from mcp.server import MCPServer

        from ..mcp import McpBridge
    except ImportError:

        def example(request: Any) -> Response:
            return Response.success(_tools_call_result())

        return "the protocol text's example answer (the mcp SDK is not installed)", example, None
    stock = {"anvil": 12, "hammer": 40}
    server = MCPServer("acme", log_level="WARNING")

    @server.tool(description="Items in stock", structured_output=False)
    def availability(item: str) -> str:
        return f"{stock.get(item, 0)} {item}s are in stock."

    bridge = McpBridge(server)
    return "an MCP SDK server with the tool availability, behind McpBridge", None, bridge


async def through_core() -> CoreResult:
    """Run the exchange through a CoreSimulator on a free loopback port."""
    from ..adapter import ChatCore, ServiceRequest
    from ..testing import CoreSimulator

    described, plain_handler, bridge = _mcp_handler()
    key = demo_signing_key()
    stranger = SigningKey.from_seed(hashlib.sha256(b"simplex-rpc demo: another key").digest())
    called: set[str] = set()

    async def handler(request: ServiceRequest) -> Any:
        called.add(request.request_id)
        if bridge is not None:
            return await bridge.rpc_handler(request)
        return plain_handler(request)

    async with (
        CoreSimulator(port=0) as sim,
        ChatCore.connect(sim.url_for("responder")) as responder,
        ChatCore.connect(sim.url_for("requester")) as requester,
    ):
        started = await responder.start(service_requests=True)
        address = await responder.service_address(1, pq_ratchet=True)
        await requester.start(service_requests=False)
        ready = asyncio.Event()
        serving = asyncio.create_task(responder.serve(1, handler, protocols=["mcp"], ready=ready))
        # What the responder's core reports, as the adapter receives it.
        events = responder.events()
        if bridge is not None:
            await bridge.__aenter__()
        try:
            await ready.wait()
            cases = [
                ("signed, naming its key", key, key.public_key, "mcp"),
                ("unsigned", None, None, "mcp"),
                ("signed, naming another key", key, stranger.public_key, "mcp"),
                ("a protocol the responder does not serve", None, None, "a2a"),
            ]
            exchanges = []
            for what, sign_key, request_key, protocol in cases:
                request = Request(protocol=protocol, request=_tools_call(), request_key=request_key)
                if request_key is not None and request_key != key.public_key:
                    # service_request refuses this before sending (the requester's
                    # MUST); the raw command shows what the responder does with it.
                    assert sign_key is not None
                    cmd = f"/_service_request 1 {address.link} timeout=10"
                    cmd += f" sign_key={sign_key.encode()} {request.to_json().decode()}"
                    answer = await requester.command(cmd, timeout=25)
                    response = Response.parse(json.dumps(answer["responseData"]))
                else:
                    response = await requester.service_request(
                        1, address.link, request, timeout=10, sign_key=sign_key
                    )
                event: dict[str, Any] = {}
                while event.get("type") != "serviceRequest":
                    event = await asyncio.wait_for(anext(events), 10)
                signer = event.get("signerKey")
                exchanges.append(
                    CoreExchange(
                        what=what,
                        signed=sign_key is not None,
                        request_key=request_key is not None,
                        signer_seen=signer if isinstance(signer, str) else None,
                        handler_called=event.get("requestId") in called,
                        response=response.to_dict(),
                    )
                )
        finally:
            events.close()
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
            if bridge is not None:
                await bridge.__aexit__(None, None, None)
        stats = {
            "requests": sim.stats.requests,
            "delivered": sim.stats.delivered,
            "responses": sim.stats.responses,
            "duplicate_responses": sim.stats.duplicate_responses,
        }
    return CoreResult(
        server=described,
        started=started,
        address_has_ratchet_keys="&rk=" in address.full_link,
        exchanges=exchanges,
        stats=stats,
    )


def core_section(core: CoreResult) -> Section:
    """Steps 8 to 10: the exchange through the simulated chat cores, as data."""
    exchanges: list[str] = []
    for n, exchange in enumerate(core.exchanges, start=1):
        signer = exchange.signer_seen or "none"
        if exchange.code is None:
            outcome = f"response: {_result_text(exchange.response)}"
        else:
            message = exchange.response["error"].get("message", "")
            outcome = f"error {exchange.code}: {message}"
        handled = "called" if exchange.handler_called else "not called (refused before it)"
        exchanges += [
            f"{chr(ord('a') + n - 1)}. {exchange.what}",
            f"   serviceRequest signerKey  {signer}",
            f"   handler                   {handled}",
            f"   {outcome}",
        ]
    stats = core.stats
    steps = [
        Step(
            8,
            "Responder core: /_start main=on service_requests=on -> "
            + ("chatStarted" if core.started else "chatRunning"),
            [
                "/_address 1 pq_ratchet=on -> a contact address "
                + (
                    "with ratchet keys" if core.address_has_ratchet_keys else "WITHOUT ratchet keys"
                ),
                f"serving mcp with {core.server}",
            ],
        ),
        Step(
            9,
            "Requester core: /_service_request 1 <address> timeout=10 [sign_key=<redacted>] <json>",
            exchanges,
        ),
        Step(
            10,
            f"The simulator relayed {stats['delivered']} of {stats['requests']} requests and"
            f" accepted {stats['responses']} responses, {stats['duplicate_responses']} duplicate",
        ),
    ]
    data = {
        "ok": core.ok,
        "transport": "CoreSimulator on a free loopback port, two cores, the adapter's ChatCore",
        "server": core.server,
        "responder_started_with_service_requests": core.started,
        "address_has_ratchet_keys": core.address_has_ratchet_keys,
        "exchanges": [
            {
                "what": e.what,
                "signed": e.signed,
                "request_key": e.request_key,
                "signer_key_reported_by_core": e.signer_seen,
                "handler_called": e.handler_called,
                "response": e.response,
            }
            for e in core.exchanges
        ],
        "stats": core.stats,
    }
    return Section(
        "Through a chat core: the adapter over the CoreSimulator (loopback WebSocket, free port)",
        steps,
        core.ok,
        "core",
        data,
    )


# -- an MCP call over /_call in a group (the chat transport) ------------------------


@dataclass(slots=True, kw_only=True)
class ChatDemo:
    """The chat transport part of the demo: one ``/_call mcp`` in a group and its replies."""

    server: str
    command: str
    replies: list[dict[str, Any]]
    quoted_command: bool

    @property
    def ok(self) -> bool:
        """A progress notification, then the result that ends the answer, both quoting."""
        if len(self.replies) != 2 or not self.quoted_command:
            return False
        note, answer = (r["message"] for r in self.replies)
        return (
            isinstance(note, dict)
            and note.get("method") == "notifications/progress"
            and isinstance(answer, dict)
            and answer.get("id") == 2
            and self.replies[1]["ends"]
            and all(r["sender"] == "acme" for r in self.replies)
        )


def _catalog_call() -> dict[str, Any]:
    from .. import mcp

    params = {"name": "catalog", "arguments": {}, "_meta": {"progressToken": "p-1"}}
    return mcp.make_request("tools/call", params, id=2)


def _chat_handler() -> tuple[str, Any]:
    """The bot's MCP server for /_call: the SDK behind McpBridge, or a plain handler."""
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver import Context

        from ..mcp import McpBridge
    except ImportError:

        async def plain(call: Any, send: Any) -> str:
            note: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/progress"}
            note["params"] = {"progressToken": "p-1", "progress": 0, "total": 1}
            await send(json.dumps(note))
            result = {"content": [{"type": "text", "text": "anvil, hammer"}]}
            return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": result})

        return "a handler of its own (the mcp SDK is not installed)", plain
    server = MCPServer("acme", log_level="WARNING")

    async def catalog(ctx: Any) -> str:
        await ctx.report_progress(0, 1, "listing")
        return "anvil, hammer"

    # The SDK reads the annotations to find the Context parameter; this module's
    # annotations are strings (postponed), so give it the class itself.
    catalog.__annotations__ = {"ctx": Context, "return": str}
    server.tool(description="The catalog", structured_output=False)(catalog)

    return "an MCP SDK server with the tool catalog, behind McpBridge", McpBridge(server)


async def through_chat() -> ChatDemo:
    """One ``/_call mcp`` with a mention in a group of three simulated cores."""
    from ..adapter import ChatCore
    from ..testing import CoreSimulator

    server, handler = _chat_handler()
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("customer")) as customer,
        ChatCore.connect(sim.url_for("acme")) as acme,
        ChatCore.connect(sim.url_for("helper")) as helper,
    ):
        for core in (customer, acme, helper):
            await core.start(service_requests=False)
        ids = sim.create_group("Acme customers", "customer", ["acme", "helper"])
        group = ids[("customer", 1)]
        if hasattr(handler, "__aenter__"):
            await handler.__aenter__()
        ready = asyncio.Event()
        serving = asyncio.create_task(acme.serve_calls(1, {"mcp": handler}, ready=ready))
        events = customer.events()
        try:
            await ready.wait()
            replies = await customer.call(
                f"#{group}", "mcp", _catalog_call(), member="acme", wait=20
            )
            quoted = []
            while not events._queue.empty():
                event = events._queue.get_nowait()
                for item in event.get("chatItems", []) if isinstance(event, dict) else []:
                    quoted.append((item["chatItem"].get("quotedItem") or {}).get("itemId"))
        finally:
            events.close()
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            if hasattr(handler, "__aexit__"):
                await handler.__aexit__(None, None, None)
    from ..chat import format_call

    return ChatDemo(
        server=server,
        command=format_call("mcp", _catalog_call(), member="acme"),
        replies=[
            {"sender": str(r.sender), "text": r.text, "message": r.message, "ends": r.ends}
            for r in replies
        ],
        quoted_command=len(quoted) == len(replies) and len(set(quoted)) == 1 and None not in quoted,
    )


def chat_section(demo: ChatDemo) -> Section:
    """Steps 11 and 12: one ``/_call`` in a group, as data."""
    replies = []
    for n, reply in enumerate(demo.replies, start=1):
        end = "  <- ends the answer" if reply["ends"] else ""
        replies.append(f"{n}. {reply['sender']}: {reply['text']}{end}")
    steps = [
        Step(
            11,
            "Group 'Acme customers': customer (owner), acme and helper; acme answers /_call"
            f" mcp with {demo.server}",
            [f"customer sends, mentioning acme:  {demo.command}"],
        ),
        Step(
            12,
            "Replies, each quoting the command"
            + (" (checked)" if demo.quoted_command else " (NOT all quoting it)"),
            replies,
        ),
    ]
    data = {
        "ok": demo.ok,
        "server": demo.server,
        "command": demo.command,
        "replies": demo.replies,
        "each_reply_quotes_the_command": demo.quoted_command,
    }
    return Section(
        "Over the chat transport: /_call in a group of three simulated cores",
        steps,
        demo.ok,
        "chat",
        data,
    )


# -- the MCP SDK's own client through SimplexTransport --------------------------------


@dataclass(slots=True, kw_only=True)
class SdkDemo:
    """The last part of the demo: ``mcp.Client`` calling the demo bot through SimplexTransport.

    ``installed`` is False without the ``mcp`` SDK (the part is then skipped).
    """

    installed: bool
    revision: str = ""
    tools: list[str] = field(default_factory=list)
    rpc_answer: str = ""
    chat: str = ""
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    chat_answer: str = ""

    @property
    def ok(self) -> bool:
        """Both calls answered as the bot answers; the progress arrived before the result."""
        if not self.installed:
            return True
        return (
            self.revision == "2026-07-28"
            and self.tools == ["availability", "catalog"]
            and self.rpc_answer == "12 anvils are in stock."
            and self.progress == [(0.0, 1.0, "listing")]
            and self.chat_answer == "anvil, hammer"
        )


def _sdk_server() -> Any:
    """The demo bot: the SDK server with availability and catalog (catalog reports progress)."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context

    server = MCPServer("acme", log_level="WARNING")

    @server.tool(description="Items in stock", structured_output=False)
    def availability(item: str) -> str:
        return f"{ {'anvil': 12, 'hammer': 40}.get(item, 0) } {item}s are in stock."

    async def catalog(ctx: Any) -> str:
        await ctx.report_progress(0, 1, "listing")
        return "anvil, hammer"

    # As in _chat_handler: the SDK finds the Context parameter by its annotation.
    catalog.__annotations__ = {"ctx": Context, "return": str}
    server.tool(description="The catalog", structured_output=False)(catalog)
    return server


def _content_text(result: Any) -> str:
    content = getattr(result, "content", None) or [None]
    return str(getattr(content[0], "text", ""))


async def through_sdk() -> SdkDemo:
    """``mcp.Client(SimplexTransport(...))`` over Service RPC, then over ``/_call``."""
    try:
        from mcp import Client

        from ..mcp import McpBridge, SimplexTransport
    except ImportError:
        return SdkDemo(installed=False)
    from ..adapter import ChatCore
    from ..testing import CoreSimulator

    demo = SdkDemo(installed=True)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        demo.progress.append((progress, total, message))

    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("customer")) as customer,
        ChatCore.connect(sim.url_for("acme")) as acme,
        McpBridge(_sdk_server(), conversation_tools={"catalog"}) as bridge,
    ):
        await acme.start(service_requests=True)
        await customer.start(service_requests=False)
        link = (await acme.service_address(1)).link
        contact, _ = sim.connect("customer", "acme")
        served, calls_served = asyncio.Event(), asyncio.Event()
        tasks = [
            asyncio.create_task(acme.serve(1, bridge.rpc_handler, protocols=["mcp"], ready=served)),
            asyncio.create_task(acme.serve_calls(1, {"mcp": bridge}, ready=calls_served)),
        ]
        try:
            await served.wait()
            await calls_served.wait()
            async with Client(SimplexTransport(customer, 1, link, timeout=20)) as client:
                demo.revision = client.protocol_version
                demo.tools = [tool.name for tool in (await client.list_tools()).tools]
                answer = await client.call_tool("availability", {"item": "anvil"})
                demo.rpc_answer = _content_text(answer)
            demo.chat = f"@{contact}"
            transport = SimplexTransport(customer, 1, demo.chat, via="chat", timeout=20)
            async with Client(transport) as client:
                answer = await client.call_tool("catalog", {}, progress_callback=on_progress)
                demo.chat_answer = _content_text(answer)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return demo


def sdk_section(demo: SdkDemo) -> Section:
    """Steps 13 and 14: the MCP SDK's own client through SimplexTransport, as data."""
    if not demo.installed:
        steps = [Step(13, f"Skipped: the mcp SDK is not installed ({install_hint('mcp')})")]
    else:
        steps = [
            Step(
                13,
                "mcp.Client(SimplexTransport(core, 1, <acme's address>)): each request is one"
                " Service RPC request",
                [
                    f"server/discover: revision {demo.revision}; tools/list:"
                    f" {', '.join(demo.tools)}",
                    f"tools/call availability {{item: anvil}} -> {demo.rpc_answer!r}",
                ],
            ),
            Step(
                14,
                f"mcp.Client(SimplexTransport(core, 1, {demo.chat!r}, via='chat')): /_call mcp in"
                " the direct chat (catalog needs a conversation)",
                [
                    *(
                        f"progress callback: {progress:g} of {total:g}, {message!r}"
                        for progress, total, message in demo.progress
                    ),
                    f"tools/call catalog -> {demo.chat_answer!r}",
                ],
            ),
        ]
    data = {
        "ok": demo.ok,
        "installed": demo.installed,
        "revision": demo.revision,
        "tools": demo.tools,
        "rpc_answer": demo.rpc_answer,
        "chat": demo.chat,
        "progress": [list(p) for p in demo.progress],
        "chat_answer": demo.chat_answer,
    }
    return Section(
        "The MCP SDK's own client (mcp.Client) through SimplexTransport",
        steps,
        demo.ok,
        "sdk_client",
        data,
    )


def run_demo(*, json_output: bool = False, out: TextIO | None = None) -> int:
    """Run the demo, print it (text, or with ``json_output`` a JSON summary).

    The library's round trip (steps 1 to 7), then the same exchange through
    the simulated chat cores (steps 8 to 10), one ``/_call`` in a group
    (steps 11 and 12), and the MCP SDK's own client through SimplexTransport
    (steps 13 and 14): each scenario runs, then its section (data) is made, and
    :func:`render` prints them all. Returns 0 when every step behaved as the
    protocol requires, else 1.
    """
    sections = [
        round_trip_section(round_trip()),
        core_section(asyncio.run(through_core())),
        chat_section(asyncio.run(through_chat())),
        sdk_section(asyncio.run(through_sdk())),
    ]
    (sys.stdout if out is None else out).write(render(sections, json_output=json_output))
    return 0 if all(section.ok for section in sections) else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(json_output=args.json)


def register(subparsers: Any) -> None:
    """Add ``demo`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "demo",
        help="show one Service RPC round trip, step by step",
        description="One signed, padded Service RPC round trip with fixed demo keys:"
        " every step shown, and a tampered block and a copied signature refused.",
    )
    add_json_option(p, "print a machine-readable summary")
    p.set_defaults(handler=_cmd_demo)

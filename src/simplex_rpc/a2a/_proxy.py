"""The A2A proxy: a local A2A JSON-RPC HTTP server in front of a bot over SimpleX.

``simplex-rpc a2a-proxy`` lets any A2A client reach a SimpleX bot. Two SDK
pieces meet in this process (a proxy is "an SDK *server* in front of our
client transport"):

* a2a-sdk's own server app faces the client: the Starlette routes of
  ``create_agent_card_routes`` (``GET /.well-known/agent-card.json``) and
  ``create_jsonrpc_routes`` (``POST /``, with server-sent events for the
  streaming methods), under uvicorn;
* the transport of ``register_client`` (:class:`SimplexA2aTransport`) faces
  the bot, behind a :class:`ForwardingHandler`: each JSON-RPC request is one
  call of the transport, streams included.

The A2A service parameters among the HTTP headers (``A2A-Version``,
``A2A-Extensions``, ``Authorization`` and the headers the card's API key
schemes name) become ``a2a-service-parameters``; the bot checks them, so a
version it does not serve is its VersionNotSupportedError.

The card is the bot's, with one JSON-RPC interface at the proxy's URL:
read from the bot with ``GetExtendedAgentCard`` in the conversation
(``--via chat``); over Service RPC, which serves one-shot ``SendMessage``
only, it is made from the address's declarations (name, A2A versions) and
says ``streaming: false``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from a2a.client.card_resolver import parse_agent_card
from a2a.server.context import ServerCallContext
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import TransportProtocol
from google.protobuf import json_format  # type: ignore[import-untyped]
from starlette.applications import Starlette

from .._bindings import INVALID_PARAMS, INVALID_REQUEST, error_response, invalid_request
from .._bindings import a2a as binding
from .._listener import ListenerPolicy, Stopper, guard, listen, server_options, uvicorn_server
from .._wire import strict_json as _json
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, redact
from ..adapter import CallRefused, ChatCore
from ..errors import ChatCoreError, SimplexRpcError
from ._client import SimplexA2aTransport
from ._gateway import ForwardingHandler

__all__ = [
    "PROXY_VIAS",
    "ProxyError",
    "ProxySettings",
    "bot_card",
    "build_app",
    "check_message",
    "proxy_card",
    "run_proxy",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.a2a.proxy"))

ProxyVia = Literal["rpc", "chat", "auto"]
PROXY_VIAS: Final[tuple[ProxyVia, ...]] = ("rpc", "chat", "auto")

# Service parameters that A2A defines as HTTP headers (A2A section 9.2), by their
# lower-case names as Starlette gives them.
_A2A_PARAMETERS: Final = {
    "a2a-version": "A2A-Version",
    "a2a-extensions": "A2A-Extensions",
    "authorization": "Authorization",
}


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """What ``a2a-proxy`` was asked for: the bot, the way to it and the local address."""

    user_id: int
    target: str
    via: ProxyVia = "rpc"
    member: str | None = None
    sign_key: SigningKey | None = None
    timeout: float = 180.0
    host: str = "127.0.0.1"
    port: int = 0
    listener: ListenerPolicy | None = None
    """What the listener accepts (token, allowed names, caps); None: the defaults at
    ``host``:``port``."""

    def __repr__(self) -> str:
        signed = "signed" if self.sign_key is not None else "unsigned"
        return f"ProxySettings({self.target!r}, via={self.via!r}, {signed})"


def _parameter_names(card: AgentCard) -> dict[str, str]:
    """The headers that are service parameters: A2A's and the card's API key headers."""
    names = dict(_A2A_PARAMETERS)
    for scheme in card.security_schemes.values():
        if scheme.HasField("api_key_security_scheme"):
            key = scheme.api_key_security_scheme
            if key.location.lower() == "header" and key.name:
                names[key.name.lower()] = key.name
    return names


def _http_parameters(card: AgentCard) -> Callable[[ServerCallContext], dict[str, str]]:
    names = _parameter_names(card)

    def pick(context: ServerCallContext) -> dict[str, str]:
        headers = context.state.get("headers")
        if not isinstance(headers, dict):
            return {}
        return {
            names[str(name).lower()]: str(value)
            for name, value in headers.items()
            if str(name).lower() in names
        }

    return pick


def proxy_card(
    card: AgentCard, url: str, versions: tuple[str, ...], *, streaming: bool
) -> AgentCard:
    """The bot's card as the proxy serves it: one JSON-RPC interface per A2A version,
    at ``url``; no push notifications (a conversation delivers every update)."""
    out = AgentCard()
    out.CopyFrom(card)
    del out.supported_interfaces[:]
    for version in versions:
        out.supported_interfaces.append(
            AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=version
            )
        )
    out.capabilities.streaming = streaming and card.capabilities.streaming
    out.capabilities.push_notifications = False
    out.capabilities.extended_agent_card = False
    # A2A 1.0 requires version and skills (section 5.7); a bot's card without them is
    # completed, so that every client (and the SDK, which warns) takes the proxy's.
    if not out.version:
        out.version = UNKNOWN_VERSION
    if not out.skills:
        out.skills.append(_message_skill(out.name or "the bot", (), ()))
    return out


UNKNOWN_VERSION: Final = "unknown"
"""The card's ``version`` when the bot's own is not known (over Service RPC its card
cannot be asked for)."""


def _message_skill(name: str, versions: tuple[str, ...], serves: Sequence[str]) -> AgentSkill:
    """The one skill a proxy's card can state from what the address declares: messages
    to the bot, with its A2A versions and the peer types it serves as tags."""
    said = f" (A2A {', '.join(versions)})" if versions else ""
    return AgentSkill(
        id="message",
        name="Message",
        description=f"Send a message to {name} over SimpleX{said}",
        tags=["simplex", *serves],
        input_modes=["text/plain"],
        output_modes=["text/plain"],
    )


def _simplex_versions(card: AgentCard) -> tuple[str, str | None]:
    """The bot's SimpleX interface in its card: (link, version) or ("", None)."""
    for interface in card.supported_interfaces:
        if interface.protocol_binding == binding.BINDING_URI:
            return interface.url, interface.protocol_version or "1.0"
    return "", None


async def _card_in_chat(core: ChatCore, settings: ProxySettings) -> AgentCard:
    """The bot's card: GetExtendedAgentCard in the conversation (public card)."""
    request = binding.make_request("GetExtendedAgentCard", {}, id=str(uuid.uuid4()))
    try:
        async for reply in core.call_stream(
            settings.target,
            binding.PROTOCOL,
            request,
            member=settings.member,
            wait=settings.timeout,
            user_id=settings.user_id,
        ):
            body = reply.message
            if body is None or body.get("id") != request["id"]:
                continue
            result = body.get("result")
            if isinstance(result, dict):
                try:
                    return parse_agent_card(result)
                except Exception as exc:  # the SDK's ParseError and what its fixes raise
                    raise ProxyError(
                        f"the bot's Agent Card does not parse: {redact(str(exc))[:200]}"
                    ) from None
            error = body.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            raise ProxyError(
                f"the bot answered GetExtendedAgentCard with an error: {str(message)[:200]}"
            )
    except (CallRefused, ChatCoreError) as exc:
        raise ProxyError(
            f"could not ask {settings.target} for its card: {redact(str(exc))}"
        ) from None
    raise ProxyError(
        f"{settings.target} did not answer GetExtendedAgentCard within {settings.timeout:g} s"
    )


class ProxyError(SimplexRpcError):
    """The proxy cannot serve the bot: no card, a wrong target or an address that declares
    nothing it can use."""


async def _card_over_rpc(core: ChatCore, settings: ProxySettings, *, auto: bool) -> AgentCard:
    """A card for a bot reached over Service RPC, made from its address's declarations.

    Service RPC serves one-shot SendMessage only, so the bot's own card cannot
    be asked for there: the name is the address's profile name, the versions
    its declared A2A versions (1.0 when it declares none).
    """
    name = ""
    versions: tuple[str, ...] = ()
    serves: Sequence[str] = ()
    try:
        declared = await core.link_declarations(settings.user_id, settings.target)
    except ChatCoreError as exc:
        if auto:
            raise ProxyError(
                f"--via auto: could not read what the address declares: {redact(str(exc))}"
            ) from None
        log.info("the address's declarations could not be read: %s", str(exc))
    else:
        entry = declared.protocols.get(binding.PROTOCOL)
        if auto and (entry is None or "rpc" not in entry.transports):
            what = "does not declare a2a" if entry is None else "does not declare a2a over rpc"
            raise ProxyError(
                f"--via auto: the address {what} (transports.rpc); connect to the bot"
                " and use --via chat with the contact's ChatRef"
            )
        name = declared.name or ""
        serves = declared.serves or ()
        if entry is not None:
            versions = tuple(v for v in entry.versions if binding._major_minor(v) == v)
    card = AgentCard(
        name=name or "SimpleX bot",
        description="A bot over SimpleX, reached through simplex-rpc a2a-proxy",
        version=UNKNOWN_VERSION,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    card.skills.append(_message_skill(name or "the bot", versions, serves))
    for version in versions or ("1.0",):
        card.supported_interfaces.append(
            json_format.ParseDict(
                binding.agent_card_interface(settings.target, version), AgentInterface()
            )
        )
    return card


async def bot_card(core: ChatCore, settings: ProxySettings) -> AgentCard:
    """The bot's card, as the way to it allows (see the module's docstring)."""
    if settings.via == "chat":
        return await _card_in_chat(core, settings)
    return await _card_over_rpc(core, settings, auto=settings.via == "auto")


def transport_for(core: ChatCore, settings: ProxySettings, card: AgentCard) -> SimplexA2aTransport:
    """The transport of ``register_client`` for the bot of ``card``."""
    link, version = _simplex_versions(card)
    if settings.via == "chat":
        if not link:
            raise ProxyError(
                "the bot's Agent Card lists no SimpleX interface (protocolBinding"
                f" {binding.BINDING_URI}): its contact address link is unknown"
            )
        return SimplexA2aTransport(
            core,
            settings.user_id,
            link,
            card,
            version=version or "1.0",
            sign_key=settings.sign_key,
            timeout=settings.timeout,
            chat=settings.target,
            member=settings.member,
            via="chat",
        )
    return SimplexA2aTransport(
        core,
        settings.user_id,
        settings.target,
        card,
        version=version or "1.0",
        sign_key=settings.sign_key,
        timeout=settings.timeout,
    )


def _versions(card: AgentCard) -> tuple[str, ...]:
    found = [
        i.protocol_version or "1.0"
        for i in card.supported_interfaces
        if i.protocol_binding == binding.BINDING_URI
    ]
    return tuple(dict.fromkeys(found)) or ("1.0",)


def build_app(card: AgentCard, transport: SimplexA2aTransport) -> Any:
    """The SDK's card and JSON-RPC routes, with the forwarding handler over ``transport``
    (an ASGI app: a request without ``A2A-Version`` gets an error that names the header)."""
    handler = ForwardingHandler(
        transport,
        card,
        parameters=_http_parameters(card),
        scoped=False,
        push=True,  # the bot answers them itself (PushNotificationNotSupportedError)
        what="the SimpleX bot",
    )
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    return _version_header_named(app, _versions(card))


_VERSION_NOT_SUPPORTED: Final = -32009
"""A2A's ``VersionNotSupportedError`` (A2A section 5.4)."""


def _version_header_named(app: Any, versions: tuple[str, ...]) -> Any:
    """``app``, where a JSON-RPC POST without the ``A2A-Version`` header is answered with
    an error that names the header.

    A2A section 3.6 reads a missing ``A2A-Version`` as 0.3, and the SDK answers
    "version '0.3' is not supported": a version the caller never sent. The answer
    is the same error (``-32009``), worded for the caller who forgot the header.
    """
    wanted = ", ".join(versions)

    async def named(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or any(
            key.lower() == b"a2a-version" for key, _ in scope["headers"]
        ):
            await app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            parsed = _json.loads(body)
        except _json.JsonError:
            parsed = None
        request_id = parsed.get("id") if isinstance(parsed, dict) else None
        error = error_response(
            request_id,
            _VERSION_NOT_SUPPORTED,
            f"the request has no A2A-Version header, which A2A reads as version 0.3; this"
            f" agent speaks A2A {wanted}: send the header 'A2A-Version: {versions[-1]}'",
        )
        payload = _json.dumps(error)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return named


def check_message(message: object) -> tuple[int, str] | None:
    """Why a POSTed body is not an A2A JSON-RPC request the SDK can take, or None.

    The envelope (``jsonrpc``, ``id``, ``method``, ``params``) and, for a method
    the SDK knows, ``params`` parsed as its protobuf request, as the SDK will.
    Answered here, a malformed request is one WARNING line and a JSON-RPC error
    that names what is wrong, not the SDK's traceback at ERROR and Python's
    text of the exception (issue 32, item 9).
    """
    problem = invalid_request(message, allow_null_id=True)
    if problem is not None:
        return INVALID_REQUEST, f"Invalid Request: {problem}"
    assert isinstance(message, dict)
    method = message["method"]
    model = JsonRpcDispatcher.METHOD_TO_MODEL.get(method)
    if model is None:
        return None  # the SDK answers MethodNotFound (-32601)
    try:
        json_format.ParseDict(message.get("params", {}), model(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        return INVALID_PARAMS, f"Invalid params for {method}: {str(exc)[:200]}"
    except Exception:  # what protobuf raises on input it does not expect
        return INVALID_PARAMS, f"Invalid params for {method}: they do not parse"
    return None


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


async def run_proxy(
    core: ChatCore,
    settings: ProxySettings,
    *,
    on_ready: Callable[[str], None] | None = None,
    stopper: Stopper | None = None,
) -> None:
    """Serve the proxy until cancelled: read the card, listen, print ``listening: URL``.

    The SDK's app behind the listener's guard (``simplex_rpc._listener``:
    ``Host``, ``Origin``, token, ``Content-Type``, body size and time, strict
    JSON, :func:`check_message`), under uvicorn with the listener's connection
    cap and header timeout. An address other machines reach without a token, or
    one that cannot be bound, raises :class:`~simplex_rpc._listener.ListenerError`.
    ``stopper`` asks for uvicorn's graceful shutdown (the process's signals are the
    caller's: uvicorn installs none).
    """
    import uvicorn

    policy = settings.listener or ListenerPolicy(settings.host, settings.port)
    card = await bot_card(core, settings)
    transport = transport_for(core, settings, card)
    sock, policy = listen(policy)
    url = _url(sock)
    served = proxy_card(card, f"{url}/", _versions(card), streaming=settings.via == "chat")
    # The SDK answers a JSON-RPC error with HTTP 200, and so does the guard.
    app = guard(
        build_app(served, transport),
        policy,
        check=check_message,
        rpc_error_status=200,
        allow_null_id=True,
    )
    # In-flight streams get 5 s to end when the proxy stops (Ctrl-C), then are cut.
    config = uvicorn.Config(
        app, lifespan="off", timeout_graceful_shutdown=5, **server_options(policy)
    )
    server = uvicorn_server(config, stopper)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
                raise ProxyError("the HTTP server stopped before it was ready")
            await asyncio.sleep(0.01)
        print(f"listening: {url}", flush=True)
        if on_ready is not None:
            on_ready(url)
        await task
    finally:
        if not task.done():
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sock.close()

"""The A2A gateway: an existing A2A agent, at its JSON-RPC URL, served over SimpleX.

The role *gateway* of both bindings (see the package's docstring).
:func:`gateway` reads the agent's card, picks its JSON-RPC interface of A2A
1.x and serves it behind an :class:`A2aBridge` through a
:class:`~._forward.ForwardingHandler` over the SDK's own ``JsonRpcTransport``;
the operator's ``--header`` credential goes to the origin of ``--a2a-url``
only. :func:`module_bridge` serves an agent written with the SDK in process
(``--a2a-module``). Either way the card gains the SimpleX interface
(:func:`with_simplex_interface`).
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Final

import httpx
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.errors import A2AClientError
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.tenant_decorator import TenantTransportDecorator
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from google.protobuf import json_format  # type: ignore[import-untyped]

from .._bindings import a2a as binding
from .._wire.redact import RedactingLogger
from ..errors import SimplexRpcError
from ._bridge import DEFAULT_RPC_DEADLINE, A2aBridge
from ._forward import ForwardingHandler, ParameterPicker, reason_of, shown

__all__ = [
    "DEFAULT_RPC_DEADLINE",
    "GatewayError",
    "card_url",
    "gateway",
    "module_bridge",
    "served_versions",
    "with_simplex_interface",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.a2a.gateway"))

# Headers that frame the HTTP request itself: the in-memory request of the bridge
# has its own content-type, and a caller's service parameter must not rewrite the
# gateway's request to the upstream (RFC 9110 section 7.6.1 and the fields httpx sets).
_FRAMING: Final = frozenset(
    {
        "accept",
        "accept-encoding",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

# -- the upstream: its card, its versions, its JSON-RPC interface -----------------------------


class GatewayError(SimplexRpcError):
    """The upstream agent cannot be fronted: its card is unreadable or serves no JSON-RPC 1.x."""


def _origin(url: str) -> tuple[str, str, int | None]:
    """The origin of ``url`` (RFC 6454): scheme, host and port, the default port made
    explicit; where the operator's credential may go."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # no origin matches a URL whose port is not a number
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def card_url(url: str) -> tuple[str, str]:
    """The base URL and the card path for ``--a2a-url``: the URL itself when its
    path ends in ``.json``, else the well-known URI under it (A2A section 8.2)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GatewayError(f"--a2a-url: {shown(url)[:200]!r} is not an http or https URL")
    if parts.path.endswith(".json"):
        return url, "/"  # A2ACardResolver: "Use '/' for an empty path"
    return url, AGENT_CARD_WELL_KNOWN_PATH


def _jsonrpc_interfaces(card: AgentCard) -> list[tuple[AgentInterface, str]]:
    """The card's JSON-RPC interfaces of A2A 1.x, with their versions in Major.Minor."""
    out: list[tuple[AgentInterface, str]] = []
    for interface in card.supported_interfaces:
        if interface.protocol_binding != TransportProtocol.JSONRPC:
            continue
        version = binding._major_minor(interface.protocol_version or "1.0")
        # The binding is of A2A 1.0 and the SDK's JSON-RPC server serves 1.x.
        if version is not None and version.split(".")[0] == "1":
            out.append((interface, version))
    return out


def served_versions(card: AgentCard) -> tuple[str, ...]:
    """The A2A versions (Major.Minor) the upstream serves over JSON-RPC, in the card's order."""
    return tuple(dict.fromkeys(version for _, version in _jsonrpc_interfaces(card)))


def with_simplex_interface(card: AgentCard, link: str, versions: Iterable[str]) -> AgentCard:
    """A copy of ``card`` with the SimpleX interface first (``agent_card_interface``).

    Push notifications are off (the bot answers them
    PushNotificationNotSupportedError), and so is the extended card (the bot
    answers GetExtendedAgentCard with this public card).
    """
    out = AgentCard()
    out.CopyFrom(card)
    simplex = [
        json_format.ParseDict(binding.agent_card_interface(link, v), AgentInterface())
        for v in versions
    ]
    others = [i for i in card.supported_interfaces if i.protocol_binding != binding.BINDING_URI]
    del out.supported_interfaces[:]
    out.supported_interfaces.extend([*simplex, *others])
    out.capabilities.push_notifications = False
    out.capabilities.extended_agent_card = False
    return out


def _service_parameters(operator: frozenset[str]) -> ParameterPicker:
    """The caller's service parameters: the bridge's request headers, less HTTP framing
    and less the names the operator set with --header (those are the operator's)."""

    def pick(context: ServerCallContext) -> dict[str, str]:
        headers = context.state.get("headers")
        if not isinstance(headers, Mapping):
            return {}
        return {
            str(name): str(value)
            for name, value in headers.items()
            if str(name).lower() not in _FRAMING and str(name).lower() not in operator
        }

    return pick


@contextlib.asynccontextmanager
async def gateway(
    url: str,
    link: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    rpc_deadline: float | None = DEFAULT_RPC_DEADLINE,
    connect_timeout: float = 10.0,
    follow_card_url: bool = False,
) -> AsyncIterator[A2aBridge]:
    """An :class:`A2aBridge` in front of the A2A agent at ``url`` (its JSON-RPC binding).

    The card is read from ``url`` (a ``.json`` URL) or from its well-known URI;
    ``link`` is the bot's contact address link, for the SimpleX interface.
    ``headers`` (the operator's credential) go with every request to the origin
    of ``url`` (scheme, host and port), the card's included, and to no other:
    they reach no log. When the card puts its JSON-RPC interface at another
    origin and ``headers`` are given, the gateway refuses to start
    (:class:`GatewayError`) unless ``follow_card_url``, which uses that
    interface without them; either way the choice is logged. Raises
    :class:`GatewayError` when the card cannot be read or lists no JSON-RPC
    interface of A2A 1.x.
    """
    base, path = card_url(url)
    for name, value in headers:
        binding.ServiceParameters({name: value})  # a header field the upstream can take
    origin = _origin(url)
    credential = [(name, value) for name, value in headers]

    async def add_credential(request: httpx.Request) -> None:
        # Every request, redirects included, is checked: the credential is for one origin.
        if credential and _origin(str(request.url)) == origin:
            for name, value in credential:
                request.headers[name] = value

    # No read timeout: a task may take its time; the bridge's and the adapter's
    # deadlines end a request that takes too long.
    timeout = httpx.Timeout(connect_timeout, read=None)
    async with httpx.AsyncClient(
        timeout=timeout, event_hooks={"request": [add_credential]}
    ) as http:
        try:
            card = await A2ACardResolver(http, base, path).get_agent_card()
        except A2AClientError as exc:
            where = shown(base if path == "/" else base.rstrip("/") + path)
            raise GatewayError(
                f"--a2a-url: could not read the agent card at {where}: {reason_of(exc)}"
            ) from None
        interfaces = _jsonrpc_interfaces(card)
        if not interfaces:
            listed = ", ".join(
                f"{i.protocol_binding} {i.protocol_version}".strip()
                for i in card.supported_interfaces
            )
            raise GatewayError(
                "--a2a-url: the agent card lists no JSON-RPC interface of A2A 1.x"
                f" (it lists {listed[:200] or 'none'}); the binding is of A2A 1.0"
            )
        interface = interfaces[0][0]
        if _origin(interface.url) != origin:
            where = shown(interface.url)[:200]
            if credential and not follow_card_url:
                raise GatewayError(
                    f"--a2a-url: the agent card puts its JSON-RPC interface at {where}, another"
                    f" origin than {_origin_text(url)}, where the --header credential goes:"
                    " refused; give --follow-card-url to use that interface without the"
                    " credential, or point --a2a-url at it"
                )
            if credential:
                log.warning(
                    "the agent card puts its JSON-RPC interface at %s, another origin than"
                    " %s: followed without the --header credential (--follow-card-url)",
                    where,
                    _origin_text(url),
                )
            else:
                log.info(
                    "the agent card puts its JSON-RPC interface at %s, another origin than %s:"
                    " followed (no --header credential)",
                    where,
                    _origin_text(url),
                )
        versions = served_versions(card)
        transport: ClientTransport = JsonRpcTransport(
            http, card, interface.url, is_shared_httpx=True
        )
        if interface.tenant:
            transport = TenantTransportDecorator(transport, interface.tenant)
        public = with_simplex_interface(card, link, versions)
        operator = frozenset(name.lower() for name, _ in headers)
        handler = ForwardingHandler(
            transport,
            public,
            parameters=_service_parameters(operator),
            scoped=True,
            remote_callers=True,
        )
        log.info(
            "fronting %s (%s), A2A %s", card.name[:80], shown(interface.url), ", ".join(versions)
        )
        yield A2aBridge(
            handler, supported_versions=versions, agent_card=public, rpc_deadline=rpc_deadline
        )


def module_bridge(
    handler: object, link: str, *, rpc_deadline: float | None = DEFAULT_RPC_DEADLINE
) -> A2aBridge:
    """An :class:`A2aBridge` for an a2a-sdk agent served in process (``--a2a-module``).

    ``handler`` is the SDK's ``RequestHandler`` (usually ``DefaultRequestHandler``),
    or a function that makes one. Its Agent Card, when it keeps one, is served
    with the SimpleX interface added (``link``, the bot's contact address link).
    ``rpc_deadline`` is the bridge's Service RPC deadline. Raises
    :class:`GatewayError` for anything else.
    """
    if not isinstance(handler, RequestHandler) and callable(handler):
        # A factory (for example ``build_handler``) is called to make the handler.
        handler = handler()
    if not isinstance(handler, RequestHandler):
        raise GatewayError(
            "--a2a-module: expected an a2a-sdk RequestHandler (DefaultRequestHandler) or a"
            f" function that makes one, got {type(handler).__name__}"
        )
    # DefaultRequestHandler keeps the public card there (as A2aBridge reads it).
    card = getattr(handler, "_agent_card", None)
    public = None
    if isinstance(card, AgentCard):
        public = with_simplex_interface(card, link, binding.SUPPORTED_VERSIONS)
    return A2aBridge(handler, agent_card=public, rpc_deadline=rpc_deadline)

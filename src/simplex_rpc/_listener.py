"""What the two HTTP listeners share: ``mcp-proxy --listen`` and ``a2a-proxy``.

Both proxies sign with the operator's key, so whoever reaches a listener speaks
as the operator. Each puts the same guard in front of its SDK's server app and
serves it with the same uvicorn settings:

* :class:`ListenerPolicy`: which ``Host`` and ``Origin`` values are this
  listener's (the address it listens on, plus ``--allow-host`` and
  ``--allow-origin``), the bearer :class:`Token`, and the caps: request body
  size, connections, header and body read time;
* :func:`listen_socket` binds, and refuses an address other machines can
  reach unless a token is required (:func:`check_exposure`);
* :func:`guard` is ASGI middleware: the ``Host`` and ``Origin`` checks (a
  DNS-rebinding page sends a foreign ``Host``; a cross-site page a foreign
  ``Origin``), Starlette's ``CORSMiddleware`` for the origins the operator
  allows, the token (compared with :func:`hmac.compare_digest`), the
  ``Content-Type``, the body's size and read time, and strict JSON with a
  check of the JSON-RPC message that each proxy gives;
* :func:`server_options`: uvicorn's own ``limit_concurrency`` and keep-alive
  timeout, and an h11 protocol that closes a connection above the cap at once
  and one that has not sent a request's headers within the read timeout.

Every refusal is one WARNING line (the client's address and what was wrong,
values quoted short and escaped; never the token) and an answer whose body is
a JSON-RPC error object. No I/O at import; the SDK-facing modules import this
one (``mcp`` and ``a2a`` may not import each other).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import ipaddress
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio

from ._bindings import INVALID_REQUEST, PARSE_ERROR, error_response, request_id
from ._wire import strict_json as _json
from .errors import SimplexRpcError

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_READ_TIMEOUT",
    "TOKEN_ENV",
    "ListenerError",
    "ListenerPolicy",
    "MessageCheck",
    "Stopper",
    "Token",
    "check_exposure",
    "client_of",
    "guard",
    "is_loopback",
    "listen",
    "listen_socket",
    "server_options",
    "uvicorn_server",
]

log = logging.getLogger("simplex_rpc.listener")

DEFAULT_MAX_BODY: Final = 4 * 1024 * 1024
"""Request body cap in bytes (4 MiB, as the MCP SDK's own)."""

DEFAULT_MAX_CONNECTIONS: Final = 256
"""Open connections a listener keeps; more are answered 503 and closed at once."""

DEFAULT_READ_TIMEOUT: Final = 10.0
"""Seconds a client has to send a request's headers, and again its body."""

TOKEN_ENV: Final = "SIMPLEX_RPC_TOKEN"
"""The environment variable ``--token`` falls back to."""

MIN_TOKEN_LENGTH: Final = 16

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MessageCheck = Callable[[Any], "tuple[int, str] | None"]
"""A proxy's check of one decoded JSON-RPC body: None, or (JSON-RPC code, what is wrong)."""


class ListenerError(SimplexRpcError):
    """A listener cannot start as asked: an address it cannot bind, or one that other
    machines can reach without a token; or a token that is unusable."""


class Token:
    """The bearer token clients must send; its text appears in no repr, str or log."""

    __slots__ = ("_value",)

    def __init__(self, text: str, *, where: str = "--token") -> None:
        value = text.strip()
        if len(value) < MIN_TOKEN_LENGTH:
            raise ListenerError(
                f"{where}: the token is shorter than {MIN_TOKEN_LENGTH} characters; make one"
                " with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        if not all("!" <= ch <= "~" for ch in value):
            raise ListenerError(
                f"{where}: the token must be visible ASCII without spaces (a header value)"
            )
        self._value = value.encode("ascii")

    def __repr__(self) -> str:
        return "Token(<hidden>)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a Token is not pickled")

    def matches(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value is ``Bearer`` and this token.

        The token bytes are compared with :func:`hmac.compare_digest`, so the time
        taken does not depend on where a guess first differs.
        """
        if authorization is None:
            return False
        scheme, _, presented = authorization.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(presented.strip(), self._value)


def is_loopback(address: str) -> bool:
    """Whether an IP address text is a loopback address (127.0.0.0/8, ::1)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_unspecified(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_unspecified
    except ValueError:
        return False


def _split_host(value: str, default_port: int | None) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port``, lower-cased; None if malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, sep, port_text = value.partition(":")
        if sep and not port_text:
            return None
    if not name or any(ch in name for ch in "/@?# \t"):
        return None
    try:
        name = str(ipaddress.ip_address(name))  # one spelling of an address
    except ValueError:
        pass
    if not port_text:
        return name, default_port
    if not port_text.isdigit() or len(port_text) > 5 or int(port_text) > 65535:
        return None
    return name, int(port_text)


def _normal_origin(origin: str) -> str | None:
    """An origin as ``scheme://host[:port]``, lower-cased, default port dropped; or None."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest.rstrip("/"):
        return None
    default = 80 if scheme == "http" else 443
    split = _split_host(rest.rstrip("/"), default)
    if split is None:
        return None
    name, port = split
    shown = f"[{name}]" if ":" in name else name
    return f"{scheme}://{shown}" if port == default else f"{scheme}://{shown}:{port}"


@dataclass(frozen=True, slots=True)
class ListenerPolicy:
    """What one listener accepts: the names it answers to, its token and its caps.

    ``address`` and ``port`` are where it listens (the bound socket's). A
    ``Host`` is this listener's when it names ``address`` (for a loopback
    address also ``localhost``, ``127.0.0.1`` and ``::1``; for a wildcard
    address, any IP address: a DNS-rebinding page always sends a name) with
    ``port``, or one of ``allow_hosts`` (``NAME``, at this port, or
    ``NAME:PORT``). An ``Origin`` may be absent (a program, not a browser); when
    present it is ``http://`` and a ``Host`` of this listener, or one of
    ``allow_origins`` (exactly, and those get CORS answers).
    """

    address: str
    port: int
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    token: Token | None = field(default=None, repr=False)
    max_body: int = DEFAULT_MAX_BODY
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    _hosts: frozenset[tuple[str, int | None]] = field(init=False, repr=False, compare=False)
    _origins: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_body < 1 or self.max_connections < 1:
            raise ListenerError("the body and connection caps must be at least 1")
        if not (math.isfinite(self.read_timeout) and self.read_timeout > 0):
            raise ListenerError("the read timeout must be a positive number of seconds")
        address = self.address.lower()
        with contextlib.suppress(ValueError):
            address = str(ipaddress.ip_address(address))
        names = {address}
        if is_loopback(address) or address == "localhost":
            names |= {"localhost", "127.0.0.1", "::1"}
        hosts: set[tuple[str, int | None]] = {(name, self.port) for name in names}
        for text in self.allow_hosts:
            split = _split_host(text, self.port)
            if split is None:
                raise ListenerError(f"--allow-host: {text[:64]!r} is not NAME or NAME:PORT")
            hosts.add(split)
        origins: set[str] = set()
        for text in self.allow_origins:
            normal = _normal_origin(text)
            if normal is None:
                raise ListenerError(
                    f"--allow-origin: {text[:64]!r} is not an origin such as https://app.example"
                )
            origins.add(normal)
        object.__setattr__(self, "_hosts", frozenset(hosts))
        object.__setattr__(self, "_origins", frozenset(origins))

    @property
    def cors_origins(self) -> tuple[str, ...]:
        """The ``--allow-origin`` origins, normalized: those answered with CORS headers."""
        return tuple(sorted(self._origins))

    def host_allowed(self, value: str) -> bool:
        """Whether a ``Host`` header value names this listener."""
        split = _split_host(value, 80)
        if split is None:
            return False
        name, port = split
        if (name, port) in self._hosts:
            return True
        return _is_unspecified(self.address) and port == self.port and _is_ip(name)

    def origin_allowed(self, value: str) -> bool:
        """Whether an ``Origin`` header value is this listener's own or an allowed one."""
        normal = _normal_origin(value)
        if normal is None:
            return False
        if normal in self._origins:
            return True
        return normal.startswith("http://") and self.host_allowed(normal[len("http://") :])


def _loopback_only(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return bool(infos) and all(is_loopback(str(info[4][0])) for info in infos)


def check_exposure(host: str, port: int, token: Token | None) -> None:
    """Refuse to listen where other machines can connect without a token.

    ``0.0.0.0``, ``::``, a LAN address or a name that is not loopback-only
    needs ``token``: without one, anyone who reaches the port signs as the
    operator.
    """
    if token is None and not _loopback_only(host):
        shown = f"[{host}]" if ":" in host else host
        raise ListenerError(
            f"--listen {shown}:{port} is not a loopback address, so other machines can"
            f" connect: require a token with --token @FILE (or {TOKEN_ENV}), or listen on"
            " 127.0.0.1"
        )


def listen(policy: ListenerPolicy) -> tuple[socket.socket, ListenerPolicy]:
    """Bind where ``policy`` says, after :func:`check_exposure`: the listening socket, and
    the policy for the address and port bound (port 0 picked one)."""
    check_exposure(policy.address, policy.port, policy.token)
    sock = listen_socket(policy.address, policy.port)
    address, port = sock.getsockname()[:2]
    return sock, dataclasses.replace(policy, address=str(address), port=int(port))


def listen_socket(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ListenerError(
            f"--listen: {host[:64]!r} is not an address of this machine ({exc.strerror})"
        ) from None
    # IPv4 first, as a bare name like "localhost" meant before.
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, kind, _, _, address = infos[0]
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # proto says TCP, and an accepted socket inherits it; without it each keep-alive
    # response waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, kind, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if ":" in host else host
        raise ListenerError(f"--listen {shown}:{port}: {exc.strerror or exc}") from None
    return sock


# -- the ASGI guard ----------------------------------------------------------------------


def client_of(scope: Scope) -> str:
    """The client's address as text ("unknown" when the server gives none)."""
    client = scope.get("client")
    if isinstance(client, (tuple, list)) and client:
        return str(client[0])
    return "unknown"


def _shown(value: bytes | str) -> str:
    """A header value for a log line or an answer: escaped and short."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return repr(text[:80])


def _header_values(scope: Scope, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", ()) if k.lower() == name]


def _answer(
    status: int,
    code: int,
    message: str,
    *,
    rid: Any = None,
    close: bool = True,
    extra: Iterable[tuple[bytes, bytes]] = (),
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = _json.dumps(error_response(rid, code, message))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        *extra,
    ]
    if close:
        # The body may be unread: the connection cannot carry another request.
        headers.append((b"connection", b"close"))
    return status, headers, body


async def _send_answer(send: Send, answer: tuple[int, list[tuple[bytes, bytes]], bytes]) -> None:
    status, headers, body = answer
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Refused(Exception):
    """A request answered here: its HTTP status, JSON-RPC error and the request's id."""

    def __init__(
        self, status: int, code: int, message: str, *, close: bool = True, rid: Any = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.close = status, code, message, close
        self.rid = rid


class _HostOriginGuard:
    """The outer check: ``Host`` and ``Origin`` must be this listener's (before CORS)."""

    def __init__(self, app: ASGIApp, policy: ListenerPolicy) -> None:
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = _header_values(scope, b"host")
        origins = _header_values(scope, b"origin")
        reason: tuple[int, str] | None = None
        if len(hosts) != 1:
            reason = (400, "the request must carry exactly one Host header")
        elif not self.policy.host_allowed(hosts[0].decode("latin-1")):
            reason = (
                421,
                f"Host {_shown(hosts[0])} is not this listener's address"
                " (--allow-host adds a name)",
            )
        elif len(origins) > 1:
            reason = (403, "the request carries more than one Origin header")
        elif origins and not self.policy.origin_allowed(origins[0].decode("latin-1")):
            reason = (
                403,
                f"Origin {_shown(origins[0])} is not allowed (--allow-origin adds one)",
            )
        if reason is None:
            await self.app(scope, receive, send)
            return
        status, message = reason
        log.warning("refused a request from %s: %s", client_of(scope), message)
        await _send_answer(send, _answer(status, INVALID_REQUEST, message))


class _RequestGuard:
    """The inner checks: token, Content-Type, body size and time, strict JSON, the message."""

    def __init__(
        self,
        app: ASGIApp,
        policy: ListenerPolicy,
        check: MessageCheck | None,
        rpc_error_status: int,
        allow_null_id: bool,
    ) -> None:
        self.app, self.policy, self.check = app, policy, check
        self.rpc_error_status = rpc_error_status
        self.allow_null_id = allow_null_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            scope = self._authorized(scope)
            if scope["method"] != "POST":
                await self.app(scope, receive, send)
                return
            self._check_content_type(scope)
            body = await self._read_body(scope, receive)
            if body is None:
                return  # the client went away
            self._check_message(body)
        except _Refused as refused:
            log.warning("refused a request from %s: %s", client_of(scope), refused.message)
            extra = [(b"www-authenticate", b"Bearer")] if refused.status == 401 else []
            answer = _answer(
                refused.status,
                refused.code,
                refused.message,
                rid=refused.rid,
                close=refused.close,
                extra=extra,
            )
            await _send_answer(send, answer)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, scope: Scope) -> Scope:
        token = self.policy.token
        if token is None:
            return scope
        values = _header_values(scope, b"authorization")
        if len(values) != 1 or not token.matches(values[0]):
            raise _Refused(401, INVALID_REQUEST, "missing or wrong Authorization: Bearer token")
        # The header was the listener's: it goes no further (an A2A proxy would pass
        # Authorization on to the bot as a service parameter).
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
        return {**scope, "headers": headers}

    def _check_content_type(self, scope: Scope) -> None:
        values = _header_values(scope, b"content-type")
        media = values[0].split(b";", 1)[0].strip().lower() if len(values) == 1 else b""
        if media != b"application/json":
            shown = _shown(values[0]) if len(values) == 1 else "none"
            raise _Refused(
                415, INVALID_REQUEST, f"Content-Type must be application/json, not {shown}"
            )

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        cap = self.policy.max_body
        lengths = _header_values(scope, b"content-length")
        if lengths:
            text = lengths[0].strip()
            if len(lengths) > 1 or not text.isdigit():
                raise _Refused(400, INVALID_REQUEST, "Content-Length is not one number")
            if int(text) > cap:
                raise _Refused(413, INVALID_REQUEST, f"the body is larger than {cap} bytes")
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.policy.read_timeout) as scope_:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > cap:
                    raise _Refused(413, INVALID_REQUEST, f"the body is larger than {cap} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if scope_.cancelled_caught:
            raise _Refused(
                408,
                INVALID_REQUEST,
                f"the body did not arrive within {self.policy.read_timeout:g} s",
            )
        return b"".join(chunks)

    def _check_message(self, body: bytes) -> None:
        try:
            value = _json.loads(body)
        except _json.JsonError as exc:
            raise _Refused(
                self.rpc_error_status, PARSE_ERROR, f"Parse error: {str(exc)[:200]}", close=False
            ) from None
        problem = self.check(value) if self.check is not None else None
        if problem is not None:
            code, message = problem
            raise _Refused(
                self.rpc_error_status,
                code,
                message[:300],
                close=False,
                rid=request_id(value, allow_null=self.allow_null_id),
            )


def guard(
    app: ASGIApp,
    policy: ListenerPolicy,
    *,
    check: MessageCheck | None = None,
    rpc_error_status: int = 400,
    allow_null_id: bool = False,
) -> ASGIApp:
    """``app`` behind the listener's checks, in this order:

    1. ``Host`` and ``Origin`` (421 and 403), before anything else, preflights included;
    2. Starlette's ``CORSMiddleware`` for ``policy``'s ``--allow-origin`` origins only
       (it answers their preflights);
    3. the token (401), then for a POST: ``Content-Type: application/json`` (415), the
       body within ``max_body`` bytes (413) and ``read_timeout`` seconds (408), strict
       JSON (``PARSE_ERROR``) and ``check`` (its code), answered with HTTP status
       ``rpc_error_status``.

    The body of a POST reaches ``app`` read whole.
    """
    from starlette.middleware.cors import CORSMiddleware

    inner = _RequestGuard(app, policy, check, rpc_error_status, allow_null_id)
    cors: ASGIApp = inner
    if policy.cors_origins:
        cors = CORSMiddleware(
            inner,
            allow_origins=list(policy.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["*"],
            expose_headers=["mcp-session-id", "mcp-protocol-version"],
        )
    return _HostOriginGuard(cors, policy)


# -- uvicorn -----------------------------------------------------------------------------

_OVER_CAP: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
    b"content-length: 20\r\nconnection: close\r\n\r\ntoo many connections"
)


class _Throttled:
    """At most one WARNING line a minute about refused connections, with their count."""

    def __init__(self) -> None:
        self.count = 0
        self.last = -math.inf

    def refused(self, cap: int) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= 60.0:
            log.warning(
                "refused %d connection(s): %d are open, the cap (--max-connections)",
                self.count,
                cap,
            )
            self.count, self.last = 0, now


def _protocol(policy: ListenerPolicy) -> type[Any]:
    """uvicorn's h11 protocol with a connection cap and a header read timeout.

    uvicorn (0.55) has neither: it accepts every connection, and a connection
    that has not finished a request's headers is never timed out (its
    keep-alive timer runs only between requests). This subclass closes a
    connection above ``max_connections`` with a 503 at once, and one that has
    not sent the headers of a request within ``read_timeout`` of opening or of
    the previous answer.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    throttle = _Throttled()

    class GuardedH11Protocol(H11Protocol):
        _header_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > policy.max_connections:
                throttle.refused(policy.max_connections)
                transport.write(_OVER_CAP)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # a request's headers are in: the app reads its body

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(policy.read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if self.cycle is None or self.cycle.response_complete:
                log.debug("closed a connection that sent no request within the read timeout")
                self.transport.close()

    return GuardedH11Protocol


def server_options(policy: ListenerPolicy) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config``: the protocol, the caps and the quiet logs."""
    return {
        "http": _protocol(policy),
        # No WebSocket upgrade: neither proxy serves one, and the guard checks HTTP only.
        "ws": "none",
        # uvicorn would otherwise take the client's address from X-Forwarded-For when the
        # connection comes from 127.0.0.1: any local process could claim any address and
        # escape the per-client session bound.
        "proxy_headers": False,
        # uvicorn's own cap on connections and requests in progress (503 above it); it
        # counts the connection asking, so one more than the connections kept.
        "limit_concurrency": policy.max_connections + 1,
        "timeout_keep_alive": 5,
        "log_level": "warning",
        "access_log": False,
        "server_header": False,
    }


class Stopper:
    """A graceful stop asked from outside a server's task (the CLI's signal handler).

    A server registers what stops it (:meth:`on_stop`); :meth:`stop` runs each
    once, and one registered after the stop was asked runs at once.
    """

    def __init__(self) -> None:
        self.requested = False
        self._callbacks: list[Callable[[], None]] = []

    def on_stop(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)
        if self.requested:
            callback()

    def stop(self) -> None:
        if not self.requested:
            self.requested = True
            for callback in self._callbacks:
                callback()


def uvicorn_server(
    config: Any,
    stopper: Stopper | None = None,
    *,
    on_started: Callable[[], None] | None = None,
) -> Any:
    """A ``uvicorn.Server`` for ``config`` that leaves the process's signals alone.

    uvicorn installs its own SIGINT and SIGTERM handlers and raises the signal
    again after its shutdown, so the process would end 130 or 143 with no line:
    the command's stop convention (``simplex_rpc.cli._common.run_until_signal``)
    owns the signals instead, and asks for uvicorn's graceful shutdown through
    ``stopper``. ``on_started`` is called once uvicorn accepts connections (its
    startup done), so that nobody polls ``server.started``; not when it fails.
    """
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            yield

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_started is not None:
                on_started()

    server = _Server(config)
    if stopper is not None:
        stopper.on_stop(lambda: setattr(server, "should_exit", True))
    return server

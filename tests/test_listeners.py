"""The HTTP listeners against a hostile web page and a hostile network (issue 32, items 2,
3, 5, 6 and 9): ``mcp-proxy --listen`` and ``a2a-proxy``.

Both sign with the operator's key, so whoever reaches a listener speaks as the operator.
Each probe of the issue is reproduced here as the attacker sends it: a DNS-rebinding page's
request (``Host: attacker.example`` with a matching ``Origin``), a cross-site preflight, a
wrong ``Content-Type``, a 100 MiB body, 10,000 ``initialize`` requests, idle and slow
connections, malformed JSON-RPC, and a listener opened to the network without a token.
After each, the proxy still answers an honest client, and its memory (the process's peak
RSS, ``VmHWM``) stays within the bound the test states.

The first part checks the shared guard (``simplex_rpc._listener``) in-process; the second
runs the proxies as a user runs them: the simulator (in a thread), the bot
(``simplex-rpc serve --a2a-module``), ``simplex-rpc a2a-proxy`` and ``simplex-rpc mcp-proxy
--listen``, each its own process. Loopback only.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("a2a")

from mcp import Client

from simplex_rpc import _listener
from simplex_rpc._listener import (
    ListenerError,
    ListenerPolicy,
    Token,
    check_exposure,
    guard,
)
from simplex_rpc.cli import _listener_options
from simplex_rpc.testing import CoreSimulator
from test_a2a_gateway import PY, UPSTREAM, World, stop
from test_mcp_upstream_cli import Program

TOKEN = "tok-" + "7Kq2xW9pLm4Rz8Vb3Nc6"
MIB = 1024 * 1024

# -- the guard, in-process ---------------------------------------------------------------


async def _echo_app(scope: Any, receive: Any, send: Any) -> None:
    """What reaches the app behind the guard: the headers it sees and the body it reads."""
    body = b""
    if scope["method"] == "POST":
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
    seen = {
        "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
        "body": body.decode("utf-8", "replace"),
    }
    data = json.dumps(seen).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _call(
    policy: ListenerPolicy,
    method: str,
    *,
    host: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> httpx.Response:
    app = guard(_echo_app, policy)

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        base = f"http://{host or f'127.0.0.1:{policy.port}'}"
        async with httpx.AsyncClient(transport=transport, base_url=base) as http:
            return await http.request(method, "/mcp", headers=headers, content=body)

    return asyncio.run(main())


LOOPBACK = ListenerPolicy("127.0.0.1", 8123)
JSON = {"content-type": "application/json"}
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.mark.parametrize(
    ("policy", "host", "ok"),
    [
        (LOOPBACK, "127.0.0.1:8123", True),
        (LOOPBACK, "localhost:8123", True),
        (LOOPBACK, "[::1]:8123", True),
        (LOOPBACK, "LOCALHOST:8123", True),
        (LOOPBACK, "attacker.example:8123", False),  # the DNS-rebinding page
        (LOOPBACK, "127.0.0.1:9999", False),  # another port's name
        (LOOPBACK, "127.0.0.1", False),  # port 80
        (LOOPBACK, "127.0.0.1:8123@evil", False),
        (ListenerPolicy("127.0.0.2", 8123), "127.0.0.2:8123", True),
        (ListenerPolicy("127.0.0.2", 8123), "attacker.example:8123", False),
        (ListenerPolicy("0.0.0.0", 8123), "192.168.1.5:8123", True),  # an address, never a name
        (ListenerPolicy("0.0.0.0", 8123), "attacker.example:8123", False),
        (ListenerPolicy("::", 8123), "[fe80::1]:8123", True),
        (ListenerPolicy("192.168.1.5", 8123), "192.168.1.5:8123", True),
        (ListenerPolicy("192.168.1.5", 8123), "localhost:8123", False),
        (ListenerPolicy("192.168.1.5", 8123), "10.0.0.1:8123", False),
        (ListenerPolicy("127.0.0.1", 8123, allow_hosts=("proxy.lan",)), "proxy.lan:8123", True),
        (ListenerPolicy("127.0.0.1", 8123, allow_hosts=("proxy.lan:443",)), "proxy.lan:443", True),
        (
            ListenerPolicy("127.0.0.1", 8123, allow_hosts=("proxy.lan:443",)),
            "proxy.lan:8123",
            False,
        ),
    ],
)
def test_the_host_header_must_name_this_listener(
    policy: ListenerPolicy, host: str, ok: bool
) -> None:
    """A DNS-rebinding page reaches a loopback port under the attacker's own name: its
    requests carry ``Host: attacker.example:PORT``. Only the address listened on (and, on
    loopback, ``localhost``), ``--allow-host`` names, and on a wildcard address any IP
    address are this listener's; the rest is 421, before the body is read."""
    response = _call(policy, "POST", host=host, headers=JSON, body=PING)
    assert (response.status_code == 200) is ok, response.text
    if not ok:
        assert response.status_code == 421
        assert response.json()["error"]["code"] == -32600
        assert response.headers["connection"] == "close"


@pytest.mark.parametrize(
    ("origin", "ok"),
    [
        (None, True),  # a program, not a browser
        ("http://127.0.0.1:8123", True),
        ("http://localhost:8123", True),
        ("http://attacker.example:8123", False),
        ("http://localhost:3000", False),  # another local web page
        ("https://127.0.0.1:8123", False),
        ("null", False),  # a sandboxed frame or a file: page
        ("http://127.0.0.1:8123/path", False),
    ],
)
def test_the_origin_header_must_be_this_listener_or_allowed(origin: str | None, ok: bool) -> None:
    headers = dict(JSON)
    if origin is not None:
        headers["origin"] = origin
    response = _call(LOOPBACK, "POST", headers=headers, body=PING)
    assert (response.status_code == 200) is ok, response.text
    if not ok:
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


def test_a_cross_site_preflight_is_refused_and_an_allowed_origin_gets_cors() -> None:
    """The preflight a browser sends before a cross-site JSON POST gets 403 without CORS
    headers, so the POST is never sent; an origin given with --allow-origin gets the CORS
    answer (Starlette's CORSMiddleware), and its POST goes through."""
    preflight = {
        "origin": "http://evil.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,authorization",
    }
    refused = _call(LOOPBACK, "OPTIONS", headers=preflight)
    assert refused.status_code == 403
    assert not any(h.startswith("access-control-") for h in refused.headers)
    allowed = ListenerPolicy("127.0.0.1", 8123, allow_origins=("https://App.example/",))
    answered = _call(allowed, "OPTIONS", headers={**preflight, "origin": "https://app.example"})
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == "https://app.example"
    posted = _call(allowed, "POST", headers={**JSON, "origin": "https://app.example"}, body=PING)
    assert posted.status_code == 200
    assert posted.headers["access-control-allow-origin"] == "https://app.example"
    assert _call(allowed, "OPTIONS", headers=preflight).status_code == 403


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_post_that_is_not_json_is_415(content_type: str | None) -> None:
    """``text/plain``, a form: what a page may POST cross-site without a preflight."""
    headers = {} if content_type is None else {"content-type": content_type}
    response = _call(LOOPBACK, "POST", headers=headers, body=PING)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == -32600
    ok = _call(
        LOOPBACK, "POST", headers={"content-type": "application/json; charset=utf-8"}, body=PING
    )
    assert ok.status_code == 200


def test_the_token_is_required_compared_in_constant_time_and_kept_from_the_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = _listener.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_listener.hmac, "compare_digest", spy)
    policy = ListenerPolicy("127.0.0.1", 8123, token=Token(TOKEN))
    assert _call(policy, "POST", headers=JSON, body=PING).status_code == 401
    wrong = _call(policy, "POST", headers={**JSON, "authorization": f"Bearer {TOKEN}x"}, body=PING)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    basic = _call(policy, "POST", headers={**JSON, "authorization": f"Basic {TOKEN}"}, body=PING)
    assert basic.status_code == 401
    right = _call(policy, "POST", headers={**JSON, "authorization": f"bearer {TOKEN}"}, body=PING)
    assert right.status_code == 200
    # The Authorization header was the listener's: the app (the A2A proxy would pass it to
    # the bot as a service parameter) never sees it.
    assert "authorization" not in right.json()["headers"]
    assert compared and all(b == TOKEN.encode() for _, b in compared)
    assert TOKEN not in repr(policy) and TOKEN not in repr(policy.token)
    assert TOKEN not in str(policy.token)


@pytest.mark.parametrize(
    ("text", "says"),
    [("q9Zk", "shorter than 16"), ("has a space in the middle!", "visible ASCII"), ("", "shorter")],
)
def test_an_unusable_token_is_refused_without_echoing_it(text: str, says: str) -> None:
    with pytest.raises(ListenerError) as caught:
        Token(text)
    assert says in str(caught.value)
    assert (not text) or text not in str(caught.value)


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "::", "192.0.2.10"],  # the wildcard addresses and a LAN address
)
def test_listening_beyond_loopback_needs_a_token(host: str) -> None:
    with pytest.raises(ListenerError) as caught:
        check_exposure(host, 8080, None)
    assert "--token" in str(caught.value)
    check_exposure(host, 8080, Token(TOKEN))  # with one, it may


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    check_exposure(host, 8080, None)


def test_the_body_cap_counts_bytes_not_the_declared_length() -> None:
    small = ListenerPolicy("127.0.0.1", 8123, max_body=100)
    declared = _call(small, "POST", headers={**JSON, "content-length": "101"}, body=b"x" * 101)
    assert declared.status_code == 413

    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 50

    app = guard(_echo_app, small)

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as h:
            return await h.post("/mcp", headers=JSON, content=chunks())

    streamed = asyncio.run(main())
    assert streamed.status_code == 413
    assert "larger than 100 bytes" in streamed.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{", "Parse error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","id":2}', "duplicate member name 'id'"),
        (b'\xff{"jsonrpc":"2.0"}', "invalid UTF-8 at byte offset 0"),
        (b"[" * 100_000, "nesting deeper than 64"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":NaN}}', "NaN is not JSON"),
    ],
)
def test_a_body_that_is_not_strict_json_is_a_parse_error(body: bytes, says: str) -> None:
    response = _call(LOOPBACK, "POST", headers=JSON, body=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32700 and says in error["message"]


def test_the_cli_defaults_are_the_listeners() -> None:
    assert _listener_options.MAX_BODY == _listener.DEFAULT_MAX_BODY == 4 * MIB
    assert _listener_options.MAX_CONNECTIONS == _listener.DEFAULT_MAX_CONNECTIONS
    assert _listener_options.READ_TIMEOUT == _listener.DEFAULT_READ_TIMEOUT
    assert _listener_options.TOKEN_ENV == _listener.TOKEN_ENV

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
import re
import socket
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


from _fixtures import ProcessFactory
from _gateway import UPSTREAM, World
from _programs import Program
from simplex_rpc import _listener
from simplex_rpc._listener import (
    ListenerError,
    ListenerPolicy,
    Token,
    check_exposure,
    guard,
)
from simplex_rpc.cli import _listener_options, main
from simplex_rpc.testing import CoreSimulator

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


async def _call(
    policy: ListenerPolicy,
    method: str,
    *,
    host: str | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> httpx.Response:
    app = guard(_echo_app, policy)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    base = f"http://{host or f'127.0.0.1:{policy.port}'}"
    async with httpx.AsyncClient(transport=transport, base_url=base) as http:
        return await http.request(method, "/mcp", headers=headers, content=body)


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
        (ListenerPolicy("::1", 8123), "[0:0:0:0:0:0:0:1]:8123", True),  # one address
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
@pytest.mark.anyio
async def test_the_host_header_must_name_this_listener(
    policy: ListenerPolicy, host: str, ok: bool
) -> None:
    """A DNS-rebinding page reaches a loopback port under the attacker's own name: its
    requests carry ``Host: attacker.example:PORT``. Only the address listened on (and, on
    loopback, ``localhost``), ``--allow-host`` names, and on a wildcard address any IP
    address are this listener's; the rest is 421, before the body is read."""
    response = await _call(policy, "POST", host=host, headers=JSON, body=PING)
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
@pytest.mark.anyio
async def test_the_origin_header_must_be_this_listener_or_allowed(
    origin: str | None, ok: bool
) -> None:
    headers = dict(JSON)
    if origin is not None:
        headers["origin"] = origin
    response = await _call(LOOPBACK, "POST", headers=headers, body=PING)
    assert (response.status_code == 200) is ok, response.text
    if not ok:
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


@pytest.mark.anyio
async def test_a_cross_site_preflight_is_refused_and_an_allowed_origin_gets_cors() -> None:
    """The preflight a browser sends before a cross-site JSON POST gets 403 without CORS
    headers, so the POST is never sent; an origin given with --allow-origin gets the CORS
    answer (Starlette's CORSMiddleware), and its POST goes through."""
    preflight = {
        "origin": "http://evil.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,authorization",
    }
    refused = await _call(LOOPBACK, "OPTIONS", headers=preflight)
    assert refused.status_code == 403
    assert not any(h.startswith("access-control-") for h in refused.headers)
    allowed = ListenerPolicy("127.0.0.1", 8123, allow_origins=("https://App.example/",))
    answered = await _call(
        allowed, "OPTIONS", headers={**preflight, "origin": "https://app.example"}
    )
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == "https://app.example"
    posted = await _call(
        allowed, "POST", headers={**JSON, "origin": "https://app.example"}, body=PING
    )
    assert posted.status_code == 200
    assert posted.headers["access-control-allow-origin"] == "https://app.example"
    assert (await _call(allowed, "OPTIONS", headers=preflight)).status_code == 403


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
@pytest.mark.anyio
async def test_a_post_that_is_not_json_is_415(content_type: str | None) -> None:
    """``text/plain``, a form: what a page may POST cross-site without a preflight."""
    headers = {} if content_type is None else {"content-type": content_type}
    response = await _call(LOOPBACK, "POST", headers=headers, body=PING)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == -32600
    ok = await _call(
        LOOPBACK, "POST", headers={"content-type": "application/json; charset=utf-8"}, body=PING
    )
    assert ok.status_code == 200


@pytest.mark.anyio
async def test_the_token_is_required_compared_in_constant_time_and_kept_from_the_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = _listener.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_listener.hmac, "compare_digest", spy)
    policy = ListenerPolicy("127.0.0.1", 8123, token=Token(TOKEN))
    assert (await _call(policy, "POST", headers=JSON, body=PING)).status_code == 401
    wrong = await _call(
        policy, "POST", headers={**JSON, "authorization": f"Bearer {TOKEN}x"}, body=PING
    )
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    basic = await _call(
        policy, "POST", headers={**JSON, "authorization": f"Basic {TOKEN}"}, body=PING
    )
    assert basic.status_code == 401
    right = await _call(
        policy, "POST", headers={**JSON, "authorization": f"bearer {TOKEN}"}, body=PING
    )
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


@pytest.mark.anyio
async def test_the_body_cap_counts_bytes_not_the_declared_length() -> None:
    small = ListenerPolicy("127.0.0.1", 8123, max_body=100)
    declared = await _call(
        small, "POST", headers={**JSON, "content-length": "101"}, body=b"x" * 101
    )
    assert declared.status_code == 413

    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 50

    app = guard(_echo_app, small)

    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as h:
        streamed = await h.post("/mcp", headers=JSON, content=chunks())
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
@pytest.mark.anyio
async def test_a_body_that_is_not_strict_json_is_a_parse_error(body: bytes, says: str) -> None:
    response = await _call(LOOPBACK, "POST", headers=JSON, body=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32700 and says in error["message"]


def test_the_cli_defaults_are_the_listeners() -> None:
    assert _listener_options.MAX_BODY == _listener.DEFAULT_MAX_BODY == 4 * MIB
    assert _listener_options.MAX_CONNECTIONS == _listener.DEFAULT_MAX_CONNECTIONS
    assert _listener_options.READ_TIMEOUT == _listener.DEFAULT_READ_TIMEOUT
    assert _listener_options.TOKEN_ENV == _listener.TOKEN_ENV


# -- the proxies, as processes ------------------------------------------------------------


def _world(sim: CoreSimulator) -> dict[str, Any]:
    sim.connect("alice", "bot")
    return {}


@dataclass
class Listener:
    """One running proxy: its process (output read by threads) and its base URL."""

    kind: str  # "mcp" or "a2a"
    program: Program
    url: str  # mcp: http://H:P/mcp; a2a: http://H:P

    @property
    def port(self) -> int:
        return int(self.url.split(":")[2].split("/")[0])

    @property
    def endpoint(self) -> str:
        return self.url if self.kind == "mcp" else self.url + "/"

    def refusals(self) -> list[str]:
        return [line for line in self.program.seen["err"] if "refused a request from" in line]

    def peak_rss(self) -> int:
        """The process's peak resident memory in bytes (``VmHWM``)."""
        status = Path(f"/proc/{self.program.proc.pid}/status").read_text()
        (kib,) = re.findall(r"^VmHWM:\s+(\d+) kB", status, re.M)
        return int(kib) * 1024


@dataclass
class Network:
    url: str
    link: str
    mcp: Listener
    a2a: Listener


def start(
    kind: str,
    url: str,
    link: str,
    *options: str,
    env: dict[str, str] | None = None,
    process: ProcessFactory = Program,
) -> Listener:
    """A proxy of ``kind`` for ``link``, listening; ``process`` starts it (the ``process``
    fixture, which stops it after the test, or a bare ``Program``)."""
    command = "mcp-proxy" if kind == "mcp" else "a2a-proxy"
    listen = () if any(o == "--listen" for o in options) else ("--listen", "127.0.0.1:0")
    program = process(command, "--core", f"{url}/alice", *listen, *options, link, env=env)
    try:
        return Listener(kind, program, program.wait_for("out", "listening: "))
    except BaseException:
        program.stop()
        raise


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    with World(_world) as world:
        bot = Program(
            *("serve", "--core", f"{world.url}/bot"),
            *("--a2a-module", f"{UPSTREAM}:build_handler", "--chat", "--address"),
        )
        started: list[Listener] = []
        try:
            link = bot.wait_for("out", "address: ")
            started.append(start("mcp", world.url, link))
            started.append(start("a2a", world.url, link))
            yield Network(world.url, link, started[0], started[1])
        finally:
            for listener in started:
                listener.program.stop()
            bot.stop()


@pytest.fixture(params=["mcp", "a2a"])
def proxy(request: pytest.FixtureRequest, network: Network) -> Listener:
    listener: Listener = getattr(network, request.param)
    return listener


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``simplex-rpc *argv`` run in this process (a usage error starts nothing): the exit
    status and what it wrote to stderr."""
    capsys.readouterr()
    status = main(list(argv))
    return status, capsys.readouterr().err


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def a2a_request(text: str = "quote") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }


A2A_HEADERS = {"content-type": "application/json", "a2a-version": "1.0"}


def honest_request(listener: Listener) -> tuple[dict[str, Any], dict[str, str]]:
    if listener.kind == "mcp":
        return INITIALIZE, MCP_HEADERS
    return a2a_request(), A2A_HEADERS


def _sse_json(reply: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an MCP answer (a JSON body, or one server-sent event)."""
    if reply.headers.get("content-type", "").startswith("application/json"):
        return dict(reply.json())
    (data,) = [line[5:] for line in reply.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data))


def mcp_session(listener: Listener, headers: dict[str, str] | None = None) -> str:
    """The initialize handshake of revisions before 2026-07-28, as a host does it: initialize,
    then notifications/initialized under the session's id. The session's id."""
    extra = headers or {}
    opened = httpx.post(listener.url, json=INITIALIZE, headers={**MCP_HEADERS, **extra}, timeout=60)
    assert opened.status_code == 200, opened.text
    assert "result" in _sse_json(opened)
    sid = opened.headers["mcp-session-id"]
    done = httpx.post(
        listener.url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={
            **MCP_HEADERS,
            **extra,
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-06-18",
        },
        timeout=60,
    )
    assert done.status_code == 202, done.text
    return sid


def mcp_ping(listener: Listener, sid: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        listener.url,
        json={"jsonrpc": "2.0", "id": 7, "method": "ping"},
        headers={
            **MCP_HEADERS,
            **(headers or {}),
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-06-18",
        },
        timeout=60,
    )


def still_answers(listener: Listener, headers: dict[str, str] | None = None) -> None:
    """The proxy answers an honest client: an MCP host opens a session and pings in it; an
    A2A client's SendMessage gets the bot's task."""
    if listener.kind == "mcp":
        sid = mcp_session(listener, headers)
        pong = mcp_ping(listener, sid, headers)
        assert pong.status_code == 200 and _sse_json(pong)["result"] == {}, pong.text
        return
    reply = httpx.post(
        listener.endpoint,
        json=a2a_request(),
        headers={**A2A_HEADERS, **(headers or {})},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def wait_for_refusals(listener: Listener, count: int) -> list[str]:
    deadline = time.monotonic() + 30
    while len(listener.refusals()) < count:
        assert time.monotonic() < deadline, listener.program.seen["err"]
        time.sleep(0.05)
    return listener.refusals()


def test_a_dns_rebinding_page_is_refused(proxy: Listener) -> None:
    """The probe (issue 32, items 2 and 3): a page at http://attacker.example:PORT whose
    name now resolves to 127.0.0.1 POSTs a well-formed request, as the browser sends it:
    ``Host`` and ``Origin`` are the attacker's name. It got 200 and was signed with the
    operator's key; now it is 421, one WARNING line, and the proxy answers others."""
    before = len(proxy.refusals())
    body, headers = honest_request(proxy)
    name = f"attacker.example:{proxy.port}"
    browser = {**headers, "host": name, "origin": f"http://{name}", "sec-fetch-site": "same-origin"}
    # X-Forwarded-For is not believed: the client is the connection's address.
    browser["x-forwarded-for"] = "203.0.113.9"
    reply = httpx.post(proxy.endpoint, json=body, headers=browser, timeout=30)
    assert reply.status_code == 421
    assert reply.json()["error"]["code"] == -32600
    (line,) = wait_for_refusals(proxy, before + 1)[before:]
    assert "from 127.0.0.1: Host 'attacker.example" in line, line
    still_answers(proxy)


def test_a_cross_site_page_gets_neither_a_preflight_nor_a_simple_post(proxy: Listener) -> None:
    """A page on another site: its preflight for a JSON POST is 403 without CORS headers (the
    browser never sends the POST); its "simple" text/plain POST, which needs no preflight,
    is refused by its Origin; without an Origin, text/plain is still 415."""
    evil = {"origin": "http://evil.example", "host": f"127.0.0.1:{proxy.port}"}
    preflight = httpx.options(
        proxy.endpoint,
        headers={
            **evil,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
        },
        timeout=30,
    )
    assert preflight.status_code == 403
    assert not any(h.startswith("access-control-") for h in preflight.headers)
    body, _ = honest_request(proxy)
    simple = httpx.post(
        proxy.endpoint, content=json.dumps(body), headers={**evil, "content-type": "text/plain"}
    )
    assert simple.status_code == 403
    plain = httpx.post(
        proxy.endpoint, content=json.dumps(body), headers={"content-type": "text/plain"}
    )
    assert plain.status_code == 415
    still_answers(proxy)


def _raw(port: int, head: bytes, *, timeout: float = 60) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(head)
    return sock


def _answer_of(sock: socket.socket) -> bytes:
    """What the server sent until it closed the connection (bounded by the socket timeout)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return got


def _stream_body(port: int, path: str, total: int, *, chunked: bool) -> bytes:
    """POST ``total`` bytes of a JSON string in 64 KiB writes, as a client streams a
    file; stop when the server answers and closes. The server's answer."""
    length = b"transfer-encoding: chunked" if chunked else f"content-length: {total}".encode()
    sock = _raw(
        port,
        b"POST "
        + path.encode()
        + b" HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % port
        + b"content-type: application/json\r\n"
        + length
        + b"\r\n\r\n",
    )
    block = b'"' + b"a" * (64 * 1024 - 2) + b'"'
    sent = 0
    try:
        while sent < total:
            sock.sendall(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
            sent += len(block)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed: the rest is not read
    try:
        return _answer_of(sock)
    finally:
        sock.close()


def test_a_100_mib_body_is_refused_in_bounded_memory(proxy: Listener) -> None:
    """The probe (item 5): one 100 MiB body peaked the A2A proxy at 348 MiB, five at once
    took it from 62 to 957 MiB. A body above 4 MiB is now 413: declared by its
    Content-Length before a byte is read, or counted as it streams in (chunked). Five
    streamed at once, and one declared: the proxy's peak memory grows by less than 64 MiB."""
    path = "/mcp" if proxy.kind == "mcp" else "/"
    before = proxy.peak_rss()
    declared = _stream_body(proxy.port, path, 100 * MIB, chunked=False)
    assert declared.startswith(b"HTTP/1.1 413 "), declared[:200]
    answers: list[bytes] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(_stream_body(proxy.port, path, 100 * MIB, chunked=True))
        )
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(answers) == 5
    assert all(answer.startswith(b"HTTP/1.1 413 ") for answer in answers), answers
    assert b"larger than 4194304 bytes" in answers[0]
    assert proxy.peak_rss() - before < 64 * MIB
    still_answers(proxy)


MALFORMED: list[tuple[bytes, int, str]] = [
    (b"{", -32700, "Parse error"),
    (b"[]", -32600, "got an array"),
    (b"123", -32600, "got a number"),
    (b'"text"', -32600, "got a string"),
    (b'{"jsonrpc":"2.0"}', -32600, "Invalid Request"),
    (b'{"jsonrpc":"1.0","id":1,"method":"x"}', -32600, "'jsonrpc'"),
    (b'{"jsonrpc":"2.0","id":true,"method":"SendMessage"}', -32600, "member 'id'"),
    (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":5}', -32600, "'params'"),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600, "'method'"),
    (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}', -32700, "duplicate member name"),
    (b"\xff\xfe", -32700, "invalid UTF-8"),
]


def test_a_malformed_request_is_the_json_rpc_error_and_one_warning(proxy: Listener) -> None:
    """The probe (item 9): the A2A proxy logged a traceback at ERROR for each malformed
    request and answered with Python's text of the exception ("'list' object has no
    attribute 'get'"); the MCP SDK answered with its pydantic validation text. Each is
    now its JSON-RPC error (with HTTP 400 as the MCP SDK answers, 200 as a2a-sdk does)
    and one WARNING line, and the proxy answers others."""
    headers = MCP_HEADERS if proxy.kind == "mcp" else A2A_HEADERS
    status = 400 if proxy.kind == "mcp" else 200
    cases = list(MALFORMED)
    if proxy.kind == "a2a":  # params the SDK's protobuf request does not take
        cases.append(
            (
                b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":5}}',
                -32602,
                "Invalid params for SendMessage",
            )
        )
    before = len(proxy.refusals())
    for body, code, says in cases:
        reply = httpx.post(proxy.endpoint, content=body, headers=headers, timeout=30)
        assert reply.status_code == status, (body, reply.text)
        error = reply.json()["error"]
        assert error["code"] == code and says in error["message"], (body, error)
        assert "object has no attribute" not in reply.text and "pydantic" not in reply.text
    lines = wait_for_refusals(proxy, before + len(cases))[before:]
    time.sleep(0.5)  # nothing more is logged for them
    assert len(proxy.refusals()) == before + len(cases)
    assert all("from 127.0.0.1: " in line for line in lines), lines
    errors = proxy.program.seen["err"]
    assert not any("Traceback" in line or "Exception in ASGI" in line for line in errors), errors
    still_answers(proxy)


#: Ten times the per-client session cap (128, ``DEFAULT_PER_CLIENT`` of the MCP
#: listener's session guard): a flood that fills one client's table ten times over.
FLOOD = 10 * 128


@pytest.mark.anyio
async def test_a_flood_of_initializes_cannot_lock_the_host_out(network: Network) -> None:
    """The probe (item 6): 10,000 initialize requests that never complete the handshake
    filled the SDK's session table in about 18 s; every new session then got 503 for the
    30-minute idle timeout, and memory went from 71 to 441 MiB. Now one client address
    keeps at most 128 sessions, an unfinished handshake gives way to a new session and
    expires in 10 s: the host's session opened before the flood still answers, a new one
    opens, and the proxy's peak memory grows by less than 100 MiB. Each initialize claims
    another client address in X-Forwarded-For, which the listener does not believe.

    The flood is ten times the per-client cap (``FLOOD``): enough to fill the table ten
    times over, which is the rule; the probe's 10,000 tested nothing more."""
    mcp = network.mcp
    host_session = mcp_session(mcp)
    before = mcp.peak_rss()

    async def flood() -> int:
        opened = 0
        async with httpx.AsyncClient(timeout=60) as http:

            async def worker(index: int, count: int) -> None:
                nonlocal opened
                for n in range(count):
                    # Claiming to be another client each time changes nothing: the
                    # address is the connection's, not X-Forwarded-For's.
                    spoofed = {"x-forwarded-for": f"10.{index}.{n // 256}.{n % 256}"}
                    reply = await http.post(
                        mcp.url, json=INITIALIZE, headers={**MCP_HEADERS, **spoofed}
                    )
                    if reply.status_code == 200 and reply.headers.get("mcp-session-id"):
                        opened += 1

            await asyncio.gather(*(worker(index, FLOOD // 8) for index in range(8)))
        return opened

    opened = await flood()
    assert opened == FLOOD  # every initialize got its session: none was refused
    pong = mcp_ping(mcp, host_session)
    assert pong.status_code == 200 and _sse_json(pong)["result"] == {}
    still_answers(mcp)
    assert mcp.peak_rss() - before < 100 * MIB


@pytest.mark.parametrize("kind", ["mcp", "a2a"])
def test_idle_and_slow_connections_are_capped_and_timed_out(network: Network, kind: str) -> None:
    """The probe (item 9): 5,000 idle connections were all accepted, and none was ever
    closed. Now a connection above --max-connections is answered 503 and closed at once;
    one that sends no request, or only part of its headers (slowloris), is closed after
    --read-timeout; a body that does not arrive in that time is 408. Then the proxy answers
    an honest client."""
    listener = start(
        kind, network.url, network.link, "--max-connections", "8", "--read-timeout", "1"
    )
    try:
        idle = [
            socket.create_connection(("127.0.0.1", listener.port), timeout=30) for _ in range(20)
        ]
        answers = [_answer_of(sock) for sock in idle]  # each ends: refused, or timed out
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        assert len(refused) >= 12 and all(a in (b"", refused[0]) for a in answers), answers
        for sock in idle:
            sock.close()
        slowloris = _raw(listener.port, b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-a: ")
        assert _answer_of(slowloris) == b""  # closed, headers never finished
        slowloris.close()
        path = b"/mcp" if kind == "mcp" else b"/"
        slow_body = _raw(
            listener.port,
            b"POST "
            + path
            + b" HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % listener.port
            + b"content-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        )
        answer = _answer_of(slow_body)
        slow_body.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"did not arrive within 1 s" in answer
        still_answers(listener)
    finally:
        listener.program.stop()


@pytest.mark.parametrize("kind", ["mcp", "a2a"])
@pytest.mark.parametrize("address", ["0.0.0.0", "[::]", "192.0.2.10"])
def test_listening_beyond_loopback_without_a_token_is_refused(
    kind: str, address: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe (item 3): on 0.0.0.0 or a LAN address the proxies had no protection and no
    token. Without --token they now refuse to start: one line naming --token, exit 2,
    before connecting to the core (run in process: a usage error needs no process)."""
    command = "mcp-proxy" if kind == "mcp" else "a2a-proxy"
    monkeypatch.delenv("SIMPLEX_RPC_TOKEN", raising=False)
    status, stderr = usage_error(
        capsys,
        *(command, "--core", "ws://127.0.0.1:9"),
        *("--listen", f"{address}:0", "simplex:/contact#/?v=2&smp=x"),
    )
    assert status == 2, stderr
    assert stderr.count("\n") == 1 and "--token" in stderr, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("kind", ["mcp", "a2a"])
def test_a_wildcard_listener_with_a_token(network: Network, kind: str, tmp_path: Path) -> None:
    """On 0.0.0.0 with --token @FILE: a request without the token, or with another, is 401;
    with it, a rebinding page's Host is still 421 (the token does not replace the Host
    check: a browser may hold it); an IP address of the machine is served. The token
    appears in no output."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    listener = start(
        kind, network.url, network.link, "--listen", "0.0.0.0:0", "--token", f"@{token_file}"
    )
    try:
        body, headers = honest_request(listener)
        url = f"http://127.0.0.1:{listener.port}" + ("/mcp" if kind == "mcp" else "/")
        assert httpx.post(url, json=body, headers=headers, timeout=30).status_code == 401
        wrong = {**headers, "authorization": "Bearer " + TOKEN[::-1]}
        assert httpx.post(url, json=body, headers=wrong, timeout=30).status_code == 401
        bearer = {"authorization": f"Bearer {TOKEN}"}
        name = f"attacker.example:{listener.port}"
        rebound = {**headers, **bearer, "host": name, "origin": f"http://{name}"}
        assert httpx.post(url, json=body, headers=rebound, timeout=30).status_code == 421
        if kind == "a2a":  # the card too
            card = f"http://127.0.0.1:{listener.port}/.well-known/agent-card.json"
            assert httpx.get(card, timeout=30).status_code == 401
            assert httpx.get(card, headers=bearer, timeout=30).status_code == 200
        local = Listener(kind, listener.program, url.removesuffix("/"))
        still_answers(local, bearer)
    finally:
        listener.program.stop()
    seen = listener.program.seen["err"] + listener.program.seen["out"]
    assert not any(TOKEN in line for line in seen)


def test_the_token_from_the_environment(network: Network, process: ProcessFactory) -> None:
    """SIMPLEX_RPC_TOKEN instead of --token @FILE, here on a loopback a2a-proxy: a token
    given, even on loopback, is required."""
    listener = start(
        "a2a", network.url, network.link, env={"SIMPLEX_RPC_TOKEN": TOKEN}, process=process
    )
    body, headers = honest_request(listener)
    assert httpx.post(listener.endpoint, json=body, headers=headers).status_code == 401
    still_answers(listener, {"authorization": f"Bearer {TOKEN}"})


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--token", TOKEN], "give the token as @FILE"),
        (["--token", "@/nonexistent/token"], "cannot read"),
        (["--allow-origin", "not an origin"], "--allow-origin"),
        (["--allow-host", "a/b"], "--allow-host"),
    ],
)
def test_bad_listener_options_are_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, stderr = usage_error(capsys, "a2a-proxy", "--core", "ws://127.0.0.1:9", *argv, "x")
    assert status == 2
    assert stderr.count("\n") == 1 and says in stderr, stderr
    assert TOKEN not in stderr


def test_mcp_proxy_on_127_0_0_2_keeps_its_rebinding_protection(
    network: Network, process: ProcessFactory
) -> None:
    """The probe (item 3): the MCP SDK protects only 127.0.0.1, localhost and ::1, so on
    127.0.0.2 a rebinding page got through. 127.0.0.2 is loopback (no token needed) and
    its Host is checked like any other."""
    try:
        socket.create_server(("127.0.0.2", 0)).close()
    except OSError:
        pytest.skip("this machine has no 127.0.0.2")
    listener = start(
        "mcp", network.url, network.link, "--listen", "127.0.0.2:0", process=process
    )
    name = f"attacker.example:{listener.port}"
    rebound = {**MCP_HEADERS, "host": name, "origin": f"http://{name}"}
    reply = httpx.post(listener.url, json=INITIALIZE, headers=rebound, timeout=30)
    assert reply.status_code == 421
    still_answers(listener)


def test_listener_options_without_listen_are_one_line_for_mcp_proxy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mcp-proxy serves stdio unless --listen: a token or allow-list there would protect
    nothing, so it is a usage error rather than ignored."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    status, stderr = usage_error(
        capsys, "mcp-proxy", "--core", "ws://127.0.0.1:9", "--token", f"@{token_file}", "target"
    )
    assert status == 2
    assert stderr.count("\n") == 1 and "go with --listen" in stderr

"""Errors with a cause and a next step (issue 30, item 2).

A connection that cannot be opened says what was at the address (nothing
listening, a name that does not resolve, an HTTP server that is not a chat
core, TLS where the core serves plain ws://), never an exception's class.
The core's errors a user meets (simplex-chat ``invalidConnReq``,
``contactNotFound``; simplexmq ``A_SERVICE ASETimeout``, ``ASENotDRAddress``)
are one sentence and a hint, with the tag path kept at the end. One table
(``simplex_rpc.adapter._explain``) words them for every command.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from _cli_serving import serving
from simplex_rpc.adapter import ChatCore
from simplex_rpc.adapter._core import _core_error
from simplex_rpc.adapter._explain import CORE_ERRORS
from simplex_rpc.cli import main
from simplex_rpc.errors import ChatCoreError


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_404() -> AsyncIterator[int]:
    """An HTTP server that is not a chat core: every request gets 404."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4096)  # a request, or a TLS ClientHello
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def failure(url: str) -> str:
    with pytest.raises(ChatCoreError) as caught:
        async with ChatCore.connect(url, open_timeout=5):
            pass
    return str(caught.value)


@pytest.mark.anyio
async def test_nothing_listening() -> None:
    port = closed_port()
    message = await failure(f"ws://127.0.0.1:{port}/x")
    assert f"nothing listens on 127.0.0.1:{port}" in message
    assert "Error" not in message  # no exception class names


@pytest.mark.anyio
async def test_not_a_chat_core_and_tls_to_a_plain_server() -> None:
    async with http_404() as port:
        message = await failure(f"ws://127.0.0.1:{port}/")
        assert "not a chat core: the server answered HTTP 404" in message
        message = await failure(f"wss://127.0.0.1:{port}/")
        assert "TLS" in message and "ws://" in message, message


@pytest.mark.anyio
async def test_a_name_that_does_not_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup is made to fail here, as a resolver answers for such a name (tests talk
    only to loopback)."""

    def no_such_host(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    message = await failure("ws://no-such-host.invalid:5225")
    assert "cannot resolve no-such-host.invalid" in message


def service_error(tag: str) -> dict[str, object]:
    # simplexmq: A_SERVICE {serviceError :: AgentServiceError}, an SMPAgentError.
    agent_err = {"type": "A_SERVICE", "serviceError": {"type": tag}}
    return {"type": "errorAgent", "agentError": {"type": "AGENT", "agentErr": agent_err}}


@pytest.mark.parametrize(
    ("error", "path"),
    [
        ({"type": "error", "errorType": {"type": "invalidConnReq"}}, "error/invalidConnReq"),
        (
            {"type": "errorStore", "storeError": {"type": "contactNotFound", "contactId": 9}},
            "errorStore/contactNotFound",
        ),
        (service_error("ASETimeout"), "errorAgent/AGENT/A_SERVICE/ASETimeout"),
        (service_error("ASENotDRAddress"), "errorAgent/AGENT/A_SERVICE/ASENotDRAddress"),
    ],
)
def test_core_errors_a_user_meets_are_a_sentence_and_a_hint(error: object, path: str) -> None:
    message = str(_core_error("/_service_request", error))
    sentence, hint = CORE_ERRORS[path.rsplit("/", 1)[-1]]
    assert message == f"chat core refused /_service_request: {sentence}; {hint} [{path}]"
    assert message.endswith(f"[{path}]")  # the tag stays, for searching


def test_an_unknown_core_error_keeps_its_path_and_detail() -> None:
    error = {"type": "error", "errorType": {"type": "commandError", "message": "bad"}}
    assert str(_core_error("/x", error)) == "chat core refused /x: error/commandError (bad)"


def test_the_cli_prints_them_as_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    assert main(["call", "--core", f"ws://127.0.0.1:{port}", "simplex:/a#x", "echo", "1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"simplex-rpc call: cannot connect to the chat core at ws://127.0.0.1:{port}: nothing"
        f" listens on 127.0.0.1:{port} (start it with simplex-chat -p PORT, or check --core)\n"
    )
    with serving("--echo") as bg:
        capsys.readouterr()
        assert main(["call-chat", "--core", f"{bg.url}/alice", "@9", "echo", "{}"]) == 2
        err = capsys.readouterr().err
        assert "no such contact" in err and err.rstrip().endswith("[errorStore/contactNotFound]")
        assert main(["call", "--core", f"{bg.url}/alice", "simplex:/nowhere", "echo", "{}"]) == 2
        err = capsys.readouterr().err
        assert "not a SimpleX contact address link" in err and "[error/invalidConnReq]" in err

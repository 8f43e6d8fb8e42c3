"""The I/O edge, issue 21 item 4: no credential, parameter value or key in any log or repr.

The rule pinned (issue 21): "No log line at any level, and no repr or
exception text, holds a service parameter's value or a credential. Key
material is already redacted; keep it so." The A2A binding sends credentials
as service parameters (``"Authorization": "Bearer ..."``); they travel in
``/_service_request``, in the ``serviceRequest`` event, in ``/_send`` of a
``/_call a2a`` and in its ``newChatItems``, and are logged by the adapter
and by the simulator.

Every level of every logger is captured while signed, unsigned,
A2A-with-credential and ``/_call`` traffic runs through the simulator; no
captured line, and no repr of what a handler is given (``ServiceRequest``,
``Request``, ``IncomingCall``), holds a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from _redaction import TENANT, TOKEN, every_level, secrets_of
from simplex_rpc import Request, SigningKey, a2a
from simplex_rpc.adapter import ChatCore, IncomingCall, ReplySink, ServiceRequest
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.edge

COOKIE = "session=COOKIE-77d3aa"


def credential_request(n: int) -> dict[str, Any]:
    """An A2A JSON-RPC request whose service parameters carry a credential."""
    return a2a.make_request(
        "SendMessage",
        {"message": {"role": "ROLE_USER", "parts": [{"text": f"hello {n}"}], "messageId": f"m{n}"}},
        id=n,
        parameters={"Authorization": f"Bearer {TOKEN}", "X-Tenant": TENANT, "Cookie": COOKIE},
    )


@pytest.mark.anyio
async def test_no_log_line_at_any_level_and_no_repr_holds_a_credential_or_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = SigningKey.generate()
    reprs: list[str] = []
    texts: list[str] = []

    async def rpc_handler(request: ServiceRequest) -> Any:
        reprs.extend([repr(request), str(request), repr(request.request)])
        texts.append(json.dumps(request.request.request))  # the handler does see them
        if request.request.protocol == "a2a":
            return {"jsonrpc": "2.0", "id": request.request.request["id"], "result": {"ok": 1}}
        return {"ok": request.request.request}

    async def call_handler(call: IncomingCall, send: ReplySink) -> str:
        reprs.extend([repr(call), str(call)])
        texts.append(json.dumps(call.request))
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {"ok": 1}})

    with every_level() as captured:
        async with (
            CoreSimulator() as sim,
            ChatCore.connect(sim.url_for("bob")) as bob,
            ChatCore.connect(sim.url_for("alice")) as alice,
        ):
            assert await bob.start(service_requests=True)
            link = (await bob.service_address(1)).link
            assert await alice.start(service_requests=False)
            direct, _ = sim.connect("alice", "bob")
            serving_ready, calls_ready = asyncio.Event(), asyncio.Event()
            serving = asyncio.create_task(
                bob.serve(1, rpc_handler, protocols=["mcp", "a2a"], ready=serving_ready)
            )
            calls = asyncio.create_task(
                bob.serve_calls(1, {"a2a": call_handler}, ready=calls_ready)
            )
            await serving_ready.wait()
            await calls_ready.wait()
            try:
                # unsigned and signed MCP requests
                for n in range(3):
                    await alice.service_request(1, link, Request(protocol="mcp", request={"n": n}))
                    signed = Request(protocol="mcp", request={"n": n}, request_key=key.public_key)
                    await alice.service_request(1, link, signed, sign_key=key)
                # A2A with credentials over Service RPC, unsigned and signed
                for n in range(3):
                    await alice.service_request(
                        1, link, Request(protocol="a2a", request=credential_request(n))
                    )
                    await alice.service_request(
                        1,
                        link,
                        Request(
                            protocol="a2a",
                            request=credential_request(10 + n),
                            request_key=key.public_key,
                        ),
                        sign_key=key,
                    )
                # /_call a2a with credentials in a direct chat
                for n in range(2):
                    replies = await alice.call(f"@{direct}", "a2a", credential_request(20 + n))
                    assert replies, "the /_call was answered"
            finally:
                for task in (serving, calls):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
    assert texts and any(TOKEN in t for t in texts), "the handlers see the credential"
    assert len(captured.lines) > 20, "DEBUG lines were captured"
    assert any("websockets" in line for line in captured.lines)
    forbidden = secrets_of(key)
    for line in captured.lines:
        for secret in forbidden:
            assert secret not in line, (secret, line[:400])
    assert reprs
    for text in reprs:
        for secret in forbidden:
            assert secret not in text, (secret, text[:400])


def test_the_reprs_name_the_request_not_its_content() -> None:
    """``Request``, ``ServiceRequest`` and ``IncomingCall`` reprs hold no parameter value."""
    request = Request(protocol="a2a", request=credential_request(1))
    service_request = ServiceRequest(request_id="r1", signer=None, request=request, user_id=1)
    call = IncomingCall(
        protocol="a2a",
        request=credential_request(2),
        chat="@5",
        sender="alice",
        member=None,
        item_id=9,
        caller=a2a.Caller(chat="@5"),
        user_id=1,
    )
    for value in (request, service_request, call):
        for text in (repr(value), str(value)):
            assert TOKEN not in text and TENANT not in text and "COOKIE-77d3aa" not in text
            assert "a2a" in text  # still says what it is
    assert "r1" in repr(service_request) and "@5" in repr(call)


def test_redact_removes_credentials_in_every_form_the_library_logs() -> None:
    """``redact`` (the one redaction function every log line passes through) knows the
    credentials of A2A service parameters as the command text, the event, and the
    escaped JSON of a ``/_send`` carry them."""
    from simplex_rpc._wire.redact import redact

    params = {"Authorization": f"Bearer {TOKEN}", "X-Tenant": TENANT}
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "a2a-service-parameters": params})
    command = f"/_service_request 1 simplex:/a#x timeout=30 {json.dumps({'request': request})}"
    call = "/_call a2a " + request
    send = "/_send @5 json " + json.dumps([{"msgContent": {"type": "text", "text": call}}])
    frame = json.dumps({"corrId": "3", "cmd": send})
    for text in (
        request,
        command,
        call,
        send,
        frame,
        f"Authorization: Bearer {TOKEN}",
        f'"authorization": "Bearer {TOKEN}"',
    ):
        cleaned = redact(text)
        assert TOKEN not in cleaned and TENANT not in cleaned, cleaned

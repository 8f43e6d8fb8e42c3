"""The native transport: the same ChatCore over a native handle (chat_send_cmd,
chat_recv_msg_wait; results {"result": ...} or {"error": ...}).

The ``simplex-chat`` package downloads its library at run time from outside
the registries, so these tests use the simulator's native handle, scripted
fake handles, and a fake ctypes library for LibsimplexHandle's C glue.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import sys
import threading
from typing import Any

import pytest

import simplex_rpc as sx
from _support import background_serve
from simplex_rpc import Request, Response
from simplex_rpc.adapter import ChatCore, ChatCoreClosed, LibsimplexHandle, ServiceRequest
from simplex_rpc.errors import ChatCoreError
from simplex_rpc.testing import CoreSimulator


@pytest.mark.anyio
async def test_round_trip_with_a_native_responder_and_requester() -> None:
    """Service RPC over the native API: the responder and the requester each on a handle."""
    key = sx.SigningKey.generate()

    def handler(request: ServiceRequest) -> Any:
        return {"echo": request.request.request, "signed": request.signer == key.public_key}

    async with (
        CoreSimulator() as sim,
        ChatCore.native(sim.native_handle("bob"), poll_us=20_000) as bob,
        ChatCore.native(sim.native_handle("alice"), poll_us=20_000) as alice,
    ):
        assert await bob.start(service_requests=True)
        link = (await bob.service_address(1)).link
        await alice.start(service_requests=False)
        async with background_serve(bob, handler, protocols=["mcp"]):
            signed = await alice.service_request(
                1, link, Request(protocol="mcp", request=[1]), sign_key=key, timeout=5
            )
            unsigned = await alice.service_request(1, link, Request(protocol="mcp", request=[2]))
            assert signed == Response.success({"echo": [1], "signed": True})
            assert unsigned == Response.success({"echo": [2], "signed": False})
            many = await asyncio.gather(
                *(
                    alice.service_request(1, link, Request(protocol="mcp", request=n))
                    for n in range(30)
                )
            )
            assert [r.response["echo"] for r in many] == list(range(30))
            with pytest.raises(ChatCoreError) as info:
                await alice.command("/_show_address 1")
            assert info.value.type_path == "errorStore/userContactLinkNotFound"


class ScriptedHandle:
    """A fake native handle: answers from a table, events from a list."""

    def __init__(self, answers: dict[str, str], events: list[str] | None = None) -> None:
        self.answers = answers
        self.events = list(events or [])
        self.closed = False
        self.sent: list[str] = []
        self.gate = threading.Event()  # events flow once the test has subscribed
        self._lock = threading.Lock()

    def chat_send_cmd(self, cmd: str) -> str:
        self.sent.append(cmd)
        answer = self.answers[cmd]
        if answer == "raise":
            raise OSError("library failure")
        return answer

    def chat_recv_msg_wait(self, wait_us: int) -> str:
        if not self.gate.wait(wait_us / 1e6):
            return ""
        with self._lock:
            if self.events:
                event = self.events.pop(0)
                if event == "raise":
                    raise OSError("receive failure")
                return event
        threading.Event().wait(wait_us / 1e6)
        return ""

    def close(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_native_results_and_errors() -> None:
    handle = ScriptedHandle(
        {
            "/ok": json.dumps({"result": {"type": "cmdOk"}}),
            "/err": json.dumps({"error": {"type": "error", "errorType": {"type": "noActiveUser"}}}),
            "/junk": "not json",
            "/raise": "raise",
        }
    )

    async with ChatCore.native(handle, poll_us=1000) as core:
        assert await core.command("/ok") == {"type": "cmdOk"}
        with pytest.raises(ChatCoreError) as info:
            await core.command("/err")
        assert info.value.chat_error == {"type": "error", "errorType": {"type": "noActiveUser"}}
        with pytest.raises(ChatCoreError, match="invalid chat_send_cmd result"):
            await core.command("/junk")
        with pytest.raises(ChatCoreError, match="OSError"):
            await core.command("/raise")
    assert handle.closed
    with pytest.raises(ChatCoreClosed):
        await core.command("/ok")


@pytest.mark.anyio
async def test_native_events_and_event_errors() -> None:
    handle = ScriptedHandle(
        {},
        [
            json.dumps({"result": {"type": "contactConnected"}}),
            "not json",
            json.dumps({"error": {"type": "errorStore", "storeError": {"type": "x"}}}),
            json.dumps({"result": {"no": "type"}}),
            json.dumps({"result": {"type": "last"}}),
        ],
    )

    async with ChatCore.native(handle, poll_us=1000) as core:
        stream = core.events()
        handle.gate.set()
        types = []
        async for event in stream:
            types.append(event["type"])
            if event["type"] == "last":
                break
        # An error result is the ChatError event; invalid results are dropped.
        assert types == ["contactConnected", "chatError", "last"]


@pytest.mark.anyio
async def test_a_failing_receive_loses_the_connection() -> None:
    handle = ScriptedHandle({}, ["raise"])

    async with ChatCore.native(handle, poll_us=1000) as core:
        stream = core.events()
        handle.gate.set()
        with pytest.raises(ChatCoreClosed, match="chat_recv_msg_wait"):
            async for _ in stream:
                pass
        assert core.closed


# -- LibsimplexHandle's C glue, over a fake library ----------------------------------------


class FakeLib:
    """Returns NUL-terminated strings the way libsimplex does: pointers the caller frees."""

    def __init__(self) -> None:
        self.buffers: dict[int, Any] = {}
        self.freed: list[int] = []
        self.calls: list[tuple[str, Any]] = []

    def _string(self, text: str) -> int:
        buffer = ctypes.create_string_buffer(text.encode("utf-8"))
        address = ctypes.addressof(buffer)
        self.buffers[address] = buffer
        return address

    def free(self, pointer: ctypes.c_void_p) -> None:
        assert pointer.value in self.buffers
        self.freed.append(pointer.value)

    def chat_send_cmd(self, ctrl: int, cmd: bytes) -> int:
        self.calls.append(("send", (ctrl, cmd)))
        if cmd == b"/null":
            return 0
        return self._string(json.dumps({"result": {"type": "cmdOk", "cmd": cmd.decode()}}))

    def chat_recv_msg_wait(self, ctrl: int, wait: int) -> int:
        self.calls.append(("recv", (ctrl, wait)))
        return self._string("")

    def chat_close_store(self, ctrl: int) -> int:
        self.calls.append(("close", ctrl))
        return self._string("")


def test_libsimplex_handle_copies_and_frees_every_string() -> None:
    lib = FakeLib()
    handle = LibsimplexHandle(lib, lib.free, ctrl=77)
    assert json.loads(handle.chat_send_cmd("/_start main=on é")) == {
        "result": {"type": "cmdOk", "cmd": "/_start main=on é"}
    }
    assert handle.chat_recv_msg_wait(500) == ""
    with pytest.raises(ChatCoreError, match="null pointer"):
        handle.chat_send_cmd("/null")
    handle.close()
    handle.close()  # once only
    assert handle.chat_recv_msg_wait(1) == ""
    with pytest.raises(ChatCoreClosed):
        handle.chat_send_cmd("/x")
    assert sorted(lib.freed) == sorted(lib.buffers)  # every returned string freed, once
    assert ("send", (77, b"/_stop")) in lib.calls and ("close", 77) in lib.calls
    assert "closed" in repr(handle)


def test_libsimplex_handle_without_the_package_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The test extra installs simplex-chat (for its types, tests/testing/test_simulator_records.py);
    # opening it would download its library, so the package is hidden here.
    monkeypatch.setitem(sys.modules, "simplex_chat", None)
    monkeypatch.setitem(sys.modules, "simplex_chat._native", None)
    with pytest.raises(ChatCoreError, match=r"simplex-rpc\[native\]"):
        LibsimplexHandle.open("/tmp/nowhere")

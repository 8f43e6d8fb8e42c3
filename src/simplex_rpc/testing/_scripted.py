"""A scripted chat core on the loopback, for faults the simulator never makes.

:class:`ScriptedCore` is a WebSocket server that speaks the chat core's frames
(``{"corrId", "cmd"}`` in, ``{"corrId", "resp"}`` and events ``{"resp"}`` out;
simplex-chat ``bots/README.md``), but sends exactly the text a test gives it:
frames that are not strict JSON, a ``userId`` of ``true``, the same ``requestId``
twice, an answer that never comes. It records every command and, for
``/_service_response``, every answer per ``requestId``.

It takes any number of connections, as the chat core does (simplex-chat
``apps/simplex-chat/Server.hs``): each runs one command at a time (answered
before the next is read), and each event is sent on one connection: the first
open one, or the one a test names (``connection=``), so that a test can deliver
events on the connection it chooses, in the order it chooses. A raw answer of None
is an answer lost on its way (the connection goes on with the next command); a
``silent`` command is one the core never finishes by itself, which holds its
connection until the test answers it (:meth:`ScriptedCore.answer_silent`).

Unlike :class:`~simplex_rpc.testing.CoreSimulator` it models nothing: no users,
no addresses, no requests between cores. It is the test suite's scripted core.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, Self

#: How the core accepts a response: ``serviceReplyAccepted``, as ``CoreSimulator`` answers.
ACCEPTED: dict[str, Any] = {
    "type": "serviceReplyAccepted",
    "user": {"userId": 1},
    "connectionId": "c",
}

RawAnswer = Callable[[str, str], str | Awaitable[str | None] | None]
"""A raw answer: (corrId, command text) to the frame's text, or None for no answer; an
async one runs before the answer is sent, on the command's connection (which reads
nothing meanwhile, as the core's), so it can send frames of its own first."""


class ScriptedCore:
    """A scripted chat core on the loopback; use as ``async with ScriptedCore() as core:``.

    How a command ``name`` is answered, first rule that applies:

    * ``silent`` holds it: nothing is answered until :meth:`answer_silent`, and its
      connection reads no other command meanwhile;
    * ``raw[name]`` gives the raw text of the answer (None: an answer lost), as a
      function or an async function of (corrId, command text);
    * ``replies[name]`` gives the ``resp`` object (or a function of the command text
      returning it);
    * otherwise ``cmdOk``, or ``serviceReplyAccepted`` for ``/_service_response``.

    ``answers`` collects each ``/_service_response``'s envelope by ``requestId``, in
    order (``responses`` is the same record under a name no subclass reuses).
    """

    def __init__(self, *, max_size: int | None = None, host: str = "127.0.0.1") -> None:
        self.commands: asyncio.Queue[str] = asyncio.Queue()
        self.responses: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        self.answer_order: list[str] = []
        self.answered = asyncio.Condition()
        self.raw: dict[str, RawAnswer] = {}
        self.replies: dict[str, Any] = {}
        self.silent: set[str] = set()
        self.connected = asyncio.Event()
        #: The open connections, in the order they were opened.
        self.connections: list[Any] = []
        self._server: Any = None
        self._max_size = max_size
        self._host = host
        # The silent commands held, by corrId: answered when the test says so.
        self._held: dict[str, asyncio.Future[Any]] = {}

    @property
    def answers(self) -> defaultdict[str, list[dict[str, Any]]]:
        """Each ``/_service_response``'s envelope by ``requestId``, in order."""
        return self.responses

    async def __aenter__(self) -> Self:
        from websockets.asyncio.server import serve

        self._server = await serve(self._handle, self._host, 0, max_size=self._max_size)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://{self._host}:{port}"

    def answer(self, cmd: str) -> Any:
        """The ``resp`` answering ``cmd``: from ``replies``, or the default."""
        name = cmd.split(" ", 1)[0]
        if name in self.replies:
            reply = self.replies[name]
            return reply(cmd) if callable(reply) else reply
        return ACCEPTED if name == "/_service_response" else {"type": "cmdOk"}

    def _default(self, corr_id: str, cmd: str) -> str:
        return json.dumps({"corrId": corr_id, "resp": self.answer(cmd)})

    async def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self.connections.append(ws)
        self.connected.set()
        try:
            await self._commands(ws)
        except ConnectionClosed:
            pass
        finally:
            self.connections.remove(ws)

    async def _commands(self, ws: Any) -> None:
        async for message in ws:
            msg = json.loads(message)
            corr_id, cmd = str(msg["corrId"]), msg["cmd"]
            await self.commands.put(cmd)
            if cmd.startswith("/_service_response "):
                _, _user, request_id, payload = cmd.split(" ", 3)
                async with self.answered:
                    self.responses[request_id].append(json.loads(payload))
                    self.answer_order.append(request_id)
                    self.answered.notify_all()
            if cmd.split(" ", 1)[0] in self.silent:
                await self._hold(ws, corr_id)
                continue
            answer = self.raw.get(cmd.split(" ", 1)[0], self._default)(corr_id, cmd)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                await ws.send(answer)

    async def _hold(self, ws: Any, corr_id: str) -> None:
        """Hold a silent command: this connection runs nothing else until the test
        answers it or the connection closes."""
        held = asyncio.get_running_loop().create_future()
        self._held[corr_id] = held
        closed = asyncio.ensure_future(ws.wait_closed())
        await asyncio.wait([held, closed], return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        if held.done() and held.result() is not None:
            await ws.send(json.dumps({"corrId": corr_id, "resp": held.result()}))

    def answer_silent(self, corr_id: str, resp: dict[str, Any] | None) -> None:
        """Answer the held silent command ``corr_id`` with ``resp`` (None: the test sent its
        answer itself, with :meth:`send_raw`); its connection goes on."""
        self._held.pop(corr_id).set_result(resp)

    async def send_raw(self, text: str, connection: int = 0) -> None:
        """Send one frame, exactly this text, on the ``connection``-th open connection."""
        await self.connected.wait()
        await self.connections[connection].send(text)

    async def event(self, resp: dict[str, Any], connection: int = 0) -> None:
        """Send one event, ``{"resp": resp}``, on the ``connection``-th open connection."""
        await self.send_raw(json.dumps({"resp": resp}), connection)

    async def wait_answers(self, count: int, within: float = 10.0) -> list[str]:
        """Wait until ``count`` answers came; return the requestIds in the order answered.

        ``within`` is generous (the rules say "at once"): past it, the answers that
        did come are named in an AssertionError.
        """
        try:
            async with asyncio.timeout(within), self.answered:
                await self.answered.wait_for(lambda: len(self.answer_order) >= count)
        except TimeoutError:
            raise AssertionError(
                f"{count} answers expected, {len(self.answer_order)} came: {self.answer_order}"
            ) from None
        return list(self.answer_order)

    async def close_connection(self, code: int = 1011) -> None:
        """Close every connection abnormally, as a crashed core would."""
        for ws in list(self.connections):
            await ws.close(code=code)

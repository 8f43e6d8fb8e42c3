"""The simulator's WebSocket server: one chat client connection as ``Server.hs`` runs it.

``apps/simplex-chat/Server.hs`` (simplex-chat/simplex-chat, commit 00cde8a4) runs
four threads per connection, raced (``raceAny_``: when one ends, all end), over
two queues of ``clientQSize = 1``:

* ``receive`` reads a frame; a frame that is not a request is answered
  ``"invalid request"`` (no ``corrId``), a command the parser refuses is answered
  with the parser's error, both straight into ``sndQ``; a command that parses goes
  into ``rcvQ``, and ``receive`` waits (reading nothing more) while ``rcvQ`` is full;
* ``client`` takes one command at a time from ``rcvQ``, runs it to its end, and
  writes the response to ``sndQ``: the next command of this connection starts only
  then, so a ``/_service_request`` holds its connection until the response or the
  timeout;
* ``output`` takes events from the core's one ``outputQ`` (shared by every
  connection of the core: an event goes to the one connection that takes it) into
  ``sndQ``;
* ``send`` writes ``sndQ`` to the socket.

When the connection closes, the command in progress is cancelled and the event
``output`` holds, or ``sndQ`` holds, is lost: no other connection gets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Final

from .._wire.redact import RedactingLogger, show
from . import _grammar as g
from ._chat import _chat_error, unknown_command
from ._model import CoreModel, Session

CLIENT_Q_SIZE: Final = 1
"""``clientQSize`` of ``defaultChatServerConfig`` (Server.hs)."""
WS_READ_AHEAD: Final = 1
"""Frames the WebSocket library may read ahead of ``receive``: Network.WebSockets reads
the socket only when ``receive`` asks, so while ``receive`` waits the socket is not read
(nor are pings answered, they are read with the frames)."""

log = RedactingLogger(logging.getLogger("simplex_rpc.testing"))


def frame(message: dict[str, Any]) -> str:
    """JSON text of a message to a client: UTF-8 as the core sends it, escaped where a
    string holds a lone surrogate (which UTF-8 cannot carry)."""
    text = json.dumps(message, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message)
    return text


async def serve_connection(model: CoreModel, ws: Any, session: Session) -> None:
    """Serve one client connection of ``session``'s core until it closes."""
    from websockets.exceptions import ConnectionClosed

    rcv_q: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=CLIENT_Q_SIZE)
    snd_q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=CLIENT_Q_SIZE)
    output = session.core.output

    async def send() -> None:
        while True:
            message = await snd_q.get()
            await ws.send(frame(message))

    async def client() -> None:
        while True:
            corr_id, cmd = await rcv_q.get()
            resp, steps = await model.command(session, cmd)
            await snd_q.put({"corrId": corr_id, "resp": resp})
            for step in steps:
                await step()

    async def output_events() -> None:
        while True:
            event = await output.get()
            await snd_q.put({"resp": event})

    async def receive() -> None:
        async for message in ws:
            request = g.request_of(message)
            if request is None:
                log.warning("simulator: not a command: %s", show(message))
                # Server.hs: Nothing -> sendError Nothing Nothing "invalid request".
                await snd_q.put({"resp": _chat_error("commandError", message="invalid request")})
                continue
            corr_id, cmd = request
            if not g.parses(cmd):
                # Left e -> sendError (Just corrId) remoteHostId e: answered here, so it
                # can overtake the command in progress.
                await snd_q.put({"corrId": corr_id, "resp": unknown_command()})
                continue
            await rcv_q.put((corr_id, cmd))

    tasks = [asyncio.create_task(job()) for job in (send, client, output_events, receive)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.cancelled():
                continue
            exc = task.exception()
            if exc is not None and not isinstance(exc, ConnectionClosed):
                log.error("simulator: connection failed", exc_info=exc)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

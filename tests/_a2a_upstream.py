"""An A2A agent built with a2a-sdk, served over its JSON-RPC HTTP binding under uvicorn.

The upstream of the gateway tests (``simplex-rpc serve --a2a-url``) and the
direct baseline of the a2a-proxy benchmark. Run as a program it binds
127.0.0.1 on a free port (or ``--port``), prints ``listening: http://HOST:PORT``
once it accepts connections, and serves until killed:

* ``GET /.well-known/agent-card.json``: its Agent Card (one JSON-RPC interface);
* ``POST /``: the A2A JSON-RPC binding (the SDK's dispatcher);
* ``GET /seen``: the headers and body of every JSON-RPC request it received, in order,
  so that a test can read what a gateway sent it;
* ``POST /moved``: a redirect (307) to :data:`INTERNAL_TARGET`, an address the
  gateway's callers must never see.

``--host`` binds another loopback address (``127.0.0.2``: another origin);
``--card-url URL`` lists URL as the card's JSON-RPC interface instead of its own.

The agent quotes anvils; the first word of a message picks what it does:
``hello`` answers with a Message, ``ask`` asks for input (the interrupted
state ``TASK_STATE_INPUT_REQUIRED``), anything else makes a task that works,
adds an artifact and completes: at once for ``instant`` (the benchmark),
after 30 s for ``slow``, after 50 ms otherwise.

:func:`build_handler` gives the same agent as a ``RequestHandler`` for
``simplex-rpc serve --a2a-module tests/_a2a_upstream.py:build_handler``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from typing import Any

from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

ANSWER = "Two anvils to Lisbon: 240 EUR."
INTERNAL_TARGET = "http://10.255.0.1:9/internal/moved-here"


class AnvilAgent(AgentExecutor):
    """Quotes anvils. The first word of the text picks the behaviour.

    ``hello``: a message, no task. ``hang``: never answers. ``ask``: a task that
    needs input. ``slow``: a task that works 30 s. ``instant``: the answer at once.
    ``big N``: an answer of N bytes. Anything else: a task that works ``work``
    seconds, then answers. ``headers_seen`` records each call's HTTP headers (as
    the SDK's call context holds them). This one agent serves the program below and
    the in-process bridge tests (tests/_a2a.py).
    """

    def __init__(self, work: float = 0.0) -> None:
        self.work = work
        self.headers_seen: list[dict[str, str]] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = get_message_text(context.message)
        self.headers_seen.append(dict(context.call_context.state.get("headers", {})))
        word, _, rest = text.partition(" ")
        if word == "hello":
            await event_queue.enqueue_event(
                pb.Message(
                    message_id="r-1",
                    role=pb.ROLE_AGENT,
                    parts=[new_text_part("Hello from Acme")],
                    context_id=context.context_id,
                )
            )
            return
        if word == "hang":
            await asyncio.Event().wait()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if word == "ask":
            await updater.requires_input(
                updater.new_agent_message([new_text_part("Which street in Lisbon?")])
            )
            return
        if word == "slow":
            await asyncio.sleep(30)  # the behaviour under test: past a Service RPC deadline
        elif word not in ("instant", "big") and self.work:
            await asyncio.sleep(self.work)  # the behaviour under test: a task that works a while
        answer = "x" * int(rest) if word == "big" else ANSWER
        await updater.add_artifact([new_text_part(answer)])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(url: str) -> pb.AgentCard:
    """The agent's card: one JSON-RPC interface at ``url``, A2A 1.0, streaming."""
    card = pb.AgentCard(
        name="Acme anvils",
        description="Anvils, delivered",
        version="2.1",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    card.supported_interfaces.append(
        pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
    )
    card.capabilities.streaming = True
    card.skills.append(pb.AgentSkill(id="quote", name="Quote", description="Prices", tags=["x"]))
    return card


def build_handler(url: str = "http://127.0.0.1/") -> DefaultRequestHandler:
    """The agent behind the SDK's request handler, with an in-memory task store."""
    return DefaultRequestHandler(
        agent_executor=AnvilAgent(work=0.05),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card(url),
    )


class _Recorder:
    """ASGI middleware: keeps the headers and the body of every POST (the JSON-RPC requests)."""

    def __init__(self, app: ASGIApp, seen: list[dict[str, Any]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = None
        self.seen.append(
            {
                "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                "body": parsed,
            }
        )
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def build_app(url: str) -> Any:
    """The Starlette app of the SDK's card and JSON-RPC routes, plus ``GET /seen``."""
    seen: list[dict[str, Any]] = []
    card = agent_card(url)
    handler = DefaultRequestHandler(
        agent_executor=AnvilAgent(work=0.05), task_store=InMemoryTaskStore(), agent_card=card
    )

    async def show_seen(request: Request) -> JSONResponse:
        return JSONResponse(seen)

    async def moved(request: Request) -> RedirectResponse:
        return RedirectResponse(INTERNAL_TARGET, status_code=307)

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/"),
        Route("/seen", show_seen, methods=["GET"]),
        Route("/moved", moved, methods=["POST"]),
    ]
    return _Recorder(Starlette(routes=routes), seen)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--card-url", default=None)
    args = parser.parse_args(argv)
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # proto says TCP, and an accepted socket inherits it; without it each keep-alive
    # response waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()
    url = f"http://{host}:{port}"
    config = uvicorn.Config(
        build_app(args.card_url or f"{url}/"),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                return
            await asyncio.sleep(0.01)  # a poll's step: uvicorn has no started event
        print(f"listening: {url}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    sys.exit(main())  # type: ignore[func-returns-value]

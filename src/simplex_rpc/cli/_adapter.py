"""The ``call``, ``serve`` and ``call-chat`` subcommands: both transports through a chat core.

``simplex-rpc call --core ws://127.0.0.1:5225 --user 1 TARGET PROTOCOL JSON``
sends one request and prints the response envelope; ``simplex-rpc serve``
answers requests with an echo responder or an MCP server (``McpBridge``), and
with ``--chat`` answers ``/_call`` in conversations too.
``simplex-rpc call-chat --core URL CHAT PROTOCOL JSON`` sends one ``/_call``
and prints the replies as JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._wire.envelope import UNSET, Request
from .._wire.keys import SigningKey
from ..adapter import ChatCore, IncomingCall, RateLimit, ReplySink, ServiceRequest
from ..errors import KeyFormatError
from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    CliError,
    emit_json,
    load_json,
    positive_seconds,
    read_input,
    whole_number,
)

_positive_int = whole_number(1, "must be at least 1")
_non_negative_int = whole_number(0, "must not be negative")


def _grace(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be a non-negative number of seconds")
    return value


def _rate_limit(text: str) -> RateLimit:
    requests, sep, per = text.partition("/")
    try:
        return RateLimit(requests=int(requests), per=float(per) if sep else 60.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected REQUESTS/SECONDS, for example 10/60"
        ) from None


def _load_sign_key(spec: str) -> SigningKey:
    text = read_input(spec, what="--sign-key").strip()
    try:
        return SigningKey.decode(text)
    except KeyFormatError as exc:
        raise CliError(f"--sign-key: {exc}") from None


# -- call ---------------------------------------------------------------------


async def run_call(args: argparse.Namespace) -> int:
    """Send the request of ``args``; print the response; 0 for a success, 1 for an error."""
    request_value = load_json(args.json, what="JSON")
    sign_key = _load_sign_key(args.sign_key) if args.sign_key is not None else None
    version: Any = UNSET if args.version is None else load_json(args.version, what="--version")
    if args.request_key and sign_key is None:
        raise CliError("--request-key: needs --sign-key")
    request = Request(
        protocol=args.protocol,
        request=request_value,
        version=version,
        request_key=sign_key.public_key if args.request_key and sign_key is not None else None,
    )
    async with ChatCore.connect(args.core) as core:
        if args.start:
            # A core that is running already answers chatRunning and is unchanged.
            await core.start(service_requests=False)
        response = await core.service_request(
            args.user,
            args.target,
            request,
            timeout=args.timeout,
            sign_key=sign_key,
            retries=args.retries,
            max_retry_after=args.max_retry_after,
        )
    emit_json(response.to_dict())
    return EXIT_OK if response.ok else EXIT_INVALID


def _cmd_call(args: argparse.Namespace) -> int:
    return asyncio.run(run_call(args))


# -- serve --------------------------------------------------------------------


def echo_handler(request: ServiceRequest) -> Any:
    """The ``--echo`` responder: answers each request with its own ``request`` value."""
    return request.request.request


def load_object(spec: str) -> Any:
    """Import ``MODULE:NAME`` (a dotted module or a ``.py`` path) and return the attribute."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"--mcp-module: {spec!r} is not MODULE:NAME")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or loader_spec.loader is None:
                raise CliError(f"--mcp-module: cannot load {module_name!r}")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except CliError:
        raise
    except (ImportError, OSError) as exc:
        raise CliError(f"--mcp-module: cannot import {module_name!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise CliError(f"--mcp-module: {module_name!r} has no {attr!r}") from None


def _mcp_server(spec: str) -> Any:
    obj = load_object(spec)
    # A factory (for example ``build_server``) is called to make the server.
    if inspect.isfunction(obj):
        obj = obj()
    return obj


async def echo_call(call: IncomingCall, send: ReplySink) -> str:
    """The ``--echo`` bot in a conversation: the reply is the request itself.

    A JSON-RPC request (with ``"jsonrpc": "2.0"``) gets a JSON-RPC result of
    its own ``params`` with its id, so that a caller's answer ends.
    """
    request = call.request
    if request.get("jsonrpc") == "2.0":
        reply = {"jsonrpc": "2.0", "id": request.get("id"), "result": request.get("params", {})}
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(request, ensure_ascii=False, separators=(",", ":"))


async def _serving(
    core: ChatCore,
    args: argparse.Namespace,
    rpc_handler: Any,
    chat_handler: Any,
    protocols: list[str],
    options: dict[str, Any],
    ready: Callable[[], None],
) -> None:
    if args.declare:
        # Declared once, both transports, before either loop runs: the two
        # loops never write the profile (/_profile replaces it whole).
        versions = getattr(chat_handler, "supported", None)
        if not versions:
            raise CliError(
                "--declare: the echo responder serves no protocol versions to declare;"
                " declare an --mcp-module server"
            )
        await core._declare_transport(
            args.user,
            protocols,
            ("rpc", "chat") if args.chat else "rpc",
            dict.fromkeys(protocols, versions),
        )
    serve = core.serve(args.user, rpc_handler, protocols=protocols, **options)
    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(serve)
            if args.chat:
                tasks.create_task(
                    core.serve_calls(
                        args.user,
                        dict.fromkeys(protocols, chat_handler),
                        concurrency=args.concurrency,
                    )
                )
            # Ready once both loops listen: each takes its events in its first step,
            # so a request or a /_call sent after this is not missed.
            await asyncio.sleep(0)
            ready()
    except ExceptionGroup as group:
        # Both end together when the connection ends: report the first reason once.
        raise group.exceptions[0] from None


async def run_serve(
    args: argparse.Namespace, *, on_ready: Callable[[str], None] | None = None
) -> int:
    """Run the responder of ``args`` until cancelled or the connection ends."""
    rate_limit = args.rate_limit
    async with ChatCore.connect(args.core) as core:
        if args.start:
            await core.start(service_requests=True)
        link = ""
        if args.address:
            address = await core.service_address(args.user)
            link = address.link
        options: dict[str, Any] = {
            "concurrency": args.concurrency,
            "handler_timeout": args.deadline,
            "rate_limit": rate_limit,
            "max_queue": args.max_queue,
            "grace": args.grace,
        }
        def ready() -> None:
            # Printed once serving: a caller that waits for this line can call at once.
            if link:
                print(f"address: {link}", file=sys.stderr, flush=True)
            if on_ready is not None:
                on_ready(link)

        if args.echo:
            protocols = args.protocol or ["echo"]
            await _serving(core, args, echo_handler, echo_call, protocols, options, ready)
        from ..mcp import McpBridge

        server = _mcp_server(args.mcp_module)
        async with McpBridge(server, conversation_tools=args.conversation_tool) as bridge:
            await _serving(
                core, args, bridge.rpc_handler, bridge, args.protocol or ["mcp"], options, ready
            )
    return EXIT_OK  # pragma: no cover - serve returns only by raising


# -- call-chat ------------------------------------------------------------------


async def run_call_chat(args: argparse.Namespace) -> int:
    """Send one ``/_call``; print each reply as a JSON line; 0 with replies, 1 without."""
    request = load_json(args.json, what="JSON")
    if not isinstance(request, dict):
        raise CliError("JSON: the request must be a JSON object")
    count = 0
    async with ChatCore.connect(args.core) as core:
        if args.start:
            await core.start(service_requests=False)
        async for reply in core.call_stream(
            args.chat,
            args.protocol,
            request,
            member=args.member,
            wait=args.wait,
            user_id=args.user,
        ):
            count += 1
            line = {"sender": str(reply.sender), "ends": reply.ends, "text": reply.text}
            if reply.message is not None:
                line["message"] = reply.message
            print(json.dumps(line, ensure_ascii=False, separators=(",", ":")), flush=True)
    return EXIT_OK if count else EXIT_INVALID


def _cmd_call_chat(args: argparse.Namespace) -> int:
    return asyncio.run(run_call_chat(args))


def _cmd_serve(args: argparse.Namespace) -> int:
    return asyncio.run(run_serve(args))


# -- simulator ------------------------------------------------------------------


async def run_simulator(
    args: argparse.Namespace, *, on_ready: Callable[[str], None] | None = None
) -> int:
    """Run a CoreSimulator until cancelled; print its URL."""
    from ..testing import CoreSimulator

    async with CoreSimulator(
        host=args.host, port=args.port, response_window=args.response_window
    ) as sim:
        print(
            f"core simulator at {sim.url} (one simulated core per path: {sim.url}/NAME)",
            flush=True,
        )
        if on_ready is not None:
            on_ready(sim.url)
        await asyncio.Event().wait()
    return EXIT_OK  # pragma: no cover - runs until interrupted


def _cmd_simulator(args: argparse.Namespace) -> int:
    return asyncio.run(run_simulator(args))


# -- registration ---------------------------------------------------------------


def _core_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--core",
        required=True,
        metavar="URL",
        help="the chat core's WebSocket API, for example ws://127.0.0.1:5225"
        " (simplex-chat -p 5225)",
    )
    p.add_argument(
        "--user", type=_positive_int, default=1, metavar="ID", help="the user id (default 1)"
    )


def register(subparsers: Any) -> None:
    """Add ``call`` and ``serve`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "call",
        help="send one Service RPC request through a chat core and print the response",
        description="Send one request with /_service_request through the chat core and print"
        " the response envelope as JSON. Exit status 0 for a response, 1 for an error"
        " response, 2 when the core refused the request.",
    )
    _core_options(p)
    p.add_argument("target", metavar="TARGET", help="the contact address link or SimpleX name")
    p.add_argument("protocol", metavar="PROTOCOL", help="the protocol name, for example mcp")
    p.add_argument(
        "json", metavar="JSON", help="the protocol's request: JSON text, @FILE or - for stdin"
    )
    p.add_argument(
        "--sign-key",
        metavar="KEY",
        help="sign with this private key (sign_key= text, @FILE or -); prefer @FILE:"
        " a key on the command line is visible to other users of the machine",
    )
    p.add_argument(
        "--request-key",
        action="store_true",
        help="name the signing key in the envelope's requestKey",
    )
    p.add_argument("--version", metavar="JSON", help="the envelope's version (JSON)")
    p.add_argument(
        "--timeout",
        type=_positive_int,
        default=30,
        metavar="S",
        help="seconds the core waits for the response (default 30)",
    )
    p.add_argument(
        "--retries",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="repeat a response with retryAfter up to N times (default 0)",
    )
    p.add_argument(
        "--max-retry-after",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="do not repeat when retryAfter exceeds S seconds",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on first (a running core answers chatRunning)",
    )
    p.set_defaults(handler=_cmd_call)

    p = subparsers.add_parser(
        "serve",
        help="answer Service RPC requests through a chat core",
        description="Answer serviceRequest events of the chat core until interrupted: an echo"
        " responder, or an MCP server (MODULE:NAME, a server object or a function that"
        " builds one) served through McpBridge.",
    )
    _core_options(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--echo", action="store_true", help="answer each request with its own request value"
    )
    what.add_argument(
        "--mcp-module",
        metavar="MOD:NAME",
        help="serve this MCP SDK server (dotted module or .py path, and attribute)",
    )
    p.add_argument(
        "--protocol",
        action="append",
        metavar="NAME",
        help="a protocol to serve (repeatable; default echo, or mcp with --mcp-module)",
    )
    p.add_argument(
        "--conversation-tool",
        action="append",
        default=[],
        metavar="TOOL",
        help="an MCP tool that needs a conversation: answered conversation_required",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on service_requests=on first",
    )
    p.add_argument(
        "--address",
        action="store_true",
        help="make sure the user's address has ratchet keys; print its link on stderr",
    )
    p.add_argument(
        "--concurrency", type=_positive_int, default=32, metavar="N", help="requests at once"
    )
    p.add_argument(
        "--deadline",
        type=positive_seconds,
        default=170.0,
        metavar="S",
        help="handler deadline in seconds (default 170, below the core's 180)",
    )
    p.add_argument(
        "--rate-limit",
        type=_rate_limit,
        default=None,
        metavar="N/S",
        help="at most N requests per S seconds for each signer key (unsigned requests share one)",
    )
    p.add_argument(
        "--chat",
        action="store_true",
        help="also answer /_call for the same protocols in conversations, with the same handler",
    )
    p.add_argument(
        "--declare",
        action="store_true",
        help="declare the served protocols in the profile (transports.rpc, and chat with --chat)",
    )
    p.add_argument(
        "--max-queue",
        type=_non_negative_int,
        default=1000,
        metavar="N",
        help="requests waiting for a slot, at most; beyond, answered rate_limited (default 1000)",
    )
    p.add_argument(
        "--grace",
        type=_grace,
        default=5.0,
        metavar="S",
        help="on Ctrl-C, seconds for the requests in flight to finish (default 5)",
    )
    p.set_defaults(handler=_cmd_serve)

    p = subparsers.add_parser(
        "call-chat",
        help="send one /_call through a chat core and print the replies",
        description="Send /_call PROTOCOL JSON to CHAT (@<contactId> or #<groupId>) and print"
        " each reply that quotes it as a JSON line (sender, ends, text, message), until the"
        " answer ends or --wait seconds pass. Exit status 0 with replies, 1 without, 2 when"
        " the command is refused (too large, a credential in a group) or the core refuses it.",
    )
    p.add_argument(
        "--core",
        required=True,
        metavar="URL",
        help="the chat core's WebSocket API, for example ws://127.0.0.1:5225",
    )
    p.add_argument(
        "--user",
        type=_positive_int,
        default=None,
        metavar="ID",
        help="the user whose chat it is (default: the core's active user)",
    )
    p.add_argument("chat", metavar="CHAT", help="@<contactId> or #<groupId>")
    p.add_argument("protocol", metavar="PROTOCOL", help="the protocol name, for example mcp")
    p.add_argument(
        "json", metavar="JSON", help="the protocol's request: JSON text, @FILE or - for stdin"
    )
    p.add_argument("--member", metavar="NAME", help="in a group: mention this member")
    p.add_argument(
        "--wait",
        type=positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for the replies (default 30)",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_false",
        help="do not send /_start main=on first",
    )
    p.set_defaults(handler=_cmd_call_chat)

    p = subparsers.add_parser(
        "simulator",
        help="run a loopback chat core simulator to test bots against",
        description="Run simplex_rpc.testing.CoreSimulator: a WebSocket server on the local"
        " host that speaks the chat core's API for Service RPC. Each URL path is one"
        " simulated core (ws://HOST:PORT/alice, ws://HOST:PORT/bob). Not the chat core:"
        " no network, no encryption; for tests.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=5225, help="port to listen on (default 5225; 0 for any)"
    )
    p.add_argument(
        "--response-window",
        type=positive_seconds,
        default=180.0,
        metavar="S",
        help="seconds a responder has to answer (default 180, as the core)",
    )
    p.set_defaults(handler=_cmd_simulator)


__all__ = [
    "echo_handler",
    "load_object",
    "register",
    "run_call",
    "run_serve",
    "run_simulator",
]

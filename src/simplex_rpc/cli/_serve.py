"""``serve``: answer Service RPC requests (and ``/_call`` with ``--chat``) through a chat core.

An echo responder, an MCP server (``McpBridge``), any MCP server as an upstream
(``--mcp-stdio``, ``--mcp-url``) or an A2A agent (``--a2a-url``, ``--a2a-module``);
every argument is checked and the server built before connecting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._backoff import Backoff
from .._wire.envelope import check_protocol_name
from ..adapter import (
    ChatCore,
    ChatCoreClosed,
    IncomingCall,
    RateLimit,
    ReplySink,
    ServeOutcome,
    ServiceRequest,
)
from ..errors import EnvelopeError, install_hint
from ._common import (
    EXIT_OK,
    CliError,
    RedactingFormatter,
    add_ready_option,
    chosen_log_level,
    env_file,
    header_option,
    positive_seconds,
    ready,
    run_until_signal,
    setup_logging,
)
from ._options import add_core_option, add_user_option, non_negative_int, positive_int


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


def echo_handler(request: ServiceRequest) -> Any:
    """The ``--echo`` responder: answers each request with its own ``request`` value."""
    return request.request.request


def load_object(spec: str, what: str = "--mcp-module") -> Any:
    """Import ``MODULE:NAME`` (a dotted module or a ``.py`` path) and return the attribute;
    errors name the option ``what``."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"{what}: {spec!r} is not MODULE:NAME")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            if loader_spec is None or loader_spec.loader is None:
                raise CliError(f"{what}: cannot load {module_name!r}")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except CliError:
        raise
    except (ImportError, OSError) as exc:
        raise CliError(f"{what}: cannot import {module_name!r}: {_first_line(exc)}") from None
    except SyntaxError as exc:
        raise CliError(
            f"{what}: {module_name!r} has a syntax error at line {exc.lineno}: {exc.msg}"
        ) from None
    except Exception as exc:
        # The module's own code failed while it was imported: its error, in one line.
        raise CliError(
            f"{what}: importing {module_name!r} raised {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise CliError(f"{what}: {module_name!r} has no {attr!r}") from None


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _mcp_server(spec: str) -> Any:
    obj = load_object(spec)
    # A factory (for example ``build_server``) is called to make the server.
    if inspect.isfunction(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise CliError(
                f"--mcp-module: {spec!r} raised {type(exc).__name__}: {_first_line(exc)}"
            ) from None
    return obj


def check_upstream_arguments(args: argparse.Namespace) -> None:
    """The one-line errors of ``--mcp-stdio -- COMMAND``, ``--mcp-url`` and ``--header``."""
    command = list(getattr(args, "upstream_command", None) or [])
    if args.mcp_stdio and not command:
        raise CliError(
            "--mcp-stdio: give the server's command after --, for example"
            " --mcp-stdio -- npx -y @modelcontextprotocol/server-everything"
        )
    if command and not args.mcp_stdio:
        raise CliError(
            f"unexpected arguments {' '.join(command)[:80]!r}: a command after --"
            " is the server of --mcp-stdio"
        )
    url = args.mcp_url
    if url is not None and not url.startswith(("http://", "https://")):
        raise CliError("--mcp-url: expected an http:// or https:// URL")
    http_upstream = url is not None or getattr(args, "a2a_url", None) is not None
    if getattr(args, "headers", None) and not http_upstream:
        raise CliError("--header: goes with an HTTP upstream (--mcp-url)")
    if getattr(args, "env_file", None) is not None and not args.mcp_stdio:
        raise CliError("--env-file: goes with --mcp-stdio (the environment of its command)")
    if getattr(args, "follow_card_url", False) and getattr(args, "a2a_url", None) is None:
        raise CliError("--follow-card-url: goes with --a2a-url")


def _upstream(args: argparse.Namespace) -> Any:
    """The :class:`simplex_rpc.mcp.Upstream` of ``--mcp-stdio`` or ``--mcp-url``."""
    try:
        from ..mcp import Upstream
    except ImportError as exc:
        raise CliError(f"needs the mcp SDK: {install_hint('mcp')} ({exc})") from None
    logger = logging.getLogger("simplex_rpc.mcp.upstream")
    for old in list(logger.handlers):
        if getattr(old, "_simplex_rpc_cli", False):
            logger.removeHandler(old)
    # The upstream's changes of state and its stderr are the operator's log, INFO
    # included (or --log-level's): its own stderr handler, not propagated to serve's
    # WARNING one; redacted as every handler of the CLI.
    level = chosen_log_level()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("simplex-rpc serve: %(message)s"))
    handler._simplex_rpc_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if level is None else level)
    logger.propagate = False
    tools = args.conversation_tool
    if args.mcp_stdio:
        command, *rest = args.upstream_command
        return Upstream.stdio(command, rest, env=args.env_file, conversation_tools=tools)
    return Upstream.http(args.mcp_url, headers=args.headers, conversation_tools=tools)


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
    outcome: list[ServeOutcome],
) -> None:
    """Run serve (and serve_calls with ``--chat``) until cancelled; ``ready`` is called
    once both take their events; on a graceful stop, serve's outcome is put in
    ``outcome`` before the cancellation goes on."""
    if args.declare:
        # Declared once, both transports, before either loop runs: the two
        # loops never write the profile (/_profile replaces it whole).
        versions = getattr(chat_handler, "supported", None)
        if not versions:  # pragma: no cover - prepare_serve refuses --declare with --echo
            raise CliError("--declare: the server serves no protocol versions to declare")
        await core._declare_transport(
            args.user,
            protocols,
            ("rpc", "chat") if args.chat else "rpc",
            dict.fromkeys(protocols, versions),
        )
    served = asyncio.Event()
    stop = asyncio.Event()
    serving = asyncio.create_task(
        core.serve(args.user, rpc_handler, protocols=protocols, ready=served, stop=stop, **options)
    )
    loops: list[asyncio.Task[Any]] = [serving]
    readiness = [served]
    if args.chat:
        calls_ready = asyncio.Event()
        loops.append(
            asyncio.create_task(
                core.serve_calls(
                    args.user,
                    dict.fromkeys(protocols, chat_handler),
                    concurrency=args.concurrency,
                    ready=calls_ready,
                )
            )
        )
        readiness.append(calls_ready)
    try:
        # Ready once both loops take their events (each says so): a request or a
        # /_call sent after the ready line is not missed.
        all_ready = asyncio.gather(*(event.wait() for event in readiness))
        try:
            await asyncio.wait([*loops, all_ready], return_when=asyncio.FIRST_COMPLETED)
        finally:
            all_ready.cancel()
        if all(event.is_set() for event in readiness) and not any(t.done() for t in loops):
            ready()
        # Both end together when the connection ends: report the first reason once.
        done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        first = done.pop()
        error = None if first.cancelled() else first.exception()
        raise error if error is not None else ChatCoreClosed("serving ended")
    except asyncio.CancelledError:
        # The graceful stop (SIGTERM, SIGINT): serve stops and returns its outcome; a
        # second cancellation meanwhile stops it at once.
        stop.set()
        for task in loops[1:]:
            task.cancel()
        try:
            result = await asyncio.shield(serving)
        except asyncio.CancelledError:
            serving.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            raise
        finally:
            await asyncio.gather(*loops[1:], return_exceptions=True)
        outcome.append(result)
        raise


@dataclass
class _Service:
    """What ``serve`` serves, made before it connects: the handlers and their protocols."""

    protocols: list[str]
    #: Opened once connected, with the user's address link (an A2A card names it):
    #: yields (rpc handler, chat handler).
    open: Callable[[str], AbstractAsyncContextManager[tuple[Any, Any]]]
    needs_link: bool = False


@contextlib.asynccontextmanager
async def _echo_service(link: str) -> AsyncIterator[tuple[Any, Any]]:
    yield echo_handler, echo_call


def _protocols(args: argparse.Namespace, default: str) -> list[str]:
    """The ``--protocol`` names (or ``default``), each checked: no duplicates."""
    names = args.protocol or [default]
    try:
        checked = [check_protocol_name(name, "--protocol") for name in names]
    except EnvelopeError as exc:
        raise CliError(str(exc)) from None
    if len(set(checked)) != len(checked):
        raise CliError("--protocol: a protocol is named twice")
    return checked


def prepare_serve(args: argparse.Namespace) -> _Service:
    """Check every argument of ``serve``, import the module and build the server.

    Runs before ``serve`` connects to the core (issue 22): a mistake is one line and
    exit status 2, and the core is not started (``/_start ... service_requests=on``
    would stay in effect for every later start) for a command that cannot serve.
    """
    if args.echo:
        if args.declare:
            raise CliError(
                "--declare: the echo responder serves no protocol versions to declare;"
                " declare an --mcp-module server"
            )
        return _Service(_protocols(args, "echo"), _echo_service)
    if getattr(args, "mcp_stdio", False) or getattr(args, "mcp_url", None) is not None:
        upstream = _upstream(args)  # built now; its server starts once connected

        @contextlib.asynccontextmanager
        async def upstream_open(link: str) -> AsyncIterator[tuple[Any, Any]]:
            async with upstream:
                # Fail fast: a server that never answered once (a typo in the command, a
                # child that exits before the handshake, a URL that does not answer) is
                # one line and exit 2 before the ready lines. Once it has answered, its
                # restarts with backoff are the upstream's own.
                if upstream.state != "running":
                    what = "--mcp-stdio" if args.mcp_stdio else "--mcp-url"
                    reason = upstream.failure.removeprefix("stopped (").removesuffix(")")
                    raise CliError(
                        f"{what}: the MCP server never answered: {reason}"
                        + (
                            " (check the command after --, and that it runs an MCP server on"
                            " its stdin and stdout; npx needs -y)"
                            if args.mcp_stdio
                            else " (check the URL, and that an MCP server answers there)"
                        )
                    )
                yield upstream.rpc_handler, upstream

        return _Service(_protocols(args, "mcp"), upstream_open)
    if getattr(args, "a2a_url", None) is not None or getattr(args, "a2a_module", None) is not None:
        protocols = _protocols(args, "a2a")
        try:
            from ..a2a import _gateway  # noqa: F401 - the extra is named before connecting
        except ImportError as exc:
            raise CliError(f"needs the a2a-sdk: {install_hint('a2a')} ({exc})") from None
        handler = None if args.a2a_module is None else load_object(args.a2a_module, "--a2a-module")

        @contextlib.asynccontextmanager
        async def a2a_open(link: str) -> AsyncIterator[tuple[Any, Any]]:
            async with _a2a_bridge(args, link, handler) as bridge:
                yield bridge.rpc_handler, bridge

        return _Service(protocols, a2a_open, needs_link=True)
    protocols = _protocols(args, "mcp")
    try:
        # Imported first: without the extra, this names it, before the user's module
        # fails on its own `import mcp`.
        from ..mcp import McpBridge
    except ImportError as exc:
        raise CliError(f"needs the mcp SDK: {install_hint('mcp')} ({exc})") from None
    server = _mcp_server(args.mcp_module)
    try:
        bridge = McpBridge(server, conversation_tools=args.conversation_tool)
    except (TypeError, ValueError) as exc:
        raise CliError(f"--mcp-module: {args.mcp_module!r} is not an MCP server: {exc}") from None

    @contextlib.asynccontextmanager
    async def entered(link: str) -> AsyncIterator[tuple[Any, Any]]:
        async with bridge:
            yield bridge.rpc_handler, bridge

    return _Service(protocols, entered)


def _stop_line(outcome: ServeOutcome) -> str:
    """The command's summary of a graceful stop, in the terms of issue 22: answered,
    shed, refused (in flight past the grace: cancelled and answered internal) and
    unanswered (no answer reached the core)."""
    return (
        f"stopped: {outcome.answered} answered, {outcome.shed} shed, {outcome.cancelled}"
        f" refused, {outcome.unanswered + outcome.failed} unanswered"
    )


@contextlib.asynccontextmanager
async def _a2a_bridge(
    args: argparse.Namespace, link: str, handler: Any = None
) -> AsyncIterator[Any]:
    """The A2aBridge of ``--a2a-url`` (a gateway to an HTTP agent) or ``--a2a-module``."""
    try:
        from ..a2a import _gateway
    except ImportError as exc:
        raise CliError(f"needs the a2a-sdk: {install_hint('a2a')} ({exc})") from None
    # A one-shot task over Service RPC waits up to 160 s, or less under a shorter
    # --deadline, so that conversation_required arrives before the handler is cut.
    rpc_deadline = min(_gateway.DEFAULT_RPC_DEADLINE, 0.9 * args.deadline)
    if args.a2a_url is not None:
        async with _gateway.gateway(
            args.a2a_url,
            link,
            headers=args.headers,
            rpc_deadline=rpc_deadline,
            follow_card_url=args.follow_card_url,
        ) as bridge:
            yield bridge
        return
    if handler is None:
        handler = load_object(args.a2a_module, "--a2a-module")
    yield _gateway.module_bridge(handler, link, rpc_deadline=rpc_deadline)


async def run_serve(
    args: argparse.Namespace, *, on_ready: Callable[[str], None] | None = None
) -> int:
    """Run the responder of ``args`` until cancelled or the connection ends.

    Everything is checked and built before connecting (:func:`prepare_serve`).
    Cancelling (SIGTERM or SIGINT, through ``run_until_signal``) is the adapter's
    graceful stop; then one summary line goes to stderr.
    """
    if args.headers and args.a2a_url is None and getattr(args, "mcp_url", None) is None:
        raise CliError("--header: only with an HTTP upstream (--mcp-url, --a2a-url)")
    service = prepare_serve(args)
    options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "handler_timeout": args.deadline,
        "rate_limit": args.rate_limit,
        "max_queue": args.max_queue,
        "grace": args.grace,
    }
    outcome: list[ServeOutcome] = []
    served = False
    # The one keeper's policy (simplex_rpc._keeper): 0.5 s, doubled up to 30 s, and
    # back to 0.5 s once serving again.
    backoff = Backoff()
    try:
        # The service (the upstream, the bridge) is opened once, with the first
        # connection, and kept: a core that goes away is connected to again with
        # backoff, and serving resumes with the same address and the same handlers.
        async with contextlib.AsyncExitStack() as held:
            handlers: tuple[Any, Any] | None = None
            while True:
                try:
                    async with ChatCore.connect(args.core) as core:
                        if args.start != "off":
                            await core.start(service_requests=True, restart=args.start == "restart")
                        link = ""
                        if args.address or service.needs_link:
                            address = await core.service_address(args.user)
                            link = address.link
                        if handlers is None:
                            handlers = await held.enter_async_context(service.open(link))
                        rpc_handler, chat_handler = handlers

                        def on_serving(link: str = link) -> None:
                            nonlocal served
                            if served:
                                _serve_log.warning("serving again: the chat core is back")
                                backoff.reset()
                                return
                            served = True
                            # Printed once: a caller that waits for these lines can call.
                            shown = link if args.address else None
                            ready(args, address=shown, serving=service.protocols)
                            if on_ready is not None:
                                on_ready(link)

                        await _serving(
                            core,
                            args,
                            rpc_handler,
                            chat_handler,
                            service.protocols,
                            options,
                            on_serving,
                            outcome,
                        )
                except ChatCoreClosed as exc:
                    if not served:
                        raise  # never served: the core's address or state is wrong
                    # Each loss counts as an attempt that held no time: only serving
                    # again (reset above) brings the wait back to its first value.
                    delay = backoff.ended(0.0) or backoff.first
                    _serve_log.warning(
                        "lost the chat core (%s); connecting again in %g s", exc, delay
                    )
                    await asyncio.sleep(delay)
    finally:
        if outcome:
            print(f"simplex-rpc serve: {_stop_line(outcome[0])}", file=sys.stderr, flush=True)
    return EXIT_OK  # pragma: no cover - serve returns only by raising


_serve_log = logging.getLogger("simplex_rpc.cli.serve")


def _cmd_serve(args: argparse.Namespace) -> int:
    setup_logging("serve")
    check_upstream_arguments(args)
    return run_until_signal(run_serve(args))


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "serve",
        help="answer Service RPC requests through a chat core",
        description="Answer serviceRequest events of the chat core until stopped: an echo"
        " responder, an MCP server (MODULE:NAME, a server object or a function that"
        " builds one) served through McpBridge, any MCP server as an upstream (the command"
        " after --: --mcp-stdio -- COMMAND [ARG...], or --mcp-url URL [--header 'Name:"
        " value']...), or an A2A agent (--a2a-url, --a2a-module). Every argument is"
        " checked and the server built before connecting. Once serving, the ready lines go"
        " to stdout"
        " ('address: LINK' with --address, 'serving: PROTOCOLS'; one JSON object with"
        " --json); logs go to stderr. SIGTERM or Ctrl-C is a graceful stop (exit 0) with"
        " one summary line: answered, shed, refused, unanswered.",
    )
    add_core_option(p)
    add_user_option(p)
    _add_server_options(p)
    _add_protocol_options(p)
    _add_admission_options(p)
    add_ready_option(p)
    p.set_defaults(handler=_cmd_serve)


def _add_server_options(p: argparse.ArgumentParser) -> None:
    """What answers: one of --echo, --mcp-module, --mcp-stdio, --mcp-url, --a2a-url,
    --a2a-module, and what an upstream needs (headers, an environment, the command)."""
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--echo", action="store_true", help="answer each request with its own request value"
    )
    what.add_argument(
        "--mcp-module",
        metavar="MOD:NAME",
        help="serve this MCP SDK server (dotted module or .py path, and attribute)",
    )
    what.add_argument(
        "--mcp-stdio",
        action="store_true",
        help="serve the MCP server that the command after -- runs (any language), over its"
        " stdin and stdout; restarted with backoff if it exits",
    )
    what.add_argument(
        "--mcp-url",
        metavar="URL",
        help="serve the MCP server at this Streamable HTTP endpoint (any language)",
    )
    p.add_argument(
        "--header",
        dest="headers",
        action="extend",
        type=header_option,
        default=[],
        metavar="'NAME: VALUE' | @FILE",
        help="an HTTP header sent with every request to an HTTP upstream (--mcp-url,"
        " --a2a-url; repeatable), for example a credential; never logged. @FILE reads"
        " 'Name: value' lines from FILE, so that the credential is not on the command line"
        " (where ps shows it). With --a2a-url it goes only to the URL's origin",
    )
    p.add_argument(
        "--env-file",
        type=env_file,
        default=None,
        metavar="FILE",
        help="with --mcp-stdio: NAME=VALUE lines added to the environment of the server's"
        " command (for example its API key), kept off the command line; never logged",
    )
    p.add_argument(
        "--follow-card-url",
        action="store_true",
        help="with --a2a-url and --header: when the Agent Card puts its JSON-RPC interface"
        " at another origin (scheme, host, port), use it without the --header credential;"
        " without this, such a card is refused (the credential goes only to --a2a-url's"
        " origin)",
    )
    p.add_argument(
        "upstream_command",
        nargs="*",
        metavar="COMMAND",
        help="with --mcp-stdio, after --: the MCP server's command and its arguments",
    )
    what.add_argument(
        "--a2a-url",
        metavar="URL",
        help="front the A2A agent at URL over its JSON-RPC HTTP binding (its Agent Card at"
        " the well-known URI under URL, or URL itself when it ends in .json)",
    )
    what.add_argument(
        "--a2a-module",
        metavar="MOD:NAME",
        help="serve this a2a-sdk RequestHandler in process (or a function that makes one)",
    )


def _add_protocol_options(p: argparse.ArgumentParser) -> None:
    """What is served and declared, and how the core is started."""
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
        "--start",
        choices=("on", "restart", "off"),
        default="on",
        help="on (the default): send /_start main=on service_requests=on first, which"
        " starts a CLI run with -m (maintenance mode) and fails clearly on a chat already"
        " running; restart: on a running chat, /_stop and /_start again with service"
        " requests on; off: send nothing",
    )
    p.add_argument(
        "--no-start",
        dest="start",
        action="store_const",
        const="off",
        help="the same as --start off",
    )
    p.add_argument(
        "--address",
        action="store_true",
        help="make sure the user's address has ratchet keys; print its link on stdout,"
        " as the ready line 'address: LINK'",
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


def _add_admission_options(p: argparse.ArgumentParser) -> None:
    """How many requests run and wait, their deadline and rate, and the stop's grace."""
    p.add_argument(
        "--concurrency", type=positive_int, default=32, metavar="N", help="requests at once"
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
        "--max-queue",
        type=non_negative_int,
        default=1000,
        metavar="N",
        help="requests waiting for a slot, at most; beyond, answered rate_limited (default 1000)",
    )
    p.add_argument(
        "--grace",
        type=_grace,
        default=5.0,
        metavar="S",
        help="on SIGTERM or Ctrl-C, seconds for the requests in flight to finish (default 5)",
    )


__all__ = ["echo_handler", "load_object", "register", "run_serve"]

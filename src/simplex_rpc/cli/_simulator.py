"""``simulator``: a loopback chat core simulator (``CoreSimulator``) to test bots against."""

from __future__ import annotations

import argparse
import asyncio
import errno
import re
import socket
import sys
from collections.abc import Callable
from typing import Any

from ._common import (
    EXIT_OK,
    CliError,
    add_ready_option,
    positive_seconds,
    ready,
    run_until_signal,
)


async def run_simulator(
    args: argparse.Namespace, *, on_ready: Callable[[str], None] | None = None
) -> int:
    """Run a CoreSimulator until cancelled; its URL is the ready line ``listening: URL``,
    or with ``--world`` the world is built and one JSON line printed
    (:meth:`CoreSimulator.load_world`'s result).

    A port or host it cannot listen on (in use, not an address of this machine, a
    name that does not resolve) is one line naming it, exit status 2.
    """
    from .._wire import strict_json as _json
    from ..testing import CoreSimulator, read_world

    world = read_world(args.world) if getattr(args, "world", None) is not None else None
    users = tuple(sorted(world.user_ids)) if world is not None else (1,)
    simulator = CoreSimulator(
        host=args.host,
        port=args.port,
        response_window=args.response_window,
        users=users,
        maintenance=getattr(args, "maintenance", False),
        ack=getattr(args, "ack", "serviceReplyAccepted"),
    )
    for command, seconds in getattr(args, "command_delay", None) or []:
        simulator.set_command_delay(seconds, command)
    try:
        await simulator.__aenter__()
    except OverflowError:  # pragma: no cover - the argument's type bounds the port
        raise CliError(f"--port: {args.port} is not a port (0 to 65535)") from None
    except socket.gaierror as exc:
        raise CliError(f"--host: cannot resolve {args.host!r}: {exc.strerror}") from None
    except UnicodeError:
        # The IDNA codec refuses the name before any lookup: an empty label, or one longer
        # than 63 characters (RFC 1035 section 2.3.4).
        raise CliError(
            f"--host: {args.host[:80]!r} is not a host name: each dot-separated label is 1 to"
            " 63 characters"
        ) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason = f"port {args.port} is in use"
        raise CliError(f"cannot listen on {args.host!r} port {args.port}: {reason}") from None
    try:
        print(
            f"simplex-rpc simulator: one simulated core per URL path: {simulator.url}/NAME"
            " (not the chat core: no network, no encryption; for tests)",
            file=sys.stderr,
            flush=True,
        )
        if world is not None:
            # The ready line's key of every listener (`--json`'s {"listening": URL}) first,
            # then the world: programs find the URL under the same key either way.
            built = {"listening": simulator.url, **simulator.load_world(world)}
            print(_json.dumps(built).decode("utf-8"), flush=True)
        else:
            ready(args, listening=simulator.url)
        if on_ready is not None:
            on_ready(simulator.url)
        await asyncio.Event().wait()
    finally:
        await simulator.__aexit__(None, None, None)
    return EXIT_OK  # pragma: no cover - runs until interrupted


def _cmd_simulator(args: argparse.Namespace) -> int:
    where: list[str] = []
    return run_until_signal(
        run_simulator(args, on_ready=where.append),
        stopped=lambda: (
            "simplex-rpc simulator: stopped" + (f"; {where[0]} closed" if where else "")
        ),
    )


def _command_delay(text: str) -> tuple[str | None, float]:
    """An argparse ``type=``: ``SECONDS`` or ``/command=SECONDS``, seconds 0 or more."""
    command, _, seconds = text.rpartition("=")
    if command and not re.fullmatch(r"/[A-Za-z_]+", command):
        raise argparse.ArgumentTypeError(
            f"{text!r}: name a command by its first word, as /_send=0.01"
        )
    try:
        value = float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds, 0 or more")
    return (command or None), value


def _port(text: str) -> int:
    """An argparse ``type=``: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:32]!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0 for any)")
    return value


def register(subparsers: Any) -> None:
    """Add ``simulator`` to the ``simplex-rpc`` parser."""
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
        "--port", type=_port, default=5225, help="port to listen on (default 5225; 0 for any)"
    )
    p.add_argument(
        "--response-window",
        type=positive_seconds,
        default=180.0,
        metavar="S",
        help="seconds a responder has to answer (default 180, as the core)",
    )
    p.add_argument(
        "--world",
        metavar="FILE",
        help="build the users, addresses, contacts and groups FILE (TOML or JSON) declares,"
        " then print one JSON line: each user's URL and the ids made (docs/adapter.md)",
    )
    p.add_argument(
        "-m",
        "--maintenance",
        action="store_true",
        help="as simplex-chat -m: each core's chat is not started until /_start (so"
        " /_start main=on service_requests=on turns requests on); without it the chat runs"
        " from the start with service requests off, and /_start answers chatRunning",
    )
    p.add_argument(
        "--ack",
        choices=("serviceReplyAccepted", "cmdOk"),
        default="serviceReplyAccepted",
        help="the answer to /_service_response: serviceReplyAccepted {user, connectionId},"
        " then the event serviceReplySent (current cores), or cmdOk (the first ones)",
    )
    p.add_argument(
        "--command-delay",
        type=_command_delay,
        action="append",
        metavar="[COMMAND=]SECONDS",
        help="seconds the core takes to process each command, or each command whose first"
        " word is COMMAND (/_service_response=0.002); repeatable",
    )
    add_ready_option(p)
    p.set_defaults(handler=_cmd_simulator)


__all__ = ["register", "run_simulator"]

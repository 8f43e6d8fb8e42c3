"""``call`` and ``call-chat``: one request to a bot through a chat core, printed.

``simplex-rpc call --core ws://127.0.0.1:5225 --user 1 TARGET PROTOCOL JSON``
sends one Service RPC request and prints the response envelope;
``simplex-rpc call-chat --core URL CHAT PROTOCOL JSON`` sends one ``/_call``
and prints the replies as JSON lines.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._wire.envelope import UNSET, Request, check_protocol_name
from .._wire.keys import SigningKey
from ..adapter import (
    ENVELOPE_ERRORS,
    TYPED_ERRORS,
    ChatCore,
    raw_request_command,
)
from ..adapter._chat import check_chat_ref
from ..errors import EnvelopeError
from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    CliError,
    emit_json,
    load_json,
    load_sign_key,
    positive_seconds,
    run_until_signal,
)
from ._options import (
    add_core_option,
    add_start_option,
    add_user_option,
    non_negative_int,
    positive_int,
)

T = TypeVar("T")


async def _on_core(args: argparse.Namespace, send: Callable[[ChatCore], Awaitable[T]]) -> T:
    """Connect to ``--core``, start its chat (unless ``--no-start``), and ``send`` on it."""
    async with ChatCore.connect(args.core) as core:
        if args.start:
            # A core that is running already answers chatRunning and is unchanged.
            await core.start(service_requests=False)
        return await send(core)


def _send(args: argparse.Namespace, sign_key: SigningKey | None) -> dict[str, Any]:
    """The options of one Service RPC request: its timeout, key and retries."""
    return {
        "timeout": args.timeout,
        "sign_key": sign_key,
        "retries": args.retries,
        "max_retry_after": args.max_retry_after,
    }


async def run_call(args: argparse.Namespace) -> int:
    """Send the request of ``args``; print the response; 0 for a success, 1 for an error."""
    if args.raw is not None:
        return await _run_call_raw(args)
    if args.protocol is None or args.json is None:
        raise CliError("call: give PROTOCOL and JSON, or --raw JSON")
    if args.errors != "envelope":
        raise CliError("--errors: only with --raw")
    request_value = load_json(args.json, what="JSON")
    sign_key = load_sign_key(args.sign_key) if args.sign_key is not None else None
    version: Any = UNSET if args.version is None else load_json(args.version, what="--version")
    if args.request_key and sign_key is None:
        raise CliError("--request-key: needs --sign-key")
    request = Request(
        protocol=args.protocol,
        request=request_value,
        version=version,
        request_key=sign_key.public_key if args.request_key and sign_key is not None else None,
    )
    response = await _on_core(
        args,
        lambda core: core.service_request(args.user, args.target, request, **_send(args, sign_key)),
    )
    emit_json(response.to_dict())
    return EXIT_OK if response.ok and not is_jsonrpc_error(response.response) else EXIT_INVALID


def is_jsonrpc_error(answer: Any) -> bool:
    """Whether ``answer`` is a JSON-RPC error response (the bot's server refused the
    request): the raw commands print it as it came, with exit status 1."""
    return isinstance(answer, dict) and answer.get("jsonrpc") == "2.0" and "error" in answer


async def _run_call_raw(args: argparse.Namespace) -> int:
    """``call --raw``: any JSON object, the answer object printed as it is."""
    if args.protocol is not None or args.json is not None:
        raise CliError("--raw: give the whole request as its JSON, without PROTOCOL and JSON")
    for given, option in ((args.request_key, "--request-key"), (args.version, "--version")):
        if given:
            raise CliError(f"{option}: not with --raw (the request is sent as it is)")
    obj = load_json(args.raw, what="--raw")
    if not isinstance(obj, dict):
        raise CliError("--raw: expected a JSON object")
    sign_key = load_sign_key(args.sign_key) if args.sign_key is not None else None
    errors = TYPED_ERRORS if args.errors == "typed" else ENVELOPE_ERRORS
    # Checked (strict JSON, the block's size) before connecting: one line, exit 2.
    raw_request_command(args.user, args.target, obj, timeout=args.timeout, sign_key=sign_key)
    answer = await _on_core(
        args,
        lambda core: core.service_request_raw(
            args.user, args.target, obj, errors=errors, **_send(args, sign_key)
        ),
    )
    emit_json(answer)
    return EXIT_OK if errors.code(answer) is None else EXIT_INVALID


def _cmd_call(args: argparse.Namespace) -> int:
    return run_until_signal(run_call(args), stopped="simplex-rpc call: stopped before the response")


async def run_call_chat(args: argparse.Namespace) -> int:
    """Send one ``/_call``; print each reply as a JSON line; 0 with replies, 1 without."""
    request = load_json(args.json, what="JSON")
    if not isinstance(request, dict):
        raise CliError("JSON: the request must be a JSON object")
    # Checked before connecting: a mistake does not start the core.
    check_chat_ref(args.chat, "CHAT")
    try:
        check_protocol_name(args.protocol, "PROTOCOL")
    except EnvelopeError as exc:
        raise CliError(str(exc)) from None
    count = errors = 0
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
                # A JSON-RPC error, or the binding's envelope error in a conversation.
                if is_jsonrpc_error(reply.message) or _is_envelope_error(reply.message):
                    errors += 1
            print(json.dumps(line, ensure_ascii=False, separators=(",", ":")), flush=True)
    return EXIT_OK if count and not errors else EXIT_INVALID


def _is_envelope_error(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and "jsonrpc" not in message
        and isinstance(message.get("error"), dict)
        and isinstance(message["error"].get("code"), str)
    )


def _cmd_call_chat(args: argparse.Namespace) -> int:
    return run_until_signal(
        run_call_chat(args), stopped="simplex-rpc call-chat: stopped (the replies so far are above)"
    )


def register(subparsers: Any) -> None:
    """Add ``call`` and ``call-chat`` to the ``simplex-rpc`` parser."""
    _register_call(subparsers)
    _register_call_chat(subparsers)


def _register_call(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "call",
        help="send one Service RPC request through a chat core and print the response",
        description="Send one request with /_service_request through the chat core and print"
        " the response envelope as JSON (with --raw: any JSON object, and the answer object"
        " as it is). Exit status 0 for a response, 1 for an error response, 2 when the core"
        " refused the request.",
    )
    add_core_option(p)
    add_user_option(p)
    p.add_argument("target", metavar="TARGET", help="the contact address link or SimpleX name")
    p.add_argument(
        "protocol", metavar="PROTOCOL", nargs="?", help="the protocol name, for example mcp"
    )
    p.add_argument(
        "json",
        metavar="JSON",
        nargs="?",
        help="the protocol's request: JSON text, @FILE or - for stdin",
    )
    p.add_argument(
        "--raw",
        metavar="JSON",
        help="send this JSON object as it is, for a service with an envelope of its own"
        " (instead of PROTOCOL JSON; JSON text, @FILE or -), and print the answer object",
    )
    p.add_argument(
        "--errors",
        choices=("envelope", "typed"),
        default="envelope",
        help="with --raw: how the service's answers carry an error, for the exit status and"
        ' --retries: {"error": {"code", "retryAfter"?}} (envelope, the default) or'
        ' {"type": "error", "code", "retryAfter"?} (typed)',
    )
    p.add_argument(
        "--sign-key",
        metavar="KEY",
        help="sign with this private key: use @FILE (a 0600 file, as keygen -o writes;"
        " a file others can read is refused, as ssh does); also sign_key= text or -, but a key"
        " on the command line is visible to other users of the machine",
    )
    p.add_argument(
        "--request-key",
        action="store_true",
        help="name the signing key in the envelope's requestKey",
    )
    p.add_argument("--version", metavar="JSON", help="the envelope's version (JSON)")
    p.add_argument(
        "--timeout",
        type=positive_int,
        default=30,
        metavar="S",
        help="seconds the core waits for the response (default 30)",
    )
    p.add_argument(
        "--retries",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="repeat a response with retryAfter up to N times (default 0); with --raw, a"
        " request whose outcome a timeout hid too (the identical request)",
    )
    p.add_argument(
        "--max-retry-after",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="do not repeat when retryAfter exceeds S seconds",
    )
    add_start_option(p)
    p.set_defaults(handler=_cmd_call)


def _register_call_chat(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "call-chat",
        help="send one /_call through a chat core and print the replies",
        description="Send /_call PROTOCOL JSON to CHAT (@<contactId> or #<groupId>) and print"
        " each reply that quotes it as a JSON line (sender, ends, text, message), until the"
        " answer ends or --wait seconds pass. Exit status 0 with replies, 1 without, 2 when"
        " the command is refused (too large, a credential in a group) or the core refuses it.",
    )
    add_core_option(p)
    p.add_argument(
        "--user",
        type=positive_int,
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
    add_start_option(p)
    p.set_defaults(handler=_cmd_call_chat)


__all__ = ["is_jsonrpc_error", "register", "run_call", "run_call_chat"]

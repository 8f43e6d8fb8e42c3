"""Calls a person can type: ``mcp tools``, ``mcp call`` and ``a2a send``.

``simplex-rpc mcp call LINK TOOL item=anvil lines:=3`` calls one tool of the
MCP bot at ``LINK`` and prints its result; ``simplex-rpc mcp tools LINK`` lists
the bot's tools; ``simplex-rpc a2a send LINK "text"`` sends one A2A message and
prints the answer. The library's own clients do the round trip (the SDK's
``mcp.Client`` over :class:`~simplex_rpc.mcp.SimplexTransport`, and the
``a2a-proxy``'s card and :class:`~simplex_rpc.a2a.SimplexA2aTransport`), so the
binding's ``_meta`` and ``a2a-service-parameters`` are added as they are for
an application. The raw ``call`` and ``call-chat`` stay for exact bytes.

Exit status: 0 for a result, 1 when the bot answered with an error (a tool
error, a JSON-RPC error, an envelope error), 2 when the call could not be
made (a usage error, the core refused, no answer).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from .._wire import strict_json as _json
from ..errors import SimplexRpcError
from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    emit_json,
    install_hint,
    load_sign_key,
    read_input,
    run_until_signal,
)
from ._options import add_route_options


def parse_arguments(items: list[str]) -> dict[str, Any]:
    """httpie-style tool arguments: ``key=value`` (a string), ``key:=JSON`` (any JSON value).

    A repeated key, an empty key or an item without ``=`` is a usage error naming
    the item; a ``:=`` value that is not JSON names the decoder's reason.
    """
    arguments: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or key == ":":
            raise CliError(
                f"argument {item[:64]!r}: expected key=value (a string) or key:=JSON"
                " (a number, true, an object...)"
            )
        if key.endswith(":"):
            key = key[:-1]
            try:
                parsed: Any = _json.loads(value.encode("utf-8"))
            except (_json.JsonError, UnicodeEncodeError) as exc:
                raise CliError(f"argument {key!r}: the value after := is not JSON: {exc}") from None
        else:
            parsed = value
        if key in arguments:
            raise CliError(f"argument {key!r}: given twice")
        arguments[key] = parsed
    return arguments


def _check_target(args: argparse.Namespace) -> None:
    """With ``--via chat`` the target is a ChatRef (and a group needs ``--member``)."""
    from ..adapter._chat import check_chat_ref

    if args.via == "chat":
        try:
            check_chat_ref(args.target, "LINK")
        except SimplexRpcError as exc:
            raise CliError(f"{exc} (with --via chat, give @CONTACT_ID or #GROUP_ID)") from None
        if args.target.startswith("#") and args.member is None:
            raise CliError("--member: the target is a group: name the bot's member display name")
    elif args.member is not None:
        raise CliError("--member: only with --via chat in a group")


def _sign_key(args: argparse.Namespace) -> Any:
    return load_sign_key(args.sign_key) if args.sign_key is not None else None


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (anyio's task groups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# -- mcp --------------------------------------------------------------------------


def _mcp_imports() -> Any:
    try:
        from ..mcp import _proxy
    except ImportError as exc:
        raise CliError(f"needs the mcp SDK: {install_hint('mcp')} ({exc})") from None
    return _proxy


@contextlib.asynccontextmanager
async def _mcp_client(args: argparse.Namespace) -> AsyncIterator[Any]:
    """The SDK's client to the bot of ``args``, through the core (``mcp-proxy``'s connector)."""
    _proxy = _mcp_imports()
    _check_target(args)
    try:
        connect = _proxy.connector(
            args.core,
            args.user,
            args.target,
            via=args.via,
            sign_key=_sign_key(args),
            timeout=args.timeout,
            start=args.start,
            member=args.member,
        )
    except SimplexRpcError as exc:
        raise CliError(str(exc)) from None
    async with connect() as (_core, client):
        yield client


def _mcp_error(exc: BaseException) -> tuple[str, int] | None:
    """The one line of an MCP error and its exit status, else None.

    The transport reports a core that could not deliver the request, or no answer
    in time, as the SDK's ``CONNECTION_CLOSED`` and ``REQUEST_TIMEOUT``: the call
    was not made (2). Any other code is the bot's answer (1).
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        error = leaf.error
        # "not delivered: ..." is SimplexTransport's wording for a request it could not send.
        if error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT) or (
            error.code == INTERNAL_ERROR and error.message.startswith("not delivered: ")
        ):
            return error.message, EXIT_USAGE
        return f"the bot answered error {error.code}: {error.message}", EXIT_INVALID
    return None


async def _run_mcp(args: argparse.Namespace, body: Any) -> int:
    """Run ``body(client)``; an answered error is one line and exit status 1."""
    try:
        async with _mcp_client(args) as client:
            result: int = await body(client)
            return result
    except CliError:
        raise
    except BaseException as exc:  # anyio wraps what the client raises in groups
        found = _mcp_error(exc)
        if found is not None:
            print(f"simplex-rpc mcp {args.mcp_command}: {found[0]}", file=sys.stderr)
            return found[1]
        leaf = _leaf(exc)
        if isinstance(leaf, (SimplexRpcError, CliError)):
            raise CliError(str(leaf)) from None
        if leaf is not exc and isinstance(leaf, Exception):
            raise leaf from None
        raise


def _content_text(block: Any) -> str:
    """One content block as text: its text, or what it is (an image, a resource...)."""
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    kind = getattr(block, "type", "content")
    mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None)
    resource = getattr(block, "resource", None)
    if resource is not None:
        inner = getattr(resource, "text", None)
        if isinstance(inner, str):
            return inner
        return f"[{kind} {getattr(resource, 'uri', '')}]"
    return f"[{kind}{' ' + mime if mime else ''}]"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _tools(args: argparse.Namespace) -> int:
    async def body(client: Any) -> int:
        listed = await client.list_tools()
        if args.json:
            emit_json([_dump(tool) for tool in listed.tools])
            return EXIT_OK
        for tool in listed.tools:
            description = (tool.description or "").strip().splitlines()
            properties = (tool.input_schema or {}).get("properties") or {}
            required = set((tool.input_schema or {}).get("required") or ())
            params = " ".join(
                f"{name}=" if name in required else f"[{name}=]" for name in properties
            )
            line = f"{tool.name} {params}".rstrip()
            print(f"{line}\n    {description[0]}" if description else line)
        return EXIT_OK

    return await _run_mcp(args, body)


async def _call(args: argparse.Namespace) -> int:
    arguments = parse_arguments(args.arguments)

    async def body(client: Any) -> int:
        result = await client.call_tool(args.tool, arguments)
        if args.json:
            emit_json(_dump(result))
        else:
            texts = [_content_text(block) for block in result.content]
            if not texts and result.structured_content is not None:
                texts = [json.dumps(result.structured_content, ensure_ascii=False, indent=2)]
            out = sys.stderr if result.is_error else sys.stdout
            for text in texts:
                print(text, file=out)
        return EXIT_INVALID if result.is_error else EXIT_OK

    return await _run_mcp(args, body)


# -- a2a --------------------------------------------------------------------------


def _message_text(message: Any) -> list[str]:
    return [part.text for part in message.parts if part.text]


async def _send(args: argparse.Namespace) -> int:
    try:
        from a2a.helpers.proto_helpers import new_text_part
        from a2a.types import a2a_pb2 as pb
        from google.protobuf import json_format  # type: ignore[import-untyped]

        from ..a2a import _proxy
    except ImportError as exc:
        raise CliError(f"needs the a2a-sdk: {install_hint('a2a')} ({exc})") from None
    import uuid

    from ..adapter import ChatCore

    _check_target(args)
    text = read_input(args.text, what="TEXT").decode("utf-8", "replace")
    settings = _proxy.ProxySettings(
        user_id=args.user,
        target=args.target,
        via=args.via,
        member=args.member,
        sign_key=_sign_key(args),
        timeout=args.timeout,
    )
    message = pb.Message(
        message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[new_text_part(text)]
    )
    try:
        async with ChatCore.connect(args.core, open_timeout=args.timeout) as core:
            if args.start:
                await core.start(service_requests=False, timeout=args.timeout)
            card = await _proxy.bot_card(core, settings)
            transport = _proxy.transport_for(core, settings, card)
            try:
                answer = await transport.send_message(pb.SendMessageRequest(message=message))
            finally:
                await transport.close()
    except SimplexRpcError as exc:
        from ..a2a._client import ServiceRpcError

        if isinstance(exc, ServiceRpcError):
            print(f"simplex-rpc a2a send: the bot answered {exc}", file=sys.stderr)
            return EXIT_INVALID
        raise CliError(str(exc)) from None
    except Exception as exc:
        from a2a.client.errors import A2AClientError

        if isinstance(exc, A2AClientError) or type(exc).__module__.startswith("a2a."):
            print(f"simplex-rpc a2a send: the bot answered {exc}", file=sys.stderr)
            return EXIT_INVALID
        raise
    if args.json:
        emit_json(json_format.MessageToDict(answer))
        return EXIT_OK
    failed = False
    lines: list[str] = []
    if answer.HasField("message"):
        lines = _message_text(answer.message)
    elif answer.HasField("task"):
        task = answer.task
        for artifact in task.artifacts:
            lines += [part.text for part in artifact.parts if part.text]
        if task.status.HasField("message"):
            lines += _message_text(task.status.message)
        state = pb.TaskState.Name(task.status.state)
        if state != "TASK_STATE_COMPLETED":
            lines.append(f"(task {task.id}: {state.removeprefix('TASK_STATE_').lower()})")
        failed = state in ("TASK_STATE_FAILED", "TASK_STATE_REJECTED")
    for line in lines:
        print(line, file=sys.stderr if failed else sys.stdout)
    return EXIT_INVALID if failed else EXIT_OK


# -- registration -------------------------------------------------------------------


def _run(coro_fn: Any, name: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        return run_until_signal(
            coro_fn(args), stopped=f"simplex-rpc {name}: stopped before the answer"
        )

    return handler


def _group(subparsers: Any, name: str, *, help: str, description: str) -> Any:
    """The command group ``name`` (``mcp``, ``a2a``); its subcommands' parser."""
    group = subparsers.add_parser(
        name,
        help=help,
        description=description + " The chat core's URL is --core or SIMPLEX_RPC_CORE.",
    )
    sub = group.add_subparsers(dest=f"{name}_command", metavar="COMMAND")
    sub.required = True
    return sub


def register(subparsers: Any) -> None:
    """Add the ``mcp`` and ``a2a`` groups to the ``simplex-rpc`` parser."""
    sub = _group(
        subparsers,
        "mcp",
        help="call an MCP bot: list its tools, call one",
        description="Call an MCP bot over SimpleX as a person would: the binding's _meta is"
        " added by the MCP SDK's client. Needs the mcp extra.",
    )
    p = sub.add_parser(
        "tools",
        help="list the bot's tools",
        description="List the tools of the MCP bot at LINK: one line per tool with its"
        " arguments ([name=] is optional), its description under it. Exit status 0, 1 if the"
        " bot answered an error, 2 if the call could not be made.",
    )
    add_route_options(p, target_metavar="LINK", json_help="print the whole answer as JSON")
    p.set_defaults(handler=_run(_tools, "mcp tools"))
    p = sub.add_parser(
        "call",
        help="call one tool of the bot",
        description="Call the tool TOOL of the MCP bot at LINK with arguments key=value (a"
        " string) or key:=JSON (a number, true, a list, an object), as httpie writes them;"
        " print the result's text. Exit status 0, 1 if the tool or the bot answered an error,"
        " 2 if the call could not be made.",
        epilog="example: simplex-rpc mcp call LINK availability item=anvil lines:=3",
    )
    add_route_options(p, target_metavar="LINK", json_help="print the whole answer as JSON")
    p.add_argument("tool", metavar="TOOL", help="the tool's name")
    p.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="key=value or key:=JSON")
    p.set_defaults(handler=_run(_call, "mcp call"))

    sub = _group(
        subparsers,
        "a2a",
        help="send a message to an A2A bot",
        description="Talk to an A2A bot over SimpleX as a person would: A2A-Version and the"
        " binding's service parameters are added by the library's A2A client. Needs the a2a"
        " extra.",
    )
    p = sub.add_parser(
        "send",
        help="send one message; print the answer",
        description="Send TEXT to the A2A bot at LINK (SendMessage) and print the answer: the"
        " message's text, or the task's artifacts and status. Exit status 0, 1 if the bot"
        " answered an error or the task failed, 2 if the call could not be made.",
    )
    add_route_options(p, target_metavar="LINK", json_help="print the whole answer as JSON")
    p.add_argument("text", metavar="TEXT", help="the message: text, @FILE or - for stdin")
    p.set_defaults(handler=_run(_send, "a2a send"))


__all__ = ["parse_arguments", "register"]

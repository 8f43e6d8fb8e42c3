"""The chat transport through the core: ``/_call`` answered and sent as chat messages.

The bot side (:meth:`_ChatCalls.serve_calls`) reads ``newChatItems`` events,
answers each ``/_call`` for a served protocol with replies that quote it, and
follows the protocol text's rules (direct chat, mention, broadcast, size,
parse error, exactly one answer). The caller side (:meth:`_ChatCalls.call`,
:meth:`_ChatCalls.call_stream`) sends a ``/_call`` and collects the quoted
replies with :class:`~simplex_rpc.chat.ReplyCollector`'s rules.

Shapes from simplex-chat's bot API: APISendMessages (``/_send <chatRef> json
[ComposedMessage]``) and APIListMembers (``/_members #<groupId>``) in
``bots/api/COMMANDS.md``; the ``newChatItems`` event in ``bots/api/EVENTS.md``;
``AChatItem``, ``ChatInfo``, ``ChatItem``, ``CIDirection``, ``CIMeta``,
``CIQuote``, ``CIMention``, ``ComposedMessage``, ``ChatRef``, ``Group`` and
``GroupMember`` in ``bots/api/TYPES.md``.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol, TypeAlias

from .._bindings import (
    INTERNAL_ERROR,
    PARSE_ERROR,
    BindingError,
    Caller,
    call_policy,
    error_response,
)
from .._wire.redact import show
from .._wire.strict_json import JsonError, dumps
from ..chat import (
    COMMAND,
    JSONRPC_BINDINGS,
    Call,
    ChatKind,
    Reply,
    ReplyCollector,
    ends_answer,
    fits_message,
    format_call,
    parse_call,
    parse_reply,
)
from ..declarations import _check_declared_versions
from ..errors import CallSyntaxError, ChatCoreError, SimplexRpcError
from ._admission import Admission, Decision, Ticket, Verdict, WindowSeen
from ._core import _check_user_id, _CoreBase, _dump_command_json, check_seconds, log
from ._declare import _Declarations
from ._errors import ChatCoreClosed

#: How long a ``/_call`` handler may run before it is cancelled and answered
#: with the binding's internal error. A conversation has no response window,
#: but a caller's wait does end.
DEFAULT_CALL_TIMEOUT: Final = 300.0
#: The caller's default wait for the replies, in seconds.
DEFAULT_CALL_WAIT: Final = 30.0

# Record ids (users, contacts, groups, chat items) are the core's Int64, positive.
_ID_END: Final = 2**63
# ChatRef (TYPES.md): "@<contactId>" or "#<groupId>", the id an Int64 record id.
_CHAT_REF: Final = re.compile(r"[@#](?P<id>[1-9][0-9]{0,18})")
# The longest text looked at as a command: a message the core delivers is at
# most 15,602 bytes of JSON, so anything far longer is not one.
_MAX_TEXT: Final = 4 * 15_602
# Received item ids remembered so that a repeated event is not answered twice.
_SEEN_LIMIT: Final = 100_000
# Commands kept waiting while every handler is busy; more are left unanswered
# and counted. At most _MAX_TEXT characters each: a bounded amount of memory.
_BACKLOG: Final = 1_000
#: How long a cancelled handler may take to end before serve_calls goes on without it.
_CANCEL_WAIT: Final = 0.5
# Unanswered commands are reported once per interval, in seconds, not once each.
_REPORT_INTERVAL: Final = 10.0
# The longest excerpt of an exception's text in a log line.
_EXCERPT: Final = 120
#: How long a caller holds a reply while a chat item id below it is missing (an earlier
#: reply may still be on its way on another of the core's connections), in seconds. The
#: core gives each event to one connection, whichever takes it (Server.hs), so two
#: replies taken by two connections can arrive in the other order; with no id missing,
#: or one connection open, nothing is held.
_REORDER_WINDOW: Final = 0.1

class CallRefused(SimplexRpcError):
    """A ``/_call`` was refused before anything was sent (the caller's MUSTs and the size rule)."""


StopRule = Callable[[tuple[Reply, ...]], bool]
"""``until(replies)``: True to stop collecting; ``replies`` are every accepted reply so far."""

ReplySink = Callable[[str], Awaitable[None]]
"""``send(text)``: send an earlier reply of the answer (a notification, a stream event)."""


class CallHandler(Protocol):
    """A ``/_call`` handler: ``async def handler(call, send) -> str``.

    It receives the :class:`IncomingCall` and ``send`` (a :data:`ReplySink`
    for earlier replies), and returns the text of the answer's last reply.
    """

    def __call__(self, call: IncomingCall, send: ReplySink, /) -> Awaitable[str]: ...


class ChatBridge(Protocol):
    """What :meth:`~_ChatCalls.serve_calls` needs of a bridge: ``McpBridge``, ``A2aBridge``.

    ``chat_handler(request, *, send[, caller])`` answers one call with the
    text of its last reply (``caller`` when the bridge keeps callers apart);
    ``supported`` names the versions it serves, which ``declare=True``
    declares. The adapter knows no binding: any object of this shape serves.
    """

    @property
    def chat_handler(self) -> Callable[..., Awaitable[str]]: ...

    @property
    def supported(self) -> Collection[str]: ...


CallHandlers: TypeAlias = "Mapping[str, CallHandler | ChatBridge]"
"""What :meth:`~_ChatCalls.serve_calls` serves: a handler or a bridge for each protocol name."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class IncomingCall:
    """One received ``/_call``, as a :meth:`~_ChatCalls.serve_calls` handler sees it.

    ``request`` is the parsed JSON object (the peer's data: never code);
    ``chat`` the chat it came from as a ChatRef (``"@5"``, ``"#7"``);
    ``sender`` the sender's display name; ``member`` the mentioned member's
    name, or None; ``item_id`` the command's chat item id; ``caller`` the
    A2A caller (the contact, or the group member).
    """

    protocol: str
    request: dict[str, Any]
    chat: str
    sender: str
    member: str | None
    item_id: int
    caller: Caller
    user_id: int

    def __repr__(self) -> str:
        # The request is the peer's data and may carry credentials (A2A service
        # parameters): named by its size, never shown.
        members = len(self.request) if isinstance(self.request, dict) else 0
        return (
            f"IncomingCall(protocol={self.protocol!r}, request=<an object of {members}"
            f" members>, chat={self.chat!r}, sender={show(self.sender, 64)},"
            f" member={show(self.member, 64)}, item_id={self.item_id!r},"
            f" caller={self.caller!r}, user_id={self.user_id!r})"
        )


def check_chat_ref(value: object, where: str) -> str:
    """``value`` if it is a ChatRef of a contact or group, else :class:`SimplexRpcError`.

    A ChatRef (``bots/api/TYPES.md``) is ``@<contactId>`` or ``#<groupId>``;
    the id is a record id of the core, ``Int64``: 1 <= id < 2**63, in plain
    ASCII digits without a leading zero. The error names ``where``.
    """
    if isinstance(value, str):
        match = _CHAT_REF.fullmatch(value)
        if match is not None and int(match["id"]) < _ID_END:
            return value
    raise SimplexRpcError(
        f"{where}: expected a ChatRef, '@<contactId>' or '#<groupId>' with an id from 1"
        f" to 2**63-1, got {show(value, 40)}"
    )


def _path(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...`` when every step is an object that has the key, else None."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _id(value: Any) -> int | None:
    """A record id of the core (``Int64`` in TYPES.md: 1 <= id < 2**63), or None.

    A JSON ``true`` is not an id (Python's ``True == 1`` must not make it one).
    """
    number = _int(value)
    return number if number is not None and 1 <= number < _ID_END else None


def _chat_ref(chat_info: Any) -> str | None:
    """The ChatRef text of a ``ChatInfo`` (TYPES.md): ``@<contactId>`` or ``#<groupId>``."""
    kind = _path(chat_info, "type")
    if kind == "direct":
        contact_id = _id(_path(chat_info, "contact", "contactId"))
        return f"@{contact_id}" if contact_id is not None else None
    if kind == "group":
        group_id = _id(_path(chat_info, "groupInfo", "groupId"))
        return f"#{group_id}" if group_id is not None else None
    return None


def _display_name(record: Any, profile_key: str) -> str | None:
    name = _path(record, "localDisplayName")
    if not isinstance(name, str) or not name:
        name = _path(record, profile_key, "displayName")
    return name if isinstance(name, str) and name else None


@dataclass(slots=True)
class _Received:
    """A text message of another party, with what the bot needs to decide about it."""

    user_id: int
    chat: str
    item_id: int
    text: str
    sender: str
    caller: Caller
    group: bool
    my_member_id: str | None
    my_name: str | None
    mentions: Any


def _received(item: Any, user_id: int) -> _Received | None:
    """Read one ``AChatItem`` of a ``newChatItems`` event; None when it is not a peer's text."""
    chat_info = _path(item, "chatInfo")
    chat_item = _path(item, "chatItem")
    chat = _chat_ref(chat_info)
    direction = _path(chat_item, "chatDir", "type")
    item_id = _id(_path(chat_item, "meta", "itemId"))
    if chat is None or item_id is None or direction not in ("directRcv", "groupRcv"):
        return None
    content = _path(chat_item, "content")
    if _path(content, "type") != "rcvMsgContent":
        return None
    text = _path(content, "msgContent", "text")
    if _path(content, "msgContent", "type") != "text" or not isinstance(text, str):
        return None
    if direction == "directRcv":
        contact = _path(chat_info, "contact")
        return _Received(
            user_id=user_id,
            chat=chat,
            item_id=item_id,
            text=text,
            sender=_display_name(contact, "profile") or chat,
            caller=Caller(chat=chat),
            group=False,
            my_member_id=None,
            my_name=None,
            mentions=None,
        )
    member = _path(chat_item, "chatDir", "groupMember")
    member_key = _path(member, "memberId")
    if not isinstance(member_key, str) or not member_key:
        local = _id(_path(member, "groupMemberId"))
        if local is None:
            return None
        member_key = str(local)
    membership = _path(chat_info, "groupInfo", "membership")
    my_member_id = _path(membership, "memberId")
    return _Received(
        user_id=user_id,
        chat=chat,
        item_id=item_id,
        text=text,
        sender=_display_name(member, "memberProfile") or member_key,
        caller=Caller(chat=chat, member=member_key),
        group=True,
        my_member_id=my_member_id if isinstance(my_member_id, str) else None,
        my_name=_display_name(membership, "memberProfile"),
        mentions=_path(chat_item, "mentions"),
    )


def _mentions_me(received: _Received, name: str) -> bool:
    """Whether ``@name`` in a group command names this bot.

    The core's ``mentions`` map (``CIMention``, TYPES.md) ties the name to a
    member id; without a usable entry, the name is compared with the bot's
    own display name in the group.
    """
    entry = received.mentions.get(name) if isinstance(received.mentions, dict) else None
    member_id = _path(entry, "memberId")
    if isinstance(member_id, str) and received.my_member_id is not None:
        return member_id == received.my_member_id
    return received.my_name is not None and name == received.my_name


_PROTOCOL_WORD: Final = re.compile(r"[a-z0-9-]{1,64}")


def _call_head(text: str) -> tuple[str | None, str | None]:
    """The mention and the protocol of a ``/_call`` text that does not parse, where readable.

    The mention is skipped by the rule of :func:`~simplex_rpc.chat.parse_call`:
    ``@'a name'`` runs to the closing quote, ``@name`` to the next space. A
    quoted name that is never closed hides where the protocol starts: then
    neither is read.
    """
    rest = text[len(COMMAND) + 1 :]
    mention: str | None = None
    if rest.startswith("@'"):
        end = rest.find("'", 2)
        if end == -1:
            return None, None
        mention = rest[2:end] or None
        rest = rest[end + 1 :].lstrip(" ")
    elif rest.startswith("@"):
        name, _, rest = rest[1:].partition(" ")
        mention = name or None
    word = rest.split(" ", 1)[0]
    return mention, word if _PROTOCOL_WORD.fullmatch(word) else None


def _safe(text: str) -> str:
    """``text`` with lone surrogates replaced, so that it can be sent as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _binding_error(protocol: str, request: Mapping[str, Any] | None, code: int, text: str) -> str:
    request_id = request.get("id") if request is not None else None
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None))):
        request_id = None
    try:
        return dumps(error_response(request_id, code, text)).decode("utf-8")
    except JsonError:  # an id no JSON can carry back: answer as for an unreadable id
        return dumps(error_response(None, code, text)).decode("utf-8")


def _is_jsonrpc(protocol: str, request: Mapping[str, Any] | None) -> bool:
    return protocol in JSONRPC_BINDINGS or (request is not None and request.get("jsonrpc") == "2.0")


def _is_async(value: object) -> bool:
    """Whether calling ``value`` starts a coroutine: an ``async def`` function or ``__call__``."""
    call = getattr(value, "__call__", None)  # noqa: B004 - the method itself is inspected
    return inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(call)


def _as_handler(value: object, protocol: str) -> CallHandler:
    """A handler from an async callable or a bridge (an object with ``chat_handler``).

    Raises :class:`SimplexRpcError` naming ``handlers[protocol]`` for anything
    else, a plain function included: its result could not be awaited.
    """
    where = f"handlers[{show(protocol, 64)}]"
    chat_handler = getattr(value, "chat_handler", None)
    if chat_handler is not None and callable(chat_handler):
        if not _is_async(chat_handler):
            raise SimplexRpcError(f"{where}: chat_handler of the bridge is not an async method")
        takes_caller = "caller" in inspect.signature(chat_handler).parameters

        async def bridged(call: IncomingCall, send: ReplySink) -> str:
            if takes_caller:
                text: str = await chat_handler(call.request, caller=call.caller, send=send)
            else:
                text = await chat_handler(call.request, send=send)
            return text

        return bridged
    if not callable(value):
        raise SimplexRpcError(
            f"{where}: expected an async function (call, send) -> str, an McpBridge or an"
            f" A2aBridge, got {type(value).__name__}"
        )
    if not _is_async(value):
        raise SimplexRpcError(
            f"{where}: {show(getattr(value, '__name__', type(value).__name__), 64)} is not an"
            " async function; a handler is `async def handler(call, send) -> str`"
        )
    handler: CallHandler = value
    return handler


def _bridge_versions(value: object) -> tuple[str, ...] | None:
    """The versions a bridge serves (its ``supported``), or None for a handler function."""
    if getattr(value, "chat_handler", None) is None:
        return None
    supported = getattr(value, "supported", None)
    if isinstance(supported, (str, bytes)) or not isinstance(supported, Collection):
        return None
    served = tuple(v for v in supported if isinstance(v, str) and v)
    return served or None


def _declared_versions(
    handlers: Mapping[str, object], versions: Mapping[str, Sequence[str]] | None
) -> dict[str, tuple[str, ...]]:
    """The versions to declare for each served protocol: ``versions``, else the bridge's.

    The protocol text makes ``versions`` required (the versions the bot
    serves); a handler function does not say which it serves, so without
    ``versions[protocol]`` there is nothing true to declare.
    """
    out: dict[str, tuple[str, ...]] = {}
    for protocol, handler in handlers.items():
        given = (versions or {}).get(protocol)
        served = tuple(given) if given is not None else _bridge_versions(handler)
        if not served:
            raise SimplexRpcError(
                f"declare: the versions of {show(protocol, 64)} are not known; pass"
                f" versions={{{protocol!r}: [...]}} (a declaration names the versions the bot"
                " serves; a bridge knows its own)"
            )
        _check_declared_versions(protocol, served)
        out[protocol] = served
    return out


def _check_versions(
    versions: Mapping[str, Sequence[str]] | None, protocols: Collection[str]
) -> None:
    if versions is None:
        return
    if not isinstance(versions, Mapping):
        raise SimplexRpcError("versions: expected a mapping of protocol names to version lists")
    for name, served in versions.items():
        if name not in protocols:
            raise SimplexRpcError(f"versions: {show(name, 64)} is not among the served protocols")
        if isinstance(served, (str, bytes)) or not isinstance(served, Collection):
            raise SimplexRpcError(f"versions[{name!r}]: expected a list of version strings")
        if not served or not all(isinstance(v, str) and v for v in served):
            raise SimplexRpcError(
                f"versions[{name!r}]: expected a non-empty list of non-empty version strings"
            )


class _CallServer:
    """The bot side of one :meth:`~_ChatCalls.serve_calls`.

    The event loop never waits for a handler: a command is started when
    fewer than ``concurrency`` run, else kept in a backlog of at most
    ``backlog`` commands, else left unanswered and counted (one log line per
    interval). So the events keep being read while every handler is busy,
    and none is dropped unseen.
    """

    def __init__(
        self,
        core: _CoreBase,
        user_id: int,
        handlers: CallHandlers,
        *,
        concurrency: int,
        handler_timeout: float,
        backlog: int = _BACKLOG,
    ) -> None:
        if not isinstance(handlers, Mapping) or not handlers:
            raise SimplexRpcError("handlers: expected a mapping of protocol names to handlers")
        self.handlers: dict[str, CallHandler] = {}
        for protocol, handler in handlers.items():
            try:
                Call(protocol, {})
            except CallSyntaxError as exc:
                raise SimplexRpcError(f"handlers: {exc}") from None
            self.handlers[protocol] = _as_handler(handler, protocol)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise SimplexRpcError("concurrency: expected a positive integer")
        self.core = core
        self.user_id = user_id
        self.handler_timeout = check_seconds(handler_timeout, "handler_timeout")
        self.concurrency = concurrency
        self.backlog_limit = backlog
        # Which command runs, waits or is left: the policy, without I/O (._admission),
        # shared with serve's responder. A conversation has no response window: no
        # deadline from arrival (each handler has handler_timeout from its start), and
        # the item ids are remembered by count only.
        self.admission: Admission[_Received] = Admission(
            slots=concurrency,
            backlog=backlog,
            deadline=None,
            clock=asyncio.get_running_loop().time,
            seen=WindowSeen(math.inf, _SEEN_LIMIT),
        )
        self.unanswered = 0  # commands left unanswered since the last report
        self.report: asyncio.TimerHandle | None = None
        self.closing = False
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self, stream: Any, ready: asyncio.Event | None = None) -> NoReturn:
        log.info("answering /_call for %s, user %d", ", ".join(sorted(self.handlers)), self.user_id)
        if ready is not None:
            ready.set()
        try:
            async for event in stream:
                if event.get("type") != "newChatItems":
                    continue
                if _int(_path(event, "user", "userId")) != self.user_id:
                    continue
                items = event.get("chatItems")
                if not isinstance(items, list):
                    log.warning(
                        "newChatItems without a chatItems list (%s): ignored",
                        show(type(items).__name__, 20),
                    )
                    continue
                for item in items:
                    self._consider(item)
            raise ChatCoreClosed("the connection to the chat core was closed")
        finally:
            stream.close()
            self.closing = True
            self.admission.stop()
            if self.report is not None:
                self.report.cancel()
                self._report()
            tasks = list(self.tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                # A handler that swallows its cancellation cannot hold serve_calls: it is
                # named in one line and left behind.
                _, stubborn = await asyncio.wait(tasks, timeout=_CANCEL_WAIT)
                if stubborn:
                    log.warning(
                        "serving /_call for user %d: %d handlers ignored their cancellation"
                        " and are left running",
                        self.user_id,
                        len(stubborn),
                    )

    def _consider(self, item: Any) -> None:
        try:
            received = _received(item, self.user_id)
        except Exception as exc:  # pragma: no cover - defensive: a hostile event never stops it
            log.warning("newChatItems: an unreadable item (%s): ignored", type(exc).__name__)
            log.debug("newChatItems: the item's traceback", exc_info=True)
            return
        if received is None:
            if (
                not isinstance(_path(item, "chatItem"), dict)
                or _chat_ref(_path(item, "chatInfo")) is None
            ):
                log.warning(
                    "newChatItems: an item that is not a chat item of a contact or group (%s)",
                    show(type(item).__name__, 20),
                )
            return
        if not received.text.startswith(COMMAND + " "):
            return
        key = (received.chat, received.item_id)
        if len(received.text) > _MAX_TEXT:
            if self.admission.seen is not None and self.admission.seen.seen(
                key, self.admission.clock()
            ):
                log.warning("chat item %s/%d seen again: not answered twice", *key)
                return
            log.warning(
                "/_call of %d characters in %s is longer than any message: ignored",
                len(received.text),
                received.chat,
            )
            return
        self._apply([self.admission.arrive(key, received)])

    def _apply(self, decisions: list[Decision[_Received]]) -> None:
        for decision in decisions:
            verdict = decision.verdict
            if verdict is Verdict.START:
                self._start(decision.ticket)
            elif verdict is Verdict.REPEAT:
                log.warning(
                    "chat item %s/%d seen again: not answered twice",
                    decision.ticket.payload.chat,
                    decision.ticket.payload.item_id,
                )
            elif verdict.shed:
                # A /_call has no shed answer a binding defines: left unanswered, counted.
                self.unanswered += 1
                if self.report is None:
                    loop = asyncio.get_running_loop()
                    self.report = loop.call_later(_REPORT_INTERVAL, self._report)

    def _report(self) -> None:
        self.report = None
        if self.unanswered:
            log.warning(
                "%d /_call command(s) not answered: %d handlers were busy and the backlog of %d"
                " was full",
                self.unanswered,
                self.concurrency,
                self.backlog_limit,
            )
            self.unanswered = 0

    def _start(self, ticket: Ticket[_Received]) -> None:
        task = asyncio.create_task(self._answer(ticket.payload))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda _: self._finished(ticket))

    def _finished(self, ticket: Ticket[_Received]) -> None:
        self._apply(self.admission.finish(ticket))

    async def _answer(self, received: _Received) -> None:
        where = f"{received.chat}/{received.item_id}"
        try:
            await self._dispatch(received, where)
        except asyncio.CancelledError:
            raise
        except ChatCoreClosed as exc:
            log.warning("/_call %s not answered: %s", where, exc)
        except Exception as exc:  # pragma: no cover - defensive: one command never stops the loop
            log.error("answering /_call %s failed: %s", where, type(exc).__name__)
            log.debug("answering /_call %s: the traceback", where, exc_info=True)

    async def _dispatch(self, received: _Received, where: str) -> None:
        try:
            call = parse_call(received.text)
        except CallSyntaxError as exc:
            mention, protocol = _call_head(received.text)
            if protocol is None or protocol not in self.handlers:
                return
            if received.group and mention is not None and not _mentions_me(received, mention):
                return  # a broken command for another member is that member's to answer
            log.info("/_call %s does not parse: %s", where, show(str(exc), 200))
            if _is_jsonrpc(protocol, None):
                text = _binding_error(protocol, None, PARSE_ERROR, _safe(f"Parse error: {exc}"))
                await self._reply(received, text, where)
            return
        handler = self.handlers.get(call.protocol)
        if handler is None:
            return
        if received.group and call.member is not None and not _mentions_me(received, call.member):
            log.debug("/_call %s mentions another member: not for this bot", where)
            return
        incoming = IncomingCall(
            protocol=call.protocol,
            request=call.request,
            chat=received.chat,
            sender=received.sender,
            member=call.member,
            item_id=received.item_id,
            caller=received.caller,
            user_id=self.user_id,
        )
        await self._run_handler(handler, incoming, received, where)

    async def _run_handler(
        self, handler: CallHandler, call: IncomingCall, received: _Received, where: str
    ) -> None:
        ended = False

        async def send(text: str) -> None:
            nonlocal ended
            if ended:
                log.info("/_call %s: the answer has ended; a later reply is not sent", where)
                return
            if not isinstance(text, str):
                raise TypeError(f"send: expected the reply's text, got {type(text).__name__}")
            text = self._sized(call, text, where)
            ended = self._ends(call, text)
            await self._reply(received, text, where)

        try:
            async with asyncio.timeout(self.handler_timeout):
                last = await handler(call, send)
            if not isinstance(last, str):
                raise TypeError(f"the handler returned {type(last).__name__}, not a reply text")
        except TimeoutError:
            log.warning(
                "/_call %s: the handler did not finish within %g s", where, self.handler_timeout
            )
            last = self._internal(call, "Internal error: the handler did not finish in time")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # serve_calls itself is being cancelled
            # The handler awaited something that someone else cancelled: a failure.
            log.error("/_call %s: the handler raised CancelledError", where)
            last = self._internal(call, "Internal error")
        except Exception as exc:
            # A traceback can carry the request's content: only at DEBUG.
            log.error(
                "/_call %s: the handler raised %s: %s",
                where,
                type(exc).__name__,
                show(str(exc), _EXCERPT),
            )
            log.debug("/_call %s: the handler's traceback", where, exc_info=True)
            last = self._internal(call, "Internal error")
        if ended:
            log.info("/_call %s: the answer ended before the handler's last reply", where)
            return
        if last:
            await send(last)
        log.info("/_call %s (%s) answered", where, show(call.protocol, 40))

    def _internal(self, call: IncomingCall, message: str) -> str:
        if _is_jsonrpc(call.protocol, call.request):
            return _binding_error(call.protocol, call.request, INTERNAL_ERROR, message)
        return ""

    def _sized(self, call: IncomingCall, text: str, where: str) -> str:
        if fits_message(text):
            return text
        log.warning("/_call %s: a reply does not fit one message: replaced", where)
        replacement = self._internal(
            call, "Response too large: the reply does not fit one chat message"
        )
        return replacement

    def _ends(self, call: IncomingCall, text: str) -> bool:
        message = parse_reply(call.protocol, text)
        return message is not None and ends_answer(call.protocol, call.request, message)

    async def _reply(self, received: _Received, text: str, where: str) -> None:
        if not text:
            return
        composed = [
            {"msgContent": {"type": "text", "text": text}, "quotedItemId": received.item_id}
        ]
        try:
            cmd = f"/_send {received.chat} json {_dump_command_json(composed, 'the reply')}"
        except SimplexRpcError as exc:
            log.warning("/_call %s: a reply not sent: %s", where, exc)
            return
        try:
            resp = await self.core.command(cmd)
        except ChatCoreClosed:
            raise
        except SimplexRpcError as exc:
            log.warning("/_call %s: the core refused a reply: %s", where, exc)
            return
        # APISendMessages names no user: the core sends as its active user. Checked
        # at the start; a switch of the active user since then shows here.
        sender = _int(_path(resp, "user", "userId"))
        if sender != self.user_id:
            log.error(
                "/_call %s: the core sent the reply as user %s, not user %d: the active user"
                " changed while serving",
                where,
                sender,
                self.user_id,
            )


class _ChatCalls:
    """``ChatCore``'s chat transport part (see :class:`simplex_rpc.adapter.ChatCore`): it
    uses the core's commands and events, and ``declarations`` for ``declare=True``."""

    def __init__(self, core: _CoreBase, declarations: _Declarations) -> None:
        self._core = core
        self._declarations = declarations

    async def serve_calls(
        self,
        user_id: int,
        handlers: CallHandlers,
        *,
        concurrency: int = 32,
        handler_timeout: float = DEFAULT_CALL_TIMEOUT,
        declare: bool = False,
        versions: Mapping[str, Sequence[str]] | None = None,
        ready: asyncio.Event | None = None,
    ) -> NoReturn:
        """Answer each ``/_call`` of ``handlers``' protocols sent to ``user_id``, until cancelled.

        ``ready`` (an :class:`asyncio.Event`), when given, is set once the bot
        serves: the active user checked, the profile declared (with ``declare``);
        a ``/_call`` sent after that is answered (one that came before is too,
        when held: ``event_hold``).

        ``handlers`` maps a protocol name to an async ``handler(call, send) ->
        str`` (``call`` an :class:`IncomingCall`, ``send(text)`` sends an
        earlier reply, the return value is the last reply) or to an
        ``McpBridge`` or ``A2aBridge``. The protocol text's rules:

        * a direct chat: every command is answered; a group: a command that
          mentions this bot and a broadcast (no mention), never a command
          that mentions another member;
        * every reply quotes the command, in the order sent; the answer ends
          with the binding's last message, and nothing is sent after it;
        * a reply that does not fit one message (:func:`~simplex_rpc.chat.fits_message`)
          is replaced with the binding's ``-32603``, which ends the answer;
        * a ``/_call`` that does not parse gets ``-32700`` (the JSON-RPC
          bindings); text that is not a ``/_call`` is left alone;
        * a handler that raises, or runs past ``handler_timeout`` (then it is
          cancelled), is answered ``-32603`` without its exception text;
        * each command is answered once; commands of other users of the core
          and unserved protocols are ignored.

        A protocol without a JSON-RPC binding gets no error replies (its
        messages are not known here). At most ``concurrency`` handlers run at
        once; while all are busy, up to 1,000 further commands wait, and
        commands beyond that are left unanswered and counted in the log. The
        events keep being read meanwhile. Raises :class:`ChatCoreClosed`
        when the connection ends.

        With ``declare``, the profile first declares ``transports.chat`` for
        each served protocol (:meth:`declare`, keeping what else it declares).
        The declared versions are ``versions[protocol]``, else the bridge's
        own (``McpBridge.supported``, ``A2aBridge.supported``); a handler
        function without ``versions`` is refused, since a declaration must
        name the versions the bot serves.

        Wrong arguments (a handler that is not an async function or a bridge,
        a bad protocol name, versions of an unserved protocol) raise
        :class:`~simplex_rpc.errors.SimplexRpcError` before anything runs.
        """
        server = _CallServer(
            self._core,
            _check_user_id(user_id),
            handlers,
            concurrency=concurrency,
            handler_timeout=handler_timeout,
        )
        _check_versions(versions, server.handlers)
        declared = _declared_versions(handlers, versions) if declare else None
        # Subscribed before anything is awaited: a command sent once this
        # coroutine has started is seen, however long declaring takes; and the
        # commands that came before it (held by the core for event_hold seconds)
        # come first.
        stream = self._core.events()
        self._core._take_held_calls(stream, user_id)
        try:
            await self._active_user(user_id, SimplexRpcError)
            if declared is not None:
                await self._declarations._declare_transport(
                    user_id, sorted(declared), "chat", declared
                )
        except BaseException:
            stream.close()
            raise
        await server.run(stream, ready)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _active_user(
        self, wanted: int | None = None, refused: type[SimplexRpcError] = SimplexRpcError
    ) -> int:
        """The core's active user (ShowActiveUser, ``/user``: ``activeUser``, COMMANDS.md).

        The chat transport acts as that user only: APISendMessages (``/_send
        <chatRef> ...``) and APIListMembers (``/_members #<groupId>``) name no
        user, so the core resolves the chat among its active user's chats and
        sends as that user. A ``wanted`` user that is not the active one
        raises ``refused``, before anything is sent.
        """
        resp = await self._core.command("/user")
        user_id = _id(_path(resp, "user", "userId"))
        if resp.get("type") != "activeUser" or user_id is None:
            raise SimplexRpcError("the chat core did not name its active user (/user)")
        if wanted is not None and wanted != user_id:
            raise refused(
                f"user_id: user {wanted} is not the chat core's active user ({user_id}); the"
                " chat transport acts as the active user only (/_send names no user): make"
                f" user {wanted} active first (/_user {wanted})"
            )
        return user_id

    async def _group_members(self, group_id: int) -> tuple[dict[str, Any], list[Any]]:
        # APIListMembers: groupMembers with group: Group {groupInfo, members} (COMMANDS.md).
        resp = await self._core.command(f"/_members #{group_id}")
        group = _path(resp, "group")
        info = _path(group, "groupInfo")
        members = _path(group, "members")
        if resp.get("type") != "groupMembers" or not isinstance(members, list):
            raise SimplexRpcError(f"unexpected answer {show(resp.get('type'), 60)} to /_members")
        return (info if isinstance(info, dict) else {}), members

    async def call_stream(
        self,
        chat: str,
        protocol: str,
        request: Mapping[str, Any],
        *,
        member: str | None = None,
        wait: float = DEFAULT_CALL_WAIT,
        user_id: int | None = None,
        until: StopRule | None = None,
        agent_card: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Reply]:
        """Send ``/_call`` to ``chat`` and yield each accepted reply, in the core's order.

        ``chat`` is a ChatRef (``"@5"`` a contact, ``"#7"`` a group) of
        ``user_id``, by default the core's active user (``/user``). In a
        group, ``member`` mentions the called member (``@name`` in the text
        and the ``mentions`` map of ``ComposedMessage``); without it the
        command is a broadcast. Replies are matched by the quoted item and
        accepted by :class:`~simplex_rpc.chat.ReplyCollector`'s rules. The core's
        order is that of its chat item ids (one sequence for every item it stores,
        so one sender's replies in the order sent): while this ``ChatCore`` has more
        than one connection open (it serves, or has made service requests), two
        replies can reach it in the other order (the core gives each event to one
        connection), so a reply is held, up to 0.1 s, while an id between the
        call's and its own has not been seen; with none missing, none is held.

        When the iteration ends: a call to one recipient (a direct chat, or a
        mention) ends when its answer is complete (the binding's end rule),
        since nothing else is accepted; a broadcast collects until ``wait``
        ends ("A caller collects every reply until its wait ends ... a
        broadcast receives the answers of every member that serves the
        protocol", and members serve without a declaration, so no set of
        answers is known to be the last). A caller that wants to stop earlier
        says so: ``until(replies)``, called after each accepted reply with
        every reply so far in arrival order, ends the iteration when it
        returns True; leaving the ``async for`` ends it too.

        Refused before sending, with :class:`CallRefused`: a command that does
        not fit one message, an A2A request with a credential service
        parameter in a group ("A request with a credential MUST NOT be sent
        in a group"), a mention in a direct chat or of an unknown member.
        Which parameters are credentials: with ``agent_card`` (the bot's Agent
        Card as JSON), those its security schemes name
        (:func:`simplex_rpc.a2a.credential_parameters`: an API key's own name,
        ``Authorization`` for HTTP, OAuth 2 and OpenID Connect schemes) and
        the HTTP credential fields ``Authorization``, ``Proxy-Authorization``
        and ``Cookie``; without it, also any name with ``auth``, ``token``,
        ``key``, ``secret``, ``password``, ``credential`` or ``session``.
        """
        chat = check_chat_ref(chat, "chat")
        wait = check_seconds(wait, "wait")
        group = chat.startswith("#")
        chat_id = int(chat[1:])
        try:
            text = format_call(protocol, request, member=member)
        except CallSyntaxError as exc:
            raise CallRefused(str(exc)) from None
        call = parse_call(text)
        if not fits_message(text):
            raise CallRefused("the /_call does not fit one chat message (15,602 bytes of JSON)")
        if not group and member is not None:
            raise CallRefused("member: a direct chat has no members to mention")
        if until is not None and not callable(until):
            raise SimplexRpcError(
                f"until: expected a function of the replies, got {type(until).__name__}"
            )
        if agent_card is not None and not isinstance(agent_card, Mapping):
            raise CallRefused(
                "agent_card: expected the Agent Card as a JSON object,"
                f" got {type(agent_card).__name__}"
            )
        policy = call_policy(protocol)
        if policy is not None:
            # The binding's own rule for what may be sent (A2A: no credential in a group).
            try:
                refusal = policy(call.request, group=group, agent_card=agent_card)
            except BindingError as exc:
                raise CallRefused(f"{protocol} request: {exc}") from None
            if refusal is not None:
                raise CallRefused(refusal)
        wanted = _check_user_id(user_id) if user_id is not None else None
        user = await self._active_user(wanted, CallRefused)
        mentions: dict[str, int] = {}
        if group and member is not None:
            _, members = await self._group_members(chat_id)
            if member is not None:
                found = next(
                    (m for m in members if _display_name(m, "memberProfile") == member), None
                )
                member_ref = _id(_path(found, "groupMemberId"))
                if member_ref is None:
                    raise CallRefused(f"member: no member named {member[:64]!r} in {chat}")
                mentions[member] = member_ref
        composed: dict[str, Any] = {"msgContent": {"type": "text", "text": text}}
        if mentions:
            composed["mentions"] = mentions
        collector = ReplyCollector()
        stream = self._core.events()
        try:
            cmd = f"/_send {chat} json {_dump_command_json([composed], 'the /_call')}"
            resp = await self._core.command(cmd)
            item_id = _id(_path(_first(resp.get("chatItems")), "chatItem", "meta", "itemId"))
            if resp.get("type") != "newChatItems" or item_id is None:
                raise SimplexRpcError(
                    f"unexpected answer {show(resp.get('type'), 60)} to /_send: no chat item id"
                )
            sender = _int(_path(resp, "user", "userId"))
            if sender != user:
                raise ChatCoreError(
                    f"the core sent the /_call as user {sender}, not user {user}: the active"
                    " user changed meanwhile; its replies are not collected"
                )
            peer: str | None = None
            if not group:
                peer = _display_name(
                    _path(_first(resp.get("chatItems")), "chatInfo", "contact"), "profile"
                )
                peer = peer or chat
            collector.register(
                item_id, call, chat=ChatKind.GROUP if group else ChatKind.DIRECT, peer=peer
            )
            async for reply in self._collect(stream, collector, user, chat, item_id, wait, until):
                yield reply
        finally:
            stream.close()

    async def _collect(
        self,
        stream: Any,
        collector: ReplyCollector,
        user_id: int,
        chat: str,
        item_id: int,
        wait: float,
        until: StopRule | None,
    ) -> AsyncIterator[Reply]:
        broadcast = collector.is_broadcast(item_id)
        seen = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        # Replies in the core's order: by chat item id (the core numbers every item it
        # stores, in one sequence, so one sender's replies in the order sent), given to
        # the collector in that order; its end rule and the order yielded see it. A reply
        # is held while an id between the call's and its own has not been seen (in any
        # chat's newChatItems: another connection may still carry it), at most
        # _REORDER_WINDOW; with no id missing, or one connection, it goes at once.
        held: list[tuple[int, int, str, int | None, str]] = []
        arrived: dict[int, float] = {}
        order = 0
        accounted = item_id  # no id missing up to this one
        numbered: set[int] = set()  # ids seen above it
        while True:
            window = _REORDER_WINDOW if len(self._core._transports()) > 1 else 0.0
            now = loop.time()
            at_deadline = now >= deadline
            while held and (
                at_deadline or held[0][0] <= accounted or arrived[held[0][1]] + window <= now
            ):
                reply_id, key, sender, quoted, text = heapq.heappop(held)
                del arrived[key]
                collector.add(sender, quoted, text)
                if reply_id > accounted:  # given out past a gap: the gap is not waited for
                    accounted = reply_id
                    numbered = {n for n in numbered if n > accounted}
                    while accounted + 1 in numbered:
                        accounted += 1
                        numbered.discard(accounted)
            replies = collector.collected(item_id)
            for index in range(seen, len(replies)):
                yield replies[index]
                if until is not None and until(tuple(replies[: index + 1])):
                    return
            seen = len(replies)
            # One recipient: nothing is accepted after its answer's end. A broadcast
            # has no last answer to wait for: it runs to the end of the wait.
            if not broadcast and collector.is_complete(item_id):
                return
            if at_deadline:
                return
            wake = deadline
            if held:
                wake = min(wake, arrived[held[0][1]] + window)
            try:
                # A timeout around the await, not wait_for: wait_for runs anext in a
                # task of its own per event (Python 3.11), an extra turn of the loop for
                # every reply; an event already queued is taken without waiting at all.
                async with asyncio.timeout_at(wake):
                    event = await anext(stream)
            except TimeoutError:
                continue
            except StopAsyncIteration:
                deadline = loop.time()  # what is held is given out, then the wait ends
                continue
            if event.get("type") != "newChatItems":
                continue
            items = event.get("chatItems")
            for item in items if isinstance(items, list) else ():
                number = _id(_path(item, "chatItem", "meta", "itemId"))
                if number is not None and number > accounted:
                    numbered.add(number)
                    while accounted + 1 in numbered:
                        accounted += 1
                        numbered.discard(accounted)
            if _int(_path(event, "user", "userId")) != user_id:
                continue
            for item in items if isinstance(items, list) else ():
                received = _received(item, user_id)
                if received is None or received.chat != chat:
                    continue
                quoted = _id(_path(item, "chatItem", "quotedItem", "itemId"))
                order += 1
                arrived[order] = loop.time()
                heapq.heappush(
                    held, (received.item_id, order, received.sender, quoted, received.text)
                )

    async def call(
        self,
        chat: str,
        protocol: str,
        request: Mapping[str, Any],
        *,
        member: str | None = None,
        wait: float = DEFAULT_CALL_WAIT,
        user_id: int | None = None,
        until: StopRule | None = None,
        agent_card: Mapping[str, Any] | None = None,
    ) -> tuple[Reply, ...]:
        """Send ``/_call`` and return every accepted reply, in the core's order.

        The same as :meth:`call_stream`, collected: returns when the answer of
        the one recipient is complete, when ``until`` says so, or when ``wait``
        ends (a broadcast collects until then), with what arrived.
        """
        return tuple(
            [
                reply
                async for reply in self.call_stream(
                    chat,
                    protocol,
                    request,
                    member=member,
                    wait=wait,
                    user_id=user_id,
                    until=until,
                    agent_card=agent_card,
                )
            ]
        )


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None

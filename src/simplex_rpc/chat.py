"""The chat transport of the protocol text: ``/_call`` commands, message size, replies.

No I/O: text in, values out. Three parts:

* the command: :func:`format_call` and :func:`parse_call` for
  ``/_call <protocol> <request>`` and ``/_call @<member> <protocol> <request>``;
* the message size: :data:`MAX_MESSAGE_JSON`, :func:`encoded_size` and
  :func:`fits_message`;
* the replies: :class:`ReplyCollector` matches replies to calls by the quoted
  chat item, applies the acceptance rules and knows when an answer is complete.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from ._wire import strict_json as _json
from ._wire.envelope import check_protocol_name
from .errors import CallSyntaxError, CollectorError, EnvelopeError

__all__ = [
    "A2A_ENDING_STATES",
    "A2A_INTERRUPTED_STATES",
    "A2A_STREAMING_METHODS",
    "A2A_TERMINAL_STATES",
    "COMMAND",
    "JSONRPC_BINDINGS",
    "MAX_MESSAGE_JSON",
    "QUOTE_ALLOWANCE",
    "Call",
    "ChatKind",
    "ItemId",
    "Reply",
    "ReplyCollector",
    "Sender",
    "command_allowance",
    "encoded_size",
    "ends_answer",
    "fits_message",
    "format_call",
    "format_member",
    "parse_call",
    "parse_reply",
    "reply_allowance",
]

# --------------------------------------------------------------------------
# Message size
# --------------------------------------------------------------------------

MAX_MESSAGE_JSON: Final = 15602
"""The largest chat message JSON, in bytes, that the SimpleX core sends.

``maxEncodedMsgLength = 15602`` in simplex-chat ``src/Simplex/Chat/Protocol.hs``:
``encodeChatMessage`` refuses a message whose ``J.encode`` output is longer
(``ECMLarge``, the store error ``largeMsg``). The constant already reserves
room for the ``x.grp.msg.forward`` wrapper a group host adds when it forwards
the message ("15780 - 161 (x.grp.msg.forward overhead) ... - 16 for block
encryption", the comment beside it), so forwarding needs no further allowance.
"""

# A text is a JSON string inside the message. aeson (Data.Aeson.Encoding.Builder,
# escapeAscii) writes `"` and `\` as two bytes, \n \r \t as two, every other
# character below U+0020 as \u00XX (six bytes), and everything else, DEL and
# non-ASCII included, as its UTF-8 bytes.
_SIX_BYTE_ESCAPES: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_TWO_BYTE_ESCAPES: Final = ('"', "\\", "\n", "\r", "\t")


def encoded_size(text: str) -> int:
    """The UTF-8 bytes ``text`` takes as a JSON string body in the core's message.

    The surrounding quotes are not counted. Escapes are counted as the core's
    JSON encoder (aeson) writes them: ``"`` ``\\`` ``\\n`` ``\\r`` ``\\t`` take 2
    bytes, other control characters 6 (``\\u00XX``), every other character its
    UTF-8 length. A lone surrogate counts 3 bytes, the size of the U+FFFD that
    replaces it in the core's text.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    size = len(text.encode("utf-8", "surrogatepass"))
    size += sum(text.count(c) for c in _TWO_BYTE_ESCAPES)
    size += 5 * len(_SIX_BYTE_ESCAPES.findall(text))
    return size


# The JSON around the text, as simplex-chat writes it (Protocol.hs:
# AppMessageJson, chatToAppMessage, msgContainerJSON, MsgContent's toEncoding,
# QuotedMsg/MsgRef/MsgMention/MsgScope via deriveJSON), each field at the
# largest size its encoding can take:
#   "v"        ChatVersionRange, "<min>-<max>" of Word16: 11 characters at most;
#   "msgId"    SharedMsgId, base64url of 12 random bytes: 16 characters;
#   "memberId" MemberId, base64url of 12 random bytes: 16 characters;
#   "sentAt"   UTCTime as aeson writes it, up to 12 fraction digits: 33 characters;
#   "ttl"      Int (timed messages): 20 characters at most;
#   "live"     true; "scope" a member support scope {"type":"member","memberId":...}.
_ID: Final = '"' + "A" * 16 + '"'
_FRAME: Final = (
    '{"v":"65535-65535","msgId":' + _ID + ',"event":"x.msg.new","params":{'
    '"content":{"type":"text","text":""},"live":true,'
    '"scope":{"type":"member","memberId":' + _ID + "},"
    '"ttl":-9223372036854775808}}'
)
# A reply quotes the command (QuotedMsg: msgRef and the quoted content).
_QUOTE_FRAME: Final = (
    ',"quote":{"content":{"type":"text","text":""},"msgRef":{"memberId":'
    + _ID
    + ',"msgId":'
    + _ID
    + ',"sent":false,"sentAt":"2026-10-21T12:34:56.123456789012Z"}}'
)
# A command with a mention carries the mentioned name and member id.
_MENTION_FRAME: Final = ',"mentions":{"":{"memberId":' + _ID + "}}"

QUOTE_ALLOWANCE: Final = 256
"""Bytes of quoted text allowed for in a reply (the text as :func:`encoded_size` counts it).

The protocol text has a bot quote the command "with a truncated quote". The
core copies the quoted message's text into the reply's ``quote.content``
(``quoteContent`` in simplex-chat ``Library/Internal.hs``), and the whole
reply must still fit :data:`MAX_MESSAGE_JSON` (simplex-chat issue #4147: a
reply to a long message fails with ``largeMsg``). The protocol text does not
fix how far the quote is truncated; this library allows 256 bytes for it. A
bot whose quote is longer passes the quoted text to :func:`fits_message`.
"""


def reply_allowance(quote: str | None = None) -> int:
    """Bytes of a reply's message JSON outside its text.

    The message envelope at its largest, plus the quote of the command: its
    frame and ``quote`` (the quoted text exactly) or, when ``quote`` is None,
    :data:`QUOTE_ALLOWANCE` bytes of quoted text.
    """
    quoted = QUOTE_ALLOWANCE if quote is None else encoded_size(quote)
    return len(_FRAME) + len(_QUOTE_FRAME) + quoted


def command_allowance(member: str | None = None) -> int:
    """Bytes of a command's message JSON outside its text.

    The message envelope at its largest, plus, for a command that mentions
    ``member``, the ``mentions`` entry with the member's name.
    """
    size = len(_FRAME)
    if member is not None:
        size += len(_MENTION_FRAME) + encoded_size(member)
    return size


def fits_message(text: str, *, quote: str | None = None) -> bool:
    """True if ``text`` fits one chat message of at most :data:`MAX_MESSAGE_JSON` bytes.

    The text is a string inside the core's message JSON, so the allowance for
    the JSON around it depends on what the message is:

    * a ``/_call`` command (``text`` parses as one): :func:`command_allowance`,
      the envelope plus the mention of the called member, if any (208 bytes,
      plus 48 and the name for a mention);
    * anything else is a reply: :func:`reply_allowance`, the envelope plus the
      quote of the command (636 bytes with the default quote allowance).

    The envelope is counted at its largest (version range, ids, timestamp,
    ``ttl``, ``live`` and ``scope`` all present), so a text that fits here fits
    in every message the core builds around it.
    """
    size = encoded_size(text)
    if text.startswith(COMMAND + " "):
        try:
            call = parse_call(text)
        except CallSyntaxError:
            pass
        else:
            return size + command_allowance(call.member) <= MAX_MESSAGE_JSON
    return size + reply_allowance(quote) <= MAX_MESSAGE_JSON


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------

COMMAND: Final = "/_call"
"""The command word. The underscore marks a command for software, as in the core's API."""


def _is_space(c: str) -> bool:
    # Haskell's Data.Char.isSpace, which the core's mention parser uses: the
    # Latin-1 spaces, then the Unicode space separators (Zs). Python's
    # str.isspace also counts U+001C..U+001F, U+0085, U+2028 and U+2029.
    return c in " \t\n\v\f\r\xa0" or (c > "\u0377" and unicodedata.category(c) == "Zs")


def _is_punctuation(c: str) -> bool:
    # Haskell's Data.Char.isPunctuation: the general categories P*.
    return unicodedata.category(c).startswith("P")


def _starts_name(c: str) -> bool:
    # refChar in simplex-chat Markdown.hs (displayNameTextP_).
    return c > " " and c not in "#@'"


def _member_problem(name: str) -> str | None:
    """Why ``name`` cannot be written as a mention, or None."""
    if not name:
        return "the member name is empty"
    if not _starts_name(name[0]):
        return (
            f"the member name {name[:64]!r} starts with {name[0]!r}"
            " (a mention cannot start with a space, a control character, '#', '@' or \"'\")"
        )
    for c in name:
        if unicodedata.category(c) == "Cc":
            return f"the member name {name[:64]!r} contains the control character {c!r}"
        if unicodedata.category(c) == "Cs":
            return f"the member name {name[:64]!r} contains a lone surrogate"
    if _needs_quotes(name) and "'" in name:
        return (
            f"the member name {name[:64]!r} needs quotes (it has a space or ends with"
            ' punctuation) and contains "\'", so no mention can name it'
        )
    return None


def _needs_quotes(name: str) -> bool:
    # viewName in simplex-chat Markdown.hs: "quotes names that contain spaces
    # or end on punctuation".
    return any(_is_space(c) for c in name) or _is_punctuation(name[-1])


def format_member(name: str) -> str:
    """The mention of member ``name`` as SimpleX writes it: ``@name`` or ``@'Acme Support'``.

    A name is quoted when it contains a space or ends with punctuation
    (``viewName`` in simplex-chat ``Markdown.hs``). Raise
    :class:`CallSyntaxError` for a name no mention can carry.
    """
    if not isinstance(name, str):
        raise CallSyntaxError(f"member: expected a string, got {type(name).__name__}")
    problem = _member_problem(name)
    if problem is not None:
        raise CallSyntaxError(f"member: {problem}")
    return f"@'{name}'" if _needs_quotes(name) else f"@{name}"


@dataclass(frozen=True, slots=True)
class Call:
    """One ``/_call`` command: the protocol, its request (a JSON object) and the mention.

    ``member`` is the display name of the called group member, or None for a
    command without a mention (a broadcast in a group, or a direct chat).
    Construction checks every part; :meth:`text` writes the command.
    """

    protocol: str
    request: dict[str, Any]
    member: str | None = None

    def __post_init__(self) -> None:
        try:
            check_protocol_name(self.protocol, "protocol")
        except EnvelopeError as exc:
            raise CallSyntaxError(str(exc)) from None
        if not isinstance(self.request, dict):
            raise CallSyntaxError(
                f"request: expected a JSON object, got {type(self.request).__name__}"
            )
        if self.member is not None:
            format_member(self.member)

    def text(self) -> str:
        """The command text, with compact JSON and one space between its parts."""
        try:
            body = _json.dumps(self.request).decode("utf-8")
            # The same strictness as a received command: depth, integer size, strings.
            _json.loads(body)
        except (_json.JsonError, TypeError) as exc:
            raise CallSyntaxError(f"request: not strict JSON ({exc})") from None
        parts = [COMMAND]
        if self.member is not None:
            parts.append(format_member(self.member))
        parts += [self.protocol, body]
        return " ".join(parts)


def format_call(protocol: str, request: Mapping[str, Any], *, member: str | None = None) -> str:
    """Write ``/_call [@<member> ]<protocol> <request>``; raise :class:`CallSyntaxError`.

    ``request`` must be a JSON object (a mapping with string keys); it is
    written as compact JSON. ``protocol`` must be a protocol name. ``member``
    is quoted as SimpleX mentions are when it contains a space or ends with
    punctuation.
    """
    if not isinstance(request, Mapping):
        raise CallSyntaxError(f"request: expected a JSON object, got {type(request).__name__}")
    return Call(protocol, dict(request), member).text()


def _parse_member(rest: str) -> tuple[str, str]:
    """Split ``@<member> ...`` (``rest`` starts after the ``@``) into the name and the rest."""
    if rest.startswith("'"):
        end = rest.find("'", 1)
        if end == -1:
            raise CallSyntaxError('member: the quoted name has no closing "\'"')
        name = rest[1:end]
        after = rest[end + 1 :]
        if not name:
            raise CallSyntaxError("member: the quoted name is empty")
    else:
        end = next((i for i, c in enumerate(rest) if _is_space(c)), len(rest))
        name = rest[:end]
        after = rest[end:]
        if not name:
            raise CallSyntaxError("member: '@' is not followed by a name")
        if _is_punctuation(name[-1]):
            raise CallSyntaxError(
                f"member: {name[:64]!r} ends with punctuation, which a mention leaves out;"
                " the name must be quoted"
            )
    problem = _member_problem(name)
    if problem is not None:
        raise CallSyntaxError(f"member: {problem}")
    return name, after


def _one_space(rest: str, what: str, offset: int) -> str:
    if not rest:
        raise CallSyntaxError(f"{what} is missing (offset {offset})")
    if rest[0] != " ":
        raise CallSyntaxError(
            f"expected one space before {what} at offset {offset}, got {rest[0]!r}"
        )
    rest = rest[1:]
    if not rest:
        raise CallSyntaxError(f"{what} is missing (offset {offset + 1})")
    if _is_space(rest[0]):
        raise CallSyntaxError(f"one space separates the parts: extra space at offset {offset + 1}")
    return rest


def parse_call(text: str) -> Call:
    """Parse ``/_call [@<member> ]<protocol> <request>``; raise :class:`CallSyntaxError`.

    One space separates the parts. A member name with spaces, or ending with
    punctuation, is quoted: ``@'Acme Support'``. The protocol must be a
    protocol name, and the request strict JSON (as envelopes: no duplicate
    member names, no NaN, bounded depth) of one JSON object.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    if not text.startswith(COMMAND):
        raise CallSyntaxError(f"the text does not start with {COMMAND!r}")
    pos = len(COMMAND)
    rest = _one_space(text[pos:], "the protocol", pos)
    pos += 1
    member: str | None = None
    if rest.startswith("@"):
        name, after = _parse_member(rest[1:])
        member = name
        pos += len(rest) - len(after)
        rest = _one_space(after, "the protocol", pos)
        pos += 1
    end = rest.find(" ")
    protocol = rest if end == -1 else rest[:end]
    try:
        check_protocol_name(protocol, "protocol")
    except EnvelopeError as exc:
        raise CallSyntaxError(f"{exc} (offset {pos})") from None
    pos += len(protocol)
    body = _one_space(rest[len(protocol) :], "the request", pos)
    pos += 1
    try:
        request = _json.loads(body)
    except _json.JsonError as exc:
        raise CallSyntaxError(f"request at offset {pos}: {exc}") from None
    if not isinstance(request, dict):
        raise CallSyntaxError(f"request at offset {pos}: expected a JSON object")
    return Call(protocol, request, member)


# --------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------

ItemId: TypeAlias = Hashable
"""A chat item id, as the caller's chat API names items (``chatItemId``, an int)."""

Sender: TypeAlias = Hashable
"""A reply's sender, as the caller identifies it: a contact or group member id, or a name."""

JSONRPC_BINDINGS: Final = frozenset({"mcp", "a2a"})
"""Bindings whose messages are JSON-RPC 2.0 objects."""

A2A_STREAMING_METHODS: Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})
"""A2A methods answered with a stream of replies (A2A binding, "Streaming")."""

A2A_TERMINAL_STATES: Final = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
A2A_INTERRUPTED_STATES: Final = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
A2A_ENDING_STATES: Final = A2A_TERMINAL_STATES | A2A_INTERRUPTED_STATES
"""Task states, in A2A 1.0's JSON form, that end a stream: terminal or interrupted."""


class ChatKind(enum.StrEnum):
    """Where a command was sent: a direct chat or a group (business chats are groups)."""

    DIRECT = "direct"
    GROUP = "group"


def parse_reply(protocol: str, text: str) -> dict[str, Any] | None:
    """The protocol message a reply's text carries, or None if it is not one.

    A message of a protocol is a JSON object in strict JSON; for the JSON-RPC
    bindings (``mcp``, ``a2a``) it must also be a JSON-RPC 2.0 object
    (``"jsonrpc": "2.0"``). Anything else is a text reply.
    """
    try:
        value = _json.loads(text)
    except _json.JsonError:
        return None
    if not isinstance(value, dict):
        return None
    if protocol in JSONRPC_BINDINGS and value.get("jsonrpc") != "2.0":
        return None
    return value


def _same_id(a: object, b: object) -> bool:
    # JSON-RPC ids are strings, numbers or null; compare within a JSON type
    # (Python's True == 1 must not match). A2A allows a null id, which its
    # response repeats.
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return False


def _is_response_to(request: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
    """True for a JSON-RPC response (a result or an error) to ``request``.

    It has the request's id; an error with ``"id": null`` also answers it
    (JSON-RPC sends null when the request's id could not be read, and the
    quote already ties the reply to the command).
    """
    if "method" in message or ("result" in message) == ("error" in message):
        return False
    if "id" not in message:
        return False
    if "error" in message and message["id"] is None:
        return True
    return "id" in request and _same_id(request["id"], message["id"])


def _ends_stream(message: Mapping[str, Any]) -> bool:
    result = message.get("result")
    if not isinstance(result, dict):
        return False
    # A2A's StreamResponse: a stream with a message holds that one message.
    if isinstance(result.get("message"), dict):
        return True
    for key in ("task", "statusUpdate"):
        event = result.get(key)
        if isinstance(event, dict):
            status = event.get("status")
            state = status.get("state") if isinstance(status, dict) else None
            if isinstance(state, str) and state in A2A_ENDING_STATES:
                return True
    return False


def ends_answer(protocol: str, request: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
    """True if ``message``, a reply to ``request``, is the last reply of the answer.

    * ``mcp``: the JSON-RPC response (a result or an error) with the request's
      id; notifications before it do not end the answer.
    * ``a2a``: for ``SendStreamingMessage`` and ``SubscribeToTask``, the reply
      whose task or status update is in a terminal state (completed, failed,
      canceled, rejected) or an interrupted one (input required, auth
      required), a reply with a message (A2A's StreamResponse: such a stream
      holds one message), or a JSON-RPC error; for every other method, the
      JSON-RPC response.
    * any other protocol: a JSON-RPC response with the request's id, when the
      request has an id; otherwise nothing ends the answer.

    A JSON-RPC error with ``"id": null`` ends any answer.
    """
    if not _is_response_to(request, message):
        return False
    method = request.get("method")
    if protocol == "a2a" and isinstance(method, str) and method in A2A_STREAMING_METHODS:
        return "error" in message or _ends_stream(message)
    return True


@dataclass(frozen=True, slots=True)
class Reply:
    """One accepted reply, in arrival order.

    ``message`` is the protocol message (a JSON object) or None when the text
    is not a message of the protocol; ``text`` is always the reply's text.
    ``ends`` is True for the reply that ended its sender's answer.
    """

    sender: Sender
    text: str
    message: dict[str, Any] | None
    ends: bool = False

    @property
    def is_message(self) -> bool:
        """True for a message of the protocol, False for a text reply."""
        return self.message is not None


@dataclass(slots=True)
class _Pending:
    call: Call
    chat: ChatKind
    peer: Sender | None
    replies: list[Reply] = field(default_factory=list)
    ended: list[Sender] = field(default_factory=list)


class ReplyCollector:
    """Matches replies to ``/_call`` commands and collects them, without I/O.

    Register each sent command with :meth:`register` under its chat item id,
    then feed every incoming chat item to :meth:`add` with its sender and the
    id of the item it quotes. The acceptance rules of the protocol text:

    * a direct chat accepts replies from the recipient only (``peer``);
    * a group command with a mention accepts the mentioned member only;
    * a group command without a mention is a broadcast: any member's replies.

    Every accepted reply is kept in arrival order with its sender; JSON
    protocol messages and text replies are told apart (:class:`Reply`).
    :meth:`is_complete` says when an answer has ended (:func:`ends_answer`).
    A broadcast has one answer per member; its wait ends by time, never by a
    reply, so :meth:`is_complete` is False for it unless asked about one
    sender. When a wait ends, :meth:`collected` or :meth:`finish` return
    everything collected so far.
    """

    def __init__(self) -> None:
        self._calls: dict[ItemId, _Pending] = {}

    def register(
        self,
        item_id: ItemId,
        call: Call,
        *,
        chat: ChatKind | str,
        peer: Sender | None = None,
    ) -> None:
        """Register the command sent as chat item ``item_id``.

        ``chat`` is ``"direct"`` or ``"group"``. In a direct chat ``peer`` is
        the contact (required), and ``call.member`` must be None. In a group,
        a call with ``call.member`` accepts only that member: ``peer`` is the
        sender value that identifies the member, by default the member's name.
        A group call without a member is a broadcast, and takes no ``peer``.
        Raise :class:`CollectorError` on a repeated id or a wrong combination.
        """
        try:
            kind = ChatKind(chat)
        except ValueError:
            raise CollectorError(f"chat: expected 'direct' or 'group', got {chat!r}") from None
        if not isinstance(call, Call):
            raise CollectorError(f"call: expected a Call, got {type(call).__name__}")
        if item_id in self._calls:
            raise CollectorError(f"chat item {item_id!r} is already registered")
        if kind is ChatKind.DIRECT:
            if call.member is not None:
                raise CollectorError("a command in a direct chat mentions no member")
            if peer is None:
                raise CollectorError("a direct chat needs the peer that may reply")
        elif call.member is None:
            if peer is not None:
                raise CollectorError("a broadcast (no mention) accepts every member: no peer")
        elif peer is None:
            peer = call.member
        self._calls[item_id] = _Pending(call=call, chat=kind, peer=peer)

    def add(self, sender: Sender, quoted_item_id: ItemId | None, text: str) -> bool:
        """Offer an incoming chat item; return True if it was accepted as a reply.

        It is accepted when it quotes a registered command and ``sender`` may
        answer it. A reply after the sender's answer ended is still collected.
        """
        if quoted_item_id is None:
            return False
        pending = self._calls.get(quoted_item_id)
        if pending is None:
            return False
        if pending.peer is not None and sender != pending.peer:
            return False
        call = pending.call
        message = parse_reply(call.protocol, text)
        ends = (
            message is not None
            and sender not in pending.ended
            and ends_answer(call.protocol, call.request, message)
        )
        if ends:
            pending.ended.append(sender)
        pending.replies.append(Reply(sender=sender, text=text, message=message, ends=ends))
        return True

    def _get(self, item_id: ItemId) -> _Pending:
        try:
            return self._calls[item_id]
        except KeyError:
            raise CollectorError(f"chat item {item_id!r} is not a registered call") from None

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._calls

    def call(self, item_id: ItemId) -> Call:
        """The command registered as ``item_id``."""
        return self._get(item_id).call

    def is_broadcast(self, item_id: ItemId) -> bool:
        """True for a group command without a mention."""
        return self._get(item_id).peer is None

    def is_complete(self, item_id: ItemId, sender: Sender | None = None) -> bool:
        """True when the answer to ``item_id`` has ended.

        With ``sender``, whether that sender's answer has ended (for a
        broadcast, per member). Without, whether the recipient's answer has
        ended; always False for a broadcast, whose wait ends by time.
        """
        pending = self._get(item_id)
        if sender is not None:
            return sender in pending.ended
        return pending.peer is not None and pending.peer in pending.ended

    def completed_senders(self, item_id: ItemId) -> tuple[Sender, ...]:
        """The senders whose answers have ended, in the order they ended."""
        return tuple(self._get(item_id).ended)

    def collected(self, item_id: ItemId) -> tuple[Reply, ...]:
        """Every accepted reply to ``item_id`` so far, in arrival order."""
        return tuple(self._get(item_id).replies)

    def finish(self, item_id: ItemId) -> tuple[Reply, ...]:
        """End the wait for ``item_id``: forget the call and return what it collected."""
        replies = self.collected(item_id)
        del self._calls[item_id]
        return replies

    def pending(self) -> tuple[ItemId, ...]:
        """The registered calls whose answers have not ended (broadcasts included)."""
        return tuple(i for i in self._calls if not self.is_complete(i))

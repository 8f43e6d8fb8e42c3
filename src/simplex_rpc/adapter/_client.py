"""A caller's round trip to a bot, which the SDK client transports adapt (MCP and A2A).

No SDK imports, so that both client modules can use it. :class:`RoundTrip`
sends one JSON-RPC request of a binding to one bot and gives back the binding
messages of its answer, over Service RPC (the envelope's ``request`` and
``response``) or in a conversation (``/_call <protocol>``, replies until the
answer ends), and classifies every way that can fail in one
:class:`RoundTripError` (:class:`Failure`). A transport maps each failure to
its SDK's error; which transport a request takes (``via``) and what the
answer means are the transport's and the binding's.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from enum import StrEnum
from typing import Any, Final, Literal

from .._wire.envelope import ErrorInfo, Request
from .._wire.keys import SigningKey
from .._wire.redact import redact
from ..errors import ChatCoreError, SimplexRpcError
from . import ChatCore
from ._call_options import CallOptions
from ._chat import CallRefused, check_chat_ref
from ._core import check_seconds
from ._errors import ChatCoreTimeout
from ._service import service_request_command

__all__ = [
    "DEFAULT_MAX_RETRY_AFTER",
    "RETRIES",
    "VIAS",
    "CallOptions",
    "Failure",
    "RoundTrip",
    "RoundTripError",
    "Via",
    "check_destination",
    "check_seconds",
    "describe_error",
    "is_notification",
]

DEFAULT_MAX_RETRY_AFTER: Final = 60.0
"""Seconds of ``retryAfter`` honoured by default; a longer wait is returned as the error."""

RETRIES: Final = 3
"""How many times one request is repeated after errors with ``retryAfter``."""

Via = Literal["rpc", "chat", "auto"]
"""The transports a request can go by (``auto``: chosen from the address's declarations)."""

VIAS: Final[tuple[Via, ...]] = ("rpc", "chat", "auto")
"""The transports a request can go by (``auto``: chosen from the address's declarations)."""

_PROBE = Request(protocol="probe", request=None)


def check_destination(user_id: object, target: object) -> None:
    """Raise :class:`SimplexRpcError` for a user id or a target the core's command refuses.

    The adapter's own command builder checks them, so the rules are the same
    as for every Service RPC request.
    """
    service_request_command(user_id, target, _PROBE, timeout=None)  # type: ignore[arg-type]


def describe_error(error: ErrorInfo, hint: str = "") -> str:
    """The text a client shows for an envelope error.

    The envelope code first, then the bot's message (at most 300 characters),
    its ``retryAfter`` and ``hint`` (what to do instead).
    """
    text = error.code
    if error.message:
        text += f": {error.message[:300]}"
    if error.retry_after is not None:
        text += f" (retryAfter {error.retry_after} s)"
    if hint:
        text += f"; {hint}"
    return text


class Failure(StrEnum):
    """Why a round trip gave no answer: the one classification both transports map."""

    REFUSED = "refused"
    """Not sent: the call broke a caller's rule (size, mention, the binding's policy)."""
    TIMEOUT = "timeout"
    """Sent, and no complete answer within the timeout (or the core did not answer)."""
    UNDELIVERED = "undelivered"
    """The chat core could not deliver the request (an address it cannot reach, ...)."""
    ENVELOPE = "envelope"
    """The bot answered with an envelope error: the request was not passed to its server."""
    BAD_ANSWER = "bad_answer"
    """The bot answered with something that is not a JSON-RPC response to this request."""


class RoundTripError(SimplexRpcError):
    """A round trip that gave no answer; ``kind`` says why (:class:`Failure`).

    ``error`` is the envelope error for :attr:`Failure.ENVELOPE`, else None.
    The message never holds key material: core errors are redacted.
    """

    def __init__(self, kind: Failure, message: str, error: ErrorInfo | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.error = error


def is_notification(message: Mapping[str, Any]) -> bool:
    """Whether a binding message is a JSON-RPC notification (a method and no id)."""
    return "id" not in message and isinstance(message.get("method"), str)


def _answer_to(message: Mapping[str, Any], request_id: Any) -> dict[str, Any] | None:
    """``message`` as the response to ``request_id``, or None when it answers another.

    JSON-RPC 2.0 allows a null id on an error the server could not tie to a
    request (a parse error). A round trip carries exactly one request, so such
    an error is this request's: its code and message are kept, with the id.
    """
    if "id" not in message:
        return None
    if message["id"] == request_id:
        return dict(message)
    if message["id"] is None and "error" in message and "result" not in message:
        return {**message, "id": request_id}
    return None


class RoundTrip:
    """A caller's round trips to one bot for one binding (``protocol``), through ``core``.

    ``target`` is the bot's contact address link or SimpleX name, for Service
    RPC; ``chat`` a ChatRef of a conversation with it (``"@5"`` a contact,
    ``"#7"`` a group, ``member`` the bot's display name to mention there), for
    ``/_call``. ``via`` is the transport :meth:`answers` takes by default:
    ``rpc`` needs ``target``, ``chat`` needs ``chat``, ``auto`` (``target``)
    is ``rpc`` once :meth:`choose` found ``transports.rpc`` declared.
    ``sign_key`` signs Service RPC requests; ``timeout`` is the seconds the
    bot has for each request; an error with ``retryAfter`` is repeated up to
    :data:`RETRIES` times when its wait is at most ``max_retry_after``.

    Bad arguments raise :class:`SimplexRpcError` (a TypeError for ``core``
    and ``sign_key``), naming the argument. The private key never appears in
    a message or the repr.
    """

    def __init__(
        self,
        core: ChatCore,
        user_id: int,
        protocol: str,
        *,
        target: str | None = None,
        chat: str | None = None,
        member: str | None = None,
        via: Via = "rpc",
        sign_key: SigningKey | None = None,
        timeout: float = 30.0,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
    ) -> None:
        if not isinstance(core, ChatCore):
            raise TypeError(f"core: expected a ChatCore, got {type(core).__name__}")
        if sign_key is not None and not isinstance(sign_key, SigningKey):
            raise TypeError(f"sign_key: expected a SigningKey, got {type(sign_key).__name__}")
        if not isinstance(protocol, str) or not protocol:
            raise SimplexRpcError("protocol: expected a protocol name")
        self.target, self.chat = self.check(
            user_id, target=target, chat=chat, member=member, via=via
        )
        self.core = core
        self.user_id = user_id
        self.protocol = protocol
        self.member = member
        self.via: Via = via
        self.timeout = check_seconds(timeout, "timeout")
        self.max_retry_after = check_seconds(max_retry_after, "max_retry_after")
        self._sign_key = sign_key

    @staticmethod
    def check(
        user_id: object,
        *,
        target: object = None,
        chat: object = None,
        member: object = None,
        via: object = "rpc",
    ) -> tuple[str | None, str | None]:
        """``(target, chat)`` checked as the constructor checks them, before a core is open.

        A target must not be a ChatRef (that is a conversation: ``chat``);
        ``member`` goes with a group's ``chat``.
        """
        if via not in VIAS:
            raise SimplexRpcError(f"via: {str(via)[:32]!r} is not one of {', '.join(VIAS)}")
        if target is None and chat is None:
            raise SimplexRpcError("target: name the bot's address, or a chat with it")
        check_destination(user_id, target if target is not None else chat)
        if target is not None:
            try:
                check_chat_ref(target, "target")
            except SimplexRpcError:
                pass  # not a ChatRef: a link or a name, as check_destination took it
            else:
                raise SimplexRpcError(
                    f"target: {target} is a ChatRef: use via='chat', or the address link for"
                    f" via={via!r}"
                )
        elif via != "chat":
            raise SimplexRpcError(f"target: via={via!r} needs the bot's address")
        if chat is not None:
            chat = check_chat_ref(chat, "target: via='chat' calls in a conversation")
        elif via == "chat":
            raise SimplexRpcError("chat: via='chat' needs the conversation's ChatRef")
        if member is not None:
            if chat is None:
                raise SimplexRpcError("member: only for via='chat' in a group")
            if not isinstance(member, str) or not member:
                raise SimplexRpcError("member: expected a member's display name")
            if chat.startswith("@"):
                raise SimplexRpcError("member: a direct chat has no members to mention")
        return target, chat  # type: ignore[return-value]

    def __repr__(self) -> str:
        signed = "signed" if self._sign_key is not None else "unsigned"
        where = self.chat if self.via == "chat" else self.target
        return f"RoundTrip({self.protocol!r}, {where!r}, via={self.via!r}, {signed})"

    async def choose(self) -> Via:
        """``via="auto"``: ``rpc`` when the address declares ``transports.rpc`` for the
        protocol (its declarations, read now); otherwise :class:`SimplexRpcError`."""
        if self.via != "auto":
            return self.via
        assert self.target is not None  # check() requires it for auto
        declared = await self.core.link_declarations(self.user_id, self.target)
        entry = declared.protocols.get(self.protocol)
        transports = entry.transports if entry is not None else ()
        if "rpc" in transports:
            self.via = "rpc"
            return self.via
        if entry is None:
            what = f"does not declare {self.protocol}"
        else:
            what = f"declares {self.protocol} over {', '.join(transports) or 'no transport'} only"
        raise SimplexRpcError(
            f"via='auto': the address {what}, not over Service RPC (transports.rpc);"
            " connect to it and call with via='chat' and the contact's ChatRef"
        )

    async def answers(
        self,
        request: Mapping[str, Any],
        *,
        via: Literal["rpc", "chat"] | None = None,
        timeout: float | None = None,
        agent_card: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[dict[str, Any]]:
        """The binding messages that answer ``request``, in order; the last ends the answer.

        Over Service RPC (``via="rpc"``, the default unless the round trip's
        own ``via`` is ``chat``) the one message is the envelope's response.
        In the conversation, the bot's notifications for the request come as
        they arrive (:func:`is_notification`), then each response with the
        request's id, until the reply that ends the answer (a stream's
        events, in the A2A binding). ``timeout`` replaces the round trip's
        for this request; ``agent_card`` goes to the caller's policy in a
        conversation (``ChatCore.call_stream``).

        Every failure is a :class:`RoundTripError`; a response to another
        request (a null-id error aside, which is this request's) is
        :attr:`Failure.BAD_ANSWER`.
        """
        seconds = self.timeout if timeout is None else check_seconds(timeout, "timeout")
        chosen = via if via is not None else ("chat" if self.via == "chat" else "rpc")
        request_id = request.get("id")
        try:
            if chosen == "rpc":
                yield await self._rpc(request, request_id, seconds)
                return
            async for message in self._chat(request, request_id, seconds, agent_card):
                yield message
        except CallRefused as exc:
            raise RoundTripError(Failure.REFUSED, f"not sent: {exc}") from None
        except ChatCoreTimeout as exc:
            raise RoundTripError(Failure.TIMEOUT, redact(str(exc))) from None
        except ChatCoreError as exc:
            raise RoundTripError(
                Failure.UNDELIVERED, redact(f"the chat core could not deliver the request: {exc}")
            ) from None

    async def _rpc(
        self, request: Mapping[str, Any], request_id: Any, seconds: float
    ) -> dict[str, Any]:
        """One Service RPC request, signed when the round trip has a key."""
        if self.target is None:
            raise SimplexRpcError("via='rpc' needs the bot's address (target)")
        key = self._sign_key
        envelope = Request(
            protocol=self.protocol,
            request=dict(request),
            request_key=key.public_key if key is not None else None,
        )
        response = await self.core.service_request(
            self.user_id,
            self.target,
            envelope,
            timeout=math.ceil(seconds),
            sign_key=key,
            retries=RETRIES,
            max_retry_after=self.max_retry_after,
        )
        if response.error is not None:
            raise RoundTripError(Failure.ENVELOPE, describe_error(response.error), response.error)
        answer = response.response
        if not isinstance(answer, dict):
            raise RoundTripError(
                Failure.BAD_ANSWER, "the bot's answer is not a JSON-RPC response object"
            )
        own = _answer_to(answer, request_id)
        if own is None:
            raise RoundTripError(Failure.BAD_ANSWER, "the bot's response has another request's id")
        return own

    async def _chat(
        self,
        request: Mapping[str, Any],
        request_id: Any,
        seconds: float,
        agent_card: Mapping[str, Any] | None,
    ) -> AsyncIterator[dict[str, Any]]:
        """``/_call`` in the conversation: notifications, then responses until the end."""
        if self.chat is None:
            raise SimplexRpcError("via='chat' needs the conversation's ChatRef (chat)")
        async for reply in self.core.call_stream(
            self.chat,
            self.protocol,
            request,
            member=self.member,
            wait=seconds,
            user_id=self.user_id,
            agent_card=agent_card,
        ):
            body = reply.message
            if body is None:
                continue  # a text reply, not a message of the binding
            if is_notification(body):
                yield body
                continue
            own = _answer_to(body, request_id)
            if own is not None:
                yield own
            elif reply.ends:
                raise RoundTripError(
                    Failure.BAD_ANSWER, "the bot's response has another request's id"
                )
            if reply.ends:
                return
        raise RoundTripError(
            Failure.TIMEOUT, f"no complete answer in {self.chat} within {seconds:g} seconds"
        )

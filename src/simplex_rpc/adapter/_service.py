"""Service RPC through the chat core: the requester and the responder.

The responder (:class:`_Responder`) answers ``serviceRequest`` events with
``/_service_response``; the requester sends ``/_service_request`` and parses
the ``serviceResponse``. Command and event shapes: simplex-chat
``bots/api/COMMANDS.md`` and ``bots/api/EVENTS.md``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import math
import re
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from .._bindings import RPC_JSON_LIMIT
from .._wire import strict_json as _json
from .._wire.envelope import (
    UNSET,
    ErrorCode,
    Request,
    Response,
    check_protocol_name,
    check_request_key,
    request_from_value,
)
from .._wire.keys import PublicKey, SigningKey
from .._wire.redact import show
from .._wire.seal import MAX_RESPONSE, REQUEST_PADDED_LENGTH, max_response_payload
from ..errors import ChatCoreError, EnvelopeError, KeyFormatError, SimplexRpcError
from ._admission import Admission, Decision, Ticket, Verdict, WindowSeen
from ._answers import AnswerGate, AnswerStoreProtocol
from ._budget import RateLimit, _Limiter
from ._core import (
    DEFAULT_COMMAND_TIMEOUT,
    Pending,
    _check_user_id,
    _core_error,
    _CoreBase,
    _dump_command_json,
    _Held,
    _power_of_ten,
    check_seconds,
    log,
)
from ._declare import _Declarations
from ._errors import ChatCoreClosed, ChatCoreTimeout, _AnswerLost
from ._raw import ENVELOPE_ERRORS, ErrorFormat, RawRequest, check_error_format

#: The core accepts a response within 180 seconds of receiving the request
#: (the protocol text, "Service RPC transport", Requirements).
RESPONSE_WINDOW: Final = 180.0
#: The responder's default handler deadline: below the core's window, so that
#: the error answer still reaches the requester.
DEFAULT_HANDLER_TIMEOUT: Final = 170.0
#: The responder's default bound on the requests waiting for a slot (beyond them: shed).
DEFAULT_MAX_QUEUE: Final = 1000
#: The responder's default time for the handlers in flight when ``serve`` is cancelled.
DEFAULT_GRACE: Final = 5.0
#: The requester's default wait (the protocol's default ``timeout``).
DEFAULT_REQUEST_TIMEOUT: Final = 30
#: Extra time given to the core, beyond ``timeout``, to answer a service request.
_REQUEST_GRACE: Final = 15.0

# A request id is put into a command as one token: it must be one.
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9_=+/.:-]{1,512}")
_OPTION_NAMES: Final = ("timeout=", "sign_key=")


# ---------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceAddress:
    """A contact address with ratchet keys: the target of Service RPC requests."""

    full_link: str
    short_link: str | None = None

    @property
    def link(self) -> str:
        """The short link when there is one, else the full link."""
        return self.short_link or self.full_link

    @classmethod
    def from_created_link(cls, obj: object) -> ServiceAddress:
        """Build from the core's ``CreatedConnLink`` (``connFullLink``, ``connShortLink``)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("connFullLink"), str):
            raise ChatCoreError("the chat core's answer has no contact link (connLinkContact)")
        short = obj.get("connShortLink")
        return cls(
            full_link=obj["connFullLink"], short_link=short if isinstance(short, str) else None
        )


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ServiceRequest:
    """One request as the responder's handler sees it.

    ``signer`` is the key the core verified the signature with, or None for an
    unsigned request; ``request`` is the parsed envelope (its ``request`` is
    the protocol's message). The content is the peer's data: never code.
    """

    request_id: str
    signer: PublicKey | None
    request: Request
    user_id: int

    def __repr__(self) -> str:
        # The request may carry credentials: Request's repr names it without its content.
        return (
            f"ServiceRequest(request_id={show(self.request_id, 80)}, signer={self.signer!r},"
            f" request={self.request!r}, user_id={self.user_id!r})"
        )


Handler = Callable[[ServiceRequest], Any]
"""A responder's handler: returns (or, if async, resolves to) a Response or a JSON value."""
RawHandler = Callable[[RawRequest], Any]
"""A raw responder's handler: returns (or, if async, resolves to) the answer, a JSON object."""


def _check_target(target: object) -> str:
    if not isinstance(target, str) or not target:
        raise SimplexRpcError("target: expected a contact address link or a SimpleX name")
    if any(ch.isspace() or not ch.isprintable() for ch in target):
        raise SimplexRpcError("target: must not contain white space or control characters")
    if target.startswith(_OPTION_NAMES):
        raise SimplexRpcError("target: must not begin with an option name (timeout=, sign_key=)")
    return target


def _check_service_target(target: str) -> None:
    """Target resolution (plans/2026-07-22-service-rpc-chat.md; the core's code does not
    have it yet): a link, or a contact name written ``@name.simplex``. A channel name
    (``#…``) and a bare name fail in the core: refused before sending, with the form
    that works."""
    if target.startswith("#"):
        raise SimplexRpcError(
            "target: a channel name (#…) is not a service target; a SimpleX name is"
            " written @name.simplex"
        )
    if not target.startswith("@") and ":" not in target:
        raise SimplexRpcError(
            f"target: {show(target, 60)} is neither a link nor a name: a SimpleX name is"
            " written @name.simplex"
        )


def service_request_command(
    user_id: int,
    target: str,
    request: Request,
    *,
    timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
    sign_key: SigningKey | None = None,
) -> str:
    """The exact command text of a service request.

    ``/_service_request <userId> <target> [timeout=<s>] [sign_key=<key>] <json>``,
    with ``<json>`` the compact envelope. A request with ``requestKey`` must
    be signed with that key: otherwise :class:`SimplexRpcError`, before anything
    is sent.

    The text holds the private key when ``sign_key`` is given: it goes to the
    core and nowhere else (never log it unredacted).
    """
    _check_user_id(user_id)
    _check_target(target)
    if not isinstance(request, Request):
        raise TypeError(f"request: expected a Request, got {type(request).__name__}")
    _check_command_options(user_id, target, timeout, sign_key)
    if request.request_key is not None and (
        sign_key is None or sign_key.public_key != request.request_key
    ):
        # The protocol text: "A request with requestKey MUST be signed with that
        # key". The responder would answer bad_request; refuse before sending.
        raise SimplexRpcError(
            "requestKey: the request names a key that does not sign it"
            + (" (no sign_key given)" if sign_key is None else " (sign_key has another key)")
        )
    return _command(user_id, target, request.to_json(), timeout, sign_key)


def raw_request_command(
    user_id: int,
    target: str,
    obj: Mapping[str, Any],
    *,
    timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
    sign_key: SigningKey | None = None,
) -> str:
    """The exact command text of a raw service request: ``obj`` (any JSON object) as
    compact strict JSON, in ``/_service_request <userId> <target> [timeout=<s>]
    [sign_key=<key>] <json>``.

    A value that is not strict JSON, and a request longer than the agent's block
    can carry (:data:`MAX_RAW_REQUEST` bytes, before the reply queue's address
    is counted), raise :class:`SimplexRpcError` before anything is sent. The
    text holds the private key when ``sign_key`` is given (never log it unredacted).
    """
    _check_command_options(user_id, target, timeout, sign_key)
    if not isinstance(obj, Mapping):
        raise TypeError(f"obj: expected a JSON object (a dict), got {type(obj).__name__}")
    try:
        payload = _json.dumps(dict(obj))
        _json.check(payload)
    except (_json.JsonError, TypeError, ValueError) as exc:
        raise SimplexRpcError(f"request: not strict JSON: {show(str(exc), 200)}") from None
    if len(payload) > MAX_RAW_REQUEST:
        raise SimplexRpcError(
            f"request: {len(payload)} bytes of JSON cannot fit the agent's block (at most"
            f" {MAX_RAW_REQUEST} bytes, less the reply queue's address and the signature)"
        )
    return _command(user_id, target, payload, timeout, sign_key)


#: The longest request JSON the agent's block could ever carry: 11,106 bytes less the
#: length prefix, the tag, the queue count and an absent signature
#: (``max_request_payload`` with no reply queue); a real queue's address takes more.
MAX_RAW_REQUEST: Final = REQUEST_PADDED_LENGTH - 2 - 2 - 1


def _check_command_options(
    user_id: int, target: str, timeout: int | None, sign_key: SigningKey | None
) -> None:
    _check_user_id(user_id)
    _check_target(target)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1
    ):
        raise SimplexRpcError("timeout: expected a positive whole number of seconds")
    if sign_key is not None and not isinstance(sign_key, SigningKey):
        raise TypeError(f"sign_key: expected a SigningKey, got {type(sign_key).__name__}")


def _command(
    user_id: int, target: str, payload: bytes, timeout: int | None, sign_key: SigningKey | None
) -> str:
    """The command text of one request whose JSON is ``payload`` (all checked already)."""
    parts = ["/_service_request", str(user_id), target]
    if timeout is not None:
        parts.append(f"timeout={timeout}")
    if sign_key is not None:
        parts.append(f"sign_key={sign_key.encode()}")
    parts.append(payload.decode("utf-8"))
    return " ".join(parts)


def _envelope_json(data: object, kind: str, member: str) -> str | bytes:
    """The JSON text of the ``kind`` envelope the core reported as ``member``.

    The core reports an envelope as a JSON object (encoded again here) or as
    its JSON text (returned as it is, for the envelope parser to check);
    anything else, or an object that is not JSON, raises :class:`EnvelopeError`.
    """
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        try:
            return _json.dumps(data)
        except _json.JsonError as exc:
            raise EnvelopeError(f"{kind} envelope: {exc}") from None
    raise EnvelopeError(f"{kind} envelope: {member} is neither a JSON object nor a string")


class _ResponseTooLong(EnvelopeError):
    """A ``responseData`` longer than any agent response: refused before it is parsed."""


#: The longest response any agent sends: 14,829 bytes, from an address with PQ support
#: off (wire.md section 5); MAX_RESPONSE (11,103) is the limit with it on.
_LONGEST_RESPONSE: Final = max_response_payload(pq_support=False)


def _response_too_long(text: str | bytes) -> str | None:
    """Why a response's JSON is longer than a response can be, or None."""
    # surrogatepass: a lone surrogate is counted here and refused by the strict parse.
    size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else len(text)
    if size <= _LONGEST_RESPONSE:
        return None
    return (
        f"the chat core reported a response of {size} bytes, more than a response can"
        f" carry ({_LONGEST_RESPONSE} bytes with PQ support off, MAX_RESPONSE {MAX_RESPONSE}"
        " with it on): not passed on"
    )


def _parse_response_data(data: object) -> Response:
    """The response envelope from a ``serviceResponse``'s ``responseData``; else EnvelopeError.

    A real core carries at most 14,829 bytes of response JSON (the padded block
    of an address with PQ support off, wire.md section 5): a longer one is
    refused, naming its size and the limit (``service_request`` raises it as
    :class:`ChatCoreError`).
    """
    return Response.parse(_response_text(data))


def _response_text(data: object) -> str | bytes:
    """``responseData``'s JSON text (:func:`_envelope_json`), refused as
    :class:`_ResponseTooLong` past the longest response a core carries."""
    text = _envelope_json(data, "response", "responseData")
    too_long = _response_too_long(text)
    if too_long is not None:
        raise _ResponseTooLong(too_long)
    return text


#: responseData came as JSON text: the decoder reads it.
_UNREAD: Final = object()
_T = TypeVar("_T")


def _timed_out(exc: ChatCoreError) -> bool:
    """A timeout that hides the outcome: the library's own wait for the core, or the
    core's ``A_SERVICE ASETimeout`` (no response in time)."""
    return isinstance(exc, ChatCoreTimeout) or exc.type_path.endswith("/ASETimeout")


def _parse_request_data(data: object) -> Request:
    """The request envelope from a ``serviceRequest``'s ``requestData`` (any value: an
    object is encoded and read again strictly), as ``serve`` reads it; else
    :class:`EnvelopeError`."""
    return request_from_value(_request_object(None, data, trusted=False))


class _ServiceRpc:
    """``ChatCore``'s Service RPC part (see :class:`simplex_rpc.adapter.ChatCore`): the
    requester and ``serve``, through the core's commands and its request sinks, and
    ``declarations`` for ``declare=True``."""

    def __init__(self, core: _CoreBase, declarations: _Declarations) -> None:
        self._core = core
        self._declarations = declarations
        # The responder's own answers to requests no serve took (_unserved_request).
        self._own_answers: set[asyncio.Task[None]] = set()

    async def service_address(self, user_id: int, pq_ratchet: bool = True) -> ServiceAddress:
        """Make sure ``user_id``'s contact address exists and has ratchet keys; return it,
        with a short link that carries them (:attr:`ServiceAddress.link`).

        Creates it with ``/_address <userId> pq_ratchet=on|off``, or updates the
        existing one with ``/_address_settings <userId> pq_ratchet=on|off
        <settings>`` keeping its settings (simplex-chat ``bots/api/COMMANDS.md``,
        APICreateMyAddress and APISetAddressSettings; the protocol text: the
        core adds ratchet keys to an address created or updated with either
        option).

        An address upgraded in place keeps its full link, and only its short link
        carries the keys: a request to the full link still fails ``ASENotDRAddress``
        (issue 28, item 4: ``setMyAddressData`` on the existing connection, Commands.hs,
        as the chat's plans read it). So the short link is what is returned; an
        address without one (made before short links) gets one with
        ``/_short_link_address <userId> pq_ratchet=on`` (APIAddMyAddressShortLink).
        An address that still has no short link raises :class:`ChatCoreError`.
        """
        _check_user_id(user_id)
        option = f"pq_ratchet={'on' if pq_ratchet else 'off'}"
        try:
            shown = await self._core.command(f"/_show_address {user_id}")
        except ChatCoreError as exc:
            if "userContactLinkNotFound" not in exc.type_path:
                raise
            created = await self._core.command(f"/_address {user_id} {option}")
            address = ServiceAddress.from_created_link(created.get("connLinkContact"))
            log.info("created a contact address with ratchet keys for user %d", user_id)
            return await self._with_short_link(user_id, address)
        contact_link = shown.get("contactLink")
        settings = contact_link.get("addressSettings") if isinstance(contact_link, dict) else None
        if not isinstance(settings, dict):
            settings = {"businessAddress": False}
        settings_json = _dump_command_json(settings, "address settings")
        updated = await self._core.command(f"/_address_settings {user_id} {option} {settings_json}")
        link = updated.get("contactLink")
        address = ServiceAddress.from_created_link(
            link.get("connLinkContact") if isinstance(link, dict) else None
        )
        log.info("updated the contact address of user %d with ratchet keys", user_id)
        return await self._with_short_link(user_id, address)

    async def _with_short_link(self, user_id: int, address: ServiceAddress) -> ServiceAddress:
        """``address`` with a short link: its own, or one made now with
        ``/_short_link_address <userId> pq_ratchet=on`` (the keys go on it)."""
        if address.short_link is not None:
            return address
        resp = await self._core.command(f"/_short_link_address {user_id} pq_ratchet=on")
        link = resp.get("contactLink")
        upgraded = ServiceAddress.from_created_link(
            link.get("connLinkContact") if isinstance(link, dict) else None
        )
        if upgraded.short_link is None:
            raise ChatCoreError(
                f"the chat core made no short link for the address of user {user_id}"
                f" (/_short_link_address answered {show(resp.get('type'), 60)}): the address's"
                " ratchet keys are on its short link only"
            )
        log.info("added a short link with ratchet keys to the address of user %d", user_id)
        return upgraded

    async def service_request(
        self,
        user_id: int,
        target: str,
        request: Request,
        *,
        timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
        sign_key: SigningKey | None = None,
        retries: int = 0,
        max_retry_after: float | None = None,
    ) -> Response:
        """Send one request and return the response envelope.

        Sends ``/_service_request <userId> <target> [timeout=<s>]
        [sign_key=<key>] <json>`` and parses ``responseData`` (a JSON value or
        a JSON string) as the response. A response whose error has
        ``retryAfter`` is repeated after that many seconds, at most
        ``retries`` times, and not when ``retryAfter`` exceeds
        ``max_retry_after``; an error without ``retryAfter`` (any code, known
        or not) is final. Errors of the core raise :class:`ChatCoreError`.

        A layer over the raw call (:meth:`service_request_raw`): the envelope is
        its codec, and the repeats are the same (the identical bytes), except
        that a timeout is not repeated here.
        """
        cmd = service_request_command(user_id, target, request, timeout=timeout, sign_key=sign_key)

        def decode(text: str | bytes, _value: object) -> tuple[Response, int | None]:
            response = Response.parse(text)
            error = response.error
            return response, None if error is None else error.retry_after

        return await self._exchange(
            cmd, target, timeout, retries, max_retry_after, on_timeout=False, decode=decode
        )

    async def service_request_raw(
        self,
        user_id: int,
        target: str,
        obj: Mapping[str, Any],
        *,
        timeout: int | None = DEFAULT_REQUEST_TIMEOUT,
        sign_key: SigningKey | None = None,
        retries: int = 0,
        max_retry_after: float | None = None,
        retry_on_timeout: bool = True,
        errors: ErrorFormat = ENVELOPE_ERRORS,
    ) -> dict[str, Any]:
        """Send any JSON object as one request and return the answer object.

        Sends ``/_service_request <userId> <target> [timeout=<s>] [sign_key=<key>]
        <json>`` with ``obj`` as compact strict JSON (:func:`raw_request_command`:
        a value that is not strict JSON, or longer than the agent's block can
        carry, is refused before sending) and returns ``responseData`` read with
        the library's strict rules; it must be a JSON object no longer than a
        response can be (14,829 bytes), else :class:`EnvelopeError` (not an
        object, not strict JSON) or :class:`ChatCoreError` (too long).

        The retry policy (``retries`` repeats at most, 0 by default): each repeat
        sends the identical bytes, signed with the same key, so that a responder
        with an answer store (``answers=``) answers it from the store and runs
        nothing twice. It repeats only

        * an answer that ``errors`` (an :class:`ErrorFormat`, the protocol text's
          ``{"error": {...}}`` by default) reads as an error with ``retryAfter``,
          after those seconds, and not when they exceed ``max_retry_after``;
        * with ``retry_on_timeout``, a request whose outcome a timeout hid: the
          core's ``ASETimeout`` or this library's own wait for the core
          (:class:`ChatCoreTimeout`), at once.

        Never on a timer of its own. A repeat after a timeout reaches the handler
        again unless the service answers repeats idempotently (an answer store, or
        a rule of its own): pass ``retry_on_timeout=False`` for one that does not.
        The last answer is returned, an error answer included; the last timeout is
        raised.
        """
        errors = check_error_format(errors)
        if not isinstance(retry_on_timeout, bool):
            raise SimplexRpcError("retry_on_timeout: expected True or False")
        cmd = raw_request_command(user_id, target, obj, timeout=timeout, sign_key=sign_key)

        def decode(text: str | bytes, value: object) -> tuple[dict[str, Any], int | None]:
            if value is _UNREAD:
                try:
                    value = _json.loads(text)
                except _json.JsonError as exc:
                    raise EnvelopeError(f"response: {exc}") from None
            if not isinstance(value, dict):
                raise EnvelopeError(
                    f"response: expected a JSON object, got {_json.json_type(value)}"
                )
            return value, errors.retry_after(value)

        return await self._exchange(
            cmd,
            target,
            timeout,
            retries,
            max_retry_after,
            on_timeout=retry_on_timeout,
            decode=decode,
        )

    async def _exchange(
        self,
        cmd: str,
        target: str,
        timeout: int | None,
        retries: int,
        max_retry_after: float | None,
        *,
        on_timeout: bool,
        decode: Callable[[str | bytes, object], tuple[_T, int | None]],
    ) -> _T:
        """Send ``cmd`` (the identical text each time) and decode the ``responseData``;
        repeat as :meth:`service_request_raw` says."""
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SimplexRpcError("retries: expected a non-negative integer")
        if max_retry_after is not None:
            max_retry_after = check_seconds(max_retry_after, "max_retry_after")
        _check_service_target(target)
        wait_for = (
            float(timeout if timeout is not None else DEFAULT_REQUEST_TIMEOUT) + _REQUEST_GRACE
        )
        attempt = 0
        while True:
            try:
                resp = await self._core.command(cmd, timeout=wait_for)
            except ChatCoreError as exc:
                if not on_timeout or attempt >= retries or not _timed_out(exc):
                    raise
                attempt += 1
                log.info(
                    "service request timed out (%s): repeating the identical request (%d of %d)",
                    exc.type_path or type(exc).__name__,
                    attempt,
                    retries,
                )
                continue
            if resp.get("type") != "serviceResponse":
                raise ChatCoreError(
                    f"unexpected answer {show(resp.get('type'), 60)} to /_service_request"
                )
            data = resp.get("responseData")
            try:
                text = _response_text(data)
            except _ResponseTooLong as exc:  # no answer a core can carry: the core's fault
                raise ChatCoreError(str(exc)) from None
            # responseData's object was read strictly with its frame: not read again.
            answer, retry_after = decode(text, data if isinstance(data, dict) else _UNREAD)
            if retry_after is None or attempt >= retries:
                return answer
            if max_retry_after is not None and retry_after > max_retry_after:
                return answer
            attempt += 1
            log.info(
                "service request answered with retryAfter %d: repeating (%d of %d)",
                retry_after,
                attempt,
                retries,
            )
            await asyncio.sleep(retry_after)

    def _unserved_request(self, item: _Held, now: float, stray: bool = False) -> None:
        """A request held for a ``serve()`` that did not come within ``event_hold``, or
        (``stray``) one the core gave to this ChatCore, which serves no requests (the core
        gives each event to one client: another client of the core serves, and will never
        see it). Logged at WARNING by its id and answered ``rate_limited`` (the requester
        may repeat it)."""
        event = item.event
        request_id = event.get("requestId")
        user = event.get("user")
        user_id = user.get("userId") if isinstance(user, dict) else None
        answerable = (
            isinstance(request_id, str)
            and _REQUEST_ID.fullmatch(request_id) is not None
            and type(user_id) is int
            and user_id > 0
            and self._core._failure is None
        )
        outcome = (
            f"answering rate_limited (retryAfter {_UNSERVED_RETRY_AFTER})"
            if answerable
            else "it cannot be answered"
        )
        if stray:
            count = self._core._stray_requests
            if count <= 10 or _power_of_ten(count):
                log.warning(
                    "serviceRequest %s for user %s came to this ChatCore, which serves no"
                    " requests (%d so far): the core gives each event to one of its clients,"
                    " so another program connected to the same core cannot serve it (one"
                    " client per core); %s",
                    show(request_id, 80),
                    show(user_id, 20),
                    count,
                    outcome,
                )
        else:
            log.warning(
                "serviceRequest %s for user %s waited %.1f s and no serve() took it: %s",
                show(request_id, 80),
                show(user_id, 20),
                now - item.arrival,
                outcome,
            )
        if not answerable:
            return
        response = Response.failure(
            ErrorCode.RATE_LIMITED,
            "the request reached a client of the core that does not serve"
            if stray
            else "no responder is serving yet",
            retry_after=_UNSERVED_RETRY_AFTER,
        )
        cmd = f"/_service_response {user_id} {request_id} {response.to_json().decode()}"
        task = asyncio.create_task(self._answer_unserved(cmd, str(request_id)))
        self._own_answers.add(task)
        task.add_done_callback(self._own_answers.discard)

    async def _answer_unserved(self, cmd: str, request_id: str) -> None:
        try:
            resp = await self._core.command(cmd)
        except ChatCoreError as exc:
            log.warning(
                "serviceRequest %s: the rate_limited answer failed: %s", show(request_id, 80), exc
            )
            return
        if resp.get("type") not in _ACCEPTED:
            log.warning(
                "serviceRequest %s: the core answered %s to the rate_limited answer",
                show(request_id, 80),
                show(resp.get("type"), 60),
            )

    async def serve_raw(
        self,
        user_id: int,
        handler: RawHandler,
        *,
        concurrency: int = 32,
        handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
        rate_limit: RateLimit | Sequence[RateLimit] | None = None,
        max_response_bytes: int = RPC_JSON_LIMIT,
        max_queue: int = DEFAULT_MAX_QUEUE,
        grace: float = DEFAULT_GRACE,
        answers: AnswerStoreProtocol | None = None,
        errors: ErrorFormat = ENVELOPE_ERRORS,
        ready: asyncio.Event | None = None,
        stop: asyncio.Event | None = None,
    ) -> ServeOutcome:
        """Answer every ``serviceRequest`` event for ``user_id`` with any JSON object,
        until stopped: the responder under every envelope.

        ``handler`` is called with a :class:`RawRequest` (``request_id``,
        ``signer``: the verified key or None, ``data``: the request, a JSON object
        read strictly) and returns (or, if async, resolves to) the answer object.
        The responder answers on its own, in the shape ``errors`` says (an
        :class:`ErrorFormat`; the protocol text's ``{"error": {...}}`` by
        default, :data:`TYPED_ERRORS` for ``{"type": "error", ...}``):
        ``bad_request`` to a request that is not a strict JSON object or whose
        ``signerKey`` is not an Ed25519 key; ``rate_limited`` with ``retryAfter``
        past a budget or when shedding; ``internal`` when the handler raises or
        returns anything but a JSON object, or runs past its deadline; ``too_large``
        past ``max_response_bytes``. Every other rule is :meth:`serve`'s: exactly
        one answer per request, deadlines from arrival, ``concurrency``,
        ``max_queue``, shedding, ``requestId`` repeats, the graceful stop
        (``stop``, cancellation, ``grace``), ``ready``, the returned
        :class:`ServeOutcome`.

        ``answers`` (an :class:`AnswerStore`, a :class:`SQLiteAnswerStore` or any
        :class:`AnswerStoreProtocol`): idempotent answers. A request repeating one
        answered within the store's window, from the same signer with the same
        bytes (the key: the signer and the SHA-256 of ``requestData`` as the core
        delivers it), gets the stored answer and the handler does not run; a
        repeat that comes while the first still runs waits for its answer. An
        answer the handler failed to give (``internal``) and one with
        ``retryAfter`` are not kept. Unsigned requests are kept only by a store
        made with ``unsigned=True``. A repeat answered from the store passes the
        budgets like any request (it takes a token of the limits that count every
        request) but never counts as a failure: only a fresh run's error answer
        does. The ``requestId`` rule is another: a request the core reports twice
        (the same ``requestId``) is answered once, and never reaches the store.
        """
        responder = _Responder(
            self._core,
            _check_user_id(user_id),
            handler,
            concurrency=concurrency,
            handler_timeout=handler_timeout,
            rate_limit=rate_limit,
            max_response_bytes=max_response_bytes,
            max_queue=max_queue,
            grace=grace,
            answers=answers,
            errors=errors,
        )
        return await responder.run(ready, stop)

    async def serve(
        self,
        user_id: int,
        handler: Handler,
        *,
        protocols: Iterable[str],
        versions: Mapping[str, Collection[Any]] | None = None,
        concurrency: int = 32,
        handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
        rate_limit: RateLimit | Sequence[RateLimit] | None = None,
        max_response_bytes: int = RPC_JSON_LIMIT,
        max_queue: int = DEFAULT_MAX_QUEUE,
        grace: float = DEFAULT_GRACE,
        declare: bool = False,
        ready: asyncio.Event | None = None,
        stop: asyncio.Event | None = None,
        answers: AnswerStoreProtocol | None = None,
    ) -> ServeOutcome:
        """Answer every ``serviceRequest`` event for ``user_id``, until stopped.

        A layer over :meth:`serve_raw`: the protocol text's envelope is its codec
        (read, checked and answered below), and everything else is the raw
        responder's, ``answers=`` included.

        ``ready`` (an :class:`asyncio.Event`), when given, is set once requests are
        taken: a request sent after that is answered (one that came before is too,
        when held: ``event_hold``). ``stop``, when given, is the graceful stop: once
        it is set, ``serve`` stops as described below and returns its
        :class:`ServeOutcome` (the counts of its summary line). Cancelling
        ``serve`` stops it the same way, then raises ``CancelledError``.

        For each request: a ``signerKey`` that is not an Ed25519 key is
        answered ``bad_request``; the optional ``rate_limit`` (one
        :class:`RateLimit` or a sequence of them, every one must have a token)
        answers ``rate_limited`` with ``retryAfter``, the seconds until the
        request would pass them all; an invalid envelope is answered
        ``bad_request``; ``requestKey`` must match
        the verified signer (``check_request_key``); a protocol not in
        ``protocols`` is answered ``unsupported_protocol``, and a version not
        in ``versions[protocol]`` (where given) ``unsupported_version``; each
        error answer counts in the ``failures_only`` limits. Then ``handler``
        is called with a :class:`ServiceRequest` and returns a :class:`Response`
        or a JSON value (a success). A handler that raises
        is answered ``internal`` (without its text); one still running
        ``handler_timeout`` seconds after the request arrived (time spent
        waiting for a concurrency slot included) is cancelled and answered
        ``conversation_required`` for ``a2a`` and ``internal`` otherwise (a
        ``CancelledError`` the handler raises itself is a failure like any
        other). A result that is not JSON under the library's strict rules is
        answered ``internal``; a response longer than ``max_response_bytes``
        ``too_large``. By default that is 10,000 bytes of JSON (the protocol
        text: "A request and a response SHOULD NOT exceed 10,000 bytes of
        JSON"); passing up to the block's ``MAX_RESPONSE`` (11,101) allows
        longer responses, explicitly. An answer the core
        refuses as too large is replaced by ``too_large``, and one it refuses
        for another reason by ``internal``, each tried once.

        Load: at most ``concurrency`` handlers run at once, and at most
        ``max_queue`` requests (and never more than the core's
        ``event_buffer``) wait for a slot. A request past that, or still
        waiting when its deadline comes, is answered ``rate_limited`` with a
        ``retryAfter`` computed from the queue, at once: shed, never lost.
        Overload is logged as one line per 10 seconds, with counts.

        Exactly once: every request ends in one answer or one logged reason.
        The deadline counts from the moment the request's frame is read from
        the core. A ``requestId`` the core reports again (within the core's
        180-second window) is not handled again; repeats are logged like overload,
        one line per 10 seconds with their count, naming the first.

        Stopping: setting ``stop`` or cancelling ``serve`` is a graceful stop. It takes no new
        requests, answers every queued one ``rate_limited`` with a short
        ``retryAfter`` (so that requesters retry), gives the handlers in flight
        up to ``grace`` seconds, then cancels them (answered ``internal``), and
        logs one summary line: answered, shed, cancelled. A second cancellation
        stops at once.

        With ``declare``, the profile first declares ``transports.rpc`` for
        each served protocol (:meth:`declare`, keeping what else it declares;
        string ``versions`` become the declared versions).

        Raises :class:`ChatCoreClosed` as soon as the connection ends, whatever
        is queued (the handlers in flight are cancelled: their answers could
        not be sent).
        """
        user_id = _check_user_id(user_id)
        envelope = _EnvelopeHandler(handler, protocols, versions, user_id)
        responder = _Responder(
            self._core,
            user_id,
            envelope,
            concurrency=concurrency,
            handler_timeout=handler_timeout,
            rate_limit=rate_limit,
            max_response_bytes=max_response_bytes,
            max_queue=max_queue,
            grace=grace,
            answers=answers,
            errors=ENVELOPE_ERRORS,
            timeout_code=envelope.timeout_code,
            serving=", ".join(sorted(envelope.protocols)),
        )
        if not declare:
            return await responder.run(ready, stop)
        # The responder takes requests before the profile is written, so that one
        # arriving during the declaration's round trips is queued with its arrival
        # time, not lost; if declaring fails, stopping the responder answers it.
        self._core._attach_requests(responder)
        runner = asyncio.create_task(responder.run(None, stop))
        try:
            await self._declarations._declare_transport(
                user_id, sorted(envelope.protocols), "rpc", versions
            )
            if ready is not None:
                ready.set()  # requests were taken all along; now the profile says so too
            return await runner
        finally:
            if not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            # A runner cancelled before its first step never ran its own cleanup (a
            # declaration refused at once): it must not stay a responder.
            self._core._detach_requests(responder)


# ---------------------------------------------------------------------------
# The responder


class _EnvelopeHandler:
    """``serve``'s codec over the raw responder: the protocol text's envelope read,
    checked (``requestKey``, protocols, versions) and passed to the handler as a
    :class:`ServiceRequest`; its result answered as a response envelope."""

    def __init__(
        self,
        handler: Handler,
        protocols: Iterable[str],
        versions: Mapping[str, Collection[Any]] | None,
        user_id: int,
    ) -> None:
        if not callable(handler):
            raise TypeError("handler: expected a callable")
        if isinstance(protocols, str):
            raise TypeError("protocols: expected a collection of protocol names, not one string")
        self.protocols = frozenset(check_protocol_name(p, "protocols") for p in protocols)
        if not self.protocols:
            raise SimplexRpcError("protocols: at least one protocol must be served")
        self.versions: dict[str, frozenset[str]] = {}
        for name, served in (versions or {}).items():
            check_protocol_name(name, "versions")
            if name not in self.protocols:
                raise SimplexRpcError(f"versions: {name!r} is not among the served protocols")
            if isinstance(served, (str, bytes)) or not isinstance(served, Collection):
                raise SimplexRpcError(
                    f"versions[{name!r}]: expected a collection of versions, got"
                    f" {type(served).__name__}"
                )
            self.versions[name] = frozenset(_version_key(v) for v in served)
        self.handler = handler
        self.user_id = user_id

    @staticmethod
    def timeout_code(raw: RawRequest | None) -> str:
        """The answer to a handler past its deadline: ``conversation_required`` for
        ``a2a`` (the A2A binding's rule), ``internal`` otherwise."""
        if raw is not None and raw.data.get("protocol") == "a2a":
            return ErrorCode.CONVERSATION_REQUIRED
        return ErrorCode.INTERNAL

    def __call__(self, raw: RawRequest) -> Any:
        """The answer object, or (for an async handler) an awaitable of it: a synchronous
        handler's request costs no coroutine of its own."""
        rid = _Shown(raw.request_id, 80)
        try:
            request = request_from_value(raw.data)
        except EnvelopeError as exc:
            log.info("request %s: bad envelope: %s", rid, show(str(exc), 200))
            return _failure(ErrorCode.BAD_REQUEST, str(exc)[:300]).to_dict()
        protocol = request.protocol
        key_error = check_request_key(request, raw.signer)
        if key_error is not None:
            return Response(error=key_error).to_dict()
        if protocol not in self.protocols:
            return _failure(
                ErrorCode.UNSUPPORTED_PROTOCOL,
                "this responder does not serve the protocol over Service RPC",
            ).to_dict()
        served = self.versions.get(protocol)
        if served is not None and request.version is not UNSET:
            try:
                key = _version_key(request.version)
            except (TypeError, ValueError):
                key = ""
            if key not in served:
                return _failure(
                    ErrorCode.UNSUPPORTED_VERSION, "this responder does not serve the version"
                ).to_dict()
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request %s: protocol %s, signer %s",
                rid,
                show(protocol, 40),
                raw.signer.encode() if raw.signer else "none",
            )
        result = self.handler(
            ServiceRequest(
                request_id=raw.request_id, signer=raw.signer, request=request, user_id=raw.user_id
            )
        )
        if inspect.isawaitable(result):
            return _encoded(result)
        response = result if isinstance(result, Response) else Response.success(result)
        return response.to_dict()


async def _encoded(result: Awaitable[Any]) -> dict[str, Any]:
    """An async handler's result as a response envelope's object."""
    value = await result
    response = value if isinstance(value, Response) else Response.success(value)
    return response.to_dict()


def _version_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _is_user(value: object, user_id: int) -> bool:
    """``userId`` is this user: an integer (not a boolean, not 1.0) equal to it."""
    return type(value) is int and value == user_id


@dataclass(slots=True, eq=False)
class _Incoming:
    request_id: str
    signer_key: object
    data: object
    envelope: str | None  # requestData's text as the frame carried it
    frame_error: str | None  # why the frame is not strict JSON
    received: float  # the event loop's time when the frame was read
    started: float = 0.0  # the event loop's time when its handler started
    answering: bool = False  # its handler is done and its answer on the way
    raw: RawRequest | None = None  # once its JSON is read and it is admitted
    timed_out: bool = False  # answered at its deadline: a later result is dropped
    budgeted: bool = False  # admitted by the rate limits: its answer settles them
    signer: PublicKey | None = None  # the verified signer, once admitted
    ran: dict[str, Any] | None = None  # the answer of its own handler's run (answers=)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOutcome:
    """What one ``serve`` did, returned when it stops (its summary line, as data).

    ``answered``: requests handled whose answer the core took (or whose
    acknowledgement was lost); ``shed``: answered ``rate_limited`` by the responder
    itself, never handled; ``cancelled``: handlers still running past the stop's
    grace, cancelled and answered ``internal``; ``failed``: answers the core refused
    or never got; ``repeats``: requests repeating a ``requestId``, not handled
    again; ``unanswered``: answers of the responder's own still waiting for the core
    when the stop ended; ``stored``: of the ``answered``, those given from the answer
    store (``answers=``) without a run of the handler.
    """

    answered: int = 0
    shed: int = 0
    cancelled: int = 0
    failed: int = 0
    repeats: int = 0
    unanswered: int = 0
    stored: int = 0


class _Outcome:
    """Counters of one ``serve``, for the overload lines and the summary."""

    __slots__ = ("answered", "cancelled", "failed", "repeats", "shed", "stored", "unanswered")

    def __init__(self) -> None:
        self.answered = 0  # handled, and the core took the answer (or lost its acknowledgement)
        self.shed = 0  # answered rate_limited by the responder itself, never handled
        self.cancelled = 0  # handlers cancelled when serve stopped
        self.failed = 0  # answers the core refused or never got
        self.repeats = 0  # serviceRequests repeating a requestId: not handled again
        # Answers of the responder's own never sent: past the outbox's bound, or still
        # waiting for the core when the stop ended (each counted in a logged line).
        self.unanswered = 0
        self.stored = 0  # of the answered, given from the answer store

    def frozen(self) -> ServeOutcome:
        return ServeOutcome(
            answered=self.answered,
            shed=self.shed,
            cancelled=self.cancelled,
            failed=self.failed,
            repeats=self.repeats,
            unanswered=self.unanswered,
            stored=self.stored,
        )


class _IntervalLog:
    """Overload and repeats as one line per interval with counts, not one per request.

    The first occurrence is logged at once (with ``detail``, when given: which
    request); later ones in the same interval are counted and logged when it
    ends, and at the end of ``serve``.
    """

    def __init__(self, prefix: str, interval: float) -> None:
        self.prefix = prefix
        self.interval = interval
        self.counts: dict[str, int] = {}
        self.last = -math.inf
        self.timer: asyncio.TimerHandle | None = None

    def note(self, what: str, detail: str = "") -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        loop = asyncio.get_running_loop()
        if loop.time() - self.last >= self.interval:
            self.flush(detail)
        elif self.timer is None:
            self.timer = loop.call_at(self.last + self.interval, self.flush)

    def flush(self, detail: str = "") -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.counts:
            return
        parts = ", ".join(f"{count} {what}" for what, count in self.counts.items())
        log.warning("%s: %s%s", self.prefix, parts, f" ({detail})" if detail else "")
        self.counts.clear()
        self.last = asyncio.get_running_loop().time()


#: How many answers wait to be written to the core, at most, before the responder stops
#: reading the core's frames (back-pressure: the socket and the core hold the rest of a
#: burst); reading goes on once half of them are written. Nothing is dropped.
_MAX_OUTBOX: Final = 10_000
#: How the core accepts a ``/_service_response``: ``serviceReplyAccepted {user,
#: connectionId}`` (current cores), ``cmdOk`` (the first ones). Delivery is reported
#: later, by the event ``serviceReplySent {connectionId}`` (the chat's plans:
#: plans/2026-07-22-service-rpc-chat.md; not in the core's published code yet).
_ACCEPTED: Final = frozenset({"serviceReplyAccepted", "cmdOk"})
#: The retryAfter of a request held for a serve() that did not come in time.
_UNSERVED_RETRY_AFTER: Final = 5
#: The retryAfter of the requests answered while serve stops: short, so that they retry.
_STOP_RETRY_AFTER: Final = 3
#: The answered requestIds remembered, at most (with the core's window of 180 s, a
#: responder answering more than ~2,700 requests a second remembers less than the window).
_MAX_REMEMBERED: Final = 500_000
#: How long a cancelled handler or sender may take to end before serve goes on without it.
_CANCEL_WAIT: Final = 0.5
#: One overload line, and one line of repeats, per this many seconds at most.
_INTERVAL: Final = 10.0
#: The overload line's words for each way the policy sheds (a stop's shedding is in the
#: summary, not an overload).
_SHED_REASONS: Final = {
    Verdict.SHED_FULL: "answered rate_limited (queue full)",
    Verdict.SHED_LATE: "answered rate_limited (no slot in time)",
}


class _Responder:
    """The Service RPC responder of ``serve``: each request answered exactly once.

    Requests come from the core as their frames are read (:meth:`offer`, a
    :class:`._core._RequestSink`), stamped then: the deadline counts from
    there. At most ``concurrency`` handlers run; at most ``max_queue``
    requests wait for a slot. A request past that, or still waiting at its
    deadline, is answered ``rate_limited`` with a ``retryAfter`` computed from
    the queue. A ``requestId`` seen in the last ``RESPONSE_WINDOW`` seconds is
    not handled again. Those decisions are the admission policy's
    (:class:`._admission.Admission`, no I/O); this class does what they say: it
    starts handler tasks, answers, sets the one deadline timer, and stops.
    """

    def __init__(
        self,
        core: _CoreBase,
        user_id: int,
        handler: RawHandler,
        *,
        concurrency: int,
        handler_timeout: float,
        rate_limit: RateLimit | Sequence[RateLimit] | None,
        max_response_bytes: int,
        max_queue: int,
        grace: float,
        answers: AnswerStoreProtocol | None = None,
        errors: ErrorFormat = ENVELOPE_ERRORS,
        timeout_code: Callable[[RawRequest | None], str] | None = None,
        serving: str = "raw requests",
    ) -> None:
        if not callable(handler):
            raise TypeError("handler: expected a callable")
        self.errors = check_error_format(errors)
        # Checks the store: "answers: expected an answer store (begin, finish, abandon)".
        self.gate = AnswerGate(answers) if answers is not None else None
        self.timeout_code = timeout_code
        self.serving = serving
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise SimplexRpcError("concurrency: expected a positive integer")
        handler_timeout = check_seconds(handler_timeout, "handler_timeout")
        if handler_timeout >= RESPONSE_WINDOW:
            log.warning(
                "handler_timeout %g s is not below the core's %g s window:"
                " late answers will be refused",
                handler_timeout,
                RESPONSE_WINDOW,
            )
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or not 1 <= max_response_bytes <= MAX_RESPONSE
        ):
            raise SimplexRpcError(f"max_response_bytes: expected 1 to {MAX_RESPONSE}")
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise SimplexRpcError("max_queue: expected a non-negative integer")
        if (
            isinstance(grace, bool)
            or not isinstance(grace, (int, float))
            or not 0 <= grace < math.inf
        ):
            raise SimplexRpcError("grace: expected a non-negative number of seconds")
        self.core = core
        self.user_id = user_id
        self.handler = handler
        self.concurrency = concurrency
        self.handler_timeout = float(handler_timeout)
        self.max_response_bytes = max_response_bytes
        # The core's event buffer bounds what waits here too: past it, shed.
        self.max_queue = min(max_queue, core._event_buffer)
        self.grace = float(grace)
        # Checks each limit: "rate_limit: expected a RateLimit or a sequence of them".
        self.limiter = _Limiter(rate_limit) if rate_limit is not None else None
        # Every requestId taken in the last window, with when it came: a repeat is not
        # handled again. Bounded by time (the core's window) and by count.
        self.memory = max(RESPONSE_WINDOW, self.handler_timeout) + 10.0
        self.seen = WindowSeen(self.memory, _MAX_REMEMBERED)
        # Which request runs, waits or is shed: the policy, without I/O (._admission).
        # Its clock is the event loop's, the clock of the arrivals.
        self.admission: Admission[_Incoming] = Admission(
            slots=concurrency,
            backlog=self.max_queue,
            deadline=self.handler_timeout,
            clock=asyncio.get_running_loop().time,
            seen=self.seen,
            stop_retry_after=_STOP_RETRY_AFTER,
        )
        self.running: dict[asyncio.Task[None], Ticket[_Incoming]] = {}
        # Every answer goes through the outbox to one writer, which sends it without
        # waiting for the core's acknowledgement (pipelined); the acknowledgements are
        # tracked as they come (``unacked``).
        self.outbox: deque[_Answer] = deque()
        self.writer: asyncio.Task[None] | None = None
        self.unacked = 0  # answers written, their acknowledgement not yet read
        self.drained = asyncio.Event()  # nothing in the outbox, nothing unacknowledged
        self.drained.set()
        self.paused = False  # the core's reading is paused by this responder
        self.info = log.isEnabledFor(logging.INFO)
        # The answers' acknowledgement futures by due time, in the order sent.
        self.awaiting: dict[Pending, float] = {}
        self.ack_timer: asyncio.TimerHandle | None = None
        # Due at the policy's next deadline (Admission.next_due), if any.
        self.deadline_timer: asyncio.TimerHandle | None = None
        self.wakeup = asyncio.Event()
        self.failure: ChatCoreClosed | None = None
        self.stopping = False
        self.stopped = False  # the graceful stop ran to its end (and logged its summary)
        self.outcome = _Outcome()
        self.overload = _IntervalLog(f"serving user {user_id} over capacity", _INTERVAL)
        self.repeated = _IntervalLog(f"serving user {user_id}", _INTERVAL)

    # -- intake: as each frame is read ---------------------------------------

    def offer(
        self, event: dict[str, Any], envelope: str | None, error: str | None, arrival: float
    ) -> bool:
        """Take one ``serviceRequest`` event (see :class:`._core._RequestSink`); False when
        it is another user's."""
        user = event.get("user")
        if not isinstance(user, dict) or not _is_user(user.get("userId"), self.user_id):
            return False
        request_id = event.get("requestId")
        if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
            log.warning(
                "serviceRequest with an unusable requestId %s: ignored", show(request_id, 80)
            )
            return True
        incoming = _Incoming(
            request_id=request_id,
            signer_key=event.get("signerKey"),
            data=event.get("requestData"),
            envelope=envelope,
            frame_error=error,
            received=arrival,
        )
        self._apply([self.admission.arrive(request_id, incoming, arrival)])
        return True

    def lost(self, failure: ChatCoreClosed) -> None:
        self.failure = failure
        self.wakeup.set()

    def _apply(self, decisions: list[Decision[_Incoming]]) -> None:
        """Do what the policy decided, then set the timer for its next deadline."""
        for decision in decisions:
            verdict = decision.verdict
            incoming = decision.ticket.payload
            if verdict is Verdict.START:
                self._start(decision.ticket)
            elif verdict is Verdict.QUEUED:
                pass
            elif verdict is Verdict.REPEAT:
                self.outcome.repeats += 1
                self.repeated.note(
                    "repeated serviceRequests not handled again",
                    f"the first in this interval: requestId {show(incoming.request_id, 80)}",
                )
            elif verdict is Verdict.TIMED_OUT:
                self._deadline(decision.ticket)
            else:
                assert decision.retry_after is not None
                why = _SHED_REASONS.get(verdict)
                self._shed(incoming, decision.retry_after, why)
        self._schedule()

    def _schedule(self) -> None:
        """One timer, due at the policy's next deadline: not a timer per request."""
        due = self.admission.next_due() if self.failure is None else None
        timer = self.deadline_timer
        if timer is not None and (due is None or timer.when() != due):
            timer.cancel()
            self.deadline_timer = timer = None
        if due is not None and timer is None:
            self.deadline_timer = asyncio.get_running_loop().call_at(due, self._expire)

    def _expire(self) -> None:
        self.deadline_timer = None
        if self.failure is None:
            self._apply(self.admission.expire())

    def _shed(self, incoming: _Incoming, retry_after: int, why: str | None) -> None:
        answer = self.errors.error(
            ErrorCode.RATE_LIMITED, "the responder is overloaded", retry_after
        )
        self._post(incoming.request_id, answer, "shed")
        self.outcome.shed += 1
        if why is not None:
            self.overload.note(why)

    # -- running ------------------------------------------------------------------

    async def run(
        self, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None
    ) -> ServeOutcome:
        """Serve until ``stop`` is set or the task is cancelled (a graceful stop; the
        outcome returned, or CancelledError raised), or until the connection is lost
        (:class:`ChatCoreClosed`). ``ready`` is set once requests are taken."""
        # The requests that came before serve (held by the core): taken now, oldest first,
        # their deadlines counting from their arrival.
        self.core._attach_requests(self)
        log.info("serving %s for user %d", self.serving, self.user_id)
        if ready is not None:
            ready.set()
        try:
            try:
                await self._dispatch(stop)
            except asyncio.CancelledError:
                if self.failure is None:
                    await self._stop()  # a second cancellation here stops at once
                raise
            await self._stop()
            return self.outcome.frozen()
        finally:
            self.core._detach_requests(self)
            self._resume()
            if self.ack_timer is not None:
                self.ack_timer.cancel()
                self.ack_timer = None
            if self.deadline_timer is not None:
                self.deadline_timer.cancel()
                self.deadline_timer = None
            self.overload.flush()
            self.repeated.flush()
            if not self.stopped and self.failure is None:
                self._report_abrupt()
            tasks = [*self.running, *([self.writer] if self.writer is not None else [])]
            for task in tasks:
                task.cancel()
            if tasks:
                # A handler that swallows its cancellation cannot hold serve: it is named
                # and left behind.
                _, stubborn = await asyncio.wait(tasks, timeout=_CANCEL_WAIT)
                self._left_running(stubborn)

    async def _dispatch(self, stop: asyncio.Event | None) -> None:
        """Wait until ``stop`` is set (return) or the connection is lost (raise): everything
        else happens as events come (:meth:`offer`), handlers end (:meth:`_finished`) and
        deadlines pass (:meth:`_expire`)."""
        stopper: asyncio.Future[Any] | None = None
        if stop is not None:
            stopper = asyncio.ensure_future(stop.wait())
            stopper.add_done_callback(lambda _: self.wakeup.set())
        try:
            while True:
                if self.failure is not None:
                    self._report_lost()
                    raise ChatCoreClosed(str(self.failure))
                if stop is not None and stop.is_set():
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
        finally:
            if stopper is not None:
                stopper.cancel()

    def _report_abrupt(self) -> None:
        """serve stopped at once (a second cancellation during the graceful stop): what is
        left unanswered is counted in one line, not dropped silently."""
        unsent = len(self.outbox) + self.unacked
        in_flight = sum(
            1
            for ticket in self.running.values()
            if not (ticket.payload.answering or ticket.payload.timed_out)
        )
        waiting = len(self.admission.clear())
        if unsent or in_flight or waiting:
            log.warning(
                "serving user %d stopped at once: %d requests in flight, %d waiting and %d"
                " answers of the responder's own not sent are left unanswered",
                self.user_id,
                in_flight,
                waiting,
                unsent,
            )
        self.outcome.unanswered += unsent + in_flight + waiting
        self.outbox.clear()

    def _report_lost(self) -> None:
        waiting = len(self.admission.clear()) + len(self.outbox)
        if self.running or waiting:
            log.warning(
                "serving user %d: %s; %d requests in flight and %d waiting cannot be answered",
                self.user_id,
                self.failure,
                len(self.running),
                waiting,
            )
        self.outbox.clear()

    async def _stop(self) -> None:
        """The graceful stop: take no more requests, answer every queued one rate_limited,
        give the handlers in flight ``grace`` seconds, then cancel them (answered internal)."""
        self.stopping = True
        self._apply(self.admission.stop())
        await self._wait_unless_lost(list(self.running), self.grace)
        cancelled = list(self.running.items())
        for task, _ in cancelled:
            task.cancel()
        if cancelled:
            _, stubborn = await asyncio.wait([task for task, _ in cancelled], timeout=_CANCEL_WAIT)
            self._left_running(stubborn)
        for task, ticket in cancelled:
            incoming = ticket.payload
            if not task.done() or not task.cancelled():
                continue  # finished after all, or still running (named above)
            self.outcome.cancelled += 1
            if incoming.answering:
                log.warning(
                    "request %s: cancelled while its answer was being sent: it may have"
                    " been delivered",
                    show(incoming.request_id, 80),
                )
                continue
            log.warning(
                "request %s: the handler did not finish within the %g s grace: cancelled,"
                " answering internal",
                show(incoming.request_id, 80),
                self.grace,
            )
            self._post(
                incoming.request_id,
                self.errors.error(ErrorCode.INTERNAL, "the responder stopped before finishing"),
                "cancelled",
            )
        # The last answers go out; a core that does not take them cannot hold the stop.
        drained = asyncio.create_task(self.drained.wait())
        try:
            await self._wait_unless_lost([drained], max(self.grace, 1.0))
        finally:
            drained.cancel()
        if self.failure is not None:
            self._report_lost()
        unsent = len(self.outbox) + self.unacked
        if unsent:
            self.outcome.unanswered += unsent
            log.warning(
                "serving user %d: %d answers of the responder's own (%d not sent, %d not"
                " acknowledged) were still waiting for the core when the stop ended",
                self.user_id,
                unsent,
                len(self.outbox),
                self.unacked,
            )
            self.outbox.clear()
        self.overload.flush()
        self.repeated.flush()
        o = self.outcome
        log.info(
            "stopped serving user %d: %d answered, %d shed, %d cancelled"
            " (%d from the answer store, %d repeats ignored, %d answers not taken by the"
            " core, %d not answered)",
            self.user_id,
            o.answered,
            o.shed,
            o.cancelled,
            o.stored,
            o.repeats,
            o.failed,
            o.unanswered,
        )
        self.stopped = True

    async def _wait_unless_lost(self, tasks: list[asyncio.Task[Any]], timeout: float) -> None:
        """Wait up to ``timeout`` seconds for ``tasks``; not a moment longer once the
        connection is lost (nothing more can be sent: serve ends at once)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending and self.failure is None:
            remaining = end - loop.time()
            if remaining <= 0:
                return
            self.wakeup.clear()
            woken = asyncio.ensure_future(self.wakeup.wait())
            try:
                _, pending = await asyncio.wait(
                    pending | {woken}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                woken.cancel()
            pending.discard(woken)

    def _left_running(self, tasks: Collection[asyncio.Task[None]]) -> None:
        """Name the handlers that did not end when cancelled (one line), and let them be."""
        handlers = [self.running.pop(task).payload for task in tasks if task in self.running]
        if handlers:
            log.warning(
                "serving user %d: %d handlers ignored their cancellation and are left running"
                " (the first: request %s); their requests may stay unanswered",
                self.user_id,
                len(handlers),
                show(handlers[0].request_id, 80),
            )

    def _start(self, ticket: Ticket[_Incoming]) -> None:
        # The deadline is the policy's (a timer of the loop, _schedule), not a scope inside
        # the handler: a handler that swallows its cancellation is still answered at its
        # deadline.
        task = asyncio.create_task(self._answer(ticket))
        self.running[task] = ticket
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        ticket = self.running.pop(task, None)
        if ticket is None or self.failure is not None:
            return
        seconds = asyncio.get_running_loop().time() - ticket.payload.started
        self._apply(self.admission.finish(ticket, seconds))  # a slot for the next one

    def _deadline(self, ticket: Ticket[_Incoming]) -> None:
        """The handler still runs at the request's deadline: answer now, cancel it, and
        drop whatever it returns later."""
        incoming = ticket.payload
        task = next((t for t, k in self.running.items() if k is ticket), None)
        if task is None or task.done() or self.failure is not None:
            return
        incoming.timed_out = True
        code = ErrorCode.INTERNAL if self.timeout_code is None else self.timeout_code(incoming.raw)
        log.warning(
            "request %s: the handler did not finish within %g s of the request's arrival:"
            " answering %s",
            show(incoming.request_id, 80),
            self.handler_timeout,
            str(code),
        )
        self._post(
            incoming.request_id,
            self.errors.error(code, "the responder did not finish in time"),
            "handled",
        )
        task.cancel()

    def _post(
        self,
        request_id: str,
        answer: dict[str, Any] | None,
        kind: str,
        payload: bytes | None = None,
    ) -> None:
        """Queue an answer (its object, or its checked JSON ``payload``) for the writer.
        Never dropped: at the outbox's bound the core's frames stop being read until the
        writer has caught up (back-pressure)."""
        self.outbox.append(_Answer(request_id, answer, kind, payload))
        self.drained.clear()
        if len(self.outbox) >= _MAX_OUTBOX and not self.paused:
            self.paused = True
            self.core._pause_reading(self)
            self.overload.note(
                f"waits for the core to take answers (the outbox at its bound of {_MAX_OUTBOX}:"
                " reading paused)"
            )
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())

    def _resume(self) -> None:
        if self.paused:
            self.paused = False
            self.core._resume_reading(self)

    async def _write(self) -> None:
        """Write the outbox's answers to the core, in order, each without waiting for its
        acknowledgement (tracked by :meth:`_acked`)."""
        try:
            while self.outbox and self.failure is None:
                answer = self.outbox.popleft()
                try:
                    await self._send(answer)
                except Exception:  # pragma: no cover - defensive: the other answers still go
                    self.outcome.failed += 1
                    log.error(
                        "request %s: answering failed", show(answer.request_id, 80), exc_info=True
                    )
                if self.paused and len(self.outbox) <= _MAX_OUTBOX // 2:
                    self._resume()
        finally:
            # Cleared in the same step as the outbox was found empty: an answer posted
            # after that starts a writer of its own.
            self.writer = None
            self._resume()
            self._check_drained()

    def _check_drained(self) -> None:
        if not self.outbox and self.writer is None and self.unacked == 0:
            self.drained.set()

    async def _answer(self, ticket: Ticket[_Incoming]) -> None:
        incoming = ticket.payload
        incoming.started = asyncio.get_running_loop().time()
        try:
            # Cancelled when serve stops (or loses the connection): _stop answers and
            # counts it; or at the deadline: _deadline has answered it.
            answer, payload, fresh = await self._respond(incoming)
        except asyncio.CancelledError:
            if incoming.timed_out:
                return
            raise
        except Exception:  # pragma: no cover - defensive: one request never stops the loop
            log.error("request %s: answering failed", show(incoming.request_id, 80), exc_info=True)
            answer, payload, fresh = self._internal(), None, True
        answering = self.admission.answering(ticket)
        if answering and incoming.budgeted and self.limiter is not None:
            # Settled once the answer is known: a failures_only limit counts errors alone,
            # and only of a fresh run (an answer from the store ran nothing).
            failed = fresh and answer is not None and self.errors.code(answer) is not None
            self.limiter.settle(incoming.signer, failed=failed)
        if not answering:
            log.info(
                "request %s: the handler returned after its deadline: its result is dropped",
                show(incoming.request_id, 80),
            )
            return
        if self.failure is not None:
            self.outcome.failed += 1  # reported with the rest, by _report_lost or the summary
            return
        incoming.answering = True
        self._post(incoming.request_id, answer, "handled", payload)

    def _internal(self) -> dict[str, Any]:
        return self.errors.error(ErrorCode.INTERNAL, "the responder failed")

    def _bad_request(self, message: str) -> dict[str, Any]:
        return self.errors.error(ErrorCode.BAD_REQUEST, message[:300])

    async def _respond(
        self, incoming: _Incoming
    ) -> tuple[dict[str, Any] | None, bytes | None, bool]:
        """The answer to one request: its object (None when only its JSON is known, an
        answer from the store), its checked JSON when known, and whether it is fresh
        (not from the store)."""
        rid = _Shown(incoming.request_id, 80)
        if incoming.frame_error is not None:
            log.info(
                "request %s: the event is not strict JSON: %s", rid, show(incoming.frame_error, 120)
            )
            return (
                self._bad_request(f"the request is not strict JSON: {incoming.frame_error}"),
                None,
                True,
            )
        signer: PublicKey | None = None
        if incoming.signer_key is not None:
            if not isinstance(incoming.signer_key, str):
                return self._bad_request("the signer key is not a key"), None, True
            try:
                # PublicKey.decode remembers the few keys a requester signs with.
                signer = PublicKey.decode(incoming.signer_key)
            except KeyFormatError:
                return self._bad_request("the signer key is not an Ed25519 key"), None, True
        if self.limiter is not None:
            # Before the request is read: a failures_only limit counts its errors too.
            wait = self.limiter.check(signer)
            if wait is not None:
                answer = self.errors.error(ErrorCode.RATE_LIMITED, "too many requests", wait)
                return answer, None, True
            incoming.budgeted, incoming.signer = True, signer
        try:
            data = _request_value(incoming)
        except EnvelopeError as exc:
            log.info("request %s: bad request: %s", rid, show(str(exc), 200))
            return self._bad_request(str(exc)), None, True
        raw = RawRequest(
            request_id=incoming.request_id, signer=signer, data=data, user_id=self.user_id
        )
        incoming.raw = raw
        if self.gate is None:
            answer, _keep = await self._run(raw)
            return answer, None, True
        # The key: the compact encoding of requestData's strict reading (member order
        # kept), which is the text the core delivers (it writes compact JSON), the same
        # whichever form the frame took.
        try:
            answered = await self.gate.answer(
                signer, _json.dumps(data), functools.partial(self._run_kept, incoming, raw)
            )
        except SimplexRpcError as exc:
            # The store failed in begin: running anyway could run twice what it would
            # have answered from its file.
            log.error("request %s: the answer store failed: %s", rid, exc)
            return self._internal(), None, True
        if answered.how == "ran":
            return incoming.ran, answered.answer, True
        if self.info:
            log.info("request %s: answered from the answer store (%s)", rid, answered.how)
        return None, answered.answer, False

    async def _run_kept(self, incoming: _Incoming, raw: RawRequest) -> tuple[bytes, bool]:
        """One run for the answer store: the answer's checked JSON, and whether to keep it
        (not when the handler failed or the answer has retryAfter: a repeat runs again)."""
        answer, keep = await self._run(raw)
        answer, payload = self._payload(_Shown(raw.request_id, 80), answer)
        incoming.ran = answer
        if self.errors.retry_after(answer) is not None or self.errors.code(answer) == "internal":
            keep = False
        return payload, keep

    async def _run(self, raw: RawRequest) -> tuple[dict[str, Any], bool]:
        """The handler's answer to ``raw``, and False when it failed (answered internal)."""
        rid = _Shown(raw.request_id, 80)
        try:
            # The core's window runs from the frame's arrival, not from when a
            # concurrency slot freed up: so does the deadline (a timer, see _start).
            result = self.handler(raw)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the responder cancels it (a stop, a lost connection): counted there
            # Not this task's cancellation, even while serve stops: the handler awaited
            # something that someone else cancelled.
            log.error("request %s: the handler raised CancelledError", rid)
            return self._internal(), False
        except Exception as exc:
            log.error("request %s: the handler raised %s", rid, type(exc).__name__, exc_info=True)
            return self._internal(), False
        if not isinstance(result, dict):
            log.error(
                "request %s: the handler returned %s, not a JSON object: answering internal",
                rid,
                type(result).__name__,
            )
            return self._internal(), False
        return result, True

    def _payload(self, rid: object, answer: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """The answer's JSON under the library's strict rules and the size limit:
        a result they refuse is answered internal, one too long too_large."""
        try:
            payload = _json.dumps(answer)
            _json.check(payload)  # what the requester's strict reader would refuse
        except (_json.JsonError, TypeError, ValueError) as exc:
            log.error(
                "request %s: the handler's result is not strict JSON (%s): answering internal",
                rid,
                show(str(exc), 120),
            )
            answer = self._internal()
            payload = _json.dumps(answer)
        if len(payload) > self.max_response_bytes:
            log.warning(
                "request %s: response of %d bytes exceeds %d: answering too_large",
                rid,
                len(payload),
                self.max_response_bytes,
            )
            answer = self.errors.error(
                ErrorCode.TOO_LARGE,
                f"the response exceeds the size limit of {self.max_response_bytes} bytes",
            )
            payload = _json.dumps(answer)
        return answer, payload

    async def _send(self, answer: _Answer) -> None:
        """Write one answer (APISendServiceResponse, simplex-chat ``bots/api/COMMANDS.md``,
        "Service commands": ``/_service_response <userId> <requestId> <json>``) and
        track its acknowledgement; every way it can end is counted, and logged unless
        it is a shed answer taken by the core (those are in the overload lines)."""
        rid = _Shown(answer.request_id, 80)
        if answer.payload is None:
            assert answer.answer is not None
            answer.answer, answer.payload = self._payload(rid, answer.answer)
        cmd = f"/_service_response {self.user_id} {answer.request_id} {answer.payload.decode()}"
        # Counted before it is posted: its acknowledgement may be read (and _acked run)
        # before _post_command returns.
        self.unacked += 1
        try:
            # No timer per answer: the acknowledgements are awaited in the order sent, and
            # one sweep (_sweep_acks) fails those older than DEFAULT_COMMAND_TIMEOUT.
            future = await self.core._post_command(
                cmd, None, functools.partial(self._acked, answer)
            )
        except ChatCoreClosed as exc:
            self.unacked -= 1
            self.outcome.failed += 1
            log.warning("request %s: no answer could be sent: %s", rid, exc)
            return
        except BaseException:
            self.unacked -= 1
            raise
        if not future.done():
            loop = asyncio.get_running_loop()
            self.awaiting[future] = loop.time() + DEFAULT_COMMAND_TIMEOUT
            if self.ack_timer is None:
                self.ack_timer = loop.call_at(self.awaiting[future], self._sweep_acks)

    def _sweep_acks(self) -> None:
        """Fail the answers whose acknowledgement is past due (oldest first), then wait for
        the next one's due time."""
        self.ack_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self.awaiting:
            future, due = next(iter(self.awaiting.items()))
            if due > now:
                self.ack_timer = loop.call_at(due, self._sweep_acks)
                return
            del self.awaiting[future]
            if not future.done():
                future.set_exception(ChatCoreTimeout("no acknowledgement in time"))

    def _acked(self, answer: _Answer, future: Pending) -> None:
        """The core's reply to one answer: counted, logged, or tried once more."""
        self.unacked -= 1
        self.awaiting.pop(future, None)
        try:
            self._outcome_of(answer, future)
        finally:
            self._check_drained()

    def _outcome_of(self, answer: _Answer, future: Pending) -> None:
        rid = _Shown(answer.request_id, 80)
        if future.cancelled():  # pragma: no cover - nothing cancels these futures
            self.outcome.failed += 1
            return
        exc = future.exception()
        if exc is None:
            resp = future.result()
            if resp.get("type") == "chatCmdError":
                exc = _core_refusal(resp.get("chatError"))
            elif resp.get("type") not in _ACCEPTED:
                # Neither a refusal nor an acceptance: sending again could answer twice.
                self.outcome.failed += 1
                log.warning(
                    "request %s: answer sent, not acknowledged (the core answered %s,"
                    " neither serviceReplyAccepted nor cmdOk): the core may have delivered it",
                    rid,
                    show(resp.get("type"), 60),
                )
                return
        if exc is None:
            if answer.kind == "handled":
                self.outcome.answered += 1
                if answer.answer is None:  # its JSON alone: an answer from the store
                    self.outcome.stored += 1
                if self.info and answer.answer is not None:
                    code = self.errors.code(answer.answer)
                    log.info(
                        "request %s: answered with %s",
                        rid,
                        "a response" if code is None else _Shown(f"error {code}", 60),
                    )
            return
        if isinstance(exc, _AnswerLost):
            self.outcome.failed += 1
            log.warning(
                "request %s: answer sent, acknowledgement lost (%s): the core may have"
                " delivered it",
                rid,
                exc,
            )
        elif isinstance(exc, ChatCoreClosed):
            self.outcome.failed += 1
            log.warning("request %s: no answer could be sent: %s", rid, exc)
        elif isinstance(exc, ChatCoreTimeout):
            self.outcome.failed += 1
            log.warning(
                "request %s: answer sent, no acknowledgement (the chat core did not answer"
                " /_service_response within %g s): the core may have delivered it",
                rid,
                DEFAULT_COMMAND_TIMEOUT,
            )
        elif isinstance(exc, ChatCoreError):
            # The core's padded block is the final word on size: an answer it cannot pad
            # is replaced by too_large, once; an answer refused for another reason by
            # internal, once.
            tried_internal = answer.tried_internal or (
                answer.answer is not None and self.errors.code(answer.answer) == "internal"
            )
            if exc.type_path.endswith("/LARGE") and not answer.tried_too_large:
                log.warning("request %s: the core found the response too large", rid)
                replacement = self.errors.error(
                    ErrorCode.TOO_LARGE, "the response exceeds the size limit"
                )
                self._retry(answer, replacement, too_large=True)
            elif not tried_internal:
                log.warning(
                    "request %s: the core refused the answer (%s): answering internal", rid, exc
                )
                self._retry(answer, self._internal())
            else:
                self.outcome.failed += 1
                log.warning("request %s: the core refused the answer: %s", rid, exc)
        else:  # pragma: no cover - defensive
            self.outcome.failed += 1
            log.error("request %s: answering failed: %s", rid, type(exc).__name__)

    def _retry(
        self, answer: _Answer, replacement: dict[str, Any], *, too_large: bool = False
    ) -> None:
        retry = _Answer(answer.request_id, replacement, answer.kind, _json.dumps(replacement))
        retry.tried_internal = answer.tried_internal or not too_large
        retry.tried_too_large = answer.tried_too_large or too_large
        if self.failure is not None:
            self.outcome.failed += 1
            return
        self.outbox.appendleft(retry)
        self.drained.clear()
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())


class _Answer:
    """One answer on its way: to the outbox, to the core, to its acknowledgement."""

    __slots__ = (
        "answer",
        "kind",
        "payload",
        "request_id",
        "tried_internal",
        "tried_too_large",
    )

    def __init__(
        self,
        request_id: str,
        answer: dict[str, Any] | None,
        kind: str,
        payload: bytes | None = None,
    ) -> None:
        self.request_id = request_id
        # The answer's object (None for an answer from the store: its JSON alone).
        self.answer = answer
        self.kind = kind  # "handled", "shed" or "cancelled"
        self.payload = payload  # its checked JSON, once known
        self.tried_internal = False
        self.tried_too_large = False


class _Shown:
    """:func:`show` of a value, computed only when a log line is emitted."""

    __slots__ = ("limit", "value")

    def __init__(self, value: object, limit: int) -> None:
        self.value = value
        self.limit = limit

    def __str__(self) -> str:
        return show(self.value, self.limit)


def _core_refusal(chat_error: object) -> ChatCoreError:
    return _core_error("/_service_response", chat_error)


class _NotAccepted(ChatCoreError):
    """The core's reply to ``/_service_response`` was not ``serviceReplyAccepted``."""


def _failure(code: ErrorCode, message: str) -> Response:
    return Response.failure(code, message)


def _request_value(incoming: _Incoming) -> dict[str, Any]:
    """requestData as a JSON object, read with the library's strict rules; else
    :class:`EnvelopeError` naming what is wrong."""
    return _request_object(incoming.envelope, incoming.data, trusted=True)


def _request_object(envelope: str | None, data: object, *, trusted: bool) -> dict[str, Any]:
    """The request object: ``envelope`` (requestData's text cut out of its frame) read on
    its own, else ``data`` (requestData's value: when ``trusted``, an object or array is
    the strict reading of its frame and is not read again; a string is the JSON-text
    form)."""
    value: object
    if envelope is not None:
        text: str | None = envelope
    elif trusted and isinstance(data, (dict, list)):
        text, value = None, data
    elif isinstance(data, (str, dict)):
        try:
            text = data if isinstance(data, str) else _json.dumps(data).decode()
        except (_json.JsonError, TypeError, ValueError) as exc:
            raise EnvelopeError(f"request: {exc}") from None
    else:
        raise EnvelopeError("request: requestData is neither a JSON object nor a string")
    if text is not None:
        try:
            value = _json.loads(text)
        except _json.JsonError as exc:
            raise EnvelopeError(f"request: {exc}") from None
    if not isinstance(value, dict):
        raise EnvelopeError(f"request: expected a JSON object, got {_json.json_type(value)}")
    return value

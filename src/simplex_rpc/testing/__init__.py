"""Testing tools: :class:`CoreSimulator`, a loopback stand-in for the SimpleX chat core.

The simulator is a WebSocket server on the local host that speaks the chat
core's API (``{"corrId", "cmd"}`` in, ``{"corrId", "resp"}`` and events
``{"resp"}`` out) for the commands of Service RPC, and models what the
protocol text ("Service RPC transport") says the core does:

* it relays ``/_service_request`` to the core that owns the address, as a
  ``serviceRequest`` event (``requestId``, ``signerKey``, ``requestData``) to
  each connection of that core, when that core ran ``/_start`` with
  ``service_requests=on``; otherwise it drops the request and the requester
  waits out its ``timeout`` (``A_SERVICE ASETimeout``);
* a request to an address without ratchet keys fails at once
  (``A_SERVICE ASENotDRAddress``);
* it derives ``signerKey`` from ``sign_key=``, and signs and verifies with
  this library over a fresh 112-byte AD per request, through the real frame
  and the 11,106-byte padding: a request or response that does not fit fails
  as the core's would, with a ``chatCmdError``;
* it accepts a response within ``response_window`` seconds (180 by default)
  of the request and refuses a later one.

Beyond Service RPC it models the chat core a bot sees: users and profiles,
contact addresses with their settings (auto-accept, auto-reply), contacts made
with ``/_connect`` and ``/_accept`` (or refused with ``/_reject``), groups
made with ``/_group``, ``/_add`` and ``/_join``, messages with quotes and
mentions, each side's events, and records complete to ``bots/api/TYPES.md``.
A world (users, addresses, contacts, groups) can be described in a file:
:func:`read_world`, :meth:`CoreSimulator.load_world`, and
``simplex-rpc simulator --world FILE``.

Each URL path is one simulated core (``ws://127.0.0.1:PORT/alice`` and
``.../bob`` are two; the bare URL is the core ``default``), each with the
users given (user 1 by default), not started until ``/_start``. Error objects
follow the shapes of simplex-chat's ``bots/api/TYPES.md`` (``ChatError``) and
of the agent's service errors (``A_SERVICE {serviceError}``).

It is a model for tests, not the core: it does no networking beyond the
loopback and no encryption; its links only look like SimpleX links.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import re
import secrets
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .._wire import backend as _backend
from .._wire import strict_json as _json
from .._wire.agent_block import SMPQueueInfo, SMPServer
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, show
from ..errors import KeyFormatError, PaddingError
from ._chat import (
    ChatWorld,
    ContactRequest,
    Party,
    _chat_error,
    _cmd_error,
    _store_error,
    active_user,
    collect_later,
    later,
    stop_collecting,
    unknown_command,
)
from ._world import World, WorldError, check_world, read_world, ref_of

PartyRef = str | tuple[str, int]
"""A user of a simulated core: ``("alice", 2)``, or ``"alice"`` for its user 1."""

__all__ = ["CoreSimulator", "SimulatorStats", "World", "WorldError", "read_world"]


#: The reply queue the simulated agent puts in every request: one host, client
#: version 4, as the agent creates it (V8 Agent.hs joinConnSrv': SMPQueueInfo rqV).
_REPLY_QUEUE: Final = SMPQueueInfo(
    4,
    SMPServer(("smp.simulator.invalid",), "", bytes(32)),
    bytes(24),
    bytes.fromhex("302a300506032b656e032100") + bytes(32),
    "M",
)
log = RedactingLogger(logging.getLogger("simplex_rpc.testing"))
_ws_log = RedactingLogger(logging.getLogger("websockets.server"))

AD_LENGTH: Final = 112  # two X448 keys, as the agent's associated data
_HOST: Final = "simulator.local"
_TOKEN: Final = r"[A-Za-z0-9_-]{24}"
_SHORT_LINK: Final = re.compile(rf"simplex:/a#(?P<token>{_TOKEN})\?h=simulator\.local")
_FULL_LINK: Final = re.compile(
    rf"simplex:/contact#/\?v=2-7&smp=smp%3A%2F%2Fsimulator\.local%2F(?P<token>{_TOKEN})"
    r"(?P<rk>&rk=[A-Za-z0-9_-]+)?"
)
_SERVICE_REQUEST: Final = re.compile(
    r"/_service_request (?P<user>\d+) (?P<target>\S+)"
    r"(?: timeout=(?P<timeout>\S*))?(?: sign_key=(?P<key>\S*))? (?P<json>.+)",
    re.DOTALL,
)
_SERVICE_RESPONSE: Final = re.compile(
    r"/_service_response (?P<user>\d+) (?P<rid>\S+) (?P<json>.+)", re.DOTALL
)
_BACKLOG: Final = 1024  # the core's outputQ holds tbqSize (1024) events
_N: Final = r"[0-9]{1,18}"  # A.decimal of an Int64 id (ASCII digits only)
# The parser's lines (chatCommandP, src/Simplex/Chat/Library/Commands.hs) and
# COMMANDS.md's syntax of the Service RPC core, which adds pq_ratchet:
# "/_address " *> (APICreateMyAddress <$> A.decimal)  /  /_address <userId>[ pq_ratchet=on|off]
_ADDRESS: Final = re.compile(rf"/_address (?P<user>{_N})(?: pq_ratchet=(?P<pq>on|off))?")
# "/_address_settings " *> (APISetAddressSettings <$> A.decimal <* A.space <*> jsonP)
_ADDRESS_SETTINGS: Final = re.compile(
    rf"/_address_settings (?P<user>{_N})(?: pq_ratchet=(?P<pq>on|off))? (?P<json>.+)", re.DOTALL
)
# "/_connect plan " *> (APIConnectPlan <$> A.decimal <* A.space <*> strP)
_CONNECT_PLAN: Final = re.compile(rf"/_connect plan (?P<user>{_N}) (?P<link>\S+)")
# "/_connect " *> (APIConnect <$> A.decimal <*> incognitoOnOffP <* A.space <*> connLinkP)
# connLinkP = do (ACR m cReq) <- strP; sLink_ <- optional (A.space *> strP)
# incognitoOnOffP = (A.space *> "incognito=" *> onOffP) <|> pure False
_CONNECT: Final = re.compile(
    rf"/_connect (?P<user>{_N})(?: incognito=(?P<incognito>on|off))?"
    r" (?P<link>\S+)(?: (?P<short>\S+))?"
)
# "/_accept" *> (APIAcceptContact <$> incognitoOnOffP <* A.space <*> A.decimal)
_ACCEPT: Final = re.compile(rf"/_accept(?: incognito=(?P<incognito>on|off))? (?P<id>{_N})")
# "/_reject " *> (APIRejectContact <$> A.decimal)
_REJECT: Final = re.compile(rf"/_reject (?P<id>{_N})")
_GROUP_LINK: Final = re.compile(r"simplex:/g#(?P<token>[A-Za-z0-9_-]{24})\?h=simulator\.local")
# "/_show_address " *> (APIShowMyAddress <$> A.decimal)
# "/_delete_address " *> (APIDeleteMyAddress <$> A.decimal)
_USER_COMMAND: Final = re.compile(rf"/_(?P<name>show_address|delete_address) (?P<user>{_N})")
# "/_start " *> do mainApp <- "main=" *> onOffP; enableSndFiles <- " snd_files=" *> onOffP
#   <|> pure mainApp; largeLinkData <- " large_link_data=" *> onOffP <|> pure False
# "/_start" $> StartChat {mainApp = True, enableSndFiles = True, largeLinkData = False}
# and, last, " service_requests=on|off" (COMMANDS.md of the Service RPC core, StartChat).
_START: Final = re.compile(
    r"/_start(?: main=(?P<main>on|off)(?: snd_files=(?:on|off))?(?: large_link_data=(?:on|off))?"
    r"(?: service_requests=(?P<service>on|off))?)?"
)
# ("/user" <|> "/u") $> ShowActiveUser
_SHOW_USER: Final = frozenset({"/user", "/u"})
# parseChatCommand = A.parseOnly chatCommandP . B.dropWhileEnd isSpace
_SPACE: Final = " \t\n\r\f\v"


def _link_token(link: str) -> str | None:
    """The address token of a contact address link of this simulator (short or full), or None."""
    match = _SHORT_LINK.fullmatch(link) or _FULL_LINK.fullmatch(link)
    return match["token"] if match is not None else None


# -- the core's answers ------------------------------------------------------


def _frame(message: dict[str, Any]) -> str:
    """JSON text of a message to a client: UTF-8 as the core sends it, escaped where a
    string holds a lone surrogate (which UTF-8 cannot carry)."""
    text = json.dumps(message, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message)
    return text


def _request(message: str | bytes) -> tuple[str, str] | None:
    """``(corrId, cmd)`` of a frame, or None when it is not a request.

    Server.hs decodes ``ChatSrvRequest {corrId :: Text, remoteHostId :: Maybe
    RemoteHostId, cmd :: Text}`` with ``J.decodeStrict'``.
    """
    try:
        msg = _json.loads(message)
    except _json.JsonError:
        return None
    if not isinstance(msg, dict):
        return None
    corr_id, cmd, host = msg.get("corrId"), msg.get("cmd"), msg.get("remoteHostId")
    if not isinstance(corr_id, str) or not isinstance(cmd, str):
        return None
    if host is not None and (isinstance(host, bool) or not isinstance(host, int)):
        return None
    return corr_id, cmd


def _address_settings_of(text: str) -> dict[str, Any] | None:
    """``AddressSettings`` (TYPES.md) decoded from ``text``, or None when it is not one:
    ``businessAddress`` (bool), ``autoAccept?`` (``AutoAccept`` ``{acceptIncognito}``),
    ``autoReply?`` (a ``MsgContent``)."""
    try:
        value = _json.loads(text)
    except _json.JsonError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("businessAddress"), bool):
        return None
    auto = value.get("autoAccept")
    if auto is not None and (
        not isinstance(auto, dict) or not isinstance(auto.get("acceptIncognito", False), bool)
    ):
        return None
    reply = value.get("autoReply")
    if reply is not None and (
        not isinstance(reply, dict) or not isinstance(reply.get("type"), str)
    ):
        return None
    settings: dict[str, Any] = {"businessAddress": value["businessAddress"]}
    if auto is not None:
        settings["autoAccept"] = {"acceptIncognito": bool(auto.get("acceptIncognito", False))}
    if reply is not None:
        settings["autoReply"] = reply
    return settings


def _agent_error(agent_error: dict[str, Any]) -> dict[str, Any]:
    return _cmd_error({"type": "errorAgent", "agentError": agent_error, "agentConnId": ""})


def _service_error(tag: str) -> dict[str, Any]:
    # simplexmq: A_SERVICE {serviceError :: AgentServiceError}, an SMPAgentError.
    return _agent_error(
        {"type": "AGENT", "agentErr": {"type": "A_SERVICE", "serviceError": {"type": tag}}}
    )


def _too_large(what: str) -> dict[str, Any]:
    return _agent_error({"type": "CMD", "cmdErr": {"type": "LARGE"}, "errContext": what})


def _command_error(message: str) -> dict[str, Any]:
    return _chat_error("commandError", message=message)


# -- state -------------------------------------------------------------------


@dataclass(slots=True)
class SimulatorStats:
    """Counters of what the simulator did, for tests to check."""

    requests: int = 0
    """Service requests sealed and sent (to a live or a dropping core)."""
    delivered: int = 0
    """Requests delivered as ``serviceRequest`` events."""
    dropped: int = 0
    """Requests dropped because the address's core had service requests off."""
    responses: int = 0
    """Responses accepted (``serviceReplyAccepted``)."""
    late_responses: int = 0
    """Responses refused because they came after the response window."""
    duplicate_responses: int = 0
    """Second responses to a request already answered, refused."""
    requester_timeouts: int = 0
    """Requesters that waited out their ``timeout``."""
    messages: int = 0
    """Chat messages sent with ``/_send`` (each composed message counts once)."""


@dataclass(eq=False, slots=True)
class _Session:
    core: _Core
    emit: Callable[[dict[str, Any]], Awaitable[None]]
    alive: bool = True


@dataclass(eq=False, slots=True)
class _Core:
    name: str
    users: frozenset[int]
    started: bool = False
    service_requests: bool = False
    sessions: list[_Session] = field(default_factory=list)
    backlog: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=_BACKLOG))
    """Events sent while no client was connected, for the next one (Server.hs: each client's
    ``output`` reads the core's one ``outputQ``, so events wait there for a client)."""


@dataclass(eq=False, slots=True)
class _Address:
    core: _Core
    user_id: int
    token: str
    link_id: int
    ratchet_key: str | None
    settings: dict[str, Any]

    @property
    def short_link(self) -> str:
        return f"simplex:/a#{self.token}?h={_HOST}"

    @property
    def full_link(self) -> str:
        link = f"simplex:/contact#/?v=2-7&smp=smp%3A%2F%2F{_HOST}%2F{self.token}"
        if self.ratchet_key is not None:
            link += f"&rk={self.ratchet_key}"
        return link

    def created_link(self) -> dict[str, Any]:
        return {"connFullLink": self.full_link, "connShortLink": self.short_link}

    def contact_link(self) -> dict[str, Any]:
        return {
            "userContactLinkId": self.link_id,
            "connLinkContact": self.created_link(),
            "shortLinkDataSet": True,
            "shortLinkLargeDataSet": False,
            "addressSettings": self.settings,
        }


@dataclass(eq=False, slots=True)
class _Pending:
    core: _Core
    user_id: int
    future: asyncio.Future[dict[str, Any]]
    expiry: asyncio.TimerHandle | None = None


def _sender_refusal(core: _Core, user_id: int) -> dict[str, Any] | None:
    """The core's refusal of a service command sent as ``user_id``, or None when it may run.

    A command of a user the core does not have fails ``userNotFound``; one sent
    before ``/_start``, ``chatNotStarted``.
    """
    if user_id not in core.users:
        return _store_error("userNotFound", userId=user_id)
    if not core.started:
        return _chat_error("chatNotStarted")
    return None


class CoreSimulator:
    """A loopback WebSocket server that behaves like the chat core for Service RPC.

    Use as ``async with CoreSimulator() as sim:``, connect with
    ``ChatCore.connect(sim.url_for("alice"))``. ``response_window`` is the
    core's 180-second response window (smaller in tests); ``stats`` counts
    what happened. :meth:`native_handle` gives the same simulated core to the
    native transport.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        users: tuple[int, ...] = (1,),
        response_window: float = 180.0,
        default_timeout: int = 30,
    ) -> None:
        if not users or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in users):
            raise ValueError("users: expected positive user ids")
        if not response_window > 0:
            raise ValueError("response_window: expected a positive number of seconds")
        self.host = host
        self.port = port
        self.users = frozenset(users)
        self.response_window = float(response_window)
        self.default_timeout = default_timeout
        self.stats = SimulatorStats()
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cores: dict[str, _Core] = {}
        self._addresses: dict[str, _Address] = {}
        self._pending: dict[str, _Pending] = {}
        self._finished: OrderedDict[str, str] = OrderedDict()  # request id -> "answered"/"expired"
        self._connections: dict[Any, _Session] = {}
        self._link_ids = 0
        self._chat = ChatWorld(emit=self._emit_to_core, stats=self.stats, users=self.users)

    def __repr__(self) -> str:
        state = f"at {self.url}" if self._server is not None else "stopped"
        return f"<CoreSimulator {state}>"

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Start listening (on a free port when ``port`` is 0)."""
        from websockets.asyncio.server import serve

        self._loop = asyncio.get_running_loop()
        # No permessage-deflate: the core's server accepts with WS.defaultConnectionOptions
        # (apps/simplex-chat/Server.hs), whose compression is off; offering it here would
        # add zlib to every frame of a loopback benchmark that the core never pays.
        self._server = await serve(
            self._handle_connection,
            self.host,
            self.port,
            logger=_ws_log,
            max_size=None,
            compression=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("core simulator listening at %s", self.url)

    async def close(self) -> None:
        """Close every connection and stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for pending in self._pending.values():
            if pending.expiry is not None:
                pending.expiry.cancel()
        self._pending.clear()

    async def __aenter__(self) -> CoreSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def url(self) -> str:
        """The URL of the core ``default``."""
        return f"ws://{self.host}:{self.port}"

    def url_for(self, core: str) -> str:
        """The URL of the simulated core ``core`` (letters, digits, ``-`` and ``_``)."""
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", core):
            raise ValueError("core: use letters, digits, '-' and '_'")
        return f"{self.url}/{core}"

    async def drop_connections(self, core: str | None = None) -> int:
        """Close the connections (of one core, or all) abnormally; return how many."""
        victims = [
            ws
            for ws, session in self._connections.items()
            if core is None or session.core.name == core
        ]
        for ws in victims:
            await ws.close(code=1011, reason="simulated failure")
        return len(victims)

    def native_handle(self, core: str = "native") -> _NativeHandle:
        """A native-library handle (``chat_send_cmd``/``chat_recv_msg_wait``) on core ``core``.

        Call it from the simulator's event loop; use the handle from other
        threads (as ``ChatCore.native`` does), never from the loop's thread.
        """
        if self._loop is None:
            raise RuntimeError("start the simulator first")
        return _NativeHandle(self, core, self._loop)

    # -- the chat model: profiles, contacts, groups --------------------------

    def _party(self, ref: PartyRef) -> Party:
        party = (ref, 1) if isinstance(ref, str) else ref
        name, user_id = party
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError("core: use letters, digits, '-' and '_'")
        if user_id not in self.users:
            raise ValueError(f"user {user_id!r} is not among the simulator's users")
        return party

    def set_profile(self, who: PartyRef, profile: dict[str, Any]) -> None:
        """Set a user's ``Profile`` (``displayName``, ``preferences``, ...) as it is now."""
        if not isinstance(profile.get("displayName"), str):
            raise ValueError("profile: displayName is required")
        self._chat.profiles[self._party(who)] = json.loads(json.dumps(profile))

    def profile(self, who: PartyRef) -> dict[str, Any]:
        """A copy of a user's current ``Profile``."""
        result: dict[str, Any] = json.loads(json.dumps(self._chat.profile(self._party(who))))
        return result

    def connect(self, a: PartyRef, b: PartyRef) -> tuple[int, int]:
        """Make ``a`` and ``b`` contacts; return the contact id at ``a`` and at ``b``.

        ``a`` sends to ``@<first>``, ``b`` to ``@<second>``.
        """
        pa, pb = self._party(a), self._party(b)
        if pa == pb:
            raise ValueError("connect: a user is not its own contact")
        return self._chat.connect(pa, pb)

    def create_group(
        self,
        name: str,
        owner: PartyRef,
        members: list[PartyRef],
        *,
        business: bool = False,
        preferences: dict[str, Any] | None = None,
        roles: dict[PartyRef, str] | None = None,
    ) -> dict[Party, int]:
        """Create a group of ``owner`` (role owner) and ``members``, all joined; return each
        one's group id.

        The result maps ``(core, user id)`` to the id the group has there, for
        the owner and every member: ``{("alice", 1): 1, ("bob", 1): 3}``; that
        user sends to ``#<id>``. ``roles`` gives members a role other than
        ``member`` (``observer``, ``author``, ``moderator``, ``admin``,
        ``owner``). ``preferences`` become the profile's ``groupPreferences``; a
        business chat copies the owner's protocols.
        """
        return self._chat.group(
            name,
            self._party(owner),
            [self._party(m) for m in members],
            business=business,
            preferences=preferences,
            roles={self._party(k): v for k, v in (roles or {}).items()},
        )

    def create_address(
        self,
        who: PartyRef,
        *,
        pq_ratchet: bool = False,
        settings: dict[str, Any] | None = None,
    ) -> dict[str, str]:
        """Create ``who``'s contact address, as ``/_address`` does (with ratchet keys when
        ``pq_ratchet``), with ``settings`` (``AddressSettings``: ``businessAddress``,
        ``autoAccept``, ``autoReply``); return its ``CreatedConnLink``:
        ``{"connFullLink": ..., "connShortLink": ...}``."""
        core_name, user_id = self._party(who)
        resp = self._create_address(self._core(core_name), user_id, "on" if pq_ratchet else None)
        if resp["type"] != "userContactLinkCreated":
            raise ValueError(f"create_address: {core_name} user {user_id} has an address already")
        if settings is not None:
            checked = _address_settings_of(json.dumps(settings))
            if checked is None:
                raise ValueError("create_address: settings: not an AddressSettings object")
            address = self._address_of(self._core(core_name), user_id)
            assert address is not None
            address.settings = checked
        link: dict[str, str] = resp["connLinkContact"]
        return link

    def load_world(self, world: World | dict[str, Any]) -> dict[str, Any]:
        """Build ``world`` (a :class:`World` from :func:`read_world`, or its decoded tree);
        return what ``simplex-rpc simulator --world`` prints::

            {"url": "ws://127.0.0.1:5225",
             "users": {"alice": {"url": "ws://127.0.0.1:5225/alice", "userId": 1,
                                 "displayName": "Alice",
                                 "address": {"connFullLink": ..., "connShortLink": ...},
                                 "contacts": {"bob": 1},
                                 "groups": {"team": 1}}}}

        ``users`` is keyed by the world's user names (``core``, or ``core:N`` for
        user N); ``contacts`` maps a peer's name to the contact id at this user
        (it sends to ``@<id>``), ``groups`` a group's name to its id at this user
        (``#<id>``); ``address`` is there for a user with one. Raises
        :class:`WorldError` for a world that breaks the format or declares a user
        id the simulator does not have (``CoreSimulator(users=...)``).
        """
        if self._server is None:
            raise RuntimeError("start the simulator first")
        spec = world if isinstance(world, World) else check_world(world)
        missing = sorted(spec.user_ids - self.users)
        if missing:
            raise WorldError(
                f"world: user {missing[0]} is not among the simulator's users "
                f"{sorted(self.users)} (CoreSimulator(users=...))"
            )
        made: dict[str, dict[str, Any]] = {}
        for user in spec.users:
            if user.profile is not None:
                self.set_profile(user.party, user.profile)
            entry: dict[str, Any] = {
                "url": self.url_for(user.party[0]),
                "userId": user.party[1],
                "displayName": self._chat.profile(user.party)["displayName"],
            }
            if user.address is not None:
                link = self.create_address(
                    user.party,
                    pq_ratchet=user.address["pq_ratchet"],
                    settings=user.address["settings"],
                )
                if user.address["link_data"]:
                    self.set_link_data(link["connShortLink"], **user.address["link_data"])
                entry["address"] = link
            entry["contacts"], entry["groups"] = {}, {}
            made[user.ref] = entry
        for a, b in spec.contacts:
            at_a, at_b = self.connect(a, b)
            made[ref_of(a)]["contacts"][ref_of(b)] = at_a
            made[ref_of(b)]["contacts"][ref_of(a)] = at_b
        for group in spec.groups:
            ids = self.create_group(
                group.name,
                group.owner,
                [p for p, _ in group.members],
                business=group.business,
                preferences=group.preferences,
                roles={p: role for p, role in group.members},
            )
            for party, group_id in ids.items():
                made[ref_of(party)]["groups"][group.name] = group_id
        return {"url": self.url, "users": made}

    def group_link(self, who: PartyRef, group_id: int) -> str:
        """A group link of ``who``'s group ``group_id`` (for ``/_connect plan``)."""
        return self._chat.group_link(self._party(who), group_id)

    def set_link_data(self, link: str, **fields: Any) -> None:
        """Add fields (``serves``, ...) to the link data of a contact address."""
        token = _link_token(link)
        if token is None:
            raise ValueError("set_link_data: not a contact address of this simulator")
        self._chat.link_data.setdefault(token, {}).update(fields)

    async def send_event(self, core: str, event: dict[str, Any]) -> None:
        """Send a raw event (the ``resp`` object) to every connection of ``core``.

        For tests of what a bot does with events a real core would not send.
        """
        await self._emit_to_core(core, event)

    async def _emit_to_core(self, core_name: str, event: dict[str, Any]) -> None:
        core = self._core(core_name)
        if not core.sessions:
            core.backlog.append(event)  # the oldest goes when it is full
            return
        for session in list(core.sessions):
            await session.emit(event)

    def _take_backlog(self, core: _Core) -> list[dict[str, Any]]:
        """The events that waited for a client of ``core`` (handed to the first one)."""
        events = list(core.backlog)
        core.backlog.clear()
        return events

    def _connect_plan(self, core: _Core, user_id: int, link: str) -> dict[str, Any]:
        # APIConnectPlan (COMMANDS.md): connectionPlan with ConnectionPlan (TYPES.md).
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        party = (core.name, user_id)
        group = _GROUP_LINK.fullmatch(link)
        if group is not None:
            group_plan = self._chat.plan_group_link(party, group["token"])
            if group_plan is None:
                return _chat_error("invalidConnReq")
            return {
                "type": "connectionPlan",
                "user": self._chat.user(party),
                "connLink": {"connFullLink": link, "connShortLink": link},
                "connectionPlan": {"type": "groupLink", "groupLinkPlan": group_plan},
            }
        token = _link_token(link)
        if token is None:
            return _chat_error("invalidConnReq")
        address = self._addresses.get(token)
        if address is None:
            return _chat_error("invalidConnReq")
        plan: dict[str, Any]
        owner = (address.core.name, address.user_id)
        known = next((c for c in self._chat.contacts if set(c.parties) == {party, owner}), None)
        if address.core is core and address.user_id == user_id:
            plan = {"type": "ownLink"}
        elif known is not None:
            # ContactAddressPlan "known" (TYPES.md) carries the Contact; the
            # simulator takes any contact of the owner as made through the address.
            plan = {"type": "known", "contact": self._chat.contact_record(party, known)}
        elif _SHORT_LINK.fullmatch(link) is None:
            # The link data goes with the short link: a full link's plan is "ok"
            # without contactSLinkData_ (ContactShortLinkData?, TYPES.md; the core
            # omits a Nothing field).
            plan = {"type": "ok"}
        else:
            data: dict[str, Any] = {
                "profile": self._chat.profile(owner),
                "business": bool(address.settings.get("businessAddress", False)),
            }
            data.update(self._chat.link_data.get(token, {}))
            plan = {"type": "ok", "contactSLinkData_": json.loads(json.dumps(data))}
        return {
            "type": "connectionPlan",
            "user": self._chat.user(party),
            "connLink": address.created_link(),
            "connectionPlan": {"type": "contactAddress", "contactAddressPlan": plan},
        }

    # -- connections --------------------------------------------------------

    def _core(self, name: str) -> _Core:
        core = self._cores.get(name)
        if core is None:
            core = self._cores[name] = _Core(name=name, users=self.users)
        return core

    def _open_session(
        self, core_name: str, emit: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> _Session:
        core = self._core(core_name)
        session = _Session(core=core, emit=emit)
        core.sessions.append(session)
        return session

    def _close_session(self, session: _Session) -> None:
        session.alive = False
        with contextlib.suppress(ValueError):
            session.core.sessions.remove(session)

    async def _handle_connection(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        path = ws.request.path if ws.request is not None else "/"
        name = path.strip("/") or "default"
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            await ws.close(code=1008, reason="unknown core")
            return

        async def emit(event: dict[str, Any]) -> None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send(_frame({"resp": event}))

        session = self._open_session(name, emit)
        self._connections[ws] = session
        for event in self._take_backlog(session.core):
            await emit(event)
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for message in ws:
                request = _request(message)
                if request is None:
                    log.warning("simulator: not a command: %s", show(message))
                    # Server.hs: Nothing -> sendError Nothing Nothing "invalid request".
                    with contextlib.suppress(ConnectionClosed):
                        await ws.send(_frame({"resp": _command_error("invalid request")}))
                    continue
                corr_id, cmd = request
                task = asyncio.create_task(self._answer(ws, session, corr_id, cmd))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except ConnectionClosed:
            pass
        finally:
            self._close_session(session)
            self._connections.pop(ws, None)
            for task in list(tasks):
                task.cancel()

    async def _answer(self, ws: Any, session: _Session, corr_id: object, cmd: str) -> None:
        from websockets.exceptions import ConnectionClosed

        resp, steps = await self._command(session, cmd)
        with contextlib.suppress(ConnectionClosed):
            await ws.send(_frame({"corrId": corr_id, "resp": resp}))
        for step in steps:
            await step()

    # -- commands -----------------------------------------------------------

    async def run_command(self, session: _Session, cmd: str) -> dict[str, Any]:
        """Run one command for ``session``, and the events it defers; return the ``resp``."""
        resp, steps = await self._command(session, cmd)
        for step in steps:
            await step()
        return resp

    async def _command(self, session: _Session, cmd: str) -> tuple[dict[str, Any], list[Any]]:
        """Run one command; return its ``resp`` and the steps to run once it is sent."""
        log.debug("simulator %s: %s", session.core.name, show(cmd, 300))
        steps, token = collect_later()
        try:
            return await self._run(session, cmd.rstrip(_SPACE)), steps
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - a bug in the simulator, reported as such
            log.error("simulator: command failed", exc_info=True)
            return _chat_error("exception", message=type(exc).__name__), []
        finally:
            stop_collecting(token)

    async def _run(self, session: _Session, cmd: str) -> dict[str, Any]:
        core = session.core
        if m := _START.fullmatch(cmd):
            return self._start(core, m)
        if cmd == "/_stop":
            core.started = False
            core.service_requests = False
            return {"type": "chatStopped"}
        if cmd in _SHOW_USER:
            user = (core.name, active_user(core.users))
            return {"type": "activeUser", "user": self._chat.user(user)}
        if m := _CONNECT_PLAN.fullmatch(cmd):
            return self._connect_plan(core, int(m["user"]), m["link"])
        if m := _CONNECT.fullmatch(cmd):
            return self._connect(core, m)
        if m := _ACCEPT.fullmatch(cmd):
            return self._accept(core, int(m["id"]), m["incognito"] == "on")
        if m := _REJECT.fullmatch(cmd):
            return self._reject(core, int(m["id"]))
        if cmd.startswith("/_service_request "):
            return await self._service_request(session, cmd)
        if cmd.startswith("/_service_response "):
            accepted = self._service_response(session, cmd)
            # The requester's serviceResponse goes out before this acknowledgement: the
            # core's two sides do not wait for each other, and the requester is the one
            # waiting (its task was woken by the answer; one turn of the loop lets it send).
            await asyncio.sleep(0)
            return accepted
        if m := _ADDRESS.fullmatch(cmd):
            return self._create_address(core, int(m["user"]), m["pq"])
        if m := _ADDRESS_SETTINGS.fullmatch(cmd):
            return self._address_settings(core, int(m["user"]), m["pq"], m["json"])
        if m := _USER_COMMAND.fullmatch(cmd):
            user_id = int(m["user"])
            if user_id not in core.users:
                return _store_error("userNotFound", userId=user_id)
            address = self._address_of(core, user_id)
            if address is None:
                return _store_error("userContactLinkNotFound")
            if m["name"] == "show_address":
                return {
                    "type": "userContactLink",
                    "user": self._chat.user((core.name, user_id)),
                    "contactLink": address.contact_link(),
                }
            del self._addresses[address.token]
            return {"type": "userContactLinkDeleted", "user": self._chat.user((core.name, user_id))}
        chat = await self._chat.run(core.name, core.users, cmd)
        if chat is not None:
            return chat
        # A form the parser refuses, or one the simulator does not implement.
        return unknown_command()

    def _start(self, core: _Core, m: re.Match[str]) -> dict[str, Any]:
        if core.started:
            return {"type": "chatRunning"}
        core.started = True
        core.service_requests = m["service"] == "on"
        return {"type": "chatStarted"}

    def _address_of(self, core: _Core, user_id: int) -> _Address | None:
        for address in self._addresses.values():
            if address.core is core and address.user_id == user_id:
                return address
        return None

    def _create_address(self, core: _Core, user_id: int, pq: str | None) -> dict[str, Any]:
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        if self._address_of(core, user_id) is not None:
            return _store_error("duplicateContactLink")
        self._link_ids += 1
        token = secrets.token_urlsafe(18)
        address = _Address(
            core=core,
            user_id=user_id,
            token=token,
            link_id=self._link_ids,
            ratchet_key=secrets.token_urlsafe(16) if pq is not None else None,
            settings={"businessAddress": False},
        )
        self._addresses[token] = address
        return {
            "type": "userContactLinkCreated",
            "user": self._chat.user((core.name, user_id)),
            "connLinkContact": address.created_link(),
        }

    def _address_settings(
        self, core: _Core, user_id: int, pq: str | None, text: str
    ) -> dict[str, Any]:
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        address = self._address_of(core, user_id)
        if address is None:
            return _store_error("userContactLinkNotFound")
        settings = _address_settings_of(text)
        if settings is None:
            return unknown_command()  # jsonP: not an AddressSettings
        address.settings = settings
        if pq is not None and address.ratchet_key is None:
            address.ratchet_key = secrets.token_urlsafe(16)
        return {
            "type": "userContactLinkUpdated",
            "user": self._chat.user((core.name, user_id)),
            "contactLink": address.contact_link(),
        }

    def _connect(self, core: _Core, m: re.Match[str]) -> dict[str, Any]:
        """APIConnect through a contact address (COMMANDS.md): ``sentInvitation``, or
        ``contactAlreadyExists``; the owner's core reports ``receivedContactRequest``, or
        accepts at once when its address auto-accepts (EVENTS.md)."""
        user_id = int(m["user"])
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        party = (core.name, user_id)
        if m["incognito"] == "on":
            return _command_error("incognito: the simulator has no incognito profiles")
        links = [m["link"]] + ([m["short"]] if m["short"] is not None else [])
        if any(_GROUP_LINK.fullmatch(link) for link in links):
            return unknown_command()  # joining through a group link is not simulated
        tokens = {_link_token(link) for link in links}
        if None in tokens or len(tokens) != 1:
            return _chat_error("invalidConnReq")
        (token,) = tokens
        address = self._addresses.get(str(token))
        if address is None:
            # The address's queue is gone: the router refuses the connection.
            return _agent_error(
                {"type": "SMP", "serverAddress": f"smp://{_HOST}", "smpErr": {"type": "AUTH"}}
            )
        owner = (address.core.name, address.user_id)
        if owner == party:
            return _chat_error("invalidConnReq")  # one's own address (its plan: ownLink)
        known = self._chat.contact_between(party, owner)
        if known is not None:
            return {
                "type": "contactAlreadyExists",
                "user": self._chat.user(party),
                "contact": self._chat.contact_record(party, known),
            }
        if address.settings.get("businessAddress"):
            # A business address makes a business chat (a group) per customer;
            # over the wire the simulator does not make those (create_group(business=True)).
            return _command_error("business addresses: not simulated by /_connect")
        # A repeated request of the same requester is the same request (the core
        # matches it by its xContactId): the owner is told again, with the same id.
        request = next(
            (r for r in self._chat.requests if (r.owner, r.requester) == (owner, party)), None
        )
        if request is None:
            request = ContactRequest(
                owner=owner,
                requester=party,
                # contactRequestId: numbered per core, as the core's database does.
                request_id=self._chat.next_id((owner[0], 0), "request"),
                link_id=address.link_id,
            )
            self._chat.requests.append(request)
        if "autoAccept" in address.settings:
            contact = self._make_contact(request)
            self._chat.emit_later(
                [
                    (
                        owner[0],
                        {
                            "type": "acceptingContactRequest",
                            "user": self._chat.user(owner),
                            "contact": self._chat.contact_record(owner, contact),
                        },
                    )
                ]
            )
            self._connected_later(request, contact, address.settings.get("autoReply"))
        else:
            self._chat.emit_later(
                [
                    (
                        owner[0],
                        {
                            "type": "receivedContactRequest",
                            "user": self._chat.user(owner),
                            "contactRequest": self._chat.request_record(request),
                        },
                    )
                ]
            )
        return {
            "type": "sentInvitation",
            "user": self._chat.user(party),
            "connection": self._chat.pending_connection(party),
        }

    def _request_of(self, core: _Core, request_id: int) -> ContactRequest | None:
        # APIAcceptContact and APIRejectContact name no user: the core finds the
        # request, and its user, by the request's id (getContactRequest').
        return next(
            (
                r
                for r in self._chat.requests
                if r.owner[0] == core.name and r.request_id == request_id
            ),
            None,
        )

    def _make_contact(self, request: ContactRequest) -> Any:
        self._chat.requests.remove(request)
        contact = self._chat.new_contact(request.owner, request.requester)
        contact.request_id[request.owner] = request.request_id
        return contact

    def _connected_later(
        self, request: ContactRequest, contact: Any, auto_reply: dict[str, Any] | None
    ) -> None:
        """The events of a contact connecting, after the command that accepted it (EVENTS.md):
        the owner ``contactSndReady`` and ``contactConnected``; the requester
        ``contactConnecting`` and ``contactConnected``; then the address's auto-reply."""
        owner, requester = request.owner, request.requester
        chat = self._chat
        events = [
            (
                owner[0],
                {
                    "type": "contactSndReady",
                    "user": chat.user(owner),
                    "contact": chat.contact_record(owner, contact),
                },
            ),
            (
                requester[0],
                {
                    "type": "contactConnecting",
                    "user": chat.user(requester),
                    "contact": chat.contact_record(requester, contact),
                },
            ),
            (
                owner[0],
                {
                    "type": "contactConnected",
                    "user": chat.user(owner),
                    "contact": chat.contact_record(owner, contact),
                },
            ),
            (
                requester[0],
                {
                    "type": "contactConnected",
                    "user": chat.user(requester),
                    "contact": chat.contact_record(requester, contact),
                },
            ),
        ]
        chat.emit_later(events)
        if auto_reply is not None:

            async def reply() -> None:
                await chat.deliver(owner, "@", contact, dict(auto_reply), echo=True)

            later(reply)

    def _accept(self, core: _Core, request_id: int, incognito: bool) -> dict[str, Any]:
        """APIAcceptContact: ``acceptingContactRequest`` with the new contact (COMMANDS.md)."""
        request = self._request_of(core, request_id)
        if request is None:
            return _store_error("contactRequestNotFound", contactRequestId=request_id)
        if incognito:
            return _command_error("incognito: the simulator has no incognito profiles")
        contact = self._make_contact(request)
        self._connected_later(request, contact, None)
        return {
            "type": "acceptingContactRequest",
            "user": self._chat.user(request.owner),
            "contact": self._chat.contact_record(request.owner, contact),
        }

    def _reject(self, core: _Core, request_id: int) -> dict[str, Any]:
        """APIRejectContact: ``contactRequestRejected``; "The user who sent the request is
        **not notified**" (COMMANDS.md)."""
        request = self._request_of(core, request_id)
        if request is None:
            return _store_error("contactRequestNotFound", contactRequestId=request_id)
        self._chat.requests.remove(request)
        return {
            "type": "contactRequestRejected",
            "user": self._chat.user(request.owner),
            "contactRequest": self._chat.request_record(request),
        }

    def _resolve(self, target: str) -> _Address | dict[str, Any]:
        token = _link_token(target)
        if token is None:
            return _chat_error("invalidConnReq")
        full = _FULL_LINK.fullmatch(target)
        address = self._addresses.get(token)
        if address is None:
            # The address's queue is gone: the router refuses the request.
            return _agent_error(
                {"type": "SMP", "serverAddress": f"smp://{_HOST}", "smpErr": {"type": "AUTH"}}
            )
        has_keys = full["rk"] is not None if full is not None else address.ratchet_key is not None
        if not has_keys:
            return _service_error("ASENotDRAddress")
        return address

    async def _service_request(self, session: _Session, cmd: str) -> dict[str, Any]:
        m = _SERVICE_REQUEST.fullmatch(cmd)
        if m is None:
            return _command_error("invalid /_service_request syntax")
        core = session.core
        user_id = int(m["user"])
        if (refusal := _sender_refusal(core, user_id)) is not None:
            return refusal
        timeout = self.default_timeout
        if m["timeout"] is not None:
            if not re.fullmatch(r"[1-9][0-9]{0,6}", m["timeout"]):
                return _command_error("timeout: expected a positive whole number of seconds")
            timeout = int(m["timeout"])
        key: SigningKey | None = None
        if m["key"] is not None:
            try:
                key = SigningKey.decode(m["key"])
            except KeyFormatError:
                return _command_error("sign_key: not an Ed25519 private key")
        try:
            request = _json.loads(m["json"])
        except _json.JsonError:
            return _command_error("the request is not JSON")
        if not isinstance(request, dict):
            return _command_error("the request must be a JSON object")
        resolved = self._resolve(m["target"])
        if isinstance(resolved, dict):
            return resolved
        address = resolved
        # The core sends the request as its JSON encoding: seal it as the agent
        # would, with a fresh AD, and fail as it would when it does not fit.
        payload = _json.dumps(request)
        ad = os.urandom(AD_LENGTH)
        try:
            block = _backend.active.seal_request(payload, ad, key, reply_queue=_REPLY_QUEUE)
        except PaddingError:
            return _too_large("service request")
        self.stats.requests += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        responder = address.core
        if not (responder.started and responder.service_requests and responder.sessions):
            self.stats.dropped += 1
            log.info("simulator: core %s does not take service requests: dropped", responder.name)
        else:
            opened = _backend.active.open_request(block, ad, strict=True)
            data = _json.loads(opened.payload)
            request_id = secrets.token_urlsafe(12)
            pending = _Pending(core=responder, user_id=address.user_id, future=future)
            pending.expiry = loop.call_later(self.response_window, self._expire, request_id)
            self._pending[request_id] = pending
            event: dict[str, Any] = {
                "type": "serviceRequest",
                "user": self._chat.user((responder.name, address.user_id)),
                "requestId": request_id,
            }
            if opened.signer is not None:
                event["signerKey"] = opened.signer.encode()
            event["requestData"] = data
            self.stats.delivered += 1
            for target in list(responder.sessions):
                await target.emit(event)
        try:
            async with asyncio.timeout(timeout):
                response = await future
        except TimeoutError:
            self.stats.requester_timeouts += 1
            return _service_error("ASETimeout")
        return {
            "type": "serviceResponse",
            "user": self._chat.user((core.name, user_id)),
            "responseData": response,
        }

    def _expire(self, request_id: str) -> None:
        if self._pending.pop(request_id, None) is not None:
            self._finish(request_id, "expired")

    def _finish(self, request_id: str, how: str) -> None:
        self._finished[request_id] = how
        while len(self._finished) > 100_000:
            self._finished.popitem(last=False)

    def _service_response(self, session: _Session, cmd: str) -> dict[str, Any]:
        m = _SERVICE_RESPONSE.fullmatch(cmd)
        if m is None:
            return _command_error("invalid /_service_response syntax")
        core = session.core
        user_id = int(m["user"])
        if (refusal := _sender_refusal(core, user_id)) is not None:
            return refusal
        try:
            response = _json.loads(m["json"])
        except _json.JsonError:
            return _command_error("the response is not JSON")
        if not isinstance(response, dict):
            return _command_error("the response must be a JSON object")
        request_id = m["rid"]
        pending = self._pending.get(request_id)
        if pending is None or pending.core is not core or pending.user_id != user_id:
            how = self._finished.get(request_id)
            if how == "expired":
                self.stats.late_responses += 1
                return _service_error("ASETimeout")
            if how == "answered":
                self.stats.duplicate_responses += 1
            return _service_error("ASENoPendingRequest")
        try:
            block = _backend.active.seal_response(_json.dumps(response))
        except PaddingError:
            return _too_large("service response")
        data = _json.loads(_backend.active.open_response(block, strict=True))
        del self._pending[request_id]
        if pending.expiry is not None:
            pending.expiry.cancel()
        self._finish(request_id, "answered")
        if not pending.future.done():
            pending.future.set_result(data)
        self.stats.responses += 1
        return {
            "type": "serviceReplyAccepted",
            "user": self._chat.user((core.name, user_id)),
            "connectionId": secrets.token_urlsafe(9),
        }


class _NativeHandle:
    """The simulator behind the native API: JSON results ``{"result"}``/``{"error"}``."""

    def __init__(self, sim: CoreSimulator, core: str, loop: asyncio.AbstractEventLoop) -> None:
        self._sim = sim
        self._loop = loop
        self._events: queue.Queue[str] = queue.Queue()
        self._closed = threading.Event()
        self._session = sim._open_session(core, self._emit)
        for event in sim._take_backlog(self._session.core):
            self._events.put(_frame({"result": event}))

    def __repr__(self) -> str:
        return f"<simulator native handle on core {self._session.core.name}>"

    async def _emit(self, event: dict[str, Any]) -> None:
        self._events.put(_frame({"result": event}))

    def chat_send_cmd(self, cmd: str) -> str:
        if self._closed.is_set():
            return json.dumps({"error": {"type": "error", "errorType": {"type": "chatNotStarted"}}})
        future = asyncio.run_coroutine_threadsafe(
            self._sim.run_command(self._session, cmd), self._loop
        )
        resp = future.result()
        if resp.get("type") == "chatCmdError":
            return _frame({"error": resp["chatError"]})
        return _frame({"result": resp})

    def chat_recv_msg_wait(self, wait_us: int) -> str:
        try:
            return self._events.get(timeout=max(wait_us, 0) / 1e6)
        except queue.Empty:
            return ""

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._sim._close_session, self._session)

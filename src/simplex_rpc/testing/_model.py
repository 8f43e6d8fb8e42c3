"""The simulator's model of chat cores and their users: what each command does.

One :class:`CoreModel` holds every simulated core (one per URL path), the users
of each, their contact addresses, the Service RPC requests in flight and the
chat world (:mod:`._chat`). It runs one command at a time for whoever calls
:meth:`CoreModel.command` (the WebSocket server, one connection at a time, or a
native handle) and writes events to each core's one output queue
(:class:`CoreOutput`), as the core's ``toView`` writes to its ``outputQ``.

Sources (simplex-chat/simplex-chat), cited by file and commit where known:

* ``apps/simplex-chat/Server.hs`` (commit 00cde8a4): the WebSocket server, see
  :mod:`._server`;
* ``src/Simplex/Chat/Core.hs`` (commit 00402ac4): ``runSimplexChat`` starts the
  chat itself (``startChatController True True``: service requests off) unless
  the CLI runs in maintenance mode (``-m``), which needs an existing user;
* ``src/Simplex/Chat/Library/Commands.hs`` (commit ec2e2ce9): ``StartChat`` answers
  ``CRChatRunning`` when the chat runs and changes nothing; ``APIStopChat``
  answers ``CRChatStopped``;
* the Service RPC commands and events are from the plans, not published code:
  ``plans/2026-07-22-service-rpc-chat.md`` (commit 525a612a: ``/_service_response``
  answered ``CRCmdOk``; ``A_SERVICE ASEBadSignature`` as an agent error; target
  resolution) and ``plans/2026-07-20-supporter-badges-v2-implementation.md``
  (commit 67bc10d4: ``CRServiceReplyAccepted {connectionId}`` and the event
  ``CEvtServiceReplySent {connectionId}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .._wire import backend as _backend
from .._wire import strict_json as _json
from .._wire.agent_block import SMPQueueInfo, SMPServer
from .._wire.keys import SigningKey
from .._wire.redact import RedactingLogger, show
from ..errors import BadSignature, KeyFormatError, PaddingError
from . import _grammar as g
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
from ._world import World, WorldError, ref_of

PartyRef = str | tuple[str, int]
"""A user of a simulated core: ``("alice", 2)``, or ``"alice"`` for its user 1."""

Ack = Literal["serviceReplyAccepted", "cmdOk"]
"""The answer to ``/_service_response``: ``serviceReplyAccepted {user, connectionId}`` of
current cores (the badge plan), or ``cmdOk`` of the first ones (the Service RPC plan)."""

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

AD_LENGTH: Final = 112  # two X448 keys, as the agent's associated data
OUTPUT_QUEUE_SIZE: Final = 1024
"""The core's ``outputQ`` holds ``tbqSize`` events (1,024 by default, ``-q``)."""


def sorted_tree(value: Any) -> Any:
    """``value`` with the keys of every object in sorted order, as aeson encodes a
    ``J.Object`` (a ``KeyMap``, ordered by key): the core re-encodes ``requestData``
    and ``responseData`` with ``J.encode`` (the Service RPC plan, D3)."""
    if isinstance(value, dict):
        return {key: sorted_tree(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_tree(item) for item in value]
    return value


def _agent_error(agent_error: dict[str, Any]) -> dict[str, Any]:
    return _cmd_error(_agent_chat_error(agent_error))


def _agent_chat_error(agent_error: dict[str, Any]) -> dict[str, Any]:
    return {"type": "errorAgent", "agentError": agent_error, "agentConnId": ""}


def _service_agent_error(tag: str) -> dict[str, Any]:
    # simplexmq: A_SERVICE {serviceError :: AgentServiceError}, an SMPAgentError.
    return {"type": "AGENT", "agentErr": {"type": "A_SERVICE", "serviceError": {"type": tag}}}


def _service_error(tag: str) -> dict[str, Any]:
    return _agent_error(_service_agent_error(tag))


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
    bad_signatures: int = 0
    """Signed requests whose signature did not verify at the responder (not delivered)."""
    responses: int = 0
    """Responses accepted (``serviceReplyAccepted`` or ``cmdOk``)."""
    late_responses: int = 0
    """Responses refused because they came after the response window."""
    duplicate_responses: int = 0
    """Second responses to a request already answered, refused."""
    requester_timeouts: int = 0
    """Requesters that waited out their ``timeout``."""
    messages: int = 0
    """Chat messages sent with ``/_send`` (each composed message counts once)."""
    commands: int = 0
    """Commands run (that parsed), on every connection and native handle."""


class CoreOutput:
    """A core's ``outputQ``: its events, each read by exactly one reader.

    Every client connection's ``output`` thread (Server.hs) and a native handle's
    ``chat_recv_msg_wait`` read the same queue, so an event reaches the one
    reader that takes it first. The queue holds ``size`` events (1,024 by
    default); once it is full the core's writers wait. Here the writers are the
    core's agent (what other cores send it) and its commands: they hand events to
    an unbounded inbox that one pump moves into the bounded queue, so a writer
    never waits on another core's readers, while the bound holds as in the core.
    """

    def __init__(self, size: int = OUTPUT_QUEUE_SIZE) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=size)
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._held = 0  # the event the pump holds while the queue is full

    def put(self, event: dict[str, Any]) -> None:
        """Write ``event`` (in order after every earlier one); never waits."""
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._run())
        self._inbox.put_nowait(event)

    async def get(self) -> dict[str, Any]:
        """Take the next event; it is this reader's alone."""
        return await self.queue.get()

    def waiting(self) -> int:
        """How many events wait to be read (in the queue and behind it)."""
        return self.queue.qsize() + self._held + self._inbox.qsize()

    async def _run(self) -> None:
        while True:
            event = await self._inbox.get()
            self._held = 1
            await self.queue.put(event)
            self._held = 0

    def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()


@dataclass(eq=False, slots=True)
class Session:
    """One client of a core: a WebSocket connection or a native handle."""

    core: _Core
    alive: bool = True


@dataclass(eq=False, slots=True)
class _Core:
    name: str
    users: frozenset[int]
    output: CoreOutput
    started: bool = False
    service_requests: bool = False
    sessions: list[Session] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Address:
    """A user's contact address: its full link, and its short link when it has one.

    Ratchet keys (Service RPC needs them) are on both links of an address made with
    ``pq_ratchet=on``. An upgrade in place (``/_address_settings … pq_ratchet=on``,
    ``/_short_link_address <userId> pq_ratchet=on``, ``/_rotate_address_keys``) calls
    ``setMyAddressData … (Just IKUsePQ)`` on the existing connection and keeps the same
    full link (Commands.hs:4025-4039 as plans/2026-06-25-name-resolution.md reads it):
    the keys go on the short link only, and a request to the full link still fails
    ``ASENotDRAddress``.
    """

    core: _Core
    user_id: int
    token: str
    link_id: int
    full_keys: str | None  # the ratchet key in the full link (rk=), made with the address
    short_keys: bool  # whether the short link carries ratchet keys
    has_short: bool
    settings: dict[str, Any]

    @property
    def short_link(self) -> str:
        return f"simplex:/a#{self.token}?h={g.HOST}"

    @property
    def full_link(self) -> str:
        link = f"simplex:/contact#/?v=2-7&smp=smp%3A%2F%2F{g.HOST}%2F{self.token}"
        if self.full_keys is not None:
            link += f"&rk={self.full_keys}"
        return link

    def created_link(self) -> dict[str, Any]:
        link = {"connFullLink": self.full_link}
        if self.has_short:
            link["connShortLink"] = self.short_link
        return link

    def contact_link(self) -> dict[str, Any]:
        return {
            "userContactLinkId": self.link_id,
            "connLinkContact": self.created_link(),
            "shortLinkDataSet": self.has_short,
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


class CoreModel:
    """Every simulated core: its users, addresses, requests in flight, and the chat world.

    ``maintenance`` says how each core's CLI was started: True models
    ``simplex-chat -m`` (the chat not started until ``/_start``), False the usual
    start, where ``runSimplexChat`` starts the chat itself with service requests
    off, so ``/_start`` answers ``chatRunning`` and changes nothing.
    """

    def __init__(
        self,
        *,
        users: frozenset[int],
        response_window: float,
        default_timeout: int,
        maintenance: bool,
        ack: Ack,
        output_size: int,
    ) -> None:
        self.users = users
        self.response_window = response_window
        self.default_timeout = default_timeout
        self.maintenance = maintenance
        self.ack: Ack = ack
        self.output_size = output_size
        self.command_delay = 0.0
        self.command_delays: dict[str, float] = {}
        self.bad_signatures = False
        self.stats = SimulatorStats()
        self._cores: dict[str, _Core] = {}
        self._addresses: dict[str, _Address] = {}
        self._names: dict[str, str] = {}  # SimpleX name -> address token
        self._pending: dict[str, _Pending] = {}
        self._finished: OrderedDict[str, str] = OrderedDict()  # request id -> "answered"/"expired"
        self._link_ids = 0
        self._chat = ChatWorld(emit=self._emit_to_core, stats=self.stats, users=self.users)

    def close_model(self) -> None:
        """Cancel the timers of requests in flight and the cores' output pumps."""
        for pending in self._pending.values():
            if pending.expiry is not None:
                pending.expiry.cancel()
        self._pending.clear()
        for core in self._cores.values():
            core.output.close()

    def delay_of(self, cmd: str) -> float:
        """The processing delay of ``cmd``: that of its first word, else the default."""
        word = cmd.split(" ", 1)[0]
        return self.command_delays.get(word, self.command_delay)

    # -- cores and their clients ---------------------------------------------

    def core(self, name: str) -> _Core:
        found = self._cores.get(name)
        if found is None:
            found = self._cores[name] = _Core(
                name=name,
                users=self.users,
                output=CoreOutput(self.output_size),
                started=not self.maintenance,
            )
        return found

    def open_session(self, core_name: str) -> Session:
        core = self.core(core_name)
        session = Session(core=core)
        core.sessions.append(session)
        return session

    def close_session(self, session: Session) -> None:
        session.alive = False
        with contextlib.suppress(ValueError):
            session.core.sessions.remove(session)

    async def _emit_to_core(self, core_name: str, event: dict[str, Any]) -> None:
        self.core(core_name).output.put(event)

    def emit(self, core_name: str, event: dict[str, Any]) -> None:
        """Write ``event`` to the output queue of ``core_name``: one reader will take it."""
        self.core(core_name).output.put(event)

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
        short_link: bool = True,
        name: str | None = None,
    ) -> dict[str, str]:
        """Create ``who``'s contact address, as ``/_address`` does (with ratchet keys when
        ``pq_ratchet``), with ``settings`` (``AddressSettings``: ``businessAddress``,
        ``autoAccept``, ``autoReply``); return its ``CreatedConnLink``:
        ``{"connFullLink": ..., "connShortLink": ...}``.

        ``short_link=False`` makes an address of the time before short links: a full
        link alone (``/_short_link_address`` adds one). ``name`` registers a SimpleX
        name for it (:meth:`register_name`).
        """
        core_name, user_id = self._party(who)
        resp = self._create_address(self.core(core_name), user_id, "on" if pq_ratchet else None)
        if resp["type"] != "userContactLinkCreated":
            raise ValueError(f"create_address: {core_name} user {user_id} has an address already")
        address = self._address_of(self.core(core_name), user_id)
        assert address is not None
        if settings is not None:
            checked = g.address_settings_of(json.dumps(settings))
            if checked is None:
                raise ValueError("create_address: settings: not an AddressSettings object")
            address.settings = checked
        if not short_link:
            address.has_short = address.short_keys = False
        if name is not None:
            self.register_name(name, who)
        link: dict[str, str] = address.created_link()
        return link

    def register_name(self, name: str, who: PartyRef) -> None:
        """Register the SimpleX name ``name`` (``alice.simplex``) for ``who``'s address.

        A ``/_service_request`` to ``@alice.simplex`` then goes to that address's short
        link, as the core resolves a contact name to its contact link
        (plans/2026-07-22-service-rpc-chat.md, target resolution).
        """
        if not g.SIMPLEX_NAME.fullmatch(name):
            raise ValueError(f"register_name: {name!r} is not a SimpleX name (name.simplex)")
        core_name, user_id = self._party(who)
        address = self._address_of(self.core(core_name), user_id)
        if address is None:
            raise ValueError(f"register_name: {core_name} user {user_id} has no address")
        self._names[name] = address.token

    def build_world(self, spec: World, url_for: Callable[[str], str]) -> dict[str, Any]:
        """Build the checked world ``spec``; return its users as ``load_world`` prints them."""
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
                "url": url_for(user.party[0]),
                "userId": user.party[1],
                "displayName": self._chat.profile(user.party)["displayName"],
            }
            if user.address is not None:
                link = self.create_address(
                    user.party,
                    pq_ratchet=user.address["pq_ratchet"],
                    settings=user.address["settings"],
                    short_link=user.address["short_link"],
                    name=user.address["name"],
                )
                if user.address["link_data"]:
                    address = self._address_of(self.core(user.party[0]), user.party[1])
                    assert address is not None
                    self._chat.link_data.setdefault(address.token, {}).update(
                        user.address["link_data"]
                    )
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
        return made

    def group_link(self, who: PartyRef, group_id: int) -> str:
        """A group link of ``who``'s group ``group_id`` (for ``/_connect plan``)."""
        return self._chat.group_link(self._party(who), group_id)

    def set_link_data(self, link: str, **fields: Any) -> None:
        """Add fields (``serves``, ...) to the link data of a contact address."""
        token = g.link_token(link)
        if token is None:
            raise ValueError("set_link_data: not a contact address of this simulator")
        self._chat.link_data.setdefault(token, {}).update(fields)

    def _connect_plan(self, core: _Core, user_id: int, link: str) -> dict[str, Any]:
        # APIConnectPlan (COMMANDS.md): connectionPlan with ConnectionPlan (TYPES.md).
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        party = (core.name, user_id)
        group = g.GROUP_LINK.fullmatch(link)
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
        token = g.link_token(link)
        if token is None:
            return _chat_error("invalidConnReq")
        address = self._addresses.get(token)
        if address is None or (not address.has_short and g.SHORT_LINK.fullmatch(link)):
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
        elif g.SHORT_LINK.fullmatch(link) is None:
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

    # -- commands -----------------------------------------------------------

    async def run_command(self, session: Session, cmd: str) -> dict[str, Any]:
        """Run one command for ``session`` and the events it defers; return the ``resp``.

        The native API's ``chat_send_cmd``: the line is parsed and run in one call.
        """
        if not g.parses(cmd):
            return unknown_command()
        resp, steps = await self.command(session, cmd)
        for step in steps:
            await step()
        return resp

    async def command(self, session: Session, cmd: str) -> tuple[dict[str, Any], list[Any]]:
        """Run one command that parses (:func:`~._grammar.parses`), after its processing
        delay; return its ``resp`` and the steps to run once that is sent."""
        log.debug("simulator %s: %s", session.core.name, show(cmd, 300))
        self.stats.commands += 1
        delay = self.delay_of(cmd)
        if delay > 0:
            await asyncio.sleep(delay)
        steps, token = collect_later()
        try:
            return await self._run(session, cmd.rstrip(g.SPACE)), steps
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - a bug in the simulator, reported as such
            log.error("simulator: command failed", exc_info=True)
            return _chat_error("exception", message=type(exc).__name__), []
        finally:
            stop_collecting(token)

    async def _run(self, session: Session, cmd: str) -> dict[str, Any]:
        core = session.core
        if m := g.START.fullmatch(cmd):
            return self._start(core, m)
        if cmd == g.STOP:
            # APIStopChat: stopChatController, then CRChatStopped (Commands.hs).
            core.started = False
            core.service_requests = False
            return {"type": "chatStopped"}
        if cmd in g.SHOW_USER:
            user = (core.name, active_user(core.users))
            return {"type": "activeUser", "user": self._chat.user(user)}
        if m := g.CONNECT_PLAN.fullmatch(cmd):
            return self._connect_plan(core, int(m["user"]), m["link"])
        if m := g.CONNECT.fullmatch(cmd):
            return self._connect(core, m)
        if m := g.ACCEPT.fullmatch(cmd):
            return self._accept(core, int(m["id"]), m["incognito"] == "on")
        if m := g.REJECT.fullmatch(cmd):
            return self._reject(core, int(m["id"]))
        if m := g.SERVICE_REQUEST.fullmatch(cmd):
            return await self._service_request(session, m)
        if m := g.SERVICE_RESPONSE.fullmatch(cmd):
            accepted = self._service_response(session, m)
            # The requester's serviceResponse goes out before this acknowledgement: the
            # core's two sides do not wait for each other, and the requester is the one
            # waiting (its task was woken by the answer; one turn of the loop lets it send).
            await asyncio.sleep(0)
            return accepted
        if m := g.ADDRESS.fullmatch(cmd):
            return self._create_address(core, int(m["user"]), m["pq"])
        if m := g.ADDRESS_SETTINGS.fullmatch(cmd):
            return self._address_settings(core, int(m["user"]), m["pq"], m["json"])
        if m := g.SHORT_LINK_ADDRESS.fullmatch(cmd):
            return self._upgrade_address(core, int(m["user"]), keys=m["pq"] is not None)
        if m := g.ROTATE_ADDRESS_KEYS.fullmatch(cmd):
            return self._upgrade_address(core, int(m["user"]), keys=True)
        if m := g.USER_COMMAND.fullmatch(cmd):
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
            for name in [n for n, token in self._names.items() if token == address.token]:
                del self._names[name]
            return {"type": "userContactLinkDeleted", "user": self._chat.user((core.name, user_id))}
        chat = await self._chat.run(core.name, core.users, cmd)
        if chat is not None:
            return chat
        # A form the parser refuses, or one the simulator does not implement.
        return unknown_command()

    def _start(self, core: _Core, m: re.Match[str]) -> dict[str, Any]:
        # StartChat (Commands.hs, commit ec2e2ce9): when the agent runs, CRChatRunning and
        # nothing else: a running chat keeps its flags (service requests stay as they were).
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
            full_keys=secrets.token_urlsafe(16) if pq is not None else None,
            short_keys=pq is not None,
            has_short=True,
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
        settings = g.address_settings_of(text)
        if settings is None:
            return unknown_command()  # jsonP: not an AddressSettings
        address.settings = settings
        if pq is not None:
            # An upgrade in place: keys on the short link only (see _Address).
            address.has_short = address.short_keys = True
        return {
            "type": "userContactLinkUpdated",
            "user": self._chat.user((core.name, user_id)),
            "contactLink": address.contact_link(),
        }

    def _upgrade_address(self, core: _Core, user_id: int, *, keys: bool) -> dict[str, Any]:
        """APIAddMyAddressShortLink (``/_short_link_address <userId>[ pq_ratchet=on]``) and
        APIRotateAddressRatchetKeys (``/_rotate_address_keys <userId>``): both set the
        address's short link data on the existing connection (``setMyAddressData``), with
        new ratchet keys for ``pq_ratchet=on`` and a rotation; the full link is unchanged.

        The answer, ``userContactLink`` with the address, is the simulator's reading: the
        apps' ``apiAddMyAddressShortLink`` returns the address (``UserContactLink``).
        """
        if user_id not in core.users:
            return _store_error("userNotFound", userId=user_id)
        address = self._address_of(core, user_id)
        if address is None:
            return _store_error("userContactLinkNotFound")
        address.has_short = True
        if keys:
            address.short_keys = True
        return {
            "type": "userContactLink",
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
        if any(g.GROUP_LINK.fullmatch(link) for link in links):
            return unknown_command()  # joining through a group link is not simulated
        tokens = {g.link_token(link) for link in links}
        if None in tokens or len(tokens) != 1:
            return _chat_error("invalidConnReq")
        (token,) = tokens
        address = self._addresses.get(str(token))
        if (
            address is not None
            and not address.has_short
            and any(map(g.SHORT_LINK.fullmatch, links))
        ):
            address = None  # a short link the address does not have
        if address is None:
            # The address's queue is gone: the router refuses the connection.
            return _agent_error(
                {"type": "SMP", "serverAddress": f"smp://{g.HOST}", "smpErr": {"type": "AUTH"}}
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
        """The address a ``/_service_request`` target names, or the command's error.

        A contact address link (full or short); or a contact name ``@name.simplex``,
        resolved (here from the world) to its address's short link. A channel name
        (``#…``) fails, as the plan's target resolution says; a bare name is no link
        (``invalidConnReq``). Whether the request can go is decided by the link it
        takes: the full link carries keys only when the address was made with them,
        the short link when it was made or upgraded with them.
        """
        if target.startswith("#"):
            return _command_error("channel name not supported")
        if target.startswith("@"):
            name = target[1:]
            token = self._names.get(name)
            if token is None or token not in self._addresses:
                return _command_error(f"name not found: {show(name, 80)}")
            address = self._addresses[token]
            if not address.has_short:
                return _command_error(f"name not found: {show(name, 80)}")
            has_keys = address.short_keys
        else:
            token = g.link_token(target)
            if token is None:
                return _chat_error("invalidConnReq")
            found = self._addresses.get(token)
            full = g.FULL_LINK.fullmatch(target) is not None
            if found is None or (not full and not found.has_short):
                # The address's queue is gone: the router refuses the request.
                return _agent_error(
                    {"type": "SMP", "serverAddress": f"smp://{g.HOST}", "smpErr": {"type": "AUTH"}}
                )
            address = found
            has_keys = address.full_keys is not None if full else address.short_keys
        if not has_keys:
            return _service_error("ASENotDRAddress")
        return address

    async def _service_request(self, session: Session, m: re.Match[str]) -> dict[str, Any]:
        """APISendServiceRequest: blocks this command (and so its connection) until the
        response or the timeout (plans/2026-07-22-service-rpc-chat.md, D1)."""
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
        # The core sends the request as its JSON encoding (J.encode of a J.Object: keys
        # sorted): seal that as the agent would, with a fresh AD, and fail as the agent
        # does when it does not fit (CMD LARGE).
        payload = _json.dumps(sorted_tree(request))
        ad = os.urandom(AD_LENGTH)
        try:
            block = _backend.active.seal_request(payload, ad, key, reply_queue=_REPLY_QUEUE)
        except PaddingError:
            return _too_large("service request")
        self.stats.requests += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        responder = address.core
        if not (responder.started and responder.service_requests):
            # The Service RPC plan, item 3: a core with service requests off rejects the
            # request without a reason, and the requester waits out its timeout.
            self.stats.dropped += 1
            log.info("simulator: core %s does not take service requests: dropped", responder.name)
        else:
            self._deliver(responder, address, block, ad, key is not None, future)
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

    def _deliver(
        self,
        responder: _Core,
        address: _Address,
        block: bytes,
        ad: bytes,
        signed: bool,
        future: asyncio.Future[dict[str, Any]],
    ) -> None:
        """The responder's agent opens the request and its core writes ``serviceRequest``.

        With :attr:`bad_signatures` set, a signed request reaches the responder with a
        signature that does not verify (as from a faulty or hostile requester): its
        agent reports ``ERR (A_SERVICE ASEBadSignature)``, which the core writes as a
        ``chatError`` event, and the request is not delivered: the requester only
        times out (plans/2026-07-22-service-rpc-chat.md, "Amendment: signed service
        requests").
        """
        opened_ad = os.urandom(AD_LENGTH) if self.bad_signatures and signed else ad
        try:
            opened = _backend.active.open_request(block, opened_ad, strict=True)
        except BadSignature:
            self.stats.bad_signatures += 1
            self.emit(
                responder.name,
                {
                    "type": "chatError",
                    "chatError": _agent_chat_error(_service_agent_error("ASEBadSignature")),
                },
            )
            return
        data = _json.loads(opened.payload)  # sealed from the sorted encoding: keys in order
        request_id = secrets.token_urlsafe(12)
        pending = _Pending(core=responder, user_id=address.user_id, future=future)
        loop = asyncio.get_running_loop()
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
        self.emit(responder.name, event)

    def _expire(self, request_id: str) -> None:
        if self._pending.pop(request_id, None) is not None:
            self._finish(request_id, "expired")

    def _finish(self, request_id: str, how: str) -> None:
        self._finished[request_id] = how
        while len(self._finished) > 100_000:
            self._finished.popitem(last=False)

    def _service_response(self, session: Session, m: re.Match[str]) -> dict[str, Any]:
        """APISendServiceResponse: the response goes to the waiting requester; the answer
        is :attr:`ack`, and with ``serviceReplyAccepted`` the responder's core reports the
        delivery later as ``serviceReplySent`` with the same ``connectionId``."""
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
            block = _backend.active.seal_response(_json.dumps(sorted_tree(response)))
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
        user = self._chat.user((core.name, user_id))
        if self.ack == "cmdOk":
            return {"type": "cmdOk", "user_": user}
        connection_id = secrets.token_urlsafe(9)
        name = core.name

        async def sent() -> None:
            self.emit(name, {"type": "serviceReplySent", "connectionId": connection_id})

        later(sent)
        return {"type": "serviceReplyAccepted", "user": user, "connectionId": connection_id}

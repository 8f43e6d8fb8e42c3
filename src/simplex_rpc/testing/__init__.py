"""Testing tools: :class:`CoreSimulator`, a loopback stand-in for the SimpleX chat core.

The simulator is a WebSocket server on the local host that speaks the chat
core's API (``{"corrId", "cmd"}`` in, ``{"corrId", "resp"}`` and events
``{"resp"}`` out) and runs it as the core's published code does
(simplex-chat/simplex-chat; each module cites its files and commits):

* **one command at a time per connection** (``apps/simplex-chat/Server.hs``,
  ``clientQSize = 1``): a connection's next command starts when the previous one
  has its response, and the connection reads no further frames while one waits
  to start. A frame that is not a request, or a command the parser refuses, is
  answered at once, and that answer can overtake the command in progress
  (:mod:`._server`);
* **each event to one connection**: every connection of a core reads the core's
  one output queue, so an event goes to whichever connection takes it first; an
  event a connection has taken is lost with it; with no reader, the queue holds
  1,024 events and the core's writers wait;
* **the chat started the usual way or in maintenance mode**
  (``src/Simplex/Chat/Core.hs``): with ``maintenance=False`` each core's chat runs
  from the start with service requests off, and ``/_start`` answers
  ``chatRunning`` and changes nothing; ``maintenance=True`` (``simplex-chat -m``)
  leaves it stopped until ``/_start … service_requests=on``. ``/_stop`` then
  ``/_start`` works on either.

For Service RPC it models what the protocol text and the core's plans say
(``plans/2026-07-22-service-rpc-chat.md``, the badge plans; not published code):

* ``/_service_request`` blocks its connection until the response or its
  ``timeout``; the core of the address gets a ``serviceRequest`` event
  (``requestId``, ``signerKey``, ``requestData`` re-encoded with sorted keys) when
  it runs with ``service_requests=on``, otherwise the request is dropped and the
  requester waits out its ``timeout`` (``A_SERVICE ASETimeout``);
* a target is a contact address link, or a contact name ``@name.simplex`` of the
  world (:meth:`CoreSimulator.register_name`); an address without ratchet keys on
  the link used fails at once (``A_SERVICE ASENotDRAddress``). Upgrading an
  address in place puts keys on its short link only;
* it signs and verifies with this library over a fresh 112-byte AD per request,
  through the real frame and the 11,106-byte padding: a request that does not fit
  fails ``CMD LARGE``; with :attr:`CoreSimulator.bad_signatures` a signed request
  reaches the responder's core as ``ERR (A_SERVICE ASEBadSignature)`` (a
  ``chatError`` event) and is not delivered;
* ``/_service_response`` is answered ``serviceReplyAccepted {user, connectionId}``
  and later reported ``serviceReplySent {connectionId}`` (``ack="cmdOk"``: ``cmdOk``
  as the first cores answered, no event); a response is accepted within
  ``response_window`` seconds (180 by default) of the request.

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
users given (user 1 by default). Error objects follow the shapes of
simplex-chat's ``bots/api/TYPES.md`` (``ChatError``) and of the agent's service
errors (``A_SERVICE {serviceError}``). Commands can be given a processing delay
(:meth:`CoreSimulator.set_command_delay`), so tests and benchmarks can give the
core a realistic cost.

The modules: :mod:`._grammar` (the frames and command lines the core parses),
:mod:`._model` (cores, users, addresses, requests: what each command does),
:mod:`._chat` (the chat world), :mod:`._server` (a WebSocket connection as
Server.hs runs it), :mod:`._native` (the native API), :mod:`._world` (world files).

:class:`ScriptedCore` (:mod:`._scripted`) is the other stand-in: it models nothing and
sends exactly the frames a test scripts, for faults a real core would not make.

It is a model for tests, not the core: it does no networking beyond the
loopback and no encryption; its links only look like SimpleX links.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from typing import Any

from .._wire.redact import RedactingLogger
from ._chat import Party
from ._model import (
    OUTPUT_QUEUE_SIZE,
    Ack,
    CoreModel,
    PartyRef,
    SimulatorStats,
)
from ._native import NativeHandle
from ._scripted import ScriptedCore
from ._server import WS_READ_AHEAD, serve_connection
from ._world import World, WorldError, check_world, read_world

__all__ = [
    "CoreSimulator",
    "ScriptedCore",
    "SimulatorStats",
    "World",
    "WorldError",
    "read_world",
]

log = RedactingLogger(logging.getLogger("simplex_rpc.testing"))
_ws_log = RedactingLogger(logging.getLogger("websockets.server"))
_CORE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class CoreSimulator:
    """A loopback WebSocket server that behaves like the chat core.

    Use as ``async with CoreSimulator() as sim:``, connect with
    ``ChatCore.connect(sim.url_for("alice"))``. ``response_window`` is the
    core's 180-second response window (smaller in tests); ``default_timeout``
    the requester's 30 s; ``maintenance`` (default True) whether each core's CLI
    runs with ``-m`` (chat stopped until ``/_start``) or was started the usual
    way (chat running, service requests off); ``ack`` the answer to
    ``/_service_response``; ``output_size`` the bound of each core's output queue.
    ``stats`` counts what happened. :meth:`native_handle` gives the same simulated
    core to the native transport.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        users: tuple[int, ...] = (1,),
        response_window: float = 180.0,
        default_timeout: int = 30,
        maintenance: bool = True,
        ack: Ack = "serviceReplyAccepted",
        output_size: int = OUTPUT_QUEUE_SIZE,
        command_delay: float = 0.0,
    ) -> None:
        if not users or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in users):
            raise ValueError("users: expected positive user ids")
        if not response_window > 0:
            raise ValueError("response_window: expected a positive number of seconds")
        if ack not in ("serviceReplyAccepted", "cmdOk"):
            raise ValueError("ack: expected 'serviceReplyAccepted' or 'cmdOk'")
        if isinstance(output_size, bool) or not isinstance(output_size, int) or output_size < 1:
            raise ValueError("output_size: expected a positive number of events")
        self._model = CoreModel(
            users=frozenset(users),
            response_window=float(response_window),
            default_timeout=default_timeout,
            maintenance=maintenance,
            ack=ack,
            output_size=output_size,
        )
        self.set_command_delay(command_delay)
        self.host = host
        self.port = port
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[Any, Any] = {}
        # Each connection's serving (serve_connection), cancelled when the simulator closes.
        self._serving: dict[Any, asyncio.Task[None]] = {}
        self._stopping = False

    def __repr__(self) -> str:
        state = f"at {self.url}" if self._server is not None else "stopped"
        return f"<CoreSimulator {state}>"

    def set_command_delay(self, seconds: float, command: str | None = None) -> None:
        """Make the core take ``seconds`` to process each command (before it runs), or
        each command whose first word is ``command`` (``"/_service_response"``).

        The delay holds the connection, as the core's processing would (one command at
        a time per connection); 0 removes it.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise ValueError("command delay: expected a number of seconds, 0 or more")
        model = self._model
        if command is None:
            model.command_delay = float(seconds)
        elif not re.fullmatch(r"/[A-Za-z_]+", command):
            raise ValueError("command delay: name a command by its first word, as /_send")
        elif seconds:
            model.command_delays[command] = float(seconds)
        else:
            model.command_delays.pop(command, None)

    @property
    def stats(self) -> SimulatorStats:
        """Counters of what the simulator did."""
        return self._model.stats

    @property
    def maintenance(self) -> bool:
        """Whether each core's CLI runs with ``-m`` (its chat stopped until ``/_start``)."""
        return self._model.maintenance

    @property
    def ack(self) -> Ack:
        """The answer to ``/_service_response``: ``serviceReplyAccepted`` or ``cmdOk``."""
        return self._model.ack

    @property
    def users(self) -> frozenset[int]:
        """The user ids every simulated core has."""
        return self._model.users

    @property
    def bad_signatures(self) -> bool:
        """When True, a signed request reaches the responder with a signature that does
        not verify (as from a faulty or hostile requester's agent): the responder's core
        writes a ``chatError`` event (``A_SERVICE ASEBadSignature``), the request is not
        delivered, and the requester waits out its ``timeout``."""
        return self._model.bad_signatures

    @bad_signatures.setter
    def bad_signatures(self, value: bool) -> None:
        self._model.bad_signatures = bool(value)

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
            max_queue=WS_READ_AHEAD,
            # The core's server sends no pings (no ping thread over defaultConnectionOptions);
            # a client's pings are answered only while its frames are read (WS_READ_AHEAD).
            ping_interval=None,
            compression=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("core simulator listening at %s", self.url)

    async def close(self) -> None:
        """Close every connection (code 1001, going away) and stop listening.

        The cores stop: each connection's command in progress is cancelled, as when the
        connection closes (Server.hs), so closing does not wait for a held command, nor
        for a close frame that waits unread behind one (:func:`_close_unread`).
        """
        if self._server is not None:
            self._stopping = True
            # websockets sends each open connection its close frame; the cancelled serving
            # lets each handler read what is left, the client's close frame among it.
            self._server.close()
            for serving in list(self._serving.values()):
                serving.cancel()
            try:
                await self._server.wait_closed()
            finally:
                self._server = None
                self._stopping = False
        self._model.close_model()

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
        if not _CORE_NAME.fullmatch(core):
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

    def native_handle(self, core: str = "native") -> NativeHandle:
        """A native-library handle (``chat_send_cmd``/``chat_recv_msg_wait``) on core ``core``.

        Call it from the simulator's event loop; use the handle from other
        threads (as ``ChatCore.native`` does), never from the loop's thread.
        """
        if self._loop is None:
            raise RuntimeError("start the simulator first")
        return NativeHandle(self._model, core, self._loop)

    # -- the world: users, contacts, groups, addresses ------------------------

    def set_profile(self, who: PartyRef, profile: dict[str, Any]) -> None:
        """Set a user's ``Profile`` (``displayName``, ``preferences``, ...) as it is now."""
        self._model.set_profile(who, profile)

    def profile(self, who: PartyRef) -> dict[str, Any]:
        """A copy of a user's current ``Profile``."""
        return self._model.profile(who)

    def connect(self, a: PartyRef, b: PartyRef) -> tuple[int, int]:
        """Make ``a`` and ``b`` contacts; return the contact id at ``a`` and at ``b``.

        ``a`` sends to ``@<first>``, ``b`` to ``@<second>``.
        """
        return self._model.connect(a, b)

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
        one's group id: ``{("alice", 1): 1, ("bob", 1): 3}`` (that user sends to
        ``#<id>``). ``roles`` gives members a role other than ``member``;
        ``preferences`` become the profile's ``groupPreferences``; a business chat
        copies the owner's protocols."""
        return self._model.create_group(
            name, owner, members, business=business, preferences=preferences, roles=roles
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
        """Create ``who``'s contact address, as ``/_address`` does (with ratchet keys on both
        links when ``pq_ratchet``), with ``settings`` (``AddressSettings``); return its
        ``CreatedConnLink``: ``{"connFullLink": ..., "connShortLink": ...}``.

        ``short_link=False`` makes an address of the time before short links (a full
        link alone; ``/_short_link_address`` adds one). ``name`` registers a SimpleX
        name for it (:meth:`register_name`).
        """
        return self._model.create_address(
            who, pq_ratchet=pq_ratchet, settings=settings, short_link=short_link, name=name
        )

    def register_name(self, name: str, who: PartyRef) -> None:
        """Register the SimpleX contact name ``name`` (``alice.simplex``) for ``who``'s
        address: ``/_service_request <userId> @alice.simplex ...`` goes to its short link."""
        self._model.register_name(name, who)

    def group_link(self, who: PartyRef, group_id: int) -> str:
        """A group link of ``who``'s group ``group_id`` (for ``/_connect plan``)."""
        return self._model.group_link(who, group_id)

    def set_link_data(self, link: str, **fields: Any) -> None:
        """Add fields (``serves``, ...) to the link data of a contact address."""
        self._model.set_link_data(link, **fields)

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
        return {"url": self.url, "users": self._model.build_world(spec, self.url_for)}

    async def send_event(self, core: str, event: dict[str, Any]) -> None:
        """Write a raw event (the ``resp`` object) to the output queue of ``core``: the
        one connection (or native handle) that reads it first gets it.

        For tests of what a bot does with events a real core would not send.
        """
        self._model.emit(core, json.loads(json.dumps(event)))

    def waiting_events(self, core: str) -> int:
        """How many events of ``core`` wait for a reader (in its output queue and behind)."""
        return self._model.core(core).output.waiting()

    # -- connections --------------------------------------------------------

    async def _handle_connection(self, ws: Any) -> None:
        path = ws.request.path if ws.request is not None else "/"
        name = path.strip("/") or "default"
        if not _CORE_NAME.fullmatch(name):
            await ws.close(code=1008, reason="unknown core")
            return
        if self._stopping:  # opened as the simulator closes: not served
            await ws.close(code=1001)
            return
        session = self._model.open_session(name)
        self._connections[ws] = session
        serving = asyncio.create_task(serve_connection(self._model, ws, session))
        self._serving[ws] = serving
        try:
            # wait, not await: the serving's cancellation (the simulator closing) is not
            # this handler's.
            await asyncio.wait([serving])
        finally:
            serving.cancel()
            await asyncio.wait([serving])
            del self._serving[ws]
            self._model.close_session(session)
            self._connections.pop(ws, None)
            await _close_unread(ws, 1001 if self._stopping else 1000)
        if not serving.cancelled():
            serving.result()


async def _close_unread(ws: Any, code: int) -> None:
    """Close ``ws`` once it is no longer served, discarding the frames the core never read.

    While a command runs the connection reads nothing (``WS_READ_AHEAD``), so frames wait
    unread, and the client's close frame, or the end of its TCP stream, waits behind them:
    the closing handshake would last websockets' ``close_timeout``. Server.hs closes the
    socket when the connection's threads end, whatever is unread; here the unread frames
    are read and dropped while the close goes on, which a client cannot tell apart.
    """
    from websockets.exceptions import ConnectionClosed

    closing = asyncio.create_task(ws.close(code=code))
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass
    await closing

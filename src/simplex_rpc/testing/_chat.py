"""The simulator's chat model: users, profiles, contacts, groups, messages, link plans.

Shapes follow simplex-chat's published bot API: the commands of
``bots/api/COMMANDS.md``, the events of ``bots/api/EVENTS.md`` and the records
of ``bots/api/TYPES.md``, complete: every record carries every field TYPES.md
requires (``tests/testing/test_simulator_records.py`` checks every frame against the
TypedDicts of the official ``simplex-chat`` 7.0.2 package), with values a core
would plausibly send. Fields that are ``Maybe`` in the core are omitted when
empty, as its JSON encoding (``omitNothingFields``) omits them.

The grammar of each command is the core's parser, ``chatCommandP`` in
``src/Simplex/Chat/Library/Commands.hs``; each pattern below quotes its line.
A command the parser would refuse, and one the simulator does not implement,
is answered as the core answers an unknown command (:data:`UNKNOWN_COMMAND`).

A party is one user of one simulated core: ``(core name, user id)``. Each
party numbers its own contacts, groups, members, requests and chat items, as
each real core does; a message is matched across parties by its shared id.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import re
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from .._wire import strict_json as _json
from ..chat import fits_message

Party = tuple[str, int]
Emit = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Write an event to the named core's output queue (one of its connections will read it)."""

_TS: Final = "2026-01-01T00:00:00Z"
_VERSIONS: Final = {"minVersion": 1, "maxVersion": 16}  # VersionRange (chat protocol)
_ROLES: Final = ("observer", "author", "member", "moderator", "admin", "owner")
"""GroupMemberRole (TYPES.md) in rising order; ``relay`` is a role of channel relays only."""
_N: Final = r"[0-9]{1,18}"  # A.decimal of an Int64 id (ASCII digits only)

# "/_send " *> (APISendMessages <$> sendRefP <*> liveMessageP <*> sendMessageTTLP
#   <*> (" json " *> jsonP <|> " text " *> composedMessagesTextP))
# sendRefP = (A.char '@' $> SRDirect <*> A.decimal)
#   <|> (A.char '#' $> SRGroup <*> A.decimal <*> optional gcScopeP)
# gcScopeP = "(_support" *> (GCSMemberSupport <$> optional (A.char ':' *> A.decimal)) <* A.char ')'
# liveMessageP = " live=" *> onOffP <|> pure False
# sendMessageTTLP = " ttl=" *> ((Just <$> A.decimal) <|> ("default" $> Nothing)) <|> pure Nothing
# and " sign=on|off" after the ttl (COMMANDS.md, APISendMessages: [ sign=on]).
_SEND: Final = re.compile(
    rf"/_send (?:@(?P<contact>{_N})|#(?P<group>{_N})"
    rf"(?P<scope>\(_support(?::(?P<scope_member>{_N}))?\))?)"
    r"(?: live=(?P<live>on|off))?(?: ttl=(?P<ttl>[0-9]{1,9}|default))?(?: sign=(?P<sign>on|off))?"
    r" (?:json (?P<json>.+)|text (?P<text>.+))",
    re.DOTALL,
)
# "/_profile " *> (APIUpdateProfile <$> A.decimal <* A.space <*> jsonP)
_PROFILE: Final = re.compile(rf"/_profile (?P<user>{_N}) (?P<json>.+)", re.DOTALL)
# "/_group_profile #" *> (APIUpdateGroupProfile <$> A.decimal <* A.space <*> jsonP)
_GROUP_PROFILE: Final = re.compile(rf"/_group_profile #(?P<id>{_N}) (?P<json>.+)", re.DOTALL)
# "/_groups" *> (APIListGroups <$> A.decimal <*> optional (" @" *> A.decimal)
#   <*> optional (A.space *> stringP))
# The line has no space after "/_groups" ("/_groups1"); COMMANDS.md documents
# "/_groups <userId>[ @<contactId_>][ <search>]", which a fixed parser reads: both are taken.
# Attoparsec does not go back into an optional that succeeded: an atomic group.
_GROUPS: Final = re.compile(
    rf"/_groups ?(?P<user>{_N})(?>(?: @(?P<contact>{_N}))?)(?: (?P<search>.+))?", re.DOTALL
)
# "/_members #" *> (APIListMembers <$> A.decimal)
_MEMBERS: Final = re.compile(rf"/_members #(?P<id>{_N})")
# "/_contacts " *> (APIListContacts <$> A.decimal)
_CONTACTS: Final = re.compile(rf"/_contacts (?P<user>{_N})")
# "/_group " *> (APINewGroup <$> A.decimal <*> incognitoOnOffP <* A.space <*> jsonP)
# incognitoOnOffP = (A.space *> "incognito=" *> onOffP) <|> pure False
_NEW_GROUP: Final = re.compile(
    rf"/_group (?P<user>{_N})(?: incognito=(?P<incognito>on|off))? (?P<json>.+)", re.DOTALL
)
# "/_add #" *> (APIAddMember <$> A.decimal <* A.space <*> A.decimal <*> memberRole)
# memberRole = A.choice [" owner" $> GROwner, " admin" ..., " moderator", " member", " observer"]
# (COMMANDS.md, APIAddMember: relay|observer|author|member|moderator|admin|owner)
_ADD: Final = re.compile(rf"/_add #(?P<id>{_N}) (?P<contact>{_N}) (?P<role>[a-z]+)")
# "/_join #" *> (APIJoinGroup <$> A.decimal <*> pure MFAll)
_JOIN: Final = re.compile(rf"/_join #(?P<id>{_N})")

CHAT_COMMANDS: Final = (
    _SEND,
    _PROFILE,
    _GROUP_PROFILE,
    _GROUPS,
    _MEMBERS,
    _CONTACTS,
    _NEW_GROUP,
    _ADD,
    _JOIN,
    re.compile("/users"),
)
"""The chat commands this model runs (:meth:`ChatWorld.run`), for the grammar's ``parses``."""

UNKNOWN_COMMAND: Final = "Failed reading: empty"
"""The core's answer to a command its parser refuses: ``parseChatCommand`` runs
``A.choice`` over every alternative, and the last one it tries is ``empty``."""

# FullPreferences (TYPES.md): the core's defaults (defaultChatPrefs), under the
# user's own Preferences.
_DEFAULT_PREFS: Final[dict[str, Any]] = {
    "timedMessages": {"allow": "yes"},
    "fullDelete": {"allow": "no"},
    "reactions": {"allow": "yes"},
    "voice": {"allow": "yes"},
    "files": {"allow": "always"},
    "calls": {"allow": "yes"},
    "sessions": {"allow": "no"},
    "commands": [],
}
# FullGroupPreferences (TYPES.md): the defaults of a group (defaultGroupPrefs),
# under the group profile's groupPreferences.
_DEFAULT_GROUP_PREFS: Final[dict[str, Any]] = {
    "timedMessages": {"enable": "off", "ttl": 86400},
    "directMessages": {"enable": "off"},
    "fullDelete": {"enable": "off"},
    "reactions": {"enable": "on"},
    "voice": {"enable": "on"},
    "files": {"enable": "on"},
    "simplexLinks": {"enable": "on"},
    "reports": {"enable": "on"},
    "history": {"enable": "off"},
    "support": {"enable": "on"},
    "sessions": {"enable": "off"},
    "comments": {"enable": "off"},
    "signMessages": {"enable": "off"},
    "commands": [],
}
_LINK: Final = re.compile(r"(?:https?://|simplex:/)\S")


Step = Callable[[], Coroutine[Any, Any, None]]
_LATER: Final[contextvars.ContextVar[list[Step] | None]] = contextvars.ContextVar(
    "simulator_later", default=None
)


def copy_tree(value: Any) -> Any:
    """A copy of a JSON tree (objects, arrays, scalars), as ``copy.deepcopy`` makes one.

    The records are trees of decoded JSON, never graphs with shared or cyclic
    parts, so the copy needs no memo: this is several times cheaper than
    ``deepcopy``, which the simulator would otherwise pay for every record of
    every event (a real core builds its records natively).
    """
    if isinstance(value, dict):
        return {key: copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_tree(item) for item in value]
    return value


def collect_later() -> tuple[list[Step], contextvars.Token[list[Step] | None]]:
    """Start collecting the steps a command defers (see :func:`later`)."""
    steps: list[Step] = []
    return steps, _LATER.set(steps)


def stop_collecting(token: contextvars.Token[list[Step] | None]) -> None:
    _LATER.reset(token)


def later(step: Step) -> None:
    """Run ``step`` after the current command's response is sent.

    The core answers a command at once and reports what follows (a contact
    connecting, a member joining) as events afterwards; deferring those events
    keeps that order on the command's own connection. Outside a command (the
    in-process API) the step runs as a task of the running loop.
    """
    steps = _LATER.get()
    if steps is not None:
        steps.append(step)
    else:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(step())
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)


_BACKGROUND: Final[set[asyncio.Task[None]]] = set()


def active_user(users: frozenset[int]) -> int:
    """The active user of a core with ``users`` (``/user``): the lowest id.

    The simulator has no APISetActiveUser (``/_user``): the active user stays
    the first one.
    """
    return min(users)


def _cmd_error(chat_error: dict[str, Any]) -> dict[str, Any]:
    return {"type": "chatCmdError", "chatError": chat_error}


def _chat_error(tag: str, **fields: Any) -> dict[str, Any]:
    return _cmd_error({"type": "error", "errorType": {"type": tag, **fields}})


def _store_error(tag: str, **fields: Any) -> dict[str, Any]:
    return _cmd_error({"type": "errorStore", "storeError": {"type": tag, **fields}})


def _command_error(message: str) -> dict[str, Any]:
    return _chat_error("commandError", message=message)


def unknown_command() -> dict[str, Any]:
    """The core's answer to a command its parser refuses (:data:`UNKNOWN_COMMAND`)."""
    return _command_error(UNKNOWN_COMMAND)


def _token() -> str:
    """A random base64url id, as the core's agent connection and member ids are."""
    return secrets.token_urlsafe(12)


def _json_object(text: str) -> dict[str, Any] | None:
    """``jsonP`` of an object: the strict JSON of ``text``, or None (the parse fails)."""
    try:
        value = _json.loads(text)
    except _json.JsonError:
        return None
    return value if isinstance(value, dict) else None


def _is_profile(value: Any) -> bool:
    """Whether ``value`` decodes as a Profile / GroupProfile (displayName and fullName text)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("displayName"), str)
        and isinstance(value.get("fullName", ""), str)
    )


@dataclass(eq=False, slots=True)
class _Contact:
    parties: tuple[Party, Party]
    ids: dict[Party, int]
    conn_ids: dict[Party, int]
    agent_ids: dict[Party, str]
    request_id: dict[Party, int] = field(default_factory=dict)  # contactRequestId, at the owner

    def peer(self, party: Party) -> Party:
        a, b = self.parties
        return b if party == a else a


@dataclass(eq=False, slots=True)
class _Member:
    party: Party
    member_id: str  # the member's id, the same at every party (GroupMember.memberId)
    role: str
    index: int  # GroupMember.indexInGroup
    status: str = "connected"  # "invited" until /_join
    invited_by: Party | None = None


@dataclass(eq=False, slots=True)
class _Group:
    profile: dict[str, Any]
    members: list[_Member]
    ids: dict[Party, int]  # the group's id at each party
    member_ids: dict[tuple[Party, str], int]  # (viewer, memberId) -> groupMemberId
    creator: Party
    business: dict[str, Any] | None = None
    link_token: str | None = None
    owner_keys: dict[str, str] = field(default_factory=dict)  # memberId -> memberKey

    def member(self, party: Party) -> _Member | None:
        return next((m for m in self.members if m.party == party), None)

    def active(self) -> list[_Member]:
        return [m for m in self.members if m.status == "connected"]


@dataclass(eq=False, slots=True)
class _Item:
    party: Party
    item_id: int
    shared_id: str
    text: str
    content: dict[str, Any]
    sender: Party


@dataclass(eq=False, slots=True)
class ContactRequest:
    """A contact request to an address, waiting for ``/_accept`` or ``/_reject``."""

    owner: Party
    requester: Party
    request_id: int
    link_id: int
    agent_id: str = field(default_factory=_token)


@dataclass(slots=True)
class ChatWorld:
    """Profiles, contacts, groups and messages shared by every simulated core."""

    emit: Emit
    stats: Any
    users: frozenset[int] = frozenset({1})
    profiles: dict[Party, dict[str, Any]] = field(default_factory=dict)
    contacts: list[_Contact] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)
    requests: list[ContactRequest] = field(default_factory=list)
    items: dict[tuple[Party, str, int], _Item] = field(default_factory=dict)  # (party, ref, id)
    shared: dict[str, dict[Party, tuple[str, int]]] = field(default_factory=dict)
    link_data: dict[str, dict[str, Any]] = field(default_factory=dict)  # address token -> extra
    _counters: dict[tuple[Party, str], itertools.count[int]] = field(default_factory=dict)
    _party_numbers: dict[Party, int] = field(default_factory=dict)

    # -- identities -----------------------------------------------------------

    def next_id(self, party: Party, kind: str) -> int:
        counter = self._counters.get((party, kind))
        if counter is None:
            counter = self._counters[(party, kind)] = itertools.count(1)
        return next(counter)

    def number(self, party: Party) -> int:
        """A number of ``party``, stable and distinct: its profile's id (``profileId``)."""
        return self._party_numbers.setdefault(party, len(self._party_numbers) + 1)

    def profile(self, party: Party) -> dict[str, Any]:
        """The party's ``Profile`` (TYPES.md): a default display name until set."""
        profile = self.profiles.get(party)
        if profile is None:
            core, user_id = party
            name = f"user{user_id}" if core == "default" else core
            if core != "default" and user_id != 1:
                name = f"{core}{user_id}"
            profile = self.profiles[party] = {"displayName": name, "fullName": ""}
        return profile

    def local_profile(self, party: Party) -> dict[str, Any]:
        """``LocalProfile`` (TYPES.md) of the party's profile."""
        return {
            "profileId": self.number(party),
            **copy_tree(self.profile(party)),
            "localAlias": "",
        }

    def full_preferences(self, party: Party) -> dict[str, Any]:
        """``FullPreferences`` (TYPES.md): the defaults under the profile's ``preferences``."""
        prefs: dict[str, Any] = copy_tree(_DEFAULT_PREFS)
        own = self.profile(party).get("preferences")
        if isinstance(own, dict):
            for key in prefs:
                if isinstance(own.get(key), type(prefs[key])):
                    prefs[key] = copy_tree(own[key])
        return prefs

    def user(self, party: Party) -> dict[str, Any]:
        """``User`` (TYPES.md) with the party's current profile."""
        profile = self.local_profile(party)
        user_id = party[1]
        return {
            "userId": user_id,
            "agentUserId": user_id,
            "userContactId": self.number(party),
            "localDisplayName": profile["displayName"],
            "profile": profile,
            "fullPreferences": self.full_preferences(party),
            "activeUser": user_id == active_user(self.users),
            "activeOrder": user_id,
            "showNtfs": True,
            "sendRcptsContacts": False,
            "sendRcptsSmallGroups": False,
            "autoAcceptMemberContacts": False,
            "userChatRelay": False,
            "clientService": False,
        }

    # -- building the world (the simulator's test API) --------------------------

    def connect(self, a: Party, b: Party) -> tuple[int, int]:
        """Make ``a`` and ``b`` contacts; return the contact id at each."""
        contact = self.new_contact(a, b)
        return contact.ids[a], contact.ids[b]

    def new_contact(self, a: Party, b: Party) -> _Contact:
        contact = _Contact(
            parties=(a, b),
            ids={a: self.next_id(a, "contact"), b: self.next_id(b, "contact")},
            conn_ids={a: self.next_id(a, "conn"), b: self.next_id(b, "conn")},
            agent_ids={a: _token(), b: _token()},
        )
        self.contacts.append(contact)
        return contact

    def contact_between(self, a: Party, b: Party) -> _Contact | None:
        return next((c for c in self.contacts if set(c.parties) == {a, b}), None)

    def group(
        self,
        name: str,
        owner: Party,
        members: list[Party],
        *,
        business: bool,
        preferences: dict[str, Any] | None,
        roles: dict[Party, str] | None = None,
    ) -> dict[Party, int]:
        """A group of ``owner`` (role owner) and ``members`` (each joined, role ``member``
        unless ``roles`` says otherwise); return the group's id at each."""
        everyone = [owner, *members]
        if len(set(everyone)) != len(everyone):
            raise ValueError("group: each party joins once")
        profile: dict[str, Any] = {"displayName": name, "fullName": ""}
        if preferences is not None:
            profile["groupPreferences"] = copy_tree(preferences)
        roles = roles or {}
        group = self._new_group(profile, owner)
        for party in members:
            role = roles.get(party, "member")
            if role not in _ROLES:
                raise ValueError(f"group: unknown role {role!r}")
            self._add_member(group, party, role, invited_by=owner, status="connected")
        if business:
            group.business = {
                "chatType": "business",
                "businessId": group.members[0].member_id,
                "customerId": group.members[-1].member_id,
            }
            owner_prefs = self.profile(owner).get("preferences")
            if isinstance(owner_prefs, dict) and "protocols" in owner_prefs:
                # The protocol text: a business profile's protocols are copied
                # into the chat's groupPreferences, as commands are.
                prefs = group.profile.setdefault("groupPreferences", {})
                prefs["protocols"] = copy_tree(owner_prefs["protocols"])
        return dict(group.ids)

    def _new_group(self, profile: dict[str, Any], owner: Party) -> _Group:
        group = _Group(profile=profile, members=[], ids={}, member_ids={}, creator=owner)
        self._add_member(group, owner, "owner", invited_by=None, status="connected")
        self.groups.append(group)
        return group

    def _add_member(
        self, group: _Group, party: Party, role: str, *, invited_by: Party | None, status: str
    ) -> _Member:
        member = _Member(
            party=party,
            member_id=_token(),
            role=role,
            index=len(group.members),
            status=status,
            invited_by=invited_by,
        )
        group.members.append(member)
        group.ids[party] = self.next_id(party, "group")
        if role == "owner":
            group.owner_keys[member.member_id] = secrets.token_urlsafe(32)
        return member

    def emit_later(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Send ``events`` (core name, event) after the current command's response."""

        async def step() -> None:
            for core, event in events:
                await self.emit(core, event)

        later(step)

    def group_link(self, party: Party, group_id: int) -> str:
        group = self._group_of(party, group_id)
        if group is None:
            raise ValueError("group_link: no such group")
        if group.link_token is None:
            group.link_token = secrets.token_urlsafe(18)
        return f"simplex:/g#{group.link_token}?h=simulator.local"

    # -- records --------------------------------------------------------------

    def _contact_of(self, party: Party, contact_id: int) -> _Contact | None:
        return next(
            (c for c in self.contacts if c.ids.get(party) == contact_id and party in c.parties),
            None,
        )

    def _group_of(self, party: Party, group_id: int) -> _Group | None:
        return next((g for g in self.groups if g.ids.get(party) == group_id), None)

    def _member_ref(self, viewer: Party, group: _Group, member: _Member) -> int:
        """The ``groupMemberId`` of ``member`` at ``viewer`` (numbered when first seen)."""
        key = (viewer, member.member_id)
        if key not in group.member_ids:
            group.member_ids[key] = self.next_id(viewer, "member")
        return group.member_ids[key]

    def connection_record(self, viewer: Party, contact: _Contact) -> dict[str, Any]:
        """``Connection`` (TYPES.md) of ``viewer``'s side of a contact: ready."""
        record: dict[str, Any] = {
            "connId": contact.conn_ids[viewer],
            "agentConnId": contact.agent_ids[viewer],
            "connChatVersion": _VERSIONS["maxVersion"],
            "peerChatVRange": dict(_VERSIONS),
            "connLevel": 0,
            "viaGroupLink": False,
            "connType": "contact",
            "connStatus": {"type": "ready"},
            "contactConnInitiated": contact.parties[0] == viewer,
            "localAlias": "",
            "entityId": contact.ids[viewer],
            "pqSupport": False,
            "pqEncryption": False,
            "authErrCounter": 0,
            "quotaErrCounter": 0,
            "createdAt": _TS,
        }
        return record

    def merged_preferences(self, viewer: Party, peer: Party) -> dict[str, Any]:
        """``ContactUserPreferences`` (TYPES.md): each feature as the user and the peer set it."""
        mine, theirs = self.full_preferences(viewer), self.full_preferences(peer)
        merged: dict[str, Any] = {}
        for key in (
            "timedMessages",
            "fullDelete",
            "reactions",
            "voice",
            "files",
            "calls",
            "sessions",
        ):
            user_allow, peer_allow = mine[key]["allow"], theirs[key]["allow"]
            # prefEnabled: a feature is on for a side when the other side allows it
            # (always or yes) and the side itself does not forbid it.
            merged[key] = {
                "enabled": {
                    "forUser": user_allow != "no" and peer_allow != "no",
                    "forContact": peer_allow != "no" and user_allow != "no",
                },
                "userPreference": {"type": "user", "preference": {"allow": user_allow}},
                "contactPreference": {"allow": peer_allow},
            }
        return merged

    def contact_record(self, viewer: Party, contact: _Contact) -> dict[str, Any]:
        """``Contact`` (TYPES.md) of ``contact`` as ``viewer`` sees it."""
        peer = contact.peer(viewer)
        profile = self.local_profile(peer)
        record: dict[str, Any] = {
            "contactId": contact.ids[viewer],
            "localDisplayName": profile["displayName"],
            "profile": profile,
            "activeConn": self.connection_record(viewer, contact),
            "contactUsed": True,
            "contactStatus": "active",
            "chatSettings": {"enableNtfs": "all", "favorite": False},
            "userPreferences": {},
            "mergedPreferences": self.merged_preferences(viewer, peer),
            "createdAt": _TS,
            "updatedAt": _TS,
            "chatTs": _TS,
            "contactGrpInvSent": False,
            "chatTags": [],
            "chatDeleted": False,
        }
        if viewer in contact.request_id:
            record["contactRequestId"] = contact.request_id[viewer]
        return record

    def member_record(self, viewer: Party, group: _Group, member: _Member) -> dict[str, Any]:
        """``GroupMember`` (TYPES.md) of ``member`` as ``viewer`` sees it."""
        profile = self.local_profile(member.party)
        # The core removes preferences from member profiles in groups (the protocol text).
        profile.pop("preferences", None)
        me = member.party == viewer
        viewer_member = group.member(viewer)
        # GroupMemberCategory: the user, its host (who invited it), its invitees,
        # and members that joined before ("pre") or after ("post") it.
        if me:
            category = "user"
        elif viewer_member is not None and viewer_member.invited_by == member.party:
            category = "host"
        elif member.invited_by == viewer:
            category = "invitee"
        elif viewer_member is not None and member.index > viewer_member.index:
            category = "post"
        else:
            category = "pre"
        status = member.status
        if me and member.party == group.creator and status == "connected":
            status = "creator"
        invited_by: dict[str, Any]
        if member.invited_by is None:
            invited_by = {"type": "unknown"}
        elif member.invited_by == viewer:
            invited_by = {"type": "user"}
        else:
            via = self.contact_between(viewer, member.invited_by)
            invited_by = (
                {"type": "contact", "byContactId": via.ids[viewer]}
                if via is not None
                else {"type": "unknown"}
            )
        record: dict[str, Any] = {
            "groupMemberId": self._member_ref(viewer, group, member),
            "groupId": group.ids[viewer],
            "indexInGroup": member.index,
            "memberId": member.member_id,
            "memberRole": member.role,
            "memberCategory": category,
            "memberStatus": status,
            "memberSettings": {"showMessages": True},
            "blockedByAdmin": False,
            "invitedBy": invited_by,
            "localDisplayName": profile["displayName"],
            "memberProfile": profile,
            "memberContactProfileId": self.number(member.party),
            "memberChatVRange": dict(_VERSIONS),
            "createdAt": _TS,
            "updatedAt": _TS,
        }
        if member.invited_by is not None and member.invited_by != viewer:
            inviter = group.member(member.invited_by)
            if inviter is not None:
                record["invitedByGroupMemberId"] = self._member_ref(viewer, group, inviter)
        if not me:
            contact = self.contact_between(viewer, member.party)
            if contact is not None:
                record["memberContactId"] = contact.ids[viewer]
        return record

    def full_group_preferences(self, group: _Group) -> dict[str, Any]:
        """``FullGroupPreferences`` (TYPES.md): the defaults under the group's preferences."""
        prefs: dict[str, Any] = copy_tree(_DEFAULT_GROUP_PREFS)
        own = group.profile.get("groupPreferences")
        if isinstance(own, dict):
            for key in prefs:
                if isinstance(own.get(key), type(prefs[key])):
                    prefs[key] = copy_tree(own[key])
        return prefs

    def group_record(self, viewer: Party, group: _Group) -> dict[str, Any]:
        """``GroupInfo`` (TYPES.md) of ``group`` as ``viewer`` sees it."""
        me = group.member(viewer)
        assert me is not None
        record: dict[str, Any] = {
            "groupId": group.ids[viewer],
            "useRelays": False,
            "localDisplayName": group.profile["displayName"],
            "groupProfile": copy_tree(group.profile),
            "localAlias": "",
            "fullGroupPreferences": self.full_group_preferences(group),
            "membership": self.member_record(viewer, group, me),
            "chatSettings": {"enableNtfs": "all", "favorite": False},
            "createdAt": _TS,
            "updatedAt": _TS,
            "chatTs": _TS,
            "chatTags": [],
            "groupSummary": {"currentMembers": len(group.active())},
            "membersRequireAttention": 0,
        }
        if group.business is not None:
            record["businessChat"] = dict(group.business)
        return record

    def request_record(self, request: ContactRequest) -> dict[str, Any]:
        """``UserContactRequest`` (TYPES.md) of ``request`` at the address owner."""
        profile = self.local_profile(request.requester)
        return {
            "contactRequestId": request.request_id,
            "agentInvitationId": request.agent_id,
            "userContactLinkId_": request.link_id,
            "cReqChatVRange": dict(_VERSIONS),
            "localDisplayName": profile["displayName"],
            "profileId": profile["profileId"],
            "profile": profile,
            "createdAt": _TS,
            "updatedAt": _TS,
            "pqSupport": False,
        }

    def pending_connection(self, party: Party) -> dict[str, Any]:
        """``PendingContactConnection`` (TYPES.md) of a request sent to a contact address."""
        return {
            "pccConnId": self.next_id(party, "conn"),
            "pccAgentConnId": _token(),
            "pccConnStatus": {"type": "joined"},
            "viaContactUri": True,
            "localAlias": "",
            "createdAt": _TS,
            "updatedAt": _TS,
        }

    # -- commands -------------------------------------------------------------

    async def run(self, core: str, users: frozenset[int], cmd: str) -> dict[str, Any] | None:
        """Run a chat command of ``core``; None when ``cmd`` is not one of them."""
        if cmd == "/users":
            # "/users" $> ListUsers: usersList with [UserInfo] (COMMANDS.md, TYPES.md).
            return {
                "type": "usersList",
                "users": [{"user": self.user((core, u)), "unreadCount": 0} for u in sorted(users)],
            }
        active = (core, active_user(users))
        if m := _SEND.fullmatch(cmd):
            # APISendMessages names no user: the core sends as its active user, in a
            # chat of that user only (COMMANDS.md).
            return await self._send(active, m)
        if m := _PROFILE.fullmatch(cmd):
            return self._update_profile(core, users, int(m["user"]), m["json"])
        if m := _GROUP_PROFILE.fullmatch(cmd):
            return await self._update_group_profile(active, int(m["id"]), m["json"])
        if m := _MEMBERS.fullmatch(cmd):
            return self._members(active, int(m["id"]))
        if m := _GROUPS.fullmatch(cmd):
            return self._groups(core, users, m)
        if m := _CONTACTS.fullmatch(cmd):
            party = (core, int(m["user"]))
            if party[1] not in users:
                return _store_error("userNotFound", userId=party[1])
            contacts = [self.contact_record(party, c) for c in self.contacts if party in c.parties]
            return {"type": "contactsList", "user": self.user(party), "contacts": contacts}
        if m := _NEW_GROUP.fullmatch(cmd):
            return self._new_group_command(core, users, m)
        if m := _ADD.fullmatch(cmd):
            return await self._add(active, int(m["id"]), int(m["contact"]), m["role"])
        if m := _JOIN.fullmatch(cmd):
            return await self._join(active, int(m["id"]))
        return None

    def _members(self, party: Party, group_id: int) -> dict[str, Any]:
        # APIListMembers: groupMembers with group: Group {groupInfo, members}. It
        # names no user either: a group of the active user only.
        group = self._group_of(party, group_id)
        if group is None:
            return _store_error("groupNotFound", groupId=group_id)
        members = [self.member_record(party, group, m) for m in group.members if m.party != party]
        return {
            "type": "groupMembers",
            "user": self.user(party),
            "group": {"groupInfo": self.group_record(party, group), "members": members},
        }

    def _groups(self, core: str, users: frozenset[int], m: re.Match[str]) -> dict[str, Any]:
        party = (core, int(m["user"]))
        if party[1] not in users:
            return _store_error("userNotFound", userId=party[1])
        found = [g for g in self.groups if party in g.ids]
        if m["contact"] is not None:
            contact = self._contact_of(party, int(m["contact"]))
            if contact is None:
                return _store_error("contactNotFound", contactId=int(m["contact"]))
            peer = contact.peer(party)
            found = [g for g in found if g.member(peer) is not None]
        if m["search"] is not None:
            # The core matches the search in the group's name, ignoring case.
            needle = m["search"].casefold()
            found = [
                g
                for g in found
                if needle in g.profile["displayName"].casefold()
                or needle in str(g.profile.get("fullName", "")).casefold()
            ]
        groups = [self.group_record(party, g) for g in found]
        return {"type": "groupsList", "user": self.user(party), "groups": groups}

    def _new_group_command(
        self, core: str, users: frozenset[int], m: re.Match[str]
    ) -> dict[str, Any]:
        # APINewGroup: groupCreated with the new GroupInfo (COMMANDS.md).
        profile = _json_object(m["json"])
        if profile is None or not _is_profile(profile):
            return unknown_command()
        party = (core, int(m["user"]))
        if party[1] not in users:
            return _store_error("userNotFound", userId=party[1])
        if m["incognito"] == "on":
            return _command_error("incognito: the simulator has no incognito profiles")
        group = self._new_group({"fullName": "", **profile}, party)
        return {
            "type": "groupCreated",
            "user": self.user(party),
            "groupInfo": self.group_record(party, group),
        }

    async def _add(self, party: Party, group_id: int, contact_id: int, role: str) -> dict[str, Any]:
        # APIAddMember "Requires bot to have Admin role" (COMMANDS.md): sentGroupInvitation;
        # the invitee's core reports receivedGroupInvitation (EVENTS.md).
        if role not in _ROLES:
            return unknown_command()
        group = self._group_of(party, group_id)
        if group is None:
            return _store_error("groupNotFound", groupId=group_id)
        # The core loads the group and the contact first, then checks the roles.
        contact = self._contact_of(party, contact_id)
        if contact is None:
            return _store_error("contactNotFound", contactId=contact_id)
        me = group.member(party)
        assert me is not None
        if _ROLES.index(me.role) < _ROLES.index("admin") or _ROLES.index(role) > _ROLES.index(
            me.role
        ):
            required = "admin" if _ROLES.index(role) <= _ROLES.index("admin") else role
            return _chat_error(
                "groupUserRole", groupInfo=self.group_record(party, group), requiredRole=required
            )
        invitee = contact.peer(party)
        if group.member(invitee) is not None:
            return _chat_error(
                "groupDuplicateMember", contactName=self.profile(invitee)["displayName"]
            )
        member = self._add_member(group, invitee, role, invited_by=party, status="invited")
        host_contact = contact
        events: list[tuple[str, dict[str, Any]]] = []
        events.append(
            (
                invitee[0],
                {
                    "type": "receivedGroupInvitation",
                    "user": self.user(invitee),
                    "groupInfo": self.group_record(invitee, group),
                    "contact": self.contact_record(invitee, host_contact),
                    "fromMemberRole": me.role,
                    "memberRole": role,
                },
            )
        )
        self.emit_later(events)
        return {
            "type": "sentGroupInvitation",
            "user": self.user(party),
            "groupInfo": self.group_record(party, group),
            "contact": self.contact_record(party, contact),
            "member": self.member_record(party, group, member),
        }

    async def _join(self, party: Party, group_id: int) -> dict[str, Any]:
        # APIJoinGroup: userAcceptedGroupSent; then userJoinedGroup here,
        # joinedGroupMember at the host, and at each other member
        # joinedGroupMemberConnecting and connectedToGroupMember (EVENTS.md).
        group = self._group_of(party, group_id)
        if group is None:
            return _store_error("groupNotFound", groupId=group_id)
        member = group.member(party)
        assert member is not None
        if member.status != "invited":
            return _store_error("groupAlreadyJoined")
        member.status = "connected"
        host_party = member.invited_by
        host = group.member(host_party) if host_party is not None else None
        resp: dict[str, Any] = {
            "type": "userAcceptedGroupSent",
            "user": self.user(party),
            "groupInfo": self.group_record(party, group),
        }
        via = self.contact_between(party, host_party) if host_party is not None else None
        if via is not None:
            resp["hostContact"] = self.contact_record(party, via)
        events: list[tuple[str, dict[str, Any]]] = []
        if host is not None:
            events.append(
                (
                    party[0],
                    {
                        "type": "userJoinedGroup",
                        "user": self.user(party),
                        "groupInfo": self.group_record(party, group),
                        "hostMember": self.member_record(party, group, host),
                    },
                )
            )
            events.append(
                (
                    host.party[0],
                    {
                        "type": "joinedGroupMember",
                        "user": self.user(host.party),
                        "groupInfo": self.group_record(host.party, group),
                        "member": self.member_record(host.party, group, member),
                    },
                )
            )
        for other in group.active():
            if other.party in (party, host_party):
                continue
            if host is not None:
                events.append(
                    (
                        other.party[0],
                        {
                            "type": "joinedGroupMemberConnecting",
                            "user": self.user(other.party),
                            "groupInfo": self.group_record(other.party, group),
                            "hostMember": self.member_record(other.party, group, host),
                            "member": self.member_record(other.party, group, member),
                        },
                    )
                )
            events.append(
                (
                    other.party[0],
                    {
                        "type": "connectedToGroupMember",
                        "user": self.user(other.party),
                        "groupInfo": self.group_record(other.party, group),
                        "member": self.member_record(other.party, group, member),
                    },
                )
            )
            events.append(
                (
                    party[0],
                    {
                        "type": "connectedToGroupMember",
                        "user": self.user(party),
                        "groupInfo": self.group_record(party, group),
                        "member": self.member_record(party, group, other),
                    },
                )
            )
        self.emit_later(events)
        return resp

    async def _send(self, party: Party, m: re.Match[str]) -> dict[str, Any]:
        ref = "@" if m["contact"] is not None else "#"
        chat_id = int(m["contact"] if ref == "@" else m["group"])
        if m["json"] is not None:
            try:
                composed = _json.loads(m["json"])
            except _json.JsonError:
                return unknown_command()
            if not isinstance(composed, list) or not composed:
                return unknown_command()
        else:
            # composedMessagesTextP: one text message of the rest of the line.
            composed = [{"msgContent": {"type": "text", "text": m["text"]}}]
        chat: Any
        if ref == "@":
            chat = self._contact_of(party, chat_id)
            if chat is None:
                return _store_error("contactNotFound", contactId=chat_id)
        else:
            chat = self._group_of(party, chat_id)
            if chat is None:
                return _store_error("groupNotFound", groupId=chat_id)
            me = chat.member(party)
            if me is None or me.status != "connected":
                return _chat_error("groupNotJoined", groupInfo=self.group_record(party, chat))
        scope: _Member | None = None
        if m["scope"] is not None:
            found = self._support_scope(party, chat, m["scope_member"])
            if isinstance(found, dict):
                return found
            scope = found
        prepared = []
        for message in composed:
            checked = self._check_composed(party, ref, chat, message)
            if isinstance(checked, dict) and checked.get("type") == "chatCmdError":
                return checked
            prepared.append(checked)
        ttl = None if m["ttl"] in (None, "default") else int(m["ttl"])
        sent = []
        self.stats.messages += len(prepared)
        for content, quoted, mentions in prepared:
            sent.append(
                await self.deliver(
                    party,
                    ref,
                    chat,
                    content,
                    quoted,
                    mentions,
                    ttl=ttl,
                    live=m["live"] == "on",
                    scope=scope,
                )
            )
        return {"type": "newChatItems", "user": self.user(party), "chatItems": sent}

    def _support_scope(self, party: Party, group: _Group, member_ref: str | None) -> Any:
        """The member whose support chat ``#g(_support[:id])`` names, or an error.

        A member writes to its own support chat (no id); a moderator or above to
        the support chat of the member it names.
        """
        me = group.member(party)
        assert me is not None
        if member_ref is None:
            return me
        if _ROLES.index(me.role) < _ROLES.index("moderator"):
            return _chat_error(
                "groupUserRole", groupInfo=self.group_record(party, group), requiredRole="moderator"
            )
        wanted = int(member_ref)
        member = next(
            (x for x in group.members if group.member_ids.get((party, x.member_id)) == wanted), None
        )
        if member is None:
            return _store_error("groupMemberNotFound", groupMemberId=wanted)
        return member

    def _check_composed(self, party: Party, ref: str, chat: Any, message: object) -> Any:
        # ComposedMessage (TYPES.md): msgContent, quotedItemId?, mentions {name: groupMemberId}.
        # A message that does not decode as one fails jsonP: an unknown command.
        if not isinstance(message, dict):
            return unknown_command()
        content = message.get("msgContent")
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            return unknown_command()
        text = content.get("text", "")
        if not isinstance(text, str):
            return unknown_command()
        if not fits_message(text):
            # simplex-chat refuses a message whose JSON exceeds maxEncodedMsgLength.
            return _chat_error("exception", message="largeMsg")
        quoted: _Item | None = None
        quoted_id = message.get("quotedItemId")
        if quoted_id is not None:
            if isinstance(quoted_id, bool) or not isinstance(quoted_id, int):
                return unknown_command()
            quoted = self.items.get((party, self._chat_key(party, ref, chat), quoted_id))
            if quoted is None:
                return _store_error("chatItemNotFound", itemId=quoted_id)
        mentions = message.get("mentions", {})
        if not isinstance(mentions, dict):
            return unknown_command()
        resolved: dict[str, _Member] = {}
        for name, member_ref in mentions.items():
            if ref != "#":
                return _command_error("mentions: only in groups")
            member = next(
                (
                    mem
                    for mem in chat.members
                    if chat.member_ids.get((party, mem.member_id)) == member_ref
                ),
                None,
            )
            if member is None or isinstance(member_ref, bool):
                return _chat_error("groupMemberNotFound")
            resolved[name] = member
        return content, quoted, resolved

    def _chat_key(self, party: Party, ref: str, chat: Any) -> str:
        chat_id = chat.ids[party]
        return f"{ref}{chat_id}"

    async def deliver(
        self,
        sender: Party,
        ref: str,
        chat: Any,
        content: dict[str, Any],
        quoted: _Item | None = None,
        mentions: dict[str, _Member] | None = None,
        *,
        ttl: int | None = None,
        live: bool = False,
        scope: _Member | None = None,
        echo: bool = False,
    ) -> dict[str, Any]:
        """Deliver one message of ``sender``: a ``newChatItems`` event to each recipient;
        return the sender's ``AChatItem`` (also sent to the sender as an event if ``echo``)."""
        mentions = mentions or {}
        shared_id = secrets.token_urlsafe(12)
        text = content.get("text", "")
        if ref == "@":
            recipients = [chat.peer(sender)]
        elif scope is not None:
            # A member support chat: the member and the group's moderators and above.
            recipients = [
                m.party
                for m in chat.active()
                if m.party != sender
                and (m is scope or _ROLES.index(m.role) >= _ROLES.index("moderator"))
            ]
        else:
            recipients = [m.party for m in chat.active() if m.party != sender]
        own: dict[str, Any] = {}
        for viewer in [sender, *recipients]:
            key = self._chat_key(viewer, ref, chat)
            item_id = self.next_id(viewer, "item")
            self.items[(viewer, key, item_id)] = _Item(
                party=viewer,
                item_id=item_id,
                shared_id=shared_id,
                text=text,
                content=copy_tree(content),
                sender=sender,
            )
            self.shared.setdefault(shared_id, {})[viewer] = (key, item_id)
            chat_info = self._chat_info(viewer, ref, chat)
            if scope is not None:
                scope_info: dict[str, Any] = {"type": "memberSupport"}
                if scope.party != viewer:
                    scope_info["groupMember_"] = self.member_record(viewer, chat, scope)
                chat_info["groupChatScope"] = scope_info
            a_chat_item = {
                "chatInfo": chat_info,
                "chatItem": self._chat_item(
                    viewer,
                    ref,
                    chat,
                    item_id,
                    shared_id,
                    content,
                    sender,
                    quoted,
                    mentions,
                    ttl,
                    live,
                ),
            }
            if viewer == sender:
                own = a_chat_item
            if viewer != sender or echo:
                event = {
                    "type": "newChatItems",
                    "user": self.user(viewer),
                    "chatItems": [a_chat_item],
                }
                await self.emit(viewer[0], event)
        return own

    def _chat_info(self, viewer: Party, ref: str, chat: Any) -> dict[str, Any]:
        if ref == "@":
            return {"type": "direct", "contact": self.contact_record(viewer, chat)}
        return {"type": "group", "groupInfo": self.group_record(viewer, chat)}

    def _direction(self, viewer: Party, ref: str, chat: Any, sender: Party) -> dict[str, Any]:
        """``CIDirection`` (TYPES.md) of an item of ``sender`` as ``viewer`` sees it."""
        mine = viewer == sender
        if ref == "@":
            return {"type": "directSnd" if mine else "directRcv"}
        if mine:
            return {"type": "groupSnd"}
        return {
            "type": "groupRcv",
            "groupMember": self.member_record(viewer, chat, chat.member(sender)),
        }

    def _chat_item(
        self,
        viewer: Party,
        ref: str,
        chat: Any,
        item_id: int,
        shared_id: str,
        content: dict[str, Any],
        sender: Party,
        quoted: _Item | None,
        mentions: dict[str, _Member],
        ttl: int | None = None,
        live: bool = False,
    ) -> dict[str, Any]:
        mine = viewer == sender
        ci_mentions = {}
        user_mention = False
        for name, member in mentions.items():
            # CIMention: memberId, memberRef (CIMentionMember) (TYPES.md).
            ci_mentions[name] = {
                "memberId": member.member_id,
                "memberRef": {
                    "groupMemberId": self._member_ref(viewer, chat, member),
                    "displayName": self.profile(member.party)["displayName"],
                    "memberRole": member.role,
                },
            }
            user_mention = user_mention or member.party == viewer
        text = content.get("text", "")
        meta: dict[str, Any] = {
            "itemId": item_id,
            "itemTs": _TS,
            "itemText": text,
            "itemStatus": {"type": "sndNew"} if mine else {"type": "rcvNew"},
            "itemSharedMsgId": shared_id,
            "itemEdited": False,
            "userMention": user_mention,
            "hasLink": isinstance(text, str) and _LINK.search(text) is not None,
            "deletable": True,
            "editable": mine,
            "showGroupAsSender": False,
            "createdAt": _TS,
            "updatedAt": _TS,
        }
        if ttl is not None:
            meta["itemTimed"] = {"ttl": ttl, "deleteAt": _TS}
        if live:
            meta["itemLive"] = True
        item: dict[str, Any] = {
            "chatDir": self._direction(viewer, ref, chat, sender),
            "meta": meta,
            "content": {
                "type": "sndMsgContent" if mine else "rcvMsgContent",
                "msgContent": copy_tree(content),
            },
            "mentions": ci_mentions,
            "reactions": [],
        }
        if quoted is not None:
            local = self.shared.get(quoted.shared_id, {}).get(viewer)
            # CIQuote (TYPES.md): chatDir and itemId as the viewer has the quoted item.
            quote: dict[str, Any] = {
                "chatDir": self._direction(viewer, ref, chat, quoted.sender),
                "sharedMsgId": quoted.shared_id,
                "sentAt": _TS,
                "content": {"type": "text", "text": quoted.text[:256]},
            }
            if local is not None:
                quote["itemId"] = local[1]
            item["quotedItem"] = quote
        return item

    def _update_profile(
        self, core: str, users: frozenset[int], user_id: int, text: str
    ) -> dict[str, Any]:
        profile = _json_object(text)
        if profile is None or not _is_profile(profile):
            return unknown_command()
        if user_id not in users:
            return _store_error("userNotFound", userId=user_id)
        party = (core, user_id)
        before = copy_tree(self.profile(party))
        # APIUpdateProfile replaces the whole profile (local fields are not part of it).
        new = {k: v for k, v in profile.items() if k not in ("profileId", "localAlias")}
        new.setdefault("fullName", "")
        if new == before:
            return {"type": "userProfileNoChange", "user": self.user(party)}
        self.profiles[party] = new
        changed = [self.contact_record(party, c) for c in self.contacts if party in c.parties]
        return {
            "type": "userProfileUpdated",
            "user": self.user(party),
            "fromProfile": before,
            "toProfile": copy_tree(new),
            "updateSummary": {
                "updateSuccesses": len(changed),
                "updateFailures": 0,
                "changedContacts": changed,
            },
        }

    async def _update_group_profile(self, party: Party, group_id: int, text: str) -> dict[str, Any]:
        profile = _json_object(text)
        if profile is None or not _is_profile(profile):
            return unknown_command()
        group = self._group_of(party, group_id)
        if group is None:
            return _store_error("groupNotFound", groupId=group_id)
        member = group.member(party)
        if member is None or member.role != "owner":
            return _chat_error(
                "groupUserRole", groupInfo=self.group_record(party, group), requiredRole="owner"
            )
        before = {p: self.group_record(p, group) for p in group.ids}
        group.profile = {"fullName": "", **profile}
        for other in group.active():
            if other.party != party:
                await self.emit(
                    other.party[0],
                    {
                        "type": "groupUpdated",
                        "user": self.user(other.party),
                        "fromGroup": before[other.party],
                        "toGroup": self.group_record(other.party, group),
                        "member_": self.member_record(other.party, group, member),
                    },
                )
        return {
            "type": "groupUpdated",
            "user": self.user(party),
            "fromGroup": before[party],
            "toGroup": self.group_record(party, group),
            "msgSigned": False,
        }

    def plan_group_link(self, party: Party, token: str) -> dict[str, Any] | None:
        """The ``GroupLinkPlan`` for a group link token, or None for an unknown link."""
        group = next((g for g in self.groups if g.link_token == token), None)
        if group is None:
            return None
        if party in group.ids:
            return {
                "type": "known",
                "groupInfo": self.group_record(party, group),
                "groupUpdated": False,
                "linkOwners": [
                    {"memberId": member_id, "memberKey": key}
                    for member_id, key in group.owner_keys.items()
                ],
            }
        return {"type": "ok", "groupSLinkData_": {"groupProfile": copy_tree(group.profile)}}

"""The simulator's chat model: users' profiles, contacts, groups, text messages, link plans.

Shapes follow simplex-chat's published bot API: commands from
``bots/api/COMMANDS.md`` (APISendMessages ``/_send``, APIUpdateProfile
``/_profile``, APIUpdateGroupProfile ``/_group_profile``, APIListGroups
``/_groups``, ListUsers ``/users``, APIConnectPlan ``/_connect plan``), the
``newChatItems`` event from ``bots/api/EVENTS.md``, and the records
(``AChatItem``, ``ChatInfo``, ``ChatItem``, ``CIDirection``, ``CIMeta``,
``CIQuote``, ``CIMention``, ``ComposedMessage``, ``Contact``,
``GroupInfo``, ``GroupMember``, ``GroupProfile``, ``LocalProfile``,
``ConnectionPlan``, ``ContactShortLinkData``, ``GroupShortLinkData``) from
``bots/api/TYPES.md``, reduced to the fields a bot reads.

A party is one user of one simulated core: ``(core name, user id)``. Each
party numbers its own contacts, groups, members and chat items, as each real
core does; a message is matched across parties by its shared message id.
"""

from __future__ import annotations

import copy
import itertools
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .._wire import strict_json as _json
from ..chat import fits_message

Party = tuple[str, int]
Emit = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Send an event to every connection of the named core."""

_TS: Final = "2026-01-01T00:00:00Z"
_SEND: Final = re.compile(
    r"/_send (?P<ref>[@#])(?P<id>\d{1,18})(?: live=on)?(?: ttl=\d{1,9})?(?: sign=on)?"
    r" json (?P<json>.+)",
    re.DOTALL,
)
_PROFILE: Final = re.compile(r"/_profile (?P<user>\d{1,18}) (?P<json>.+)", re.DOTALL)
_GROUP_PROFILE: Final = re.compile(r"/_group_profile #(?P<id>\d{1,18}) (?P<json>.+)", re.DOTALL)
_GROUPS: Final = re.compile(r"/_groups (?P<user>\d{1,18})")
_MEMBERS: Final = re.compile(r"/_members #(?P<id>\d{1,18})")


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


@dataclass(eq=False, slots=True)
class _Contact:
    parties: tuple[Party, Party]
    ids: dict[Party, int]

    def peer(self, party: Party) -> Party:
        a, b = self.parties
        return b if party == a else a


@dataclass(eq=False, slots=True)
class _Member:
    party: Party
    member_id: str  # the member's id, the same at every party (GroupMember.memberId)
    role: str


@dataclass(eq=False, slots=True)
class _Group:
    profile: dict[str, Any]
    members: list[_Member]
    ids: dict[Party, int]  # the group's id at each party
    member_ids: dict[tuple[Party, str], int]  # (viewer, memberId) -> groupMemberId
    business: dict[str, Any] | None = None
    link_token: str | None = None

    def member(self, party: Party) -> _Member | None:
        return next((m for m in self.members if m.party == party), None)


@dataclass(eq=False, slots=True)
class _Item:
    party: Party
    item_id: int
    shared_id: str
    text: str
    content: dict[str, Any]
    sender: Party


@dataclass(slots=True)
class ChatWorld:
    """Profiles, contacts, groups and messages shared by every simulated core."""

    emit: Emit
    stats: Any
    profiles: dict[Party, dict[str, Any]] = field(default_factory=dict)
    contacts: list[_Contact] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)
    items: dict[tuple[Party, str, int], _Item] = field(default_factory=dict)  # (party, ref, id)
    shared: dict[str, dict[Party, tuple[str, int]]] = field(default_factory=dict)
    link_data: dict[str, dict[str, Any]] = field(default_factory=dict)  # address token -> extra
    _counters: dict[tuple[Party, str], itertools.count[int]] = field(default_factory=dict)

    # -- identities -----------------------------------------------------------

    def next_id(self, party: Party, kind: str) -> int:
        counter = self._counters.get((party, kind))
        if counter is None:
            counter = self._counters[(party, kind)] = itertools.count(1)
        return next(counter)

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
        return {"profileId": party[1], **copy.deepcopy(self.profile(party)), "localAlias": ""}

    def user(self, party: Party) -> dict[str, Any]:
        """``User`` (TYPES.md) with the party's current profile."""
        profile = self.local_profile(party)
        user_id = party[1]
        return {
            "userId": user_id,
            "agentUserId": user_id,
            "userContactId": user_id,
            "localDisplayName": profile["displayName"],
            "profile": profile,
            "activeUser": True,
            "activeOrder": user_id,
            "showNtfs": True,
            "sendRcptsContacts": False,
            "sendRcptsSmallGroups": False,
            "autoAcceptMemberContacts": False,
            "clientService": False,
        }

    # -- building the world (the simulator's test API) --------------------------

    def connect(self, a: Party, b: Party) -> tuple[int, int]:
        contact = _Contact(
            parties=(a, b), ids={a: self.next_id(a, "contact"), b: self.next_id(b, "contact")}
        )
        self.contacts.append(contact)
        return contact.ids[a], contact.ids[b]

    def group(
        self,
        name: str,
        owner: Party,
        members: list[Party],
        *,
        business: bool,
        preferences: dict[str, Any] | None,
    ) -> dict[Party, int]:
        everyone = [owner, *members]
        if len(set(everyone)) != len(everyone):
            raise ValueError("group: each party joins once")
        profile: dict[str, Any] = {"displayName": name, "fullName": ""}
        if preferences is not None:
            profile["groupPreferences"] = copy.deepcopy(preferences)
        group = _Group(
            profile=profile,
            members=[
                _Member(party=p, member_id=secrets.token_urlsafe(12), role=role)
                for p, role in zip(everyone, ["owner"] + ["member"] * len(members), strict=True)
            ],
            ids={p: self.next_id(p, "group") for p in everyone},
            member_ids={},
        )
        for viewer in everyone:
            for member in group.members:
                group.member_ids[(viewer, member.member_id)] = self.next_id(viewer, "member")
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
                prefs["protocols"] = copy.deepcopy(owner_prefs["protocols"])
        self.groups.append(group)
        return dict(group.ids)

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

    def contact_record(self, viewer: Party, contact: _Contact) -> dict[str, Any]:
        """``Contact`` (TYPES.md) of ``contact`` as ``viewer`` sees it."""
        peer = contact.peer(viewer)
        profile = self.local_profile(peer)
        return {
            "contactId": contact.ids[viewer],
            "localDisplayName": profile["displayName"],
            "profile": profile,
            "contactUsed": True,
            "contactStatus": "active",
            "chatDeleted": False,
        }

    def member_record(self, viewer: Party, group: _Group, member: _Member) -> dict[str, Any]:
        """``GroupMember`` (TYPES.md) of ``member`` as ``viewer`` sees it."""
        profile = self.local_profile(member.party)
        # The core removes preferences from member profiles in groups (the protocol text).
        profile.pop("preferences", None)
        return {
            "groupMemberId": group.member_ids[(viewer, member.member_id)],
            "groupId": group.ids[viewer],
            "memberId": member.member_id,
            "memberRole": member.role,
            "memberCategory": "user" if member.party == viewer else "post",
            "memberStatus": "connected",
            "localDisplayName": profile["displayName"],
            "memberProfile": profile,
        }

    def group_record(self, viewer: Party, group: _Group) -> dict[str, Any]:
        """``GroupInfo`` (TYPES.md) of ``group`` as ``viewer`` sees it."""
        me = group.member(viewer)
        assert me is not None
        record: dict[str, Any] = {
            "groupId": group.ids[viewer],
            "useRelays": False,
            "localDisplayName": group.profile["displayName"],
            "groupProfile": copy.deepcopy(group.profile),
            "localAlias": "",
            "membership": self.member_record(viewer, group, me),
            "groupSummary": {"currentMembers": len(group.members)},
        }
        if group.business is not None:
            record["businessChat"] = dict(group.business)
        return record

    # -- commands -------------------------------------------------------------

    async def run(self, core: str, users: frozenset[int], cmd: str) -> dict[str, Any] | None:
        """Run a chat command of ``core``; None when ``cmd`` is not one of them."""
        if cmd == "/users":
            # ListUsers: usersList with [UserInfo] (COMMANDS.md, TYPES.md).
            return {
                "type": "usersList",
                "users": [{"user": self.user((core, u)), "unreadCount": 0} for u in sorted(users)],
            }
        if m := _SEND.fullmatch(cmd):
            # APISendMessages names no user: the core sends as its active user, in a
            # chat of that user only (COMMANDS.md).
            return await self._send(core, frozenset({active_user(users)}), m)
        if m := _PROFILE.fullmatch(cmd):
            return self._update_profile(core, users, int(m["user"]), m["json"])
        if m := _GROUP_PROFILE.fullmatch(cmd):
            return await self._update_group_profile(core, users, int(m["id"]), m["json"])
        if m := _MEMBERS.fullmatch(cmd):
            # APIListMembers: groupMembers with group: Group {groupInfo, members}. It
            # names no user either: a group of the active user only.
            found = self._sender(core, frozenset({active_user(users)}), "#", int(m["id"]))
            if isinstance(found, dict):
                return found
            party, group = found
            others = [self.member_record(party, group, mem) for mem in group.members]
            return {
                "type": "groupMembers",
                "user": self.user(party),
                "group": {
                    "groupInfo": self.group_record(party, group),
                    "members": [r for r in others if r["memberCategory"] != "user"],
                },
            }
        if m := _GROUPS.fullmatch(cmd):
            party = (core, int(m["user"]))
            if party[1] not in users:
                return _store_error("userNotFound", userId=party[1])
            groups = [self.group_record(party, g) for g in self.groups if party in g.ids]
            return {"type": "groupsList", "user": self.user(party), "groups": groups}
        return None

    def _sender(self, core: str, users: frozenset[int], ref: str, chat_id: int) -> Any:
        """The party that owns chat ``ref+chat_id`` on ``core``, and the chat; or an error."""
        for user_id in sorted(users):
            party = (core, user_id)
            if ref == "@":
                contact = self._contact_of(party, chat_id)
                if contact is not None:
                    return party, contact
            else:
                group = self._group_of(party, chat_id)
                if group is not None:
                    return party, group
        if ref == "@":
            return _store_error("contactNotFound", contactId=chat_id)
        return _store_error("groupNotFound", groupId=chat_id)

    async def _send(self, core: str, users: frozenset[int], m: re.Match[str]) -> dict[str, Any]:
        found = self._sender(core, users, m["ref"], int(m["id"]))
        if isinstance(found, dict):
            return found
        party, chat = found
        try:
            composed = _json.loads(m["json"])
        except _json.JsonError:
            return _command_error("composedMessages: not JSON")
        if not isinstance(composed, list) or not composed:
            return _command_error("composedMessages: expected a non-empty JSON array")
        prepared = []
        for message in composed:
            checked = self._check_composed(party, m["ref"], chat, message)
            if isinstance(checked, dict) and checked.get("type") == "chatCmdError":
                return checked
            prepared.append(checked)
        sent = []
        self.stats.messages += len(prepared)
        for content, quoted, mentions in prepared:
            sent.append(await self._deliver(party, m["ref"], chat, content, quoted, mentions))
        return {"type": "newChatItems", "user": self.user(party), "chatItems": sent}

    def _check_composed(self, party: Party, ref: str, chat: Any, message: object) -> Any:
        # ComposedMessage (TYPES.md): msgContent, quotedItemId?, mentions {name: groupMemberId}.
        if not isinstance(message, dict):
            return _command_error("composedMessage: expected a JSON object")
        content = message.get("msgContent")
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            return _command_error("msgContent: expected a MsgContent object")
        text = content.get("text", "")
        if not isinstance(text, str):
            return _command_error("msgContent.text: expected a string")
        if not fits_message(text):
            # simplex-chat refuses a message whose JSON exceeds maxEncodedMsgLength.
            return _chat_error("exception", message="largeMsg")
        quoted: _Item | None = None
        quoted_id = message.get("quotedItemId")
        if quoted_id is not None:
            if isinstance(quoted_id, bool) or not isinstance(quoted_id, int):
                return _command_error("quotedItemId: expected an integer")
            quoted = self.items.get((party, self._chat_key(party, ref, chat), quoted_id))
            if quoted is None:
                return _store_error("chatItemNotFound", itemId=quoted_id)
        mentions = message.get("mentions", {})
        if not isinstance(mentions, dict):
            return _command_error("mentions: expected a JSON object")
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

    async def _deliver(
        self,
        sender: Party,
        ref: str,
        chat: Any,
        content: dict[str, Any],
        quoted: _Item | None,
        mentions: dict[str, _Member],
    ) -> dict[str, Any]:
        shared_id = secrets.token_urlsafe(12)
        text = content.get("text", "")
        recipients = (
            [chat.peer(sender)]
            if ref == "@"
            else [m.party for m in chat.members if m.party != sender]
        )
        own: dict[str, Any] = {}
        for viewer in [sender, *recipients]:
            key = self._chat_key(viewer, ref, chat)
            item_id = self.next_id(viewer, "item")
            self.items[(viewer, key, item_id)] = _Item(
                party=viewer,
                item_id=item_id,
                shared_id=shared_id,
                text=text,
                content=copy.deepcopy(content),
                sender=sender,
            )
            self.shared.setdefault(shared_id, {})[viewer] = (key, item_id)
            a_chat_item = {
                "chatInfo": self._chat_info(viewer, ref, chat),
                "chatItem": self._chat_item(
                    viewer, ref, chat, item_id, shared_id, content, sender, quoted, mentions
                ),
            }
            if viewer == sender:
                own = a_chat_item
            else:
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
    ) -> dict[str, Any]:
        mine = viewer == sender
        if ref == "@":
            direction: dict[str, Any] = {"type": "directSnd" if mine else "directRcv"}
        elif mine:
            direction = {"type": "groupSnd"}
        else:
            member = chat.member(sender)
            direction = {
                "type": "groupRcv",
                "groupMember": self.member_record(viewer, chat, member),
            }
        ci_mentions = {}
        user_mention = False
        for name, member in mentions.items():
            # CIMention: memberId, memberRef (CIMentionMember) (TYPES.md).
            ci_mentions[name] = {
                "memberId": member.member_id,
                "memberRef": {
                    "groupMemberId": chat.member_ids[(viewer, member.member_id)],
                    "displayName": self.profile(member.party)["displayName"],
                    "memberRole": member.role,
                },
            }
            user_mention = user_mention or member.party == viewer
        item: dict[str, Any] = {
            "chatDir": direction,
            "meta": {
                "itemId": item_id,
                "itemTs": _TS,
                "itemText": content.get("text", ""),
                "itemStatus": {"type": "sndNew"} if mine else {"type": "rcvNew"},
                "itemSharedMsgId": shared_id,
                "itemEdited": False,
                "userMention": user_mention,
                "deletable": True,
                "editable": mine,
                "showGroupAsSender": False,
                "createdAt": _TS,
                "updatedAt": _TS,
            },
            "content": {
                "type": "sndMsgContent" if mine else "rcvMsgContent",
                "msgContent": copy.deepcopy(content),
            },
            "mentions": ci_mentions,
            "reactions": [],
        }
        if quoted is not None:
            local = self.shared.get(quoted.shared_id, {}).get(viewer)
            # CIQuote (TYPES.md): itemId is the viewer's own id of the quoted item.
            item["quotedItem"] = {
                "chatDir": None,
                "itemId": local[1] if local is not None else None,
                "sharedMsgId": quoted.shared_id,
                "sentAt": _TS,
                "content": {"type": "text", "text": quoted.text[:256]},
            }
        return item

    def _update_profile(
        self, core: str, users: frozenset[int], user_id: int, text: str
    ) -> dict[str, Any]:
        if user_id not in users:
            return _store_error("userNotFound", userId=user_id)
        try:
            profile = _json.loads(text)
        except _json.JsonError:
            return _command_error("profile: not JSON")
        if not isinstance(profile, dict) or not isinstance(profile.get("displayName"), str):
            return _command_error("profile: expected a Profile with displayName")
        party = (core, user_id)
        before = copy.deepcopy(self.profile(party))
        # APIUpdateProfile replaces the whole profile (local fields are not part of it).
        new = {k: v for k, v in profile.items() if k not in ("profileId", "localAlias")}
        if new == before:
            return {"type": "userProfileNoChange", "user": self.user(party)}
        self.profiles[party] = new
        return {
            "type": "userProfileUpdated",
            "user": self.user(party),
            "fromProfile": before,
            "toProfile": copy.deepcopy(new),
            "updateSummary": {
                "updateSuccesses": len(self.contacts),
                "updateFailures": 0,
                "changedContacts": [],
            },
        }

    async def _update_group_profile(
        self, core: str, users: frozenset[int], group_id: int, text: str
    ) -> dict[str, Any]:
        found = self._sender(core, users, "#", group_id)
        if isinstance(found, dict):
            return found
        party, group = found
        member = group.member(party)
        if member is None or member.role != "owner":
            return _chat_error("groupUserRole", requiredRole="owner")
        try:
            profile = _json.loads(text)
        except _json.JsonError:
            return _command_error("groupProfile: not JSON")
        if not isinstance(profile, dict) or not isinstance(profile.get("displayName"), str):
            return _command_error("groupProfile: expected a GroupProfile with displayName")
        before = self.group_record(party, group)
        group.profile = profile
        after = self.group_record(party, group)
        for other in group.members:
            if other.party != party:
                await self.emit(
                    other.party[0],
                    {
                        "type": "groupUpdated",
                        "user": self.user(other.party),
                        "fromGroup": before,
                        "toGroup": self.group_record(other.party, group),
                    },
                )
        return {
            "type": "groupUpdated",
            "user": self.user(party),
            "fromGroup": before,
            "toGroup": after,
            "msgSigned": False,
        }

    def plan_group_link(self, party: Party, token: str) -> dict[str, Any] | None:
        """The ``GroupLinkPlan`` for a group link token, or None for an unknown link."""
        group = next((g for g in self.groups if g.link_token == token), None)
        if group is None:
            return None
        if party in group.ids:
            return {"type": "known", "groupInfo": self.group_record(party, group)}
        return {"type": "ok", "groupSLinkData_": {"groupProfile": copy.deepcopy(group.profile)}}

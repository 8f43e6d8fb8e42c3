"""Profile declarations through the core: written with ``/_profile``, read with ``/_connect plan``.

``protocols`` is a key of a profile's ``preferences`` and of a group
profile's ``groupPreferences`` (the protocol text, "Profile declarations").
The core's APIUpdateProfile (``/_profile <userId> <json(profile)>``) and
APIUpdateGroupProfile (``/_group_profile #<groupId> <json(groupProfile)>``)
replace the whole profile, so a declaration is merged into the profile read
just before: ListUsers (``/users``) and APIListGroups (``/_groups <userId>``).
APIConnectPlan (``/_connect plan <userId> <link>``) reads a link's data
without connecting. Shapes from simplex-chat ``bots/api/COMMANDS.md`` and
``bots/api/TYPES.md`` (``User``, ``LocalProfile``, ``Profile``, ``GroupInfo``,
``GroupProfile``, ``BusinessChatInfo``, ``ConnectionPlan``,
``ContactAddressPlan``, ``GroupLinkPlan``, ``ContactShortLinkData``,
``GroupShortLinkData``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .._wire.redact import show
from ..declarations import (
    ProtocolDeclaration,
    _check_declared_versions,
    build_protocols,
    parse_audience,
    parse_change_frequency,
    parse_protocols,
    parse_serves,
)
from ..errors import ChatCoreError, DeclarationError, SimplexRpcError
from ._core import _check_user_id, _CoreBase, _dump_command_json, log

# LocalProfile fields that are this core's own, not part of the Profile sent.
_LOCAL_FIELDS = ("profileId", "localAlias")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkDeclarations:
    """What the data of a contact address or group link declares, read without connecting.

    ``kind`` is ``"contact"`` (a contact address) or ``"group"`` (a group or
    channel link); ``name`` its display name. ``protocols`` are the parsed
    declarations; ``serves`` the peer types of a contact address (None for a
    group, or when the link data is not available), ``audience`` those of a
    group or channel (None for a contact address, or when nothing is
    available); ``business`` marks a business address (False when not
    known). ``change_frequency`` is a channel's ``changeFrequency`` from its
    public group record, one of the Sitemaps changefreq values
    (``declarations.CHANGE_FREQUENCIES``), or None when the record has none,
    has a value outside them, or the link is a contact address. ``own`` is
    True for this user's own link.

    ``source`` says where the declarations were read, so that "declares
    nothing" (empty ``protocols`` from a profile) is told apart from "nothing
    to read" (``None``):

    * ``"link"``: the link's data (``contactSLinkData_``, ``groupSLinkData_``);
    * ``"contact"``: the profile of a contact this user already has through
      the address (plans ``known``, ``contactViaAddress``,
      ``connectingProhibit``);
    * ``"group"``: the profile of a group this user knows (``groupInfo``,
      ``groupInfo_``);
    * ``None``: no data came with the plan (a link without short link data,
      this user's own address, a connection being made).
    """

    kind: str
    name: str | None
    protocols: dict[str, ProtocolDeclaration]
    serves: list[str] | None
    audience: list[str] | None
    business: bool
    own: bool = False
    source: Literal["link", "contact", "group"] | None = "link"
    change_frequency: str | None = None


def _declarations(
    protocols: Mapping[str, ProtocolDeclaration | Mapping[str, Any]],
) -> dict[str, ProtocolDeclaration]:
    if not isinstance(protocols, Mapping):
        raise DeclarationError("protocols: expected a mapping of protocol names to declarations")
    out: dict[str, ProtocolDeclaration] = {}
    for name, value in protocols.items():
        if isinstance(value, ProtocolDeclaration):
            out[name] = value
            continue
        parsed = parse_protocols({"protocols": {name: value}})
        if name not in parsed:
            raise DeclarationError(f"protocols.{str(name)[:64]}: not a valid declaration")
        out[name] = parsed[name]
    build_protocols(out)  # checks the names
    for name, declaration in out.items():
        _check_declared_versions(name, declaration.versions)
    return out


class _Declarations:
    """``ChatCore``'s declarations part (see :class:`simplex_rpc.adapter.ChatCore`): it
    reads and writes profiles through the core's commands alone."""

    def __init__(self, core: _CoreBase) -> None:
        self._core = core
        # Serializes every read-modify-write of a profile on this core: /_profile
        # replaces the whole profile, so two writers (serve and serve_calls
        # declaring together) would otherwise each drop what the other added.
        self._declaring: asyncio.Lock | None = None

    def _declaration_lock(self) -> asyncio.Lock:
        lock = self._declaring
        if lock is None:
            lock = self._declaring = asyncio.Lock()
        return lock

    async def _profile(self, user_id: int) -> dict[str, Any]:
        """The user's current ``Profile``: its ``LocalProfile`` without local fields."""
        resp = await self._core.command("/users")
        users = resp.get("users")
        if resp.get("type") != "usersList" or not isinstance(users, list):
            raise ChatCoreError(f"unexpected answer {show(resp.get('type'), 60)} to /users")
        for info in users:
            user = info.get("user") if isinstance(info, dict) else None
            if isinstance(user, dict) and user.get("userId") == user_id:
                profile = user.get("profile")
                if not isinstance(profile, dict):
                    break
                return {k: copy.deepcopy(v) for k, v in profile.items() if k not in _LOCAL_FIELDS}
        raise ChatCoreError(f"the chat core has no user {user_id} with a profile")

    async def _groups(self, user_id: int) -> list[dict[str, Any]]:
        resp = await self._core.command(f"/_groups {user_id}")
        groups = resp.get("groups")
        if resp.get("type") != "groupsList" or not isinstance(groups, list):
            raise ChatCoreError(f"unexpected answer {show(resp.get('type'), 60)} to /_groups")
        return [g for g in groups if isinstance(g, dict)]

    async def declared(
        self, user_id: int, *, group_id: int | None = None
    ) -> dict[str, ProtocolDeclaration]:
        """The protocols the user's profile (or its group ``group_id``) declares now."""
        _check_user_id(user_id)
        if group_id is None:
            preferences = (await self._profile(user_id)).get("preferences")
            return parse_protocols(preferences if isinstance(preferences, dict) else {})
        info = await self._group_info(user_id, group_id)
        preferences = _get(info, "groupProfile", "groupPreferences")
        return parse_protocols(preferences if isinstance(preferences, dict) else {}, group=True)

    async def _group_info(self, user_id: int, group_id: int) -> dict[str, Any]:
        for info in await self._groups(user_id):
            if info.get("groupId") == group_id:
                return info
        raise ChatCoreError(f"user {user_id} has no group {group_id}")

    async def declare(
        self,
        user_id: int,
        protocols: Mapping[str, ProtocolDeclaration | Mapping[str, Any]],
        *,
        group_id: int | None = None,
        business_chats: bool = True,
    ) -> dict[str, ProtocolDeclaration]:
        """Write ``protocols`` as the declarations of the user's profile; return them.

        The profile is read and written back whole (``/_profile`` replaces the
        profile): only ``preferences.protocols`` changes, the rest of the
        profile and its other preferences stay as they were. With
        ``group_id``, the group's ``groupPreferences.protocols`` is written
        instead (``/_group_profile``; the user must own the group), without
        ``rpc``, which is valid in preferences only. The versions of ``mcp`` and
        ``a2a`` must be in their bindings' form (MCP revisions from 2026-07-28
        on, YYYY-MM-DD; A2A versions Major.Minor): anything else raises
        :class:`DeclarationError` naming the entry, before anything is
        written. A profile's declarations
        are also copied into each business chat where this user is the
        business (the protocol text: "protocols of the business profile MUST
        be copied into the chat's groupPreferences"), unless
        ``business_chats`` is False.
        """
        _check_user_id(user_id)
        declarations = _declarations(protocols)
        async with self._declaration_lock():
            return await self._declare(user_id, declarations, group_id, business_chats)

    async def _declare(
        self,
        user_id: int,
        declarations: dict[str, ProtocolDeclaration],
        group_id: int | None,
        business_chats: bool,
    ) -> dict[str, ProtocolDeclaration]:
        """:meth:`declare`, with the declaration lock held."""
        if group_id is not None:
            await self._write_group(user_id, group_id, declarations)
            return declarations
        profile = await self._profile(user_id)
        preferences = profile.get("preferences")
        preferences = dict(preferences) if isinstance(preferences, dict) else {}
        preferences["protocols"] = build_protocols(declarations)
        profile["preferences"] = preferences
        profile_json = _dump_command_json(profile, "profile")
        resp = await self._core.command(f"/_profile {user_id} {profile_json}")
        if resp.get("type") not in ("userProfileUpdated", "userProfileNoChange"):
            raise ChatCoreError(f"unexpected answer {show(resp.get('type'), 60)} to /_profile")
        log.info("user %d declares %s", user_id, ", ".join(sorted(declarations)) or "nothing")
        if business_chats:
            for info in await self._groups(user_id):
                business = info.get("businessChat")
                me = _get(info, "membership", "memberId")
                group = info.get("groupId")
                if (
                    isinstance(business, dict)
                    and isinstance(me, str)
                    and business.get("businessId") == me
                    and isinstance(group, int)
                ):
                    await self._write_group(user_id, group, declarations, info=info)
        return declarations

    async def _write_group(
        self,
        user_id: int,
        group_id: int,
        declarations: Mapping[str, ProtocolDeclaration],
        *,
        info: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(group_id, bool) or not isinstance(group_id, int) or group_id < 1:
            raise SimplexRpcError(
                f"group_id: expected a positive integer, got {show(group_id, 40)}"
            )
        if info is None:
            info = await self._group_info(user_id, group_id)
        profile = info.get("groupProfile")
        if not isinstance(profile, dict):
            raise ChatCoreError(f"group {group_id} has no group profile")
        profile = copy.deepcopy(profile)
        preferences = profile.get("groupPreferences")
        preferences = dict(preferences) if isinstance(preferences, dict) else {}
        preferences["protocols"] = build_protocols(declarations, group=True)
        profile["groupPreferences"] = preferences
        profile_json = _dump_command_json(profile, "group profile")
        resp = await self._core.command(f"/_group_profile #{group_id} {profile_json}")
        if resp.get("type") != "groupUpdated":
            raise ChatCoreError(
                f"unexpected answer {show(resp.get('type'), 60)} to /_group_profile"
            )
        log.info("group %d declares %s", group_id, ", ".join(sorted(declarations)) or "nothing")

    async def _declare_transport(
        self,
        user_id: int,
        protocols: Iterable[str],
        transport: Literal["chat", "rpc"] | Collection[Literal["chat", "rpc"]],
        versions: Mapping[str, Iterable[Any]] | None,
    ) -> None:
        """Add ``transport`` (one or several) to the user's declarations of ``protocols``.

        ``versions[name]`` (its strings) become the declared versions of
        ``name``; the rest of the declarations stays. A protocol without
        versions is refused with :class:`SimplexRpcError` before anything is
        written: the protocol text makes ``versions`` required, the versions
        the bot serves. The read and the write hold the declaration lock, so
        concurrent declarations on this core all take effect.
        """
        transports = {transport} if isinstance(transport, str) else set(transport)
        served: dict[str, tuple[str, ...]] = {}
        for name in protocols:
            given = (versions or {}).get(name, ())
            served[name] = tuple(v for v in given if isinstance(v, str) and v)
            if not served[name]:
                raise SimplexRpcError(
                    f"declare: no versions to declare for {show(name, 64)}; a declaration"
                    f" names the versions the bot serves (pass versions={{{name!r}: [...]}})"
                )
            _check_declared_versions(name, served[name])
        async with self._declaration_lock():
            current = await self.declared(user_id)
            for name, names in served.items():
                entry = current.get(name) or ProtocolDeclaration(versions=names)
                entry = replace(
                    entry,
                    versions=names,
                    chat=entry.chat or "chat" in transports,
                    rpc=entry.rpc or "rpc" in transports,
                )
                current[name] = entry
            await self._declare(user_id, current, None, True)

    async def link_declarations(self, user_id: int, link: str) -> LinkDeclarations:
        """Read what a contact address, group or channel link declares, without connecting.

        Sends ``/_connect plan <userId> <link>`` and parses the link data: a
        contact address's profile ``preferences.protocols``, ``serves`` and
        ``business``; a group's or channel's ``groupPreferences.protocols``,
        ``publicGroup.audience`` and ``publicGroup.changeFrequency``. When the
        plan carries no link data but a contact or group this user already
        knows, that profile is read instead; ``source`` says which was read,
        or None when nothing was.
        Declarations that break the schema are dropped, unknown values
        ignored (the protocol text's MUSTs).
        """
        _check_user_id(user_id)
        if not isinstance(link, str) or not link or any(c.isspace() for c in link):
            raise SimplexRpcError("link: expected a SimpleX link without white space")
        resp = await self._core.command(f"/_connect plan {user_id} {link}")
        plan = resp.get("connectionPlan")
        if resp.get("type") != "connectionPlan" or not isinstance(plan, dict):
            raise ChatCoreError(f"unexpected answer {show(resp.get('type'), 60)} to /_connect plan")
        kind = plan.get("type")
        if kind == "contactAddress":
            return _contact_plan(plan.get("contactAddressPlan"))
        if kind == "groupLink":
            return _group_plan(plan.get("groupLinkPlan"))
        raise ChatCoreError(
            f"the link is not a contact address or a group link (plan {show(kind, 40)})"
        )


# ContactAddressPlan variants (TYPES.md) that carry the contact this user has
# through the address: its profile (a LocalProfile) holds the preferences.
_CONTACT_PLANS = ("known", "contactViaAddress", "connectingProhibit")


def _contact_plan(plan: Any) -> LinkDeclarations:
    """Read a ``ContactAddressPlan`` (TYPES.md).

    ``ok`` carries ``contactSLinkData_: ContactShortLinkData?`` (``profile``,
    ``business``, and the protocol text's ``serves``); it is null for a link
    without short link data. ``known``, ``contactViaAddress`` and
    ``connectingProhibit`` carry ``contact: Contact``. ``ownLink`` and
    ``connectingConfirmReconnect`` carry nothing to read.
    """
    variant = _get(plan, "type")
    data = _get(plan, "contactSLinkData_")
    own = variant == "ownLink"
    if isinstance(data, dict):
        profile = _get(data, "profile")
        return LinkDeclarations(
            kind="contact",
            name=_str(_get(profile, "displayName")),
            protocols=_parse(_get(profile, "preferences"), group=False),
            serves=parse_serves(data),
            audience=None,
            business=data.get("business") is True,
            own=own,
            source="link",
        )
    contact = _get(plan, "contact") if variant in _CONTACT_PLANS else None
    profile = _get(contact, "profile")
    if isinstance(profile, dict):
        return LinkDeclarations(
            kind="contact",
            name=_str(profile.get("displayName")) or _str(_get(contact, "localDisplayName")),
            protocols=_parse(profile.get("preferences"), group=False),
            serves=None,  # in the link data only
            audience=None,
            business=False,
            own=own,
            source="contact",
        )
    return LinkDeclarations(
        kind="contact",
        name=None,
        protocols={},
        serves=None,
        audience=None,
        business=False,
        own=own,
        source=None,
    )


def _group_plan(plan: Any) -> LinkDeclarations:
    """Read a ``GroupLinkPlan`` (TYPES.md).

    ``ok`` carries ``groupSLinkData_: GroupShortLinkData?`` (``groupProfile``);
    ``ownLink`` and ``known`` carry ``groupInfo: GroupInfo``,
    ``connectingProhibit`` ``groupInfo_: GroupInfo?``;
    ``connectingConfirmReconnect`` nothing.
    """
    source: Literal["link", "group"] | None = "link"
    profile = _get(plan, "groupSLinkData_", "groupProfile")
    if not isinstance(profile, dict):
        source = "group"
        profile = _get(plan, "groupInfo", "groupProfile")
        if not isinstance(profile, dict):
            profile = _get(plan, "groupInfo_", "groupProfile")
    if not isinstance(profile, dict):
        source, profile = None, {}
    public = profile.get("publicGroup")
    return LinkDeclarations(
        kind="group",
        name=_str(profile.get("displayName")),
        protocols=_parse(profile.get("groupPreferences"), group=True),
        serves=None,
        audience=(
            parse_audience(public if isinstance(public, dict) else {})
            if source is not None
            else None
        ),
        business=False,
        own=_get(plan, "type") == "ownLink",
        source=source,
        # "changeFrequency: in a channel only": read where the record has it.
        change_frequency=parse_change_frequency(public if isinstance(public, dict) else {}),
    )


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse(preferences: Any, *, group: bool) -> dict[str, ProtocolDeclaration]:
    if not isinstance(preferences, dict):
        return {}
    return parse_protocols(preferences, group=group)

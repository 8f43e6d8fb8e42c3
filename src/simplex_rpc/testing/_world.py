"""A world for the simulator, described in a file: users, addresses, contacts, groups.

The format (TOML or JSON, the same tree)::

    [[users]]                       # one user of one simulated core
    core = "alice"                  # the URL path: ws://HOST:PORT/alice
    user = 1                        # the user id (default 1)
    profile = { displayName = "Alice", fullName = "", peerType = "bot" }
    [users.address]                 # a contact address of this user
    pq_ratchet = true               # with ratchet keys (Service RPC needs them)
    name = "alice.simplex"          # a SimpleX name: /_service_request 1 @alice.simplex ...
    short_link = true               # false: a full link alone (before short links)
    settings = { businessAddress = false, autoAccept = { acceptIncognito = false } }
    link_data = { serves = ["agent"] }   # declarations carried by the link's data

    contacts = [["alice", "bob"]]   # pairs of users ("core" or "core:user")

    [[groups]]
    name = "team"
    owner = "alice"
    members = ["bob", { user = "carol", role = "admin" }]
    preferences = { directMessages = { enable = "on" } }   # groupPreferences
    business = false

This module reads and checks the tree without I/O beyond reading the file;
:meth:`CoreSimulator.load_world` builds it. Each refusal is a
:class:`WorldError` naming the place (``users[1].core``) and what is wrong.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._wire import strict_json as _json
from ..errors import SimplexRpcError

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_REF: Final = re.compile(r"(?P<core>[A-Za-z0-9_-]{1,64})(?::(?P<user>[1-9][0-9]{0,8}))?")
_SIMPLEX_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}\.simplex")
_ROLES: Final = ("observer", "author", "member", "moderator", "admin", "owner")


class WorldError(SimplexRpcError):
    """A world (``simplex-rpc simulator --world FILE``) breaks the format.

    The message names the place (``users[1].core``) and what is wrong.
    """


Party = tuple[str, int]


@dataclass(frozen=True, slots=True)
class UserSpec:
    party: Party
    profile: dict[str, Any] | None
    address: dict[str, Any] | None  # {"pq_ratchet", "settings", "link_data", "short_link", "name"}

    @property
    def ref(self) -> str:
        return ref_of(self.party)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    owner: Party
    members: tuple[tuple[Party, str], ...]
    preferences: dict[str, Any] | None
    business: bool


@dataclass(frozen=True, slots=True)
class World:
    """A checked world: what :meth:`CoreSimulator.load_world` builds."""

    users: tuple[UserSpec, ...]
    contacts: tuple[tuple[Party, Party], ...]
    groups: tuple[GroupSpec, ...]
    user_ids: frozenset[int] = field(default=frozenset({1}))


def ref_of(party: Party) -> str:
    """The world's name of a user: ``core`` for user 1, ``core:N`` for user N."""
    core, user = party
    return core if user == 1 else f"{core}:{user}"


def _fail(where: str, what: str) -> WorldError:
    return WorldError(f"world: {where}: {what}")


def _keys(value: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"expected a table (object), got {_json.json_type(value)}")
    for key in value:
        if key not in allowed:
            raise _fail(where, f"unknown key {key!r} (expected {', '.join(allowed)})")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"expected an array, got {_json.json_type(value)}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"expected true or false, got {_json.json_type(value)}")
    return value


def _profile(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"expected a Profile table, got {_json.json_type(value)}")
    if not isinstance(value.get("displayName"), str) or not value["displayName"]:
        raise _fail(where + ".displayName", "required: a non-empty string")
    if not isinstance(value.get("fullName", ""), str):
        raise _fail(where + ".fullName", "expected a string")
    if "preferences" in value and not isinstance(value["preferences"], dict):
        raise _fail(where + ".preferences", "expected a table")
    return {"fullName": "", **value}


def _settings(value: Any, where: str) -> dict[str, Any]:
    # AddressSettings (TYPES.md): businessAddress, autoAccept?: AutoAccept, autoReply?: MsgContent.
    settings = _keys(value, where, ("businessAddress", "autoAccept", "autoReply"))
    out: dict[str, Any] = {
        "businessAddress": _bool(settings.get("businessAddress", False), where + ".businessAddress")
    }
    if "autoAccept" in settings:
        auto = _keys(settings["autoAccept"], where + ".autoAccept", ("acceptIncognito",))
        incognito = _bool(auto.get("acceptIncognito", False), where + ".autoAccept.acceptIncognito")
        if incognito:
            raise _fail(
                where + ".autoAccept.acceptIncognito", "the simulator has no incognito profiles"
            )
        out["autoAccept"] = {"acceptIncognito": False}
    if "autoReply" in settings:
        reply = settings["autoReply"]
        if not isinstance(reply, dict) or not isinstance(reply.get("type"), str):
            raise _fail(where + ".autoReply", "expected a MsgContent table with a type")
        out["autoReply"] = reply
    return out


def _address(value: Any, where: str) -> dict[str, Any]:
    address = _keys(value, where, ("pq_ratchet", "settings", "link_data", "short_link", "name"))
    link_data = address.get("link_data", {})
    if not isinstance(link_data, dict):
        raise _fail(where + ".link_data", "expected a table")
    serves = link_data.get("serves")
    if serves is not None and (
        not isinstance(serves, list) or not all(isinstance(s, str) for s in serves)
    ):
        raise _fail(where + ".link_data.serves", "expected an array of peer types")
    name = address.get("name")
    if name is not None and (not isinstance(name, str) or not _SIMPLEX_NAME.fullmatch(name)):
        raise _fail(where + ".name", 'expected a SimpleX name such as "alice.simplex"')
    return {
        "name": name,
        "short_link": _bool(address.get("short_link", True), where + ".short_link"),
        "pq_ratchet": _bool(address.get("pq_ratchet", False), where + ".pq_ratchet"),
        "settings": _settings(address.get("settings", {}), where + ".settings"),
        "link_data": link_data,
    }


def _ref(value: Any, where: str, users: dict[Party, UserSpec]) -> Party:
    if not isinstance(value, str) or (m := _REF.fullmatch(value)) is None:
        raise _fail(where, f'expected a user as "core" or "core:user", got {value!r}')
    party = (m["core"], int(m["user"] or 1))
    if party not in users:
        raise _fail(where, f"{value!r} is not a declared user")
    return party


def check_world(tree: Any) -> World:
    """Check a decoded world; return it as a :class:`World`, or raise :class:`WorldError`."""
    top = _keys(tree, "the top level", ("users", "contacts", "groups"))
    users: dict[Party, UserSpec] = {}
    for i, raw in enumerate(_list(top.get("users", []), "users")):
        where = f"users[{i}]"
        entry = _keys(raw, where, ("core", "user", "profile", "address"))
        core = entry.get("core")
        if not isinstance(core, str) or not _NAME.fullmatch(core):
            raise _fail(where + ".core", "expected a core name of letters, digits, '-' and '_'")
        user = entry.get("user", 1)
        if isinstance(user, bool) or not isinstance(user, int) or not 1 <= user <= 999_999_999:
            raise _fail(where + ".user", "expected a positive user id")
        party = (core, user)
        if party in users:
            raise _fail(where, f"user {ref_of(party)!r} is declared twice")
        profile = _profile(entry["profile"], where + ".profile") if "profile" in entry else None
        address = _address(entry["address"], where + ".address") if "address" in entry else None
        users[party] = UserSpec(party=party, profile=profile, address=address)

    contacts: list[tuple[Party, Party]] = []
    for i, raw in enumerate(_list(top.get("contacts", []), "contacts")):
        where = f"contacts[{i}]"
        pair = _list(raw, where)
        if len(pair) != 2:
            raise _fail(where, "expected a pair of users")
        a, b = _ref(pair[0], where + "[0]", users), _ref(pair[1], where + "[1]", users)
        if a == b:
            raise _fail(where, "a user is not its own contact")
        if any({a, b} == {x, y} for x, y in contacts):
            raise _fail(where, "these two are contacts already")
        contacts.append((a, b))

    groups: list[GroupSpec] = []
    names: set[str] = set()
    for i, raw in enumerate(_list(top.get("groups", []), "groups")):
        where = f"groups[{i}]"
        entry = _keys(raw, where, ("name", "owner", "members", "preferences", "business"))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(where + ".name", "required: a non-empty string")
        if name in names:
            raise _fail(where + ".name", f"two groups are named {name!r}")
        names.add(name)
        owner = _ref(entry.get("owner"), where + ".owner", users)
        members: list[tuple[Party, str]] = []
        for j, item in enumerate(_list(entry.get("members", []), where + ".members")):
            at = f"{where}.members[{j}]"
            role = "member"
            if isinstance(item, dict):
                member = _keys(item, at, ("user", "role"))
                role = member.get("role", "member")
                if role not in _ROLES:
                    raise _fail(
                        at + ".role", f"unknown role {role!r} (expected {', '.join(_ROLES)})"
                    )
                party = _ref(member.get("user"), at + ".user", users)
            else:
                party = _ref(item, at, users)
            if party == owner or any(party == p for p, _ in members):
                raise _fail(at, f"{ref_of(party)!r}: each user joins a group once")
            members.append((party, role))
        preferences = entry.get("preferences")
        if preferences is not None and not isinstance(preferences, dict):
            raise _fail(where + ".preferences", "expected a table (groupPreferences)")
        business = _bool(entry.get("business", False), where + ".business")
        groups.append(GroupSpec(name, owner, tuple(members), preferences, business))

    simplex_names: dict[str, str] = {}
    for i, spec in enumerate(users.values()):
        simplex_name = spec.address["name"] if spec.address is not None else None
        if simplex_name is not None:
            if simplex_name in simplex_names:
                raise _fail(
                    f"users[{i}].address.name",
                    f"{simplex_name!r} names {simplex_names[simplex_name]!r} already",
                )
            simplex_names[simplex_name] = spec.ref
    ids = frozenset(p[1] for p in users) or frozenset({1})
    return World(tuple(users.values()), tuple(contacts), tuple(groups), ids)


def read_world(path: str | Path) -> World:
    """Read and check the world in ``path`` (``.toml`` or ``.json``, by its name)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise WorldError(f"world: {path.name}: expected a .toml or .json file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorldError(f"world: cannot read {path}: {exc.strerror or exc}") from None
    try:
        tree = tomllib.loads(data.decode("utf-8")) if suffix == ".toml" else _json.loads(data)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise WorldError(f"world: {path.name}: not TOML: {exc}") from None
    except _json.JsonError as exc:
        raise WorldError(f"world: {path.name}: not strict JSON: {exc}") from None
    return check_world(tree)


__all__ = ["World", "WorldError", "check_world", "read_world", "ref_of"]

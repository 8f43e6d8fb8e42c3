"""Profile declarations of the protocol text ("Profile declarations"), without I/O.

* ``protocols``, a key of a profile's ``preferences`` or a group's
  ``groupPreferences``: :func:`parse_protocols` reads it entry by entry and
  :func:`build_protocols` writes it back; :func:`choose_version` picks the
  version to call with.
* ``audience`` and ``changeFrequency`` of a channel's or public group's
  ``publicGroup`` record: :func:`parse_audience`, :func:`parse_change_frequency`.
* ``serves`` of a contact address's link data: :func:`parse_serves`.

Reading follows the JTD schemas of the protocol text and its rule that
clients ignore what they do not know: unknown keys are kept aside (and written
back), unknown peer types are dropped, and a ``protocols`` entry that breaks
the schema is dropped alone, never the whole profile.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._wire import strict_json as _json
from ._wire.envelope import check_protocol_name
from .errors import DeclarationError, EnvelopeError

__all__ = [
    "CHANGE_FREQUENCIES",
    "DEFAULT_PEERS",
    "PEER_TYPES",
    "ProtocolDeclaration",
    "build_protocols",
    "check_protocols",
    "choose_version",
    "parse_audience",
    "parse_change_frequency",
    "parse_protocols",
    "parse_serves",
]

PEER_TYPES: Final = ("human", "bot", "business", "agent")
"""The values of a profile's ``peerType``, which ``audience`` and ``serves`` use."""

DEFAULT_PEERS: Final = ("human",)
"""The value of an absent ``audience`` or ``serves``."""

CHANGE_FREQUENCIES: Final = ("always", "hourly", "daily", "weekly", "monthly", "yearly", "never")
"""The ``changefreq`` values of the Sitemaps protocol, the values of ``changeFrequency``."""

# The form of the versions of the two bindings the library knows. "MCP binding":
# "versions: MCP revisions from 2026-07-28 on, for example 2026-07-28"; "A2A
# binding": "versions in the protocols declaration: A2A versions in the
# Major.Minor form, for example 1.0". Other protocols define their own.
_MCP_FIRST_REVISION: Final = "2026-07-28"
_MCP_REVISION: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_A2A_VERSION: Final = re.compile(r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)")


def _version_problem(protocol: str, version: object) -> str | None:
    """Why ``version`` cannot be a declared version of ``protocol``, or None.

    Only ``mcp`` and ``a2a``, whose bindings fix the form, are checked.
    """
    if not isinstance(version, str):
        return "is not a string"
    if protocol == "mcp":
        if not _MCP_REVISION.fullmatch(version) or not _is_date(version):
            return "is not an MCP revision (a date, YYYY-MM-DD)"
        if version < _MCP_FIRST_REVISION:
            return (
                f"is an MCP revision before {_MCP_FIRST_REVISION}: the binding carries"
                f" revisions from {_MCP_FIRST_REVISION} on (earlier ones begin with an"
                " initialize handshake)"
            )
    elif protocol == "a2a" and not _A2A_VERSION.fullmatch(version):
        return "is not an A2A version in the Major.Minor form (for example 1.0)"
    return None


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _check_declared_versions(protocol: str, versions: Iterable[object]) -> None:
    """Raise :class:`DeclarationError` naming the entry when a version of ``mcp`` or
    ``a2a`` is not in its binding's form; the versions of other protocols pass."""
    for i, version in enumerate(versions):
        problem = _version_problem(protocol, version)
        if problem is not None:
            shown = version[:40] if isinstance(version, str) else type(version).__name__
            raise DeclarationError(f"protocols.{protocol}.versions[{i}]: {shown!r} {problem}")


Source = Mapping[str, Any] | str | bytes | None
"""A JSON object: already decoded, or its JSON text (strict JSON); None for an absent one."""


def _object(source: Source, what: str) -> Mapping[str, Any]:
    if source is None:
        return {}
    if isinstance(source, str | bytes):
        try:
            source = _json.loads(source)
        except _json.JsonError as exc:
            raise DeclarationError(f"{what}: {exc}") from None
    if not isinstance(source, Mapping):
        raise DeclarationError(f"{what}: expected a JSON object, got {type(source).__name__}")
    return source


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolDeclaration:
    """One entry of ``protocols``: the versions a bot serves and its transports.

    ``versions`` are in the bot's order of preference. ``chat``: the bot
    answers ``/_call`` in a conversation; ``rpc``: it answers Service RPC
    requests on its contact address (valid in ``preferences`` only). An absent
    transport is False. ``extra`` and ``transports_extra`` hold unknown keys of
    the entry and of its ``transports``, written back by :meth:`to_dict`.
    """

    versions: tuple[str, ...]
    chat: bool = False
    rpc: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    transports_extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        versions = self.versions
        if isinstance(versions, str) or not isinstance(versions, Sequence):
            raise DeclarationError("versions: expected a sequence of strings")
        if not all(isinstance(v, str) for v in versions):
            raise DeclarationError("versions: every version is a string")
        object.__setattr__(self, "versions", tuple(versions))
        for name in ("chat", "rpc"):
            if not isinstance(getattr(self, name), bool):
                raise DeclarationError(f"transports.{name}: expected a boolean")
        for key in ("versions", "transports"):
            if key in self.extra:
                raise DeclarationError(f"extra key {key!r} is a known key")
        for key in ("chat", "rpc"):
            if key in self.transports_extra:
                raise DeclarationError(f"extra transport {key!r} is a known transport")
        object.__setattr__(self, "extra", dict(self.extra))
        object.__setattr__(self, "transports_extra", dict(self.transports_extra))

    @property
    def transports(self) -> tuple[str, ...]:
        """The declared transports: ``"chat"`` and ``"rpc"`` when true, in that order."""
        return tuple(name for name in ("chat", "rpc") if getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON: ``versions``, ``transports`` (true transports only), extra keys."""
        transports: dict[str, Any] = {name: True for name in self.transports}
        transports.update(self.transports_extra)
        out: dict[str, Any] = {"versions": list(self.versions), "transports": transports}
        out.update(self.extra)
        return out


def _entry(value: Any, group: bool) -> ProtocolDeclaration | str:
    """The declaration in one entry of ``protocols``, or why the entry breaks the schema."""
    if not isinstance(value, Mapping):
        return "the entry is not an object"
    entry = dict(value)
    if "versions" not in entry:
        return "'versions' is missing"
    if "transports" not in entry:
        return "'transports' is missing"
    versions = entry.pop("versions")
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        return "'versions' is not an array of strings"
    transports = entry.pop("transports")
    if not isinstance(transports, Mapping):
        return "'transports' is not an object"
    transports = dict(transports)
    flags: dict[str, bool] = {}
    for name in ("chat", "rpc"):
        if name in transports:
            flag = transports.pop(name)
            if not isinstance(flag, bool):
                return f"'transports.{name}' is not a boolean"
            flags[name] = flag
    if group:
        # rpc is valid in preferences only; in groupPreferences it does not apply.
        flags.pop("rpc", None)
    return ProtocolDeclaration(
        versions=tuple(versions),
        chat=flags.get("chat", False),
        rpc=flags.get("rpc", False),
        extra=entry,
        transports_extra=transports,
    )


def _entries(preferences: Source, group: bool) -> Iterable[tuple[str, ProtocolDeclaration | str]]:
    what = "groupPreferences" if group else "preferences"
    protocols = _object(preferences, what).get("protocols")
    if protocols is None:
        return
    if not isinstance(protocols, Mapping):
        yield "", f"{what}.protocols is not an object"
        return
    for name, value in protocols.items():
        try:
            check_protocol_name(name, "key")
        except EnvelopeError:
            yield name, f"{what}.protocols: {str(name)[:64]!r} is not a protocol name"
            continue
        result = _entry(value, group)
        if isinstance(result, str):
            yield name, f"{what}.protocols.{name}: {result}"
        else:
            yield name, result


def parse_protocols(preferences: Source, *, group: bool = False) -> dict[str, ProtocolDeclaration]:
    """The protocols a profile (or, with ``group``, a group) declares, by protocol name.

    ``preferences`` is the ``preferences`` object of a user or contact
    profile, or with ``group=True`` the ``groupPreferences`` of a group
    profile, as a mapping or its JSON text. ``versions`` and ``transports``
    are required; an absent transport is False; unknown keys are kept in the
    declaration's ``extra``. An entry that breaks the schema, or whose key is
    not a protocol name, is dropped (:func:`check_protocols` says why). In
    ``groupPreferences`` ``rpc`` does not apply and reads as False.

    Raise :class:`DeclarationError` only when ``preferences`` itself is not a
    JSON object.
    """
    return {
        name: result for name, result in _entries(preferences, group) if not isinstance(result, str)
    }


def check_protocols(preferences: Source, *, group: bool = False) -> list[str]:
    """Why :func:`parse_protocols` drops entries: one message per dropped entry, in order."""
    return [result for _, result in _entries(preferences, group) if isinstance(result, str)]


def build_protocols(
    declarations: Mapping[str, ProtocolDeclaration], *, group: bool = False
) -> dict[str, Any]:
    """The value of the ``protocols`` key for ``declarations``.

    Parsing it gives the same declarations, and for an entry read by
    :func:`parse_protocols` it is the same JSON, except that a transport is
    written only when true (absent is false) and, in ``groupPreferences``,
    the ``rpc`` that does not apply there is left out: a profile's
    declarations copied into a business chat's ``groupPreferences`` (as the
    protocol text requires) keep everything else. Raise
    :class:`DeclarationError` for a key that is not a protocol name.
    """
    out: dict[str, Any] = {}
    for name, declaration in declarations.items():
        try:
            check_protocol_name(name, "protocols key")
        except EnvelopeError as exc:
            raise DeclarationError(str(exc)) from None
        if not isinstance(declaration, ProtocolDeclaration):
            raise DeclarationError(f"protocols.{name}: expected a ProtocolDeclaration")
        if group and declaration.rpc:
            # transports.rpc is valid in preferences only.
            declaration = dataclasses.replace(declaration, rpc=False)
        out[name] = declaration.to_dict()
    return out


def choose_version(offered: Sequence[str], supported: Iterable[str]) -> str | None:
    """The bot's most preferred version that the caller also serves, or None.

    ``offered`` is a declaration's ``versions``, in the bot's order of
    preference; ``supported`` the versions the caller serves. Versions are
    compared as exact strings.
    """
    mine = set(supported)
    return next((v for v in offered if v in mine), None)


def _peers(record: Source, key: str, what: str) -> list[str]:
    value = _object(record, what).get(key)
    if not isinstance(value, list):
        # Absent (or not an array, which the schema does not allow): the default.
        return list(DEFAULT_PEERS)
    out: list[str] = []
    for item in value:
        if item in PEER_TYPES and item not in out:
            out.append(item)
    return out


def parse_audience(public_group: Source) -> list[str]:
    """The peer types a channel or public group is made for, from its ``publicGroup`` record.

    An absent ``audience`` is ``["human"]``. Unknown values are dropped (so an
    audience of unknown values only is ``[]``), and so are repeats.
    """
    return _peers(public_group, "audience", "publicGroup")


def parse_serves(link_data: Source) -> list[str]:
    """The peer types a contact address is made for, from the data of its link.

    ``serves`` has the values and the default of ``audience``: absent is
    ``["human"]``, unknown values are dropped.
    """
    return _peers(link_data, "serves", "link data")


def parse_change_frequency(public_group: Source) -> str | None:
    """A channel's ``changeFrequency`` (a Sitemaps changefreq value), or None.

    None when absent, or when the value is not one of :data:`CHANGE_FREQUENCIES`.
    """
    value = _object(public_group, "publicGroup").get("changeFrequency")
    return value if value in CHANGE_FREQUENCIES else None

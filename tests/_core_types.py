"""A strict checker of JSON values against the TypedDicts of the official ``simplex-chat`` package.

The package (``simplex-chat`` 7.0.2 on PyPI, a test dependency only) ships
``simplex_chat/types/``, generated from the chat core's own API definitions
(``bots/api/TYPES.md``, ``COMMANDS.md``, ``EVENTS.md``). Importing the types
needs no native library. This module checks a decoded JSON value against one
of those annotations and returns every mismatch, each with its JSON path:

* a TypedDict: every required key is present (``NotRequired[...]`` keys may be
  absent, never ``null``: the core omits a ``Nothing`` field), each present
  key's value checks against its annotation, and a key the TypedDict does not
  declare is an error unless ``extra_keys`` allows it;
* a union of tagged TypedDicts (``type: Literal[...]`` in each): the value's
  ``type`` picks the member; a tag no member has is an "unknown tag";
* any other union: one member must accept the value;
* ``Literal[...]``, ``list[X]``, ``dict[str, X]``, ``str``, ``int`` (not a
  bool), ``float`` (an int or a float, not a bool), ``bool``, ``object`` (any
  JSON value).

Python 3.11 computes ``__required_keys__`` wrongly for modules with
``from __future__ import annotations`` (every key counts as required), so the
checker reads ``NotRequired`` from ``typing.get_type_hints(include_extras=True)``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Union, get_args, get_origin


@functools.cache
def _hints(td: type) -> tuple[dict[str, Any], frozenset[str]]:
    """The annotations of TypedDict ``td`` (NotRequired unwrapped) and its optional keys."""
    hints = typing.get_type_hints(td, include_extras=True)
    optional = set()
    plain: dict[str, Any] = {}
    for key, hint in hints.items():
        if get_origin(hint) is NotRequired:
            optional.add(key)
            hint = get_args(hint)[0]
        plain[key] = hint
    return plain, frozenset(optional)


def _tag_of(td: type) -> str | None:
    """The ``type`` tag of a tagged TypedDict, or None."""
    if not typing.is_typeddict(td):
        return None
    hint = _hints(td)[0].get("type")
    if get_origin(hint) is Literal and len(get_args(hint)) == 1:
        tag = get_args(hint)[0]
        return tag if isinstance(tag, str) else None
    return None


@dataclass
class Checker:
    """Checks values against annotations; ``errors`` collects ``"path: what"`` lines.

    ``extra_keys`` maps a TypedDict name to the keys it may carry beyond its
    declaration (keys of a newer core or of the protocol text, named in the
    test that allows them). ``extra_members`` maps a union (by identity) to
    further TypedDicts it accepts. ``seen`` counts the TypedDicts checked, by
    name, so a test can show that a record was really reached.
    """

    extra_keys: Mapping[str, Iterable[str]] = field(default_factory=dict)
    extra_members: list[tuple[Any, tuple[type, ...]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)

    def check(self, value: Any, hint: Any, path: str = "$") -> bool:
        """Check ``value`` against ``hint``; record errors; True when it conforms."""
        before = len(self.errors)
        self._check(value, hint, path)
        return len(self.errors) == before

    def _fail(self, path: str, what: str) -> None:
        self.errors.append(f"{path}: {what}")

    def _members(self, hint: Any) -> tuple[Any, ...]:
        members = get_args(hint)
        for union, extra in self.extra_members:
            if union is hint:
                members = (*members, *extra)
        return members

    def _check(self, value: Any, hint: Any, path: str) -> None:
        origin = get_origin(hint)
        if hint is object or hint is Any:
            return
        if typing.is_typeddict(hint):
            self._typeddict(value, hint, path)
        elif origin is Literal:
            options = get_args(hint)
            if not any(type(value) is type(o) and value == o for o in options):
                self._fail(path, f"{value!r} is not one of {list(options)}")
        elif isinstance(hint, types.UnionType) or origin is Union:
            self._union(value, hint, path)
        elif origin is list:
            if not isinstance(value, list):
                self._fail(path, f"expected a list, got {type(value).__name__}")
                return
            (item,) = get_args(hint)
            for i, element in enumerate(value):
                self._check(element, item, f"{path}[{i}]")
        elif origin is dict:
            if not isinstance(value, dict):
                self._fail(path, f"expected an object, got {type(value).__name__}")
                return
            _, item = get_args(hint)
            for key, element in value.items():
                if not isinstance(key, str):
                    self._fail(path, f"key {key!r} is not a string")
                self._check(element, item, f"{path}.{key}")
        elif hint is str:
            if not isinstance(value, str):
                self._fail(path, f"expected a string, got {value!r}")
        elif hint is bool:
            if not isinstance(value, bool):
                self._fail(path, f"expected a bool, got {value!r}")
        elif hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                self._fail(path, f"expected an integer, got {value!r}")
        elif hint is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                self._fail(path, f"expected a number, got {value!r}")
        else:  # pragma: no cover - a construct the generated types do not use
            self._fail(path, f"cannot check against {hint!r}")

    def _typeddict(self, value: Any, td: type, path: str) -> None:
        name = td.__name__
        if not isinstance(value, dict):
            self._fail(path, f"expected a {name} object, got {type(value).__name__}")
            return
        self.seen[name] = self.seen.get(name, 0) + 1
        hints, optional = _hints(td)
        allowed = set(self.extra_keys.get(name.split("_")[0], ())) | set(
            self.extra_keys.get(name, ())
        )
        for key, hint in hints.items():
            if key not in value:
                if key not in optional:
                    self._fail(path, f"{name}: missing required field {key!r}")
                continue
            if value[key] is None:
                # The core omits a Nothing field (omitNothingFields); null is never sent.
                self._fail(f"{path}.{key}", f"{name}.{key} is null")
                continue
            self._check(value[key], hint, f"{path}.{key}")
        for key in value:
            if key not in hints and key not in allowed:
                self._fail(path, f"{name}: unknown field {key!r}")

    def _union(self, value: Any, hint: Any, path: str) -> None:
        members = self._members(hint)
        tags = {_tag_of(m): m for m in members}
        if None not in tags:
            # A tagged union: the value's "type" picks the member.
            if not isinstance(value, dict):
                self._fail(path, f"expected a tagged object, got {type(value).__name__}")
                return
            tag = value.get("type")
            member = tags.get(tag) if isinstance(tag, str) else None
            if member is None:
                names = sorted(t for t in tags if t is not None)
                self._fail(path, f"unknown tag {tag!r} (expected one of {names})")
                return
            self._check(value, member, path)
            return
        trials = []
        for member in members:
            trial = Checker(self.extra_keys, self.extra_members)
            if trial.check(value, member, path):
                for name, n in trial.seen.items():
                    self.seen[name] = self.seen.get(name, 0) + n
                return
            trials.append(trial.errors)
        best = min(trials, key=len) if trials else [f"{path}: empty union"]
        self.errors.extend(best)


__all__ = ["Checker"]

"""Profile declarations (protocol text, "Profile declarations")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from simplex_rpc.declarations import (
    CHANGE_FREQUENCIES,
    ProtocolDeclaration,
    build_protocols,
    check_protocols,
    choose_version,
    parse_audience,
    parse_change_frequency,
    parse_protocols,
    parse_serves,
)
from simplex_rpc.errors import DeclarationError
from simplex_rpc.vectors._examples import PREFERENCES_TEXT, preferences


# PREFERENCES_TEXT is the protocol text's example: the preferences of a contact profile.
def test_spec_preferences_example() -> None:
    got = parse_protocols(PREFERENCES_TEXT)
    assert got == {
        "mcp": ProtocolDeclaration(versions=("2026-07-28",), chat=True, rpc=True),
        "a2a": ProtocolDeclaration(versions=("1.0",), chat=True, rpc=True),
    }
    assert list(got) == ["mcp", "a2a"]
    assert got["mcp"].transports == ("chat", "rpc")
    # The builder writes the same JSON back.
    assert build_protocols(got) == preferences()["protocols"]
    assert check_protocols(PREFERENCES_TEXT) == []


def test_an_absent_transport_is_false() -> None:
    got = parse_protocols({"protocols": {"mcp": {"versions": [], "transports": {"chat": True}}}})
    assert got["mcp"].chat and not got["mcp"].rpc
    got = parse_protocols({"protocols": {"mcp": {"versions": ["1"], "transports": {}}}})
    assert got["mcp"].transports == ()


def test_unknown_keys_are_ignored_and_written_back() -> None:
    prefs = {
        "commands": [{"type": "command", "keyword": "help"}],
        "protocols": {
            "mcp": {
                "versions": ["2026-07-28"],
                "transports": {"chat": True, "rpc": False, "ws": True},
                "note": {"x": 1},
            }
        },
    }
    got = parse_protocols(prefs)["mcp"]
    assert got.extra == {"note": {"x": 1}}
    assert got.transports_extra == {"ws": True}
    assert build_protocols({"mcp": got}) == {
        "mcp": {
            "versions": ["2026-07-28"],
            "transports": {"chat": True, "ws": True},  # a false transport is left out
            "note": {"x": 1},
        }
    }


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("yes", "not an object"),
        ({"transports": {}}, "'versions' is missing"),
        ({"versions": ["1"]}, "'transports' is missing"),
        ({"versions": "1", "transports": {}}, "not an array of strings"),
        ({"versions": [1], "transports": {}}, "not an array of strings"),
        ({"versions": [], "transports": []}, "'transports' is not an object"),
        ({"versions": [], "transports": {"chat": "true"}}, "'transports.chat' is not a boolean"),
        ({"versions": [], "transports": {"rpc": 1}}, "'transports.rpc' is not a boolean"),
    ],
)
def test_an_entry_that_breaks_the_schema_is_dropped_alone(entry: Any, why: str) -> None:
    good = {"versions": ["1.0"], "transports": {"chat": True}}
    prefs = {"protocols": {"bad": entry, "a2a": good}}
    assert list(parse_protocols(prefs)) == ["a2a"]
    (problem,) = check_protocols(prefs)
    assert problem.startswith("preferences.protocols.bad: ") and why in problem


def test_keys_must_be_protocol_names() -> None:
    prefs = {
        "protocols": {
            "MCP": {"versions": [], "transports": {}},
            "a2a": {"versions": [], "transports": {}},
        }
    }
    assert list(parse_protocols(prefs)) == ["a2a"]
    assert "'MCP' is not a protocol name" in check_protocols(prefs)[0]


def test_rpc_does_not_apply_in_group_preferences() -> None:
    prefs = preferences()
    got = parse_protocols(prefs, group=True)
    assert got["mcp"] == ProtocolDeclaration(versions=("2026-07-28",), chat=True)
    # The schema still applies: a wrongly typed rpc drops the entry.
    prefs = {"protocols": {"mcp": {"versions": [], "transports": {"chat": True, "rpc": "x"}}}}
    assert parse_protocols(prefs, group=True) == {}
    assert "'transports.rpc' is not a boolean" in check_protocols(prefs, group=True)[0]
    assert "groupPreferences" in check_protocols({"protocols": []}, group=True)[0]
    # A profile's declarations copied into a business chat's groupPreferences (the
    # protocol text's MUST) drop rpc, which is valid in preferences only.
    copied = build_protocols(
        {"mcp": ProtocolDeclaration(versions=("1",), chat=True, rpc=True)}, group=True
    )
    assert copied == {"mcp": {"versions": ["1"], "transports": {"chat": True}}}
    rpc_only = build_protocols({"mcp": ProtocolDeclaration(versions=(), rpc=True)}, group=True)
    assert rpc_only == {"mcp": {"versions": [], "transports": {}}}


def test_absent_or_malformed_protocols() -> None:
    assert parse_protocols({}) == {}
    assert parse_protocols(None) == {}
    assert parse_protocols({"protocols": [1]}) == {}
    assert check_protocols({"protocols": [1]}) == ["preferences.protocols is not an object"]


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("[]", "expected a JSON object"),
        ('{"a":1,"a":2}', "duplicate member name"),
        (b"\xff", "invalid UTF-8"),
        (42, "expected a JSON object"),
    ],
)
def test_preferences_must_be_a_json_object(source: Any, match: str) -> None:
    with pytest.raises(DeclarationError, match=match):
        parse_protocols(source)


def test_declaration_validates_itself() -> None:
    with pytest.raises(DeclarationError, match="versions"):
        ProtocolDeclaration(versions="1.0")  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="versions"):
        ProtocolDeclaration(versions=(1,))  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match=r"transports\.chat"):
        ProtocolDeclaration(versions=(), chat=1)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="known key"):
        ProtocolDeclaration(versions=(), extra={"versions": []})
    with pytest.raises(DeclarationError, match="known transport"):
        ProtocolDeclaration(versions=(), transports_extra={"rpc": True})
    assert ProtocolDeclaration(versions=["a", "b"]).versions == ("a", "b")  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="not a protocol name"):
        build_protocols({"Bad": ProtocolDeclaration(versions=())})


_extra_values = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_extra_keys = st.text(max_size=6)
_declarations = st.builds(
    ProtocolDeclaration,
    versions=st.lists(st.text(max_size=10), max_size=4).map(tuple),
    chat=st.booleans(),
    rpc=st.booleans(),
    extra=st.dictionaries(
        _extra_keys.filter(lambda k: k not in ("versions", "transports")), _extra_values, max_size=3
    ),
    transports_extra=st.dictionaries(
        _extra_keys.filter(lambda k: k not in ("chat", "rpc")), _extra_values, max_size=3
    ),
)
_names = st.from_regex(r"[a-z0-9-]{1,10}", fullmatch=True)


@settings(max_examples=examples(150))
@given(st.dictionaries(_names, _declarations, max_size=4))
def test_build_then_parse_round_trips(declarations: dict[str, ProtocolDeclaration]) -> None:
    built = build_protocols(declarations)
    text = json.dumps({"protocols": built})
    assert parse_protocols(text) == declarations
    assert build_protocols(parse_protocols(text)) == built


@settings(max_examples=examples(100))
@given(st.dictionaries(_names, _declarations, max_size=4))
def test_group_round_trip_without_rpc(declarations: dict[str, ProtocolDeclaration]) -> None:
    declarations = {
        name: ProtocolDeclaration(
            versions=d.versions, chat=d.chat, extra=d.extra, transports_extra=d.transports_extra
        )
        for name, d in declarations.items()
    }
    built = build_protocols(declarations, group=True)
    assert parse_protocols({"protocols": built}, group=True) == declarations


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("offered", "supported", "chosen"),
    [
        (["2026-07-28"], ["2026-07-28"], "2026-07-28"),
        (
            ["2027-01-01", "2026-07-28"],
            ["2026-07-28", "2027-01-01"],
            "2027-01-01",
        ),  # the bot's order
        (["1.1", "1.0"], ["1.0"], "1.0"),
        (["1.0"], ["1.1"], None),
        ([], ["1.0"], None),
        (["1.0"], [], None),
        (["1.0"], ["1.00"], None),  # exact strings
    ],
)
def test_choose_version(offered: list[str], supported: list[str], chosen: str | None) -> None:
    assert choose_version(offered, supported) == chosen


# ---------------------------------------------------------------- audience, serves, frequency


@pytest.mark.parametrize(
    ("record", "audience"),
    [
        (None, ["human"]),
        ({}, ["human"]),  # an absent audience is ["human"]
        ({"audience": ["agent"]}, ["agent"]),
        ({"audience": ["human", "agent"]}, ["human", "agent"]),
        ({"audience": ["robot", "agent", 3]}, ["agent"]),  # unknown values are dropped
        ({"audience": ["robot"]}, []),
        ({"audience": []}, []),
        ({"audience": ["bot", "bot", "business"]}, ["bot", "business"]),
        ({"audience": "agent"}, ["human"]),  # not an array: as absent
        ('{"audience": ["agent"], "other": 1}', ["agent"]),
    ],
)
def test_parse_audience(record: Any, audience: list[str]) -> None:
    assert parse_audience(record) == audience


@pytest.mark.parametrize(
    ("data", "serves"),
    [
        ({"business": True}, ["human"]),  # the default of audience
        ({"serves": ["agent", "human"]}, ["agent", "human"]),
        ({"serves": ["Agent"]}, []),  # values are exact
    ],
)
def test_parse_serves(data: Any, serves: list[str]) -> None:
    assert parse_serves(data) == serves


@pytest.mark.parametrize("value", CHANGE_FREQUENCIES)
def test_parse_change_frequency(value: str) -> None:
    assert parse_change_frequency({"changeFrequency": value}) == value


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"changeFrequency": "Weekly"},
        {"changeFrequency": "fortnightly"},
        {"changeFrequency": 7},
        None,
    ],
)
def test_change_frequency_outside_the_enum_is_none(record: Any) -> None:
    assert parse_change_frequency(record) is None


def test_public_group_must_be_an_object() -> None:
    with pytest.raises(DeclarationError, match="publicGroup"):
        parse_audience("[]")
    with pytest.raises(DeclarationError, match="link data"):
        parse_serves('{"serves": 1,')

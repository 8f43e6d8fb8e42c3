"""Communication addresses in llms.txt (protocol text, "Addresses in llms.txt")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _hypothesis import examples
from simplex_rpc.declarations import CHANGE_FREQUENCIES
from simplex_rpc.errors import LlmsTxtError
from simplex_rpc.llms_txt import (
    AUDIENCES,
    CommunicationAddress,
    Communications,
    check_address,
    format_communications,
    link_kind,
    parse_communications,
)
from simplex_rpc.vectors._examples import LLMS_TXT_SECTION_TEXT

# The protocol text's example section; written into a file, it ends with a newline.
SPEC_SECTION = LLMS_TXT_SECTION_TEXT + "\n"
LLMS_TXT = (
    "# Acme\n\n> Anvils and more.\n\n## Docs\n\n- [API](https://acme.example/api.md): the API\n\n"
    + SPEC_SECTION
    + "\n## Optional\n\n- [Blog](https://acme.example/blog): posts\n"
)

SPEC_ADDRESSES = [
    CommunicationAddress(
        title="Acme news",
        url="https://smp12.simplex.im/c#…",
        network="SimpleX",
        type="updates",
        audience="people and agents",
        frequency="weekly",
        info="Product news and offers.",
    ),
    CommunicationAddress(
        title="Acme customers",
        url="https://smp12.simplex.im/g#…",
        network="SimpleX",
        type="group",
        audience="people",
        info="Questions and tips from customers.",
    ),
    CommunicationAddress(
        title="Ask Acme",
        url="https://smp12.simplex.im/a#…",
        network="SimpleX",
        type="contact",
        business=True,
        audience="agents",
        protocols=("mcp", "a2a"),
        info="Orders and availability.",
    ),
    CommunicationAddress(
        title="Acme support",
        url="mailto:support@acme.example",
        network="Email",
        type="contact",
        audience="people",
    ),
]


def test_spec_example_parses_to_what_it_says() -> None:
    got = parse_communications(LLMS_TXT)
    assert isinstance(got, Communications) and isinstance(got, list)
    assert got == SPEC_ADDRESSES
    assert got.problems == ()
    # The SimpleX entries use the link each type requires.
    assert [check_address(a) for a in got] == [None, None, None, None]


def test_format_writes_the_spec_section() -> None:
    assert format_communications(SPEC_ADDRESSES) == SPEC_SECTION


def test_only_the_communications_section_is_read() -> None:
    text = "- [x](https://x.example): SimpleX group for people.\n## Communication\n- [y](z): w\n"
    got = parse_communications(text)
    assert got == [] and got.problems == ()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Some prose about our addresses.", "not a list item"),
        ("- plain item", "not a link item"),
        ("- [Title](https://x.example)", "not followed by ': ' and notes"),
        ("- [Title](https://x.example):", "not followed by ': ' and notes"),
        ("- [](https://x.example): SimpleX group for people.", "title"),
        ("- [ T](https://x.example): SimpleX group for people.", "title"),
        ("- [T](): SimpleX group for people.", "no URL"),
        ("- [T](https://x.example): SimpleX channel for people.", "do not begin with"),
        ("- [T](https://x.example): SimpleX group people.", "do not begin with"),
        ("- [T](https://x.example): SimpleX group for humans.", "audience 'humans."),
        ("- [T](https://x.example): SimpleX group for people", "expected ', <item>'"),
        ("- [T](https://x.example): SimpleX group for people.Tips", "expected ', <item>'"),
        ("- [T](https://x.example): SimpleX group for people, daily.", "no frequency"),
        (
            "- [T](https://x.example): SimpleX updates for people, often.",
            "'often' is not a Sitemaps",
        ),
        (
            "- [T](https://x.example): SimpleX updates for people, Fortnightly.",
            "'Fortnightly' is not",
        ),
        ("- [T](https://x.example): SimpleX updates for people, daily, weekly.", "one frequency"),
        ("- [T](https://x.example): SimpleX updates for people, MCP.", "not a Sitemaps"),
        ("- [T](https://x.example): SimpleX contact for agents, M_P.", "'M_P' is not a protocol"),
        ("- [T](https://x.example): SimpleX contact for agents,MCP.", "expected ', <item>'"),
        ("- [T](https://x.example): SimpleX  group for people.", "network"),
        ("### Subsection", "not a list item"),
    ],
)
def test_lines_off_the_grammar_are_reported_not_guessed(line: str, message: str) -> None:
    ok = "- [Ok](mailto:a@b.example): Email contact for people."
    text = f"# Site\n\n## Communications\n\n{line}\n{ok}\n"
    got = parse_communications(text)
    assert [a.title for a in got] == ["Ok"]
    (problem,) = got.problems
    assert problem.line == 5 and problem.text == line
    assert message in problem.message
    assert str(problem).startswith("line 5: ")
    with pytest.raises(LlmsTxtError, match="line 5"):
        parse_communications(text, strict=True)


def test_code_blocks_are_problems_and_hide_headings() -> None:
    text = "```\n## Communications\n- [a](b): Email contact for people.\n```\n"
    assert parse_communications(text) == []
    text = "## Communications\n```\n- [a](b): Email contact for people.\n```\n"
    got = parse_communications(text)
    assert got == [] and [p.line for p in got.problems] == [2, 3, 4]


def test_grammar_details() -> None:
    text = (
        "## Communications\n"
        "* [A](simplex:/a#k?h=smp.example): SimpleX contact for people and agents, mcp, Weather-2."
        "  Two spaces before the info.  \n"
        "+ [B](https://r.example/c#k): Matrix Chat updates for agents. x\n"
        "- [C](https://r.example/a#k): Acme business updates contact for people.\n"
        "\n"
        "# Next\n"
        "- [D](https://r.example/a#k): junk\n"
    )
    got = parse_communications(text)
    assert got.problems == ()
    a, b, c = got
    assert a.protocols == ("mcp", "weather-2") and a.info == "Two spaces before the info."
    assert a.audience == "people and agents"
    assert b.network == "Matrix Chat" and b.frequency is None and b.info == "x"
    assert c.network == "Acme business updates" and c.type == "contact" and not c.business


# ---------------------------------------------------------------- round trips

_plain = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=24
).map(str.strip)
_addresses = st.builds(
    lambda kind, **kw: kind(**kw),
    kind=st.sampled_from(["updates", "group", "contact", "business"]).map(lambda k: _builder(k)),
    title=_plain.filter(lambda t: t and "[" not in t and "]" not in t),
    url=st.from_regex(r"[a-z]+:[A-Za-z0-9/#?=&.…-]{1,30}", fullmatch=True),
    network=_plain,
    audience=st.sampled_from(AUDIENCES),
    frequency=st.none() | st.sampled_from(CHANGE_FREQUENCIES),
    protocols=st.lists(st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True), max_size=3).map(tuple),
    info=st.just("") | _plain,
)


def _builder(kind: str) -> Any:
    def build(**kw: Any) -> CommunicationAddress | None:
        if kind != "updates":
            kw["frequency"] = None
        if kind not in ("contact", "business"):
            kw["protocols"] = ()
        try:
            return CommunicationAddress(
                type="contact" if kind == "business" else kind, business=kind == "business", **kw
            )
        except LlmsTxtError:
            return None  # a network holding a type phrase, an empty stripped text

    return build


@settings(max_examples=examples(200))
@given(st.lists(_addresses, max_size=5))
def test_format_then_parse_round_trips(maybe: list[CommunicationAddress | None]) -> None:
    addresses = [a for a in maybe if a is not None]
    text = format_communications(addresses)
    got = parse_communications("# Site\n\n" + text + "\n## After\n")
    assert got.problems == ()
    assert got == addresses


_line_chars = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))
_words = st.sampled_from(
    [
        "- [T](https://s.example/a#k): ",
        "SimpleX ",
        "business ",
        "contact ",
        "updates ",
        "group ",
        "for ",
        "people",
        "agents",
        " and ",
        ", ",
        "MCP",
        "weekly",
        ".",
        " ",
        "info",
    ]
)


@settings(max_examples=examples(200))
@given(st.text(alphabet=_line_chars, max_size=60) | st.lists(_words, max_size=12).map("".join))
def test_every_line_is_an_address_or_a_problem(line: str) -> None:
    assume(line.strip() and not re.match(r" {0,3}(#|```|~~~)", line))
    got = parse_communications("## Communications\n" + line)
    assert len(got) + len(got.problems) == 1
    for address in got:
        assert parse_communications(format_communications([address])) == [address]


# ---------------------------------------------------------------- construction


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"title": ""}, "title"),
        ({"title": "a]b"}, "title"),
        ({"title": " a"}, "leading or trailing"),
        ({"url": "https://x.example/a b"}, "url"),
        ({"url": "https://x.example/(a)"}, "url"),
        ({"network": ""}, "network"),
        ({"network": "Acme contact for"}, "type phrase"),
        ({"network": "Mail updates for x"}, "type phrase"),
        ({"type": "channel"}, "type"),
        ({"audience": "humans"}, "audience"),
        ({"type": "group", "business": True}, "business"),
        ({"frequency": "daily"}, "only updates"),
        ({"type": "updates", "frequency": "fortnightly"}, "changefreq"),
        ({"type": "group", "protocols": ("mcp",)}, "only contacts"),
        ({"protocols": ("MCP",)}, "lower case"),
        ({"info": "a\nb"}, "breaks a line"),
        ({"info": "a\u2028b"}, "breaks a line"),
        ({"info": "x "}, "leading or trailing"),
    ],
)
def test_invalid_addresses_raise(changes: dict[str, Any], match: str) -> None:
    fields: dict[str, Any] = {
        "title": "T",
        "url": "https://x.example/a#k",
        "network": "SimpleX",
        "type": "contact",
        "audience": "people",
    }
    fields.update(changes)
    with pytest.raises(LlmsTxtError, match=match):
        CommunicationAddress(**fields)


def test_a_network_ending_in_business_before_a_contact_is_refused() -> None:
    with pytest.raises(LlmsTxtError, match="network"):
        CommunicationAddress(
            title="T", url="u:x", network="Acme business", type="contact", audience="people"
        )
    # With business set it reads back: "Acme business business contact for".
    a = CommunicationAddress(
        title="T",
        url="u:x",
        network="Acme business",
        type="contact",
        business=True,
        audience="people",
    )
    assert parse_communications(format_communications([a])) == [a]


# ---------------------------------------------------------------- check_address


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://smp12.simplex.im/a#abc", "contact"),
        ("https://smp12.simplex.im/c#abc", "channel"),
        ("https://smp12.simplex.im/g#abc", "group"),
        ("https://smp12.simplex.im/i#abc", "invitation"),
        ("https://smp12.simplex.im/r#abc", "relay"),
        ("simplex:/a#lrdvu2d8A1GumSmoKb2krQmtKhWXq-tyGpHuM7aMwsw?h=smp6.simplex.im", "contact"),
        ("simplex:/g#abc?h=smp6.simplex.im", "group"),
        ("simplex:/contact#/?v=2-7&smp=smp%3A%2F%2Fx", "contact"),
        ("https://simplex.chat/contact#/?v=2-7&smp=x", "contact"),
        (
            "simplex:/contact#/?v=2-7&smp=x&data=%7B%22groupLinkId%22%3A%22abc%22%7D",
            "group",
        ),
        ("simplex:/invitation#/?v=2-7&smp=x", "invitation"),
        ("simplex:/contact#/?data=" + "%5B" * 100_000, "contact"),  # deep nesting: not data
        ("simplex:/contact#/?data=%7B%22groupLinkId%22%3A1%2C%22groupLinkId%22%3A2%7D", "contact"),
        ("https://smp12.simplex.im/a", None),  # no key
        ("https://smp12.simplex.im/x#abc", None),
        ("https://smp12.simplex.im/ab#abc", None),
        ("http://smp12.simplex.im/a#abc", None),
        ("https:///a#abc", None),
        ("mailto:support@acme.example", None),
        ("https://[bad/a#k", None),
        ("simplex://host/a#k", None),
    ],
)
def test_link_kind(url: str, kind: str | None) -> None:
    assert link_kind(url) == kind


@pytest.mark.parametrize(
    ("type_", "business", "url", "broken"),
    [
        ("updates", False, "https://s.example/c#k", None),
        ("updates", False, "https://s.example/g#k", "updates entry requires a channel link (/c#)"),
        ("group", False, "https://s.example/g#k", None),
        ("group", False, "https://s.example/c#k", "group entry requires a group link (/g#)"),
        ("contact", False, "https://s.example/a#k", None),
        ("contact", False, "https://s.example/i#k", "a one-time invitation link"),
        ("contact", True, "https://s.example/a#k", None),
        (
            "contact",
            True,
            "https://s.example/g#k",
            "business contact entry requires a contact address",
        ),
        ("contact", False, "https://acme.example/contact", "no SimpleX link"),
    ],
)
def test_check_address_names_the_broken_rule(
    type_: str, business: bool, url: str, broken: str | None
) -> None:
    address = CommunicationAddress(
        title="T", url=url, network="SimpleX", type=type_, business=business, audience="people"
    )
    result = check_address(address)
    if broken is None:
        assert result is None
    else:
        assert result is not None and broken in result


def test_other_networks_break_no_link_rule() -> None:
    address = CommunicationAddress(
        title="T",
        url="https://matrix.to/#/#acme:x",
        network="Matrix",
        type="group",
        audience="people",
    )
    assert check_address(address) is None
    simplex = CommunicationAddress(
        title="T", url="https://x.example/g#k", network="simplex", type="group", audience="people"
    )
    assert simplex.is_simplex and check_address(simplex) is None

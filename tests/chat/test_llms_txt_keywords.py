"""llms.txt keywords in any letter case (issue 20, item 5).

The protocol text, "Addresses in llms.txt": "The notes begin with the network
and the type of the address, then the audience and, for updates, the update
frequency or, for contacts, the protocols" -- "<network> [business ]contact
for <audience>[, <protocol>]*. <info>". Markdown readers read these words in
any letter case, so the parser does too, and keeps the network name as
written. A note that does not follow the grammar is reported, never read as
something else; ``## Communications ##`` (a closed ATX heading) is the same
section.
"""

from __future__ import annotations

import pytest

from simplex_rpc.llms_txt import CommunicationAddress, check_address, parse_communications

pytestmark = pytest.mark.conformance

CONTACT = "https://smp12.simplex.im/a#key"
CHANNEL = "https://smp12.simplex.im/c#key"
GROUP = "https://smp12.simplex.im/g#key"


def one(notes: str, url: str = CONTACT) -> CommunicationAddress:
    found = parse_communications(f"## Communications\n\n- [Acme]({url}): {notes}\n")
    assert found.problems == (), found.problems
    (address,) = found
    return address


@pytest.mark.parametrize(
    ("notes", "url", "expected"),
    [
        (
            "SimpleX Contact for agents, MCP.",
            CONTACT,
            {"network": "SimpleX", "type": "contact", "audience": "agents", "protocols": ("mcp",)},
        ),
        (
            "SimpleX contact for Agents.",
            CONTACT,
            {"type": "contact", "audience": "agents"},
        ),
        (
            "SimpleX updates for People and Agents, Weekly. News.",
            CHANNEL,
            {"type": "updates", "audience": "people and agents", "frequency": "weekly"},
        ),
        (
            "SimpleX UPDATES FOR PEOPLE, DAILY.",
            CHANNEL,
            {"type": "updates", "audience": "people", "frequency": "daily"},
        ),
        (
            "SimpleX Group For People. Tips.",
            GROUP,
            {"type": "group", "audience": "people", "info": "Tips."},
        ),
        (
            "SimpleX Business Contact For agents, MCP, A2A. Orders.",
            CONTACT,
            {"network": "SimpleX", "business": True, "protocols": ("mcp", "a2a")},
        ),
    ],
)
def test_keywords_are_read_in_any_letter_case(
    notes: str, url: str, expected: dict[str, object]
) -> None:
    """The grammar's words (the type, "business", "for", the audience, the frequency,
    the protocols) in any letter case: read as the lower-case values."""
    address = one(notes, url)
    for field, value in expected.items():
        assert getattr(address, field) == value, field


def test_the_network_keeps_its_own_case() -> None:
    """The network is the page's own name for it: kept as written."""
    assert one("SimpleX contact for agents.").network == "SimpleX"
    assert one("simplex CONTACT for agents.").network == "simplex"
    assert one("Acme Mesh Network Contact for people.").network == "Acme Mesh Network"


def test_business_contact_in_any_case_is_a_business_contact_not_a_network() -> None:
    """The issue's case: "SimpleX Business contact for agents, MCP." is a business
    contact of the network SimpleX, so check_address requires a contact address link
    and names the rule a /g# link breaks."""
    address = one("SimpleX Business contact for agents, MCP.", GROUP)
    assert (address.network, address.business, address.type) == ("SimpleX", True, "contact")
    broken = check_address(address)
    assert broken is not None and "business contact" in broken and "/a#" in broken


@pytest.mark.parametrize(
    "notes",
    [
        "SimpleX contacts for agents.",
        "SimpleX contact for everyone.",
        "SimpleX updates for people, Fortnightly.",
        "SimpleX Group for people, weekly.",
        "SimpleX contact agents, MCP.",
    ],
)
def test_a_note_off_the_grammar_is_reported_never_misparsed(notes: str) -> None:
    """A note that does not follow the grammar gives no address and is reported with
    its line."""
    found = parse_communications(f"## Communications\n\n- [Acme]({CONTACT}): {notes}\n")
    assert list(found) == []
    assert [p.line for p in found.problems] == [3]


@pytest.mark.parametrize(
    "heading", ["## Communications ##", "## Communications #", "## Communications ##   "]
)
def test_a_closed_heading_is_the_same_section(heading: str) -> None:
    """A closed ATX heading (CommonMark: the closing #s are not part of the text) opens
    the same section."""
    found = parse_communications(f"{heading}\n\n- [Acme]({CONTACT}): SimpleX contact for agents.\n")
    assert [a.title for a in found] == ["Acme"] and found.problems == ()


def test_a_hash_that_is_part_of_the_heading_text_is_another_section() -> None:
    """ "## Communications#" has no closing sequence (no space before the #): another
    heading, whose lines are not read."""
    found = parse_communications(
        f"## Communications#\n\n- [Acme]({CONTACT}): SimpleX contact for agents.\n"
    )
    assert list(found) == [] and found.problems == ()

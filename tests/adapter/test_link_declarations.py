"""A channel's update frequency reaches the caller (issue 20, item 8).

The protocol text, "Public group audience and update frequency": two fields
of the public group record, ``audience`` and ``changeFrequency`` --
"changeFrequency: in a channel only, how often the channel is updated. The
values are the changefreq values of the Sitemaps protocol: always, hourly,
daily, weekly, monthly, yearly, never." ``ChatCore.link_declarations`` reads a
link without connecting: its ``change_frequency`` is that value, or None when
the record has none (or one outside the Sitemaps values, which clients ignore).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from simplex_rpc.adapter import ChatCore
from simplex_rpc.declarations import CHANGE_FREQUENCIES
from simplex_rpc.testing import CoreSimulator

pytestmark = pytest.mark.conformance


@contextlib.asynccontextmanager
async def channel(public_group: dict[str, Any] | None) -> AsyncIterator[tuple[ChatCore, str]]:
    """A channel of ``news`` whose profile has ``public_group`` as its publicGroup;
    ``reader`` is not a member and reads its link."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("news")) as news,
        ChatCore.connect(sim.url_for("reader")) as reader,
    ):
        for core in (news, reader):
            await core.start(service_requests=False)
        ids = sim.create_group("Acme news", "news", [])
        group_id = ids[("news", 1)]
        if public_group is not None:
            profile = {"displayName": "Acme news", "fullName": "", "publicGroup": public_group}
            await news.command(f"/_group_profile #{group_id} {json.dumps(profile)}")
        yield reader, sim.group_link("news", group_id)


@pytest.mark.parametrize("frequency", CHANGE_FREQUENCIES)
@pytest.mark.anyio
async def test_change_frequency_of_a_channel_reaches_the_caller(frequency: str) -> None:
    """ "changeFrequency: ... how often the channel is updated": each Sitemaps value
    read from the link, with the audience beside it."""

    record = {"audience": ["agent"], "changeFrequency": frequency}
    async with channel(record) as (reader, link):
        found = await reader.link_declarations(1, link)
        assert found.kind == "group" and found.audience == ["agent"]
        assert found.change_frequency == frequency


@pytest.mark.parametrize(
    "record",
    [
        None,
        {"audience": ["agent"]},
        {"changeFrequency": "Weekly"},
        {"changeFrequency": "fortnightly"},
        {"changeFrequency": 7},
    ],
)
@pytest.mark.anyio
async def test_change_frequency_absent_or_unknown_is_none(record: dict[str, Any] | None) -> None:
    """No changeFrequency, or a value outside the Sitemaps values: None."""

    async with channel(record) as (reader, link):
        found = await reader.link_declarations(1, link)
        assert found.change_frequency is None


@pytest.mark.anyio
async def test_a_contact_address_has_no_change_frequency() -> None:
    """A contact address is not a channel: its change_frequency is None."""

    async with CoreSimulator() as sim, ChatCore.connect(sim.url_for("bot")) as bot:
        await bot.start(service_requests=True)
        sim.set_profile("bot", {"displayName": "bot", "fullName": ""})
        address = await bot.service_address(1)
        async with ChatCore.connect(sim.url_for("reader")) as reader:
            await reader.start(service_requests=False)
            found = await reader.link_declarations(1, address.link)
            assert found.kind == "contact" and found.change_frequency is None

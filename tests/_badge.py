"""The badge-style example's world: the simulator with its cores and contacts (no tests here)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from simplex_rpc.adapter import (
    ChatCore,
)
from simplex_rpc.testing import CoreSimulator


@contextlib.asynccontextmanager
async def world() -> AsyncIterator[World]:
    """A simulator with the responder's core (bob, started, with an address) and a caller's."""
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bob")) as bob,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        await bob.start(service_requests=True)
        link = (await bob.service_address(1)).link
        await alice.start(service_requests=False)
        yield World(sim, bob, alice, link)


@dataclass
class World:
    sim: CoreSimulator
    bob: ChatCore
    alice: ChatCore
    link: str

"""The A2A gateway tests' shared pieces: the upstream agent's program, a world of cores, the
gateway's process and its JSON-RPC requests.

No tests here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _simulator_thread import SimulatorThread
from simplex_rpc import Request, a2a
from simplex_rpc.adapter import ChatCore
from simplex_rpc.testing import CoreSimulator

ROOT = Path(__file__).resolve().parent
UPSTREAM = ROOT / "_a2a_upstream.py"


PY = sys.executable


class World(SimulatorThread):
    """The simulator in its own thread and loop; ``setup`` makes contacts and groups and
    returns the facts the test needs (``facts``)."""

    def __init__(self, setup: Callable[[CoreSimulator], dict[str, Any]]) -> None:
        super().__init__(setup=setup)


def read_line(stream: Any, pattern: str, what: str) -> str:
    """The first group of ``pattern`` in the first line of ``stream`` that matches it."""
    for line in stream:
        match = re.search(pattern, line)
        if match:
            return match.group(1)
    raise AssertionError(f"{what} ended before printing {pattern!r}")


def stop(*processes: subprocess.Popen[str] | None) -> None:
    for process in processes:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hung child
                process.kill()
                process.wait(timeout=20)


def seen_by(upstream: str) -> list[dict[str, Any]]:
    """What the upstream received: one record (headers, body members) per POST."""
    with urllib.request.urlopen(f"{upstream}/seen", timeout=10) as answer:
        records: list[dict[str, Any]] = json.load(answer)
    return records


@dataclass
class Network:
    url: str
    upstream: str
    link: str
    contact: str  # alice's ChatRef of the bot
    alice_group: str  # the group, as alice names it
    carol_group: str  # the same group, as carol names it
    bot_log: Path


def _world(sim: CoreSimulator) -> dict[str, Any]:
    at_alice, _ = sim.connect("alice", "bot")
    ids = sim.create_group("team", "alice", ["bot", "carol"])
    return {
        "contact": f"@{at_alice}",
        "alice_group": f"#{ids[('alice', 1)]}",
        "carol_group": f"#{ids[('carol', 1)]}",
    }


def user_message(text: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    message.update(extra)
    return {"message": message}


def request(method: str, params: dict[str, Any], **parameters: str) -> dict[str, Any]:
    return a2a.make_request(method, params, id=str(uuid.uuid4()), parameters=parameters)


async def rpc(network: Network, message: dict[str, Any], core: str = "alice") -> Any:
    async with ChatCore.connect(f"{network.url}/{core}") as caller:
        await caller.start(service_requests=False)
        return await caller.service_request(
            1, network.link, Request(protocol="a2a", request=message), timeout=60
        )

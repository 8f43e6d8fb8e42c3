"""``simplex-rpc simulator --world FILE``: a described world, and bots of any language on it.

Issue 19, "A world file": FILE, in TOML or JSON, declares users (with
profiles and preferences), addresses (with their settings and declarations),
contacts between users, and groups (with members and roles). Once ready the
command prints one JSON line on stdout: each user's URL and the ids it created
(contact ids per user, group ids per member). "Done when": two minimal bots
in their own processes, written with plain ``websockets`` and no code of this
library (``tests/plain_ws_bot.py``), meet through the simulator by an address
link with ``/_connect`` and ``/_accept``, exchange messages and quoted replies
in a direct chat and in a group, and see the events of each step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from _raw_core import raw_core
from simplex_rpc.errors import SimplexRpcError
from simplex_rpc.testing import CoreSimulator, WorldError, read_world

HERE = Path(__file__).parents[1]

WORLD_TOML = """\
# Two bots that have not met: the host has an address, without auto-accept.
[[users]]
core = "host"
profile = { displayName = "Host Bot", fullName = "", peerType = "bot" }
address = { settings = { businessAddress = false } }

[[users]]
core = "guest"
profile = { displayName = "Guest Bot", fullName = "" }
"""

FULL_WORLD = {
    "users": [
        {
            "core": "alice",
            "profile": {
                "displayName": "Alice",
                "fullName": "Alice A.",
                "preferences": {"protocols": {"mcp": {}}},
            },
            "address": {
                "pq_ratchet": True,
                "settings": {
                    "businessAddress": False,
                    "autoAccept": {"acceptIncognito": False},
                },
                "link_data": {"serves": ["agent"]},
            },
        },
        {"core": "bob", "profile": {"displayName": "Bob", "fullName": ""}},
        {"core": "bob", "user": 2, "profile": {"displayName": "Bob at work", "fullName": ""}},
        {"core": "carol"},
    ],
    "contacts": [["alice", "bob"], ["alice", "carol"], ["bob:2", "carol"]],
    "groups": [
        {
            "name": "team",
            "owner": "alice",
            "members": [{"user": "bob", "role": "admin"}, "carol"],
            "preferences": {"directMessages": {"enable": "on"}},
        }
    ],
}


@contextlib.asynccontextmanager
async def simulator_process(world: Path, *extra: str) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """``simplex-rpc simulator --world world --port 0`` and its ready line, decoded."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simplex_rpc",
        "simulator",
        "--world",
        str(world),
        "--port",
        "0",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line, (await proc.stderr.read()).decode() if proc.stderr else "no ready line"
        yield proc, json.loads(line)
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:  # pragma: no cover - a stuck simulator
                proc.kill()
                await proc.wait()


@pytest.mark.anyio
@pytest.mark.time_limit(150)
async def test_two_plain_websocket_bots_meet_and_talk_through_a_world_file(tmp_path: Path) -> None:
    """The "Done when" test: the host and the guest bots, each its own process with plain
    ``websockets``, connect by the host's address link (``/_connect plan``, ``/_connect``,
    ``receivedContactRequest``, ``/_accept``, ``contactConnected``), exchange a message and a
    quoted reply directly, then in a group (``/_group``, ``/_add``, ``receivedGroupInvitation``,
    ``/_join``, ``userJoinedGroup``, ``joinedGroupMember``), each seeing each step's events."""
    world = tmp_path / "world.toml"
    world.write_text(WORLD_TOML)

    async def bot(*argv: str) -> Any:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "plain_ws_bot.py"),
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )

    async def log_of(proc: Any, seen: list[bytes]) -> list[dict[str, Any]]:
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 0, err.decode()
        return [json.loads(line) for line in b"".join([*seen, out]).decode().splitlines()]

    with anyio.fail_after(150):
        async with simulator_process(world) as (_, ready):
            host = ready["users"]["host"]
            guest = ready["users"]["guest"]
            link = host["address"]["connShortLink"]
            # Both start at once: an event sent before the host's bot connects (the
            # contact request) waits for it, as in the core's output queue.
            host_proc = await bot("host", host["url"])
            guest_proc = await bot("guest", guest["url"], link)
            seen: list[bytes] = []
            host_log, guest_log = await asyncio.gather(
                log_of(host_proc, seen), log_of(guest_proc, [])
            )
        steps = {(e["step"], e["type"]) for e in host_log}
        for step in [
            ("request", "receivedContactRequest"),
            ("accept", "acceptingContactRequest"),
            ("connected", "contactConnected"),
            ("direct", "newChatItems"),
            ("direct-reply", "newChatItems"),
            ("group", "groupCreated"),
            ("invite", "sentGroupInvitation"),
            ("joined", "joinedGroupMember"),
            ("group", "newChatItems"),
            ("members", "groupMembers"),
            ("done", "done"),
        ]:
            assert step in steps, (step, host_log)
        steps = {(e["step"], e["type"]) for e in guest_log}
        for step in [
            ("plan", "connectionPlan"),
            ("connect", "sentInvitation"),
            ("connected", "contactConnecting"),
            ("connected", "contactConnected"),
            ("direct", "newChatItems"),
            ("invited", "receivedGroupInvitation"),
            ("join", "userAcceptedGroupSent"),
            ("joined", "userJoinedGroup"),
            ("group", "newChatItems"),
            ("group-reply", "newChatItems"),
            ("done", "done"),
        ]:
            assert step in steps, (step, guest_log)


@pytest.mark.anyio
async def test_the_ready_line_names_each_users_url_and_ids(tmp_path: Path) -> None:
    """One JSON line: ``url``, and per user (``core`` or ``core:user``) its ``url``, ``userId``,
    ``displayName``, its address links, ``contacts`` (peer -> contact id at this user) and
    ``groups`` (group name -> group id at this user); the ids work in commands."""
    world = tmp_path / "world.json"
    world.write_text(json.dumps(FULL_WORLD))

    async with simulator_process(world) as (proc, ready):
        users = ready["users"]
        assert set(users) == {"alice", "bob", "bob:2", "carol"}
        assert users["bob:2"]["url"] == users["bob"]["url"]  # one core, two users
        assert users["bob:2"]["userId"] == 2
        assert users["alice"]["url"] == ready["url"] + "/alice"
        # Issue 30: the URL under the key of every ready line (simulator --json's too).
        assert ready["listening"] == ready["url"] and next(iter(ready)) == "listening"
        assert set(users["alice"]["contacts"]) == {"bob", "carol"}
        assert set(users["carol"]["contacts"]) == {"alice", "bob:2"}
        assert "address" not in users["bob"]
        assert "&rk=" in users["alice"]["address"]["connFullLink"]  # pq_ratchet
        for name in ("alice", "bob", "carol"):
            assert set(users[name]["groups"]) == {"team"}
        async with (
            raw_core(users["bob"]["url"], "bob") as bob,
            raw_core(users["alice"]["url"], "alice") as alice,
        ):
            # Without -m the simulator's chats run from the start, as the chat core's
            # CLI started the usual way (src/Simplex/Chat/Core.hs, runSimplexChat).
            await bob.ok("/_start", "chatRunning")
            await alice.ok("/_start", "chatRunning")
            me = await bob.ok("/user", "activeUser")
            assert me["user"]["profile"]["displayName"] == "Bob"
            await bob.ok(f"/_send @{users['bob']['contacts']['alice']} text hi", "newChatItems")
            assert (await alice.event("newChatItems"))["chatItems"][0]["chatItem"]["meta"][
                "itemText"
            ] == "hi"
            members = await alice.ok(
                f"/_members #{users['alice']['groups']['team']}", "groupMembers"
            )
            roles = {
                m["memberProfile"]["displayName"]: m["memberRole"]
                for m in members["group"]["members"]
            }
            assert roles == {"Bob": "admin", "carol": "member"}
            prefs = members["group"]["groupInfo"]["groupProfile"]["groupPreferences"]
            assert prefs == {"directMessages": {"enable": "on"}}
            shown = await alice.ok("/_show_address 1", "userContactLink")
            assert shown["contactLink"]["addressSettings"]["autoAccept"] == {
                "acceptIncognito": False
            }
            plan = await bob.ok(
                f"/_connect plan 2 {users['alice']['address']['connShortLink']}",
                "connectionPlan",
            )
            data = plan["connectionPlan"]["contactAddressPlan"]["contactSLinkData_"]
            assert data["serves"] == ["agent"]
            assert data["profile"]["preferences"] == {"protocols": {"mcp": {}}}
        assert proc.returncode is None


@pytest.mark.anyio
async def test_the_in_process_api_takes_the_same_world() -> None:
    """``CoreSimulator.load_world`` takes the decoded world (as :func:`read_world` returns it)
    and returns what the ready line prints: ``url`` and ``users``."""

    async with CoreSimulator(users=(1, 2)) as sim:
        made = sim.load_world(FULL_WORLD)
        assert made["users"]["alice"]["contacts"]["bob"] >= 1
        assert made["users"]["alice"]["url"] == sim.url_for("alice")
        assert made["users"]["bob"]["groups"]["team"] >= 1


@pytest.mark.parametrize(
    ("world", "message"),
    [
        ("users = 3\n", "users"),
        ('[[users]]\ncore = "a b"\n', "core"),
        ('[[users]]\ncore = "a"\nuser = 0\n', "user"),
        ('[[users]]\ncore = "a"\nprofile = { fullName = "" }\n', "displayName"),
        ('[[users]]\ncore = "a"\n[[users]]\ncore = "a"\n', "twice"),
        ('contacts = [["a", "b"]]\n', "not a declared user"),
        ('contacts = [["a", "a"]]\n[[users]]\ncore = "a"\n', "contacts"),
        (
            '[[users]]\ncore = "a"\n'
            '[[groups]]\nname = "g"\nowner = "a"\nmembers = [{ user = "a" }]\n',
            "once",
        ),
        (
            '[[users]]\ncore = "a"\n[[users]]\ncore = "b"\n'
            '[[groups]]\nname = "g"\nowner = "a"\nmembers = [{ user = "b", role = "king" }]\n',
            "role",
        ),
        ('[[users]]\ncore = "a"\nsurprise = 1\n', "surprise"),
        ('[[users]]\ncore = "a"\naddress = { name = "Bob" }\n', "SimpleX name"),
        (
            '[[users]]\ncore = "a"\naddress = { name = "x.simplex" }\n'
            '[[users]]\ncore = "b"\naddress = { name = "x.simplex" }\n',
            "already",
        ),
        ("this is = = not toml", "TOML"),
    ],
)
@pytest.mark.anyio
async def test_a_bad_world_is_one_clear_error(tmp_path: Path, world: str, message: str) -> None:
    """A world that breaks the format is refused with :class:`WorldError` (a
    :class:`SimplexRpcError`) naming what is wrong and where; the CLI says it in one line
    on stderr and exits 2, with nothing on stdout."""
    path = tmp_path / "world.toml"
    path.write_text(world)
    with pytest.raises(WorldError, match=message) as caught:
        read_world(path)
    assert isinstance(caught.value, SimplexRpcError)

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simplex_rpc",
        "simulator",
        "--world",
        str(path),
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert out == b""
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simplex-rpc simulator:"), lines
    assert "Traceback" not in err.decode()


def test_a_world_file_that_is_missing_or_of_another_kind(tmp_path: Path) -> None:
    """FILE must exist and be ``.toml`` or ``.json`` (by its name)."""
    with pytest.raises(WorldError, match="cannot read"):
        read_world(tmp_path / "nowhere.toml")
    other = tmp_path / "world.yaml"
    other.write_text("users: []")
    with pytest.raises(WorldError, match=r"\.toml or \.json"):
        read_world(other)
    bad = tmp_path / "world.json"
    bad.write_text('{"users": [], "users": []}')  # strict JSON: a duplicate key
    with pytest.raises(WorldError, match="JSON"):
        read_world(bad)


@pytest.mark.anyio
async def test_the_world_file_of_docs_adapter_md_builds(
    simulator: CoreSimulator,
    tmp_path: Path,
) -> None:
    """The world file docs/adapter.md shows is read and built as it says."""
    text = (HERE.parent / "docs" / "adapter.md").read_text()
    block = text.split("```toml\n# world.toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "world.toml"
    path.write_text(block)
    world = read_world(path)

    made = simulator.load_world(world)
    users = made["users"]
    assert set(users) == {"shop", "alice", "bob"}
    assert users["alice"]["contacts"] == {"bob": users["alice"]["contacts"]["bob"]}
    assert "&rk=" in users["shop"]["address"]["connFullLink"]
    assert {name: set(u["groups"]) for name, u in users.items()} == {
        "shop": {"team"},
        "alice": {"team"},
        "bob": {"team"},
    }

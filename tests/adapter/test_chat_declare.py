"""Profile declarations through the core ("Profile declarations" of the protocol text).

``declare`` writes ``preferences.protocols`` (and ``groupPreferences``) with
``/_profile`` and ``/_group_profile``, merging into the profile; ``serve`` and
``serve_calls`` declare what they serve; ``link_declarations`` reads a link's
data with ``/_connect plan``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from _waiting import until
from simplex_rpc.adapter import ChatCore, IncomingCall, LinkDeclarations
from simplex_rpc.adapter._chat import ReplySink
from simplex_rpc.declarations import ProtocolDeclaration
from simplex_rpc.errors import ChatCoreError, DeclarationError, SimplexRpcError
from simplex_rpc.testing import CoreSimulator

MCP = ProtocolDeclaration(versions=("2026-07-28",), chat=True, rpc=True)
PROFILE = {
    "displayName": "Acme",
    "fullName": "Acme Inc.",
    "shortDescr": "Orders",
    "preferences": {
        "timedMessages": {"allow": "yes"},
        "commands": [{"type": "command", "keyword": "help", "label": "Help"}],
    },
}


@contextlib.asynccontextmanager
async def two_cores() -> AsyncIterator[tuple[CoreSimulator, ChatCore, ChatCore]]:
    async with (
        CoreSimulator() as sim,
        ChatCore.connect(sim.url_for("bot")) as bot,
        ChatCore.connect(sim.url_for("alice")) as alice,
    ):
        for core in (bot, alice):
            await core.start(service_requests=True)
        sim.set_profile("bot", PROFILE)
        yield sim, bot, alice


@pytest.mark.anyio
async def test_declare_merges_into_the_profile() -> None:
    """/_profile replaces the whole profile: declare keeps the rest of the profile and
    its other preferences, and writes preferences.protocols."""

    async with two_cores() as (sim, bot, _):
        written = await bot.declare(1, {"mcp": MCP})
        assert written == {"mcp": MCP}
        profile = sim.profile("bot")
        assert {k: v for k, v in profile.items() if k != "preferences"} == {
            k: v for k, v in PROFILE.items() if k != "preferences"
        }
        preferences = profile["preferences"]
        assert preferences["timedMessages"] == {"allow": "yes"}
        assert preferences["commands"] == PROFILE["preferences"]["commands"]  # type: ignore[index]
        assert preferences["protocols"] == {
            "mcp": {"versions": ["2026-07-28"], "transports": {"chat": True, "rpc": True}}
        }
        # The protocols key is written whole: a later declare replaces it.
        raw = {"a2a": {"versions": ["1.0"], "transports": {"chat": True}}}
        await bot.declare(1, raw)
        assert sim.profile("bot")["preferences"]["protocols"] == raw
        assert await bot.declared(1) == {"a2a": ProtocolDeclaration(versions=("1.0",), chat=True)}


@pytest.mark.anyio
async def test_declare_refuses_what_is_not_a_declaration() -> None:
    async with two_cores() as (sim, bot, _):
        with pytest.raises(DeclarationError, match="not a valid declaration"):
            await bot.declare(1, {"mcp": {"versions": "x", "transports": {}}})
        with pytest.raises(DeclarationError, match="protocol"):
            await bot.declare(1, {"MCP": MCP})
        with pytest.raises(SimplexRpcError, match="user_id"):
            await bot.declare(0, {"mcp": MCP})
        assert "protocols" not in sim.profile("bot")["preferences"]


@pytest.mark.anyio
async def test_group_declaration_goes_into_group_preferences() -> None:
    """A group's declaration is in groupPreferences, without rpc (valid in preferences
    only); only an owner can write it."""

    async with two_cores() as (sim, bot, alice):
        ids = sim.create_group("shop", "bot", ["alice"], preferences={"history": {"enable": "on"}})
        await bot.declare(1, {"mcp": MCP}, group_id=ids[("bot", 1)])
        declared = await alice.declared(1, group_id=ids[("alice", 1)])
        assert declared == {"mcp": ProtocolDeclaration(versions=("2026-07-28",), chat=True)}
        (info,) = (await alice.command("/_groups 1"))["groups"]
        assert info["groupProfile"]["groupPreferences"]["history"] == {"enable": "on"}
        with pytest.raises(ChatCoreError, match="groupUserRole"):
            await alice.declare(1, {"mcp": MCP}, group_id=ids[("alice", 1)])


@pytest.mark.anyio
async def test_business_chat_gets_a_copy_of_the_profile_protocols() -> None:
    """In a business chat, protocols of the business profile MUST be copied into the
    chat's groupPreferences: declare copies them, dropping rpc."""

    async with two_cores() as (sim, bot, alice):
        ids = sim.create_group("Acme", "bot", ["alice"], business=True)
        plain = sim.create_group("other", "bot", ["alice"])
        await bot.declare(1, {"mcp": MCP})
        copied = await alice.declared(1, group_id=ids[("alice", 1)])
        assert copied == {"mcp": ProtocolDeclaration(versions=("2026-07-28",), chat=True)}
        assert await alice.declared(1, group_id=plain[("alice", 1)]) == {}


@pytest.mark.anyio
async def test_serve_and_serve_calls_declare_what_they_serve() -> None:
    """serve(declare=True) declares transports.rpc, serve_calls(declare=True)
    transports.chat; each keeps what the other declared."""

    async def echo(call: IncomingCall, send: ReplySink) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {}})

    async with two_cores() as (sim, bot, _):
        await bot.service_address(1)
        tasks = [
            asyncio.create_task(
                bot.serve(
                    1,
                    lambda r: {},
                    protocols=["mcp"],
                    declare=True,
                    versions={"mcp": ["2026-07-28"]},
                )
            )
        ]
        await until(
            lambda: "protocols" in sim.profile("bot").get("preferences", {}),
            "the declaration in bot's profile",
            within=10,
        )
        assert await bot.declared(1) == {
            "mcp": ProtocolDeclaration(versions=("2026-07-28",), rpc=True)
        }
        tasks.append(
            asyncio.create_task(
                bot.serve_calls(1, {"mcp": echo}, declare=True, versions={"mcp": ["2026-07-28"]})
            )
        )

        async def chat_declared() -> bool:
            return (await bot.declared(1))["mcp"].chat

        await until(chat_declared, "the chat part declared", within=10)
        assert await bot.declared(1) == {"mcp": MCP}
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.anyio
async def test_link_declarations_read_a_contact_address_without_connecting() -> None:
    """/_connect plan returns the link data: the profile's protocols, serves, business."""

    async with two_cores() as (sim, bot, alice):
        address = await bot.service_address(1)
        profile: dict[str, Any] = json.loads(json.dumps(PROFILE))
        profile["preferences"]["protocols"] = {
            "mcp": MCP.to_dict(),
            "a2a": {"versions": ["1.0"]},  # breaks the schema: dropped
        }
        sim.set_profile("bot", profile)
        sim.set_link_data(address.link, serves=["agent", "robot"])
        found = await alice.link_declarations(1, address.link)
        assert found == LinkDeclarations(
            kind="contact",
            name="Acme",
            protocols={"mcp": MCP},
            serves=["agent"],
            audience=None,
            business=False,
        )
        own = await bot.link_declarations(1, address.link)
        assert own.own and own.protocols == {}
        assert sim.stats.messages == 0  # nothing was sent to connect


@pytest.mark.anyio
async def test_link_declarations_read_a_group_link() -> None:
    """A group's link data: groupPreferences.protocols and publicGroup.audience."""

    async with two_cores() as (sim, _bot, alice):
        prefs = {
            "protocols": {"a2a": {"versions": ["1.0"], "transports": {"chat": True, "rpc": True}}}
        }
        ids = sim.create_group("news", "bot", [], preferences=prefs)
        link = sim.group_link("bot", ids[("bot", 1)])
        found = await alice.link_declarations(1, link)
        assert found.kind == "group" and found.name == "news" and found.serves is None
        assert found.protocols == {"a2a": ProtocolDeclaration(versions=("1.0",), chat=True)}
        assert found.audience == ["human"]
        with pytest.raises(ChatCoreError, match="invalidConnReq"):
            await alice.link_declarations(1, "https://example.com/not-a-link")
        with pytest.raises(SimplexRpcError, match="link"):
            await alice.link_declarations(1, "two words")


# -- review of issue 10 -----------------------------------------------------------------


async def _echo(call: IncomingCall, send: ReplySink) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call.request.get("id"), "result": {}})


@pytest.mark.anyio
async def test_serve_and_serve_calls_declaring_together_keep_both_transports() -> None:
    """/_profile replaces the whole profile: declarations on one core are serialized, so
    serve (transports.rpc) and serve_calls (transports.chat) started together both
    take effect."""

    async with two_cores() as (_sim, bot, _):
        await bot.service_address(1)
        versions = {"mcp": ["2026-07-28"]}
        tasks = [
            asyncio.create_task(
                bot.serve(1, lambda r: {}, protocols=["mcp"], declare=True, versions=versions)
            ),
            asyncio.create_task(
                bot.serve_calls(1, {"mcp": _echo}, declare=True, versions=versions)
            ),
        ]

        async def both_declared() -> bool:
            return (await bot.declared(1)).get("mcp") == MCP

        await until(both_declared, "both parts declared", within=10)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert await bot.declared(1) == {"mcp": MCP}


@pytest.mark.anyio
async def test_a_declaration_without_versions_is_refused() -> None:
    """versions is required: the versions the bot serves. A handler function does not
    say which it serves, so declare=True without versions is refused, and nothing is
    written."""

    async with two_cores() as (sim, bot, _):
        with pytest.raises(SimplexRpcError, match="versions of 'mcp' are not known"):
            await bot.serve_calls(1, {"mcp": _echo}, declare=True)
        with pytest.raises(SimplexRpcError, match="no versions to declare for 'mcp'"):
            await bot.serve(1, lambda r: {}, protocols=["mcp"], declare=True)
        with pytest.raises(SimplexRpcError, match="not among the served protocols"):
            await bot.serve_calls(1, {"mcp": _echo}, declare=True, versions={"a2a": ["1.0"]})
        assert "protocols" not in sim.profile("bot")["preferences"]


@pytest.mark.anyio
async def test_a_bridge_declares_the_versions_it_serves() -> None:
    """An McpBridge knows the revisions it serves: serve_calls declares them."""
    pytest.importorskip("mcp.server")
    from _cli_serving import EXAMPLE
    from simplex_rpc.cli._serve import _mcp_server
    from simplex_rpc.mcp import McpBridge

    async with two_cores() as (_sim, bot, _):
        bridge = McpBridge(_mcp_server(f"{EXAMPLE}:build_server"))
        task = asyncio.create_task(bot.serve_calls(1, {"mcp": bridge}, declare=True))

        async def mcp_declared() -> dict[str, ProtocolDeclaration]:
            found = await bot.declared(1)
            return found if "mcp" in found else {}

        declared = await until(mcp_declared, "the bridge's declaration", within=10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert declared["mcp"].versions == bridge.supported and bridge.supported
        assert declared["mcp"].chat and not declared["mcp"].rpc


@pytest.mark.anyio
async def test_link_declarations_of_a_known_contact_read_its_profile() -> None:
    """ContactAddressPlan known carries contact: Contact (TYPES.md), whose profile holds
    the preferences: its declarations are read from there (source "contact")."""

    async with two_cores() as (sim, bot, alice):
        address = await bot.service_address(1)
        profile: dict[str, Any] = json.loads(json.dumps(PROFILE))
        profile["preferences"]["protocols"] = {"mcp": MCP.to_dict()}
        sim.set_profile("bot", profile)
        sim.connect("alice", "bot")
        found = await alice.link_declarations(1, address.link)
        assert found.source == "contact" and found.name == "Acme"
        assert found.protocols == {"mcp": MCP} and found.serves is None


@pytest.mark.anyio
async def test_link_declarations_tell_no_data_from_declaring_nothing() -> None:
    """ContactAddressPlan ok may carry contactSLinkData_ null (a full link has no short
    link data): source None, unlike a profile that declares nothing (source "link")."""

    async with two_cores() as (_sim, bot, alice):
        address = await bot.service_address(1)
        assert address.short_link and address.full_link
        empty = await alice.link_declarations(1, address.short_link)
        assert empty.source == "link" and empty.protocols == {}
        unknown = await alice.link_declarations(1, address.full_link)
        assert unknown.source is None and unknown.protocols == {}
        assert unknown.serves is None and unknown.name is None
        own = await bot.link_declarations(1, address.link)
        assert own.own and own.source is None


@pytest.mark.parametrize(
    ("plan", "source"),
    [
        # ContactAddressPlan (TYPES.md): contactViaAddress and connectingProhibit carry
        # contact: Contact, whose profile is a LocalProfile with preferences.
        (
            {
                "type": "contactAddress",
                "contactAddressPlan": {
                    "type": "contactViaAddress",
                    "contact": {
                        "contactId": 3,
                        "localDisplayName": "acme",
                        "profile": {"displayName": "Acme", "preferences": {"protocols": {}}},
                    },
                },
            },
            "contact",
        ),
        (
            {
                "type": "contactAddress",
                "contactAddressPlan": {
                    "type": "connectingProhibit",
                    "contact": {
                        "contactId": 3,
                        "localDisplayName": "acme",
                        "profile": {"displayName": "Acme", "preferences": {"protocols": {}}},
                    },
                },
            },
            "contact",
        ),
        # GroupLinkPlan connectingProhibit carries groupInfo_: GroupInfo? (TYPES.md).
        (
            {
                "type": "groupLink",
                "groupLinkPlan": {
                    "type": "connectingProhibit",
                    "groupInfo_": {
                        "groupId": 4,
                        "groupProfile": {"displayName": "Acme", "groupPreferences": {}},
                    },
                },
            },
            "group",
        ),
        ({"type": "groupLink", "groupLinkPlan": {"type": "connectingProhibit"}}, None),
    ],
)
def test_link_declarations_read_every_plan_that_carries_a_profile(
    plan: dict[str, Any], source: str | None
) -> None:
    """Each plan variant that carries a contact or group is read, with its source."""
    from simplex_rpc.adapter._declare import _contact_plan, _group_plan

    mcp_entry = MCP.to_dict()
    if plan["type"] == "contactAddress":
        inner = plan["contactAddressPlan"]
        inner["contact"]["profile"]["preferences"]["protocols"]["mcp"] = mcp_entry
        found = _contact_plan(inner)
        expected = {"mcp": MCP}
    else:
        inner = plan["groupLinkPlan"]
        group = inner.get("groupInfo_")
        if group is not None:
            group["groupProfile"]["groupPreferences"]["protocols"] = {"mcp": mcp_entry}
        found = _group_plan(inner)
        # In groupPreferences, rpc is not a transport (preferences only).
        expected = {"mcp": ProtocolDeclaration(versions=MCP.versions, chat=True)} if group else {}
    assert found.source == source
    assert found.protocols == expected
    assert (found.name == "Acme") == (source is not None)


@pytest.mark.anyio
async def test_serve_declaring_answers_a_request_that_arrives_while_it_declares() -> None:
    """serve(declare=True) takes requests before it writes the profile: a request that
    arrives during the declaration's round trips is answered, not dropped (the
    responder answers each request once, "Service RPC transport")."""
    from simplex_rpc import Request

    async with two_cores() as (sim, bot, alice):
        link = (await bot.service_address(1)).link
        asked: list[asyncio.Task[Any]] = []
        handled: list[Any] = []

        def handler(r: Any) -> Any:
            handled.append(r.request.request)
            return {"echo": r.request.request}

        # The declarations part reads the profile before writing it: slowed down here.
        declared = bot._declarations.declared

        async def slow_declared(user_id: int) -> Any:
            # The request is sent, delivered and read before the profile is read.
            asked.append(
                asyncio.create_task(
                    alice.service_request(
                        1, link, Request(protocol="mcp", request={"n": 1}), timeout=20
                    )
                )
            )
            await until(lambda: handled, "the request read and handled", within=10)
            return await declared(user_id)

        bot._declarations.declared = slow_declared  # type: ignore[method-assign]
        serving = asyncio.create_task(
            bot.serve(
                1,
                handler,
                protocols=["mcp"],
                declare=True,
                versions={"mcp": ["2026-07-28"]},
            )
        )
        try:
            await until(lambda: asked, "the request sent", within=15)
            async with asyncio.timeout(15):
                response = await asked[0]
            assert response.response == {"echo": {"n": 1}}
            assert sim.stats.requester_timeouts == 0
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving

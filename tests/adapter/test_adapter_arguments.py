"""Wrong arguments to the adapter are the library's errors, naming the argument.

"Bad input always gets a clear error of the library's own class": a ChatRef
has one rule everywhere (TYPES.md ``ChatRef``: ``@<contactId>`` or
``#<groupId>``, the id an Int64 record id, 1 <= id < 2**63); every duration
is a positive, finite number of seconds, checked by one rule; ``serve``'s
``rate_limit`` and ``versions``, ``command``'s ``timeout`` and
``service_request``'s ``max_retry_after`` are checked before anything is
sent; a command argument JSON cannot carry is refused, not sent broken.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client import ClientConfig

from simplex_rpc import Request
from simplex_rpc.a2a import register_client
from simplex_rpc.adapter import ChatCore, IncomingCall, RateLimit, ReplySink
from simplex_rpc.adapter._chat import check_chat_ref
from simplex_rpc.adapter._core import _dump_command_json
from simplex_rpc.errors import ChatCoreError, SimplexRpcError
from simplex_rpc.mcp import SimplexTransport
from simplex_rpc.testing import CoreSimulator

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
LARGEST_ID = 2**63 - 1


async def _handler(call: IncomingCall, send: ReplySink) -> str:
    return "{}"


def _ok(request: Any) -> dict[str, Any]:
    return {}


@contextlib.asynccontextmanager
async def core() -> AsyncIterator[tuple[CoreSimulator, ChatCore]]:
    async with CoreSimulator() as sim, ChatCore.connect(sim.url_for("bot")) as bot:
        await bot.start(service_requests=True)
        yield sim, bot


# -- one ChatRef rule ----------------------------------------------------------------


@pytest.mark.parametrize("ref", ["@1", "#7", f"@{LARGEST_ID}", "#1000000000000000000"])
def test_a_chat_ref_is_an_int64_record_id_up_to_two_to_the_63_minus_one(ref: str) -> None:
    """A 19-digit id below 2**63 is a valid contact or group id of the core."""
    assert check_chat_ref(ref, "chat") == ref


@pytest.mark.parametrize(
    "ref",
    [f"@{2**63}", "@99999999999999999999", "@0", "#01", "@", "5", "@-1", "@5 ", "@\u0661", "*5"],
)
def test_a_chat_ref_outside_the_int64_ids_is_refused_naming_where(ref: str) -> None:
    with pytest.raises(SimplexRpcError, match=r"^conversation: expected a ChatRef"):
        check_chat_ref(ref, "conversation")


@pytest.mark.parametrize("value", [None, 5, True, b"@5"])
def test_a_chat_ref_is_text(value: object) -> None:
    with pytest.raises(SimplexRpcError, match="chat: expected a ChatRef"):
        check_chat_ref(value, "chat")


@pytest.mark.anyio
async def test_call_takes_every_int64_chat_id_and_refuses_one_past_it() -> None:
    """call() and both SDK clients share the one rule: @2**63 is refused everywhere,
    and a 19-digit id below it gets past the check to the core."""

    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match="chat: expected a ChatRef"):
            await bot.call(f"@{2**63}", "mcp", PING, wait=1)
        with pytest.raises(ChatCoreError) as caught:  # past the check: the core answers
            await bot.call("@1000000000000000000", "mcp", PING, wait=1)
        assert "ChatRef" not in str(caught.value)
        with pytest.raises(SimplexRpcError, match="expected a ChatRef"):
            SimplexTransport(bot, 1, f"@{2**63}", via="chat")
        assert SimplexTransport(bot, 1, f"@{LARGEST_ID}", via="chat").target == (f"@{LARGEST_ID}")
        link = (await bot.service_address(1)).link
        with pytest.raises(SimplexRpcError, match="expected a ChatRef"):
            register_client(ClientConfig(), bot, 1, chats={link: f"@{2**63}"})
        register_client(ClientConfig(), bot, 1, chats={link: f"@{LARGEST_ID}"})


# -- one seconds rule ------------------------------------------------------------------


BAD_SECONDS = [True, 0, -1, math.nan, math.inf, "5"]


@pytest.mark.parametrize("seconds", BAD_SECONDS)
@pytest.mark.anyio
async def test_handler_timeout_of_serve_is_a_positive_finite_number_of_seconds(
    seconds: Any,
) -> None:
    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^handler_timeout: expected a"):
            await bot.serve(1, _ok, protocols=["mcp"], handler_timeout=seconds)


@pytest.mark.parametrize("seconds", BAD_SECONDS)
@pytest.mark.anyio
async def test_handler_timeout_of_serve_calls_is_a_positive_finite_number_of_seconds(
    seconds: Any,
) -> None:
    """serve_calls took True as 1 s and inf as no limit: the same rule as serve now."""

    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^handler_timeout: expected a"):
            await bot.serve_calls(1, {"mcp": _handler}, handler_timeout=seconds)


@pytest.mark.parametrize("seconds", BAD_SECONDS)
@pytest.mark.anyio
async def test_wait_of_call_is_a_positive_finite_number_of_seconds(seconds: Any) -> None:
    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^wait: expected a"):
            await bot.call("@1", "mcp", PING, wait=seconds)


@pytest.mark.parametrize("seconds", BAD_SECONDS)
@pytest.mark.anyio
async def test_timeout_of_command_is_an_argument_error_not_a_core_timeout(seconds: Any) -> None:
    """command(timeout=-1) is a wrong argument, not "the core did not answer within -1 s"."""

    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^timeout: expected a") as caught:
            await bot.command("/user", timeout=seconds)
        assert not isinstance(caught.value, ChatCoreError)
        assert (await bot.command("/user", timeout=None))["type"] == "activeUser"


@pytest.mark.parametrize("seconds", [True, 0, -1, math.nan, math.inf, "60"])
@pytest.mark.anyio
async def test_max_retry_after_is_checked_before_the_request_is_sent(seconds: Any) -> None:
    async with core() as (sim, bot):
        link = (await bot.service_address(1)).link
        request = Request(protocol="mcp", request=PING)
        with pytest.raises(SimplexRpcError, match=r"^max_retry_after: expected a"):
            await bot.service_request(1, link, request, max_retry_after=seconds)
        assert sim.stats.requests == 0


# -- serve's other arguments -------------------------------------------------------------


@pytest.mark.parametrize("rate_limit", [5, 2.5, "10/s", {"rate": 1}])
@pytest.mark.anyio
async def test_rate_limit_of_serve_is_a_rate_limit_or_none(rate_limit: Any) -> None:
    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^rate_limit: expected a RateLimit"):
            await bot.serve(1, _ok, protocols=["mcp"], rate_limit=rate_limit)


@pytest.mark.parametrize("served", [5, None, "2025-06-18", b"1.0"])
@pytest.mark.anyio
async def test_each_versions_entry_of_serve_is_a_collection_of_versions(served: Any) -> None:
    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^versions\['mcp'\]: expected a collection"):
            await bot.serve(1, _ok, protocols=["mcp"], versions={"mcp": served})


@pytest.mark.anyio
async def test_a_rate_limit_is_still_taken() -> None:
    """The check refuses what is not a RateLimit, nothing else."""

    async with core() as (_sim, bot):
        with pytest.raises(SimplexRpcError, match=r"^grace"):  # the next check: it got there
            await bot.serve(
                1, _ok, protocols=["mcp"], rate_limit=RateLimit(requests=10, per=1.0), grace=-1
            )


# -- command JSON ---------------------------------------------------------------------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"text": "\ud800"}, "lone surrogate"),
        ({"n": math.nan}, "Out of range float"),
        (_nested(100_000), "nested too deeply"),
        ({"key": object()}, "not JSON serializable"),
    ],
)
def test_a_command_argument_json_cannot_carry_is_the_librarys_error(value: Any, says: str) -> None:
    """The adapter's command JSON follows the library's JSON rules (_json.dumps): a lone
    surrogate, NaN, nesting too deep or a foreign type is a SimplexRpcError naming
    where, never a UnicodeEncodeError later in the transport or a RecursionError."""
    with pytest.raises(SimplexRpcError, match=f"^the reply: cannot be sent as JSON: .*{says}"):
        _dump_command_json(value, "the reply")


def test_command_json_is_one_compact_line() -> None:
    assert _dump_command_json({"a": [1, "é\n"]}, "x") == '{"a":[1,"é\\n"]}'

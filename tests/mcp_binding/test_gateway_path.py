"""What the gateway benchmark's path through the simulator must not pay (issue 18, "Benchmark").

The simulator stands in for the chat core; it must not add costs the core does
not have, or the benchmark measures the simulator instead of the gateway.
"""

from __future__ import annotations

import asyncio

import pytest

from simplex_rpc.testing import CoreSimulator


@pytest.mark.anyio
async def test_the_simulator_declines_permessage_deflate_as_the_core_does(
    simulator: CoreSimulator,
) -> None:
    """The core's WebSocket server accepts with ``WS.defaultConnectionOptions``
    (simplex-chat ``apps/simplex-chat/Server.hs``: ``getConnection sock =
    WS.makePendingConnection sock WS.defaultConnectionOptions >>= WS.acceptRequest``),
    whose compression is off: a client that offers ``permessage-deflate`` gets no
    extension, and frames travel uncompressed."""
    from websockets.asyncio.client import connect

    async with connect(simulator.url_for("alice"), compression="deflate") as ws:
        assert ws.request is not None and ws.response is not None
        offered = ws.request.headers.get("Sec-WebSocket-Extensions", "")
        assert "permessage-deflate" in offered
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        await ws.send('{"corrId":"1","cmd":"/user"}')
        async with asyncio.timeout(10):
            answer = await ws.recv()
        assert '"activeUser"' in answer

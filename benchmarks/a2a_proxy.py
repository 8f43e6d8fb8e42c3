"""``make bench``: a one-shot A2A task through ``a2a-proxy``, against the SDK's client direct.

    .venv/bin/python benchmarks/a2a_proxy.py            # 40 rounds
    .venv/bin/python benchmarks/a2a_proxy.py --rounds 5 # a smoke run

One agent, two ways to it, each timed with a2a-sdk's own client
(``ClientFactory`` from the card at the well-known URI, ``SendMessage``):

* direct: the client to the agent's JSON-RPC HTTP binding
  (``tests/_a2a_upstream.py`` under uvicorn);
* through SimpleX: the client to ``simplex-rpc a2a-proxy`` (Service RPC), the
  simulator's cores, and ``simplex-rpc serve --a2a-url`` in front of the same
  agent.

Every process runs on this machine, on loopback. Each round times both ways
once, in an order that alternates from round to round (interleaved, so that
the load of a shared machine falls on both); the report gives each median
and the ratio of the medians. The target is at most 3x the direct median: a
ratio, reported, never asserted (a benchmark on a shared machine measures
the machine too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "_a2a_upstream.py"
PY = sys.executable
TARGET = 3.0


def _read(stream: Any, pattern: str, what: str) -> str:
    for line in stream:
        match = re.search(pattern, line)
        if match:
            return match.group(1)
    raise SystemExit(f"{what} ended before printing {pattern!r}")


def _start(args: list[str], pattern: str, what: str, *, stderr: bool = False) -> tuple[Any, str]:
    process = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL if stderr else subprocess.PIPE,
        stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return process, _read(process.stderr if stderr else process.stdout, pattern, what)


def _message() -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text="instant")]
        )
    )


async def _measure(direct_url: str, proxy_url: str, rounds: int) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        clients = {}
        for name, url in (("direct", direct_url), ("a2a-proxy", proxy_url)):
            card = await A2ACardResolver(http, url).get_agent_card()
            config = ClientConfig(streaming=False, httpx_client=http)
            clients[name] = ClientFactory(config).create(card)

        async def once(name: str) -> float:
            start = time.perf_counter()
            events = [e async for e in clients[name].send_message(_message())]
            elapsed = time.perf_counter() - start
            if events[-1].task.status.state != pb.TASK_STATE_COMPLETED:
                raise SystemExit(f"{name}: the task did not complete: {events[-1]}")
            return elapsed

        for name in clients:  # warm up: connections, caches
            await once(name)
        times: dict[str, list[float]] = {name: [] for name in clients}
        order = list(clients)
        for _ in range(rounds):
            for name in order:
                times[name].append(await once(name))
            order.reverse()
    direct = statistics.median(times["direct"])
    proxied = statistics.median(times["a2a-proxy"])
    return {
        "rounds": rounds,
        "direct_median_ms": round(direct * 1000, 2),
        "proxy_median_ms": round(proxied * 1000, 2),
        "ratio": round(proxied / direct, 2),
        "target": TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds (default 40)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    processes: list[Any] = []
    try:
        upstream, upstream_url = _start(
            [PY, str(UPSTREAM)], r"^listening: (http://\S+)", "the upstream agent"
        )
        processes.append(upstream)
        sim, sim_url = _start(
            [PY, "-m", "simplex_rpc", "simulator", "--port", "0"],
            r"^listening: (ws://\S+)",
            "the simulator",
        )
        processes.append(sim)
        bot, link = _start(
            [
                *(PY, "-m", "simplex_rpc", "serve", "--core", f"{sim_url}/bot"),
                *("--a2a-url", upstream_url, "--address"),
            ],
            r"^address: (\S+)",
            "the bot",
        )
        processes.append(bot)
        proxy, proxy_url = _start(
            [PY, "-m", "simplex_rpc", "a2a-proxy", "--core", f"{sim_url}/alice", link],
            r"^listening: (http://\S+)",
            "a2a-proxy",
        )
        processes.append(proxy)
        result = asyncio.run(_measure(upstream_url, proxy_url, args.rounds))
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    if args.json:
        print(json.dumps(result))
    else:
        verdict = "within" if result["ratio"] <= TARGET else "ABOVE"
        print(
            "a2a SendMessage, median of {rounds} interleaved rounds:"
            " direct {direct_median_ms} ms, a2a-proxy {proxy_median_ms} ms,"
            " ratio {ratio}x".format(**result)
            + f" ({verdict} the {TARGET:g}x target)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

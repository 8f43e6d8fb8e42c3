"""`serve` checks before it acts (issue 22, item 3).

"`serve --mcp-module examples/mcp_two_tools.py` (missing `:NAME`) and `serve --protocol
'BAD NAME'` connect and send `/_start ... service_requests=on` before refusing. [...]
Check every argument, import the module, and build the server before connecting."

Each bad invocation runs against a scripted chat core (tests/_scripted_core.py) that
records every connection and command: the refusal is one line, exit 2, and the core
saw no connection at all, so no ``/_start`` was sent. A good invocation against the
same core does connect and send ``/_start`` (the control that shows the core records).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from _scripted_core import ScriptedCore

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "examples" / "mcp_two_tools.py"

FILES = {
    "raises.py": "raise RuntimeError('boom on import')\n",
    "factory.py": "def build():\n    raise RuntimeError('factory boom')\n\nnot_a_server = 42\n",
}

BAD = [
    pytest.param(["--mcp-module", str(MODULE)], "MODULE:NAME", id="module-without-name"),
    pytest.param(["--echo", "--protocol", "BAD NAME"], "BAD NAME", id="bad-protocol-name"),
    pytest.param(["--mcp-module", "{tmp}/raises.py:x"], "boom on import", id="module-raises"),
    pytest.param(["--mcp-module", "{tmp}/factory.py:build"], "factory boom", id="factory-raises"),
    pytest.param(
        ["--mcp-module", "{tmp}/factory.py:not_a_server"], "not an MCP server", id="not-a-server"
    ),
    pytest.param(["--mcp-module", "{tmp}/nope.py:x"], "cannot import", id="module-missing"),
    pytest.param(["--echo", "--declare"], "--declare", id="echo-declare"),
]


async def serve(url: str, argv: list[str], *, wait: bool = True) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simplex_rpc",
        "serve",
        "--core",
        url,
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("argv", "needle"), BAD)
async def test_a_bad_argument_is_refused_before_connecting(
    argv: list[str], needle: str, tmp_path: Path
) -> None:
    """ "Check every argument, import the module, and build the server before connecting.\""""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    async with ScriptedCore() as fake:
        process = await serve(fake.url, argv)
        out, err = await process.communicate()
        text = err.decode()
        assert process.returncode == 2, text
        assert "Traceback" not in text and text.count("\n") == 1, text
        assert needle in text, text
        assert out == b""
        assert not fake.connected.is_set(), "serve connected before refusing"
        assert fake.commands.empty(), "serve sent a command before refusing"


@pytest.mark.anyio
async def test_a_good_invocation_connects_and_starts_the_core() -> None:
    """The control: the scripted core does see serve's connection and its /_start."""
    async with ScriptedCore() as fake:
        process = await serve(fake.url, ["--echo"])
        try:
            first = await fake.commands.get()
            assert first.startswith("/_start") and "service_requests=on" in first
        finally:
            process.kill()
            await process.wait()

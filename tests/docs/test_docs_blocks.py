"""Every fenced code block of README.md and docs/*.md runs, or says why not (issue 22, item 9).

"A test runs every fenced `python` and `sh` block of README and docs, or marks one as
not runnable with a visible reason." Blocks fenced ``python`` or ``py`` run as Python
programs from the repository root; ``sh`` blocks run under bash; ``console`` blocks are
shell sessions: each ``$ `` line (with its ``\\`` continuations) runs in one shell, and
the output shown under it must be the output it prints (JSON compared as JSON). A
command whose output is not shown must succeed.

A block that cannot run here (it needs the network, minutes, or a program that is not
installed) has, on the line right above its fence::

    <!-- not run: the reason -->

and is reported as a skip with that reason and its place (``docs/x.md:12``), so the
reason is visible both in the page's source and in the test run.

Shell blocks run in a fresh directory that links the checkout's ``.venv``, ``examples``
and ``benchmarks``, with the venv's ``bin`` first on ``PATH``; a block that names the
simulator's address ``ws://127.0.0.1:5225`` gets a simulator of its own on a free port
in its place; background jobs (``&``) are killed with the block's process group.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from _simulator_thread import SimulatorThread

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "HELPERS.md"),
]
SIM_URL = "ws://127.0.0.1:5225"
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "console": "console"}
FENCE = re.compile(r"^```(\w*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->\s*$")
LINKED = (".venv", "examples", "benchmarks")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # the line of the opening fence, counting from 1
    language: str  # python, sh or console
    text: str
    not_run: str | None  # the visible reason, when marked

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks_of(doc: Path) -> list[Block]:
    """The python, sh and console blocks of ``doc``, with their not-run marks."""
    found: list[Block] = []
    lines = doc.read_text("utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, language = i, match.group(1)
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if language in LANGUAGES:
            above = lines[start - 1] if start > 0 else ""
            mark = NOT_RUN.match(above)
            found.append(
                Block(
                    doc,
                    start + 1,
                    LANGUAGES[language],
                    "\n".join(body) + "\n",
                    mark.group(1) if mark else None,
                )
            )
    return found


BLOCKS = [block for doc in DOCS for block in blocks_of(doc)]


def test_the_docs_have_blocks() -> None:
    assert len(BLOCKS) >= 40
    assert {b.language for b in BLOCKS} == {"python", "sh", "console"}


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    # The pages describe a normal install, where the C backend runs.
    env.pop("SIMPLEX_RPC_PURE", None)
    return env


def _workdir(tmp_path: Path) -> Path:
    for name in LINKED:
        target = ROOT / name if name != ".venv" else Path(sys.prefix)
        if target.exists():
            (tmp_path / name).symlink_to(target)
    return tmp_path


def _run(argv: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run in a new process group; the group (background jobs included) is killed after."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
        raise AssertionError(f"did not finish within {timeout} s; stderr: {err[-2000:]}") from None
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


# -- console sessions ------------------------------------------------------------------


@dataclass
class Step:
    command: str
    shown: list[str]


def console_steps(text: str) -> list[Step]:
    """The ``$ `` commands of a console block, each with the output shown under it."""
    steps: list[Step] = []
    continuing = False
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line[2:], []))
            continuing = line.endswith("\\")
        elif continuing:
            steps[-1].command += "\n" + line
            continuing = line.endswith("\\")
        elif steps:
            steps[-1].shown.append(line)
    return steps


MARK = "@@docs-test-step@@"


def _console_script(steps: list[Step]) -> str:
    # Each command's output (stdout and stderr together, as a terminal shows them) comes
    # after a marker line with the previous command's exit status.
    parts = ["exec 2>&1"]
    # The marker keeps $? for the next command (`echo $?` on the page).
    mark = f'_status=$?; echo "{MARK} $_status"; (exit $_status)'
    for step in steps:
        parts.append(mark)
        parts.append(step.command)
    parts.append(mark)
    return "\n".join(parts) + "\n"


def _same_output(shown: list[str], printed: list[str]) -> bool:
    want = "\n".join(shown).strip()
    got = "\n".join(printed).strip()
    if want == got:
        return True
    try:
        return bool(json.loads(want) == json.loads(got))
    except ValueError:
        return False


def check_console(block: Block, cwd: Path, text: str) -> None:
    """Run the page's session up to this block in one shell (files and variables of the
    earlier blocks, such as ``$AD`` and ``alice.key``, are there); check this block."""
    steps = console_steps(text)
    assert steps, f"{block.where}: a console block without a '$ ' command"
    earlier = [
        step
        for b in BLOCKS
        if b.doc == block.doc and b.language == "console" and b.line < block.line
        and b.not_run is None
        for step in console_steps(b.text)
    ]  # fmt: skip
    done = _run(["bash", "-c", _console_script(earlier + steps)], cwd)
    chunks = done.stdout.split(MARK + " ")[1 + len(earlier) :]
    statuses = [int(chunk.split("\n", 1)[0]) for chunk in chunks]
    outputs = [chunk.split("\n", 1)[1] if "\n" in chunk else "" for chunk in chunks]
    assert len(chunks) == len(steps) + 1, f"{block.where}: the session stopped: {done.stdout}"
    for k, step in enumerate(steps):
        # Chunk k holds the status of the command before it, then command k's output.
        printed = outputs[k].splitlines()
        status = statuses[k + 1]
        if step.shown:
            assert _same_output(step.shown, printed), (
                f"{block.where}: `{step.command}` printed:\n" + "\n".join(printed)
                + "\nbut the page shows:\n" + "\n".join(step.shown)
            )  # fmt: skip
        else:
            assert status == 0, f"{block.where}: `{step.command}` exit {status}: {printed}"


# -- the test --------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_block_runs(block: Block, tmp_path: Path) -> None:
    """Each block runs as written (its simulator address pointed at a simulator of its own)."""
    if block.not_run is not None:
        pytest.skip(f"{block.where}: not run: {block.not_run}")
    with SimulatorThread() if SIM_URL in block.text else _nothing() as sim:
        text = block.text if sim is None else block.text.replace(SIM_URL, sim.url)
        if block.language == "python":
            script = tmp_path / "block.py"
            script.write_text(text, "utf-8")
            done = _run([sys.executable, str(script)], ROOT)
            assert done.returncode == 0, (
                f"{block.where}: exit {done.returncode}\n{done.stderr[-3000:]}"
            )
        elif block.language == "sh":
            done = _run(["bash", "-euo", "pipefail", "-c", text], _workdir(tmp_path))
            assert done.returncode == 0, (
                f"{block.where}: exit {done.returncode}\n{done.stderr[-3000:]}"
            )
        else:
            check_console(block, _workdir(tmp_path), text)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

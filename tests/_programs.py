"""``simplex-rpc`` run as a real process, read line by line: for the tests where a
process is the point.

No tests here.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _simulator_thread import SimulatorThread

ROOT = Path(__file__).resolve().parent.parent


class Program:
    """A ``python -m simplex_rpc ...`` process whose output lines are read by threads."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "simplex_rpc", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            cwd=ROOT,
        )
        self.lines: dict[str, queue.Queue[str]] = {"out": queue.Queue(), "err": queue.Queue()}
        self.seen: dict[str, list[str]] = {"out": [], "err": []}
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._read, args=(name, stream), daemon=True).start()

    def _read(self, name: str, stream: object) -> None:
        assert hasattr(stream, "readline")
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.seen[name].append(line)
            self.lines[name].put(line)

    def wait_for(self, stream: str, prefix: str, limit: float = 30.0) -> str:
        """The rest of the first line on ``stream`` that starts with ``prefix`` (bounded)."""
        deadline = time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {prefix!r} line within {limit} s: {self.seen}")
            try:
                line = self.lines[stream].get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines[stream].empty():
                    raise AssertionError(
                        f"exited ({self.proc.returncode}) before {prefix!r}: {self.seen}"
                    ) from None
                continue
            if line.startswith(prefix):
                return line[len(prefix) :]

    def stop(self, sig: int = signal.SIGINT, limit: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"did not stop within {limit} s after signal {sig}") from None


@contextmanager
def serving(sim: SimulatorThread, *upstream: str) -> Iterator[tuple[Program, str]]:
    """``simplex-rpc serve`` for core ``bot`` with the given upstream options; its address."""
    program = Program("serve", "--core", f"{sim.url}/bot", "--address", *upstream)
    try:
        link = program.wait_for("out", "address: ")  # a ready line, on stdout
        yield program, link
    finally:
        program.stop()


CLI = [sys.executable, "-m", "simplex_rpc"]


class Running:
    """A ``simplex-rpc`` subprocess whose stdout lines are read with a bound in time."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def line(self, within: float = 60.0) -> str:
        """The next stdout line; an AssertionError with stderr if none comes in time."""
        got: list[str] = []
        assert self.process.stdout is not None
        reader = threading.Thread(
            target=lambda: got.append(self.process.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(within)
        if not got or not got[0]:
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"no ready line within {within} s; stderr: {err}")
        return got[0].rstrip("\n")

    def stop(self, how: int = signal.SIGTERM, within: float = 60.0) -> tuple[int, str, str]:
        """Send ``how``; the exit status, the rest of stdout and stderr."""
        self.process.send_signal(how)
        try:
            out, err = self.process.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate(timeout=30)
            raise AssertionError(f"no exit within {within} s after signal {how}; {err}") from None
        return self.process.returncode, out, err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=30)

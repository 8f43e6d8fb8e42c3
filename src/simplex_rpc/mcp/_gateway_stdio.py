"""The gateway's own stdio transport to an MCP server: bounded lines, lenient UTF-8.

The SDK's ``stdio_client`` joins every chunk of the child's standard output
to the text before it until a newline comes (quadratic in a line's length,
and unbounded in memory), and decodes strictly, so that one invalid byte
ends its reader for good while the session waits (issue 32, items 1 and 8).
This transport reads the child's stdout itself and hands the SDK's
``Client`` the same pair of memory streams ``stdio_client`` does:

* :class:`LineSplitter` (no I/O) cuts the bytes into lines of at most
  ``limit`` bytes in one pass over them; a longer line is dropped as it
  streams by (only a short head and tail of it are kept, to name it and to
  find its ``id``), so memory stays below ``limit`` plus one read;
* invalid UTF-8 is replaced (U+FFFD) and logged once per :class:`StdioOptions`;
* a dropped line that was the answer to a request (its ``id`` is the first
  or the last member of the object) becomes a JSON-RPC error for that
  request, so the caller is answered at once rather than at its deadline;
* on the way out the child's stdin is closed, then the process group gets
  SIGTERM and SIGKILL (the SDK's ``terminate_posix_process_tree``), each
  wait bounded, and its stdout is drained meanwhile so that it can exit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from .._wire.redact import RedactingLogger, show

log = RedactingLogger(logging.getLogger("simplex_rpc.mcp.upstream"))

LINE_LIMIT: Final = 262_144
"""The longest line (bytes, without its newline) read from an MCP server's standard output.

The longest answer a SimpleX caller can get is one chat message of 15,602 bytes
of JSON (``chat.MAX_MESSAGE_JSON``; a Service RPC response is smaller, 11,106
bytes a block); the server's JSON of that answer may be several times longer
(``\\uXXXX`` escapes of non-ASCII text, white space), so the limit is 16 times
16 KiB: an answer that could reach the caller is never dropped, and one that
could not costs at most this much memory."""

READ_SIZE: Final = 65_536
"""Bytes asked of the pipe per read."""

EXCERPT: Final = 256
"""Bytes kept of the head and of the tail of a dropped line (to find its ``id``)."""

EXIT_GRACE: Final = 2.0
"""Seconds the child has to exit after its stdin closes, before SIGTERM (then SIGKILL
after as many again): the SDK's own shutdown sequence."""

# The id of a JSON-RPC response, where it is certainly the top-level member and the line
# certainly a response (not the server's own request, whose id is in the server's space):
# "id" first (after "jsonrpc") and "result" or "error" next, or "result" or "error" first
# and "id" the last member before the closing brace.
_ID: Final = r'"id"\s*:\s*(-?\d{1,19}|"(?:[^"\\]|\\.){0,128}")'
_JSONRPC: Final = r'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_ID_FIRST: Final = re.compile(_JSONRPC + _ID + r'\s*,\s*"(?:result|error)"\s*:')
_ANSWER_FIRST: Final = re.compile(_JSONRPC + r'"(?:result|error)"\s*:')
_ID_LAST: Final = re.compile(r",\s*" + _ID + r"\s*\}\s*$")


@dataclass(frozen=True)
class Dropped:
    """A line longer than the limit, dropped: its size, and its first and last bytes."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self) -> int | str | None:
        """The ``id`` of the response this line was, when it can be told for certain."""
        head = self.head.decode("utf-8", "replace")
        first = _ID_FIRST.match(head)
        last = None
        if _ANSWER_FIRST.match(head) is not None:
            last = _ID_LAST.search(self.tail.decode("utf-8", "replace"))
        for found in (first, last):
            if found is None:
                continue
            try:
                value = json.loads(found.group(1))
            except ValueError:
                continue
            if isinstance(value, (int, str)):
                return value
        return None


class LineSplitter:
    """Bytes in, lines out: each line at most ``limit`` bytes, in linear time.

    :meth:`feed` returns the lines a chunk completes (without ``\\n`` or a
    trailing ``\\r``), and a :class:`Dropped` for each line that grew past
    ``limit``: the bytes of such a line are not kept beyond :data:`EXCERPT` of
    its head and tail. Each byte is looked at once; the buffer never holds
    more than ``limit`` bytes.
    """

    def __init__(self, limit: int = LINE_LIMIT) -> None:
        if limit < 1:
            raise ValueError("LineSplitter: limit must be at least 1 byte")
        self.limit = limit
        self._buffer = bytearray()
        self._dropping = 0  # bytes of the line being dropped so far; 0 when not dropping
        self._head = b""
        self._tail = b""

    @property
    def buffered(self) -> int:
        """Bytes held for the line not yet ended."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes | Dropped]:
        out: list[bytes | Dropped] = []
        view = memoryview(chunk)
        start = 0
        size = len(chunk)
        while start < size:
            newline = chunk.find(b"\n", start)
            end = size if newline < 0 else newline
            self._take(view[start:end])
            if newline < 0:
                break
            out.append(self._end())
            start = newline + 1
        return out

    def _take(self, piece: memoryview) -> None:
        if self._dropping:
            self._dropping += len(piece)
            self._tail = (self._tail + bytes(piece[-EXCERPT:]))[-EXCERPT:]
        elif len(self._buffer) + len(piece) > self.limit:
            self._dropping = len(self._buffer) + len(piece)
            self._head = (bytes(self._buffer[:EXCERPT]) + bytes(piece[:EXCERPT]))[:EXCERPT]
            self._tail = (bytes(self._buffer[-EXCERPT:]) + bytes(piece[-EXCERPT:]))[-EXCERPT:]
            self._buffer = bytearray()
        else:
            self._buffer += piece

    def _end(self) -> bytes | Dropped:
        if self._dropping:
            tail = self._tail[:-1] if self._tail.endswith(b"\r") else self._tail
            dropped = Dropped(size=self._dropping, head=self._head, tail=tail)
            self._dropping, self._head, self._tail = 0, b"", b""
            return dropped
        line = bytes(self._buffer)
        self._buffer = bytearray()
        return line[:-1] if line.endswith(b"\r") else line


@dataclass
class StdioOptions:
    """What one upstream's connections share: the line limit, and what was logged once."""

    label: str
    line_limit: int = LINE_LIMIT
    utf8_logged: bool = False
    counts: dict[str, int] = field(default_factory=dict)


def _message(line: bytes, options: StdioOptions, junk: list[int]) -> SessionMessage | None:
    """The JSON-RPC message of one line; None for a blank line or one that is not one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = line.decode("utf-8", "replace")
        options.counts["invalid_utf8"] = options.counts.get("invalid_utf8", 0) + 1
        if not options.utf8_logged:
            options.utf8_logged = True
            log.warning(
                "%s: invalid UTF-8 on standard output (byte %d of a line of %d) replaced"
                " with U+FFFD; logged once",
                options.label,
                exc.start,
                len(line),
            )
    if not text.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError:
        junk[0] += 1
        options.counts["not_json_rpc"] = options.counts.get("not_json_rpc", 0) + 1
        # The first of a connection is a warning; the rest would repeat it.
        level = logging.WARNING if junk[0] == 1 else logging.DEBUG
        log.log(
            level,
            "%s: a line of %d bytes on standard output is not a JSON-RPC message, ignored: %s",
            options.label,
            len(line),
            show(text[:120], 120),  # cut first: the line may be long
        )
        return None


def _dropped(item: Dropped, options: StdioOptions) -> SessionMessage | None:
    """Log a dropped line; the error that answers its request, when its id is known."""
    options.counts["dropped"] = options.counts.get("dropped", 0) + 1
    request_id = item.request_id()
    log.warning(
        "%s: a line of %d bytes on standard output dropped (the limit is %d)%s",
        options.label,
        item.size,
        options.line_limit,
        "" if request_id is None else f"; its request (id {show(request_id, 40)}) is answered",
    )
    if request_id is None:
        return None
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=types.INTERNAL_ERROR,
            message=f"the MCP server's answer was {item.size} bytes, over the gateway's"
            f" limit of {options.line_limit}",
        ),
    )
    return SessionMessage(error)


@contextlib.asynccontextmanager
async def stdio_streams(
    params: StdioServerParameters, errlog: TextIO, options: StdioOptions
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``params``'s command and yield (read stream, write stream) for ``mcp.Client``.

    Raises OSError when the command cannot be started. On the way out the
    child is stopped, even under cancellation, every wait bounded.
    """
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,  # its own process group: stopped with all its children
    )
    # No awaits until the task group is entered: a cancellation would leak the child.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        stdout = process.stdout
        assert stdout is not None
        lines = LineSplitter(options.line_limit)
        junk = [0]
        delivering = True
        try:
            async with read_writer:
                while True:
                    chunk = await stdout.receive(READ_SIZE)
                    for item in lines.feed(chunk):
                        message = (
                            _dropped(item, options)
                            if isinstance(item, Dropped)
                            else _message(item, options, junk)
                        )
                        if message is None or not delivering:
                            continue
                        try:
                            await read_writer.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            # The session is gone: keep draining, so the child can exit.
                            delivering = False
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            OSError,
        ):
            pass

    async def writer() -> None:
        stdin = process.stdin
        assert stdin is not None
        try:
            async with write_reader:
                async for item in write_reader:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The child stopped reading: the session sees the end of its read stream.
            await read_writer.aclose()

    async def stop() -> None:
        read_stream.close()
        write_stream.close()
        stdin = process.stdin
        assert stdin is not None
        # Bounded: closing flushes what is buffered, and a child that stopped reading (the
        # blocked server this module exists for) never takes it; the kill below ends it.
        with (
            anyio.move_on_after(EXIT_GRACE),
            contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await stdin.aclose()
        with anyio.move_on_after(EXIT_GRACE):
            while process.returncode is None:
                await anyio.sleep(0.01)
        if process.returncode is None:
            assert isinstance(process, anyio.abc.Process)
            await terminate_posix_process_tree(process, EXIT_GRACE)
            with anyio.move_on_after(EXIT_GRACE):
                while process.returncode is None:
                    await anyio.sleep(0.01)
            if process.returncode is None:
                log.warning("%s: the process %d outlived SIGKILL", options.label, process.pid)
        # aclose waits for the pipes' end too: a grandchild may hold them, so it is bounded.
        with (
            anyio.move_on_after(EXIT_GRACE),
            contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await process.aclose()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await stop()
            tasks.cancel_scope.cancel()

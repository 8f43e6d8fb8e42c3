"""SimpleX padding (wire.md section 5), the pure-Python backend.

``padded = uint16_be(len(msg)) || msg || "#" * (N - 2 - len(msg))``, with
simplexmq's failure rules, plus two options of ours for ``unpad``: an exact
block length, and strict fill (every fill byte ``#``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .errors import PaddingError

PADDED_LENGTH: Final = 11106
MAX_MESSAGE_LENGTH: Final = 2**16 - 3  # simplexmq maxMsgLen
FILL: Final = 0x23  # "#"

Buffer = bytes | bytearray | memoryview


def check_pad(size: int, length: int) -> None:
    """Raise the error ``pad`` raises for a message of ``size`` bytes, if any."""
    if length < 2:
        raise PaddingError(f"pad: block length {length} is less than 2")
    if size > MAX_MESSAGE_LENGTH:
        raise PaddingError(
            f"pad: message of {size} bytes exceeds the maximum of {MAX_MESSAGE_LENGTH}"
        )
    if size > length - 2:
        raise PaddingError(
            f"pad: message of {size} bytes does not fit a block of {length} bytes"
            f" (at most {length - 2})"
        )


def pad(message: Buffer, length: int = PADDED_LENGTH) -> bytes:
    """Pad ``message`` to a block of exactly ``length`` bytes."""
    # bytes(5) would be five zero bytes: take only buffers, and count their
    # bytes (len() of a memoryview counts items).
    data = message if type(message) is bytes else memoryview(message).tobytes()
    size = len(data)
    check_pad(size, length)
    return size.to_bytes(2, "big") + data + b"#" * (length - 2 - size)


def unpad_span(block: Buffer, length: int | None, strict: bool, where: str = "unpad") -> int:
    """Check ``block`` and return the message length; the message starts at offset 2."""
    size = len(block)
    if length is not None and size != length:
        raise PaddingError(f"{where}: block of {size} bytes where exactly {length} are required")
    if size < 2:
        raise PaddingError(f"{where}: block of {size} bytes is shorter than its 2-byte length")
    n = (block[0] << 8) | block[1]
    if n > size - 2:
        raise PaddingError(
            f"{where}: length field {n} at offset 0 exceeds the {size - 2} bytes that follow"
        )
    if strict:
        fill = memoryview(block)[2 + n :]
        # bytes.count runs in C; a mismatch is then located for the message.
        if bytes(fill).count(FILL) != len(fill):
            first = next(i for i, b in enumerate(fill) if b != FILL)
            raise PaddingError(f"{where}: fill byte at offset {2 + n + first} is not '#'")
    return n


def unpad(block: Buffer, *, length: int | None = None, strict: bool = False) -> bytes:
    """Return the message inside ``block``.

    ``length`` requires the block to be exactly that many bytes; ``strict``
    requires every fill byte to be ``#``.
    """
    view = memoryview(block).cast("B")  # index bytes, whatever the item size
    n = unpad_span(view, length, strict)
    return bytes(view[2 : 2 + n])


def pad_many(messages: Iterable[Buffer], length: int = PADDED_LENGTH) -> bytes:
    """Pad each message to ``length`` bytes; return the blocks back to back."""
    out = bytearray()
    for index, message in enumerate(messages):
        try:
            out += pad(message, length)
        except PaddingError as exc:
            raise PaddingError(f"message {index}: {exc}") from None
    return bytes(out)


def unpad_many(
    buffer: Buffer, length: int = PADDED_LENGTH, *, strict: bool = False
) -> list[bytes]:
    """Split ``buffer`` into blocks of ``length`` bytes and unpad each one."""
    if length < 2:
        raise PaddingError(f"unpad_many: block length {length} is less than 2")
    view = memoryview(buffer).cast("B")
    if len(view) % length:
        raise PaddingError(
            f"unpad_many: buffer of {len(view)} bytes is not a whole number of"
            f" {length}-byte blocks"
        )
    out = []
    for index in range(len(view) // length):
        block = view[index * length : (index + 1) * length]
        try:
            out.append(unpad(block, strict=strict))
        except PaddingError as exc:
            raise PaddingError(f"block {index}: {exc}") from None
    return out

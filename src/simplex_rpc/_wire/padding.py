"""SimpleX padding (wire.md section 5), the pure-Python backend.

``padded = uint16_be(len(msg)) || msg || "#" * (N - 2 - len(msg))``, with
simplexmq's failure rules, plus two options of ours for ``unpad``: an exact
block length, and strict fill (every fill byte ``#``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..errors import PaddingError

PADDED_LENGTH: Final = 11106
MAX_MESSAGE_LENGTH: Final = 2**16 - 3  # simplexmq maxMsgLen
FILL: Final = 0x23  # "#"

Buffer = bytes | bytearray | memoryview


# -- error messages ------------------------------------------------------------------
# Each padding message is worded once, here: the pure code below raises these, and the
# C backend (``_cbackend._error``) builds the same ones from a C status. They are only
# ever called on the error path.


def block_length_error(where: str, length: int) -> PaddingError:
    """``length`` is too small to hold the 2-byte length field."""
    return PaddingError(f"{where}: block length {length} is less than 2")


def block_size_error(size: int, length: int, where: str = "unpad") -> PaddingError:
    """A block of ``size`` bytes where exactly ``length`` are required."""
    return PaddingError(f"{where}: block of {size} bytes where exactly {length} are required")


def short_block_error(size: int, where: str = "unpad") -> PaddingError:
    """A block of ``size`` bytes, fewer than its 2-byte length field."""
    return PaddingError(f"{where}: block of {size} bytes is shorter than its 2-byte length")


def length_field_error(field: int, following: int, where: str = "unpad") -> PaddingError:
    """A length field of ``field`` with only ``following`` bytes after it."""
    return PaddingError(
        f"{where}: length field {field} at offset 0 exceeds the {following} bytes that follow"
    )


def fill_error(offset: int, where: str = "unpad") -> PaddingError:
    """The fill byte at ``offset`` (from the block's start) is not ``#`` (strict unpad)."""
    return PaddingError(f"{where}: fill byte at offset {offset} is not '#'")


def whole_blocks_error(where: str, size: int, length: int) -> PaddingError:
    """A buffer of ``size`` bytes that is not a whole number of ``length``-byte blocks."""
    return PaddingError(
        f"{where}: buffer of {size} bytes is not a whole number of {length}-byte blocks"
    )


def message_error(index: int, error: Exception) -> PaddingError:
    """``error`` of the message at ``index`` of a batch (``pad_many``)."""
    return PaddingError(f"message {index}: {error}")


def block_error(index: int, error: Exception) -> PaddingError:
    """``error`` of the block at ``index`` of a batch (``unpad_many``)."""
    return PaddingError(f"block {index}: {error}")


# -- padding and unpadding -----------------------------------------------------------


def check_pad(size: int, length: int) -> None:
    """Raise the error ``pad`` raises for a message of ``size`` bytes, if any."""
    if length < 2:
        raise block_length_error("pad", length)
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
        raise block_size_error(size, length, where)
    if size < 2:
        raise short_block_error(size, where)
    n = (block[0] << 8) | block[1]
    if n > size - 2:
        raise length_field_error(n, size - 2, where)
    if strict:
        fill = memoryview(block)[2 + n :]
        # bytes.count runs in C; a mismatch is then located for the message.
        if bytes(fill).count(FILL) != len(fill):
            first = next(i for i, b in enumerate(fill) if b != FILL)
            raise fill_error(2 + n + first, where)
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
            raise message_error(index, exc) from None
    return bytes(out)


def unpad_many(
    buffer: Buffer, length: int = PADDED_LENGTH, *, strict: bool = False
) -> list[bytes]:
    """Split ``buffer`` into blocks of ``length`` bytes and unpad each one."""
    if length < 2:
        raise block_length_error("unpad_many", length)
    view = memoryview(buffer).cast("B")
    if len(view) % length:
        raise whole_blocks_error("unpad_many", len(view), length)
    out = []
    for index in range(len(view) // length):
        block = view[index * length : (index + 1) * length]
        try:
            out.append(unpad(block, strict=strict))
        except PaddingError as exc:
            raise block_error(index, exc) from None
    return out

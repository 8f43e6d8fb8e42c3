"""Strict base64url (RFC 4648 section 5), as the SimpleX core writes it.

The decoder accepts the URL-safe alphabet only, with the padding either exactly
right or absent, no whitespace and no non-zero trailing bits: one text, one
byte string. ``base64.urlsafe_b64decode`` silently discards bad characters, so
it is not used as a validator; the standard library's codec only converts text
that this module has already checked.
"""

from __future__ import annotations

import base64
import binascii
import re

_NOT_ALPHABET = re.compile(rb"[^A-Za-z0-9_=-]")


def encode(data: bytes) -> str:
    """Return the padded base64url text of ``data``."""
    return base64.urlsafe_b64encode(data).decode("ascii")


def decode(text: str | bytes, what: str, *, secret: bool = False) -> bytes:
    """Decode strict base64url ``text``; raise ``ValueError`` naming ``what``.

    The caller converts the ``ValueError`` into its own error class. With
    ``secret``, messages name offsets only, never a character of the text.
    """
    if isinstance(text, str):
        # Checked without catching UnicodeEncodeError: its args hold the whole text,
        # and a chained exception must not carry a private key's text.
        if not text.isascii():
            at = next(i for i, ch in enumerate(text) if ord(ch) > 127)
            raise ValueError(f"{what}: non-ASCII character at offset {at}")
        raw = text.encode("ascii")
    elif isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
    else:
        raise TypeError(f"{what}: expected str or bytes, got {type(text).__name__}")
    # Name the first character outside the alphabet before looking at the
    # padding, so that "KEY=\n" is blamed on the newline, not on the '='.
    bad = _NOT_ALPHABET.search(raw)
    if bad is not None:
        at, byte = bad.start(), raw[bad.start()]
        if secret:
            shown = "a character"
        elif byte < 0x80:
            shown = f"character {chr(byte)!r}"
        else:
            shown = f"byte 0x{byte:02x}"
        raise ValueError(f"{what}: {shown} at offset {at} is not in the base64url alphabet")
    body = raw.rstrip(b"=")
    pad = len(raw) - len(body)
    if b"=" in body:
        raise ValueError(
            f"{what}: padding character '=' at offset {body.index(b'=')} is not at the end"
        )
    if len(body) % 4 == 1:
        raise ValueError(f"{what}: {len(body)} base64url characters is not a valid length")
    expected_pad = (-len(body)) % 4
    if pad and pad != expected_pad:
        raise ValueError(
            f"{what}: {pad} padding characters where {expected_pad} are required (or none)"
        )
    std = body.translate(bytes.maketrans(b"-_", b"+/")) + b"=" * expected_pad
    try:
        data = binascii.a2b_base64(std, strict_mode=True)
    except binascii.Error as exc:  # pragma: no cover - excluded by the checks above
        raise ValueError(f"{what}: {exc}") from None
    # Non-zero trailing bits decode to the same bytes as the canonical text:
    # reject them so that each byte string has exactly one (unpadded) text.
    if base64.urlsafe_b64encode(data).rstrip(b"=") != body:
        raise ValueError(f"{what}: non-zero trailing bits in the last base64url character")
    return data

"""Test vectors for independent implementations (wire.md section 7).

:func:`build_documents` builds six documents deterministically: ``keys``,
``signatures``, ``padding``, ``agent_messages``, ``envelopes`` and ``agent_crypto``
(which needs the ``sntrup761`` extra), each
``{"format": "simplex-rpc-vectors", "version": 1, "kind": ..., "cases": [...]}``.
Every key comes from a fixed seed and Ed25519 signing is deterministic (the
sntrup761 material of ``agent_crypto`` is fixed data), so a second run gives
byte-identical files. :func:`render_files` turns them into
``<kind>.json`` (bytes as lowercase hex), ``<kind>.cbor`` (canonical CBOR, the
same cases with every hex field as a byte string) and a ``README.md``.

Every negative case names the library error class it must raise in
``error``. The expectations are written here by hand, not read back from the
library: :func:`verify_document` checks each case against the library (on
every backend), generation refuses to write files the library disagrees
with, and :func:`check_vectors` checks files on disk both ways: byte for byte
against a fresh generation, and case by case against the library.
"""

from __future__ import annotations

from ._common import FORMAT, HEX_FIELDS, KINDS, VERSION, VectorError
from ._files import (
    build_documents,
    check_vectors,
    from_cbor_document,
    generate,
    render_files,
    to_cbor_document,
    verify_document,
)

__all__ = [
    "FORMAT",
    "HEX_FIELDS",
    "KINDS",
    "VERSION",
    "VectorError",
    "build_documents",
    "check_vectors",
    "from_cbor_document",
    "generate",
    "render_files",
    "to_cbor_document",
    "verify_document",
]

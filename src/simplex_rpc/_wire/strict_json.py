"""Strict JSON for every decoder of the library, on the active backend (wire.md section 3).

:func:`loads` is the one entry point above the wire layer: it runs the C
validator when the C backend is active, else :func:`~.json_pure.python_loads`;
both give the same value and the same first error. :func:`check` refuses
what :func:`loads` refuses, with the same error, and builds no value (on the
C backend only C's pass runs). The rest, serialization
and the error type included, is :mod:`.json_pure`'s, named here so that
callers import one module.
"""

from __future__ import annotations

from typing import Any

from . import backend as _backend
from .json_pure import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    JsonError,
    dumps,
    json_type,
    python_loads,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "JsonError",
    "check",
    "dumps",
    "json_type",
    "loads",
    "python_loads",
]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one strict JSON value from UTF-8 bytes or text; raise :class:`JsonError`.

    Runs on the active backend (the C validator, or
    :func:`~.json_pure.python_loads`); both give the same value and the same
    first error.
    """
    return _backend.active.json_loads(data)


def check(data: bytes | bytearray | memoryview | str) -> None:
    """Raise :class:`JsonError` where :func:`loads` would, with the same error; else None.

    For text the library wrote and must still hold to the strict rules (an
    answer before it is sent): the C backend runs its validator and builds
    nothing.
    """
    _backend.active.json_check(data)

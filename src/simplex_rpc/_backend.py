"""The backend seam: the one place that chooses C or pure Python (wire.md section 6).

Each backend provides the same functions with identical results and errors.
``SIMPLEX_RPC_PURE=1`` forces the pure backend at import; otherwise the C
backend is used when its extension loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _frame, _padding, _seal


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend's implementation of the framing and padding functions."""

    name: str
    pad: Callable[..., Any]
    unpad: Callable[..., Any]
    pad_many: Callable[..., Any]
    unpad_many: Callable[..., Any]
    encode_frame: Callable[..., Any]
    decode_frame: Callable[..., Any]
    seal_request: Callable[..., Any]
    open_request: Callable[..., Any]
    seal_response: Callable[..., Any]
    open_response: Callable[..., Any]

    def __repr__(self) -> str:
        return f"<simplex_rpc backend {self.name!r}>"


PYTHON = Backend(
    name="python",
    pad=_padding.pad,
    unpad=_padding.unpad,
    pad_many=_padding.pad_many,
    unpad_many=_padding.unpad_many,
    encode_frame=_frame.encode_frame,
    decode_frame=_frame.decode_frame,
    seal_request=_seal.seal_request,
    open_request=_seal.open_request,
    seal_response=_seal.seal_response,
    open_response=_seal.open_response,
)

backends: dict[str, Backend] = {"python": PYTHON}

#: Why the C backend is not available, or None when it loaded.
c_unavailable_reason: str | None = "the C backend is not built in this version"

FORCE_PURE = os.environ.get("SIMPLEX_RPC_PURE", "") not in ("", "0")

active: Backend = PYTHON if FORCE_PURE else backends.get("c", PYTHON)


def backend() -> str:
    """The name of the backend in use: ``"c"`` or ``"python"``."""
    return active.name

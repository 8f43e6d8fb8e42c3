"""The backend seam: the one place that chooses C or pure Python (wire.md section 6).

Each backend provides the same functions with identical results and errors.
``SIMPLEX_RPC_PURE=1`` forces the pure backend at import (the C extension is
then not even loaded); otherwise the C backend is used when its extension
loads, and ``c_unavailable_reason`` says why when it does not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import _batch, _frame, _json, _padding, _seal


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend's implementation of the framing, padding and batch functions."""

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
    seal_requests: Callable[..., Any]
    open_requests: Callable[..., Any]
    json_loads: Callable[..., Any]

    def __repr__(self) -> str:
        return f"<simplex_rpc backend {self.name!r}>"


def _assemble(
    name: str,
    *,
    padding: ModuleType,
    batch: ModuleType,
    frames: ModuleType,
    seals: ModuleType,
    json_loads: Callable[..., Any],
) -> Backend:
    """A backend of the functions of the modules that provide them.

    ``pad`` and ``unpad`` come from ``padding``; ``pad_many`` and ``unpad_many``
    from ``batch``; the frame codec from ``frames``; the single-block sealers and
    openers from ``seals``, and ``seal_requests`` and ``open_requests`` run over them;
    ``json_loads`` is the strict JSON parser behind ``_json.loads``.
    """
    seal_requests, open_requests = _batch.batch_functions(seals.seal_request, seals.open_request)
    return Backend(
        name=name,
        pad=padding.pad,
        unpad=padding.unpad,
        pad_many=batch.pad_many,
        unpad_many=batch.unpad_many,
        encode_frame=frames.encode_frame,
        decode_frame=frames.decode_frame,
        seal_request=seals.seal_request,
        open_request=seals.open_request,
        seal_response=seals.seal_response,
        open_response=seals.open_response,
        seal_requests=seal_requests,
        open_requests=open_requests,
        json_loads=json_loads,
    )


def _python() -> Backend:
    return _assemble(
        "python",
        padding=_padding,
        batch=_batch,
        frames=_frame,
        seals=_seal,
        json_loads=_json.python_loads,
    )


def _c() -> Backend:
    """The C backend; raises whatever stops its extension from loading."""
    from . import _cbackend as c

    return _assemble("c", padding=c, batch=c, frames=c, seals=c, json_loads=c.json_loads)


PYTHON = _python()

backends: dict[str, Backend] = {"python": PYTHON}

FORCE_PURE = os.environ.get("SIMPLEX_RPC_PURE", "") not in ("", "0")

#: Why the C backend is not available, or None when it loaded.
c_unavailable_reason: str | None

if FORCE_PURE:
    c_unavailable_reason = "SIMPLEX_RPC_PURE=1 forces the pure-Python backend"
else:
    try:
        backends["c"] = _c()
    except Exception as exc:  # any failure to load leaves the pure backend in charge
        c_unavailable_reason = f"{type(exc).__name__}: {exc}"
    else:
        c_unavailable_reason = None

active: Backend = backends.get("c", PYTHON)


def backend() -> str:
    """The name of the backend in use: ``"c"`` or ``"python"``."""
    return active.name

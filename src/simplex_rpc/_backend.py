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
from typing import Any

from . import _batch, _frame, _seal


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

    def __repr__(self) -> str:
        return f"<simplex_rpc backend {self.name!r}>"


def _python() -> Backend:
    from . import _padding

    seal_requests, open_requests = _batch.batch_functions(_seal.seal_request, _seal.open_request)
    return Backend(
        name="python",
        pad=_padding.pad,
        unpad=_padding.unpad,
        pad_many=_batch.pad_many,
        unpad_many=_batch.unpad_many,
        encode_frame=_frame.encode_frame,
        decode_frame=_frame.decode_frame,
        seal_request=_seal.seal_request,
        open_request=_seal.open_request,
        seal_response=_seal.seal_response,
        open_response=_seal.open_response,
        seal_requests=seal_requests,
        open_requests=open_requests,
    )


def _c() -> Backend:
    """The C backend; raises whatever stops its extension from loading."""
    from . import _cbackend as c

    seal_requests, open_requests = _batch.batch_functions(c.seal_request, c.open_request)
    return Backend(
        name="c",
        pad=c.pad,
        unpad=c.unpad,
        pad_many=c.pad_many,
        unpad_many=c.unpad_many,
        encode_frame=c.encode_frame,
        decode_frame=c.decode_frame,
        seal_request=c.seal_request,
        open_request=c.open_request,
        seal_response=c.seal_response,
        open_response=c.open_response,
        seal_requests=seal_requests,
        open_requests=open_requests,
    )


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

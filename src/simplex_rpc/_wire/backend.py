"""The backend seam: the one place that chooses C or pure Python (wire.md section 6).

Each backend provides the same functions with identical results and errors.
``SIMPLEX_RPC_PURE=1`` forces the pure backend at import (the C extension is
then not even loaded); otherwise the C backend is used when its extension
loads, and ``c_unavailable_reason`` says why when it does not;
:func:`backend_info` tells both to users.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

from . import (
    batch as _batch,
)
from . import (
    json_pure as _json,
)
from . import (
    padding as _padding,
)
from . import (
    seal as _seal,
)
from .agent_block import SMPQueueInfo
from .batch import OpenRequestsFunction, SealRequestsFunction, WritableBuffer
from .keys import SigningKey
from .padding import PADDED_LENGTH
from .seal import Buffer, OpenedRequest

# -- the signatures every backend implements ------------------------------------------
#
# One callback protocol per function: the public names in ``simplex_rpc`` take their
# types from these, so a consumer's type checker sees the real signatures whichever
# backend runs, and mypy checks both backends' functions against them. A new function
# of the seam is one protocol here, one field of Backend and one line in each builder.


class PadFunction(Protocol):
    def __call__(self, message: Buffer, length: int = PADDED_LENGTH) -> bytes: ...


class UnpadFunction(Protocol):
    def __call__(
        self, block: Buffer, *, length: int | None = None, strict: bool = False
    ) -> bytes: ...


class PadManyFunction(Protocol):
    @overload
    def __call__(
        self, messages: Iterable[Buffer], length: int = ..., *, out: None = None
    ) -> bytes: ...
    @overload
    def __call__(
        self, messages: Iterable[Buffer], length: int = ..., *, out: WritableBuffer
    ) -> memoryview: ...


class UnpadManyFunction(Protocol):
    @overload
    def __call__(
        self,
        buffer: Buffer,
        length: int = ...,
        *,
        strict: bool = ...,
        views: Literal[False] = False,
    ) -> list[bytes]: ...
    @overload
    def __call__(
        self, buffer: Buffer, length: int = ..., *, strict: bool = ..., views: Literal[True]
    ) -> list[memoryview]: ...


class SealRequestFunction(Protocol):
    def __call__(
        self,
        payload: Buffer,
        ad: bytes,
        signing_key: SigningKey | None = None,
        *,
        reply_queue: SMPQueueInfo,
    ) -> bytes: ...


class OpenRequestFunction(Protocol):
    def __call__(self, block: Buffer, ad: bytes, *, strict: bool = False) -> OpenedRequest: ...


class SealResponseFunction(Protocol):
    def __call__(self, payload: Buffer, *, pq_support: bool = True) -> bytes: ...


class SealRejectionFunction(Protocol):
    def __call__(self, reason: Buffer, *, pq_support: bool = True) -> bytes: ...


class OpenResponseFunction(Protocol):
    def __call__(self, block: Buffer, *, strict: bool = False) -> bytes: ...


class JsonLoadsFunction(Protocol):
    def __call__(self, data: bytes | bytearray | memoryview | str) -> Any: ...


class JsonCheckFunction(Protocol):
    def __call__(self, data: bytes | bytearray | memoryview | str) -> None: ...


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend's implementation of the agent block, padding and batch functions."""

    name: str
    pad: PadFunction
    unpad: UnpadFunction
    pad_many: PadManyFunction
    unpad_many: UnpadManyFunction
    seal_request: SealRequestFunction
    open_request: OpenRequestFunction
    seal_response: SealResponseFunction
    seal_rejection: SealRejectionFunction
    open_response: OpenResponseFunction
    seal_requests: SealRequestsFunction
    open_requests: OpenRequestsFunction
    json_loads: JsonLoadsFunction
    json_check: JsonCheckFunction

    def __repr__(self) -> str:
        return f"<simplex_rpc backend {self.name!r}>"


def _python() -> Backend:
    """The pure backend: ``pad``/``unpad`` from ``_padding``, the batch padding from
    ``_batch``, the sealers and openers of the agent block from ``_seal``."""
    seal_requests, open_requests = _batch.batch_functions(_seal.seal_request, _seal.open_request)
    return Backend(
        name="python",
        pad=_padding.pad,
        unpad=_padding.unpad,
        pad_many=_batch.pad_many,
        unpad_many=_batch.unpad_many,
        seal_request=_seal.seal_request,
        open_request=_seal.open_request,
        seal_response=_seal.seal_response,
        seal_rejection=_seal.seal_rejection,
        open_response=_seal.open_response,
        seal_requests=seal_requests,
        open_requests=open_requests,
        json_loads=_json.python_loads,
        json_check=_json.python_check,
    )


def _c() -> Backend:
    """The C backend; raises whatever stops its extension from loading."""
    from . import cbackend as c

    seal_requests, open_requests = _batch.batch_functions(
        c.seal_request, c.open_request, c.seal_unsigned_many
    )
    return Backend(
        name="c",
        pad=c.pad,
        unpad=c.unpad,
        pad_many=c.pad_many,
        unpad_many=c.unpad_many,
        seal_request=c.seal_request,
        open_request=c.open_request,
        seal_response=c.seal_response,
        seal_rejection=c.seal_rejection,
        open_response=c.open_response,
        seal_requests=seal_requests,
        open_requests=open_requests,
        json_loads=c.json_loads,
        json_check=c.json_check,
    )


PYTHON = _python()

backends: dict[str, Backend] = {"python": PYTHON}

_EXTENSION = "simplex_rpc._wire._simplex_rpc_c"

FORCE_PURE = os.environ.get("SIMPLEX_RPC_PURE", "") not in ("", "0")

#: Why the C backend is not available, or None when it loaded.
c_unavailable_reason: str | None

if FORCE_PURE:
    c_unavailable_reason = "SIMPLEX_RPC_PURE=1 forces the pure-Python backend"
else:
    try:
        backends["c"] = _c()
    except ModuleNotFoundError as exc:
        c_unavailable_reason = f"{type(exc).__name__}: {exc}"
        if exc.name == _EXTENSION:  # the install has no extension at all: say how that happens
            c_unavailable_reason += (
                " (a pure-Python build: SIMPLEX_RPC_BUILD_C=0, or a source tree where the"
                " extension was never built; reinstall simplex-rpc from its wheel, or from"
                " source with a C compiler, to get the C backend)"
            )
    except Exception as exc:  # any failure to load leaves the pure backend in charge
        c_unavailable_reason = f"{type(exc).__name__}: {exc}"
    else:
        c_unavailable_reason = None

active: Backend = backends.get("c", PYTHON)


def _importable(backend: Backend) -> None:
    """Name ``backend``'s batch functions in this module, so that pickle finds them.

    They are closures of ``_batch.batch_functions``; pickle stores a function by
    module and qualified name, so ``ProcessPoolExecutor.submit(sx.open_requests,
    ...)`` needs a name that leads back to the same object in the worker.
    """
    functions: tuple[Any, ...] = (backend.seal_requests, backend.open_requests)
    for function in functions:
        name = f"_{backend.name}_{function.__name__}"
        globals()[name] = function
        function.__module__ = __name__
        function.__qualname__ = name


for _each in backends.values():
    _importable(_each)


def backend() -> str:
    """The name of the backend in use: ``"c"`` or ``"python"``."""
    return active.name


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """Which backend runs, and why the other one does not.

    ``name`` is ``"c"`` or ``"python"``; ``reason`` explains why the other
    backend is not the one in use; ``extension`` is the file of the loaded C
    extension, or None when it did not load. ``str()`` gives one line.
    """

    name: str
    reason: str
    extension: str | None

    def __str__(self) -> str:
        return f"backend {self.name} ({self.reason})"


def backend_info() -> BackendInfo:
    """The backend in use and why the other does not run (see :class:`BackendInfo`)."""
    if active.name == "c":
        from . import _simplex_rpc_c

        path = str(getattr(_simplex_rpc_c, "__file__", "") or "") or None
        return BackendInfo(
            name="c",
            reason="the C extension loaded; set SIMPLEX_RPC_PURE=1 for the pure-Python backend",
            extension=path,
        )
    return BackendInfo(
        name="python",
        reason=f"C backend unavailable: {c_unavailable_reason}",
        extension=None,
    )

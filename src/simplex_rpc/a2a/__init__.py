"""The A2A binding over both SimpleX transports ("A2A binding" of the protocol text).

No I/O. The request is one request of the A2A JSON-RPC binding, with the
service parameters (``A2A-Version`` and the like) in the member
``a2a-service-parameters`` because SimpleX messages have no headers. These
helpers check a request, decide what Service RPC may serve, size replies, say
when a stream ends, and keep each caller's contexts and tasks apart.

:class:`A2aBridge` (extra ``simplex-rpc[a2a]``) serves an agent written with
the official ``a2a-sdk`` behind both transports; :func:`register_client`
gives the SDK's ``ClientFactory`` a transport to such a bot. They (and
:class:`SimplexCaller`, :class:`SimplexA2aTransport`, :class:`ServiceRpcError`)
are imported on first use, and left out of ``__all__`` so that ``import *``
works without the SDK.

Error responses follow the A2A JSON-RPC binding as the SDK writes them: code,
message, and in ``data`` a ``google.rpc.ErrorInfo`` with the A2A reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .._bindings import a2a as _binding
from .._bindings.a2a import *  # noqa: F403 (the binding's data is the package's public API)
from .._wire import lazy as _lazy
from ..errors import install_hint

if TYPE_CHECKING:
    from ._bridge import A2aBridge as A2aBridge
    from ._bridge import SimplexCaller as SimplexCaller
    from ._client import ServiceRpcError as ServiceRpcError
    from ._client import SimplexA2aTransport as SimplexA2aTransport
    from ._client import register_client as register_client

__all__ = list(_binding.__all__)

# The SDK-backed names, each in its private module of this package.
_SDK_NAMES: Final = {
    "A2aBridge": "_bridge",
    "SimplexCaller": "_bridge",
    "register_client": "_client",
    "ServiceRpcError": "_client",
    "SimplexA2aTransport": "_client",
}

# The bridge and the client transport need the SDK; imported only when asked for.
__getattr__, __dir__ = _lazy.sdk_attributes(
    __name__, _SDK_NAMES, "the a2a-sdk: " + install_hint("a2a")
)

"""The MCP binding over both SimpleX transports ("MCP binding" of the protocol text).

No I/O. The request is one JSON-RPC request of MCP revision 2026-07-28 or
later, which names its revision in ``_meta`` under
``io.modelcontextprotocol/protocolVersion``. The answer ends with the JSON-RPC
response: the text of the last reply in a conversation, the envelope's
``response`` over Service RPC. These helpers check a request, size the answer
for either transport and apply ``conversation_required`` to the tools that
need a conversation.

:class:`McpBridge` (extra ``simplex-rpc[mcp]``) serves a server written with
the official ``mcp`` SDK behind both transports; :class:`SimplexTransport`
is the SDK client's transport to such a bot; :class:`Upstream` serves any
MCP server, a command over stdio or a Streamable HTTP URL, the same way. They
are imported on first
use, and left out of ``__all__`` so that ``import *`` works without the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .._bindings import mcp as _binding
from .._bindings.mcp import *  # noqa: F403 (the binding's data is the package's public API)
from .._wire import lazy as _lazy
from ..errors import install_hint

if TYPE_CHECKING:
    from ._bridge import McpBridge as McpBridge
    from ._client import SERVICE_RPC_ERROR as SERVICE_RPC_ERROR
    from ._client import SimplexTransport as SimplexTransport
    from ._upstream import Upstream as Upstream

__all__ = list(_binding.__all__)

# The SDK-backed names, each in its private module of this package.
_SDK_NAMES: Final = {
    "McpBridge": "_bridge",
    "SimplexTransport": "_client",
    "SERVICE_RPC_ERROR": "_client",
    "Upstream": "_upstream",
}

# The bridge and the client transport need the SDK; imported only when asked for.
__getattr__, __dir__ = _lazy.sdk_attributes(
    __name__, _SDK_NAMES, "the mcp SDK: " + install_hint("mcp")
)

"""The library's exception classes.

Every error the library raises on bad input is a :class:`SimplexRpcError`,
which is also a :class:`ValueError`. Both backends raise the same classes with
the same messages. No message ever contains private key material.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentCryptoError",
    "BadSignature",
    "CallSyntaxError",
    "ChatCoreError",
    "CollectorError",
    "DeclarationError",
    "EnvelopeError",
    "FrameError",
    "KeyFormatError",
    "LlmsTxtError",
    "PaddingError",
    "PayloadTooLarge",
    "ServiceRejected",
    "SimplexRpcError",
]


def _rebuild(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """An exception of ``cls`` with ``args``, without calling ``cls.__init__``.

    Unpickling calls this; the attributes then come back from the pickled state.
    """
    return cls.__new__(cls, *args)


class SimplexRpcError(ValueError):
    """Base class of every error raised by simplex-rpc.

    Every subclass pickles and copies with its message and attributes
    (``size``, ``limit``, ``code``, ``chat_error``, ...), so an error raised in
    a worker process reaches the parent intact.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # BaseException's own reduce re-calls cls(*args), which fails for a subclass
        # with keyword-only arguments (PayloadTooLarge's size and limit): a process
        # pool's result thread dies on it. The attributes travel as state instead.
        return (_rebuild, (type(self), self.args), self.__dict__ or None)


class KeyFormatError(SimplexRpcError):
    """A key's text, DER or PEM form is not an exact Ed25519 key encoding."""


class BadSignature(SimplexRpcError):
    """A signature did not verify under the given key, AD and payload."""


class PaddingError(SimplexRpcError):
    """A message does not fit its padded block, or a block is malformed."""


class PayloadTooLarge(PaddingError):
    """A payload is too large for the padded block.

    ``limit`` is the largest payload, in bytes, that fits; ``size`` is the
    size that was given.
    """

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class FrameError(SimplexRpcError):
    """The agent's Service RPC message (wire.md section 4) or an SMP queue URI is
    malformed; the message names the offset."""


class ServiceRejected(SimplexRpcError):
    """The service answered with the agent's rejection (``'J'``): ``reason`` holds its bytes."""

    def __init__(self, reason: bytes) -> None:
        shown = reason[:80].decode("utf-8", "replace")
        more = "..." if len(reason) > 80 else ""
        super().__init__(f"the service rejected the request: {shown!r}{more}")
        self.reason = reason


class EnvelopeError(SimplexRpcError):
    """A request or response envelope is invalid.

    ``code`` is the Service RPC error code a responder answers with, normally
    ``"bad_request"``.
    """

    def __init__(self, message: str, *, code: str = "bad_request") -> None:
        super().__init__(message)
        self.code = code


class AgentCryptoError(SimplexRpcError):
    """A layer of an agent message (envelope, box, ratchet, block) is malformed or does not open.

    ``layer`` names the layer (for example ``"box"``, ``"contact request"``,
    ``"ratchet header GCM"``); ``offset`` is where in that layer's bytes the
    decoding failed, or None when the layer fails as a whole (an AEAD tag).
    """

    def __init__(self, message: str, *, layer: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.layer = layer
        self.offset = offset


class CallSyntaxError(SimplexRpcError):
    """The text of a chat command is not a valid ``/_call`` command."""


class CollectorError(SimplexRpcError):
    """A reply collector was used wrongly: a call registered twice, or an unknown call."""


class DeclarationError(SimplexRpcError):
    """Profile declarations (``protocols``, ``publicGroup``, link data) are not valid."""


class LlmsTxtError(SimplexRpcError):
    """An llms.txt communication address is not valid, or a section has lines off the grammar."""


class ChatCoreError(SimplexRpcError):
    """The chat core refused a command, or could not be reached.

    ``chat_error`` is the core's error object (the ``chatError`` of a
    ``chatCmdError`` response, or the ``error`` of a native result), with any
    key material redacted, or None when the failure happened on this side
    (connection lost, no answer in time). ``type_path`` names it by the
    ``type`` tags nested in it, for example
    ``"errorAgent/AGENT/A_SERVICE/ASETimeout"``.
    """

    def __init__(self, message: str, *, chat_error: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.chat_error = chat_error

    @property
    def type_path(self) -> str:
        """The ``type`` tags of the error object, outermost first, joined by ``/``."""
        tags: list[str] = []
        node: object = self.chat_error
        while isinstance(node, dict) and isinstance(node.get("type"), str) and len(tags) < 16:
            tags.append(str(node["type"]))
            node = next((v for k, v in node.items() if k != "type" and isinstance(v, dict)), None)
        return "/".join(tags)


def install_hint(extra: str) -> str:
    """How to install the optional extra ``extra``: the one wording of every message.

    The package is not on PyPI yet, so the hint names both ways: the index
    once it is there, a wheel built from the checkout (``make dist``) until then.
    """
    return (
        f"pip install 'simplex-rpc[{extra}]' (until the package is on PyPI, from the wheel"
        f" `make dist` builds: pip install \"$(ls dist/simplex_rpc-*.whl)[{extra}]\";"
        " docs/install.md)"
    )

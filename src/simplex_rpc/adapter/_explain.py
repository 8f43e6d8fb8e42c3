"""What a failure means to the person who meets it: one table, used by every caller.

Two kinds of failure reach a user of the library and of every ``simplex-rpc``
command, and both are worded here:

* the chat core's errors (``chatCmdError``): :data:`CORE_ERRORS` gives, by
  the innermost ``type`` tag, one sentence of what happened and a hint of what
  to do; the message keeps the tag path at its end, for searching;
* a connection to the core that cannot be opened: :func:`connection_failure`
  says what was found at the address (nothing listening, a name that does not
  resolve, a server that is not a chat core, a TLS failure) instead of the
  exception's class.
"""

from __future__ import annotations

import socket
import ssl
import urllib.parse
from typing import Final

CORE_ERRORS: Final[dict[str, tuple[str, str]]] = {
    # simplex-chat Library/Commands.hs: a link that does not parse as a connection request.
    "invalidConnReq": (
        "this is not a SimpleX contact address link",
        "give the address link whole, as the bot printed it (https://simplex.chat/a#... or"
        " simplex:/a#...)",
    ),
    # simplexmq Agent.hs: A_SERVICE ASETimeout, no response within the request's timeout.
    "ASETimeout": (
        "the bot did not answer within the timeout",
        "check that the bot runs and its core has service requests on (/_start"
        " service_requests=on; `simplex-rpc doctor` on its side), or give a longer --timeout",
    ),
    # simplexmq Agent.hs: A_SERVICE ASENotDRAddress, the link carries no ratchet keys.
    "ASENotDRAddress": (
        "the address cannot take service requests: its link has no ratchet keys",
        "the bot's operator recreates the address with a short link that has them"
        " (`simplex-rpc doctor` shows it)",
    ),
    # simplex-chat Store: SEContactNotFound.
    "contactNotFound": (
        "there is no such contact for this user",
        "list the contacts with /_get chats (or connect to the bot first); @ID is the"
        " contactId, and --user picks the user",
    ),
    "groupNotFound": (
        "there is no such group for this user",
        "#ID is the groupId; --user picks the user",
    ),
    "noActiveUser": (
        "the core has no active user",
        "create a user in the chat core first (simplex-chat, or /create user)",
    ),
    "userUnknown": (
        "there is no such user in this core",
        "--user is the user id the core lists with /users",
    ),
    "LARGE": (
        "the request or response does not fit one message",
        "send less: the padded block holds 11,106 bytes",
    ),
}
"""The core's errors a user meets, by their innermost ``type`` tag: (what happened, what
to do)."""


def explain_core_error(what: str, type_path: str, detail: str = "") -> str:
    """The one-line message of a refused command ``what`` whose error is ``type_path``.

    A tag of :data:`CORE_ERRORS` gives its sentence and hint, with the path in
    brackets at the end; any other keeps the path (and the core's own detail).
    """
    tag = type_path.rsplit("/", 1)[-1] if type_path else ""
    known = CORE_ERRORS.get(tag)
    if known is None:
        message = f"chat core refused {what}: {type_path or 'unknown error'}"
        return f"{message} ({detail})" if detail else message
    sentence, hint = known
    return f"chat core refused {what}: {sentence}; {hint} [{type_path}]"


def _host_port(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "wss" else 80
    return host, str(port)


def connection_failure(url: str, shown: str, exc: BaseException) -> str:
    """Why the WebSocket connection to the core at ``url`` (``shown``: its redacted form)
    could not be opened, from the exception ``exc``, as one line with a next step."""
    host, port = _host_port(url)
    where = f"{host}:{port}"
    start = f"cannot connect to the chat core at {shown}"
    hint_core = "start it with simplex-chat -p PORT, or check --core"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return (
            f"{start}: not a chat core: the server answered HTTP {status}"
            f" (the chat core answers WebSocket at ws://HOST:PORT; {hint_core})"
        )
    if isinstance(exc, socket.gaierror):
        return f"{start}: cannot resolve {host} (check the host name in --core)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{start}: nothing listens on {where} ({hint_core})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"{start}: TLS: the certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or type(exc).__name__
        return (
            f"{start}: TLS failed ({reason}): the chat core serves plain ws://, unless a TLS"
            " proxy stands before it"
        )
    if isinstance(exc, ConnectionResetError):
        scheme = urllib.parse.urlsplit(url).scheme
        why = " (a wss:// URL to a server without TLS? the chat core serves ws://)"
        why = why if scheme == "wss" else ""
        return f"{start}: the server at {where} closed the connection{why}"
    if isinstance(exc, TimeoutError):
        return f"{start}: {where} did not answer in time (a firewall, or not a chat core)"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{start}: {exc.strerror} ({where})"
    if type(exc).__module__.startswith("websockets"):
        text = str(exc)[:120]
        return f"{start}: not a chat core: {where} does not answer a WebSocket handshake ({text})"
    return f"{start}: {type(exc).__name__}"


__all__ = ["CORE_ERRORS", "connection_failure", "explain_core_error"]

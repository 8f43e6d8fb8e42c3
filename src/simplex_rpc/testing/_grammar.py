"""The simulator's command grammar: the frames and command lines the chat core parses.

``apps/simplex-chat/Server.hs`` (simplex-chat/simplex-chat, commit 00cde8a4) reads
each WebSocket frame in its ``receive`` thread: a frame that is not a
``ChatSrvRequest {corrId, remoteHostId, cmd}`` is answered ``sendError Nothing
Nothing "invalid request"``, and a command line that ``parseChatCommand`` refuses
is answered there too, with the parser's message, without waiting for the command
in progress on that connection. Only a command that parses is queued for the
connection's ``client`` thread. This module is that first step:
:func:`request_of` decodes a frame, :func:`parses` says whether a command line is
one the parser takes (and the simulator implements).

Each pattern quotes its line of ``chatCommandP``
(``src/Simplex/Chat/Library/Commands.hs``) or, for the Service RPC commands,
``bots/api/COMMANDS.md`` and the plan ``plans/2026-07-22-service-rpc-chat.md``.
The chat commands' own patterns (``/_send``, ``/_group``, ...) live with the chat
model (``_chat.py``) and are listed here through :data:`CHAT_COMMANDS`.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .._wire import strict_json as _json
from ._chat import CHAT_COMMANDS

HOST: Final = "simulator.local"
_TOKEN: Final = r"[A-Za-z0-9_-]{24}"
SHORT_LINK: Final = re.compile(rf"simplex:/a#(?P<token>{_TOKEN})\?h=simulator\.local")
FULL_LINK: Final = re.compile(
    rf"simplex:/contact#/\?v=2-7&smp=smp%3A%2F%2Fsimulator\.local%2F(?P<token>{_TOKEN})"
    r"(?P<rk>&rk=[A-Za-z0-9_-]+)?"
)
SIMPLEX_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}\.simplex")
"""A SimpleX contact name as the simulator takes it: ``alice.simplex``."""
GROUP_LINK: Final = re.compile(r"simplex:/g#(?P<token>[A-Za-z0-9_-]{24})\?h=simulator\.local")
# /_service_request <userId> <target>[ timeout=<s>][ sign_key=<k>] <json>
# (the parser's syntax as plans/2026-06-25-name-resolution.md quotes it, Commands.hs:5520)
SERVICE_REQUEST: Final = re.compile(
    r"/_service_request (?P<user>\d+) (?P<target>\S+)"
    r"(?: timeout=(?P<timeout>\S*))?(?: sign_key=(?P<key>\S*))? (?P<json>.+)",
    re.DOTALL,
)
# /_service_response <userId> <requestId> <json> (COMMANDS.md, APISendServiceResponse)
SERVICE_RESPONSE: Final = re.compile(
    r"/_service_response (?P<user>\d+) (?P<rid>\S+) (?P<json>.+)", re.DOTALL
)
_N: Final = r"[0-9]{1,18}"  # A.decimal of an Int64 id (ASCII digits only)
# "/_address " *> (APICreateMyAddress <$> A.decimal)  /  /_address <userId>[ pq_ratchet=on|off]
ADDRESS: Final = re.compile(rf"/_address (?P<user>{_N})(?: pq_ratchet=(?P<pq>on|off))?")
# "/_address_settings " *> (APISetAddressSettings <$> A.decimal <* A.space <*> jsonP)
ADDRESS_SETTINGS: Final = re.compile(
    rf"/_address_settings (?P<user>{_N})(?: pq_ratchet=(?P<pq>on|off))? (?P<json>.+)", re.DOTALL
)
# "/_short_link_address <uid> pq_ratchet=on" (APIAddMyAddressShortLink, Commands.hs:5746, as
# plans/2026-06-25-name-resolution.md cites it) and "/_rotate_address_keys <userId>"
# (APIRotateAddressRatchetKeys, Commands.hs:5747).
SHORT_LINK_ADDRESS: Final = re.compile(
    rf"/_short_link_address (?P<user>{_N})(?: pq_ratchet=(?P<pq>on|off))?"
)
ROTATE_ADDRESS_KEYS: Final = re.compile(rf"/_rotate_address_keys (?P<user>{_N})")
# "/_connect plan " *> (APIConnectPlan <$> A.decimal <* A.space <*> strP)
CONNECT_PLAN: Final = re.compile(rf"/_connect plan (?P<user>{_N}) (?P<link>\S+)")
# "/_connect " *> (APIConnect <$> A.decimal <*> incognitoOnOffP <* A.space <*> connLinkP)
# connLinkP = do (ACR m cReq) <- strP; sLink_ <- optional (A.space *> strP)
# incognitoOnOffP = (A.space *> "incognito=" *> onOffP) <|> pure False
CONNECT: Final = re.compile(
    rf"/_connect (?P<user>{_N})(?: incognito=(?P<incognito>on|off))?"
    r" (?P<link>\S+)(?: (?P<short>\S+))?"
)
# "/_accept" *> (APIAcceptContact <$> incognitoOnOffP <* A.space <*> A.decimal)
ACCEPT: Final = re.compile(rf"/_accept(?: incognito=(?P<incognito>on|off))? (?P<id>{_N})")
# "/_reject " *> (APIRejectContact <$> A.decimal)
REJECT: Final = re.compile(rf"/_reject (?P<id>{_N})")
# "/_show_address " *> (APIShowMyAddress <$> A.decimal)
# "/_delete_address " *> (APIDeleteMyAddress <$> A.decimal)
USER_COMMAND: Final = re.compile(rf"/_(?P<name>show_address|delete_address) (?P<user>{_N})")
# "/_start " *> do mainApp <- "main=" *> onOffP; enableSndFiles <- " snd_files=" *> onOffP
#   <|> pure mainApp; largeLinkData <- " large_link_data=" *> onOffP <|> pure False
# "/_start" $> StartChat {mainApp = True, enableSndFiles = True, largeLinkData = False}
# and, last, " service_requests=on|off" (COMMANDS.md of the Service RPC core, StartChat).
START: Final = re.compile(
    r"/_start(?: main=(?P<main>on|off)(?: snd_files=(?:on|off))?(?: large_link_data=(?:on|off))?"
    r"(?: service_requests=(?P<service>on|off))?)?"
)
STOP: Final = "/_stop"
# ("/user" <|> "/u") $> ShowActiveUser
SHOW_USER: Final = frozenset({"/user", "/u"})
# parseChatCommand = A.parseOnly chatCommandP . B.dropWhileEnd isSpace
SPACE: Final = " \t\n\r\f\v"

_CORE_COMMANDS: Final = (
    START,
    CONNECT_PLAN,
    CONNECT,
    ACCEPT,
    REJECT,
    SERVICE_REQUEST,
    SERVICE_RESPONSE,
    ADDRESS,
    ADDRESS_SETTINGS,
    SHORT_LINK_ADDRESS,
    ROTATE_ADDRESS_KEYS,
    USER_COMMAND,
)


def parses(cmd: str) -> bool:
    """Whether the core's parser takes the command line ``cmd`` (trailing space dropped).

    False for a line no pattern of the simulator takes: the core's ``receive``
    thread answers it at once (:func:`~._chat.unknown_command`), ahead of the
    command in progress. An argument that fails inside the line's JSON (``jsonP``)
    is checked later, while the command runs: the simulator's patterns take any
    text there.
    """
    line = cmd.rstrip(SPACE)
    if line == STOP or line in SHOW_USER:
        return True
    return any(p.fullmatch(line) for p in _CORE_COMMANDS) or any(
        p.fullmatch(line) for p in CHAT_COMMANDS
    )


def request_of(message: str | bytes) -> tuple[str, str] | None:
    """``(corrId, cmd)`` of a frame, or None when it is not a request.

    Server.hs decodes ``ChatSrvRequest {corrId :: Text, remoteHostId :: Maybe
    RemoteHostId, cmd :: Text}`` with ``J.decodeStrict'``.
    """
    try:
        msg = _json.loads(message)
    except _json.JsonError:
        return None
    if not isinstance(msg, dict):
        return None
    corr_id, cmd, host = msg.get("corrId"), msg.get("cmd"), msg.get("remoteHostId")
    if not isinstance(corr_id, str) or not isinstance(cmd, str):
        return None
    if host is not None and (isinstance(host, bool) or not isinstance(host, int)):
        return None
    return corr_id, cmd


def link_token(link: str) -> str | None:
    """The address token of a contact address link of this simulator (short or full), or None."""
    match = SHORT_LINK.fullmatch(link) or FULL_LINK.fullmatch(link)
    return match["token"] if match is not None else None


def address_settings_of(text: str) -> dict[str, Any] | None:
    """``AddressSettings`` (TYPES.md) decoded from ``text``, or None when it is not one:
    ``businessAddress`` (bool), ``autoAccept?`` (``AutoAccept`` ``{acceptIncognito}``),
    ``autoReply?`` (a ``MsgContent``)."""
    try:
        value = _json.loads(text)
    except _json.JsonError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("businessAddress"), bool):
        return None
    auto = value.get("autoAccept")
    if auto is not None and (
        not isinstance(auto, dict) or not isinstance(auto.get("acceptIncognito", False), bool)
    ):
        return None
    reply = value.get("autoReply")
    if reply is not None and (
        not isinstance(reply, dict) or not isinstance(reply.get("type"), str)
    ):
        return None
    settings: dict[str, Any] = {"businessAddress": value["businessAddress"]}
    if auto is not None:
        settings["autoAccept"] = {"acceptIncognito": bool(auto.get("acceptIncognito", False))}
    if reply is not None:
        settings["autoReply"] = reply
    return settings

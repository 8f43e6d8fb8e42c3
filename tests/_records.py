"""The chat core's own types, and the extensions the ``simplex-chat`` package does not
know, for checking the simulator's frames (no tests here; tests/testing/test_simulator_records.py
names the sources of each extension).

Importing this module skips the importing test when ``simplex-chat`` is not installed.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

import pytest

from _core_types import Checker

simplex_chat_types = pytest.importorskip("simplex_chat.types")
T = simplex_chat_types.T
CR = simplex_chat_types.CR
CEvt = simplex_chat_types.CEvt


# -- the extensions the package does not know ---------------------------------


class ServiceRequestEvent(TypedDict):
    type: Literal["serviceRequest"]
    user: T.User
    requestId: str
    signerKey: NotRequired[str]
    requestData: dict[str, object]


class ServiceResponse(TypedDict):
    type: Literal["serviceResponse"]
    user: T.User
    responseData: dict[str, object]


class ServiceReplyAccepted(TypedDict):
    type: Literal["serviceReplyAccepted"]
    user: T.User
    connectionId: str


class ServiceReplySentEvent(TypedDict):
    # CEvtServiceReplySent {connectionId} (plans/2026-07-20-supporter-badges-v2-implementation.md)
    type: Literal["serviceReplySent"]
    connectionId: str


class AgentServiceError_ASEBadSignature(TypedDict):
    type: Literal["ASEBadSignature"]


class AgentServiceError_ASERejected(TypedDict):
    type: Literal["ASERejected"]
    rejectReason: str


class AgentServiceError_ASETimeout(TypedDict):
    type: Literal["ASETimeout"]


class AgentServiceError_ASENoPendingRequest(TypedDict):
    type: Literal["ASENoPendingRequest"]


class AgentServiceError_ASENotDRAddress(TypedDict):
    type: Literal["ASENotDRAddress"]


AgentServiceError = (
    AgentServiceError_ASERejected
    | AgentServiceError_ASETimeout
    | AgentServiceError_ASENoPendingRequest
    | AgentServiceError_ASENotDRAddress
    | AgentServiceError_ASEBadSignature
)


class SMPAgentError_A_SERVICE(TypedDict):
    type: Literal["A_SERVICE"]
    serviceError: AgentServiceError


EXTRA_KEYS = {
    "Preferences": ["protocols"],
    "GroupPreferences": ["protocols"],
    "ContactShortLinkData": ["serves"],
}

RESPONSES = CR.ChatResponse | ServiceResponse | ServiceReplyAccepted
EVENTS = CEvt.ChatEvent | ServiceRequestEvent | ServiceReplySentEvent


def checker() -> Checker:
    return Checker(
        extra_keys=EXTRA_KEYS,
        extra_members=[(T.SMPAgentError, (SMPAgentError_A_SERVICE,))],
    )


def check_frame(check: Checker, frame: Any, where: str) -> None:
    """A frame of the core's WebSocket server (apps/simplex-chat/Server.hs, ChatSrvResponse):
    ``corrId`` (text, a response) or none (an event, or the answer to a frame that was
    not a request), ``resp``, and nothing else."""
    if not isinstance(frame, dict):
        check.errors.append(f"{where}: a frame is not an object")
        return
    for key in frame:
        if key not in ("corrId", "resp", "remoteHostId"):
            check.errors.append(f"{where}: unknown frame field {key!r}")
    if "corrId" in frame:
        if not isinstance(frame["corrId"], str):
            check.errors.append(f"{where}: corrId is not text")
        check.check(frame.get("resp"), RESPONSES, where)
    elif isinstance(frame.get("resp"), dict) and frame["resp"].get("type") == "chatCmdError":
        check.check(frame["resp"], CR.ChatCmdError, where)
    else:
        check.check(frame.get("resp"), EVENTS, where)

"""The ``doctor`` subcommand: what works here, and what to do about what does not.

``simplex-rpc doctor [--core URL]`` prints one line per finding, each with a hint
where one applies: the backend, the extras installed, and with a core (``--core``
or ``SIMPLEX_RPC_CORE``): whether it answers, whether its chat is started, whether
the user's address exists and has ratchet keys on its short link, and whether
service requests to it are answered. Nothing on the core is changed: the chat is
not started, no address is made, and the one probe request carries a protocol no
bot serves.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ChatCoreError, install_hint
from ._common import EXIT_INVALID, EXIT_OK
from ._options import add_core_option, add_user_option

EXTRAS: Final = {
    "mcp": ("mcp",),
    "a2a": ("a2a",),
    "crypto": ("cryptography",),
    "sntrup761": ("cryptography", "pqcrypto"),
    "discover": ("httpx",),
    "plot": ("matplotlib",),
    "native": ("simplex_chat",),
}
"""Each optional extra, by the modules that say it is installed."""

PROBE_PROTOCOL: Final = "simplex-rpc-doctor"
"""The probe request's protocol: no bot serves it, so a responder answers
``unsupported_protocol`` and runs nothing."""

PROBE_TIMEOUT: Final = 3


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``ok``, ``note`` (works, could be better) or ``fail``."""

    status: str
    what: str
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<4} {self.what}: {self.detail}"
        return f"{text}\n     hint: {self.hint}" if self.hint else text


def _backend() -> Finding:
    from .. import backend_info

    info = backend_info()
    if info.name == "c":
        return Finding("ok", "backend", f"c ({info.reason})")
    return Finding(
        "note",
        "backend",
        f"{info.name} ({info.reason}): the same bytes and errors, slower",
        "install with a C compiler and Python's headers for the C backend (docs/install.md)",
    )


def _extras() -> list[Finding]:
    found = []
    for extra, modules in EXTRAS.items():
        if all(importlib.util.find_spec(m) is not None for m in modules):
            found.append(Finding("ok", f"extra {extra}", "installed"))
        else:
            found.append(Finding("note", f"extra {extra}", "not installed", install_hint(extra)))
    return found


async def _core_findings(url: str, user: int) -> list[Finding]:
    from .._wire.envelope import Request
    from ..adapter import ChatCore

    findings: list[Finding] = []
    try:
        async with ChatCore.connect(url, open_timeout=10) as core:
            findings.append(Finding("ok", "core", f"{url} answers"))
            try:
                shown = await core.command(f"/_show_address {user}")
            except ChatCoreError as exc:
                if "userContactLinkNotFound" in exc.type_path:
                    findings.append(
                        Finding(
                            "note",
                            "address",
                            f"user {user} has no contact address",
                            "simplex-rpc serve --address makes one, with ratchet keys",
                        )
                    )
                    findings.append(await _started_without_address(core, user))
                    return findings
                raise
            link = _short_link(shown)
            if link is None:
                findings.append(
                    Finding(
                        "fail",
                        "address",
                        f"user {user}'s address has no short link: service requests need the"
                        " ratchet keys a short link carries",
                        "simplex-rpc serve adds one (/_short_link_address USER pq_ratchet=on)",
                    )
                )
                findings.append(await _started_without_address(core, user))
                return findings
            probe = Request(protocol=PROBE_PROTOCOL, request={"doctor": 1})
            try:
                response = await core.service_request(user, link, probe, timeout=PROBE_TIMEOUT)
            except ChatCoreError as exc:
                findings += _probe_failure(exc, user)
            else:
                findings.append(Finding("ok", "chat", "started"))
                findings.append(Finding("ok", "address", "its short link has ratchet keys", ""))
                code = response.error.code if response.error is not None else "a response"
                findings.append(
                    Finding(
                        "ok",
                        "service requests",
                        f"on: a request to the address was answered ({code})",
                    )
                )
    except ChatCoreError as exc:
        findings.append(Finding("fail", "core", str(exc)))
    return findings


def _short_link(shown: dict[str, Any]) -> str | None:
    link = shown.get("contactLink")
    conn = link.get("connLinkContact") if isinstance(link, dict) else None
    short = conn.get("connShortLink") if isinstance(conn, dict) else None
    return short if isinstance(short, str) and short else None


_NOT_STARTED_HINT: Final = (
    "simplex-rpc serve starts it with service requests on; or run simplex-chat without -m"
    " (then serve --start restart)"
)


async def _started_without_address(core: Any, user: int) -> Finding:
    """Whether the chat is started, read with a service response to a request id that
    does not exist: refused ``chatNotStarted`` before the chat starts, otherwise with
    another error, and nothing is sent (the core's plans, plans/2026-07-22-service-rpc-
    chat.md; not yet in its code)."""
    try:
        await core.command(f"/_service_response {user} simplex-rpc-doctor-probe json {{}}")
    except ChatCoreError as exc:
        if exc.type_path.endswith("chatNotStarted"):
            return Finding("fail", "chat", "not started", _NOT_STARTED_HINT)
    return Finding("ok", "chat", "started")


def _probe_failure(exc: ChatCoreError, user: int) -> list[Finding]:
    tag = exc.type_path.rsplit("/", 1)[-1]
    if tag == "chatNotStarted":
        return [Finding("fail", "chat", "not started", _NOT_STARTED_HINT)]
    started = Finding("ok", "chat", "started")
    if tag == "ASENotDRAddress":
        return [
            started,
            Finding(
                "fail",
                "address",
                "its short link has no ratchet keys: service requests to it fail",
                "simplex-rpc serve --address adds them (/_address_settings USER pq_ratchet=on)",
            ),
        ]
    if tag == "ASETimeout":
        return [
            started,
            Finding("ok", "address", "its short link has ratchet keys"),
            Finding(
                "fail",
                "service requests",
                f"a request to the address was not answered within {PROBE_TIMEOUT} s: service"
                " requests are off, or no responder runs",
                "simplex-rpc serve --start restart (service requests on, and a responder)",
            ),
        ]
    return [started, Finding("fail", "service requests", str(exc))]


def _cmd_doctor(args: argparse.Namespace) -> int:
    findings = [_backend(), *_extras()]
    if args.core is not None:
        findings += asyncio.run(_core_findings(args.core, args.user))
    else:
        findings.append(
            Finding(
                "note",
                "core",
                "not checked",
                "give --core ws://HOST:PORT or set SIMPLEX_RPC_CORE",
            )
        )
    if args.json:
        rows = [
            {"status": f.status, "what": f.what, "detail": f.detail, "hint": f.hint or None}
            for f in findings
        ]
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    else:
        for finding in findings:
            print(finding.line())
    return EXIT_INVALID if any(f.status == "fail" for f in findings) else EXIT_OK


def register(subparsers: Any) -> None:
    """Add ``doctor`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "doctor",
        help="check the installation and the chat core; one line per finding, with hints",
        description="Report the backend, the extras installed and, with a core (--core or"
        " SIMPLEX_RPC_CORE), whether it answers, whether its chat is started, whether the"
        " user's address has ratchet keys on its short link and whether service requests"
        " to it are answered. Changes nothing on the core. Exit status 0, 1 when a finding"
        " failed.",
    )
    add_core_option(p, required=False)
    add_user_option(p)
    p.add_argument("--json", action="store_true", help="the findings as a JSON list")
    p.set_defaults(handler=_cmd_doctor)


__all__ = ["register"]

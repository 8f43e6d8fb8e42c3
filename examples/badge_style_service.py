"""A Service RPC service with an envelope of its own, badge-style, on the raw layer.

The supporter badge service of SimpleX (simplex-chat ``docs/protocol/badges-rpc.md``)
does not use the protocol text's ``{protocol, request}`` envelope: it sends
``{"version": uint16, "purchaseKey"?, "request": {"type": …}}`` and answers
objects tagged by ``type``, errors among them as ``{"type": "error", "code",
"message"?, "retryAfter"?}``. This example is a small service of that shape
(a toy: codes redeemed for numbered badges), written with
``ChatCore.serve_raw`` and called with ``ChatCore.service_request_raw``:

* a ``version`` (1; any other is answered ``unsupported_version``);
* a signed key, ``purchaseKey``, that must equal the key the core verified
  (``bad_request`` otherwise: the command belongs to that key);
* type-tagged answers (``badge``, ``status``) and errors (``TYPED_ERRORS``);
* idempotent commands: ``redeem`` writes once, and a repeat of the identical
  signed request is answered from the answer store (``answers=``) without a
  second run, even after a restart with a ``SQLiteAnswerStore``;
* budgets: the failures of each signer, the failures of all, and the unsigned
  calls, each a token bucket (``BUDGETS``).

Run a responder against a core (``simplex-chat -p 5225 -m``, or ``simplex-rpc
simulator -m``)::

    python examples/badge_style_service.py ws://127.0.0.1:5225/bob answers.db

and call it from another core with ``simplex-rpc call --raw`` or with
:func:`redeem` below. ``tests/docs/test_example_badge_style.py`` runs both
through the simulator.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from simplex_rpc import PublicKey, SigningKey
from simplex_rpc.adapter import (
    TYPED_ERRORS,
    AnswerStoreProtocol,
    ChatCore,
    RateLimit,
    RawRequest,
    ServeOutcome,
    SQLiteAnswerStore,
)

#: The one version this service speaks.
VERSION = 1
#: The badge service's budgets: each signer's failures (5 an hour), everyone's failures
#: (100 an hour), and the unsigned calls (60 a minute). A repeat answered from the store
#: passes them like any request, and never counts as a failure.
BUDGETS = (
    RateLimit(5, 3600, scope="signer", failures_only=True),
    RateLimit(100, 3600, scope="global", failures_only=True),
    RateLimit(60, 60, scope="unsigned"),
)


def error(code: str, message: str) -> dict[str, Any]:
    """A type-tagged error answer (the service's own codes next to the protocol's)."""
    return TYPED_ERRORS.error(code, message)


class BadgeService:
    """The service's state and its handler: codes, and the badges issued for them.

    ``runs`` counts the handler's runs (what an answer store saves);
    ``issued`` maps a code to the signer's key text and the badge's serial.
    A real service keeps these in its database; this toy keeps them in memory
    and takes them in the constructor, so that a test can restart it.
    """

    def __init__(self, codes: set[str], issued: dict[str, tuple[str, int]] | None = None) -> None:
        self.codes = set(codes)
        self.issued: dict[str, tuple[str, int]] = {} if issued is None else issued
        self.runs = 0

    async def handle(self, raw: RawRequest) -> dict[str, Any]:
        """Answer one request of the service's envelope."""
        self.runs += 1
        data = raw.data
        version = data.get("version")
        if type(version) is not int or not 0 <= version <= 0xFFFF:
            return error("bad_request", "version: expected a uint16")
        if version != VERSION:
            return error("unsupported_version", f"this service speaks version {VERSION}")
        request = data.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("type"), str):
            return error("bad_request", "request: expected an object with a type")
        if "purchaseKey" in data:
            # The signed key must be the signer's: the core verified the signature.
            key = data["purchaseKey"]
            if raw.signer is None or not isinstance(key, str) or key != raw.signer.encode():
                return error("bad_request", "purchaseKey must equal the key that signed")
        kind = request["type"]
        if kind == "status":
            return {"type": "status", "version": VERSION, "open": len(self.codes)}
        if kind == "redeem":
            return self.redeem(raw.signer, data.get("purchaseKey"), request.get("code"))
        return error("bad_request", "request: unknown type")

    def redeem(self, signer: PublicKey | None, key: object, code: object) -> dict[str, Any]:
        """``redeem``: a code for a badge, once; signed, with ``purchaseKey``."""
        if signer is None or key is None:
            return error("bad_request", "redeem: sign the request and name purchaseKey")
        if not isinstance(code, str):
            return error("bad_request", "redeem: code: expected a string")
        owner = self.issued.get(code)
        if owner is not None:
            # Another request of the same key for the same code (not byte-identical, so not
            # answered by the store) gets its badge again; another key is refused.
            if owner[0] == signer.encode():
                return {"type": "badge", "code": code, "serial": owner[1]}
            return error("already_redeemed", "the code was redeemed by another key")
        if code not in self.codes:
            return error("unknown_code", "no such code")
        self.codes.discard(code)
        serial = len(self.issued) + 1
        self.issued[code] = (signer.encode(), serial)
        return {"type": "badge", "code": code, "serial": serial}


async def serve(
    core: ChatCore,
    service: BadgeService,
    answers: AnswerStoreProtocol | None,
    *,
    budgets: Sequence[RateLimit] = BUDGETS,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> ServeOutcome:
    """Serve ``service`` as user 1 of ``core`` until ``stop`` (or cancellation)."""
    return await core.serve_raw(
        1,
        service.handle,
        errors=TYPED_ERRORS,
        answers=answers,
        rate_limit=budgets,
        ready=ready,
        stop=stop,
    )


def redeem_request(key: SigningKey, code: str) -> dict[str, Any]:
    """The ``redeem`` request of ``key`` for ``code``, in the service's envelope."""
    return {
        "version": VERSION,
        "purchaseKey": key.public_key.encode(),
        "request": {"type": "redeem", "code": code},
    }


async def redeem(core: ChatCore, target: str, key: SigningKey, code: str) -> dict[str, Any]:
    """Redeem ``code``: the identical signed request, repeated on a timeout or a
    ``retryAfter`` (never on a timer), so the service answers a repeat from its store."""
    return await core.service_request_raw(
        1,
        target,
        redeem_request(key, code),
        sign_key=key,
        timeout=30,
        retries=2,
        max_retry_after=60,
        errors=TYPED_ERRORS,
    )


async def main(url: str, path: str) -> None:  # pragma: no cover - runs until stopped
    with SQLiteAnswerStore(path, window=600) as store:
        async with ChatCore.connect(url) as core:
            await core.start(service_requests=True)
            print((await core.service_address(1)).link, flush=True)
            await serve(core, BadgeService({"FREE-1", "FREE-2"}), store)


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(main(sys.argv[1], sys.argv[2]))

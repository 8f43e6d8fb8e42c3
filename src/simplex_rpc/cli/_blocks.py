"""``seal`` and ``open``: a payload into the agent's padded block, and back.

A request is signed and bound to its AD, a response or rejection only padded;
``open`` verifies a signed request. Blocks are binary: ``-o FILE``, a pipe, or
hex (``_io``); never raw to a terminal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._wire import backend as _backend
from ..errors import BadSignature
from ._common import EXIT_INVALID, EXIT_OK, emit_json, read_input
from ._io import (
    AD_HELP,
    INPUTS,
    add_binary_input,
    add_binary_output,
    add_payload,
    check_one_stdin,
    read_binary,
    read_binary_file,
    signing_key,
    text_or_none,
    write_binary,
    write_payload,
)
from ._options import add_json_option


def _reply_queue(text: str) -> Any:
    """The ``--reply-queue`` option: an SMP queue URI (``smp://...``)."""
    from .._wire.agent_block import SMPQueueInfo

    return SMPQueueInfo.from_uri(text)


def _cmd_seal(args: argparse.Namespace) -> int:
    impl = _backend.active
    if args.kind == "request":
        check_one_stdin(args.key, args.ad, args.payload)
        queue = _reply_queue(args.reply_queue)
        key = None if args.key is None else signing_key(args.key)
        ad = read_binary(args.ad, "ad")
        payload = read_input(args.payload, what="payload")
        block: bytes = impl.seal_request(payload, ad, key, reply_queue=queue)
    elif args.kind == "response":
        payload = read_input(args.payload, what="payload")
        block = impl.seal_response(payload, pq_support=not args.no_pq)
    else:
        reason = read_input(args.payload, what="reason")
        block = impl.seal_rejection(reason, pq_support=not args.no_pq)
    write_binary(block, args.output, as_hex=args.hex, what="block")
    return EXIT_OK


def _cmd_open(args: argparse.Namespace) -> int:
    impl = _backend.active
    info: dict[str, Any] = {"kind": args.kind}
    if args.kind == "request":
        check_one_stdin(args.input, args.ad)
        ad = read_binary(args.ad, "ad")
        block = read_binary_file(args.input, as_hex=args.hex, what="block")
        try:
            opened = impl.open_request(block, ad, strict=args.strict)
        except BadSignature as exc:
            if args.json:
                emit_json({"kind": "request", "valid": False, "error": str(exc)})
            else:
                print(f"simplex-rpc open: invalid: {exc}", file=sys.stderr)
            return EXIT_INVALID
        payload = opened.payload
        signer = opened.signer
        queues = [q.uri() for q in opened.reply_queues]
        info |= {
            "signed": signer is not None,
            "signer": signer and signer.encode(),
            "reply_queues": queues,
        }
    else:
        from ..errors import ServiceRejected

        block = read_binary_file(args.input, as_hex=args.hex, what="block")
        try:
            payload = impl.open_response(block, strict=args.strict)
        except ServiceRejected as exc:
            text = text_or_none(exc.reason)
            if args.json:
                emit_json(
                    {
                        "kind": "response",
                        "rejected": True,
                        "reason": text,
                        "reason_hex": exc.reason.hex() if text is None else None,
                    }
                )
            else:
                print(f"simplex-rpc open: {exc}", file=sys.stderr)
            return EXIT_INVALID
        signer = None
        queues = []
    envelope = _envelope_check(args.kind, payload, signer)
    if not args.json:
        if args.kind == "request":
            who = f"signed by {signer.encode()}" if signer is not None else "unsigned"
            print(
                f"simplex-rpc open: request, {who}, {len(payload)} bytes, reply queue {queues[0]}",
                file=sys.stderr,
            )
        if not envelope["valid"]:
            print(f"simplex-rpc open: note: {envelope['error']}", file=sys.stderr)
        elif envelope.get("request_key_check"):
            check = envelope["request_key_check"]
            print(
                f"simplex-rpc open: note: a responder answers {check['code']}: {check['message']}",
                file=sys.stderr,
            )
        write_payload(payload)
        return EXIT_OK
    text = text_or_none(payload)
    info |= {
        "valid": True,
        "payload_length": len(payload),
        "payload": text,
        "payload_hex": payload.hex() if text is None else None,
        "envelope": envelope,
    }
    emit_json(info)
    return EXIT_OK


def _envelope_check(kind: str, payload: bytes, signer: Any) -> dict[str, Any]:
    """Parse the payload as the envelope of ``kind``: the responder's checks, as data."""
    from .._wire.envelope import Request, Response, check_request_key
    from ..errors import EnvelopeError

    try:
        if kind == "request":
            request = Request.parse(payload)
            problem = check_request_key(request, signer)
            return {
                "valid": True,
                "protocol": request.protocol,
                "request_key": request.request_key and request.request_key.encode(),
                "request_key_check": None
                if problem is None
                else {"code": problem.code, "message": problem.message},
            }
        response = Response.parse(payload)
        return {
            "valid": True,
            "ok": response.ok,
            "error": None if response.error is None else response.error.to_dict(),
        }
    except EnvelopeError as exc:
        return {"valid": False, "error": str(exc), "code": exc.code}


# -- vectors and demo ----------------------------------------------------------------


def register(subparsers: Any) -> None:
    """Add ``seal`` and ``open`` to the ``simplex-rpc`` parser."""
    # "seal request", "open response", "vectors check": nested subcommands, so that
    # options and the optional positional can come in any order.
    p = subparsers.add_parser(
        "seal",
        help="encode, sign and pad a payload into the agent's padded block",
        description="Seal a request ('A' with --reply-queue, signed with --key, bound to"
        " --ad; 11,106 bytes), a response ('P') or a rejection ('J', the payload is the"
        " reason; 11,106 bytes, 14,832 with --no-pq) into the agent's padded block. The"
        " block is binary: it goes to -o FILE, to a pipe, or as hex with --hex; never raw"
        " to a terminal. " + INPUTS,
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in ("request", "response", "rejection"):
        k = kinds.add_parser(
            kind,
            help=f"seal a {kind}",
            description=f"Seal a {kind} payload into the padded block. " + INPUTS,
        )
        add_payload(k)
        if kind == "request":
            k.add_argument("--ad", required=True, metavar="AD", help=AD_HELP)
            k.add_argument(
                "--key", metavar="KEY", help="private key text, @FILE or - (signs the request)"
            )
            k.add_argument(
                "--reply-queue",
                required=True,
                metavar="URI",
                help="the reply queue as an SMP queue URI (smp://keyHash@host/senderId#/?v=..)",
            )
        else:
            k.set_defaults(ad=None, key=None)
            k.add_argument(
                "--no-pq",
                action="store_true",
                help="the service address has PQ support off: pad to 14,832 bytes",
            )
        add_binary_output(k, "block")
        k.set_defaults(handler=_cmd_seal)

    p = subparsers.add_parser(
        "open",
        help="unpad and decode a block, verifying a signed request",
        description="Open a block: print its payload (the exact bytes) to stdout. A signed"
        " request is verified under --ad: exit status 1 when it does not verify, 2 for a"
        " malformed block; a rejection ('J') exits 1 with its reason. --json adds the"
        " signer, the reply queues (as URIs) and the envelope check.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in ("request", "response"):
        k = kinds.add_parser(
            kind,
            help=f"open a {kind} block",
            description=f"Open a {kind} block and print its payload"
            + (": a signed request is verified under --ad (exit 1 if it does not verify)."
               if kind == "request" else "."),
        )  # fmt: skip
        add_binary_input(k, "block")
        if kind == "request":
            k.add_argument("--ad", required=True, metavar="AD", help=AD_HELP)
        else:
            k.set_defaults(ad=None)
        k.add_argument("--strict", action="store_true", help="require every fill byte to be '#'")
        add_json_option(k, "print the payload, signer and envelope check as JSON")
        k.set_defaults(handler=_cmd_open)


__all__ = ["register"]

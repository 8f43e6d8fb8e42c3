"""``simplex-rpc agent``: Service RPC messages as the SimpleX agent v8 encrypts them.

``keygen`` makes a service address's keys; ``seal-request`` seals a request to its
public keys (and keeps the requester's state in a private file); ``open-request``
opens it with the private keys (and keeps the reply context in a private file);
``seal-response`` answers; ``open-response`` reads the answer. Keys, states and
contexts are text, given literally, as ``@FILE`` or ``-``; messages are binary (a
file, ``-``, or hex with ``--hex``), written to ``-o FILE``, a pipe, or as hex.
Private material goes only to new files of mode 0600 (or to stdout when asked
with ``-o -``), never into a message or an error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import BadSignature, ServiceRejected, install_hint
from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    emit_json,
    fail,
    read_input,
    read_signing_key,
    refuse_if_readable_by_others,
)
from ._io import (
    INPUTS,
    add_binary_input,
    add_binary_output,
    check_one_stdin,
    emit_keys,
    read_binary_file,
    write_binary,
    write_payload,
    write_private,
)
from ._options import add_json_option


def _crypto() -> Any:
    """The cryptography module, or one line naming the extra when a dependency is missing."""
    try:
        from .._wire import agent_crypto
    except ImportError as exc:
        fail(f"the agent's cryptography needs: {install_hint('sntrup761')} ({exc})")
    return agent_crypto


def _private(spec: str, what: str, decode: Any) -> Any:
    """Private material from ``spec``, decoded; a file others can read is refused, as
    ssh does, once it is known to hold it (as the core's keys are)."""
    value = decode(_text(spec, what))
    if spec.startswith("@"):
        refuse_if_readable_by_others(spec[1:], what)
    return value


def _text(spec: str, what: str) -> str:
    data = read_input(spec, what=what)
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        fail(f"{what}: not ASCII text")
    if not text:
        fail(f"{what}: empty")
    return text


def _cmd_keygen(args: argparse.Namespace) -> int:
    ac = _crypto()
    pq_support = None if args.pq_support is None else args.pq_support == "on"
    keys = ac.AddressKeys.generate(pq=not args.no_kem, pq_support=pq_support)
    public = keys.public
    fields = None
    if args.json:
        fields = {
            "public_keys": public.encode(),
            "link_data": public.link_data().hex(),
            "key_id": public.key_id.hex(),
            "kem": public.kem is not None,
            "pq_support": keys.pq_support,
        }
    emit_keys(public.encode(), keys.encode(), args.output, noun="keys", option="-o", fields=fields)
    return EXIT_OK


def _cmd_seal_request(args: argparse.Namespace) -> int:
    ac = _crypto()
    from .._wire.agent_block import SMPQueueInfo

    check_one_stdin(args.address, args.key, args.payload)
    address = ac.AddressPublicKeys.decode(_text(args.address, "--address"))
    queue = SMPQueueInfo.from_uri(args.reply_queue)
    key = None if args.key is None else read_signing_key(args.key, what="--key")
    payload = read_input(args.payload, what="payload")
    sent = ac.seal_service_request(payload, address, reply_queue=queue, sign_key=key)
    write_private(args.state, sent.state.encode(), "--state", "private file")
    write_binary(sent.message, args.output, as_hex=args.hex, what="message")
    if args.json:
        emit_json(
            {
                "rc_ad": sent.ad.hex(),
                "message_length": len(sent.message),
                "reply_queue": sent.state.reply_queue.uri(),
                "state_file": args.state,
            }
        )
    return EXIT_OK


def _to_open(args: argparse.Namespace, spec: str, option: str, decode: Any) -> tuple[Any, bytes]:
    """The private material ``option`` (``spec``, decoded) and the message to open with it."""
    check_one_stdin(spec, args.input)
    private = _private(spec, option, decode)
    return private, read_binary_file(args.input, as_hex=args.hex, what="message")


def _refused(args: argparse.Namespace, document: dict[str, Any], line: str) -> int:
    """A message that does not open (exit 1): ``document`` with ``--json``, else ``line``
    on stderr."""
    if args.json:
        emit_json(document)
    else:
        print(f"simplex-rpc agent {line}", file=sys.stderr)
    return EXIT_INVALID


def _cmd_open_request(args: argparse.Namespace) -> int:
    ac = _crypto()
    keys, message = _to_open(args, args.keys, "--keys", ac.AddressKeys.decode)
    try:
        got = ac.open_service_request(message, keys)
    except BadSignature as exc:
        return _refused(args, {"valid": False, "error": str(exc)}, f"open-request: invalid: {exc}")
    if args.reply is not None:
        write_private(args.reply, got.reply.encode(), "--reply", "private file")
    if args.json:
        try:
            text: str | None = got.payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        emit_json(
            {
                "valid": True,
                "payload": text,
                "payload_hex": got.payload.hex(),
                "signed": got.signer is not None,
                "signer": got.signer and got.signer.encode(),
                "rc_ad": got.ad.hex(),
                "replay_key": got.replay_key.hex(),
                "reply_queues": [q.uri() for q in got.reply_queues],
                "pq_support": got.reply.pq_support,
            }
        )
    else:
        write_payload(got.payload)
    return EXIT_OK


def _cmd_seal_response(args: argparse.Namespace) -> int:
    ac = _crypto()
    check_one_stdin(args.reply, args.payload)
    reply = _private(args.reply, "--reply", ac.ServiceReply.decode)
    payload = read_input(args.payload, what="payload")
    seal = ac.seal_service_rejection if args.reject else ac.seal_service_response
    write_binary(seal(payload, reply), args.output, as_hex=args.hex, what="message")
    return EXIT_OK


def _cmd_open_response(args: argparse.Namespace) -> int:
    ac = _crypto()
    state, message = _to_open(args, args.state, "--state", ac.RequesterState.decode)
    try:
        payload = ac.open_service_response(message, state)
    except ServiceRejected as exc:
        return _refused(
            args, {"rejected": True, "reason_hex": exc.reason.hex()}, f"open-response: {exc}"
        )
    if args.json:
        emit_json({"rejected": False, "payload_hex": payload.hex()})
    else:
        write_payload(payload)
    return EXIT_OK


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "agent",
        help="Service RPC messages as the SimpleX agent v8 encrypts them",
        description="Seal and open Service RPC messages as they cross an SMP server:"
        " X3DH (X448, sntrup761), the double ratchet's first message, crypto_box"
        " (docs/wire.md, the agent's cryptography).",
    )
    cmds = p.add_subparsers(dest="agent_command", metavar="COMMAND", required=True)

    k = cmds.add_parser(
        "keygen",
        help="make a service address's keys",
        description="Make a service address's keys: the queue's X25519 key, X448 ratchet"
        " keys, an sntrup761 key (unless --no-kem) and a ratchetKeyId. Prints the public"
        " keys (text of its link data) and the private keys, or writes the private keys"
        " to -o FILE (mode 0600; -o - prints them alone on stdout).",
    )
    k.add_argument("--no-kem", action="store_true", help="no sntrup761 key in the link")
    k.add_argument(
        "--pq-support",
        choices=("on", "off"),
        default=None,
        help="the address's PQ support (default: on with a KEM, off without)",
    )
    k.add_argument("-o", "--output", metavar="FILE", help="write the private keys to FILE")
    add_json_option(k)
    k.set_defaults(handler=_cmd_keygen)

    k = cmds.add_parser(
        "seal-request",
        help="seal a request to an address's public keys",
        description="Seal a request (signed with --key) to an address's public keys; the"
        " reply queue is an SMP queue URI whose key is replaced by a new one. The"
        " requester's state (to open the answer) goes to --state FILE (mode 0600). " + INPUTS,
    )
    k.add_argument(
        "--address", required=True, metavar="KEYS", help="the public keys text, @FILE or -"
    )
    k.add_argument("--reply-queue", required=True, metavar="URI", help="an SMP queue URI")
    k.add_argument("--payload", required=True, metavar="PAYLOAD", help="TEXT, @FILE or -")
    k.add_argument("--key", metavar="KEY", help="private signing key text, @FILE or -")
    k.add_argument(
        "--state",
        required=True,
        metavar="FILE",
        help="write the requester's state to FILE (new, mode 0600)",
    )
    add_binary_output(k, "message")
    add_json_option(k, "print rcAD and the reply queue as JSON (with -o FILE)")
    k.set_defaults(handler=_cmd_seal_request)

    k = cmds.add_parser(
        "open-request",
        help="open a request with the address's private keys",
        description="Open a request and print its payload; a signature that does not"
        " verify exits 1. --reply FILE keeps what answering needs (mode 0600).",
    )
    add_binary_input(k, "message")
    k.add_argument(
        "--keys", required=True, metavar="KEYS", help="the private keys text, @FILE or -"
    )
    k.add_argument("--reply", metavar="FILE", help="write the reply context to FILE")
    add_json_option(k, "print the payload, signer, rcAD and reply queues as JSON")
    k.set_defaults(handler=_cmd_open_request)

    k = cmds.add_parser(
        "seal-response",
        help="answer an opened request",
        description="Seal the answer ('P', or 'J' with --reject: the payload is the"
        " reason) with the reply context of open-request. " + INPUTS,
    )
    k.add_argument("--reply", required=True, metavar="REPLY", help="@FILE or -")
    k.add_argument("--payload", required=True, metavar="PAYLOAD", help="TEXT, @FILE or -")
    k.add_argument("--reject", action="store_true", help="a rejection ('J')")
    add_binary_output(k, "message")
    k.set_defaults(handler=_cmd_seal_response)

    k = cmds.add_parser(
        "open-response",
        help="read the answer with the requester's state",
        description="Open the answer and print its payload; a rejection exits 1.",
    )
    add_binary_input(k, "message")
    k.add_argument("--state", required=True, metavar="STATE", help="@FILE or -")
    add_json_option(k)
    k.set_defaults(handler=_cmd_open_response)

"""The core subcommands of ``simplex-rpc``: keys, signatures, blocks, vectors, demo.

Inputs: a literal argument, ``@PATH`` (a file) or ``-`` (stdin, for one
input at most). A key's text is read as text (surrounding whitespace
removed); an AD given literally is hex, from a file or stdin it is the raw
bytes; a payload is always the exact bytes given. Outputs are for people,
or with ``--json`` for programs. Private key material is printed only by
``keygen``, the one command whose job it is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from .._wire import backend as _backend
from ..errors import BadSignature
from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    decode_public_key,
    emit_json,
    fail,
    read_input,
    read_signing_key,
)
from ._options import add_json_option

_HEX = re.compile(r"[0-9a-fA-F]*")
_SIGNATURE_LENGTH = 64


# -- input helpers -------------------------------------------------------------------


def _check_one_stdin(*specs: str | None) -> None:
    if sum(1 for s in specs if s == "-") > 1:
        fail("only one input can come from stdin ('-')")


def _parse_hex(text: str, what: str) -> bytes:
    """Strict hex: digits only (either case), an even count; whitespace around is ignored."""
    text = text.strip()
    if not _HEX.fullmatch(text):
        bad = next(i for i, ch in enumerate(text) if ch not in "0123456789abcdefABCDEF")
        fail(f"{what}: character at offset {bad} is not a hex digit")
    if len(text) % 2:
        fail(f"{what}: {len(text)} hex digits is an odd count")
    return bytes.fromhex(text)


def _read_binary(spec: str, what: str) -> bytes:
    """A literal argument is hex; ``@PATH`` and ``-`` give raw bytes."""
    if spec == "-" or spec.startswith("@"):
        return read_input(spec, what=what)
    return _parse_hex(spec, what)


def _read_signature(spec: str) -> bytes:
    """Hex, or a file/stdin holding 64 raw bytes or 128 hex digits (as ``sign`` prints)."""
    if spec == "-" or spec.startswith("@"):
        data = read_input(spec, what="signature")
        if len(data) == _SIGNATURE_LENGTH:
            return data
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            fail(f"signature: {len(data)} bytes is neither 64 raw bytes nor hex text")
        sig = _parse_hex(text, "signature")
    else:
        sig = _parse_hex(spec, "signature")
    if len(sig) != _SIGNATURE_LENGTH:
        fail(f"signature: {len(sig)} bytes where {_SIGNATURE_LENGTH} are required")
    return sig


def _signing_key(spec: str) -> Any:
    return read_signing_key(spec, what="key")


def _public_key(spec: str) -> Any:
    return decode_public_key(read_input(spec, what="key"), what="key")


# -- output helpers ------------------------------------------------------------------


def _write_binary(data: bytes, args: argparse.Namespace) -> None:
    """Write ``data`` to ``-o FILE``, as hex with ``--hex``, or raw to a non-terminal stdout."""
    if args.output is not None:
        try:
            Path(args.output).write_bytes(data.hex().encode() + b"\n" if args.hex else data)
        except OSError as exc:
            fail(f"cannot write {args.output!r}: {exc.strerror}")
        return
    if args.hex:
        sys.stdout.write(data.hex() + "\n")
        return
    if sys.stdout.isatty():
        fail("refusing to write a binary block to a terminal: use -o FILE, --hex, or a pipe")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _write_payload(data: bytes) -> None:
    """Write a payload's exact bytes; a newline is added only for a terminal."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    if sys.stdout.isatty() and not data.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()


def _text_or_none(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# -- keygen --------------------------------------------------------------------------


def _write_key_file(path: str, text: str) -> None:
    """Write the private key ``text`` to a new 0600 file (never overwriting one)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fail(f"--output: {path!r} exists; not overwriting a key file")
    except OSError as exc:
        fail(f"--output: cannot create {path!r}: {exc.strerror}")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text + "\n")


def _cmd_keygen(args: argparse.Namespace) -> int:
    from .._wire.keys import SigningKey

    to_stdout = args.output == "-"  # -o - is stdout: the private key alone there
    if args.private and args.output is not None:
        fail("--private prints the private key on stdout; -o FILE writes it: give one")
    if args.json and (args.private or args.public or to_stdout):
        fail("--json prints both keys as one object; --private, --public and -o - print one")
    if to_stdout and args.public:
        fail("-o - puts the private key on stdout; --public too: give one")
    if args.public and args.output is None and args.seed is None:
        fail("--public alone loses the private key: add -o FILE (or --seed HEX)")
    if args.seed is None:
        key = SigningKey.generate()
    else:
        seed = _parse_hex(args.seed, "--seed")
        if len(seed) != 32:
            fail(f"--seed: {len(seed)} bytes where 32 are required (64 hex digits)")
        key = SigningKey.from_seed(seed)
    public = key.public_key
    if args.private or to_stdout:
        if to_stdout:
            # The public key is for the person at the terminal; stdout is the pipe.
            print(f"public key:  {public.encode()}", file=sys.stderr)
        print(key.encode(), flush=True)
        return EXIT_OK
    if args.output is not None:
        _write_key_file(args.output, key.encode())
    if args.public:
        print(public.encode())
    elif args.json:
        out: dict[str, Any] = {
            "public_key": public.encode(),
            "public_key_raw": public.raw.hex(),
        }
        if args.output is None:
            out["private_key"] = key.encode()
        else:
            out["private_key_file"] = args.output
        emit_json(out)
    else:
        print(f"public key:  {public.encode()}")
        if args.output is None:
            print(f"private key: {key.encode()}")
        else:
            print(f"private key: written to {args.output} (mode 0600)")
    return EXIT_OK


# -- sign and verify -----------------------------------------------------------------


def _check_raw_or_ad(args: argparse.Namespace, raw_does: str) -> None:
    """Fail unless exactly one of ``--raw`` (which ``raw_does``) and ``--ad`` is given."""
    if args.raw and args.ad is not None:
        fail(f"--raw {raw_does}: --ad does not apply")
    if not args.raw and args.ad is None:
        fail("--ad is required for a session-bound signature (or use --raw)")


def _cmd_sign(args: argparse.Namespace) -> int:
    from .._wire.keys import session_tag

    _check_one_stdin(args.key, args.ad, args.payload)
    _check_raw_or_ad(args, "signs the message alone")
    key = _signing_key(args.key)
    payload = read_input(args.payload, what="payload")
    if args.raw:
        signature = key.sign(payload)
        tag = None
    else:
        ad = _read_binary(args.ad, "ad")
        tag = session_tag(ad)
        signature = key.sign_request(ad, payload)
    if args.json:
        out: dict[str, Any] = {
            "signature": signature.hex(),
            "public_key": key.public_key.encode(),
            "payload_length": len(payload),
        }
        if tag is not None:
            out["session_tag"] = tag.hex()
        emit_json(out)
    else:
        print(signature.hex())
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from .._wire.keys import session_tag

    _check_one_stdin(args.key, args.ad, args.payload, args.signature)
    _check_raw_or_ad(args, "verifies over the message alone")
    key = _public_key(args.key)
    payload = read_input(args.payload, what="payload")
    signature = _read_signature(args.signature)
    ad = None if args.raw else _read_binary(args.ad, "ad")
    if ad is not None:
        session_tag(ad)  # an empty AD is bad input (exit 2), not an invalid signature
    error: str | None = None
    try:
        if ad is None:
            key.verify(payload, signature)
        else:
            key.verify_request(ad, payload, signature)
    except BadSignature as exc:
        error = str(exc)
    if args.json:
        emit_json({"valid": error is None, "error": error, "public_key": key.encode()})
    else:
        print("valid" if error is None else f"invalid: {error}")
    return EXIT_OK if error is None else EXIT_INVALID


# -- seal and open -------------------------------------------------------------------


def _reply_queue(text: str) -> Any:
    """The ``--reply-queue`` option: an SMP queue URI (``smp://...``)."""
    from .._wire.agent_block import SMPQueueInfo

    return SMPQueueInfo.from_uri(text)


def _cmd_seal(args: argparse.Namespace) -> int:
    impl = _backend.active
    if args.kind == "request":
        _check_one_stdin(args.key, args.ad, args.payload)
        queue = _reply_queue(args.reply_queue)
        key = None if args.key is None else _signing_key(args.key)
        ad = _read_binary(args.ad, "ad")
        payload = read_input(args.payload, what="payload")
        block: bytes = impl.seal_request(payload, ad, key, reply_queue=queue)
    elif args.kind == "response":
        payload = read_input(args.payload, what="payload")
        block = impl.seal_response(payload, pq_support=not args.no_pq)
    else:
        reason = read_input(args.payload, what="reason")
        block = impl.seal_rejection(reason, pq_support=not args.no_pq)
    _write_binary(block, args)
    return EXIT_OK


def _read_block(args: argparse.Namespace) -> bytes:
    spec = args.input
    if spec != "-" and not spec.startswith("@"):
        spec = "@" + spec  # a plain path
    data = read_input(spec, what="block")
    if args.hex:
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            fail("block: --hex input is not ASCII text")
        return _parse_hex(text, "block")
    return data


def _cmd_open(args: argparse.Namespace) -> int:
    impl = _backend.active
    info: dict[str, Any] = {"kind": args.kind}
    if args.kind == "request":
        _check_one_stdin(args.input, args.ad)
        ad = _read_binary(args.ad, "ad")
        block = _read_block(args)
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

        block = _read_block(args)
        try:
            payload = impl.open_response(block, strict=args.strict)
        except ServiceRejected as exc:
            text = _text_or_none(exc.reason)
            if args.json:
                emit_json({"kind": "response", "rejected": True, "reason": text,
                           "reason_hex": exc.reason.hex() if text is None else None})
            else:
                print(f"simplex-rpc open: {exc}", file=sys.stderr)
            return EXIT_INVALID
        signer = None
        queues = []
    envelope = _envelope_check(args.kind, payload, signer)
    if not args.json:
        if args.kind == "request":
            who = f"signed by {signer.encode()}" if signer is not None else "unsigned"
            print(f"simplex-rpc open: request, {who}, {len(payload)} bytes, reply queue"
                  f" {queues[0]}", file=sys.stderr)
        if not envelope["valid"]:
            print(f"simplex-rpc open: note: {envelope['error']}", file=sys.stderr)
        elif envelope.get("request_key_check"):
            check = envelope["request_key_check"]
            print(
                f"simplex-rpc open: note: a responder answers {check['code']}: {check['message']}",
                file=sys.stderr,
            )
        _write_payload(payload)
        return EXIT_OK
    text = _text_or_none(payload)
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


def _cmd_vectors(args: argparse.Namespace) -> int:
    from .. import vectors as _vectors

    if args.action == "generate":
        directory = Path(args.directory if args.directory is not None else "vectors")
        try:
            written = _vectors.generate(directory)
        except OSError as exc:
            fail(f"cannot write into {str(directory)!r}: {exc.strerror}")
        if args.json:
            emit_json({"directory": str(directory), "files": dict(written)})
        else:
            for name, changed in written:
                print(f"{directory / name}: {'written' if changed else 'unchanged'}")
        return EXIT_OK
    if args.directory is None:
        # No directory: the copy the package ships (package data), as after `pip install`.
        with resources.as_file(resources.files(_vectors).joinpath("data")) as shipped:
            return _check_vectors(args, Path(shipped))
    directory = Path(args.directory)
    if not directory.is_dir():
        fail(f"{str(directory)!r} is not a directory")
    return _check_vectors(args, directory)


def _check_vectors(args: argparse.Namespace, directory: Path) -> int:
    from .. import vectors as _vectors

    not_checked: list[str] = []  # kinds whose optional extra is missing, named
    problems = _vectors.check_vectors(directory, not_checked=not_checked)
    if args.json:
        out: dict[str, Any] = {"directory": str(directory), "ok": not problems,
                               "problems": problems}
        if not_checked:  # only when an extra is missing: the usual object is unchanged
            out["not_checked"] = not_checked
        emit_json(out)
        return EXIT_INVALID if problems else EXIT_OK
    for line in not_checked:
        print(f"{directory}/{line}", file=sys.stderr)
    if problems:
        for problem in problems:
            print(f"{directory}/{problem}", file=sys.stderr)
        print(f"simplex-rpc vectors check: {len(problems)} problems", file=sys.stderr)
    else:
        names = ", ".join(sorted(_backend.backends))
        skipped = [line.split(":", 1)[0] for line in not_checked]
        every = "every checked file" if skipped else "every file"
        but = f"; not checked: {', '.join(skipped)} (see stderr)" if skipped else ""
        print(f"{directory}: {every} is as generated and every case holds"
              f" (backends: {names}){but}")
    return EXIT_INVALID if problems else EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(json_output=args.json)


# -- the parser ----------------------------------------------------------------------

_INPUTS = "Inputs: a literal argument, @PATH for a file, or - for stdin (one input at most)."
_AD = "HEX, @FILE (raw bytes) or -"


def _add_payload(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--payload", required=True, metavar="PAYLOAD", help="TEXT, @FILE or - (exact bytes)"
    )


def _add_signature_inputs(p: argparse.ArgumentParser, key: str) -> None:
    """The inputs of sign and verify: ``--key`` (a ``key`` key), ``--ad``, ``--payload``."""
    p.add_argument("--key", required=True, metavar="KEY", help=f"{key} key text, @FILE or -")
    p.add_argument("--ad", metavar="AD", help="associated data: " + _AD)
    _add_payload(p)


def _add_raw(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", action="store_true", help="plain Ed25519 over the payload, no AD")


def register(subparsers: Any) -> None:
    """Add the core subcommands to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "keygen",
        help="make an Ed25519 key (prints the private key too)",
        description="Make an Ed25519 key and print its public text (requestKey, signerKey)"
        " and its private text (sign_key=, --key). The private key IS printed, since that"
        " is what you asked for; use -o FILE to write it to a new 0600 file instead."
        " For pipes: --private or -o - prints the private key alone, --public the public"
        " key alone (`simplex-rpc keygen --private | simplex-rpc sign --key - ...`).",
    )
    p.add_argument(
        "--seed", metavar="HEX", help="the 32-byte seed as 64 hex digits (default: random)"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the private key text to FILE, a new 0600 file (never overwrites);"
        " - is stdout: the private key alone there, for a pipe",
    )
    one = p.add_mutually_exclusive_group()
    one.add_argument(
        "--private",
        action="store_true",
        help="print the private key text alone (for `| simplex-rpc sign --key -`)",
    )
    one.add_argument(
        "--public",
        action="store_true",
        help="print the public key text alone (with -o FILE: the private key goes there)",
    )
    add_json_option(p)
    p.set_defaults(handler=_cmd_keygen)

    p = subparsers.add_parser(
        "sign",
        help="sign a payload for a session (or plain Ed25519 with --raw)",
        description="Print the session-bound signature of a payload: Ed25519 over"
        ' SHA3-256("SimpleXService" || AD) || payload, as hex. ' + _INPUTS,
    )
    _add_signature_inputs(p, "private")
    _add_raw(p)
    add_json_option(p)
    p.set_defaults(handler=_cmd_sign)

    p = subparsers.add_parser(
        "verify",
        help="verify a signature (exit 0 valid, 1 invalid, 2 bad input)",
        description="Verify a session-bound signature (or a plain one with --raw)."
        " Exit status 0 valid, 1 invalid, 2 bad input. " + _INPUTS,
    )
    _add_signature_inputs(p, "public")
    p.add_argument(
        "--signature",
        required=True,
        metavar="SIG",
        help="HEX, or @FILE / - holding 64 raw bytes or 128 hex digits",
    )
    _add_raw(p)
    add_json_option(p)
    p.set_defaults(handler=_cmd_verify)

    # "seal request", "open response", "vectors check": nested subcommands, so that
    # options and the optional positional can come in any order.
    p = subparsers.add_parser(
        "seal",
        help="encode, sign and pad a payload into the agent's padded block",
        description="Seal a request ('A' with --reply-queue, signed with --key, bound to"
        " --ad; 11,106 bytes), a response ('P') or a rejection ('J', the payload is the"
        " reason; 11,106 bytes, 14,832 with --no-pq) into the agent's padded block. The"
        " block is binary: it goes to -o FILE, to a pipe, or as hex with --hex; never raw"
        " to a terminal. " + _INPUTS,
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in ("request", "response", "rejection"):
        k = kinds.add_parser(
            kind,
            help=f"seal a {kind}",
            description=f"Seal a {kind} payload into the padded block. " + _INPUTS,
        )
        _add_payload(k)
        if kind == "request":
            k.add_argument("--ad", required=True, metavar="AD", help=_AD)
            k.add_argument(
                "--key", metavar="KEY", help="private key text, @FILE or - (signs the request)"
            )
            k.add_argument(
                "--reply-queue", required=True, metavar="URI",
                help="the reply queue as an SMP queue URI (smp://keyHash@host/senderId#/?v=..)",
            )
        else:
            k.set_defaults(ad=None, key=None)
            k.add_argument(
                "--no-pq", action="store_true",
                help="the service address has PQ support off: pad to 14,832 bytes",
            )
        k.add_argument("-o", "--output", metavar="FILE", help="write the block to FILE")
        k.add_argument("--hex", action="store_true", help="write the block as hex text")
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
        k.add_argument(
            "input", nargs="?", default="-", metavar="BLOCK", help="a file, or - (default)"
        )
        if kind == "request":
            k.add_argument("--ad", required=True, metavar="AD", help=_AD)
        else:
            k.set_defaults(ad=None)
        k.add_argument("--hex", action="store_true", help="the block is hex text")
        k.add_argument("--strict", action="store_true", help="require every fill byte to be '#'")
        add_json_option(k, "print the payload, signer and envelope check as JSON")
        k.set_defaults(handler=_cmd_open)

    p = subparsers.add_parser(
        "vectors",
        help="generate or check the test vectors",
        description="Write or check the vector files of wire.md section 7.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (
        ("generate", "write the vector files deterministically (a second run changes nothing)"),
        (
            "check",
            "regenerate in memory, compare byte for byte, and re-verify every case against"
            " the library; exit status 1 on any difference",
        ),
    ):
        a = actions.add_parser(
            action, help=text.split(";")[0], description=text[0].upper() + text[1:] + "."
        )
        a.add_argument(
            "directory",
            nargs="?",
            default=None,
            metavar="DIR",
            help="default: vectors"
            if action == "generate"
            else "default: the vectors the package ships (a copy of the repository's vectors/)",
        )
        add_json_option(a)
        a.set_defaults(handler=_cmd_vectors)

    p = subparsers.add_parser(
        "demo",
        help="show one Service RPC round trip, step by step",
        description="One signed, padded Service RPC round trip with fixed demo keys:"
        " every step shown, and a tampered block and a copied signature refused.",
    )
    add_json_option(p, "print a machine-readable summary")
    p.set_defaults(handler=_cmd_demo)


__all__ = ["register"]

"""``keygen``, ``sign`` and ``verify``: Ed25519 keys and session-bound signatures.

Inputs as ``_io`` reads them (a literal argument, ``@PATH`` or ``-``); outputs are
for people, or with ``--json`` for programs. Private key material is printed only
by ``keygen``, the one command whose job it is.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import BadSignature
from ._common import EXIT_INVALID, EXIT_OK, decode_public_key, emit_json, fail, read_input
from ._io import (
    AD_HELP,
    INPUTS,
    add_payload,
    check_one_stdin,
    emit_keys,
    parse_hex,
    read_binary,
    signing_key,
    write_private,
)
from ._options import add_json_option

_SIGNATURE_LENGTH = 64


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
        sig = parse_hex(text, "signature")
    else:
        sig = parse_hex(spec, "signature")
    if len(sig) != _SIGNATURE_LENGTH:
        fail(f"signature: {len(sig)} bytes where {_SIGNATURE_LENGTH} are required")
    return sig


def _public_key(spec: str) -> Any:
    return decode_public_key(read_input(spec, what="key"), what="key")


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
        seed = parse_hex(args.seed, "--seed")
        if len(seed) != 32:
            fail(f"--seed: {len(seed)} bytes where 32 are required (64 hex digits)")
        key = SigningKey.from_seed(seed)
    public = key.public_key
    if args.private:
        print(key.encode(), flush=True)
    elif args.public:
        if args.output is not None:
            write_private(args.output, key.encode(), "--output", "key file")
        print(public.encode())
    else:
        fields = {"public_key": public.encode(), "public_key_raw": public.raw.hex()}
        emit_keys(
            public.encode(),
            key.encode(),
            args.output,
            noun="key",
            option="--output",
            fields=fields if args.json else None,
        )
    return EXIT_OK


def _check_raw_or_ad(args: argparse.Namespace, raw_does: str) -> None:
    """Fail unless exactly one of ``--raw`` (which ``raw_does``) and ``--ad`` is given."""
    if args.raw and args.ad is not None:
        fail(f"--raw {raw_does}: --ad does not apply")
    if not args.raw and args.ad is None:
        fail("--ad is required for a session-bound signature (or use --raw)")


def _cmd_sign(args: argparse.Namespace) -> int:
    from .._wire.keys import session_tag

    check_one_stdin(args.key, args.ad, args.payload)
    _check_raw_or_ad(args, "signs the message alone")
    key = signing_key(args.key)
    payload = read_input(args.payload, what="payload")
    if args.raw:
        signature = key.sign(payload)
        tag = None
    else:
        ad = read_binary(args.ad, "ad")
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

    check_one_stdin(args.key, args.ad, args.payload, args.signature)
    _check_raw_or_ad(args, "verifies over the message alone")
    key = _public_key(args.key)
    payload = read_input(args.payload, what="payload")
    signature = _read_signature(args.signature)
    ad = None if args.raw else read_binary(args.ad, "ad")
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


def _add_signature_inputs(p: argparse.ArgumentParser, key: str) -> None:
    """The inputs of sign and verify: ``--key`` (a ``key`` key), ``--ad``, ``--payload``."""
    p.add_argument("--key", required=True, metavar="KEY", help=f"{key} key text, @FILE or -")
    p.add_argument("--ad", metavar="AD", help="associated data: " + AD_HELP)
    add_payload(p)


def _add_raw(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", action="store_true", help="plain Ed25519 over the payload, no AD")


def register(subparsers: Any) -> None:
    """Add ``keygen``, ``sign`` and ``verify`` to the ``simplex-rpc`` parser."""
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
        ' SHA3-256("SimpleXService" || AD) || payload, as hex. ' + INPUTS,
    )
    _add_signature_inputs(p, "private")
    _add_raw(p)
    add_json_option(p)
    p.set_defaults(handler=_cmd_sign)

    p = subparsers.add_parser(
        "verify",
        help="verify a signature (exit 0 valid, 1 invalid, 2 bad input)",
        description="Verify a session-bound signature (or a plain one with --raw)."
        " Exit status 0 valid, 1 invalid, 2 bad input. " + INPUTS,
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


__all__ = ["register"]

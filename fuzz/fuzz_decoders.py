"""Coverage-guided fuzzing of the Python decoders with atheris (``make fuzz``).

Usage: ``python fuzz/fuzz_decoders.py TARGET [libFuzzer options] [CORPUS ...]``,
TARGET one of :data:`TARGETS`. Each target feeds the input to a family of
decoders and checks the library's guarantees (issue 7, docs/security.md):

* a decoder returns a value or raises its own error class, nothing else;
* what decodes re-encodes to the same value (and, for the agent's messages
  and strict padding, to the same bytes);
* both backends give the same result or the same error and message.

A failed check raises, and atheris reports the input as a crash. The target
functions need no atheris: ``tests/wire/test_fuzz_corpus.py`` replays the
seed corpus and every regression input through them in ``make test``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any

AD = bytes(range(56)) + bytes(range(100, 156))
PROTOCOLS = ("mcp", "a2a", "x")


def _load() -> None:
    """Import the library (instrumented when atheris is running)."""
    global sx, agent, chat, declarations, llms_txt, errors, core_frames, strict_json
    import simplex_rpc as sx
    from simplex_rpc import agent, chat, declarations, errors, llms_txt
    from simplex_rpc._wire import strict_json
    from simplex_rpc.adapter import _frames as core_frames


sx: Any
agent: Any
chat: Any
declarations: Any
llms_txt: Any
errors: Any
core_frames: Any
strict_json: Any


# Core decoders quote at most a short excerpt of their input in a message.
MAX_MESSAGE = 500


def _outcome(
    call: Callable[[], Any],
    allowed: tuple[type[BaseException], ...],
    max_message: int | None = MAX_MESSAGE,
) -> Any:
    """("ok", value) or ("error", class name, message); any other exception propagates."""
    try:
        return ("ok", call())
    except allowed as exc:
        message = str(exc)
        if not message or "\n" in message:
            raise AssertionError(f"bad error message {message!r:.300}") from exc
        if max_message is not None and len(message) > max_message:
            raise AssertionError(f"error message of {len(message)} characters") from exc
        return ("error", type(exc).__name__, message)


def _on_backends(
    allowed: tuple[type[BaseException], ...], what: str, *args: Any, **kwargs: Any
) -> Any:
    """Call backend function ``what`` on every backend; all must agree; return the outcome."""
    results = {
        name: _outcome(partial(getattr(impl, what), *args, **kwargs), allowed)
        for name, impl in sx.backends.items()
    }
    first_name, first = next(iter(results.items()))
    for name, value in results.items():
        if value != first:
            raise AssertionError(
                f"{what}: backends differ: {name} gave {value!r:.300}, {first_name} gave"
                f" {first!r:.300}"
            )
    return first


# --------------------------------------------------------------------------
# Targets


def target_keys(data: bytes) -> None:
    """Key text, DER and PEM decoders; a decoded key re-encodes to an equal key."""
    key_error = (errors.KeyFormatError,)
    text = data.decode("latin-1")
    for source in (data, text):
        for decode in (sx.PublicKey.decode, sx.SigningKey.decode):
            result = _outcome(partial(decode, source), key_error)
            if result[0] == "ok":
                key = result[1]
                if type(key).decode(key.encode()) != key:
                    raise AssertionError("key does not survive encode/decode")
                if key.encode().rstrip("=") != text.rstrip("="):
                    raise AssertionError("two texts decode to one key")
    for from_der in (sx.PublicKey.from_der, sx.SigningKey.from_der):
        result = _outcome(partial(from_der, data), key_error)
        if result[0] == "ok" and result[1].der != data:
            raise AssertionError("DER does not re-encode to the same bytes")
    _outcome(lambda: sx.PublicKey.from_pem(data), key_error)
    _outcome(lambda: sx.PublicKey.from_pem(text), key_error)


def target_messages(data: bytes) -> None:
    """decode_message and SMPQueueInfo.decode (one codec), then unpad and unpad_many on every
    backend: equal results, exact round trips."""
    message = _outcome(partial(agent.decode_message, data), (errors.FrameError,))
    if message[0] == "ok" and message[1].encode() != data:
        raise AssertionError("message does not re-encode to the same bytes")
    queue = _outcome(partial(agent.SMPQueueInfo.decode, data), (errors.FrameError,))
    if queue[0] == "ok":
        if queue[1].encode() != data:
            raise AssertionError("queue does not re-encode to the same bytes")
        _outcome(partial(agent.SMPQueueInfo.from_uri, queue[1].uri()), (errors.FrameError,))
    unpadded = _on_backends((errors.PaddingError,), "unpad", data)
    strict = _on_backends((errors.PaddingError,), "unpad", data, strict=True)
    if strict[0] == "ok":
        if unpadded != strict:
            raise AssertionError("strict unpad gives another message than unpad")
        if sx.pad(strict[1], len(data)) != data:
            raise AssertionError("strict unpad then pad does not give the block back")
    for length in (2, 3, 16):
        _on_backends((errors.PaddingError,), "unpad_many", data, length)


def target_open(data: bytes) -> None:
    """open_request and open_response of the input padded as a message, on every backend."""
    opened_errors = (
        errors.PaddingError, errors.FrameError, errors.BadSignature, errors.ServiceRejected
    )
    blocks = [data]
    if len(data) <= sx.PADDED_LENGTH - 2:
        blocks.append(sx.pad(data))
    for block in blocks:
        for strict in (False, True):
            request = _on_backends(opened_errors, "open_request", block, AD, strict=strict)
            if request[0] == "ok" and request[1].signer is not None:
                # A signer is reported only after its signature verified.
                message = agent.decode_message(sx.unpad(block))
                signature = message.signature.signature
                request[1].signer.verify_request(AD, request[1].payload, signature)
            _on_backends(opened_errors, "open_response", block, strict=strict)


def target_envelopes(data: bytes) -> None:
    """Request.parse and Response.parse, bytes and text; a parsed envelope round-trips."""
    envelope_error = (errors.EnvelopeError,)
    text = data.decode("utf-8", "surrogateescape")
    for source in (data, text):
        for parser in (sx.Request, sx.Response):
            result = _outcome(partial(parser.parse, source), envelope_error)
            if result[0] == "ok":
                value = result[1]
                if parser.parse(value.to_json()) != value:
                    raise AssertionError("envelope does not survive to_json/parse")
                if result[1].to_json() != parser.parse(value.to_json()).to_json():
                    raise AssertionError("envelope serialization is not stable")


def target_text(data: bytes) -> None:
    """/_call text, replies, llms.txt sections, links and declarations."""
    text = data.decode("utf-8", "surrogateescape")
    call = _outcome(lambda: chat.parse_call(text), (errors.CallSyntaxError,), None)
    if call[0] == "ok" and chat.parse_call(call[1].text()) != call[1]:
        raise AssertionError("call does not survive text/parse_call")
    for protocol in PROTOCOLS:
        reply = chat.parse_reply(protocol, text)
        if reply is not None and not isinstance(reply, dict):
            raise AssertionError("parse_reply returned a non-object")
    section = llms_txt.parse_communications(text)
    for address in section:
        llms_txt.check_address(address)
    _outcome(
        lambda: llms_txt.parse_communications(text, strict=True), (errors.LlmsTxtError,), None
    )
    kind = llms_txt.link_kind(text)
    if kind is not None and kind not in llms_txt.LINK_KINDS:
        raise AssertionError(f"unknown link kind {kind!r}")
    declaration_error = (errors.DeclarationError,)
    for source in (text, data):
        for group in (False, True):
            _outcome(partial(declarations.parse_protocols, source, group=group),
                     declaration_error, None)
        for parse in (declarations.parse_audience, declarations.parse_serves,
                      declarations.parse_change_frequency):
            _outcome(partial(parse, source), declaration_error, None)
    # A chat core frame (the adapter's reader): never raises; without an envelope
    # member it reads exactly as the strict reader does.
    frame = core_frames.read_frame(text)
    if not frame.envelopes:
        strict = _outcome(lambda: strict_json.loads(text), (strict_json.JsonError,), None)
        if (frame.error is None) != (strict[0] == "ok"):
            raise AssertionError("the core frame reader and the strict reader disagree")
        if frame.error is None and frame.value != strict[1]:
            raise AssertionError("the core frame reader changed the value")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "keys": target_keys,
    "messages": target_messages,
    "open": target_open,
    "envelopes": target_envelopes,
    "text": target_text,
}


def main() -> None:
    import atheris  # type: ignore[import-untyped]

    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer options] [CORPUS...]")
    target = TARGETS[sys.argv.pop(1)]
    with atheris.instrument_imports(include=["simplex_rpc"]):
        _load()
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
else:
    _load()

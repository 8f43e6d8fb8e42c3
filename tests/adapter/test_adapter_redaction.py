"""No secret leaks: the private key given as ``sign_key`` never appears in a log line,
an exception message or a repr (issue 7, "No secret leaks"). Logs of a full run are
captured at DEBUG, the ``websockets`` frame logs included, and scanned for the key.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

import simplex_rpc as sx
from _support import pair
from simplex_rpc import Request
from simplex_rpc._wire.redact import REDACTED, RedactingLogger, redact, redact_tree, show
from simplex_rpc.adapter import ChatCore, ChatCoreTimeout, ServiceRequest
from simplex_rpc.errors import ChatCoreError
from simplex_rpc.testing import CoreSimulator


def secret_forms(key: sx.SigningKey) -> list[str]:
    """Every text form of the private key, and fragments of its variable part."""
    text = key.encode()
    forms = [
        text,
        text.rstrip("="),
        base64.b64encode(key.der).decode(),
        key.seed().hex(),
        key.seed().hex().upper(),
        key.der.hex(),
        base64.urlsafe_b64encode(key.seed()).decode().rstrip("="),
    ]
    variable = text[21:]  # the first 21 characters are the same for every key
    forms += [variable[i : i + 12] for i in range(0, len(variable) - 12)]
    return forms


def assert_clean(texts: list[str], key: sx.SigningKey) -> None:
    for text in texts:
        for form in secret_forms(key):
            assert form not in text, f"key material {form[:6]}... leaked in {text[:80]!r}"


@pytest.mark.anyio
async def test_a_full_run_logs_no_key_material(caplog: pytest.LogCaptureFixture) -> None:
    key = sx.SigningKey.generate()
    errors: list[str] = []

    def handler(request: ServiceRequest) -> Any:
        return {"ok": True}

    with caplog.at_level(logging.DEBUG):
        async with pair(handler) as p:
            request = Request(protocol="mcp", request={"q": 1}, request_key=key.public_key)
            assert (await p.alice.service_request(1, p.link, request, sign_key=key)).ok
            # A short target puts the key near the start of the frame the library logs.
            for target in ("s:x", "s:" + "y" * 40, p.link + "-gone"):
                with pytest.raises(ChatCoreError) as info:
                    await p.alice.service_request(1, target, request, sign_key=key, timeout=2)
                errors.extend([str(info.value), repr(info.value), str(info.value.chat_error)])
            # A command the core refuses, with the key in its text.
            cmd = f"/_service_request 1 {p.link} timeout=x sign_key={key.encode()} {{}}"
            with pytest.raises(ChatCoreError) as info:
                await p.alice.command(cmd)
            errors.extend([str(info.value), str(info.value.chat_error)])
            errors.append(repr(p.alice))
    texts = [caplog.text, *(r.getMessage() for r in caplog.records), *errors]
    assert_clean(texts, key)
    # Not vacuous: the commands and the library's frames were logged, redacted.
    assert f"sign_key={REDACTED}" in caplog.text
    assert any(r.name == "websockets.client" and "TEXT" in r.getMessage() for r in caplog.records)
    assert any(r.name == "websockets.server" and "TEXT" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_timeouts_and_reprs_carry_no_key(simulator: CoreSimulator) -> None:
    key = sx.SigningKey.generate()

    url = f"ws://user:hunter2@127.0.0.1:{simulator.port}/alice"
    async with ChatCore.connect(url) as core:
        assert "hunter2" not in repr(core)
        # A microsecond: the simulator answers after a round trip, always later
        # (0 is not a timeout but a wrong argument).
        with pytest.raises(ChatCoreTimeout) as info:
            await core.command(
                f"/_service_request 1 {simulator.url} sign_key={key.encode()} {{}}",
                timeout=1e-6,
            )
        assert_clean([str(info.value), repr(info.value)], key)
        assert "hunter2" not in str(info.value)


def test_redact_removes_every_form() -> None:
    key = sx.SigningKey.generate()
    text = key.encode()
    cases = [
        f"/_service_request 1 x sign_key={text} {{}}",
        f"sign_key={text[:30]}",
        f'{{"cmd":"... sign_key={text}"}}',
        f"bare {text} and {base64.b64encode(key.der).decode()} and {key.der.hex()}",
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAw\n-----END PRIVATE KEY-----",
    ]
    for case in cases:
        out = redact(case)
        assert REDACTED in out
        assert_clean([out], key)
        assert "BEGIN PRIVATE" not in out
    assert redact("wss://me:pw@host/x") == f"wss://{REDACTED}@host/x"
    assert redact("plain text, a public key MCowBQYDK2VwAyEA") == (
        "plain text, a public key MCowBQYDK2VwAyEA"
    )
    assert redact_tree({"message": f"sign_key={text}", "n": [1, text]}) == {
        "message": f"sign_key={REDACTED}",
        "n": [1, REDACTED],
    }


def test_show_renders_peer_data_escaped_and_truncated() -> None:
    assert show("line\nFORGED") == repr("line\nFORGED")
    long = show("x" * 500, limit=10)
    assert long.startswith(repr("x" * 10)) and "(500 chars)" in long
    assert show(b"\x00\xff", limit=10) == repr("\x00\\xff")
    assert show(b"abc" * 100, limit=3).endswith("(300 bytes)")
    assert show({"a": 1}) == repr("{'a': 1}")


def test_redacting_logger_formats_and_redacts(caplog: pytest.LogCaptureFixture) -> None:
    key = sx.SigningKey.generate()
    log = RedactingLogger(logging.getLogger("simplex_rpc.test_redaction"))
    with caplog.at_level(logging.DEBUG, logger="simplex_rpc.test_redaction"):
        log.debug("frame %s", f"sign_key={key.encode()}")
        log.info("odd %d", "not a number")  # a bad format still logs, redacted
        try:
            raise ValueError(f"boom {key.encode()}")
        except ValueError:
            log.error("failed", exc_info=True)
        log.warning("with exception", exc_info=ValueError(key.encode()))
    assert_clean([caplog.text], key)
    assert "ValueError" in caplog.text and "Traceback" in caplog.text
    assert len(caplog.records) == 4

"""The ``simplex-rpc`` command line, run in this process (``_cli.run_cli``; a subprocess
where a terminal is the point) (issue 2, "CLI").

Exit status 0 for success and a valid signature, 1 for an invalid one (or a
vectors check that finds a difference), 2 for bad input: one line on stderr,
never a traceback. ``--json`` output parses. Private key material appears
only where it is asked for (``keygen``).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import simplex_rpc as sx
from _cli import CliResult, run_cli
from _queues import QUEUE

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

URI = QUEUE.uri()
ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "vectors"

# RFC 8032 section 7.1 TEST 1: a published key, so its text can be pinned here.
SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
KEY = sx.SigningKey.from_seed(bytes.fromhex(SEED))
PUBLIC = KEY.public_key.encode()
PRIVATE = KEY.encode()
AD = bytes(range(56)) + bytes(range(100, 156))
PAYLOAD = b'{"protocol":"mcp","request":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'


def run(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> CliResult:
    return run_cli(args, stdin=stdin, cwd=cwd)


def ok(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> bytes:
    result = run(*args, stdin=stdin, cwd=cwd)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def as_json(*args: str, stdin: bytes = b"") -> Any:
    return json.loads(ok(*args, "--json", stdin=stdin))


def assert_usage_error(result: CliResult, *needles: str) -> str:
    """Exit 2, exactly one line on stderr, no traceback, nothing on stdout."""
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert result.stdout == b""
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# -- keygen ----------------------------------------------------------------------------


def test_keygen_from_seed_is_the_rfc8032_key() -> None:
    out = ok("keygen", "--seed", SEED).decode()
    assert f"public key:  {PUBLIC}" in out
    assert f"private key: {PRIVATE}" in out  # asked for: keygen prints it, and says so in help
    assert "prints the private key" in ok("--help").decode()


def test_keygen_json() -> None:
    out = as_json("keygen", "--seed", SEED.upper())
    assert out == {
        "public_key": PUBLIC,
        "public_key_raw": KEY.public_key.raw.hex(),
        "private_key": PRIVATE,
    }
    assert sx.SigningKey.decode(out["private_key"]) == KEY


def test_keygen_random_keys_differ() -> None:
    a = as_json("keygen")
    b = as_json("keygen")
    assert a["public_key"] != b["public_key"]
    key = sx.SigningKey.decode(a["private_key"])
    assert key.public_key == sx.PublicKey.decode(a["public_key"])


def test_keygen_output_file_is_private_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "key.txt"
    out = ok("keygen", "--seed", SEED, "-o", str(path)).decode()
    assert PRIVATE not in out and PUBLIC in out
    assert path.read_text() == PRIVATE + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert_usage_error(run("keygen", "-o", str(path)), "not overwriting")
    assert path.read_text() == PRIVATE + "\n"


@pytest.mark.parametrize("seed", ["12", "zz" * 32, "00" * 31, "00" * 33])
def test_keygen_bad_seed(seed: str) -> None:
    assert_usage_error(run("keygen", "--seed", seed), "--seed")


# -- sign and verify ---------------------------------------------------------------------


def test_sign_is_the_session_bound_signature() -> None:
    """wire.md 2: Ed25519 over SHA3-256("SimpleXService" || AD) || payload."""
    out = ok("sign", "--key", PRIVATE, "--ad", AD.hex(), "--payload", PAYLOAD.decode())
    assert out.decode() == KEY.sign_request(AD, PAYLOAD).hex() + "\n"
    assert PRIVATE.encode() not in out


def test_sign_json_and_inputs_from_files_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(PRIVATE + "\n")
    (tmp_path / "key").chmod(0o600)  # a key file others can read is refused, as ssh does
    (tmp_path / "ad").write_bytes(AD)  # a file holds the AD's raw bytes
    out = as_json("sign", "--key", f"@{tmp_path / 'key'}", "--ad", f"@{tmp_path / 'ad'}",
                  "--payload", "-", stdin=PAYLOAD)  # fmt: skip
    assert out["signature"] == KEY.sign_request(AD, PAYLOAD).hex()
    assert out["public_key"] == PUBLIC
    assert out["session_tag"] == sx.session_tag(AD).hex()
    assert out["payload_length"] == len(PAYLOAD)
    assert PRIVATE not in json.dumps(out)
    from_stdin = ok("sign", "--key", "-", "--ad", AD.hex(), "--payload", PAYLOAD.decode(),
                    stdin=PRIVATE.encode())  # fmt: skip
    assert from_stdin.decode().strip() == out["signature"]


def test_sign_raw_is_plain_ed25519() -> None:
    out = ok("sign", "--raw", "--key", PRIVATE, "--payload", "abc")
    assert out.decode().strip() == KEY.sign(b"abc").hex()


def test_verify_exit_status(tmp_path: Path) -> None:
    signature = KEY.sign_request(AD, PAYLOAD).hex()
    base = ["verify", "--key", PUBLIC, "--payload", PAYLOAD.decode()]
    good = run(*base, "--ad", AD.hex(), "--signature", signature)
    assert (good.returncode, good.stdout) == (0, b"valid\n")
    # A signature copied into another session fails (the protocol text, "Signed requests").
    other = run(*base, "--ad", (AD + b"\x00").hex(), "--signature", signature)
    assert other.returncode == 1 and other.stdout.startswith(b"invalid: ")
    tampered = run("verify", "--key", PUBLIC, "--ad", AD.hex(), "--signature", signature,
                   "--payload", PAYLOAD.decode() + "#")  # fmt: skip
    assert tampered.returncode == 1
    assert_usage_error(run(*base, "--ad", AD.hex(), "--signature", signature[:-2]), "64")
    assert_usage_error(run(*base, "--ad", AD.hex(), "--signature", "xy" * 64), "hex")
    assert_usage_error(run(*base, "--ad", "", "--signature", signature), "empty")
    assert_usage_error(run(*base, "--signature", signature), "--ad")
    bad_key = run("verify", "--key", PUBLIC.replace("-", "+").replace("_", "/") + "x",
                  "--ad", AD.hex(), "--payload", "x", "--signature", signature)  # fmt: skip
    assert_usage_error(bad_key, "public key")


def test_verify_json_and_signature_files(tmp_path: Path) -> None:
    (tmp_path / "sig.hex").write_bytes(
        ok("sign", "--key", PRIVATE, "--ad", AD.hex(), "--payload", PAYLOAD.decode())
    )
    (tmp_path / "sig.bin").write_bytes(KEY.sign_request(AD, PAYLOAD))
    (tmp_path / "pub").write_text(PUBLIC + "\n")
    for sig in ("sig.hex", "sig.bin"):
        key, signature = f"@{tmp_path / 'pub'}", f"@{tmp_path / sig}"
        out = as_json("verify", "--key", key, "--ad", AD.hex(),
                      "--payload", PAYLOAD.decode(), "--signature", signature)  # fmt: skip
        assert out == {"valid": True, "error": None, "public_key": PUBLIC}
    invalid = run("verify", "--json", "--key", PUBLIC, "--ad", "00", "--payload", "x",
                  "--signature", "00" * 64)  # fmt: skip
    assert invalid.returncode == 1
    assert json.loads(invalid.stdout)["valid"] is False


def test_verify_raw() -> None:
    sig = KEY.sign(b"abc").hex()
    assert (
        run("verify", "--raw", "--key", PUBLIC, "--payload", "abc", "--signature", sig).returncode
        == 0
    )
    assert (
        run("verify", "--raw", "--key", PUBLIC, "--payload", "abd", "--signature", sig).returncode
        == 1
    )


def test_one_stdin_input_at_most() -> None:
    assert_usage_error(run("sign", "--key", "-", "--ad", "-", "--payload", "x"), "stdin")


def test_private_key_never_in_error_messages() -> None:
    broken = PRIVATE[:20] + "!" + PRIVATE[21:]
    err = assert_usage_error(run("sign", "--key", broken, "--ad", "00", "--payload", "x"))
    assert PRIVATE[:20] not in err and PRIVATE[21:] not in err
    wrong_kind = run("sign", "--key", PUBLIC, "--ad", "00", "--payload", "x")
    assert_usage_error(wrong_kind, "private key")


# -- seal and open -------------------------------------------------------------------------


def test_seal_and_open_a_signed_request(tmp_path: Path) -> None:
    block_path = tmp_path / "block"
    ok("seal", "request", "--key", PRIVATE, "--ad", AD.hex(), "--payload", PAYLOAD.decode(),
       "--reply-queue", QUEUE.uri(), "-o", str(block_path))  # fmt: skip
    block = block_path.read_bytes()
    assert len(block) == sx.PADDED_LENGTH
    assert block == sx.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)
    assert sx.open_request(block, AD).signer == KEY.public_key
    opened = run("open", "request", str(block_path), "--ad", AD.hex())
    assert opened.returncode == 0 and opened.stdout == PAYLOAD
    # Options and the block's path in either order.
    assert ok("open", "request", "--ad", AD.hex(), "--strict", str(block_path)) == PAYLOAD
    assert PUBLIC in opened.stderr.decode()
    out = as_json("open", "request", "--ad", AD.hex(), stdin=block)
    assert out["signed"] is True and out["signer"] == PUBLIC
    assert out["payload"] == PAYLOAD.decode() and out["payload_length"] == len(PAYLOAD)
    assert out["envelope"]["valid"] is True and out["envelope"]["protocol"] == "mcp"
    assert out["reply_queues"] == [QUEUE.uri()]
    assert QUEUE.uri() in opened.stderr.decode()


def test_seal_response_without_pq_and_a_rejection() -> None:
    """--no-pq pads a response to 14,832 bytes; a rejection opens as exit 1 with its reason."""
    off = ok("seal", "response", "--no-pq", "--payload", '{"response":1}')
    assert len(off) == 14832 and ok("open", "response", stdin=off) == b'{"response":1}'
    rejected = ok("seal", "rejection", "--payload", "busy")
    assert rejected == sx.seal_rejection(b"busy")
    human = run("open", "response", stdin=rejected)
    assert human.returncode == 1 and b"busy" in human.stderr and b"Traceback" not in human.stderr
    as_json_run = run("open", "response", "--json", stdin=rejected)
    assert as_json_run.returncode == 1
    assert json.loads(as_json_run.stdout) == {
        "kind": "response", "rejected": True, "reason": "busy", "reason_hex": None
    }


def test_seal_request_needs_a_readable_queue_uri() -> None:
    """--reply-queue takes an SMP queue URI; a bad one is a usage error naming its offset."""
    bad = run("seal", "request", "--ad", "00", "--payload", "x", "--reply-queue", "smp://@h")
    assert bad.returncode == 2 and b"queue URI" in bad.stderr and b"offset" in bad.stderr
    missing = run("seal", "request", "--ad", "00", "--payload", "x")
    assert missing.returncode == 2 and b"--reply-queue" in missing.stderr


def test_seal_to_a_pipe_and_as_hex() -> None:
    piped = ok("seal", "response", "--payload", '{"response":1}')
    assert sx.open_response(piped) == b'{"response":1}'
    text = ok("seal", "response", "--payload", '{"response":1}', "--hex")
    assert bytes.fromhex(text.decode()) == piped
    assert ok("open", "response", "--hex", stdin=text) == b'{"response":1}'


def test_seal_refuses_binary_to_a_terminal() -> None:
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "simplex_rpc", "seal", "response", "--payload", "x"],
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=120,
        )
        os.set_blocking(leader, False)
        try:
            written = os.read(leader, 65536)
        except BlockingIOError:
            written = b""
    finally:
        os.close(leader)
        os.close(follower)
    assert result.returncode == 2
    assert b"terminal" in result.stderr and b"Traceback" not in result.stderr
    assert b"#" not in written


def test_open_request_in_another_session_is_invalid(tmp_path: Path) -> None:
    block = sx.seal_request(PAYLOAD, AD, KEY, reply_queue=QUEUE)
    result = run("open", "request", "--ad", (AD[::-1]).hex(), stdin=block)
    assert result.returncode == 1 and result.stdout == b""
    assert b"does not verify" in result.stderr and b"Traceback" not in result.stderr
    tampered = bytearray(block)
    tampered[2 + 2 + len(QUEUE.encode()) + 111 + 10] ^= 1  # inside the payload
    assert run("open", "request", "--ad", AD.hex(), stdin=bytes(tampered)).returncode == 1


def test_open_reports_the_request_key_rule() -> None:
    """The protocol text: an unsigned request with requestKey is answered bad_request."""
    payload = sx.Request(protocol="mcp", request={}, request_key=KEY.public_key).to_json()
    block = sx.seal_request(payload, AD, reply_queue=QUEUE)
    out = as_json("open", "request", "--ad", AD.hex(), stdin=block)
    assert out["signed"] is False
    assert out["envelope"]["request_key_check"]["code"] == "bad_request"
    human = run("open", "request", "--ad", AD.hex(), stdin=block)
    assert human.returncode == 0 and b"bad_request" in human.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["open", "response"], b"", "block"),
        (
            ["open", "response"],
            sx.seal_request(b"x", b"ad", reply_queue=QUEUE),
            "a request ('A') where a response",
        ),
        (["open", "request", "--ad", "00"], sx.seal_response(b"x"), "a response ('P') where a"),
        (["open", "request", "--ad", "00"], b"\x00" * 100, "11106"),
        (["open", "response", "--hex"], b"not hex", "hex"),
        (["open", "request"], b"", "--ad"),
        (["open", "request", "/nonexistent/block", "--ad", "00"], b"", "cannot read"),
        (
            ["seal", "request", "--ad", "00", "--payload", "x" * 10978, "--reply-queue", URI],
            b"",
            "at most 10977",
        ),
        (
            [*("seal", "request", "--ad", "00", "--key", PRIVATE, "--payload", "x" * 10868),
             "--reply-queue", URI],
            b"",
            "at most 10867",
        ),
        (["seal", "response", "--payload", "x" * 11104], b"", "at most 11103"),
        (["seal", "request", "--payload", "x", "--reply-queue", URI], b"", "--ad"),
        (["seal", "request", "--ad", "", "--payload", "x", "--reply-queue", URI], b"", "empty"),
        (["seal", "response", "--ad", "00", "--payload", "x"], b"", "unrecognized"),
        (["seal", "request", "--ad", "0g", "--payload", "x", "--reply-queue", URI], b"", "hex"),
        (
            ["sign", "--key", "@/nonexistent/key", "--ad", "00", "--payload", "x"],
            b"",
            "cannot read",
        ),
        (["vectors", "check", "/nonexistent/vectors"], b"", "not a directory"),
        (["no-such-command"], b"", "invalid choice"),
        (["sign", "--key", PRIVATE], b"", "required"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], stdin: bytes, needle: str) -> None:
    assert_usage_error(run(*args, stdin=stdin), needle)


# -- vectors -----------------------------------------------------------------------------


def test_vectors_check_passes_on_the_repository() -> None:
    out = ok("vectors", "check", cwd=ROOT)
    assert b"every file is as generated" in out
    assert as_json("vectors", "check", str(VECTORS)) == {
        "directory": str(VECTORS),
        "ok": True,
        "problems": [],
    }


def test_vectors_generate_then_check(tmp_path: Path) -> None:
    out = ok("vectors", "generate", str(tmp_path / "v")).decode()
    assert out.count("written") == 13  # six kinds, JSON and CBOR, and the README
    again = ok("vectors", "generate", str(tmp_path / "v")).decode()
    assert again.count("unchanged") == 13
    for name in os.listdir(VECTORS):
        assert (tmp_path / "v" / name).read_bytes() == (VECTORS / name).read_bytes()
    ok("vectors", "check", str(tmp_path / "v"))


def test_vectors_check_exits_1_naming_file_and_case(tmp_path: Path) -> None:
    shutil.copytree(VECTORS, tmp_path / "v")
    doc = json.loads((VECTORS / "padding.json").read_text())
    name = doc["cases"][1]["name"]
    doc["cases"][1]["padded_head"] = "00"
    (tmp_path / "v" / "padding.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    result = run("vectors", "check", str(tmp_path / "v"))
    err = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in err
    assert "padding.json" in err and repr(name) in err and "padded_head" in err
    out = json.loads(run("vectors", "check", "--json", str(tmp_path / "v")).stdout)
    assert out["ok"] is False and any(repr(name) in p for p in out["problems"])


# -- demo --------------------------------------------------------------------------------


def test_demo_runs_and_shows_every_step() -> None:
    out = ok("demo").decode()
    for needle in (
        "public key",
        "112 bytes",
        '"method": "tools/call"',
        '"requestKey"',
        "11106 bytes",
        "session tag",
        "verified",
        "check_request_key: ok",
        "12 anvils are in stock.",
        "tampered block",
        "BadSignature",
        "another session",
        "All steps as expected.",
    ):
        assert needle in out, needle
    assert ok("demo").decode() == out, "the demo is deterministic"


def test_demo_json() -> None:
    out = as_json("demo")
    assert out["ok"] is True
    assert out["ad_length"] == 112
    assert out["block"]["length"] == sx.PADDED_LENGTH
    assert out["responder"]["verified"] is True
    assert out["responder"]["signer"] == out["requester"]["public_key"]
    assert out["responder"]["check_request_key"] is None
    assert out["unsigned_with_request_key"].startswith("bad_request")
    assert [r["error"] for r in out["refused"]] == ["BadSignature", "BadSignature"]
    request = sx.Request.parse(out["request"]["json"])
    assert request.request_key == sx.PublicKey.decode(out["requester"]["public_key"])
    assert "private_key" not in json.dumps(out)


def test_version_and_help() -> None:
    assert ok("--version").decode().startswith("simplex-rpc ")
    for command in ("keygen", "sign", "verify", "seal", "open", "vectors", "demo"):
        assert run(command, "--help").returncode == 0


def test_seal_output_dash_is_stdout_as_for_keygen_and_agent(tmp_path: Path) -> None:
    """`-o -` is standard output for every command that writes a file (issue 31: `seal`
    wrote a file named '-')."""
    block = ok("seal", "response", "--payload", '{"response":1}', "-o", "-", cwd=tmp_path)
    assert sx.open_response(block) == b'{"response":1}'
    assert not (tmp_path / "-").exists()


def test_the_two_proxies_take_one_set_of_options_with_the_same_defaults() -> None:
    """mcp-proxy and a2a-proxy share their options (issue 31): the same names and defaults,
    --timeout 30 (the protocol's default wait of a requester); only --listen's default
    differs (the MCP proxy serves stdio without it)."""
    from simplex_rpc.cli import build_parser

    parser = build_parser()
    mcp = vars(parser.parse_args(["mcp-proxy", "--core", "ws://127.0.0.1:1", "simplex:/a#x"]))
    a2a = vars(parser.parse_args(["a2a-proxy", "--core", "ws://127.0.0.1:1", "simplex:/a#x"]))
    assert mcp.keys() == a2a.keys()
    differ = {k for k in mcp if k not in ("handler", "command") and mcp[k] != a2a[k]}
    assert differ == {"listen"}
    assert (mcp["listen"], a2a["listen"]) == (None, ("127.0.0.1", 0))
    assert (mcp["timeout"], mcp["via"], mcp["user"], mcp["start"]) == (30.0, "rpc", 1, True)

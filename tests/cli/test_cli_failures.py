"""Every subcommand's failure paths: one line on stderr, exit status 2, no traceback (issue 22).

README: "Errors are one line on stderr with exit status 2, never a traceback."
Issue 22, item 1: "Test every subcommand's failure paths for 'one line, exit 2, no
traceback', table-driven." Each row is a real ``simplex-rpc`` process: an argument
error, an I/O error (a file that is missing, a directory that is not one, a busy
port, a disk that is full), or a missing extra; the row's needle must be in the
line. A row that holds key text checks that the key is not echoed. The last test
checks that the table names every subcommand the parser has, so that a new
subcommand comes with its rows.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import simplex_rpc as sx
from _cli import CliResult, run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# RFC 8032 section 7.1 TEST 1: a published key.
SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
KEY = sx.SigningKey.from_seed(bytes.fromhex(SEED))
QUEUE_URI = (
    "smp://AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=@smp.example.com/AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"
    "#/?v=4&dh=MCowBQYDK2VuAyEAQEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8%3D&q=m"
)
PRIVATE = KEY.encode()
PUBLIC = KEY.public_key.encode()
AD = (bytes(range(56)) + bytes(range(100, 156))).hex()
SIG = "00" * 64

#: Files the rows refer to as {tmp}/NAME, made in each row's own directory.
FILES: dict[str, bytes] = {
    "private.key": PRIVATE.encode() + b"\n",
    "public.key": PUBLIC.encode() + b"\n",
    "empty": b"",
    "exists.key": b"x",
    "garbage.block": b"not a block",
    "latin1.txt": "caf\xe9".encode("latin-1"),
    "notjson.json": b"{bad",
    "big.payload": b"a" * 20_000,
    "nothex.txt": b"zz",
    "a-file": b"",
    # The module cases of serve --mcp-module (issue 22, item 1).
    "raises.py": b"raise RuntimeError('boom on import')\n",
    "syntax.py": b"def f(:\n",
    "factory.py": b"def build():\n    raise RuntimeError('factory boom')\n\nnot_a_server = 42\n",
}


#: A service address's public keys (no KEM; fixed bytes) and a reply queue, for `agent`.
AGENT_ADDRESS = (
    "LDAqMAUGAytlbgMhAI9Axa22jyViSuWyFOp2em7JTYKdPXteGtG6bz4hOChfEGtra2tra2tra2tra2tra2sAAwAD"
    "RDBCMAUGAytlbwM5ADxv0dApYODZ6TMI_GVzYUHDDbMHl3-Bt7EJluUeU_Vz5chmISBf9JEgnTt815M0KBd7pN76"
    "4U3BRDBCMAUGAytlbwM5AL2nNluhvZpm8u84227FrF-tVFLpkNiy-I9yH9UzYyN-d19lIF0dRmfUc_Dh9MV2lNLY"
    "Aujf8GAmMA=="
)
AGENT_QUEUE = (
    "smp://AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=@smp.example.net/"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB#/?v=4&dh="
    "MCowBQYDK2VuAyEAjiswwI3O_NKD1WIsSkRcRd6DkQh9rWU-I0YeiQpeTT0=&q=m"
)


@dataclass(frozen=True)
class Row:
    """One failure: ``argv`` (with {tmp}, {closed}, {busy}), what stderr must say."""

    id: str
    argv: tuple[str, ...]
    needle: str
    stdin: bytes = b""
    block: tuple[str, ...] = ()  # modules made unimportable (a missing extra)
    secrets: tuple[str, ...] = field(default=())  # never in the output


def row(id: str, *argv: str, needle: str, **kw: object) -> Row:
    return Row(id, argv, needle, **kw)  # type: ignore[arg-type]


C = "{closed}"  # a loopback port nobody listens on: nothing may connect there first

TABLE: list[Row] = [
    # -- keygen
    row("keygen-seed-not-hex", "keygen", "--seed", "zz", needle="--seed"),
    row("keygen-seed-short", "keygen", "--seed", "00", needle="32 are required"),
    row("keygen-output-exists", "keygen", "-o", "{tmp}/exists.key", needle="exists"),
    row("keygen-output-no-dir", "keygen", "-o", "{tmp}/no/dir.key", needle="cannot create"),
    row("keygen-private-and-public", "keygen", "--private", "--public", needle="--public"),
    row("keygen-unknown-option", "keygen", "--bogus", needle="unrecognized arguments"),
    # -- sign
    row("sign-key-not-base64", "sign", "--key", "xx", "--raw", "--payload", "p", needle="key"),
    row(
        "sign-key-file-missing",
        "sign", "--key", "@{tmp}/missing.key", "--raw", "--payload", "p",
        needle="cannot read",
    ),
    row(
        "sign-key-empty",
        "sign", "--key", "@{tmp}/empty", "--raw", "--payload", "p",
        needle="expected a private key",
    ),
    row(
        "sign-key-stdin-empty",
        "sign", "--key", "-", "--raw", "--payload", "p",
        needle="expected a private key",
    ),
    row(
        "sign-with-a-public-key",
        "sign", "--key", "@{tmp}/public.key", "--raw", "--payload", "p",
        needle="public key",
    ),
    row("sign-no-ad", "sign", "--key", PRIVATE, "--payload", "p", needle="--ad is required",
        secrets=(PRIVATE,)),
    row("sign-ad-not-hex", "sign", "--key", PRIVATE, "--ad", "zz", "--payload", "p",
        needle="hex digit", secrets=(PRIVATE,)),
    row("sign-two-stdins", "sign", "--key", "-", "--ad", "-", "--payload", "p",
        needle="only one input"),
    row("sign-payload-missing", "sign", "--key", PRIVATE, "--raw", "--payload", "@{tmp}/nope",
        needle="cannot read", secrets=(PRIVATE,)),
    # -- verify
    row(
        "verify-with-a-private-key",
        "verify", "--key", "@{tmp}/private.key", "--raw", "--payload", "p", "--signature", SIG,
        needle="give the public key", secrets=(PRIVATE,),
    ),
    row(
        "verify-key-empty",
        "verify", "--key", "@{tmp}/empty", "--raw", "--payload", "p", "--signature", SIG,
        needle="expected a public key",
    ),
    row("verify-signature-short", "verify", "--key", PUBLIC, "--raw", "--payload", "p",
        "--signature", "00", needle="signature"),
    row("verify-signature-file-missing", "verify", "--key", PUBLIC, "--raw", "--payload", "p",
        "--signature", "@{tmp}/nope", needle="cannot read"),
    # -- seal
    row("seal-request-ad-not-hex", "seal", "request", "--ad", "zz", "--payload", "p", "--hex",
        "--reply-queue", QUEUE_URI, needle="hex digit"),
    row("seal-request-payload-missing", "seal", "request", "--ad", AD, "--payload",
        "@{tmp}/nope", "--hex", "--reply-queue", QUEUE_URI, needle="cannot read"),
    row("seal-request-queue-uri-bad", "seal", "request", "--ad", AD, "--payload", "p", "--hex",
        "--reply-queue", "smp://@smp.example.com/AAAA#/?v=4", needle="queue URI"),
    row("seal-request-no-queue", "seal", "request", "--ad", AD, "--payload", "p", "--hex",
        needle="--reply-queue"),
    row("seal-response-too-large", "seal", "response", "--payload", "@{tmp}/big.payload",
        "--hex", needle="too large"),
    row("seal-response-disk-full", "seal", "response", "--payload", "p", "-o", "/dev/full",
        needle="cannot write"),
    row("seal-no-kind", "seal", needle="KIND"),
    # -- open
    row("open-response-missing", "open", "response", "{tmp}/nope", needle="cannot read"),
    row("open-response-garbage", "open", "response", "{tmp}/garbage.block", needle="11106"),
    row("open-request-not-hex", "open", "request", "--ad", AD, "--hex", "{tmp}/nothex.txt",
        needle="hex digit"),
    # -- vectors
    row("vectors-check-not-a-directory", "vectors", "check", "{tmp}/nope",
        needle="not a directory"),
    row("vectors-generate-into-a-file", "vectors", "generate", "{tmp}/a-file/sub",
        needle="cannot write"),
    # -- agent (the agent's cryptography; pqcrypto blocked: the sntrup761 extra missing)
    row("agent-keygen-unknown-option", "agent", "keygen", "--bogus",
        needle="unrecognized arguments"),
    row("agent-keygen-output-exists", "agent", "keygen", "--no-kem", "-o", "{tmp}/exists.key",
        needle="exists"),
    row("agent-keygen-pq-without-extra", "agent", "keygen", needle="simplex-rpc[sntrup761]",
        block=("pqcrypto.kem",)),
    row("agent-seal-request-address-not-base64", "agent", "seal-request", "--address", "xx",
        "--reply-queue", "smp://x", "--payload", "p", "--state", "{tmp}/s", needle="address"),
    row("agent-seal-request-without-extra", "agent", "seal-request", "--address", AGENT_ADDRESS,
        "--reply-queue", AGENT_QUEUE, "--payload", "p", "--state", "{tmp}/s",
        needle="simplex-rpc[sntrup761]", block=("pqcrypto.kem",)),
    row("agent-open-request-keys-missing", "agent", "open-request", "{tmp}/garbage.block",
        "--keys", "@{tmp}/missing.key", needle="cannot read"),
    row("agent-open-request-keys-empty", "agent", "open-request", "{tmp}/garbage.block",
        "--keys", "@{tmp}/empty", needle="empty"),
    row("agent-seal-response-reply-not-base64", "agent", "seal-response", "--reply", "xx",
        "--payload", "p", needle="service reply"),
    row("agent-open-response-state-not-base64", "agent", "open-response", "{tmp}/garbage.block",
        "--state", "xx", needle="requester state"),
    # -- demo
    row("demo-unknown-option", "demo", "--bogus", needle="unrecognized arguments"),
    # -- call
    row("call-closed-port", "call", "--core", C, "t", "echo", "1", needle="cannot connect"),
    row("call-json-bad", "call", "--core", C, "t", "echo", "{bad", needle="JSON"),
    row("call-sign-key-missing", "call", "--core", C, "t", "echo", "1", "--sign-key",
        "@{tmp}/nope", needle="cannot read"),
    row("call-request-key-without-sign-key", "call", "--core", C, "t", "echo", "1",
        "--request-key", needle="--sign-key"),
    row("call-core-not-a-url", "call", "--core", "not-a-url", "t", "echo", "1",
        needle="--core"),
    row("call-user-zero", "call", "--core", C, "t", "echo", "1", "--user", "0",
        needle="--user"),
    # -- serve: arguments checked, modules imported and servers built before connecting
    row("serve-closed-port", "serve", "--core", C, "--echo", needle="cannot connect"),
    row("serve-bad-protocol", "serve", "--core", C, "--echo", "--protocol", "BAD NAME",
        needle="BAD NAME"),
    row("serve-module-without-name", "serve", "--core", C, "--mcp-module",
        str(EXAMPLES / "mcp_two_tools.py"), needle="MODULE:NAME"),
    row("serve-module-missing", "serve", "--core", C, "--mcp-module", "{tmp}/nope.py:x",
        needle="cannot import"),
    row("serve-module-raises", "serve", "--core", C, "--mcp-module", "{tmp}/raises.py:x",
        needle="boom on import"),
    row("serve-module-syntax-error", "serve", "--core", C, "--mcp-module", "{tmp}/syntax.py:x",
        needle="syntax"),
    row("serve-module-no-such-name", "serve", "--core", C, "--mcp-module",
        "{tmp}/factory.py:nothing", needle="has no 'nothing'"),
    row("serve-factory-raises", "serve", "--core", C, "--mcp-module", "{tmp}/factory.py:build",
        needle="factory boom"),
    row("serve-not-a-server", "serve", "--core", C, "--mcp-module",
        "{tmp}/factory.py:not_a_server", needle="not an MCP server"),
    row("serve-without-the-mcp-extra", "serve", "--core", C, "--mcp-module",
        f"{EXAMPLES / 'mcp_two_tools.py'}:build_server", needle="simplex-rpc[mcp]",
        block=("mcp",)),
    row("serve-echo-declare", "serve", "--core", C, "--echo", "--declare", needle="--declare"),
    row("serve-rate-limit-zero", "serve", "--core", C, "--echo", "--rate-limit", "0/10",
        needle="--rate-limit"),
    row("serve-grace-negative", "serve", "--core", C, "--echo", "--grace", "-1",
        needle="--grace"),
    row("serve-unknown-option", "serve", "--core", C, "--echo", "--nope",
        needle="unrecognized arguments"),
    # -- call-chat
    row("call-chat-not-an-object", "call-chat", "--core", C, "@1", "mcp", "[1]",
        needle="JSON object"),
    row("call-chat-bad-chat", "call-chat", "--core", C, "bad", "mcp", "{}", needle="bad"),
    row("call-chat-closed-port", "call-chat", "--core", C, "@1", "mcp", "{}",
        needle="nothing listens on 127.0.0.1:"),
    # -- mcp and a2a (issue 30: calls a person can type)
    row("mcp-call-bad-argument", "mcp", "call", "--core", C, "simplex:/a#x", "t", "item",
        needle="expected key=value"),
    row("mcp-call-bad-json-argument", "mcp", "call", "--core", C, "simplex:/a#x", "t", "n:=x",
        needle="not JSON"),
    row("mcp-tools-closed-port", "mcp", "tools", "--core", C, "simplex:/a#x",
        needle="nothing listens on 127.0.0.1:"),
    row("mcp-tools-chat-ref-needs-via-chat", "mcp", "tools", "--core", C, "--via", "chat",
        "simplex:/a#x", needle="@CONTACT_ID"),
    row("mcp-without-the-mcp-extra", "mcp", "tools", "--core", C, "simplex:/a#x",
        needle="simplex-rpc[mcp]", block=("mcp",)),
    row("a2a-send-closed-port", "a2a", "send", "--core", C, "simplex:/a#x", "hi",
        needle="nothing listens on 127.0.0.1:"),
    row("a2a-send-without-the-a2a-extra", "a2a", "send", "--core", C, "simplex:/a#x", "hi",
        needle="simplex-rpc[a2a]", block=("a2a",)),
    row("a2a-send-group-needs-member", "a2a", "send", "--core", C, "--via", "chat", "#1", "hi",
        needle="--member"),
    # -- simulator
    row("simulator-port-too-large", "simulator", "--port", "99999", needle="--port"),
    row("simulator-port-negative", "simulator", "--port", "-1", needle="--port"),
    row("simulator-port-busy", "simulator", "--port", "{busy}", needle="in use"),
    row("simulator-host-not-local", "simulator", "--host", "192.0.2.1", "--port", "0",
        needle="192.0.2.1"),
    row("simulator-host-label-too-long", "simulator", "--host", "a" * 64 + ".invalid",
        "--port", "0", needle="63 characters"),
    row("simulator-command-delay-negative", "simulator", "--command-delay", "-1",
        needle="--command-delay"),
    row("simulator-command-delay-bad-command", "simulator", "--command-delay", "send=1",
        needle="--command-delay"),
    row("simulator-ack-unknown", "simulator", "--ack", "ok", needle="--ack"),
    # -- doctor
    row("doctor-user-zero", "doctor", "--user", "0", needle="--user"),
    row("doctor-core-not-ws", "doctor", "--core", "http://x", needle="--core"),
    # -- llms-txt and call-text
    row("llms-txt-missing", "llms-txt", "{tmp}/nope", needle="cannot read"),
    row("llms-txt-not-utf8", "llms-txt", "{tmp}/latin1.txt", needle="UTF-8"),
    row("call-text-not-an-object", "call-text", "mcp", "[1]", needle="JSON object"),
    row("call-text-json-file-bad", "call-text", "mcp", "@{tmp}/notjson.json", needle="request"),
    # -- discover
    row("discover-not-https", "discover", "http://acme.example", needle="https:// URL"),
    row("discover-credentials", "discover", "https://u:secret@acme.example",
        needle="credentials", secrets=("secret",)),
    row("discover-without-httpx", "discover", "https://127.0.0.1:9/",
        needle="simplex-rpc[discover]", block=("httpx",)),
    row("discover-cacert-missing", "discover", "https://127.0.0.1:9/", "--cacert",
        "{tmp}/nope.pem", needle="--cacert: cannot read"),
    row("discover-timeout-zero", "discover", "https://a.example", "--timeout", "0",
        needle="--timeout"),
    row("discover-max-bytes-zero", "discover", "https://a.example", "--max-bytes", "0",
        needle="--max-bytes"),
    row("discover-core-not-ws", "discover", "https://a.example", "--core", "http://x",
        needle="--core"),
    # -- bench
    row("bench-only-unknown", "bench", "--only", "nosuch", needle="nosuch"),
    row("bench-rounds-zero", "bench", "--rounds", "0", needle="--rounds"),
    # -- a2a-proxy
    row("a2a-proxy-without-the-a2a-extra", "a2a-proxy", "--core", C, "simplex:/a#x",
        needle="simplex-rpc[a2a]", block=("a2a",)),
    row("a2a-proxy-listen-bad", "a2a-proxy", "--core", C, "--listen", "nope", "simplex:/a#x",
        needle="--listen"),
    row("a2a-proxy-sign-key-missing", "a2a-proxy", "--core", C, "--sign-key", "@{tmp}/nope",
        "simplex:/a#x", needle="cannot read"),
    row("a2a-proxy-sign-key-public", "a2a-proxy", "--core", C, "--sign-key",
        "@{tmp}/public.key", "simplex:/a#x", needle="this is a public key"),
    # -- mcp-proxy
    row("mcp-proxy-without-the-mcp-extra", "mcp-proxy", "--core", C, "simplex:/a#x",
        needle="simplex-rpc[mcp]", block=("mcp",)),
    row("mcp-proxy-sign-key-stdin", "mcp-proxy", "--core", C, "--sign-key", "-", "simplex:/a#x",
        needle="@FILE"),
    row("mcp-proxy-sign-key-missing", "mcp-proxy", "--core", C, "--sign-key", "@{tmp}/nope",
        "simplex:/a#x", needle="cannot read"),
]  # fmt: skip


@contextlib.contextmanager
def listening_socket() -> Iterator[int]:
    """A loopback port that is taken (listening), for the busy-port row."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_row(
    argv: list[str], stdin: bytes, block: tuple[str, ...], cwd: Path
) -> CliResult | subprocess.CompletedProcess[bytes]:
    """In this process, but a missing extra: a process of its own blocks its import, as an
    installation without it fails (this process has imported it already)."""
    if not block:
        return run_cli(argv, stdin=stdin, cwd=cwd)
    code = "import sys\n"
    code += "".join(f"sys.modules[{name!r}] = None\n" for name in block)
    code += "from simplex_rpc.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize("case", TABLE, ids=[r.id for r in TABLE])
def test_a_failure_is_one_line_on_stderr_with_exit_status_2(case: Row, tmp_path: Path) -> None:
    """ "Errors are one line on stderr with exit status 2, never a traceback." """
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    with listening_socket() as busy:
        argv = [
            a.replace("{tmp}", str(tmp_path))
            .replace("{closed}", f"ws://127.0.0.1:{closed_port()}")
            .replace("{busy}", str(busy))
            for a in case.argv
        ]
        result = run_row(argv, case.stdin, case.block, tmp_path)
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert result.returncode == 2, (result.returncode, err)
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("simplex-rpc"), err
    assert case.needle in err, (case.needle, err)
    assert result.stdout == b"", result.stdout
    for secret in case.secrets:
        assert secret not in err


def subcommands() -> set[str]:
    """Every subcommand name of the parser (``seal request`` counted as ``seal``)."""
    import argparse

    from simplex_rpc.cli import build_parser

    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(actions[0].choices)


def test_the_table_covers_every_subcommand() -> None:
    """ "The table-driven CLI test covers every subcommand's argument errors" (Done when)."""
    covered = {r.argv[0] for r in TABLE}
    missing = subcommands() - covered
    assert not missing, f"subcommands without failure rows: {sorted(missing)}"


def test_the_table_covers_io_errors_and_missing_extras() -> None:
    """Each kind of failure the issue names is in the table: I/O errors and missing extras."""
    assert any("cannot read" in r.needle for r in TABLE)
    assert any("cannot write" in r.needle for r in TABLE)
    assert any(r.block for r in TABLE if r.argv[0] == "serve")
    assert any(r.block for r in TABLE if r.argv[0] == "mcp-proxy")


def test_an_unresolvable_simulator_host_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`simulator --host no.such.host.invalid`: one line, exit 2. The name lookup is made to
    fail here (tests talk only to loopback), as a resolver answers for such a name."""
    import socket as socket_module

    from simplex_rpc.cli import main

    def no_such_host(*args: object, **kwargs: object) -> object:
        raise socket_module.gaierror(socket_module.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket_module, "getaddrinfo", no_such_host)
    assert main(["simulator", "--host", "no.such.host.invalid", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no.such.host.invalid" in err, err

"""Keys through pipes (issue 22, item 2).

"`-` means stdout for `-o` and stdin for `--key`. `keygen --private` or `--public`
prints one key alone, in its text form. `verify --key @private.key` says 'this is a
private key; give the public key', not '48 bytes where 44 are required'. An empty key
input names what was expected." Done when: "`keygen --private | sign --key - ...` works."
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import simplex_rpc as sx
from _cli import CliResult, run_cli

SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
KEY = sx.SigningKey.from_seed(bytes.fromhex(SEED))
PRIVATE = KEY.encode()
PUBLIC = KEY.public_key.encode()
AD = (bytes(range(56)) + bytes(range(100, 156))).hex()
CLI = [sys.executable, "-m", "simplex_rpc"]


def run(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> CliResult:
    """In this process; the pipes between two processes below are real ones."""
    return run_cli(args, stdin=stdin, cwd=cwd)


def test_keygen_private_prints_the_private_key_alone() -> None:
    """`keygen --private` prints one key alone, in its text form."""
    done = run("keygen", "--seed", SEED, "--private")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PRIVATE + "\n").encode()
    assert sx.SigningKey.decode(done.stdout.decode().strip()) == KEY


def test_keygen_public_prints_the_public_key_alone() -> None:
    done = run("keygen", "--seed", SEED, "--public")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PUBLIC + "\n").encode()


def test_keygen_public_with_a_key_file_keeps_the_private_key(tmp_path: Path) -> None:
    """`PUB=$(simplex-rpc keygen -o bot.key --public)`: the private key in a 0600 file,
    the public key alone on stdout."""
    done = run("keygen", "--seed", SEED, "-o", "bot.key", "--public", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PUBLIC + "\n").encode()
    key_file = tmp_path / "bot.key"
    assert key_file.read_text().strip() == PRIVATE
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_keygen_output_dash_is_stdout_not_a_file(tmp_path: Path) -> None:
    """`-o -` is stdout: the private key text alone there, and no file named '-'."""
    done = run("keygen", "--seed", SEED, "-o", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PRIVATE + "\n").encode()
    assert not (tmp_path / "-").exists()
    assert PRIVATE.encode() not in done.stderr


def test_keygen_private_piped_into_sign_key_dash() -> None:
    """Done when: "`keygen --private | sign --key - ...` works" (and verifies)."""
    keygen = subprocess.Popen([*CLI, "keygen", "--seed", SEED, "--private"], stdout=subprocess.PIPE)
    try:
        sign = subprocess.run(
            [*CLI, "sign", "--key", "-", "--ad", AD, "--payload", "hello"],
            stdin=keygen.stdout,
            capture_output=True,
            timeout=120,
        )
    finally:
        assert keygen.stdout is not None
        keygen.stdout.close()
        assert keygen.wait(60) == 0
    assert sign.returncode == 0, sign.stderr
    signature = sign.stdout.decode().strip()
    assert bytes.fromhex(signature) == KEY.sign_request(bytes.fromhex(AD), b"hello")
    verify = run(
        "verify", "--key", PUBLIC, "--ad", AD, "--payload", "hello", "--signature", signature
    )
    assert verify.returncode == 0 and verify.stdout == b"valid\n", verify.stderr


def test_keygen_public_piped_into_verify_key_dash() -> None:
    """`--key -` is stdin for verify too."""
    signature = KEY.sign(b"hi").hex()
    public = run("keygen", "--seed", SEED, "--public").stdout
    verify = run("verify", "--key", "-", "--raw", "--payload", "hi", "--signature", signature,
                 stdin=public)  # fmt: skip
    assert verify.returncode == 0 and verify.stdout == b"valid\n", verify.stderr


def test_verify_with_a_private_key_says_to_give_the_public_key(tmp_path: Path) -> None:
    """`verify --key @private.key` says "this is a private key; give the public key"."""
    (tmp_path / "private.key").write_text(PRIVATE + "\n")
    done = run("verify", "--key", "@private.key", "--raw", "--payload", "p", "--signature",
               "00" * 64, cwd=tmp_path)  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "this is a private key; give the public key" in err
    assert "48 bytes" not in err and PRIVATE not in err


def test_sign_with_a_public_key_says_to_give_the_private_key() -> None:
    done = run("sign", "--key", PUBLIC, "--raw", "--payload", "p")
    assert done.returncode == 2
    assert "this is a public key; give the private key" in done.stderr.decode()


def test_an_empty_key_input_names_what_was_expected() -> None:
    """ "An empty key input names what was expected.\""""
    sign = run("sign", "--key", "-", "--raw", "--payload", "p", stdin=b"")
    assert sign.returncode == 2
    assert "empty; expected a private key" in sign.stderr.decode()
    verify = run("verify", "--key", "-", "--raw", "--payload", "p", "--signature", "00" * 64,
                 stdin=b"\n")  # fmt: skip
    assert verify.returncode == 2
    assert "empty; expected a public key" in verify.stderr.decode()


def test_keygen_private_and_public_together_is_a_usage_error() -> None:
    done = run("keygen", "--private", "--public")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1


def closed_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"ws://127.0.0.1:{s.getsockname()[1]}"


def test_a_sign_key_file_readable_by_others_is_refused_as_ssh_does(tmp_path: Path) -> None:
    """Issue 30, item 5: ssh refuses a private key file that group or others can read
    ("UNPROTECTED PRIVATE KEY FILE"), and so does every --sign-key @FILE: one line naming
    the file, its mode and `chmod 600`, exit 2. A 0600 file is used; the key is never
    printed."""
    key = sx.SigningKey.generate()
    for name, mode in (("loose.key", 0o644), ("group.key", 0o640), ("tight.key", 0o600)):
        path = tmp_path / name
        path.write_text(key.encode() + "\n")
        path.chmod(mode)
        for command in (["call", "--core", closed_url(), "simplex:/a#x", "echo", "1"],
                        ["mcp-proxy", "--core", closed_url(), "simplex:/a#x"]):  # fmt: skip
            done = run(*command, "--sign-key", f"@{path}")
            err, out = done.stderr.decode(), done.stdout.decode()
            refused = [line for line in err.splitlines() if "readable by" in line]
            if mode == 0o600:
                assert not refused, err
            else:
                assert done.returncode == 2 and len(refused) == 1, err
                assert err.count("\n") == 1, err
                assert name in refused[0] and f"{mode:04o}" in refused[0], refused
                assert "chmod 600" in refused[0]
            assert key.encode() not in err + out
            assert "Traceback" not in err


def test_sign_key_help_says_to_use_a_file() -> None:
    for command in ("call", "mcp-proxy"):
        text = " ".join(run(command, "--help").stdout.decode().split())
        assert "--sign-key" in text and "@FILE" in text, text

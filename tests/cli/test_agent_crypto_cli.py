"""``simplex-rpc agent``: keygen, seal-request, open-request, seal-response, open-response."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from _cli import CliResult, run_cli

QUEUE = (
    "smp://AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=@smp.example.net/"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB#/?v=4&dh="
    "MCowBQYDK2VuAyEAjiswwI3O_NKD1WIsSkRcRd6DkQh9rWU-I0YeiQpeTT0=&q=m"
)


def run(*args: str, cwd: Path, stdin: bytes = b"") -> CliResult:
    return run_cli(args, cwd=cwd, stdin=stdin)


def test_a_request_and_its_answer_through_files_and_pipes(tmp_path: Path) -> None:
    keygen = run("agent", "keygen", "-o", "svc.keys", "--json", cwd=tmp_path)
    assert keygen.returncode == 0, keygen.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "svc.keys").st_mode) == 0o600
    public = __import__("json").loads(keygen.stdout)["public_keys"]
    (tmp_path / "svc.pub").write_text(public + "\n")
    sealed = run("agent", "seal-request", "--address", "@svc.pub", "--reply-queue", QUEUE,
                 "--payload", "-", "--state", "req.state", cwd=tmp_path, stdin=b'{"q":1}')
    assert sealed.returncode == 0, sealed.stderr
    assert len(sealed.stdout) == 15992
    assert stat.S_IMODE(os.stat(tmp_path / "req.state").st_mode) == 0o600
    opened = run("agent", "open-request", "--keys", "@svc.keys", "--reply", "svc.reply",
                 cwd=tmp_path, stdin=sealed.stdout)
    assert (opened.returncode, opened.stdout) == (0, b'{"q":1}'), opened.stderr
    answer = run("agent", "seal-response", "--reply", "@svc.reply", "--payload", "pong",
                 "--hex", cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr
    read = run("agent", "open-response", "--hex", "--state", "@req.state", cwd=tmp_path,
               stdin=answer.stdout)
    assert (read.returncode, read.stdout) == (0, b"pong"), read.stderr
    rejected = run("agent", "seal-response", "--reply", "@svc.reply", "--payload", "busy",
                   "--reject", cwd=tmp_path)
    read = run("agent", "open-response", "--state", "@req.state", cwd=tmp_path,
               stdin=rejected.stdout)
    assert read.returncode == 1 and b"busy" in read.stderr


def test_bad_input_is_one_line_without_key_material(tmp_path: Path) -> None:
    run("agent", "keygen", "-o", "svc.keys", cwd=tmp_path)
    keys = (tmp_path / "svc.keys").read_text().strip()
    bad = run("agent", "open-request", "--keys", "@svc.keys", cwd=tmp_path, stdin=b"x" * 100)
    assert bad.returncode == 2
    assert bad.stderr.count(b"\n") == 1 and b"Traceback" not in bad.stderr
    assert b"request envelope" in bad.stderr and keys[:20].encode() not in bad.stderr
    broken = run("agent", "open-request", "--keys", keys[:-8], cwd=tmp_path, stdin=b"")
    assert broken.returncode == 2 and keys[:20].encode() not in broken.stderr
    exists = run("agent", "keygen", "-o", "svc.keys", cwd=tmp_path)
    assert exists.returncode == 2 and b"not overwriting" in exists.stderr

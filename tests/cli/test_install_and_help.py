"""Install as it is, and help where it is asked for (issue 30, item 5).

* The package is not on PyPI yet: README and docs/install.md say how to install
  the wheel ``make dist`` builds, and every message about a missing extra says
  the same (``simplex_rpc.errors.install_hint``), in the library and the CLI.
* ``vectors generate`` needs no ``crypto`` extra (the RSA and P-256 keys of the
  negative cases are stored); install.md no longer claims it does.
* ``bench adapter --help`` and ``bench gateway --help`` print their own help.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import run_cli
from simplex_rpc.errors import install_hint

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "simplex_rpc"


def test_readme_and_install_md_say_how_to_install_the_built_wheel() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "install.md"):
        text = page.read_text("utf-8")
        install = text.split("## Install", 1)[1] if page.name == "README.md" else text
        assert "not on PyPI yet" in install, page
        assert 'pip install "$(ls dist/simplex_rpc-*.whl)[' in install, page
        assert "make dist" in install, page


def test_every_missing_extra_hint_is_the_one_wording() -> None:
    """No message of the package spells a pip command of its own: each goes through
    install_hint, which names PyPI and the built wheel."""
    spelled = []
    for path in SRC.rglob("*.py"):
        if path.name in {"errors.py", "_build_c.py"}:
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if re.search(r"pip install '?simplex-rpc\[", line):
                spelled.append(f"{path.relative_to(SRC)}:{number}")
    assert spelled == [], spelled
    hint = install_hint("mcp")
    assert "pip install 'simplex-rpc[mcp]'" in hint and "make dist" in hint
    assert '"$(ls dist/simplex_rpc-*.whl)[mcp]"' in hint


def test_a_missing_extra_says_the_same_in_the_library() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import simplex_rpc.mcp as m\n"
        "try:\n    m.McpBridge\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert install_hint("mcp") in done.stdout, done.stdout + done.stderr


def test_install_md_does_not_claim_crypto_for_the_vectors() -> None:
    text = " ".join((ROOT / "docs" / "install.md").read_text("utf-8").split())
    assert "regenerating the vectors" not in text
    assert "neither does `vectors generate`" in text


@pytest.mark.parametrize(
    ("suite", "needle"), [("adapter", "--only SCENARIOS"), ("gateway", "serve --mcp-stdio")]
)
def test_bench_suites_print_their_own_help(suite: str, needle: str) -> None:
    done = run_cli(["bench", suite, "--help"])
    out = done.stdout.decode()
    assert done.returncode == 0
    assert out.startswith(f"usage: simplex-rpc bench {suite} ")
    assert needle in " ".join(out.split())
    assert "--rounds" not in out  # the backend benchmark's option is not theirs


#: What a plain install does not have: the extras' packages, and what they bring.
NOT_IN_A_PLAIN_INSTALL = (
    "anyio", "mcp", "a2a", "httpx", "cryptography", "pqcrypto", "matplotlib", "pydantic",
)


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"], ["--version"], ["demo"]])
def test_a_plain_install_runs_the_command_line(argv: list[str]) -> None:
    """`pip install simplex-rpc` alone (no extras) has a working command line: importing
    the CLI imports nothing an extra brings (a process of its own, with the extras'
    packages blocked, as an install without them). `serve` reconnects with the keeper's
    policy (`_backoff`), which needs no anyio."""
    code = "import sys\n"
    code += "".join(f"sys.modules[{name!r}] = None\n" for name in NOT_IN_A_PLAIN_INSTALL)
    code += "from simplex_rpc.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr

"""What a plain install promises (issue 13), checked from the source tree.

The built wheel itself is checked by ``make dist`` (tests/dist/check_wheel.py)
and installed on every CPython present by ``.ci/dist-check``. Here:

* the runtime dependencies are what ``import simplex_rpc`` and the main
  commands need: ``simplex-rpc demo`` and ``simplex-rpc vectors check`` run
  without cryptography, and so does ``PublicKey.from_pem``; each optional
  feature that needs it (X448 keys of other demo labels, rebuilding the
  vectors' foreign keys) raises a library error naming the ``crypto`` extra;
* the values stored so that they can (the demo's X448 keys, the vectors' RSA
  and P-256 keys) are exactly what cryptography computes;
* ``backend_info()`` and ``--version`` say which backend runs and why;
* the package metadata: the MIT LICENSE, the setuptools floor of the SPDX
  ``license`` field, a long description that starts with what the library is.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest

import simplex_rpc as sx
from simplex_rpc._wire import backend as _backend
from simplex_rpc.cli import _demo, main
from simplex_rpc.vectors import _keys as _vector_keys

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))

#: Run Python with cryptography made unimportable, as on a plain install.
NO_CRYPTOGRAPHY = "import sys\nsys.modules['cryptography'] = None\n"


def run_without_cryptography(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", NO_CRYPTOGRAPHY + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


# -- dependencies -------------------------------------------------------------------


def test_rule_cryptography_is_an_extra_not_a_runtime_dependency() -> None:
    runtime = [re.split(r"[<>=\[ ]", d)[0] for d in PYPROJECT["project"]["dependencies"]]
    assert "cryptography" not in runtime
    assert set(runtime) == {"pynacl", "cffi", "cbor2", "websockets"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("cryptography") for d in extras["crypto"])


def test_rule_demo_and_vectors_check_run_without_cryptography() -> None:
    code = (
        "from simplex_rpc.cli import main\n"
        "assert main(['vectors', 'check', 'vectors']) == 0\n"
        "assert main(['demo']) == 0\n"
        "assert 'cryptography' not in sys.modules or sys.modules['cryptography'] is None\n"
    )
    done = run_without_cryptography(code)
    assert done.returncode == 0, done.stderr[-3000:]
    # agent_crypto needs the sntrup761 extra (cryptography, pqcrypto): named, not checked
    assert "every checked file is as generated" in done.stdout
    assert "not checked: agent_crypto.json" in done.stdout


def test_rule_from_pem_needs_no_cryptography() -> None:
    """from_pem is the fixed-prefix decoder of a base64 body: no extra (issue 13)."""
    code = (
        "import simplex_rpc as sx\n"
        "key = sx.SigningKey.generate().public_key\n"
        "assert sx.PublicKey.from_pem(key.to_pem()) == key\n"
        "assert sx.PublicKey.from_pem(key.to_pem().encode()) == key\n"
        "try:\n    sx.PublicKey.from_pem(key.to_pem().replace('PUBLIC', 'PRIVATE'))\n"
        "except sx.KeyFormatError as exc:\n    print(exc)\n"
        "assert sys.modules['cryptography'] is None\n"
    )
    done = run_without_cryptography(code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == (
        "public key PEM: the BEGIN line names a 'PRIVATE KEY' block, not 'PUBLIC KEY'\n"
    )


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ("_demo.demo_ad((b'a', b'b'))", "SimplexRpcError"),
        ("_vector_keys._foreign_der_from_numbers()", "VectorError"),
    ],
)
def test_rule_a_feature_without_its_extra_names_the_extra(call: str, error: str) -> None:
    code = (
        "import simplex_rpc as sx\nfrom simplex_rpc.cli import _demo\n"
        "from simplex_rpc.vectors import _keys as _vector_keys\n"
        f"try:\n    {call}\nexcept sx.SimplexRpcError as exc:\n"
        "    print(type(exc).__name__, exc)\nelse:\n    print('no error')\n"
    )
    done = run_without_cryptography(code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(error + " "), done.stdout
    assert "pip install 'simplex-rpc[crypto]'" in done.stdout


def test_rule_stored_x448_keys_are_what_cryptography_computes() -> None:
    assert set(_demo._KNOWN_X448) == {*_demo.DEMO_AD_LABELS, *_demo._OTHER_AD_LABELS}
    for label, stored in _demo._KNOWN_X448.items():
        assert _demo._x448_from_label(label) == stored, label
    assert len(_demo.demo_ad()) == 112


def test_rule_stored_foreign_keys_are_what_cryptography_builds() -> None:
    assert _vector_keys._foreign_der_from_numbers() == _vector_keys._FOREIGN_DER


# -- backend_info and --version --------------------------------------------------------


def test_rule_backend_info_names_the_running_backend_and_why_not_the_other() -> None:
    info = sx.backend_info()
    assert info.name == sx.backend()
    if info.name == "c":
        assert info.extension is not None and "_simplex_rpc_c" in info.extension
        assert "SIMPLEX_RPC_PURE=1" in info.reason
    else:
        assert info.extension is None
        assert info.reason == f"C backend unavailable: {_backend.c_unavailable_reason}"
    assert str(info) == f"backend {info.name} ({info.reason})"


def test_rule_version_prints_the_version_and_the_backend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"simplex-rpc {sx.__version__}"
    info = sx.backend_info()
    assert lines[1] == f"backend: {info.name} ({info.reason})"


# -- metadata --------------------------------------------------------------------------


def test_rule_the_licence_is_mit_and_shipped() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text("utf-8").startswith("MIT License\n")


def test_rule_the_build_floor_supports_the_spdx_licence_field() -> None:
    requires = PYPROJECT["build-system"]["requires"]
    assert "setuptools>=77" in requires


def test_rule_the_long_description_starts_with_what_the_library_is() -> None:
    readme = PYPROJECT["project"]["readme"]
    text = (ROOT / readme).read_text("utf-8")
    first = text.split("\n\n")[1]
    assert first.startswith("simplex-rpc is the Service RPC transport")
    assert "pip install simplex-rpc" in text.split("```python")[0]
    # The repository's README still opens with the developers' two commands.
    top = (ROOT / "README.md").read_text("utf-8").split("```sh\n", 1)[1].splitlines()
    assert top[0].startswith("make demo") and top[1].startswith("make test")


def test_rule_the_long_description_example_runs(tmp_path: Path) -> None:
    text = (ROOT / PYPROJECT["project"]["readme"]).read_text("utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    script = tmp_path / "pypi_example.py"
    script.write_text(block, "utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


# -- the sdist ------------------------------------------------------------------------


def _check_wheel() -> Any:
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / "tests/dist/check_wheel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _manifest(paths: list[str]) -> set[str]:
    """Which of ``paths`` MANIFEST.in's template puts in the sdist (setuptools' own rules)."""
    from setuptools._distutils.filelist import FileList

    files = FileList()
    files.set_allfiles(paths)
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            files.process_template_line(line)
    return set(files.files)


def test_rule_sdist_leaves_out_the_makefile_and_the_helpers_notes(tmp_path: Path) -> None:
    """Issue 13: no file in the sdist that needs what it prunes, nor internal notes.

    The Makefile's targets need tests/, fuzz/ and .ci/; docs/HELPERS.md held the
    working rules of helper sessions (issue 17 deleted it). MANIFEST.in leaves both
    out (the rest of docs/ stays), and check_wheel.py, run by ``make dist``, refuses
    an sdist with either, so the notes cannot ship should the file come back.
    """
    docs = sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    assert "docs/HELPERS.md" not in docs  # issue 17: "Delete docs/HELPERS.md"
    # Every page of docs/ ships, the notes' file name would not: the same template
    # applied to the real pages plus that name.
    docs.append("docs/HELPERS.md")
    shipped = _manifest(["Makefile", "LICENSE", "README.md", "CHANGELOG.md", *docs])
    assert shipped == {"LICENSE", "README.md", "CHANGELOG.md", *docs} - {"docs/HELPERS.md"}

    sdist = tmp_path / "simplex_rpc-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name in ("LICENSE", "csrc/simplex_rpc.c", "csrc/simplex_rpc.h", "vectors/keys.json",
                     "Makefile", "docs/HELPERS.md", "docs/wire.md"):
            info = tarfile.TarInfo(f"simplex_rpc-0.1.0/{name}")
            tar.addfile(info, io.BytesIO(b""))
    problems = _check_wheel().check_sdist(sdist)
    assert [p.split(" (")[0] for p in problems] == [
        f"{sdist.name}: ships Makefile",
        f"{sdist.name}: ships docs/HELPERS.md",
    ]


def test_rule_the_failed_build_message_promises_only_what_exists() -> None:
    """Issue 13: the fatal-build paragraph says how to get the C backend without a compiler
    truthfully: no wheel is published yet, so it names the one ``make dist`` builds."""
    tree = ast.parse((ROOT / "setup.py").read_text("utf-8"))
    failed = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "_failed"
    )
    message = next(
        node.exc.args[0]
        for node in ast.walk(failed)
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
    )
    assert isinstance(message, ast.JoinedStr)
    text = "".join(part.value for part in message.values if isinstance(part, ast.Constant))
    assert "SIMPLEX_RPC_BUILD_C=0" in text
    assert "prebuilt" not in text
    assert "No wheel is published yet" in text and "`make dist`" in text

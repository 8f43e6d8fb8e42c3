"""The vectors ship with the package, and `vectors check` defaults to them (issue 22, item 6).

"After installing the wheel, `simplex-rpc vectors check` says `'vectors' is not a
directory`. Ship the vectors as package data, and make `vectors check` default to
them when no directory is given." The ``vectors/`` directory at the repository root
stays the source of truth: the packaged copy must be byte-identical to it, file for
file. (The wheel itself, in a fresh venv outside the checkout, is checked by
``.ci/dist-check`` and ``tests/dist/check_wheel.py``.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "vectors"
VECTOR_FILES = sorted(p.name for p in SOURCE.iterdir() if p.suffix in (".json", ".cbor"))


def packaged() -> Path:
    """The directory of the vector files inside the installed package."""
    return Path(str(resources.files("simplex_rpc.vectors").joinpath("data")))


def test_the_packaged_vectors_are_byte_identical_to_the_repository_vectors() -> None:
    """vectors/ at the root is the source of truth; the package's copy is the same bytes."""
    directory = packaged()
    shipped = sorted(p.name for p in directory.iterdir() if p.suffix in (".json", ".cbor"))
    assert shipped == VECTOR_FILES
    for name in VECTOR_FILES:
        assert (directory / name).read_bytes() == (SOURCE / name).read_bytes(), name


def test_the_packaged_vectors_are_package_resources() -> None:
    """Reachable through importlib.resources, as from an installed wheel."""
    root = resources.files("simplex_rpc.vectors")
    names = {entry.name for entry in root.joinpath("data").iterdir()}
    assert set(VECTOR_FILES) <= names


def test_vectors_check_without_a_directory_checks_the_packaged_vectors(tmp_path: Path) -> None:
    """From a directory with no vectors/ in it (as after `pip install`), the check passes."""
    done = subprocess.run(
        [sys.executable, "-m", "simplex_rpc", "vectors", "check", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert Path(report["directory"]) == packaged()


def test_vectors_check_still_takes_a_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simplex_rpc", "vectors", "check", str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

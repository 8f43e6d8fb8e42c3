"""Check a built distribution's files: what ``make dist`` promises (issue 13).

Usage: ``python tests/dist/check_wheel.py DIST_DIR [--pure]``. The wheel's
checks need pyelftools (auditwheel's dependency, in the dist tools' venv). Checks, naming each failure:

* one sdist and one wheel; the wheel is ``cp311-abi3-manylinux_*`` (``--pure``:
  ``py3-none-any`` with no extension module);
* the wheel holds LICENSE, ``py.typed``, the extension (unless pure), the vectors
  (``simplex_rpc/vectors/data/``), and no tests;
* the sdist holds LICENSE, the C sources and the vectors, and no test suite,
  no Makefile and no ``docs/HELPERS.md``;
* the extension carries no build path: no RPATH or RUNPATH, no DWARF (so no
  ``comp_dir``), and none of the build's directories among its strings.

Exit status 0 when every check holds.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from io import BytesIO
from pathlib import Path

#: Directories a build machine's paths start with: none may appear in the module.
BUILD_PATH = re.compile(rb"(/tmp/|/root/|/home/|/work/|/build/|build-via-sdist|pyenv)")


#: Files the sdist must not carry, and why.
SDIST_UNWANTED = {
    "Makefile": "its targets need the tests, fuzzers and CI scripts the sdist leaves out",
    "docs/HELPERS.md": "the helper sessions' working rules, not the library's documentation",
}


def check_extension(name: str, data: bytes) -> list[str]:
    """The build paths left in one extension module."""
    # Imported here: the sdist checks run without pyelftools (tests/project/test_distribution.py).
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    problems: list[str] = []
    elf = ELFFile(BytesIO(data))
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                    value = tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath
                    problems.append(f"{name}: {tag.entry.d_tag} {value}")
    if elf.has_dwarf_info() and elf.get_section_by_name(".debug_info") is not None:
        dwarf = elf.get_dwarf_info()
        for unit in dwarf.iter_CUs():
            top = unit.get_top_DIE()
            comp_dir = top.attributes.get("DW_AT_comp_dir")
            if comp_dir is not None:
                problems.append(f"{name}: DWARF comp_dir {comp_dir.value!r}")
    for match in sorted({m.group(0) for m in BUILD_PATH.finditer(data)}):
        problems.append(f"{name}: contains the build path fragment {match!r}")
    return problems


def check_wheel(path: Path, pure: bool) -> list[str]:
    problems: list[str] = []
    tag = path.name.removesuffix(".whl").split("-", 2)[2]
    if pure:
        if tag != "py3-none-any":
            problems.append(f"{path.name}: tag {tag}, not py3-none-any")
    elif not re.fullmatch(r"cp311-abi3-(manylinux[\w.]*_x86_64|manylinux[\w.]*)", tag):
        problems.append(f"{path.name}: tag {tag}, not cp311-abi3-manylinux_*")
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            problems.append(f"{path.name}: no LICENSE")
        if "simplex_rpc/py.typed" not in names:
            problems.append(f"{path.name}: no simplex_rpc/py.typed")
        # The vectors ship as package data: `simplex-rpc vectors check` with no directory.
        for kind in ("keys", "signatures", "padding", "agent_messages", "envelopes",
                     "agent_crypto"):
            for suffix in ("json", "cbor"):
                shipped = f"simplex_rpc/vectors/data/{kind}.{suffix}"
                if shipped not in names:
                    problems.append(f"{path.name}: no {shipped}")
        tests = [n for n in names if n.startswith("tests/") or "/tests/" in n or "conftest" in n]
        problems += [f"{path.name}: ships test file {n}" for n in tests]
        modules = [n for n in names if n.endswith(".so")]
        if pure and modules:
            problems.append(f"{path.name}: a pure wheel with {modules}")
        if not pure:
            if [m.rsplit("/", 1)[-1] for m in modules] != ["_simplex_rpc_c.abi3.so"]:
                problems.append(f"{path.name}: extension modules {modules}, not one abi3 module")
            for module in modules:
                problems += check_extension(f"{path.name}:{module}", wheel.read(module))
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        text = wheel.read(metadata).decode()
        if "Requires-Dist: cryptography" in text.split("Provides-Extra")[0]:
            problems.append(f"{path.name}: cryptography is a runtime dependency")
    return problems


def check_sdist(path: Path) -> list[str]:
    problems: list[str] = []
    with tarfile.open(path) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for needed in ("LICENSE", "csrc/simplex_rpc.c", "csrc/simplex_rpc.h", "vectors/keys.json"):
        if needed not in names:
            problems.append(f"{path.name}: no {needed}")
    tests = sorted(n for n in names if n.startswith("tests/"))
    problems += [f"{path.name}: ships {n} (the test suite stays in the repository)" for n in tests]
    for unwanted, why in SDIST_UNWANTED.items():
        problems += [f"{path.name}: ships {n} ({why})" for n in sorted(names) if n == unwanted]
    return problems


def main(argv: list[str]) -> int:
    pure = "--pure" in argv
    directory = Path(next(a for a in argv if not a.startswith("--")))
    wheels = sorted(directory.glob("*.whl"))
    sdists = sorted(directory.glob("*.tar.gz"))
    problems: list[str] = []
    if len(wheels) != 1:
        problems.append(f"{directory}: {len(wheels)} wheels, not one")
    if not pure and len(sdists) != 1:
        problems.append(f"{directory}: {len(sdists)} sdists, not one")
    for wheel in wheels:
        problems += check_wheel(wheel, pure)
    for sdist in sdists:
        problems += check_sdist(sdist)
    for problem in problems:
        print(f"check_wheel: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_wheel: {', '.join(p.name for p in wheels + sdists)}: all checks hold")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

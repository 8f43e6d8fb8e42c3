"""Build of the C backend (see csrc/ and src/simplex_rpc/_build_c.py).

Everything else is in pyproject.toml. As with PyNaCl and cryptography, the C
extension is built by default and a failed build stops the install with one
paragraph that says what is missing and how to opt out; the wheel is tagged
``cp311-abi3`` (cffi compiles for the stable ABI), one wheel for every CPython
3.11 and later. ``SIMPLEX_RPC_BUILD_C=0`` is the opt-out: no C at all, a
``py3-none-any`` wheel, and ``simplex_rpc.backend_info()`` says why the C
backend is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

#: The oldest CPython whose stable ABI the extension targets (requires-python).
LIMITED_API = "cp311"

BUILD_C = os.environ.get("SIMPLEX_RPC_BUILD_C", "1").strip() or "1"
if BUILD_C not in ("0", "1"):
    sys.exit(f"simplex-rpc: SIMPLEX_RPC_BUILD_C={BUILD_C!r}: use 1 (build C, the default) or 0")


def _what_is_missing(exc: BaseException) -> str:
    """The likely missing piece, named from the failure and the build environment."""
    text = str(exc)
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler: {compiler!r} was not found (install gcc or clang, or set CC)"
    include = sysconfig.get_paths().get("include", "")
    if "Python.h" in text or not (Path(include) / "Python.h").is_file():
        return f"no Python headers: Python.h is not in {include} (install python3-dev)"
    return "the C compiler failed (see its messages above)"


class fatal_build_ext(build_ext):
    """``build_ext`` whose failure is one readable paragraph, then a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._failed(exc)

    def build_extension(self, ext: Any) -> None:
        # The interpreter's own -Wl,-rpath (pyenv and other shared-libpython builds put
        # it in LDSHARED) would name a directory of the build machine in the module's
        # RUNPATH; a stable-ABI extension does not link libpython, so it needs none.
        linker = self.compiler.linker_so
        self.compiler.linker_so = [arg for arg in linker if not arg.startswith("-Wl,-rpath")]
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._failed(exc)

    def copy_file(self, infile: Any, outfile: Any, *args: Any, **kwargs: Any) -> Any:
        """Copy, then rename into place: a process that has the old extension mapped
        (another test run in the same tree) keeps its file instead of a truncated one."""
        if not self.inplace or not str(outfile).endswith((".so", ".pyd")):
            return super().copy_file(infile, outfile, *args, **kwargs)
        partial = f"{outfile}.{os.getpid()}.partial"
        try:
            super().copy_file(infile, partial, *args, **kwargs)
            os.replace(partial, outfile)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return outfile, True

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, SystemExit):  # already explained
            raise exc
        raise SystemExit(
            "\nsimplex-rpc: the C backend could not be built: "
            f"{_what_is_missing(exc)}. Building it needs a C compiler and the headers of"
            " this Python (Debian/Ubuntu: apt-get install gcc python3-dev; Fedora: dnf"
            " install gcc python3-devel; Alpine: apk add build-base python3-dev); the"
            f" error was: {type(exc).__name__}: {exc}. To install the slower pure-Python"
            " backend instead, set SIMPLEX_RPC_BUILD_C=0 (simplex_rpc.backend_info() then"
            " says so). No wheel is published yet: a manylinux wheel built with `make dist`"
            " on a machine that has a compiler installs here without one.\n"
        )


if BUILD_C == "0":
    setup()
else:
    setup(
        cffi_modules=["src/simplex_rpc/_build_c.py:make_ffi"],
        cmdclass={"build_ext": fatal_build_ext},
        options={"bdist_wheel": {"py_limited_api": LIMITED_API}},
    )

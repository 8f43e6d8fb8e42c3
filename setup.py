"""Build of the optional C backend (see csrc/ and src/simplex_rpc/_build_c.py).

Everything else is in pyproject.toml. The extension is optional: without a
working C compiler the install still succeeds and the pure-Python backend
runs, unless ``SIMPLEX_RPC_BUILD_C=1`` makes a failed build fatal.
``SIMPLEX_RPC_BUILD_C=0`` skips the C build altogether.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

BUILD_C = os.environ.get("SIMPLEX_RPC_BUILD_C", "")


class optional_build_ext(build_ext):
    """``build_ext`` that turns a failed C build into a warning, unless it is required."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._failed(exc)

    def build_extension(self, ext: Any) -> None:
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
        if BUILD_C == "1":
            raise exc
        sys.stderr.write(
            "\nsimplex-rpc: the C backend was not built; the pure-Python backend will"
            f" be used.\n  reason: {type(exc).__name__}: {exc}\n"
            "  (set SIMPLEX_RPC_BUILD_C=1 to make this an error)\n\n"
        )


if BUILD_C == "0":
    setup()
else:
    setup(
        cffi_modules=["src/simplex_rpc/_build_c.py:make_ffi"],
        cmdclass={"build_ext": optional_build_ext},
    )

"""Module attributes imported on first use: the SDK-backed names of ``mcp`` and ``a2a``.

Those modules work without their SDK; the names that need it are listed here,
imported when asked for, and shown by ``dir()`` all the same.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["sdk_attributes"]


def sdk_attributes(
    module: str, names: Mapping[str, str], install: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for names that live in SDK-backed modules.

    ``module`` is the public package's ``__name__``; ``names`` maps each lazy
    name to the private module of that package that defines it;
    ``install`` names the SDK and its extra for the :class:`ImportError`
    raised when the SDK is missing.
    """
    package = module  # a package: the names live in its private modules

    def __getattr__(name: str) -> Any:
        private = names.get(name)
        if private is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        try:
            found = importlib.import_module(f".{private}", package)
        except ImportError as exc:  # pragma: no cover - the SDKs are test extras
            raise ImportError(f"{module}.{name} needs {install} ({exc})") from exc
        return getattr(found, name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *names})

    return __getattr__, __dir__

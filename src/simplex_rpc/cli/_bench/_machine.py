"""What benchmark numbers were measured on: shared by ``bench`` and ``bench adapter``."""

from __future__ import annotations

import os
import platform
from typing import Any

from ..._wire import backend as _backend

__all__ = ["machine"]


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        load = []
    return {
        "cpu": model,
        "cpus": cpus,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "load_average": load,
        "backends": sorted(_backend.backends),
        "active_backend": _backend.backend(),
    }

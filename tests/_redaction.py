"""Secrets and where they must not appear: a token, every log level, a key's text forms.

No tests here.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from typing import Any

from simplex_rpc import SigningKey

TOKEN = "tok-SECRET-4f1c9e2b7a"


@contextlib.contextmanager
def every_level() -> Any:
    handler = Everything()
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    names = ("simplex_rpc", "websockets", "simplex_rpc.adapter", "simplex_rpc.testing")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def secrets_of(key: SigningKey) -> list[str]:
    """The texts that must never be seen: the credentials, parameter values, key forms."""
    seed = key.seed()
    return [
        TOKEN,
        TENANT,
        "COOKIE-77d3aa",
        key.encode(),
        key.encode()[21:40],  # the tail of the key text, past its fixed prefix
        seed.hex(),
        base64.b64encode(key.der).decode(),
        base64.urlsafe_b64encode(seed).decode().rstrip("="),
    ]


TENANT = "tenant-VALUE-9a2e51"


class Everything(logging.Handler):
    """Every record of every logger, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

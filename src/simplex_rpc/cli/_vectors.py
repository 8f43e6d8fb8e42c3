"""``vectors generate`` and ``vectors check``: the test vectors of wire.md section 7."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from .._wire import backend as _backend
from ._common import EXIT_INVALID, EXIT_OK, emit_json, fail
from ._options import add_json_option


def _cmd_vectors(args: argparse.Namespace) -> int:
    from .. import vectors as _vectors

    if args.action == "generate":
        directory = Path(args.directory if args.directory is not None else "vectors")
        try:
            written = _vectors.generate(directory)
        except OSError as exc:
            fail(f"cannot write into {str(directory)!r}: {exc.strerror}")
        if args.json:
            emit_json({"directory": str(directory), "files": dict(written)})
        else:
            for name, changed in written:
                print(f"{directory / name}: {'written' if changed else 'unchanged'}")
        return EXIT_OK
    if args.directory is None:
        # No directory: the copy the package ships (package data), as after `pip install`.
        with resources.as_file(resources.files(_vectors).joinpath("data")) as shipped:
            return _check_vectors(args, Path(shipped))
    directory = Path(args.directory)
    if not directory.is_dir():
        fail(f"{str(directory)!r} is not a directory")
    return _check_vectors(args, directory)


def _check_vectors(args: argparse.Namespace, directory: Path) -> int:
    from .. import vectors as _vectors

    not_checked: list[str] = []  # kinds whose optional extra is missing, named
    problems = _vectors.check_vectors(directory, not_checked=not_checked)
    if args.json:
        out: dict[str, Any] = {
            "directory": str(directory),
            "ok": not problems,
            "problems": problems,
        }
        if not_checked:  # only when an extra is missing: the usual object is unchanged
            out["not_checked"] = not_checked
        emit_json(out)
        return EXIT_INVALID if problems else EXIT_OK
    for line in not_checked:
        print(f"{directory}/{line}", file=sys.stderr)
    if problems:
        for problem in problems:
            print(f"{directory}/{problem}", file=sys.stderr)
        print(f"simplex-rpc vectors check: {len(problems)} problems", file=sys.stderr)
    else:
        names = ", ".join(sorted(_backend.backends))
        skipped = [line.split(":", 1)[0] for line in not_checked]
        every = "every checked file" if skipped else "every file"
        but = f"; not checked: {', '.join(skipped)} (see stderr)" if skipped else ""
        print(f"{directory}: {every} is as generated and every case holds (backends: {names}){but}")
    return EXIT_INVALID if problems else EXIT_OK


def register(subparsers: Any) -> None:
    """Add ``vectors`` to the ``simplex-rpc`` parser."""
    p = subparsers.add_parser(
        "vectors",
        help="generate or check the test vectors",
        description="Write or check the vector files of wire.md section 7.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (
        ("generate", "write the vector files deterministically (a second run changes nothing)"),
        (
            "check",
            "regenerate in memory, compare byte for byte, and re-verify every case against"
            " the library; exit status 1 on any difference",
        ),
    ):
        a = actions.add_parser(
            action, help=text.split(";")[0], description=text[0].upper() + text[1:] + "."
        )
        a.add_argument(
            "directory",
            nargs="?",
            default=None,
            metavar="DIR",
            help="default: vectors"
            if action == "generate"
            else "default: the vectors the package ships (a copy of the repository's vectors/)",
        )
        add_json_option(a)
        a.set_defaults(handler=_cmd_vectors)


__all__ = ["register"]

"""The pure side of fuzz/fuzz_json_diff.c: C's verdict against the pure backend's.

``check`` gets the input and what ``srpc_json_check`` reported for it (the
value's start offset, or a status with its ``srpc_json_error`` fields). It
builds the C backend's error the way ``_cbackend`` does, runs the pure backend
(``_json.python_loads``) on the same bytes, and raises AssertionError when they
disagree: one accepts and the other refuses, the messages differ, or the
values differ. The harness aborts on any exception, so libFuzzer keeps the input.
"""

from __future__ import annotations

import types

from simplex_rpc._wire import cbackend as _cbackend
from simplex_rpc._wire import strict_json as _json


def check(data: bytes, result: int, offset: int, chars: int, length: int, value: int) -> None:
    try:
        want = ("ok", repr(_json.python_loads(data)))
    except _json.JsonError as exc:
        want = ("error", str(exc))
    if result >= 0:
        got = ("ok", repr(_cbackend._scan_once(data.decode("utf-8"), result)[0]))
    else:
        err = types.SimpleNamespace(
            status=result, offset=offset, chars=chars, length=length, value=value
        )
        got = ("error", str(_cbackend.json_error_of(err, data)))
    if got != want:
        raise AssertionError(f"C {got!r} but pure {want!r} for {data[:200]!r}")

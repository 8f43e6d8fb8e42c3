"""The consumer's mistakes: ``mypy --strict`` must report each line marked ``# wrong``.

``check_consumer.py`` runs mypy on this file, expects it to
fail, and counts one ``[arg-type]`` (or, for an overloaded function,
``[call-overload]``) error per marked line: a public function that lost its
signature (``Callable[..., Any]``), or a parameter typed ``Any``, would accept them.
"""

from __future__ import annotations

import simplex_rpc as sx

AD = bytes(112)

sx.open_request("text", 5)  # wrong
sx.seal_request(b"x", AD, "not a key", reply_queue=None)  # wrong
sx.pad("text")  # wrong
sx.unpad(b"x", length="64")  # wrong
sx.open_requests([b"x"], AD, workers="2")  # wrong
sx.pad_many([b"x"], out="s")  # wrong

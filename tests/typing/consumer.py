"""A consumer of the public API, type-checked with ``mypy --strict`` (issue 13).

Every call below must keep its precise type through the backend seam: each
``assert_type`` fails the check if a result decays to ``Any``. CI runs this
against the installed wheel (``py.typed``) and against the source tree; its
twin ``consumer_wrong.py`` must fail the same check.
"""

from __future__ import annotations

from typing import Any, assert_type

import simplex_rpc as sx
from simplex_rpc import agent
from simplex_rpc.adapter import TYPED_ERRORS, AnswerStore, ChatCore, RawRequest, ServeOutcome

AD = bytes(112)
KEY = sx.SigningKey.generate()
QUEUE = agent.SMPQueueInfo(
    4,
    agent.SMPServer(("smp.example.com",), "", bytes(32)),
    bytes(24),
    bytes.fromhex("302a300506032b656e032100") + bytes(32),
    "M",
)


def seal(payload: bytes) -> bytes:
    """A function a consumer writes: under --strict it must not return Any."""
    return sx.seal_request(payload, AD, KEY, reply_queue=QUEUE)


def main() -> None:
    block = seal(b'{"jsonrpc":"2.0"}')
    opened = sx.open_request(block, AD, strict=True)
    assert_type(opened, sx.OpenedRequest)
    assert_type(opened.payload, bytes)
    assert_type(opened.signer, sx.PublicKey | None)
    assert_type(opened.reply_queues, tuple[agent.SMPQueueInfo, ...])
    assert_type(sx.seal_request(b"x", AD, reply_queue=QUEUE), bytes)
    assert_type(sx.seal_response(b"{}"), bytes)
    assert_type(sx.seal_response(b"{}", pq_support=False), bytes)
    assert_type(sx.seal_rejection(b"no"), bytes)
    assert_type(sx.max_request_payload(QUEUE, signed=True), int)
    assert_type(agent.SMPQueueInfo.from_uri(QUEUE.uri()), agent.SMPQueueInfo)
    assert_type(agent.decode_message(b"P{}"), agent.AgentServiceMessage)
    assert_type(sx.open_response(sx.seal_response(b"{}")), bytes)
    assert_type(sx.pad(b"x"), bytes)
    assert_type(sx.pad(b"x", 64), bytes)
    assert_type(sx.unpad(sx.pad(b"x"), strict=True), bytes)
    assert_type(sx.pad_many([b"a", b"b"]), bytes)
    assert_type(sx.pad_many([b"a"], 64, out=bytearray(64)), memoryview)
    assert_type(sx.unpad_many(sx.pad_many([b"a"])), list[bytes])
    assert_type(sx.unpad_many(sx.pad_many([b"a"]), views=True), list[memoryview])
    assert_type(sx.seal_requests([b"a", b"b"], AD, KEY, reply_queue=QUEUE, workers=2), bytes)
    out = bytearray(11106)
    assert_type(sx.seal_requests([b"a"], AD, reply_queue=QUEUE, out=out), memoryview)
    results = sx.open_requests(sx.seal_requests([b"a"], AD, reply_queue=QUEUE), AD, strict=True)
    assert_type(results, sx.OpenedRequests)
    assert_type(results.ok, bool)
    assert_type(results.failures, tuple[sx.BlockFailure, ...])
    assert_type(results.unwrap(), list[sx.OpenedRequest])
    assert_type(sx.backend(), str)
    assert_type(sx.backend_info(), sx.BackendInfo)
    assert_type(sx.backend_info().reason, str)
    try:
        sx.seal_request(bytes(20_000), AD, reply_queue=QUEUE)
    except sx.PayloadTooLarge as exc:
        assert_type(exc.size, int)
        assert_type(exc.limit, int)


def raw_handler(raw: RawRequest) -> dict[str, Any]:
    """A raw responder's handler: the request object in, the answer object out."""
    assert_type(raw.data, dict[str, Any])
    assert_type(raw.signer, sx.PublicKey | None)
    return {"type": "ok"}


async def raw_layer(core: ChatCore, link: str) -> None:
    """The raw layer keeps its types through ChatCore's delegation."""
    answer = await core.service_request_raw(1, link, {"v": 1}, sign_key=KEY, retries=2)
    assert_type(answer, dict[str, Any])
    outcome = await core.serve_raw(1, raw_handler, errors=TYPED_ERRORS, answers=AnswerStore())
    assert_type(outcome, ServeOutcome)


if __name__ == "__main__":
    main()

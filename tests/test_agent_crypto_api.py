"""The public API of the agent's Service RPC cryptography, as the issue writes it."""

from __future__ import annotations

import os
import pickle

import pytest

from simplex_rpc import SigningKey, agent


def test_the_issue_example() -> None:
    service = agent.AddressKeys.generate(pq=True)
    raw = service.raw()
    kem_secret, kem_public = raw["kem"]
    again = agent.AddressKeys.from_raw(
        queue_dh=raw["queue_dh"], k1=raw["k1"], k2=raw["k2"], kem=(kem_secret, kem_public),
        key_id=raw["key_id"],
    )
    assert again == service and again.pq_support
    published = service.public
    assert published == agent.AddressPublicKeys(
        queue_dh=published.queue_dh, k1=published.k1, k2=published.k2, kem=published.kem,
        key_id=published.key_id,
    )
    queue = agent.ReplyQueue(("smp.example.net",), "", os.urandom(32), os.urandom(24))
    key = SigningKey.generate()
    sent = agent.seal_service_request(b'{"q":1}', published, reply_queue=queue, sign_key=key)
    got = agent.open_service_request(sent.message, service)
    assert got.payload == b'{"q":1}' and got.signer == key.public_key
    assert got.reply_queues[0][0] == queue and len(got.ad) == 112
    answer = agent.seal_service_response(b'{"a":2}', got.reply)
    assert agent.open_service_response(answer, sent.state) == b'{"a":2}'


def test_state_and_keys_do_not_pickle() -> None:
    service = agent.AddressKeys.generate(pq=False)
    queue = agent.ReplyQueue(("smp.example.net",), "", b"", b"s")
    sent = agent.seal_service_request(b"x", service.public, reply_queue=queue)
    got = agent.open_service_request(sent.message, service)
    for value in (service, sent.state, got.reply):
        with pytest.raises(TypeError):
            pickle.dumps(value)


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError):
        agent.nothing_here  # noqa: B018
    assert "seal_service_request" in dir(agent)

"""The public API of the agent's Service RPC cryptography, as the issue writes it."""

from __future__ import annotations

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
    queue = agent.SMPQueueInfo.from_uri(
        "smp://" + "A" * 43 + "=@smp.example.net/" + "B" * 32 + "#/?v=4&dh="
        "MCowBQYDK2VuAyEAjiswwI3O_NKD1WIsSkRcRd6DkQh9rWU-I0YeiQpeTT0=&q=m"
    )
    key = SigningKey.generate()
    sent = agent.seal_service_request(b'{"q":1}', published, reply_queue=queue, sign_key=key)
    got = agent.open_service_request(sent.message, service)
    assert got.payload == b'{"q":1}' and got.signer == key.public_key
    assert got.reply_queues[0].sender_id == queue.sender_id and len(got.ad) == 112
    assert got.reply_queues[0] == sent.state.reply_queue != queue  # the key is the new pair's
    answer = agent.seal_service_response(b'{"a":2}', got.reply)
    assert agent.open_service_response(answer, sent.state) == b'{"a":2}'


def test_state_and_keys_do_not_pickle() -> None:
    service = agent.AddressKeys.generate(pq=False)
    queue = agent.SMPQueueInfo(
        4, agent.SMPServer(("smp.example.net",)), b"s",
        bytes.fromhex("302a300506032b656e032100") + bytes(32), "M",
    )
    sent = agent.seal_service_request(b"x", service.public, reply_queue=queue)
    got = agent.open_service_request(sent.message, service)
    for value in (service, sent.state, got.reply):
        with pytest.raises(TypeError):
            pickle.dumps(value)


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError):
        agent.nothing_here  # noqa: B018
    assert "seal_service_request" in dir(agent)

"""The bindings' data layer (issue 31, "The bindings share a layer below them").

``simplex_rpc._bindings`` holds the JSON-RPC shapes and size rules both
bindings share (``shared``) and each binding's messages (``mcp``, ``a2a``),
below the adapter. The adapter applies a binding's call policy without
knowing the binding: the A2A binding supplies "A request with a credential
MUST NOT be sent in a group" (protocol text, "A2A binding", Callers and
authorization) as a hook, looked up by protocol name.
"""

from __future__ import annotations

from typing import Any

import pytest

from simplex_rpc import Request, _bindings, a2a, mcp
from simplex_rpc._bindings import a2a as a2a_data
from simplex_rpc._bindings import mcp as mcp_data
from simplex_rpc._bindings import shared
from simplex_rpc.adapter import ServiceRequest

CARD: dict[str, Any] = {
    "securitySchemes": {
        "acme-key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Acme-Pass"}},
    }
}


def a2a_request(parameters: dict[str, str]) -> dict[str, Any]:
    return a2a.make_request("GetTask", {"id": "t"}, id=1, parameters=parameters)


def test_the_public_packages_re_export_the_binding_modules_names() -> None:
    """``simplex_rpc.mcp`` and ``simplex_rpc.a2a`` keep their public names: the data
    modules' ``__all__``, each name the same object."""
    for package, data in ((mcp, mcp_data), (a2a, a2a_data)):
        assert package.__all__ == list(data.__all__)
        for name in data.__all__:
            assert getattr(package, name) is getattr(data, name), name


def test_the_shared_names_are_the_packages_names() -> None:
    for name in shared.__all__:
        assert getattr(_bindings, name) is getattr(shared, name), name
    assert mcp.BindingError is a2a.BindingError is shared.BindingError


def test_each_binding_sizes_its_replies_with_the_shared_rule() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert mcp.chat_reply(response) == a2a.chat_reply(response) == shared.dumps_text(response, "")
    assert mcp.rpc_response(response) == a2a.rpc_response(response)
    with pytest.raises(shared.BindingError, match=r"^mcp chat reply"):
        mcp.chat_reply({"jsonrpc": "2.0"})
    with pytest.raises(shared.BindingError, match=r"^a2a rpc response"):
        a2a.rpc_response({"jsonrpc": "2.0"})


def test_a2a_supplies_the_call_policy_and_mcp_none() -> None:
    assert _bindings.call_policy(a2a.PROTOCOL) is a2a_data.call_policy
    assert _bindings.call_policy(mcp.PROTOCOL) is None
    assert _bindings.call_policy("other") is None


def test_the_a2a_policy_refuses_a_credential_in_a_group_only() -> None:
    """"A request with a credential MUST NOT be sent in a group"; a direct chat takes it."""
    policy = a2a_data.call_policy
    credential = a2a_request({"Authorization": "Bearer x"})
    assert policy(credential, group=False, agent_card=None) is None
    refusal = policy(credential, group=True, agent_card=None)
    assert refusal == (
        "a2a: a request with a credential MUST NOT be sent in a group"
        " (service parameters Authorization)"
    )
    assert "Bearer" not in refusal  # the value, a credential, is never repeated
    assert policy(a2a_request({"X-Trace": "1"}), group=True, agent_card=None) is None


def test_the_a2a_policy_reads_the_cards_schemes() -> None:
    """With the card, a scheme's parameter is a credential whatever its name, and a
    name that only looks like one is not."""
    policy = a2a_data.call_policy
    named = a2a_request({"X-Acme-Pass": "p"})
    assert policy(named, group=True, agent_card=None) is None
    assert "X-Acme-Pass" in (policy(named, group=True, agent_card=CARD) or "")
    looks = a2a_request({"Session-Hint": "s"})
    assert policy(looks, group=True, agent_card=None) is not None
    assert policy(looks, group=True, agent_card=CARD) is None


def test_the_a2a_policy_raises_for_a_malformed_request_in_a_group() -> None:
    bad = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", a2a.SERVICE_PARAMETERS_MEMBER: []}
    assert a2a_data.call_policy(bad, group=False, agent_card=None) is None
    with pytest.raises(shared.BindingError, match="a2a-service-parameters"):
        a2a_data.call_policy(bad, group=True, agent_card=None)
    with pytest.raises(shared.BindingError, match="securitySchemes"):
        a2a_data.call_policy(
            a2a_request({}), group=True, agent_card={"securitySchemes": ["not", "an object"]}
        )


def test_a_handler_takes_a_service_request_or_a_bare_request() -> None:
    """``envelope_of``, typed ``ServiceRequestLike``: the adapter's ServiceRequest
    (a ``CarriesRequest``) or a bare Request; anything else is a TypeError."""
    envelope = Request(protocol="mcp", request={"jsonrpc": "2.0"})
    assert shared.envelope_of(envelope) is envelope
    carried: shared.CarriesRequest = ServiceRequest(
        request_id="r", signer=None, request=envelope, user_id=1
    )
    assert shared.envelope_of(carried) is envelope
    with pytest.raises(TypeError, match="got dict"):
        shared.envelope_of({"request": envelope})  # type: ignore[arg-type]


def test_the_adapter_imports_no_binding_module_of_the_data_layer() -> None:
    """"The adapter knows no binding": it imports the shared data and the policy
    lookup (``simplex_rpc._bindings``), never ``_bindings.mcp`` or ``_bindings.a2a``.
    """
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("simplex_rpc", include_external_packages=False)
    per_binding = {"simplex_rpc._bindings.mcp", "simplex_rpc._bindings.a2a"}
    for module in sorted(m for m in graph.modules if m.startswith("simplex_rpc.adapter")):
        imported = graph.find_modules_directly_imported_by(module)
        assert not imported & per_binding, module


def test_both_client_transports_take_the_round_trips_options_alike() -> None:
    """One definition of the caller's options (issue 31): both SDK client transports
    take ``**options: Unpack[CallOptions]`` and hand them to the round trip."""
    import inspect
    import typing

    pytest.importorskip("mcp")
    pytest.importorskip("a2a")
    from simplex_rpc.a2a import SimplexA2aTransport
    from simplex_rpc.adapter import CallOptions
    from simplex_rpc.mcp import SimplexTransport

    assert set(CallOptions.__annotations__) == {"sign_key", "timeout", "max_retry_after", "member"}
    for transport in (SimplexTransport, SimplexA2aTransport):
        hints = typing.get_type_hints(transport.__init__)
        options = inspect.signature(transport.__init__).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert hints["options"] == typing.Unpack[CallOptions]

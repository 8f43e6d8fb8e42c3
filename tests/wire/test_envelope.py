"""Envelopes: wire.md section 3 and the protocol text's JTD schemas ("Request",
"Response", "Error codes", "Signed requests"), both ways, with negative cases.

Strict JSON (duplicates, depth, NaN, UTF-8, ...) has its own file,
``test_json.py``; here each envelope rule is pinned through ``parse`` and
``to_json``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from simplex_rpc import (
    UNSET,
    EnvelopeError,
    ErrorCode,
    ErrorInfo,
    PublicKey,
    Request,
    Response,
    SigningKey,
    SimplexRpcError,
    check_request_key,
)
from simplex_rpc._wire.envelope import check_protocol_name
from simplex_rpc.vectors._examples import (
    A2A_SEND_MESSAGE_REQUEST_TEXT,
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_CALL_RESPONSE_TEXT,
)

# The pure run of `make test` repeats this module (tests/project/test_backend_marker.py).
pytestmark = pytest.mark.backend

KEY = SigningKey.from_seed(bytes(range(32))).public_key
OTHER = SigningKey.from_seed(b"\x01" * 32).public_key


def _compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode()


def _retry_after(literal: str) -> str:
    return '{"error":{"code":"rate_limited","retryAfter":' + literal + "}}"


# -- the protocol text's examples ----------------------------------------------


@pytest.mark.parametrize(
    "text", [MCP_TOOLS_CALL_REQUEST_TEXT, A2A_SEND_MESSAGE_REQUEST_TEXT], ids=["mcp", "a2a"]
)
def test_rule_protocol_text_request_examples(text: str) -> None:
    """§3 Request: the protocol text's examples parse, and serialize compactly in order."""
    request = Request.parse(text)
    assert request.protocol == json.loads(text)["protocol"]
    assert request.request == json.loads(text)["request"]
    assert request.version is UNSET  # "The envelope's version is omitted."
    assert request.request_key is None
    assert request.extra == {}
    assert request.to_json() == _compact(text)
    assert Request.parse(request.to_json()) == request
    assert Request.parse(text.encode()) == request


def test_rule_protocol_text_response_example() -> None:
    """§3 Response: the protocol text's example parses and serializes."""
    response = Response.parse(MCP_TOOLS_CALL_RESPONSE_TEXT)
    assert response.ok
    assert response.error is None
    assert response.response["result"]["content"][0]["text"] == "12 anvils are in stock."
    assert response.to_json() == _compact(MCP_TOOLS_CALL_RESPONSE_TEXT)
    assert Response.parse(response.to_json()) == response


# -- Request ------------------------------------------------------------------


def test_rule_request_members_and_order_on_output() -> None:
    """§3 Request: protocol, request, optional version and requestKey; output in that order."""
    request = Request(protocol="mcp", request={"a": 1}, version="2026-07-28", request_key=KEY)
    out = request.to_json()
    assert out == (
        b'{"protocol":"mcp","request":{"a":1},"version":"2026-07-28","requestKey":"'
        + KEY.encode().encode()
        + b'"}'
    )
    assert Request.parse(out) == request


@pytest.mark.parametrize("value", [None, 0, "", [], {}, "text", 1.5, True])
def test_rule_request_member_is_any_json(value: Any) -> None:
    """§3 Request: request is any JSON value (the JTD empty schema), null included."""
    text = json.dumps({"protocol": "p", "request": value})
    request = Request.parse(text)
    assert request.request == value
    assert Request.parse(request.to_json()) == request


@pytest.mark.parametrize("value", [None, 1, "2026-07-28", [1, 0], {"major": 1}])
def test_rule_version_is_any_json_and_null_is_not_absent(value: Any) -> None:
    """§3 Request: version is any JSON ("its type is defined by the binding"); null != absent."""
    request = Request.parse(json.dumps({"protocol": "p", "request": 1, "version": value}))
    assert request.version == value
    assert request.version is not UNSET
    assert b'"version"' in request.to_json()
    assert Request.parse(request.to_json()) == request
    absent = Request.parse('{"protocol":"p","request":1}')
    assert absent.version is UNSET
    assert b"version" not in absent.to_json()
    assert absent != request


@pytest.mark.parametrize(
    "text",
    [
        '{"request":{}}',
        '{"protocol":"mcp"}',
        "{}",
    ],
)
def test_rule_request_required_members(text: str) -> None:
    """§3 Request: protocol and request are required; a missing one is named."""
    with pytest.raises(EnvelopeError, match=r"member '(protocol|request)' is missing") as info:
        Request.parse(text)
    assert info.value.code == "bad_request"


@pytest.mark.parametrize("text", ["[]", '"mcp"', "null", "1", "true"])
def test_rule_envelope_is_an_object(text: str) -> None:
    """§3: a request or response is a JSON object; any other value is bad_request."""
    for parse in (Request.parse, Response.parse):
        with pytest.raises(EnvelopeError, match=r"expected a JSON object") as info:
            parse(text)
        assert info.value.code == "bad_request"


def test_rule_unknown_request_members_survive() -> None:
    """§3: other members are allowed and kept: a parse/serialize round trip loses nothing."""
    text = (
        '{"x-trace":"abc","protocol":"mcp","future":{"nested":[1,2,{"k":null}]},'
        '"request":{},"z":1.5}'
    )
    request = Request.parse(text)
    assert request.extra == {"x-trace": "abc", "future": {"nested": [1, 2, {"k": None}]}, "z": 1.5}
    again = Request.parse(request.to_json())
    assert again == request
    assert json.loads(request.to_json()) == json.loads(text)
    # Output order: the known members first, then the unknown ones in their order.
    assert list(json.loads(request.to_json())) == ["protocol", "request", "x-trace", "future", "z"]


def test_rule_extra_cannot_shadow_a_known_member() -> None:
    """§3: extra holds unknown members only; a known name there is refused."""
    for name in ("protocol", "request", "version", "requestKey"):
        with pytest.raises(EnvelopeError, match=rf"extra member '{name}'"):
            Request(protocol="p", request=1, extra={name: 1})
    for name in ("response", "error"):
        with pytest.raises(EnvelopeError, match=rf"extra member '{name}'"):
            Response(response=1, extra={name: 1})
    for name in ("code", "message", "retryAfter"):
        with pytest.raises(EnvelopeError, match=rf"extra member '{name}'"):
            ErrorInfo(code="x", extra={name: 1})


# -- protocol names -------------------------------------------------------------


@pytest.mark.parametrize("name", ["mcp", "a2a", "x", "0", "my-protocol-2", "-", "a--b"])
def test_rule_protocol_name_accepted(name: str) -> None:
    """§3: protocol names are lowercase ASCII letters, digits and hyphens."""
    assert check_protocol_name(name) == name
    assert Request.parse(json.dumps({"protocol": name, "request": 1})).protocol == name
    assert Request(protocol=name, request=1).protocol == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "MCP",
        "Mcp",
        "mcp_x",
        "mcp.x",
        "mcp x",
        " mcp",
        "mcp ",
        "mcp\n",
        "mcp/1",
        "é",
        "\uff4dcp",
        "mcp\u0131",
        "mcp\x00",
        "K",
    ],
)
def test_rule_protocol_name_rejected(name: str) -> None:
    """§3: anything else (upper case, '_', '.', spaces, non-ASCII, empty) is bad_request."""
    with pytest.raises(EnvelopeError, match=r"not a protocol name") as info:
        Request.parse(json.dumps({"protocol": name, "request": 1}))
    assert info.value.code == "bad_request"
    with pytest.raises(EnvelopeError):
        Request(protocol=name, request=1)
    with pytest.raises(EnvelopeError):
        check_protocol_name(name)


@pytest.mark.parametrize("value", [None, 1, True, ["mcp"], {"name": "mcp"}])
def test_rule_protocol_must_be_a_string(value: Any) -> None:
    """§3 JTD: protocol has type string."""
    with pytest.raises(EnvelopeError, match=r"expected a string") as info:
        Request.parse(json.dumps({"protocol": value, "request": 1}))
    assert info.value.code == "bad_request"


# -- requestKey ---------------------------------------------------------------


def test_rule_request_key_padded_and_unpadded() -> None:
    """§1 + §3: requestKey in the signerKey encoding; padded and unpadded name one key."""
    padded = Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": KEY.encode()}))
    unpadded = Request.parse(
        json.dumps({"protocol": "p", "request": 1, "requestKey": KEY.encode().rstrip("=")})
    )
    assert padded.request_key == unpadded.request_key == KEY
    assert padded == unpadded
    assert json.loads(unpadded.to_json())["requestKey"] == KEY.encode()  # written padded


@pytest.mark.parametrize(
    "value",
    [
        "",
        "not a key",
        KEY.encode() + "\n",
        KEY.encode().replace("_", "/"),
        SigningKey.from_seed(bytes(32)).encode(),  # a private key text
    ],
)
def test_rule_bad_request_key_is_bad_request(value: str) -> None:
    """§3: a requestKey that is not a public key text makes the envelope invalid: bad_request."""
    with pytest.raises(EnvelopeError, match=r"requestKey") as info:
        Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": value}))
    assert info.value.code == "bad_request"


@pytest.mark.parametrize("value", [None, 1, [], {}])
def test_rule_request_key_must_be_a_string(value: Any) -> None:
    """§3 JTD: requestKey has type string."""
    with pytest.raises(EnvelopeError, match=r"requestKey: expected a string"):
        Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": value}))


def test_request_key_must_be_a_public_key_object() -> None:
    """Request(request_key=) takes a PublicKey, not its text."""
    with pytest.raises(TypeError):
        Request(protocol="p", request=1, request_key=KEY.encode())  # type: ignore[arg-type]


def test_rule_check_request_key() -> None:
    """Signed requests: bad_request when requestKey is present and unsigned, or differs (bytes)."""
    plain = Request(protocol="p", request=1)
    keyed = Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": KEY.encode()}))
    assert check_request_key(plain, None) is None
    assert check_request_key(plain, KEY) is None
    assert check_request_key(keyed, KEY) is None
    missing = check_request_key(keyed, None)
    assert missing is not None and missing.code == ErrorCode.BAD_REQUEST == "bad_request"
    assert missing.message and "unsigned" in missing.message
    assert missing.is_final()
    different = check_request_key(keyed, OTHER)
    assert different is not None and different.code == "bad_request"
    assert different.message and "differs" in different.message


def test_rule_check_request_key_compares_bytes_not_text() -> None:
    """§1: the same key as bytes though different text (unpadded) passes the check."""
    unpadded = KEY.encode().rstrip("=")
    keyed = Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": unpadded}))
    signer = PublicKey.decode(KEY.encode())  # as the core reports signerKey: padded
    assert unpadded != signer.encode()
    assert check_request_key(keyed, signer) is None
    assert check_request_key(keyed, PublicKey.from_raw(KEY.raw)) is None


def test_check_request_key_refuses_a_signer_that_is_not_a_public_key() -> None:
    """§1: keys are compared as bytes. The core's signerKey text (or raw bytes) passed as
    the signer is a TypeError, not a silent "requestKey differs" for the very same key."""
    keyed = Request.parse(json.dumps({"protocol": "p", "request": 1, "requestKey": KEY.encode()}))
    for signer in (KEY.encode(), KEY.raw, KEY.der):
        with pytest.raises(TypeError, match="signer"):
            check_request_key(keyed, signer)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="signer"):
            check_request_key(Request(protocol="p", request=1), signer)  # type: ignore[arg-type]


# -- Response -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{"other":1}',
        '{"response":1,"error":{"code":"internal"}}',
        '{"response":null,"error":{"code":"internal"}}',
    ],
)
def test_rule_response_exactly_one_of_response_and_error(text: str) -> None:
    """§3: a response has exactly one of response and error; neither or both is invalid."""
    with pytest.raises(EnvelopeError, match=r"exactly one is required") as info:
        Response.parse(text)
    assert info.value.code == "bad_request"


def test_rule_response_null_is_a_success() -> None:
    """§3: response is any JSON, null included; that is a success, not an absent member."""
    response = Response.parse('{"response":null}')
    assert response.ok and response.response is None and response.error is None
    assert response.to_json() == b'{"response":null}'
    assert Response.success(None).to_json() == b'{"response":null}'


def test_rule_response_value_may_not_coexist_with_error() -> None:
    """§3 exactly one: a value with a response and an error cannot be built either."""
    with pytest.raises(EnvelopeError, match=r"both"):
        Response(response={"x": 1}, error=ErrorInfo(code="internal"))
    with pytest.raises(TypeError):
        Response(error={"code": "internal"})  # type: ignore[arg-type]


def test_rule_error_member_shapes() -> None:
    """§3: error has code (string), optional message (string), optional retryAfter (uint32)."""
    response = Response.parse('{"error":{"code":"rate_limited","message":"slow","retryAfter":30}}')
    assert not response.ok
    assert response.response is None
    error = response.error
    assert error == ErrorInfo(code="rate_limited", message="slow", retry_after=30)
    assert error.known_code is ErrorCode.RATE_LIMITED
    assert response.to_json() == (
        b'{"error":{"code":"rate_limited","message":"slow","retryAfter":30}}'
    )
    minimal = Response.parse('{"error":{"code":"internal"}}')
    assert minimal.error == ErrorInfo(code="internal")
    assert minimal.to_json() == b'{"error":{"code":"internal"}}'


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"error":null}', "expected an object"),
        ('{"error":"internal"}', "expected an object"),
        ('{"error":[]}', "expected an object"),
        ('{"error":{}}', "member 'code' is missing"),
        ('{"error":{"message":"x"}}', "member 'code' is missing"),
        ('{"error":{"code":1}}', "code: expected a string"),
        ('{"error":{"code":null}}', "code: expected a string"),
        ('{"error":{"code":"x","message":1}}', "message: expected a string"),
        ('{"error":{"code":"x","message":null}}', "message: expected a string"),
    ],
)
def test_rule_error_member_types(text: str, what: str) -> None:
    """§3 JTD: the error's members have the schema's types; each violation is named."""
    with pytest.raises(EnvelopeError, match=what) as info:
        Response.parse(text)
    assert info.value.code == "bad_request"


@pytest.mark.parametrize(
    ("literal", "value"), [("0", 0), ("3", 3), ("3.0", 3), ("4294967295", 2**32 - 1), ("3e0", 3)]
)
def test_rule_retry_after_uint32_accepted(literal: str, value: int) -> None:
    """§3 JTD uint32: a JSON number with no fractional part in 0..2^32-1 (3.0 is 3)."""
    error = Response.parse(_retry_after(literal)).error
    assert error is not None
    assert error.retry_after == value
    assert type(error.retry_after) is int


@pytest.mark.parametrize(
    "literal", ["3.5", "-1", "4294967296", "true", "false", '"3"', "null", "[3]", "-0.5", "1e10"]
)
def test_rule_retry_after_uint32_rejected(literal: str) -> None:
    """§3 JTD uint32: fractions, negatives, 2^32 and above, booleans, strings are rejected."""
    with pytest.raises(EnvelopeError, match=r"retryAfter") as info:
        Response.parse(_retry_after(literal))
    assert info.value.code == "bad_request"
    assert "uint32" in str(info.value)


@pytest.mark.parametrize("value", [-1, 2**32, 3.5, True, "3"])
def test_rule_retry_after_uint32_on_construction(value: Any) -> None:
    """§3 uint32: the same rule when building an ErrorInfo or a failure."""
    with pytest.raises(EnvelopeError, match=r"retryAfter"):
        ErrorInfo(code="rate_limited", retry_after=value)
    with pytest.raises(EnvelopeError, match=r"retryAfter"):
        Response.failure(ErrorCode.RATE_LIMITED, retry_after=value)


def test_rule_unknown_error_members_survive() -> None:
    """§3: the error's other members are kept, as are the response's."""
    text = '{"error":{"code":"x-new","details":{"a":[1]},"message":"m"},"trace":"t"}'
    response = Response.parse(text)
    assert response.error is not None
    assert response.error.extra == {"details": {"a": [1]}}
    assert response.extra == {"trace": "t"}
    assert json.loads(response.to_json()) == json.loads(text)
    assert Response.parse(response.to_json()) == response
    success = Response.parse('{"meta":{"k":1},"response":[1]}')
    assert success.extra == {"meta": {"k": 1}}
    assert Response.parse(success.to_json()) == success


# -- error codes and is_final ----------------------------------------------------


def test_rule_error_code_enum_has_exactly_the_seven_codes() -> None:
    """§3 Error codes: exactly the seven of the protocol text."""
    assert {code.value for code in ErrorCode} == {
        "unsupported_protocol",
        "unsupported_version",
        "bad_request",
        "conversation_required",
        "too_large",
        "rate_limited",
        "internal",
    }
    assert len(ErrorCode) == 7
    assert ErrorCode("bad_request") is ErrorCode.BAD_REQUEST
    assert str(ErrorCode.TOO_LARGE) == "too_large"


@pytest.mark.parametrize("code", list(ErrorCode))
def test_rule_failure_writes_the_code_text(code: ErrorCode) -> None:
    """§3: Response.failure(code) writes the code's text; parsing it gives the known code."""
    response = Response.failure(code, "why")
    assert response.to_json() == b'{"error":{"code":"%s","message":"why"}}' % code.value.encode()
    parsed = Response.parse(response.to_json())
    assert parsed.error is not None and parsed.error.known_code is code
    assert parsed == Response.failure(code.value, "why")


def test_rule_unknown_code_is_final_unless_retry_after() -> None:
    """§3: a requester treats an unknown code as final, unless the error has retryAfter."""
    unknown = Response.parse('{"error":{"code":"brand_new"}}').error
    assert unknown is not None
    assert unknown.known_code is None
    assert unknown.is_final()
    retry = Response.parse('{"error":{"code":"brand_new","retryAfter":5}}').error
    assert retry is not None and not retry.is_final()
    zero = Response.parse('{"error":{"code":"brand_new","retryAfter":0}}').error
    assert zero is not None and not zero.is_final()  # retryAfter 0 is present: retry at once


@pytest.mark.parametrize("code", list(ErrorCode))
def test_rule_is_final_for_known_codes_follows_retry_after(code: ErrorCode) -> None:
    """§3 (this library's reading): retryAfter is what says a repeat can succeed, for every code."""
    assert ErrorInfo(code=code.value).is_final()
    assert not ErrorInfo(code=code.value, retry_after=10).is_final()


def test_error_info_validates_types() -> None:
    """ErrorInfo: code and message are strings."""
    with pytest.raises(EnvelopeError, match=r"code"):
        ErrorInfo(code=1)  # type: ignore[arg-type]
    with pytest.raises(EnvelopeError, match=r"message"):
        ErrorInfo(code="x", message=1)  # type: ignore[arg-type]


def test_envelope_errors_are_simplex_rpc_errors() -> None:
    """EnvelopeError is a SimplexRpcError and a ValueError, with .code bad_request by default."""
    with pytest.raises(EnvelopeError) as info:
        Request.parse("[]")
    assert isinstance(info.value, SimplexRpcError) and isinstance(info.value, ValueError)
    assert info.value.code == ErrorCode.BAD_REQUEST


def test_unserializable_values_are_envelope_errors() -> None:
    """to_json of a value JSON cannot hold is an EnvelopeError, not a TypeError from json."""
    with pytest.raises(EnvelopeError, match=r"cannot be serialized"):
        Request(protocol="p", request={1, 2}).to_json()
    with pytest.raises(EnvelopeError, match=r"cannot be serialized"):
        Response.success(float("nan")).to_json()
    with pytest.raises(EnvelopeError, match=r"cannot be serialized"):
        Response.success("\ud800").to_json()

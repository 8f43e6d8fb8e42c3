"""The ``envelopes`` vectors: Service RPC envelopes, strict JSON (wire.md section 3)."""

from __future__ import annotations

import json
from collections.abc import Callable

from .._wire.backend import Backend
from .._wire.envelope import Request, Response
from .._wire.keys import PublicKey
from ..errors import (
    EnvelopeError,
)
from ._common import Case, Document, _b64_text, _Checker, _document, _h
from ._examples import (
    A2A_SEND_MESSAGE_REQUEST_TEXT,
    MCP_TOOLS_CALL_REQUEST_TEXT,
    MCP_TOOLS_CALL_RESPONSE_TEXT,
    mcp_tools_call_request,
)
from ._keys import _find_key_with, _other_der


def _envelopes_document() -> Document:
    cases: list[Case] = []
    key = _find_key_with("-_").public_key
    key_text = key.encode()
    mcp = mcp_tools_call_request()["request"]
    mcp_json = json.dumps(mcp, separators=(",", ":"))

    def request(name: str, text: str, *, request_key: PublicKey | None = None) -> None:
        parsed = json.loads(text)
        case: Case = {
            "name": name,
            "envelope": "request",
            "json": text,
            "valid": True,
            "protocol": parsed["protocol"],
            "request_key_raw": None if request_key is None else request_key.raw.hex(),
        }
        cases.append(case)

    def response(name: str, text: str) -> None:
        parsed = json.loads(text)
        error = parsed.get("error")
        case: Case = {
            "name": name,
            "envelope": "response",
            "json": text,
            "valid": True,
            "ok": error is None,
            "error_code": None if error is None else error["code"],
            "retry_after": None if error is None else error.get("retryAfter"),
            "final": None if error is None else "retryAfter" not in error,
        }
        if isinstance(case["retry_after"], float):
            case["retry_after"] = int(case["retry_after"])
        cases.append(case)

    def invalid(name: str, envelope: str, text: str | bytes) -> None:
        case: Case = {"name": name, "envelope": envelope}
        if isinstance(text, bytes):
            case |= {"json": None, "json_hex": text.hex()}
        else:
            case["json"] = text
        case |= {"valid": False, "error": "EnvelopeError", "code": "bad_request"}
        cases.append(case)

    request("protocol text: MCP tools/call over Service RPC", MCP_TOOLS_CALL_REQUEST_TEXT)
    request("protocol text: A2A one-shot SendMessage", A2A_SEND_MESSAGE_REQUEST_TEXT)
    request(
        "MCP request with requestKey",
        f'{{"protocol":"mcp","request":{mcp_json},"requestKey":"{key_text}"}}',
        request_key=key,
    )
    request(
        "requestKey without padding names the same key",
        f'{{"protocol":"mcp","request":{mcp_json},"requestKey":"{key_text.rstrip("=")}"}}',
        request_key=key,
    )
    request("version as a string", '{"protocol":"x","version":"1.2","request":{}}')
    request("version as a number", '{"protocol":"x","version":2,"request":{}}')
    request("version null", '{"protocol":"x","version":null,"request":{}}')
    request("request null (any JSON value)", '{"protocol":"x","request":null}')
    request("request a string", '{"protocol":"x","request":"ping"}')
    request("members in another order", '{"request":[1,2],"protocol":"x"}')
    request(
        "unknown members are allowed and kept",
        '{"protocol":"x","request":{},"trace":{"id":"t-1"},"z":[true,false,null]}',
    )
    request("protocol name with digits and hyphens", '{"protocol":"a2a-v2-0","request":{}}')
    request("whitespace around the value", ' \n\t{"protocol":"x","request":{}}\r\n ')
    request("non-ASCII text", '{"protocol":"x","request":"\u017c\u00f3\u0142w \U0001f422"}')
    request("escaped surrogate pair", '{"protocol":"x","request":"\\ud83d\\udc22"}')
    depth_ok = "[" * 63 + "]" * 63
    request("nesting of 64 levels (the limit)", f'{{"protocol":"x","request":{depth_ok}}}')
    request("integer of 64 digits", '{"protocol":"x","request":' + "9" * 64 + "}")
    objects_ok = '{"a":' * 62 + "[]" + "}" * 62
    request("nesting of 64 levels of objects", f'{{"protocol":"x","request":{objects_ok}}}')
    request("negative integer of 64 digits", '{"protocol":"x","request":-' + "9" * 64 + "}")

    response("protocol text: MCP tools/call response", MCP_TOOLS_CALL_RESPONSE_TEXT)
    response("response null", '{"response":null}')
    response("response with unknown members", '{"response":1,"meta":{"a":1}}')
    response("error with a code only", '{"error":{"code":"unsupported_protocol"}}')
    response(
        "error with message and retryAfter",
        '{"error":{"code":"rate_limited","message":"slow down","retryAfter":30}}',
    )
    response("unknown code without retryAfter is final", '{"error":{"code":"teapot"}}')
    response(
        "unknown code with retryAfter is not final",
        '{"error":{"code":"teapot","retryAfter":5}}',
    )
    response("retryAfter 0", '{"error":{"code":"internal","retryAfter":0}}')
    response(
        "retryAfter 4294967295 (uint32 max)",
        '{"error":{"code":"internal","retryAfter":4294967295}}',
    )
    response("retryAfter 5.0 (zero fraction)", '{"error":{"code":"internal","retryAfter":5.0}}')
    response(
        "error with unknown members",
        '{"error":{"code":"too_large","detail":{"limit":10000}},"x":1}',
    )
    for code in (
        "unsupported_version",
        "bad_request",
        "conversation_required",
        "too_large",
    ):
        response(f"error code {code}", f'{{"error":{{"code":"{code}"}}}}')

    invalid(
        "duplicate member 'protocol'",
        "request",
        '{"protocol":"x","protocol":"y","request":{}}',
    )
    invalid(
        "duplicate member inside request",
        "request",
        '{"protocol":"x","request":{"id":1,"id":2}}',
    )
    invalid("duplicate member 'response'", "response", '{"response":1,"response":2}')
    depth_bad = "[" * 64 + "]" * 64
    invalid("nesting of 65 levels", "request", f'{{"protocol":"x","request":{depth_bad}}}')
    invalid("NaN", "request", '{"protocol":"x","request":NaN}')
    invalid("Infinity", "request", '{"protocol":"x","request":Infinity}')
    invalid("-Infinity", "response", '{"response":-Infinity}')
    invalid("number overflowing to infinity", "response", '{"response":1e400}')
    invalid("integer of 65 digits", "request", '{"protocol":"x","request":' + "9" * 65 + "}")
    invalid("lone high surrogate escape", "request", '{"protocol":"x","request":"\\ud800"}')
    invalid("lone low surrogate escape", "request", '{"protocol":"x","request":"\\udc00"}')
    invalid(
        "lone surrogate escape in a member name",
        "response",
        '{"response":{"\\ud800":1}}',
    )
    invalid("invalid UTF-8 byte 0xff", "request", b'{"protocol":"x","request":"\xff"}')
    invalid("overlong UTF-8 encoding", "request", b'{"protocol":"x","request":"\xc0\xaf"}')
    invalid(
        "UTF-8-encoded surrogate (CESU-8)",
        "request",
        b'{"protocol":"x","request":"\xed\xa0\x80"}',
    )
    invalid("truncated UTF-8 sequence", "response", b'{"response":"\xe2\x82"}')
    invalid("UTF-16 text", "request", '{"protocol":"x","request":1}'.encode("utf-16-le"))
    invalid("byte-order mark", "request", b'\xef\xbb\xbf{"protocol":"x","request":{}}')
    invalid(
        "duplicate member name after unescaping",
        "request",
        '{"protocol":"x","request":{"a":1,"\\u0061":2}}',
    )
    invalid(
        "lone high surrogate escape before an escaped letter",
        "request",
        '{"protocol":"x","request":"\\ud800\\u0041"}',
    )
    invalid("raw control character in a string", "request", '{"protocol":"x","request":"a\x01b"}')
    invalid("number with a leading zero", "request", '{"protocol":"x","request":01}')
    invalid("number '1.' without fraction digits", "request", '{"protocol":"x","request":1.}')
    invalid("a lone minus sign", "response", '{"response":-}')
    invalid("byte-order mark before a response", "response", b'\xef\xbb\xbf{"response":1}')
    objects_bad = '{"a":' * 63 + "[]" + "}" * 63
    invalid(
        "nesting of 65 levels of objects", "request", f'{{"protocol":"x","request":{objects_bad}}}'
    )
    invalid(
        "negative integer of 65 digits", "request", '{"protocol":"x","request":-' + "9" * 65 + "}"
    )
    invalid("empty input", "request", "")
    invalid("not JSON", "request", "protocol=mcp")
    invalid("trailing data", "request", '{"protocol":"x","request":{}}{}')
    invalid("trailing comma", "request", '{"protocol":"x","request":{},}')
    invalid("single quotes", "request", "{'protocol':'x','request':{}}")
    invalid("an array, not an object", "request", '[{"protocol":"x","request":{}}]')
    invalid("a string, not an object", "response", '"ok"')
    invalid("null, not an object", "response", "null")
    invalid("missing protocol", "request", '{"request":{}}')
    invalid("missing request", "request", '{"protocol":"x"}')
    invalid("protocol not a string", "request", '{"protocol":1,"request":{}}')
    invalid("protocol null", "request", '{"protocol":null,"request":{}}')
    invalid("protocol name empty", "request", '{"protocol":"","request":{}}')
    invalid("protocol name uppercase", "request", '{"protocol":"MCP","request":{}}')
    invalid("protocol name with underscore", "request", '{"protocol":"my_proto","request":{}}')
    invalid("protocol name with a dot", "request", '{"protocol":"a.b","request":{}}')
    invalid("protocol name with a space", "request", '{"protocol":"mcp ","request":{}}')
    invalid("protocol name non-ASCII", "request", '{"protocol":"\u043ccp","request":{}}')
    invalid("requestKey not a string", "request", '{"protocol":"x","request":{},"requestKey":1}')
    invalid("requestKey null", "request", '{"protocol":"x","request":{},"requestKey":null}')
    invalid(
        "requestKey with '+' (standard base64)",
        "request",
        '{"protocol":"x","request":{},"requestKey":"'
        + key_text.replace("-", "+").replace("_", "/")
        + '"}',
    )
    invalid(
        "requestKey is a raw 32-byte key",
        "request",
        '{"protocol":"x","request":{},"requestKey":"' + _b64_text(key.raw) + '"}',
    )
    x25519 = _other_der()["x25519"]
    invalid(
        "requestKey is an X25519 key",
        "request",
        '{"protocol":"x","request":{},"requestKey":"' + _b64_text(x25519) + '"}',
    )
    invalid("requestKey empty", "request", '{"protocol":"x","request":{},"requestKey":""}')
    invalid("both response and error", "response", '{"response":1,"error":{"code":"internal"}}')
    invalid("both, with response null", "response", '{"response":null,"error":{"code":"internal"}}')
    invalid("neither response nor error", "response", "{}")
    invalid("neither, with unknown members", "response", '{"result":1}')
    invalid("error not an object", "response", '{"error":"internal"}')
    invalid("error null", "response", '{"error":null}')
    invalid("error without code", "response", '{"error":{"message":"x"}}')
    invalid("error code not a string", "response", '{"error":{"code":500}}')
    invalid("error message not a string", "response", '{"error":{"code":"internal","message":1}}')
    for bad_retry in ("-1", "4294967296", "1.5", '"10"', "true", "null", "1e10"):
        invalid(
            f"retryAfter {bad_retry}",
            "response",
            '{"error":{"code":"rate_limited","retryAfter":' + bad_retry + "}}",
        )
    return _document("envelopes", cases)


def _verify_envelope(c: _Checker, case: Case, impls: list[Backend]) -> None:
    envelope = case["envelope"]
    if case["json"] is None:
        data = _h(case, "json_hex")
    else:
        data = case["json"].encode("utf-8")
    parser: Callable[[bytes], Request | Response]
    if envelope == "request":
        parser = Request.parse
    elif envelope == "response":
        parser = Response.parse
    else:
        raise ValueError(f"envelope {envelope!r}")
    if case["valid"] is False:
        try:
            parser(data)
        except EnvelopeError as exc:
            c.expect(case, type(exc).__name__ == case["error"], f"raised {type(exc).__name__}")
            c.expect(case, exc.code == case["code"], f"error code {exc.code!r}")
        except Exception as exc:
            c.fail(case, f"raised {type(exc).__name__}: {exc}")
        else:
            c.fail(case, f"parsed where {case['error']} is expected")
        return
    if case["valid"] is not True:
        raise ValueError("'valid' is not a boolean")

    def parse_ok() -> None:
        value = parser(data)
        again = parser(value.to_json())
        c.expect(case, again == value, "does not survive a parse/serialize round trip")
        if isinstance(value, Request):
            c.expect(case, value.protocol == case["protocol"], "protocol differs")
            raw = None if value.request_key is None else value.request_key.raw.hex()
            c.expect(case, raw == case["request_key_raw"], "requestKey differs")
        else:
            assert isinstance(value, Response)
            c.expect(case, value.ok == case["ok"], "ok differs")
            err = value.error
            c.expect(case, (err and err.code) == case["error_code"], "error code differs")
            c.expect(case, (err and err.retry_after) == case["retry_after"], "retryAfter differs")
            c.expect(case, (err and err.is_final()) == case["final"], "final differs")

    c.run(case, parse_ok)

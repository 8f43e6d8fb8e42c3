"""serve()'s default response cap and service parameter values (issue 20, item 9).

The protocol text, "Service RPC transport", Requirements: "A request and a
response SHOULD NOT exceed 10,000 bytes of JSON." ``serve()`` answers a
response over 10,000 bytes with ``too_large`` by default, as the bridges do;
``max_response_bytes`` up to the block's ``MAX_RESPONSE`` allows more,
explicitly.

The A2A binding, Service parameters: "Several values of one parameter are
joined by commas in one string, as in an HTTP header." An HTTP field value has
no leading or trailing optional whitespace (RFC 9110, section 5.5), so the
value of a service parameter is read without it: ``A2A-Version: " 1.0"`` is
version 1.0.
"""

from __future__ import annotations

from typing import Any

import pytest

import simplex_rpc as sx
from _support import pair
from simplex_rpc import Request, Response, a2a
from simplex_rpc.adapter import ServiceRequest

pytestmark = pytest.mark.conformance


def sized(request: ServiceRequest) -> str:
    """A response envelope of exactly ``request.request.request`` bytes of JSON."""
    size = request.request.request
    base = len(Response.success("").to_json())
    return "x" * (size - base)


async def ask(p: Any, size: int) -> Response:
    response: Response = await p.alice.service_request(
        1, p.link, Request(protocol="mcp", request=size), timeout=5
    )
    return response


@pytest.mark.anyio
async def test_serve_answers_above_10000_bytes_too_large_by_default() -> None:
    """ "A request and a response SHOULD NOT exceed 10,000 bytes of JSON": by default a
    response of 10,001 bytes is answered too_large; one of 10,000 is sent."""

    async with pair(sized) as p:
        assert (await ask(p, 10_000)).ok
        too_big = await ask(p, 10_001)
        assert too_big.error is not None and too_big.error.code == "too_large"


@pytest.mark.anyio
async def test_serve_allows_up_to_the_block_limit_when_asked() -> None:
    """The explicit option: max_response_bytes=MAX_RESPONSE sends up to the padded
    block's limit (11,101 bytes), and too_large above it."""

    async with pair(sized, max_response_bytes=sx.MAX_RESPONSE) as p:
        assert (await ask(p, sx.MAX_RESPONSE)).ok
        over = await ask(p, sx.MAX_RESPONSE + 1)
        assert over.error is not None and over.error.code == "too_large"


@pytest.mark.parametrize("value", [" 1.0", "1.0 ", "\t1.0\t", "  1.0  "])
def test_optional_whitespace_around_a_parameter_value_is_not_part_of_it(value: str) -> None:
    """As an HTTP header value: A2A-Version " 1.0" is version 1.0, served."""
    request = a2a.make_request("GetTask", {"id": "t"}, id=1)
    request[a2a.SERVICE_PARAMETERS_MEMBER] = {"A2A-Version": value, "X-List": f"{value},b "}
    parameters = a2a.service_parameters(request)
    assert parameters["a2a-version"] == "1.0"
    assert parameters.split("X-List") == ["1.0", "b"]
    assert parameters.headers()[0] == ("A2A-Version", "1.0")
    assert a2a.check_request(request) is None

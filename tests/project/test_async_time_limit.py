"""Every async test runs under a time limit (tests/conftest.py): a hang fails, it never
stalls the run (issue 31: anyio's pytest plugin in place of ``run(main, limit=60)``)."""

from __future__ import annotations

import anyio
import pytest

from conftest import ASYNC_TEST_LIMIT, _limited


@pytest.mark.anyio
async def test_an_async_test_over_its_limit_fails_with_timeout_error() -> None:
    async def hangs() -> None:
        await anyio.sleep(30)  # the behaviour under test: a test that never ends

    with pytest.raises(TimeoutError):
        await _limited(hangs, 0.05)()


@pytest.mark.anyio
async def test_the_limit_passes_the_tests_fixtures_through(tmp_path: object) -> None:
    seen: list[object] = []

    async def takes_a_fixture(tmp_path: object) -> None:
        seen.append(tmp_path)

    await _limited(takes_a_fixture, ASYNC_TEST_LIMIT)(tmp_path=tmp_path)
    assert seen == [tmp_path]


def test_every_collected_async_test_is_wrapped(request: pytest.FixtureRequest) -> None:
    async_tests = [
        item
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.get_closest_marker("anyio") is not None
    ]
    assert async_tests, "this module's own async tests are collected"
    assert all(getattr(item.obj, "__wrapped__", None) is not None for item in async_tests)

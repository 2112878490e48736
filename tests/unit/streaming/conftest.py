"""Fixtures of the streaming unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming import executor_cache


@pytest.fixture
def empty_cache() -> Iterator[None]:
    """The executor cache empty before and after the test."""
    executor_cache.clear()
    yield
    executor_cache.clear()

"""``sort_distinct`` sorts runs of distinct keys as ``sorted`` does, by each of its three ways
(insertion, bitmap, ``np.sort``), and leaves its bitmap zeroed."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.keysort import FEW, bitmap_for, sort_distinct


def _check(values: list[int], limit: int, pad: int = 3) -> None:
    a = np.array([-7] * pad + values + [-9] * pad, np.int32)
    bits = bitmap_for(limit)
    sort_distinct(a, pad, pad + len(values), bits)
    assert a[pad:pad + len(values)].tolist() == sorted(values)
    assert a[:pad].tolist() == [-7] * pad and a[pad + len(values):].tolist() == [-9] * pad  # only the run moved
    assert not bits.any()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("n", "limit"), [(0, 10), (1, 10), (FEW, 1000), (FEW + 1, 64), (40, 1000),
                                          (40, 100_000), (500, 1000), (64, 64), (200, 1 << 20)])
def test_runs_of_every_size_and_span(seed, n, limit):
    rng = random.Random(seed)
    _check(rng.sample(range(limit), min(n, limit)), limit)


def test_a_dense_run_from_zero_and_one_at_the_top():
    _check(list(range(127, -1, -1)), 128)
    _check([1023, *range(20)], 1024)  # spans 16 words for 21 values: the bitmap


@settings(max_examples=200, deadline=None)
@given(data=st.data(), limit=st.integers(1, 5000))
def test_matches_sorted(data, limit):
    values = data.draw(st.lists(st.integers(0, limit - 1), unique=True, max_size=min(limit, 300)))
    _check(values, limit)

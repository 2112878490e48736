"""``keysort.sort_unique`` (how the counting kernel drops an event's repeated keys and sorts them)
gives ``sorted(set(values))`` by both of its ways (bitmap read word by word, or the values kept
in order and sorted), moves nothing outside the run, and leaves its bitmap zeroed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.keysort import bitmap_for, sort_unique


def _check(values: list[int], limit: int, pad: int = 2) -> None:
    a = np.array([-7] * pad + values + [-9] * pad, np.int32)
    bits = bitmap_for(limit)
    end = sort_unique(a, pad, pad + len(values), bits)
    want = sorted(set(values))
    assert end == pad + len(want)
    assert a[pad:end].tolist() == want
    assert a[:pad].tolist() == [-7] * pad and a[pad + len(values):].tolist() == [-9] * pad
    assert not bits.any()


def test_empty_one_and_repeats():
    _check([], 10)
    _check([5], 10)
    _check([3, 3, 3], 10)
    _check([999_999, 0, 999_999, 0], 1_000_000)  # two words apart: sorted, not read word by word
    _check(list(range(200, -1, -1)) * 2, 256)  # dense: the bitmap


@settings(max_examples=300, deadline=None)
@given(data=st.data(), limit=st.sampled_from([1, 2, 63, 64, 65, 1000, 100_000, 1 << 22]))
def test_matches_sorted_set(data, limit):
    values = data.draw(st.lists(st.integers(0, limit - 1), max_size=300))
    if values and data.draw(st.booleans()):  # repeats of drawn values, as keys of several conjunctions give
        values += data.draw(st.lists(st.sampled_from(values), max_size=50))
    _check(values, limit)

"""bitmark's counting sort of slots by key (:func:`matchers.bitmark.sorts.key_order`) against
numpy's stable argsort and bincount: repeated keys, keys at the ends of their domain, unused
keys, empty and single inputs (the radix sort's tests are in ``test_build.py``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.bitmark import sorts as SO


def _check_key_order(key: np.ndarray, capacity: int) -> None:
    off, by_key = SO.key_order(key, capacity)
    want_off = np.zeros(capacity + 1, dtype=np.int64)
    np.cumsum(np.bincount(key, minlength=capacity), out=want_off[1:])
    assert np.array_equal(off, want_off) and np.array_equal(by_key, np.argsort(key, kind="stable"))


def test_key_order_fixed_cases():
    _check_key_order(np.zeros(0, dtype=np.int32), 0)
    _check_key_order(np.zeros(0, dtype=np.int32), 3)
    _check_key_order(np.array([0], dtype=np.int32), 1)
    _check_key_order(np.array([4, 0, 4, 2, 0, 4], dtype=np.int32), 6)  # key 5 and 1, 3 unused
    rng = np.random.default_rng(9)
    _check_key_order(rng.permutation(100_000).astype(np.int32), 100_000)  # a narrow order's distinct keys
    _check_key_order(np.arange(100_000, dtype=np.int32), 100_001)  # the wide order's, sorted


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), capacity=st.integers(1, 5000))
def test_key_order_is_a_counting_sort(seed, n, capacity):
    rng = np.random.default_rng(seed)
    key = rng.integers(0, capacity, n).astype(np.int32)
    if n:
        key[rng.integers(0, n)] = capacity - 1  # a key at the top
    _check_key_order(key, capacity)

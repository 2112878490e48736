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


def _cells_reference(key, lo, col, col_min, col_span, left):
    """The numpy expression :func:`~matchers.bitmark.sorts.cell_keys` replaced (finite shares)."""
    ok = (col >= 0) & (col < len(col_min))
    c = np.where(ok, col, 0)
    share = np.clip(np.where(ok, (lo - col_min[c]) / col_span[c], 0.0), 0.0, 1.0)
    cell = np.minimum(np.floor(share * float(1 << left)), float((1 << left) - 1)).astype(np.uint64)
    return (key << np.uint64(left)) | cell


def test_cell_keys_fixed_cases():
    col_min, col_span = np.array([0.0, -5.0, 1e6]), np.array([1.0, 10.0, 3e5])
    lo = np.array([0.0, 1.0, 0.5, -5.0, 5.0, 7.0, 1e6, 1.3e6, 2e6, -np.inf, np.inf, 0.25, np.nan])
    col = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 2, -1, 0])  # the bounds, inside, beyond, no column
    key = np.arange(len(lo), dtype=np.uint64)
    for left in (0, 1, 20, 40):
        got = SO.cell_keys(key, lo, col, col_min, col_span, left)
        finite = np.isfinite(lo)
        assert np.array_equal(got[finite], _cells_reference(key, lo, col, col_min, col_span, left)[finite])
        top = np.uint64((1 << left) - 1)
        cells = got & top
        assert cells[9] == 0 and cells[10] == top and cells[11] == 0 and cells[12] == 0  # -inf, +inf, none, NaN
        assert np.array_equal(got >> np.uint64(left), key)
    assert len(SO.cell_keys(key[:0], lo[:0], col[:0], col_min, col_span, 40)) == 0


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 2000), n_cols=st.integers(1, 30), left=st.integers(0, 40))
def test_cell_keys_match_the_numpy_expression(seed, n, n_cols, left):
    rng = np.random.default_rng(seed)
    col_min = rng.integers(-1000, 1000, n_cols).astype(float)
    col_span = rng.integers(1, 10**6, n_cols).astype(float)
    col = rng.integers(-1, n_cols + 1, n)  # -1 and n_cols: no column (a slot with fewer intervals)
    c = np.clip(col, 0, n_cols - 1)
    lo = col_min[c] + col_span[c] * rng.choice([-0.5, 0.0, 1.0, 1.5, *rng.random(5)], n)
    key = rng.integers(0, 1 << (64 - left), n, dtype=np.uint64) if left < 64 else np.zeros(n, np.uint64)
    assert np.array_equal(SO.cell_keys(key, lo, col, col_min, col_span, left),
                          _cells_reference(key, lo, col, col_min, col_span, left))

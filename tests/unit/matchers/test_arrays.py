"""The array helpers: growing (grown in Python, enlarged in a kernel), reusing freed rows and the kernels'
binary searches."""

import numba
import numpy as np

from matchers.arrays import enlarged, grown, lower_bound, lower_bound2, new_row, stored


def test_grown_keeps_an_array_that_fits_and_doubles_one_that_does_not():
    a = np.arange(100, dtype=np.int32)
    assert grown(a, 100) is a
    b = grown(a, 101, fill=-1)
    assert b.dtype == np.int32 and len(b) == 200
    assert (b[:100] == a).all() and (b[100:] == -1).all()
    assert len(grown(np.zeros(0, np.int8), 1)) == 64  # at least 64 rows
    assert len(grown(a, 1000)) == 1000  # at least what was asked


def test_grown_grows_rows_of_a_matrix():
    m = np.ones((3, 4), dtype=np.float64)
    g = grown(m, 5, fill=0.5)
    assert g.shape == (64, 4) and (g[:3] == 1).all() and (g[3:] == 0.5).all()


@numba.njit(cache=False)
def _append_all(n):
    out = np.empty(1, dtype=np.int64)
    for i in range(n):
        if i == len(out):
            out = enlarged(out, i, i + 1)
        out[i] = i
    return out


def test_enlarged_keeps_the_prefix_inside_a_kernel():
    out = _append_all(1000)
    assert len(out) >= 1000 and (out[:1000] == np.arange(1000)).all()
    a = np.arange(10, dtype=np.int32)
    b = enlarged(a, 4, 3)
    assert b.dtype == np.int32 and len(b) == 20 and (b[:4] == a[:4]).all()


def test_lower_bound_finds_the_first_key_not_less_than_the_given():
    keys = np.array([1, 3, 3, 5, 9], dtype=np.int64)
    for key in range(11):
        for lo, hi in ((0, 5), (1, 4), (2, 2)):
            assert lower_bound(keys, lo, hi, key) == lo + np.searchsorted(keys[lo:hi], key)
    major = np.array([1, 1, 2, 2, 2, 4], dtype=np.int64)
    minor = np.array([0.5, 2.0, 1.0, 1.0, 3.0, 0.0])
    pairs = list(zip(major.tolist(), minor.tolist(), strict=True))
    for key, sub in ((0, 0.0), (1, 1.0), (2, 1.0), (2, 2.0), (3, 0.0), (4, 0.0), (4, 1.0)):
        want = next((i for i, p in enumerate(pairs) if p >= (key, sub)), len(pairs))
        assert lower_bound2(major, minor, 0, len(pairs), key, sub) == want


def test_freed_rows_are_reused_last_freed_first():
    assert new_row([], 5) == (5, 6)
    free = [1, 3]
    assert new_row(free, 5) == (3, 5) and free == [1]
    items = ["a", None, "c", None]
    assert stored(items, [1, 3], "d") == 3 and items == ["a", None, "c", "d"]
    assert stored(items, [], "e") == 4 and items[4] == "e"

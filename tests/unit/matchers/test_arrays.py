"""The one array-growing helper: Python (grown) and in a kernel (enlarged)."""

import numba
import numpy as np

from matchers.arrays import enlarged, grown


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

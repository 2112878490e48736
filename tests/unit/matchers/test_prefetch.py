"""The prefetch hint compiles for every array type and changes no result."""

import numba
import numpy as np
import pytest

from matchers.prefetch import prefetch


@numba.njit(cache=True)
def _sum_with_hints(a, ahead):
    total = a[0] * 0
    for i in range(len(a)):
        prefetch(a, i + ahead)  # past the end too: a hint never faults
        total += a[i]
    return total


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_hints_change_nothing(dtype):
    a = np.arange(1000).astype(dtype)
    for ahead in (0, 8, 64, 4096):
        assert _sum_with_hints(a, ahead) == a.sum(dtype=a.dtype)


def test_only_one_dimensional_arrays():
    @numba.njit
    def hint(a):
        prefetch(a, 0)

    with pytest.raises(numba.TypingError):
        hint(np.zeros((2, 2)))

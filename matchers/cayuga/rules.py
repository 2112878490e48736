"""Rules of the step that both instance stores apply: written once here, called as they
are by the Python store (:mod:`.pystore`) and compiled into the flat store's kernels
(:mod:`.flat_kernels`, through ``numba.njit``).

Plain functions of numbers only (no imports), so that numba compiles them unchanged.
"""

from __future__ import annotations

OPS = ("=", "!=", "<", "<=", ">", ">=")  # comparison operators by their index, the ``op`` below


def compare(op: int, x, k) -> bool:
    """``x OPS[op] k`` (a NaN on either side holds only for ``!=``, as in Python)."""
    if op == 3:
        return x <= k
    if op == 0:
        return x == k
    if op == 1:
        return x != k
    if op == 2:
        return x < k
    if op == 4:
        return x > k
    return x >= k


"""Brute-force stabbing queries: the reference the interval indexes are tested against."""

from __future__ import annotations


def stab_cells(intervals: dict[int, tuple[int, int]], cell: int) -> list[int]:
    """Sorted ids of the closed integer intervals ``id: (x, y)`` containing ``cell``."""
    return sorted(i for i, (x, y) in intervals.items() if x <= cell <= y)


def stab_values(intervals: dict[int, tuple[float, float, bool, bool]], v: float) -> list[int]:
    """Sorted ids of the real intervals ``id: (lo, hi, lo_closed, hi_closed)`` containing ``v``."""
    return sorted(i for i, (lo, hi, lc, hc) in intervals.items()
                  if (v > lo or (lc and v == lo)) and (v < hi or (hc and v == hi)))

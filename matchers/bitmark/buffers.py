"""bitmark's buffers kept from one match for the next (their pages are mapped: on this machine a
first touch of tens of MB cost up to 0.36 ms per event of system time under load, at n = 1,000,000,
width 0.7).  Each is taken out of its list (``list.pop`` is atomic), so concurrent matches never
share one."""

from __future__ import annotations

import sys

import numpy as np


def position_type(tile: int) -> type:
    """The type of a slot's position in a tile of ``tile`` words (the wide mode's matches)."""
    return np.uint16 if 64 * tile <= 1 << 16 else np.int32


def positions(kept: list[np.ndarray], size: int, dtype: type) -> np.ndarray:
    """The wide mode's buffer of a chunk's matching positions (:func:`~matchers.bitmark.wide.match_wide`,
    which grows it when short): the last match's (from ``kept``) when it holds the ``size``
    expected and is of ``dtype``, else a new one with a quarter more room (numpy's: huge pages)."""
    try:
        buf = kept.pop()
    except IndexError:
        buf = np.zeros(0, dtype=dtype)
    return buf if len(buf) >= size and buf.dtype == dtype else np.empty(max(size + (size >> 2), 1 << 16), dtype=dtype)


def output(kept: list[np.ndarray], size: int) -> np.ndarray:
    """An ``int32`` array of at least ``size`` for a chunk's keys: one of the last match's outputs
    (``kept``) when nothing else refers to it any more (its caller dropped the matches and every
    view of them: the same reference count as a new array's), else a new one (numpy's: huge
    pages) with an eighth more room.  A new one costs its first touch, 56 MB per 500 events at
    n = 1,000,000, width 0.7."""
    while kept:
        try:
            out = kept.pop()
        except IndexError:
            break
        fresh = np.empty(0, dtype=np.int32)
        if len(out) >= size and sys.getrefcount(out) == sys.getrefcount(fresh):
            return out
    return np.empty(size + (size >> 3) + 64, dtype=np.int32)

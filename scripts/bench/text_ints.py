"""A numba kernel reading whitespace-separated decimal integers (the dense benchmark's peer
files, :mod:`scripts.bench.dense`) at memory speed, where ``np.fromfile(sep=" ")`` took 6.3 s of
CPU for 173 MB (1,000,000 subscriptions)."""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

MAX_DIGITS = 18
"""Most digits of a number (any int64 of up to 18 digits; longer ones are refused)."""


@numba.njit(cache=True, nogil=True, inline="always")
def _space(c):
    return c == 32 or 9 <= c <= 13


@numba.njit(cache=True, nogil=True)
def parse_ints(buf):
    """The integers of ``buf`` (uint8: optional ``-``, 1 to ``MAX_DIGITS`` digits, separated by
    whitespace), and the position of the first byte that breaks that form (``-1`` when none)."""
    count = 0
    for i in range(len(buf)):  # a number ends where a digit is followed by a non-digit or the end
        if 48 <= buf[i] <= 57 and (i + 1 == len(buf) or not 48 <= buf[i + 1] <= 57):
            count += 1
    out = np.empty(count, dtype=np.int64)
    n = 0
    i = 0
    while i < len(buf):
        if _space(buf[i]):
            i += 1
            continue
        neg = buf[i] == 45
        i += neg
        start = i
        v = 0
        while i < len(buf) and 48 <= buf[i] <= 57 and i - start < MAX_DIGITS:
            v = v * 10 + (buf[i] - 48)
            i += 1
        if i == start or (i < len(buf) and not _space(buf[i])):
            return out[:n], i
        out[n] = -v if neg else v
        n += 1
    return out[:n], -1


def read_ints(path: Path) -> np.ndarray:
    """The integers of the text file at ``path`` (see :func:`parse_ints`); ``ValueError`` at a byte
    that is not part of one."""
    values, bad = parse_ints(np.fromfile(path, dtype=np.uint8))
    if bad >= 0:
        raise ValueError(f"{path}: not a whitespace-separated integer at byte {bad}")
    return values

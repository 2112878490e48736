"""What the JSON scan (:mod:`matchers.scan`) takes and gives: NamedTuples of arrays and
ints, passed whole into its numba kernels.  Numpy only (no numba at import)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

ARRAY_ROWS = 1_000
"""Default bound on the rows of one event with arrays (``limits.array_rows`` of the service)."""
NO_BOUND = 1 << 62
"""A limit that bounds nothing."""


class ScanTable(NamedTuple):
    """Open-addressing table of attribute names (tag ``-1``) and of each attribute's strings
    (tag = attribute id), keyed by their bytes ``blob[starts[s]:starts[s] + lengths[s]]``."""

    hashes: np.ndarray  # uint64[size], FNV-1a of the bytes
    tags: np.ndarray  # int64[size]
    starts: np.ndarray  # int64[size]
    lengths: np.ndarray  # int64[size], -1: empty slot
    values: np.ndarray  # int32[size], attribute id or string code
    blob: np.ndarray  # uint8

    @classmethod
    def empty(cls, size: int, blob: np.ndarray) -> ScanTable:
        """A table of ``size`` (a power of two) empty slots over ``blob``."""
        return cls(np.zeros(size, np.uint64), np.zeros(size, np.int64), np.zeros(size, np.int64),
                   np.full(size, -1, np.int64), np.zeros(size, np.int32), blob)


class ScanLimits(NamedTuple):
    """What the scan takes on its fast path (an event past one goes the general way);
    build it by name, e.g. from ``streaming.config.LimitsSettings.scan()``."""

    depth: int = 1023
    attributes: int = NO_BOUND
    string_length: int = NO_BOUND  # further bounded by the longest event of the batch
    array_rows: int = ARRAY_ROWS
    event_bytes: int = NO_BOUND


NO_LIMITS = ScanLimits()
"""The command line's: only the array rows are bounded."""


class ScanOut(NamedTuple):
    """What the scan gives for a batch of events.

    Attributes
    ----------
    status : int8[n], per event OK (0) or SLOW (1).
    row_event : int64[rows], the event of each row.
    offsets, attrs, kinds, nums, codes, texts : the rows' entries, sorted by attribute, as
        in :class:`matchers.events.EventBatch`.
    text_spans : int64[strings, 2], the span in the buffer of each distinct string.
    key_spans : int64[n, 4], per event the spans (relative to its start) of the top-level
        values of the two keys asked for (``-1`` when absent).
    """

    status: np.ndarray
    row_event: np.ndarray
    offsets: np.ndarray
    attrs: np.ndarray
    kinds: np.ndarray
    nums: np.ndarray
    codes: np.ndarray
    texts: np.ndarray
    text_spans: np.ndarray
    key_spans: np.ndarray

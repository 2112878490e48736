"""Array layouts the bit-marking kernels (:mod:`matchers.bitmark.kernels`) take. Numpy only."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Slots(NamedTuple):
    """Conjunctions by slot, as CSR: intervals on value columns and residual predicate ids."""

    key: np.ndarray  # int32[S], subscription key, -1 for a deleted slot
    iv_off: np.ndarray  # int64[S + 1]
    iv_col: np.ndarray  # int32[nnz], value column of each interval
    iv_lo: np.ndarray  # float64[nnz]
    iv_hi: np.ndarray  # float64[nnz]
    res_off: np.ndarray  # int64[S + 1]
    res_pid: np.ndarray  # int32[nr], phase-1 ids of the slot's other predicates


class Layout(NamedTuple):
    """The marking index over the first ``64 * W`` slots (the indexed ones).

    Indexed attribute ``j`` (value column ``idx_col[j]``) has ``nb = len(edges_j) + 1``
    buckets; its rows ``row_start[j] + b`` (``b < nb``) mark the slots whose interval on
    it misses bucket ``b`` entirely, row ``row_start[j] + nb`` the slots constraining it
    (they fail an event that lacks it).  These rows are conservative: an interval that
    overlaps bucket ``b`` without covering it is not marked in row ``b``.  Those *partial*
    intervals are the *ends*: per row and tile of ``tile`` words, the slots whose interval
    starts inside the bucket (sorted by low bound, ``end_off[2 * (row * tiles + tile)]``)
    and those whose interval ends inside it (sorted by high bound, the next segment).  An
    event fails exactly the ends beyond its value: a short walk from one end of each list
    decides the bucket.  ``check`` marks the slots with predicates neither decides
    (residual ones, intervals on attributes not indexed).  A word's envelope ``(env_col,
    env_lo, env_hi)`` holds, for up to two columns every slot of the word constrains, the
    hull of their intervals: an event outside it fails the whole word.

    The wide mode (:mod:`~matchers.bitmark.wide`) packs its ends: ``end_val`` holds each
    row's distinct bounds, sorted (``val_off`` CSR), and ``end_key`` each end as its bound's
    rank there and its slot's position in the tile (``end_slot`` is empty; no envelopes).
    """

    bits: np.ndarray  # uint64[rows, W]
    end_off: np.ndarray  # int64[2 * rows * tiles + 1]
    end_val: np.ndarray  # float64, the bound of each end (wide mode: each row's distinct bounds)
    end_slot: np.ndarray  # int32, its slot (wide mode: empty)
    check: np.ndarray  # uint64[W]
    live: np.ndarray  # uint64[W], indexed slots not deleted
    env_col: np.ndarray  # int32[W, 2], -1: none
    env_lo: np.ndarray  # float64[W, 2]
    env_hi: np.ndarray  # float64[W, 2]
    idx_col: np.ndarray  # int32[n_idx]
    row_start: np.ndarray  # int64[n_idx + 1]
    edge_off: np.ndarray  # int64[n_idx + 1]
    edges: np.ndarray  # float64, sorted bucket edges per indexed attribute
    end_key: np.ndarray = np.zeros(0, dtype=np.uint32)  # the wide mode's packed ends (uint32 or uint64)
    val_off: np.ndarray = np.zeros(1, dtype=np.int64)  # int64[rows + 1], the wide mode's CSR over end_val


class Found(NamedTuple):
    """The matches of a chunk of events, as bitmaps (cleared by ``emit_keys``; the narrow mode's)."""

    surv: np.ndarray  # uint64[events, slot words]: the matching slots of each event
    hit: np.ndarray  # bool[events, tiles]: the tiles of words where each event has matches


class Intervals(NamedTuple):
    """Conjunctions of closed float64 intervals as columns (CSR), the columnar input of
    :meth:`~matchers.bitmark.BitMarkMatcher.add_intervals`: conjunction ``i`` is
    ``lo[j] <= names[attr[j]] <= hi[j]`` for every ``j`` in ``off[i]:off[i + 1]`` (an open bound
    is the next float inward; several intervals on one attribute are intersected)."""

    off: np.ndarray  # int64[n + 1]
    attr: np.ndarray  # int64[nnz], index into names
    lo: np.ndarray  # float64[nnz]
    hi: np.ndarray  # float64[nnz]
    names: tuple[str, ...]

    @classmethod
    def of_rows(cls, attr: np.ndarray, lo: np.ndarray, hi: np.ndarray, names: tuple[str, ...]) -> Intervals:
        """``k`` intervals per conjunction given as ``[n, k]`` arrays (``attr`` indexes ``names``)."""
        n, k = np.shape(attr)
        return cls(np.arange(n + 1, dtype=np.int64) * k, np.asarray(attr, dtype=np.int64).ravel(),
                   np.asarray(lo, dtype=np.float64).ravel(), np.asarray(hi, dtype=np.float64).ravel(), tuple(names))

    @property
    def n(self) -> int:
        """The number of conjunctions."""
        return len(self.off) - 1

"""Bit-marking index (REIN's marking, HEM's cached bitsets) for dense interval workloads.

Each DNF conjunction is a *slot*.  Its numeric interval predicates (``= < <= > >=
BETWEEN`` on numbers) become one closed float64 interval per attribute (strict bounds
moved by one ulp, several predicates on one attribute intersected); its other
predicates are *residual* and go to the shared phase-1 index
(:class:`~matchers.phase1.PredicateIndex`: equality, sets, ``NOT BETWEEN``, strings,
booleans).

The indexed slots (:class:`~matchers.bitmark.layout.Layout`) are ordered by their two
most selective intervals (attribute, then coarse cells of its low bound, then the
second attribute and its low bound), 64 to a ``uint64`` word.  An attribute
constrained by enough slots is *indexed*: its values are cut into up to ``buckets``
buckets at quantiles of the bounds, and per bucket a precomputed (cumulative) bitset
marks the slots whose interval misses the bucket entirely, one more the slots that
constrain it at all (an event lacking the attribute fails them).  An event

1. skips every word whose envelope (the hull of its slots' intervals on two
   attributes) does not hold the event's value: ordering makes most words skippable;
2. ORs the rows its values select: per remaining word until all 64 slots are marked, or,
   when the envelopes leave most words open (wide intervals), whole rows over a tile;
3. decides the survivors: the bucket rows are conservative (an interval that only
   partly covers the event's bucket is not marked), so either the interval ends stored
   per bucket and tile, sorted, are walked from beyond the event's value (HEM's patching
   of the bucket), or, when the survivors are few, each is checked exactly (every
   interval, and the residual predicates through phase 1's satisfied ids).

A chunk of events shares one pass over the words, a tile at a time, so that a tile's
rows come from memory once for the whole chunk.  The matching slots go to a bitmap of
the chunk's events by slots, read once per event to write its sorted keys (the wide mode
writes positions from its marks, per tile, and makes them keys per event).  Matching
holds per chunk only its values, rows, satisfied residual ids and that bitmap, within
fixed budgets (``VALUE_BUDGET``, ``SAT_BUDGET``, ``SURVIVOR_BUDGET``), beyond the
matches returned.

Inserted slots go to an unindexed tail checked exactly per event; deleted ones are
cleared from the ``live`` mask.  The index is rebuilt (at the next match) when the
tail or the deleted slots outgrow a fraction of the indexed ones.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

from matchers import base
from matchers.arrays import grown
from matchers.base import Matcher, Matches, register
from matchers.bitmark import buffers as B
from matchers.bitmark import emit as E
from matchers.bitmark import ends as EN
from matchers.bitmark import kernels as K
from matchers.bitmark import sorts as SO
from matchers.bitmark import wide as WK
from matchers.bitmark.ids import LazyKeys
from matchers.bitmark.layout import Found, Intervals, Layout, Slots
from matchers.events import Dictionary, EventBatch
from matchers.expr import And, Kind, Op, Or, Pred, Subscription, pred
from matchers.phase1 import PredicateIndex
from matchers.presence import rewrite

INTERVAL_OPS = frozenset({Op.EQ, Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN})
CHUNK_EVENTS = 1024
"""Most events matched in one pass over the index."""
VALUE_BUDGET = 16 << 20
"""Bytes of a chunk's value matrix and selected rows (fewer events per chunk when wide)."""
SURVIVOR_BUDGET = 64 << 20
"""Bytes of a chunk's bitmap of matching slots (``events x slots / 8``: fewer events per chunk
at millions of slots); at wide intervals it is smaller than the ``(event, key)`` pairs it
replaced (27,888 matches per event at n = 1,000,000, width 0.7, are 223 KB of pairs).  The
wide mode writes positions in tiles instead (no bitmap) and keeps the same chunks: its marks over a tile,
``events x 2 KB``, stay in the core's L2 at 500 events."""
SAT_BUDGET = 4 << 20
"""Satisfied residual predicate ids a chunk may produce, at worst (fewer events per chunk)."""
QUANTILE_SLOTS = 1 << 16
"""Slots (evenly spaced in the index order) whose bounds give the bucket edges' quantiles."""
BITS_PER_PREDICATE = 256
"""Budget of marking bits per indexed interval predicate (decides the buckets per attribute)."""


def is_interval(p: Pred) -> bool:
    """Whether ``p`` is a closed interval on a number (else a residual predicate)."""
    return p.kind is Kind.NUM and p.op in INTERVAL_OPS


def bounds(p: Pred) -> tuple[float, float]:
    """The closed float64 interval of an interval predicate."""
    x = p.operand
    if p.op is Op.BETWEEN:
        return float(x[0]), float(x[1])
    if p.op is Op.EQ:
        return float(x), float(x)
    if p.op is Op.LT:
        return -math.inf, math.nextafter(x, -math.inf)
    if p.op is Op.LE:
        return -math.inf, float(x)
    if p.op is Op.GT:
        return math.nextafter(x, math.inf), math.inf
    return float(x), math.inf


@register("bitmark")
class BitMarkMatcher(Matcher):
    """Bit-marking matcher (see module docstring).

    Parameters
    ----------
    dictionary : attribute and string dictionaries to share (a new one if ``None``).
    buckets : most buckets per indexed attribute (in the wide mode at most ``wide_buckets``).
    tile_words : words of the index a chunk of events visits together (narrow mode).
    wide : the wide mode (:mod:`~matchers.bitmark.wide`) always (``True``), never (``False``),
        or when the indexed intervals' mean width is at least ``wide_width`` (``None``).
    """

    tail_min = 2048
    """Tail slots (or deleted indexed slots) tolerated before a rebuild, whatever the size."""
    dense_share = 0.25
    """An event ORs whole rows over a tile (vectorised) when its envelopes left at least this
    share of the words of its previous tile open, else word by word until they are marked."""
    wide_width = 0.4
    """Mean width of the indexed intervals (a share of their attribute's span) from which a
    build chooses the wide mode (when ``wide`` is ``None``): wide / narrow ms/event on the dense
    workload (scratch, best of 3-5, load 3.6-5.6) at 100,000 width 0.3 0.027 / 0.024, 0.35 0.028
    / 0.029, 0.4 0.030 / 0.036; at 1,000,000 0.3 0.203 / 0.160, 0.35 0.208 / 0.184, 0.4 0.231 / 0.294."""
    wide_tile = 256
    """Words per tile in the wide mode: a chunk's marks over a tile (``events x 2,048`` bytes, 1 MB
    at 500 events) stay in the core's L2 while every attribute ORs into them (with 4 buckets, 256
    measured 4-6% faster than 1,024 at width 0.7, n = 1,000,000 and 100,000; 128 slower)."""
    wide_buckets = 4
    """Most buckets per indexed attribute in the wide mode (at most ``buckets``): every end is read
    once per chunk whatever their number, but every bucket's row is copied per tile and every
    bucket's segment of ends set up (width 0.7, n = 1,000,000, tiles of 256: 2 and 4 buckets
    measured 0.278 ms/event, 8 0.288-0.294, 16 0.306; 64 at tiles of 1,024 0.38).  More than
    2**18 distinct bounds in a row (tiles of 256) make the packed ends 8 bytes."""
    _wide = False
    """Whether the current layout is in the wide mode (older pickles: never)."""
    _tile = 0
    """Words per tile of the current layout (0, as in older pickles: ``tile_words``)."""
    _ordered = False
    """Whether the indexed slots' keys do not decrease with the slot (the wide mode's order)."""
    _id_of_key: np.ndarray = np.zeros(0, dtype=object)
    """Key -> id of a subscription added as columns (:meth:`add_intervals`), else ``None``. The
    class's empty array is a shared default (older pickles lack the attribute): it is replaced
    by the first :meth:`add_intervals`, and nothing is ever written into it while empty."""

    def __init__(self, dictionary: Dictionary | None = None, buckets: int = 64, tile_words: int = 256,
                 wide: bool | None = None, **params):
        super().__init__(dictionary, **params)
        if buckets < 1 or tile_words < 1:
            raise ValueError(f"buckets and tile_words must be positive, got {buckets}, {tile_words}")
        self.buckets, self.tile_words, self.wide = int(buckets), int(tile_words), wide
        self.phase1 = PredicateIndex(self.dictionary)
        self._col_of_attr = np.zeros(0, dtype=np.int32)  # dictionary attribute id -> value column, -1
        self._n_cols = 0
        self._key = np.zeros(0, dtype=np.int32)
        self._iv_off = np.zeros(1, dtype=np.int64)
        self._iv_col = np.zeros(0, dtype=np.int32)
        self._iv_lo = np.zeros(0)
        self._iv_hi = np.zeros(0)
        self._res_off = np.zeros(1, dtype=np.int64)
        self._res_pid = np.zeros(0, dtype=np.int32)
        self._n_slots = 0
        self._n_main = 0
        self._dead = 0
        self._main_of_key = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))  # CSR key -> slots
        self._layout = _empty_layout()
        self._built = False
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []  # a zero slot bitmap, for the next match
        self._keys: list[np.ndarray] = []  # the wide mode's key buffer, for the next match

    # -- updates -----------------------------------------------------------------------
    def _column(self, attr: str) -> int:
        aid = self.dictionary.attr_ids[attr]
        self._col_of_attr = grown(self._col_of_attr, aid + 1, -1)
        c = int(self._col_of_attr[aid])
        if c < 0:
            c = self._col_of_attr[aid] = self._n_cols
            self._n_cols += 1
        return c

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        keys: list[int] = []
        iv_count: list[int] = []
        cols: list[int] = []
        los: list[float] = []
        his: list[float] = []
        res_count: list[int] = []
        residual: list[Pred] = []
        column = self._column
        for key, sub in entries:
            for conj in sub.conjunctions:
                n_iv, n_res = len(cols), len(residual)
                for p in conj:
                    if is_interval(p):
                        lo, hi = bounds(p)
                        cols.append(column(p.attr))
                        los.append(lo)
                        his.append(hi)
                    else:
                        residual.append(p)
                keys.append(key)
                iv_count.append(len(cols) - n_iv)
                res_count.append(len(residual) - n_res)
        pids = self.phase1.acquire_many(residual) if residual else np.zeros(0, dtype=np.int32)
        iv_off = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(iv_count, out=iv_off[1:])
        self._append(np.array(keys, dtype=np.int64), iv_off, np.array(cols, dtype=np.int32),
                     np.array(los, dtype=np.float64), np.array(his, dtype=np.float64),
                     np.array(res_count, dtype=np.int64), pids)

    def add_intervals(self, ids: Sequence[str], intervals: Intervals) -> None:
        """Insert subscriptions given as columns: ``ids[i]`` is conjunction ``i`` of
        ``intervals`` (see :class:`~matchers.bitmark.layout.Intervals`), replacing a present one.

        No object is made per subscription: they go to the slots as arrays (new keys, free
        ones are left for :meth:`add`); :meth:`subscription` makes one from the slots when
        asked (BETWEEN, ``<=`` or ``>=`` on the stored bounds)."""
        n = intervals.n
        if len(ids) != n:
            raise ValueError(f"expected {n} ids, got {len(ids)}")
        counts = np.diff(intervals.off)
        if n and counts.min() < 1 or np.isnan(intervals.lo).any() or np.isnan(intervals.hi).any():
            raise ValueError("every conjunction needs an interval, and bounds must not be NaN")
        if len(intervals.attr) and not 0 <= intervals.attr.min() <= intervals.attr.max() < len(intervals.names):
            raise ValueError("an attribute index is outside names")
        if len(set(ids)) != n:
            raise ValueError("repeated ids")
        for name in intervals.names:
            if self.dictionary.attr(name) < 0:
                raise MemoryError(f"attribute dictionary is full ({self.dictionary.max_attributes} names)")
        if self._key_of:
            self.remove([i for i in ids if i in self._key_of])
        start = len(self._subs)
        col_of_name = np.array([self._column(name) for name in intervals.names], dtype=np.int32)
        keys = np.arange(start, start + n, dtype=np.int64)
        self._subs.extend(itertools.repeat(None, n))  # made from the slots when read (see subscription)
        known = self._id_of_key
        self._id_of_key = np.concatenate([known, np.full(start + n - len(known), None, dtype=object)])
        self._id_of_key[start:] = ids
        if self._key_of:
            self._key_of.update(zip(ids, range(start, start + n), strict=True))
        else:  # the bulk build: the ids' dictionary is made when first asked
            self._key_of = LazyKeys(self._id_of_key[start:].copy(), start)
        self._append(keys, np.asarray(intervals.off, dtype=np.int64), col_of_name[intervals.attr], intervals.lo,
                     intervals.hi, np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int32))

    def _append(self, keys: np.ndarray, iv_off: np.ndarray, cols: np.ndarray, los: np.ndarray, his: np.ndarray,
                res_count: np.ndarray, pids: np.ndarray) -> None:
        """Append slots to the tail (the one way slots come in): slot ``i`` has key ``keys[i]``,
        the intervals ``iv_off[i]:iv_off[i + 1]`` (those on one column are intersected here) and
        ``res_count[i]`` residual predicate ids of ``pids``."""
        iv_count, cols, los, his = K.intersect_repeats(iv_off, cols, np.asarray(los, dtype=np.float64),
                                                       np.asarray(his, dtype=np.float64), max(self._n_cols, 1))
        s0, n_new = self._n_slots, len(keys)
        if s0 == 0:  # the first slots (a bulk load): the arrays as they are, no copy into grown ones
            self._key = np.asarray(keys, dtype=np.int32)
            self._iv_off = np.zeros(n_new + 1, dtype=np.int64)
            np.cumsum(iv_count, out=self._iv_off[1:])
            self._res_off = np.zeros(n_new + 1, dtype=np.int64)
            np.cumsum(res_count, out=self._res_off[1:])
            self._iv_col, self._iv_lo, self._iv_hi = cols, los, his
            self._res_pid = np.array(pids, dtype=np.int32)
            self._n_slots = n_new
            return
        s1 = s0 + n_new
        i0, r0 = int(self._iv_off[s0]), int(self._res_off[s0])
        self._key = grown(self._key, s1, -1)
        self._key[s0:s1] = keys
        self._iv_off = grown(self._iv_off, s1 + 1)
        self._iv_off[s0 + 1:s1 + 1] = i0 + np.cumsum(iv_count)
        self._res_off = grown(self._res_off, s1 + 1)
        self._res_off[s0 + 1:s1 + 1] = r0 + np.cumsum(res_count)
        i1, r1 = i0 + len(cols), r0 + len(pids)
        self._iv_col = grown(self._iv_col, i1)
        self._iv_lo = grown(self._iv_lo, i1)
        self._iv_hi = grown(self._iv_hi, i1)
        self._iv_col[i0:i1] = cols
        self._iv_lo[i0:i1] = los
        self._iv_hi[i0:i1] = his
        self._res_pid = grown(self._res_pid, r1)
        self._res_pid[r0:r1] = pids
        self._n_slots = s1

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        off, main = self._main_of_key
        live = self._layout.live
        keys = np.array([key for key, _ in entries], dtype=np.int64)
        for key in keys[keys < len(off) - 1].tolist():
            for s in main[off[key]:off[key + 1]].tolist():
                if self._key[s] == key:
                    self._key[s] = -1
                    live[s >> 6] &= ~np.uint64(1 << (s & 63))
                    self._dead += 1
        tail = self._key[self._n_main:self._n_slots]
        tail[np.isin(tail, keys)] = -1
        columnar = self._id_of_key
        columnar[keys[keys < len(columnar)]] = None
        for _, sub in entries:
            if sub is not None:  # None: added as columns, intervals only
                for conj in sub.conjunctions:
                    for p in conj:
                        if not is_interval(p):
                            self.phase1.release(p)

    # -- subscriptions added as columns -------------------------------------------------
    def _columnar_id(self, key: int) -> str | None:
        """The id of a live key added by :meth:`add_intervals` (else ``None``)."""
        ids = self._id_of_key
        if key >= len(ids) or ids[key] is None or self._subs[key] is not None:
            return None
        return ids[key]

    def _made(self, key: int, sub_id: str) -> Subscription:
        """The subscription of a key added as columns, made from its slot's intervals."""
        slots = np.flatnonzero(self._key[:self._n_slots] == key)
        names = self.dictionary.attr_names
        attr_of_col = np.zeros(self._n_cols, dtype=np.int64)
        attr_of_col[self._col_of_attr[self._col_of_attr >= 0]] = np.flatnonzero(self._col_of_attr >= 0)
        conjunctions = []
        for s in slots.tolist():
            preds = []
            for t in range(int(self._iv_off[s]), int(self._iv_off[s + 1])):
                name, lo, hi = names[attr_of_col[self._iv_col[t]]], float(self._iv_lo[t]), float(self._iv_hi[t])
                if lo > -math.inf and hi < math.inf and lo <= hi:
                    preds.append(pred(name, Op.BETWEEN, (lo, hi)))
                else:  # a half-open or empty interval (several intersected)
                    preds += [p for p in (pred(name, Op.GE, lo), pred(name, Op.LE, hi)) if math.isfinite(p.operand)]
                    preds += [] if preds else [pred(name, Op.GE, -math.inf)]
            conjunctions.append(tuple(sorted(preds, key=Pred.sort_key)))
        exprs = [c[0] if len(c) == 1 else And(c) for c in conjunctions]
        return Subscription(sub_id, exprs[0] if len(exprs) == 1 else Or(tuple(exprs)), tuple(conjunctions))

    def id_of(self, key: int) -> str:
        sub_id = self._columnar_id(key)
        return super().id_of(key) if sub_id is None else sub_id

    def subscription(self, key: int) -> Subscription:
        sub_id = self._columnar_id(key)
        return super().subscription(key) if sub_id is None else self._made(key, sub_id)

    def subscriptions(self) -> Iterable[tuple[int, Subscription]]:
        for key in range(self.capacity):
            sub_id = self._columnar_id(key)
            if sub_id is not None:
                yield key, self._made(key, sub_id)
            elif self._subs[key] is not None:
                yield key, self._subs[key]  # type: ignore[misc]  # checked just before

    def indexed(self) -> Iterable[tuple[int, Subscription]]:
        residual = self._residual_keys
        return ((k, rewrite(s) if k in self._stated else s) for k, s in self.subscriptions() if k not in residual)

    # -- building ----------------------------------------------------------------------
    def _slots(self) -> Slots:
        n = self._n_slots
        i, r = int(self._iv_off[n]), int(self._res_off[n])
        return Slots(self._key[:n], self._iv_off[:n + 1], self._iv_col[:i], self._iv_lo[:i], self._iv_hi[:i],
                       self._res_off[:n + 1], self._res_pid[:r])

    def _stale(self) -> bool:
        limit = max(self.tail_min, self._n_main // 16)
        unpacked = self._wide and len(self._layout.val_off) != len(self._layout.bits) + 1  # pickled before end_key
        return (not self._built or unpacked or self._n_slots - self._n_main > limit
                or self._dead > max(self.tail_min, self._n_main // 4))

    def _rebuild(self) -> None:
        """Index every live slot: order them, pack them, build the marking rows."""
        slots = self._slots()
        live = np.flatnonzero(slots.key >= 0)
        n_cols = max(self._n_cols, 1)
        col_min, col_span, count = K.column_ranges(slots, live, n_cols)
        indexed = count * 64 >= len(live)  # about one interval a word or more (see _pack)
        wide = self.__dict__.get("wide")  # (older pickles lack it)
        if wide is None:
            wide = WK.mean_width(slots, live, indexed, col_min, col_span) >= self.wide_width
        self._wide = bool(wide and indexed.any())
        self._tile = self.wide_tile if self._wide else self.tile_words
        if self._wide:  # key order: no envelopes to narrow, and the keys come out sorted
            order = live[np.argsort(slots.key[live], kind="stable")]
        else:
            order = self._narrow_order(slots, live, col_min, col_span, n_cols)
        if len(order) == len(slots.key) and K.is_identity(order):  # (a bulk load in key order: as they are)
            self._key, self._iv_off, self._res_off = slots.key, slots.iv_off, slots.res_off
            self._iv_col, self._iv_lo, self._iv_hi, self._res_pid = slots.iv_col, slots.iv_lo, slots.iv_hi, slots.res_pid
        else:
            iv_off = K.gather_offsets(slots.iv_off, order)
            res_off = K.gather_offsets(slots.res_off, order)
            self._key = slots.key[order]
            self._iv_off, self._res_off = iv_off, res_off
            at = K.gather_positions(slots.iv_off, iv_off, order)
            self._iv_col, self._iv_lo, self._iv_hi = slots.iv_col[at], slots.iv_lo[at], slots.iv_hi[at]
            self._res_pid = slots.res_pid[K.gather_positions(slots.res_off, res_off, order)]
        n = self._n_slots = self._n_main = len(order)
        self._dead = 0
        self._main_of_key = SO.key_order(self._key, self.capacity)
        self._layout = self._pack(n, col_min, col_span, count)
        self._ordered = bool(self._wide or np.all(np.diff(self._key) >= 0))
        self._built = True

    @staticmethod
    def _narrow_order(slots: Slots, live: np.ndarray, col_min: np.ndarray, col_span: np.ndarray,
                      n_cols: int) -> np.ndarray:
        """The live slots ordered by their two most selective intervals (the narrow mode's
        order, which makes the words' envelopes narrow): two argsorts of packed integer keys
        (a low bound counts by its position in the column's span, in up to 40 bits: the order
        only narrows the envelopes, any order matches the same)."""
        p, lo_p, q, lo_q = (a[live] for a in K.order_keys(slots, col_min, col_span))
        p = np.where(p >= 0, p, n_cols)
        first = np.argsort(_packed_key([p], lo_p, p, col_min, col_span))
        group = p[first]
        starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1] if len(group) else np.zeros(0, dtype=np.int64)
        sizes = np.diff(np.r_[starts, len(group)])
        cells = np.maximum(1, np.sqrt(sizes / 1024).astype(np.int64))  # ~sqrt(size) cells of a group
        rank = np.arange(len(group)) - np.repeat(starts, sizes)
        cell = rank * np.repeat(cells, sizes) // np.repeat(sizes, sizes)
        q = q[first]
        return live[first[np.argsort(_packed_key([group, cell, q + 1], lo_q[first], q, col_min, col_span))]]

    def _pack(self, n: int, col_min: np.ndarray, col_span: np.ndarray, count: np.ndarray) -> Layout:
        """The marking layout over the ``n`` (ordered) slots."""
        if n == 0:
            return _empty_layout()
        words = (n + 63) // 64
        idx_col = np.flatnonzero(count * 64 >= n).astype(np.int32)  # about one interval a word or more
        occurrences = int(count[idx_col].sum())
        budget_rows = max(1 << 17, BITS_PER_PREDICATE * occurrences // 8) // (8 * words)
        most = min(self.buckets, self.wide_buckets) if self._wide else self.buckets
        nb = int(min(most, max(1, budget_rows // max(len(idx_col), 1) - 1)))
        slots = self._slots()
        edges = []
        bound_off, bound = K.sampled_bounds(slots, n, len(col_min), max(1, n // QUANTILE_SLOTS))
        for c in idx_col.tolist():
            values = bound[bound_off[c]:bound_off[c + 1]]
            cut = np.quantile(values, np.arange(1, nb) / nb) if len(values) and nb > 1 else np.zeros(0)
            edges.append(np.unique(cut))
        edge_off = np.zeros(len(idx_col) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in edges], out=edge_off[1:])
        row_start = np.zeros(len(idx_col) + 1, dtype=np.int64)
        np.cumsum([len(x) + 2 for x in edges], out=row_start[1:])
        edges_flat = np.concatenate(edges) if edges else np.zeros(0)
        idx_of_col = np.full(len(col_min), -1, dtype=np.int64)
        idx_of_col[idx_col] = np.arange(len(idx_col))
        ib = K.interval_buckets(slots, n, idx_of_col, edge_off, edges_flat)
        bits = np.empty((int(row_start[-1]), words), dtype=np.uint64)
        check = K.build_bits(slots, n, idx_of_col, row_start, edge_off, edges_flat, self._wide, ib, bits)
        if self._wide:
            end_off, key32, key64, val_off, end_val = EN.build_wide_ends(slots, n, idx_of_col, row_start, edge_off,
                                                                         edges_flat, self._tile, ib)
            end_key = np.array(key64 if len(key64) else key32)  # a numpy array: huge pages for the walk
            end_slot = np.zeros(0, dtype=np.int32)
        else:
            end_off, end_val, end_slot = EN.build_ends(slots, n, idx_of_col, row_start, edge_off, edges_flat,
                                                       self._tile, ib)
            end_key, val_off = np.zeros(0, dtype=np.uint32), np.zeros(1, dtype=np.int64)
        live = np.full(words, K.ALL, dtype=np.uint64)
        if n % 64:
            live[-1] = np.uint64((1 << (n % 64)) - 1)
        if self._wide:  # no envelopes: they would skip few words
            env_col, env_lo, env_hi = np.full((words, 2), -1, dtype=np.int32), np.zeros((words, 2)), np.zeros((words, 2))
        else:
            env_col, env_lo, env_hi = K.envelopes(slots, n, col_min, col_span)
        return Layout(bits, end_off, end_val, end_slot, check, live, env_col, env_lo, env_hi, idx_col, row_start,
                      edge_off, edges_flat, end_key, val_off)

    # -- matching ----------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        if self._stale():
            self._rebuild()
        layout, slots = self._layout, self._slots()
        n_idx = len(layout.idx_col)
        slot_words = (self._n_slots + 63) // 64
        chunk = max(1, min(CHUNK_EVENTS, VALUE_BUDGET // (8 * (self._n_cols + n_idx + 1)),
                           SURVIVOR_BUDGET // (8 * max(slot_words, 1))))
        if len(self.phase1):
            chunk = max(1, min(chunk, SAT_BUDGET // len(self.phase1)))
        offsets, keys = [np.zeros(1, dtype=np.int64)], []
        done = 0
        tile = self._tile or self.tile_words
        outs = self.__dict__.setdefault("_outs", [])  # outputs kept for the next match (older pickles lack it)
        if self._wide:
            buf = B.positions(self.__dict__.setdefault("_keys", []), int(min(chunk, batch.n) * (self._matches_per_event or 0)),
                              B.position_type(tile))  # (older pickles lack _keys)
            base_key, increasing = E.tile_bases(slots.key[:self._n_main], 64 * tile)
        else:
            surv, hit = self._scratch_for(min(chunk, batch.n), slot_words, tile)
        for lo in range(0, batch.n, chunk):
            part = batch.slice(lo, min(batch.n, lo + chunk))
            vals = K.event_values(part.arrays, self._col_of_attr, self._n_cols)
            rows = K.event_rows(vals, layout)
            sat_off, sat_pid = self._satisfied(part)
            if self._wide:
                buf, seg = WK.match_wide(vals, rows, sat_off, sat_pid, layout, slots, tile, buf)
                tail_off, tail_key = E.tail_keys(vals, sat_off, sat_pid, slots, self._n_main, self._n_slots)
                out = B.output(outs, int(seg[-1]) + len(tail_key))
                off, found = E.gather_keys(buf, seg, part.n, base_key, slots.key, 64 * tile, tail_off, tail_key,
                                           increasing, out)
            else:
                found_in = Found(surv[:part.n], hit[:part.n])
                counts = K.match_chunk(vals, rows, sat_off, sat_pid, layout, slots, tile, self.dense_share, found_in)
                K.match_tail(vals, sat_off, sat_pid, slots, self._n_main, self._n_slots, tile, found_in, counts)
                out = B.output(outs, int(counts.sum()) + 4)
                off, found = E.emit_keys(surv[:part.n], hit[:part.n], counts, slots.key, self.capacity, tile,
                                         self._ordered, out)
            outs.append(out)
            offsets.append(off[1:] + done)
            keys.append(found)
            done += len(found)
        if self._wide:
            self._keys.append(buf)
        else:
            self._scratch.append((surv, hit))
        if len(keys) == 1:  # one chunk: no copy (27,888 keys per event at n = 1,000,000, width 0.7)
            return Matches(np.concatenate(offsets), keys[0])
        return Matches(np.concatenate(offsets), np.concatenate(keys))

    def _chunk_events(self) -> int:
        """Events per :meth:`_match` call: the base's estimate (:data:`~matchers.base.BATCH_BUDGET`)
        with the 4 bytes bitmark writes per match, once (no margin), and nothing for phase 1: the index
        bounds the rest of its working memory itself (its chunks within ``VALUE_BUDGET``,
        ``SURVIVOR_BUDGET``, ``SAT_BUDGET``).  The base's 16 bytes per match cut a batch at
        27,888 matches per event (n = 1,000,000, width 0.7) into chunks of about 120 events,
        and the wide mode reads a tile's ends once per chunk."""
        matches = self.capacity if self._matches_per_event is None else self._matches_per_event
        return max(1, min(CHUNK_EVENTS, int(base.BATCH_BUDGET / (4 * matches + base.EVENT_BYTES))))

    def _scratch_for(self, n: int, words: int, tile: int) -> tuple[np.ndarray, np.ndarray]:
        """A zero bitmap of matching slots for ``n`` events over ``words`` words, and its tile
        flags: the last match's when large enough (:func:`~matchers.bitmark.emit.emit_keys`
        leaves them zero; allocating and zeroing megabytes per call cost 5% at width 0.3).
        Taken out of ``_scratch`` (``list.pop`` is atomic), so concurrent matches never share one."""
        try:
            surv, hit = self.__dict__.setdefault("_scratch", []).pop()  # (older pickles lack it)
        except IndexError:
            surv = hit = None
        tiles = (words + tile - 1) // tile
        if surv is None or surv.shape[0] < n or surv.shape[1] != words or hit.shape[1] != tiles:
            surv = np.zeros((n, words), dtype=np.uint64)
            hit = np.zeros((n, tiles), dtype=np.bool_)
        return surv, hit

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_scratch": [], "_keys": [], "_outs": []}

    def _satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """Satisfied residual predicate ids per event, sorted (CSR)."""
        if not len(self.phase1):
            return np.zeros(batch.n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        off, pid = self.phase1.satisfied(batch)
        off = np.ascontiguousarray(off, dtype=np.int64)
        pid = np.array(pid, dtype=np.int32)
        K.sort_segments(off, pid)
        return off, pid

    def memory_bytes(self) -> int:
        arrays = (self._key, self._iv_off, self._iv_col, self._iv_lo, self._iv_hi, self._res_off, self._res_pid,
                  self._col_of_attr, *self._main_of_key, *self._layout)
        return sum(a.nbytes for a in arrays) + self.phase1.memory_bytes()


def _packed_key(parts: list[np.ndarray], lo: np.ndarray, col: np.ndarray, col_min: np.ndarray,
                col_span: np.ndarray) -> np.ndarray:
    """One ``uint64`` per slot ordered as ``(*parts, lo)``: the non-negative integer ``parts``,
    each in the bits its largest value needs, then ``lo``'s position in the span of column
    ``col`` (0 where ``col`` is not a column) in the bits left, at most 40."""
    key = np.zeros(len(lo), dtype=np.uint64)
    used = 0
    for values in parts:
        bits = max(1, int(values.max()).bit_length()) if len(values) else 1
        key = (key << np.uint64(bits)) | values.astype(np.uint64)
        used += bits
    return SO.cell_keys(key, lo, col, col_min, col_span, max(0, min(40, 64 - used)))


def _empty_layout() -> Layout:
    return Layout(np.zeros((0, 0), dtype=np.uint64), np.zeros(1, dtype=np.int64), np.zeros(0),
                    np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64),
                    np.zeros((0, 2), dtype=np.int32), np.zeros((0, 2)), np.zeros((0, 2)),
                    np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                    np.zeros(0))

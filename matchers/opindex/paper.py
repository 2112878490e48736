"""The paper's OpIndex (Algorithm 2 over operator lists) and OpIndex-BS: the baselines.

Level 2 splits a pivot's predicates by operator family into lists sorted by ``(typed
attribute, operand)``, each cut into ``b`` segments by attribute with a ``w``-bit
signature per segment (Section 4.2, :class:`~matchers.opindex.layout.Lists`).  Matching
accumulates per clause slot (:class:`~matchers.opindex.layout.Slots`); a DNF entry has
one slot that holds when all its predicates fired, a CNF entry one slot per disjunctive
clause that holds when any of its predicates fired, and the entry matches when all its
slots hold (the paper's m-bit bitmap, kept as a count of clauses still unsatisfied, so
there is no 64-clause limit).

Updates: an insert finds each item's segment and binary-searches its position
(Lemma 5); a full list moves to the end of the pool with twice its capacity
(amortised O(1)); a delete removes the items and recomputes the touched signatures;
the pool is compacted (capacities fitted) when holes and free capacity exceed half of it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from matchers.arrays import grown
from matchers.base import Matches, register
from matchers.opindex import paper_kernels as K
from matchers.opindex.layout import (
    DEFAULT_SEGMENTS,
    DEFAULT_SIGNATURE_BITS,
    N_FAMILIES,
    VALUE_SIGNED,
    Events,
    Items,
    Lists,
    Scratch,
    Search,
    Slots,
)
from matchers.opindex.pivoted import PivotedIndex, Rows, bits

_VALUE_SIGNED = np.asarray(VALUE_SIGNED, dtype=np.bool_)


def _empty_lists() -> Lists:
    return Lists(list_of=np.full(0, -1, dtype=np.int64), start=np.zeros(0, dtype=np.int64),
                 length=np.zeros(0, dtype=np.int64), cap=np.zeros(0, dtype=np.int64),
                 sig=np.zeros(0, dtype=np.uint64), family=np.zeros(0, dtype=np.int8),
                 seg_off=np.zeros(0, dtype=np.int32), seg_sig=np.zeros(0, dtype=np.uint64),
                 ta=np.zeros(1024, dtype=np.int32), val=np.zeros(1024, dtype=np.float64),
                 slot=np.zeros(1024, dtype=np.int32), weight=np.zeros(1024, dtype=np.int8),
                 used=np.zeros(1, dtype=np.int64))


@register("opindex-paper", baseline=True)
class PaperOpIndex(PivotedIndex):
    """The paper's OpIndex: Algorithm 2 over the operator lists.

    Parameters (besides those of :class:`~matchers.opindex.pivoted.PivotedIndex`)
    ----------
    segments : ``b``, segments per predicate list (1 disables the directory).
    signature_bits : ``w``, bits per segment signature, 0 to 64 (0 disables signatures).
    sweep_factor : a list holding at most this many items per event value is walked
        once instead of searched once per event value (0: always search, as the paper).
    """

    def __init__(self, dictionary=None, segments: int = DEFAULT_SEGMENTS,
                 signature_bits: int = DEFAULT_SIGNATURE_BITS, sweep_factor: float = 1.0, **params):
        super().__init__(dictionary, signature_bits=signature_bits, **params)
        if int(segments) < 1:
            raise ValueError("segments must be at least 1")
        self.segments = int(segments)
        self.sweep_factor = float(sweep_factor)
        self._search = Search(N_FAMILIES, self.segments, self.signature_bits, self.sweep_factor)
        self._n_lists = 0
        self.lists = _empty_lists()
        self._n_cslots = 0
        self._free_cslots: dict[int, list[int]] = defaultdict(list)
        self.slots = Slots(meta=np.zeros(0, dtype=np.int64), word=np.zeros(0, dtype=np.int64),
                           e_nslots=np.zeros(0, dtype=np.int32), e_word=np.zeros(0, dtype=np.int64),
                           e_key=self._e_key)
        self._epoch = 0

    # -- entries --------------------------------------------------------------------------
    def _reserve_level2(self, n_entries: int, n_cslots: int) -> None:
        s, n = self.slots, self._n_cslots + n_cslots
        self.slots = Slots(meta=grown(s.meta, n), word=grown(s.word, n), e_nslots=grown(s.e_nslots, n_entries),
                           e_word=grown(s.e_word, n_entries), e_key=self._e_key)

    def _new_pivot(self, slot: int) -> None:
        self.lists = self.lists._replace(list_of=grown(self.lists.list_of, (slot + 1) * N_FAMILIES, -1))

    def _attach(self, entry: int, terms, is_cnf: bool, pivots: tuple[int, ...], rows: Rows) -> int:
        k = len(terms)
        free = self._free_cslots.get(k)
        base = free.pop() if free else self._n_cslots
        if base == self._n_cslots:
            self._n_cslots += k
        self.slots.meta[base:base + k] = (entry << 16) | (1 if is_cnf else len(terms[0]))
        self.slots.e_nslots[entry] = k
        self._emit(terms, pivots, base, rows, acquire=True)
        return base

    def _detach(self, entry: int, terms, pivots: tuple[int, ...], base: int, rows: Rows) -> None:
        self._emit(terms, pivots, base, rows, acquire=False)
        self._free_cslots[len(terms)].append(base)

    def _move(self, entry: int, terms, is_cnf: bool, old: tuple[int, ...], new: tuple[int, ...],
              old_rows: Rows, new_rows: Rows) -> None:
        base = self._entry_info[entry][2]
        self._emit(terms, old, base, old_rows, acquire=False)
        self._emit(terms, new, base, new_rows, acquire=False)

    def _emit(self, terms, pivots: tuple[int, ...], base: int, rows: Rows, acquire: bool) -> None:
        """Append the items of an entry (under each of its pivots) to ``rows``."""
        ids = self.dictionary.attr_ids
        items_of = self._items
        attrs: list[int] = []
        cslots: list[int] = []
        items: list[tuple[int, int, float, int]] = []
        for ci, clause in enumerate(terms):
            for p in clause:
                aid = ids[p.attr]
                its = items_of(p, aid, acquire)
                items.extend(its)
                attrs.extend([aid] * len(its))
                cslots.extend([base + ci] * len(its))
        families = [it[0] for it in items]
        tas = [it[1] for it in items]
        vals = [it[2] for it in items]
        weights = [it[3] for it in items]
        for pivot in pivots:
            rows.slot.extend([self._slot_of(pivot)] * len(items))
            rows.family.extend(families)
            rows.attr.extend(attrs)
            rows.ta.extend(tas)
            rows.val.extend(vals)
            rows.cslot.extend(cslots)
            rows.weight.extend(weights)

    # -- the lists ------------------------------------------------------------------------
    def _pack(self, rows: Rows) -> Items:
        """The items of ``rows`` with their list, segment and signature bit (allocating lists)."""
        slot = np.asarray(rows.slot, dtype=np.int64)
        family = np.asarray(rows.family, dtype=np.int64)
        pairs = slot * N_FAMILIES + family
        L = self.lists
        missing = np.unique(pairs[L.list_of[pairs] < 0])
        if len(missing):
            first = self._n_lists
            self._n_lists += len(missing)
            n, b = self._n_lists, self.segments
            L = L._replace(start=grown(L.start, n), length=grown(L.length, n), cap=grown(L.cap, n),
                           sig=grown(L.sig, n), family=grown(L.family, n), seg_off=grown(L.seg_off, n * (b + 1)),
                           seg_sig=grown(L.seg_sig, n * b))
            L.list_of[missing] = first + np.arange(len(missing), dtype=np.int64)
            L.family[first:n] = (missing % N_FAMILIES).astype(np.int8)
            self.lists = L
        attr = np.asarray(rows.attr, dtype=np.int64)
        ta = np.asarray(rows.ta, dtype=np.int32)
        val = np.asarray(rows.val, dtype=np.float64) + 0.0
        seg = np.empty(len(ta), dtype=np.int64)
        bit = np.empty(len(ta), dtype=np.int64)
        K.item_keys(family, attr, ta, bits(val), _VALUE_SIGNED, self.segments, self.signature_bits, seg, bit)
        return Items(L.list_of[pairs], seg, ta, val, np.asarray(rows.cslot, dtype=np.int32),
                     np.asarray(rows.weight, dtype=np.int8), bit)

    def _store(self, rows: Rows) -> None:
        items = self._pack(rows)
        order = np.lexsort((items.val, items.ta, items.seg, items.lst))
        items = Items(*(c[order] for c in items))
        done = 0
        while True:
            done = K.insert_items(done, items, self.segments, self.lists)
            if done == len(items.lst):
                break
            L = self.lists
            need = int(L.used[0]) + 4 * (len(items.lst) - done) + 2 * int(L.cap[items.lst[done]]) + 8
            size = max(2 * len(L.ta), need)
            self.lists = L._replace(ta=grown(L.ta, size), val=grown(L.val, size), slot=grown(L.slot, size),
                                    weight=grown(L.weight, size))

    def _unstore(self, rows: Rows) -> None:
        items = self._pack(rows)
        missing = K.delete_items(items, self.segments, self.lists)
        if missing:
            raise AssertionError(f"opindex: {missing} items to delete were not found")
        K.resign(np.unique(items.lst), _VALUE_SIGNED, self.signature_bits, self.segments, self.lists)
        # lists only grow and deletes leave their capacity: compact (and fit the
        # capacities) when holes and free capacity exceed half of the pool
        L = self.lists
        used, live = int(L.used[0]), int(L.length[: self._n_lists].sum())
        if used - live > max(self.compact_min_holes, used // 2):
            self._compact()

    def _compact(self) -> None:
        L = self.lists
        size = max(1024, (int(L.length[: self._n_lists].sum()) + 4 * self._n_lists) * 5 // 4)
        new = (np.zeros(size, np.int32), np.zeros(size, np.float64), np.zeros(size, np.int32),
               np.zeros(size, np.int8))
        L.used[0] = K.compact(self._n_lists, L, *new)
        self.lists = L._replace(ta=new[0], val=new[1], slot=new[2], weight=new[3])

    # -- matching ---------------------------------------------------------------------------
    def _match_events(self, ev: Events, ev_pos: np.ndarray, out: np.ndarray) -> Matches:
        scratch = Scratch(ev_pos, np.empty(max(1, self._n_cslots), np.int32),
                          np.empty(max(1, self._n_entries), np.int32))
        offsets, keys, self._epoch = K.match_batch(
            ev, bits(ev.val), bits(ev.spid.astype(np.float64)), self._pivot_slot, self._search, self.lists,
            self.slots, self._epoch, scratch, out)
        return Matches(offsets, keys[: offsets[-1]].copy())

    # -- introspection ----------------------------------------------------------------------
    def _level2_stats(self) -> dict[str, int]:
        return {"lists": self._n_lists, "items": int(self.lists.length[: self._n_lists].sum())}

    def _arrays(self) -> tuple[np.ndarray, ...]:
        s = self.slots
        return (*self.lists, s.meta, s.word, s.e_nslots, s.e_word)


@register("opindex-bs", baseline=True)
class OpIndexBS(PaperOpIndex):
    """OpIndex-BS: the paper's unoptimised variant, one segment per list, no signatures,
    every list searched by value (no whole-list sweep)."""

    def __init__(self, dictionary=None, **params):
        params.setdefault("segments", 1)
        params.setdefault("signature_bits", 0)
        params.setdefault("sweep_factor", 0.0)
        super().__init__(dictionary, **params)

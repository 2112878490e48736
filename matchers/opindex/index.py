"""OpIndex (Zhang, Chan, Tan, VLDB 2014) with an entry store: the ``opindex`` matcher.

Level 1 (pivot attributes, items, re-pivoting) is :class:`~matchers.opindex.pivoted.PivotedIndex`.
Level 2 is an entry store (:class:`~matchers.opindex.layout.EntryStore`): per pivot slot a
block of entry records grouped by the pivot predicate's operator and sorted by its
operand, and each entry's items in clause order, the clauses on a pivot first.  Matching
visits, per event value of a pivot attribute, the records whose pivot predicate can hold
and evaluates those entries whose signature of needed attributes fits the event's.  The
paper's Algorithm 2 over operator lists is :mod:`matchers.opindex.paper`.

Updates: a full block moves to the end of the record pool with twice its capacity
(amortised O(1)); a delete removes the records and leaves the entry's items as holes; the
pools are compacted when holes and free capacity exceed half of them.
"""

from __future__ import annotations

import numpy as np

from matchers.arrays import grown
from matchers.base import Matches, register
from matchers.opindex import store_kernels as K
from matchers.opindex.layout import EntryStore, Events
from matchers.opindex.pivoted import PivotedIndex, Rows, bits


def _lines(n: int, old: np.ndarray | None = None) -> np.ndarray:
    """``n`` int64 words starting on a 64-byte line (a pivot header is one line), zeroed
    past a copy of ``old``."""
    buf = np.zeros(n + 8, dtype=np.int64)
    skip = (-buf.ctypes.data % 64) // 8
    out = buf[skip: skip + n]
    if old is not None:
        out[: len(old)] = old
    return out


@register("opindex")
class OpIndex(PivotedIndex):
    """The OpIndex matcher.

    Parameters: those of :class:`~matchers.opindex.pivoted.PivotedIndex`;
    ``signature_bits`` (default 64, at most 38 used) is the width of the signature of an
    entry's needed typed attributes, checked against the event's before the entry is evaluated.
    """

    selective_pivots = True

    def __init__(self, dictionary=None, **params):
        super().__init__(dictionary, **params)
        q = np.zeros(2048, dtype=np.int64)  # 2 words per item: meta, operand bits
        self.store = EntryStore(hdr=_lines(0), r_key=np.zeros(1024, dtype=np.float64),
                                r_x=np.zeros(1024, dtype=np.int64), r_y=np.zeros(1024, dtype=np.int64),
                                used=np.zeros(1, dtype=np.int64), e_item=np.zeros(0, dtype=np.int64),
                                e_key=self._e_key, q_meta=q, q_val=q.view(np.float64))
        self._e_nitem = np.zeros(0, dtype=np.int32)  # items of each entry
        self._q_used = 0
        self._q_holes = 0

    def __getstate__(self) -> dict:
        """The state without the item pool's float view (a second copy once pickled)."""
        state = super().__getstate__()
        state["store"] = self.store._replace(q_val=np.zeros(0))
        return state

    def __setstate__(self, state: dict) -> None:
        """Unpickle, with the pivot headers back on 64-byte lines (one line each) and the
        item pool's float view on its words."""
        self.__dict__.update(state)
        st = self.store
        self.store = st._replace(hdr=_lines(len(st.hdr), st.hdr), q_val=st.q_meta.view(np.float64))

    def _set_items(self, q: np.ndarray) -> None:
        self.store = self.store._replace(q_meta=q, q_val=q.view(np.float64))

    # -- entries --------------------------------------------------------------------------
    def _reserve_level2(self, n_entries: int, n_cslots: int) -> None:
        self.store = self.store._replace(e_item=grown(self.store.e_item, n_entries), e_key=self._e_key)
        self._e_nitem = grown(self._e_nitem, n_entries)

    def _new_pivot(self, slot: int) -> None:
        hdr = self.store.hdr
        if (slot + 1) * K.HS > len(hdr):
            self.store = self.store._replace(hdr=_lines(max(64, 2 * len(hdr)), hdr))

    def _attach(self, entry: int, terms, is_cnf: bool, pivots: tuple[int, ...], rows: Rows) -> int:
        self._emit_items(entry, terms, pivots, is_cnf, rows)
        self._emit_records(entry, pivots, rows)
        return -1

    def _detach(self, entry: int, terms, pivots: tuple[int, ...], base: int, rows: Rows) -> None:
        self._emit_records(entry, pivots, rows)
        self._q_holes += int(self._e_nitem[entry])

    def _move(self, entry: int, terms, is_cnf: bool, old: tuple[int, ...], new: tuple[int, ...],
              old_rows: Rows, new_rows: Rows) -> None:
        self._emit_records(entry, old, old_rows)
        self._q_holes += int(self._e_nitem[entry])
        # the new pivot's clause goes first
        self._emit_items(entry, terms, new, is_cnf, new_rows, acquire=False)
        self._emit_records(entry, new, new_rows)

    def _emit_items(self, entry: int, terms, pivots: tuple[int, ...], is_cnf: bool, rows: Rows,
                    acquire: bool = True) -> None:
        """Append an entry's items for the entry store, clause by clause, the clauses on a
        pivot first (a DNF conjunction is a clause per predicate), with their end marks."""
        ids = self.dictionary.attr_ids
        if not is_cnf:
            clauses = [(p,) for p in terms[0]]
        else:
            clauses = list(terms)
        clauses.sort(key=lambda c: not any(ids[p.attr] in pivots for p in c))
        n0 = len(rows.ta)
        for clause in clauses:
            for pi, p in enumerate(clause):
                its = self._items(p, ids[p.attr], acquire)
                for family, ta, val, weight in its:
                    rows.family.append(family)
                    rows.ta.append(ta)
                    rows.val.append(val)
                    rows.weight.append(weight)
                    rows.end.append(0)
                rows.end[-1] = K.END_CLAUSE if pi == len(clause) - 1 else K.END_PRED
        rows.end[-1] = K.END_ENTRY
        rows.entries.append(entry)
        rows.nitem.append(len(rows.ta) - n0)

    def _emit_records(self, entry: int, pivots: tuple[int, ...], rows: Rows) -> None:
        for pivot in pivots:
            rows.rslot.append(self._slot_of(pivot))
            rows.rentry.append(entry)

    # -- the store ------------------------------------------------------------------------
    def _store(self, rows: Rows) -> None:
        """Append the new entries' items to the item pool, then insert the records."""
        if rows.entries:
            entries = np.asarray(rows.entries, dtype=np.int64)
            nitem = np.asarray(rows.nitem, dtype=np.int64)
            n, at = len(rows.ta), self._q_used
            q = self.store.q_meta
            if 2 * (at + n) > len(q):
                q = grown(q, 2 * (at + n))
                self._set_items(q)
            q[2 * at:2 * (at + n):2] = K.item_meta(rows.ta, rows.family, rows.weight, rows.end)
            q[2 * at + 1:2 * (at + n):2] = bits(np.asarray(rows.val, dtype=np.float64)).view(np.int64)
            self._q_used = at + n
            self.store.e_item[entries] = at + np.cumsum(nitem) - nitem
            self._e_nitem[entries] = nitem
        if not rows.rslot:
            return
        slot = np.asarray(rows.rslot, dtype=np.int64)
        entry = np.asarray(rows.rentry, dtype=np.int32)
        order = np.lexsort((entry, slot))
        slot, entry = slot[order], entry[order]
        done = 0
        while True:
            done = K.insert_records(done, slot, entry, self.signature_bits, self.store)
            if done == len(slot):
                break
            st = self.store
            cap = int(st.hdr[slot[done] * K.HS + K.H_CAP])
            size = max(2 * len(st.r_key), int(st.used[0]) + 4 * (len(slot) - done) + 2 * cap + 8)
            self.store = st._replace(r_key=grown(st.r_key, size), r_x=grown(st.r_x, size), r_y=grown(st.r_y, size))

    def _live_records(self) -> int:
        hdr = self.store.hdr[: self._n_pivots * K.HS]
        return int((hdr[K.N_GROUPS::K.HS] - hdr[::K.HS]).sum())

    def _unstore(self, rows: Rows) -> None:
        """Remove records (the dropped entries' items are already counted as holes)."""
        slot = np.asarray(rows.rslot, dtype=np.int64)
        entry = np.asarray(rows.rentry, dtype=np.int32)
        missing = K.delete_records(slot, entry, self.signature_bits, self.store)
        if missing:
            raise AssertionError(f"opindex: {missing} records to delete were not found")
        # blocks only grow and deletes leave their capacity: compact (and fit the
        # capacities) when holes and free capacity exceed half of the pool
        st = self.store
        used, live = int(st.used[0]), self._live_records()
        if used - live > max(self.compact_min_holes, used // 2):
            size = max(1024, (live + 4 * self._n_pivots) * 5 // 4)
            new = np.zeros(size, dtype=np.float64), np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
            st.used[0] = K.compact_records(self._n_pivots, st, *new)
            self.store = st._replace(r_key=new[0], r_x=new[1], r_y=new[2])
        if self._q_holes > max(self.compact_min_holes, self._q_used // 2):
            self._compact_items()

    def _compact_items(self) -> None:
        """Rewrite the item pool without the dropped entries' items, in pool order."""
        e_item = self.store.e_item
        live = np.fromiter(self._entry_info, dtype=np.int64, count=len(self._entry_info))
        live = live[np.argsort(e_item[live], kind="stable")]
        first, nitem = e_item[live], self._e_nitem[live].astype(np.int64)
        total = int(nitem.sum())
        new_first = np.cumsum(nitem) - nitem
        idx = np.repeat(first - new_first, nitem) + np.arange(total)
        new = np.zeros(2 * max(1024, total * 5 // 4), dtype=np.int64)
        new[: 2 * total] = self.store.q_meta.reshape(-1, 2)[idx].ravel()
        self._set_items(new)
        e_item[live] = new_first
        self._q_used, self._q_holes = total, 0

    # -- matching ---------------------------------------------------------------------------
    def _match_events(self, ev: Events, ev_pos: np.ndarray, out: np.ndarray) -> Matches:
        offsets, keys = K.match_entries(ev, self._pivot_slot, self.signature_bits, self.store, ev_pos, out)
        return Matches(offsets, keys[: offsets[-1]].copy())

    # -- introspection ----------------------------------------------------------------------
    def _level2_stats(self) -> dict[str, int]:
        return {"lists": 0, "items": self._q_used - self._q_holes}

    def _arrays(self) -> tuple[np.ndarray, ...]:
        st = self.store
        return (st.hdr, st.r_key, st.r_x, st.r_y, st.e_item, self._e_nitem, st.q_meta)

"""OpIndex (Zhang, Chan, Tan, VLDB 2014): pivot attributes, operator partitions, signatures.

Level 1 puts each *entry* (a DNF conjunction, or in CNF mode a whole subscription)
under its pivot attribute, the least frequent of its attributes in the event stream
(Eq. 1, :mod:`.pivot`).  Level 2 splits a pivot's predicates by operator family into
lists sorted by ``(typed attribute, operand)``, each cut into ``b`` segments by
attribute with a ``w``-bit signature per segment (Section 4.2, :mod:`.layout`).  A
predicate becomes one or more *items* whose weights add up to 1 exactly when it holds:

* ``= IN`` one equality item per value (at most one can fire);
* ``< <= > >=`` one ordering item (``<`` is ``<=`` the next float below);
* ``BETWEEN lo hi`` is ``>= lo`` (+1) and ``> hi`` (-1); ``NOT BETWEEN`` is ``< lo``
  (+1) and ``> hi`` (+1): two items, no expansion (footnote 7);
* ``!= NOT IN`` a presence item (+1) and one equality item per value (-1);
* string operators (prefix, suffix, contains, LIKE, regex, string ordering, and
  their negations) one item on the id of the string predicate, evaluated once per
  distinct (attribute, string) of a batch by :class:`matchers.strings.StringEvaluator`
  (prefix/suffix by hashed lookups of the value's own affixes, contains by one
  Aho-Corasick scan, LIKE and regex by one RE2 set per attribute).

Matching (Algorithm 2) accumulates per clause slot; a DNF entry has one slot that
holds when all its predicates fired, a CNF entry one slot per disjunctive clause that
holds when any of its predicates fired, and the entry matches when all its slots
hold (the paper's m-bit bitmap, kept as a count of clauses still unsatisfied, so
there is no 64-clause limit).  CNF entries are stored under every attribute of their
smallest clause (Section 6.1); a CNF expansion that is too large falls back to DNF
entries for that subscription.

Updates: an insert finds each item's segment and binary-searches its position
(Lemma 5); a full segment moves to the end of the pool with twice its capacity
(amortised O(1)); a delete removes the items and recomputes the touched signatures;
the pool is compacted (capacities fitted) when holes and free capacity exceed half
of it.  Re-pivoting: every
``repivot_every`` events, entries whose pivot's event frequency exceeds
``repivot_gap`` are revisited, and one moves when another of its attributes (or
clauses) is cheaper by more than ``repivot_gap`` *and* by a factor ``repivot_ratio``
(a move costs a delete and an insert; the expected saving per event is the
frequency difference).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from matchers.base import Matcher, Matches, register
from matchers.errors import SubscriptionError
from matchers.events import EventBatch
from matchers.expr import DEFAULT_MAX_TERMS, RANGE_OPS, Kind, Op, Pred, Subscription, cnf
from matchers.opindex import kernels as K
from matchers.opindex.layout import (
    DEFAULT_SEGMENTS,
    DEFAULT_SIGNATURE_BITS,
    F_EQ,
    F_GE,
    F_LE,
    F_PRES,
    F_STR,
    N_FAMILIES,
    VALUE_SIGNED,
    event_values,
)
from matchers.opindex.pivot import Frequencies
from matchers.strings import StringEvaluator

_VALUE_SIGNED = np.asarray(VALUE_SIGNED, dtype=np.bool_)
_NEG_INF, _POS_INF = -math.inf, math.inf


def _grow(arr: np.ndarray, n: int, fill=0) -> np.ndarray:
    if n <= len(arr):
        return arr
    out = np.full(max(n, 2 * len(arr), 64), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _lines(n: int, old: np.ndarray | None = None) -> np.ndarray:
    """``n`` int64 words starting on a 64-byte line (a pivot header is one line), zeroed
    past a copy of ``old``."""
    buf = np.zeros(n + 8, dtype=np.int64)
    skip = (-buf.ctypes.data % 64) // 8
    out = buf[skip: skip + n]
    if old is not None:
        out[: len(old)] = old
    return out


_SELECTIVITY = {Op.EQ: 0.1, Op.LT: 0.5, Op.LE: 0.5, Op.GT: 0.5, Op.GE: 0.5, Op.BETWEEN: 0.5}
"""Guessed share of present values on which a pivot predicate holds (the entry store
searches the pivot's predicate: ``=`` finds few records, a range about half of them)."""


def _selectivity(p: Pred) -> float:
    if p.kind is Kind.STR and StringEvaluator.owns(p):
        return 1.0
    if p.op is Op.IN:
        return min(1.0, 0.1 * len(p.operand))
    return _SELECTIVITY.get(p.op, 1.0)


def _bits(values: np.ndarray) -> np.ndarray:
    """IEEE bits of float64 values with -0.0 folded into 0.0 (equal values, equal bits)."""
    return (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)


class _Rows:
    """Items and records being built: columns as Python lists, packed once.

    The lists (``evaluate="lists"``) use one item row per (pivot, item); the entry store
    uses the item columns once per new entry (``entries``, ``nitem``, ``end``) and one
    record ``(rslot, rentry)`` per (pivot, entry).
    """

    __slots__ = ("slot", "family", "attr", "ta", "val", "cslot", "weight", "end", "entries", "nitem",
                 "rslot", "rentry")

    def __init__(self) -> None:
        self.slot: list[int] = []
        self.family: list[int] = []
        self.attr: list[int] = []
        self.ta: list[int] = []
        self.val: list[float] = []
        self.cslot: list[int] = []
        self.weight: list[int] = []
        self.end: list[int] = []
        self.entries: list[int] = []
        self.nitem: list[int] = []
        self.rslot: list[int] = []
        self.rentry: list[int] = []

    def __len__(self) -> int:
        return len(self.ta) + len(self.rslot)


@register("opindex")
class OpIndex(Matcher):
    """The OpIndex matcher.

    Parameters
    ----------
    segments : ``b``, segments per predicate list (1 disables the directory).
    signature_bits : ``w``, bits per segment signature, 0 to 64 (0 disables signatures).
    normal_form : ``"dnf"`` (a conjunction per entry) or ``"cnf"`` (a subscription per
        entry with the pivots of its smallest clause).
    window : events over which attribute frequencies are measured.
    repivot_every : events between two re-pivoting checks (0 disables re-pivoting).
    repivot_gap, repivot_ratio : how much cheaper a new pivot must be to move an entry.
    max_clauses : bound on the CNF expansion of a subscription before falling back to DNF.
    sweep_factor : a list holding at most this many items per event value is walked
        once instead of searched once per event value (0: always search, as the paper).
    evaluate : ``"entries"`` (default) evaluates the entries of the event's pivots directly,
        those whose signature of needed attributes fits the event's (``signature_bits``
        wide, at most 38; ``segments`` and ``sweep_factor`` unused); ``"lists"`` is the paper's
        Algorithm 2 over the operator lists (the ablation of this addition).
    """

    compact_min_holes = 1 << 16
    """Pool slots (holes and free capacity) tolerated before compaction, whatever the pool size."""

    def __init__(self, dictionary=None, segments: int = DEFAULT_SEGMENTS,
                 signature_bits: int = DEFAULT_SIGNATURE_BITS, normal_form: str = "dnf",
                 window: int = 20_000, repivot_every: int = 10_000, repivot_gap: float = 0.05,
                 repivot_ratio: float = 2.0, max_clauses: int = DEFAULT_MAX_TERMS,
                 sweep_factor: float = 1.0, evaluate: str = "entries", **params):
        super().__init__(dictionary, **params)
        if int(segments) < 1:
            raise ValueError("segments must be at least 1")
        if not 0 <= int(signature_bits) <= 64:
            raise ValueError("signature_bits must be between 0 and 64")
        if normal_form not in ("dnf", "cnf"):
            raise ValueError("normal_form must be 'dnf' or 'cnf'")
        if evaluate not in ("entries", "lists"):
            raise ValueError("evaluate must be 'entries' or 'lists'")
        self.evaluate = evaluate
        self.segments = int(segments)
        self.signature_bits = int(signature_bits)
        self.normal_form = normal_form
        self.repivot_every = int(repivot_every)
        self.repivot_gap = float(repivot_gap)
        self.repivot_ratio = float(repivot_ratio)
        self.max_clauses = int(max_clauses)
        self.sweep_factor = float(sweep_factor)
        self.freq = Frequencies(window)
        self.strings = StringEvaluator()
        self._spids: dict[Pred, list[int]] = {}  # string predicate -> [id, references]
        self._free_spids: list[int] = []
        self._n_spids = 0
        # level 1: pivot attribute -> slot; (slot, family) -> first bucket of its list
        self._pivot_slot = np.full(0, -1, dtype=np.int32)
        self._n_pivots = 0
        self._list_of = np.full(0, -1, dtype=np.int64)
        # level 2: buckets (segments) and the item pool
        self._n_lists = 0
        self._l_start = np.zeros(0, dtype=np.int64)
        self._l_len = np.zeros(0, dtype=np.int64)
        self._l_cap = np.zeros(0, dtype=np.int64)
        self._l_sig = np.zeros(0, dtype=np.uint64)
        self._l_family = np.zeros(0, dtype=np.int8)
        self._seg_off = np.zeros(0, dtype=np.int32)  # (b + 1) per list
        self._s_sig = np.zeros(0, dtype=np.uint64)  # b per list
        self._it_ta = np.zeros(1024, dtype=np.int32)
        self._it_val = np.zeros(1024, dtype=np.float64)
        self._it_slot = np.zeros(1024, dtype=np.int32)
        self._it_w = np.zeros(1024, dtype=np.int8)
        self._pool_state = np.zeros(1, dtype=np.int64)  # used length of the item pool
        # the entry store (evaluate="entries"): a block of entry records per pivot slot
        # (three parallel pools, a header line per slot), and each entry's items in
        # clause order
        self._hdr = _lines(0)
        self._r_key = np.zeros(1024, dtype=np.float64)
        self._r_x = np.zeros(1024, dtype=np.int64)
        self._r_y = np.zeros(1024, dtype=np.int64)
        self._r_state = np.zeros(1, dtype=np.int64)  # used length of the record pools
        self._e_item = np.zeros(0, dtype=np.int64)
        self._e_nitem = np.zeros(0, dtype=np.int32)
        self._q = np.zeros(2048, dtype=np.int64)  # 2 words per item: meta, operand bits
        self._q_used = 0
        self._q_holes = 0
        # clause slots and entries
        self._n_cslots = 0
        self._free_cslots: dict[int, list[int]] = defaultdict(list)
        self._s_meta = np.zeros(0, dtype=np.int64)  # entry << 16 | need
        self._s_word = np.zeros(0, dtype=np.int64)  # epoch << 16 | count + K.BIAS
        self._n_entries = 0
        self._free_entries: list[int] = []
        self._e_nslots = np.zeros(0, dtype=np.int32)
        self._e_key = np.zeros(0, dtype=np.int32)
        self._e_word = np.zeros(0, dtype=np.int64)  # epoch << 16 | slots still to hold
        self._entry_info: dict[int, tuple] = {}  # entry -> (terms, pivots, slot base, is_cnf)
        self._entries_of: dict[int, list[int]] = {}  # subscription key -> entries
        self._by_pivot: dict[int, set[int]] = defaultdict(set)
        self._epoch = 0
        self._last_check = 0
        self.repivots = 0
        """Entries moved to another pivot so far."""

    def __setstate__(self, state: dict) -> None:
        """Unpickle, with the pivot headers back on 64-byte lines (one line each)."""
        self.__dict__.update(state)
        self._hdr = _lines(len(self._hdr), self._hdr)

    # -- entries ------------------------------------------------------------------
    def _entries_for(self, sub: Subscription) -> list[tuple[tuple, bool]]:
        """The entries of a subscription: ``(terms, is_cnf)`` pairs."""
        if self.normal_form == "cnf":
            try:
                clauses = cnf(sub.expr, self.max_clauses)
            except SubscriptionError:
                clauses = ()
            if clauses and all(clauses):
                return [(clauses, True)]
        return [((conj,), False) for conj in sub.conjunctions]

    def _attr_ids(self, terms) -> list[int]:
        attr = self.dictionary.attr
        return sorted({attr(p.attr) for clause in terms for p in clause})

    def _choose_pivots(self, terms, is_cnf: bool, aids: list[int] | None = None) -> tuple[int, ...]:
        if not is_cnf:
            aids = aids if aids is not None else self._attr_ids(terms)
            if self.evaluate == "lists" or len(aids) == 1:
                return (self.freq.choose(aids),)
            ids = self.dictionary.attr_ids
            sel = dict.fromkeys(aids, 1.0)
            for p in terms[0]:
                a = ids[p.attr]
                sel[a] = min(sel[a], _selectivity(p))
            return (self.freq.choose(aids, [sel[a] for a in aids]),)
        attr = self.dictionary.attr
        best, best_key = None, None
        for clause in terms:
            attrs = sorted({attr(p.attr) for p in clause})
            key = (len(clause), self.freq.cost(attrs), attrs)
            if best_key is None or key < best_key:
                best, best_key = attrs, key
        return tuple(best)  # type: ignore[arg-type]  # terms is not empty: the loop sets best

    def _reserve(self, n_entries: int, n_cslots: int) -> None:
        """Grow the per-entry and per-slot arrays for that many more of each."""
        n = self._n_entries + n_entries
        self._e_nslots = _grow(self._e_nslots, n)
        self._e_key = _grow(self._e_key, n)
        self._e_word = _grow(self._e_word, n)
        self._e_item = _grow(self._e_item, n)
        self._e_nitem = _grow(self._e_nitem, n)
        n = self._n_cslots + n_cslots
        self._s_meta = _grow(self._s_meta, n)
        self._s_word = _grow(self._s_word, n)

    def _new_entry(self, key: int, terms, is_cnf: bool, pivots: tuple[int, ...], rows: _Rows) -> None:
        """Index one entry (arrays already reserved, its attributes already counted)."""
        entry = self._free_entries.pop() if self._free_entries else self._n_entries
        if entry == self._n_entries:
            self._n_entries += 1
        self._e_key[entry] = key
        base = -1
        if self.evaluate == "lists":
            k = len(terms)
            free = self._free_cslots.get(k)
            base = free.pop() if free else self._n_cslots
            if base == self._n_cslots:
                self._n_cslots += k
            self._s_meta[base:base + k] = (entry << 16) | (1 if is_cnf else len(terms[0]))
            self._e_nslots[entry] = k
        self._entry_info[entry] = (terms, pivots, base, is_cnf)
        self._entries_of.setdefault(key, []).append(entry)
        by_pivot = self._by_pivot
        for p in pivots:
            by_pivot[p].add(entry)
        if self.evaluate == "lists":
            self._emit(entry, rows, acquire=True)
        else:
            self._emit_items(entry, terms, pivots, is_cnf, rows)
            self._emit_records(entry, pivots, rows)

    def _drop_entry(self, entry: int, rows: _Rows) -> None:
        terms, pivots, base, _ = self._entry_info.pop(entry)
        if self.evaluate == "lists":
            self._emit(entry, rows, acquire=False, info=(terms, pivots, base))
            self._free_cslots[len(terms)].append(base)
        else:
            self._emit_records(entry, pivots, rows)
            self._q_holes += int(self._e_nitem[entry])
        for p in pivots:
            members = self._by_pivot[p]
            members.discard(entry)
            if not members:
                del self._by_pivot[p]
        self.freq.use(self._attr_ids(terms), -1)
        self._free_entries.append(entry)

    # -- items ----------------------------------------------------------------------
    def _spid(self, p: Pred, aid: int, acquire: bool) -> int:
        ref = self._spids.get(p)
        if not acquire:
            return ref[0]  # type: ignore[index]  # without acquire the predicate is held already
        if ref is None:
            spid = self._free_spids.pop() if self._free_spids else self._n_spids
            if spid == self._n_spids:
                self._n_spids += 1
            ref = self._spids[p] = [spid, 0]
            self.strings.add(spid, p, aid)
        ref[1] += 1
        return ref[0]

    def _release(self, p: Pred, aid: int) -> None:
        ref = self._spids[p]
        ref[1] -= 1
        if ref[1] == 0:
            del self._spids[p]
            self.strings.remove(ref[0], p, aid)
            self._free_spids.append(ref[0])

    def _value(self, aid: int, kind: Kind, v) -> float:
        if kind is Kind.STR:
            return float(self.dictionary.code(aid, v))
        return 1.0 if v is True else 0.0 if v is False else float(v)

    def _items(self, p: Pred, aid: int, acquire: bool) -> list[tuple[int, int, float, int]]:
        """``(family, ta, value, weight)`` items of a predicate (see the module doc)."""
        kind = p.kind
        ta = aid * 3 + int(kind)
        op = p.op
        x = p.operand
        if kind is Kind.STR and StringEvaluator.owns(p):
            return [(F_STR, ta, float(self._spid(p, aid, acquire)), 1)]
        if op is Op.EQ:
            return [(F_EQ, ta, self._value(aid, kind, x), 1)]
        if op is Op.NE:
            return [(F_PRES, ta, 0.0, 1), (F_EQ, ta, self._value(aid, kind, x), -1)]
        if op is Op.IN:
            return [(F_EQ, ta, self._value(aid, kind, v), 1) for v in x]
        if op is Op.NOT_IN:
            return [(F_PRES, ta, 0.0, 1)] + [(F_EQ, ta, self._value(aid, kind, v), -1) for v in x]
        if op in RANGE_OPS:
            lo, hi = (float(v) for v in x)
            if op is Op.BETWEEN:
                return [(F_GE, ta, lo, 1), (F_GE, ta, math.nextafter(hi, _POS_INF), -1)]
            return [(F_LE, ta, math.nextafter(lo, _NEG_INF), 1), (F_GE, ta, math.nextafter(hi, _POS_INF), 1)]
        num = float(x)
        if op is Op.LT:
            return [(F_LE, ta, math.nextafter(num, _NEG_INF), 1)]
        if op is Op.LE:
            return [(F_LE, ta, num, 1)]
        if op is Op.GT:
            return [(F_GE, ta, math.nextafter(num, _POS_INF), 1)]
        if op is Op.GE:
            return [(F_GE, ta, num, 1)]
        raise AssertionError(f"operator {op!r} on {kind!r} has no item encoding")

    def _emit(self, entry: int, rows: _Rows, acquire: bool, info=None) -> None:
        """Append the items of an entry (under each of its pivots) to ``rows``."""
        terms, pivots, base = info if info is not None else self._entry_info[entry][:3]
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

    def _emit_items(self, entry: int, terms, pivots: tuple[int, ...], is_cnf: bool, rows: _Rows,
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

    def _emit_records(self, entry: int, pivots: tuple[int, ...], rows: _Rows) -> None:
        for pivot in pivots:
            rows.rslot.append(self._slot_of(pivot))
            rows.rentry.append(entry)

    def _release_strings(self, terms) -> None:
        attr = self.dictionary.attr
        for clause in terms:
            for p in clause:
                if p.kind is Kind.STR and StringEvaluator.owns(p):
                    self._release(p, attr(p.attr))

    def _slot_of(self, pivot: int) -> int:
        if pivot >= len(self._pivot_slot):
            self._pivot_slot = _grow(self._pivot_slot, pivot + 1, -1)
        slot = int(self._pivot_slot[pivot])
        if slot < 0:
            slot = self._n_pivots
            self._n_pivots += 1
            self._pivot_slot[pivot] = slot
            self._list_of = _grow(self._list_of, self._n_pivots * N_FAMILIES, -1)
            if self._n_pivots * K.HS > len(self._hdr):
                self._hdr = _lines(max(64, 2 * len(self._hdr)), self._hdr)
        return slot

    def _pack(self, rows: _Rows):
        """Columns of ``rows`` with each item's list, segment and signature bit (allocating lists)."""
        slot = np.asarray(rows.slot, dtype=np.int64)
        family = np.asarray(rows.family, dtype=np.int64)
        pairs = slot * N_FAMILIES + family
        missing = np.unique(pairs[self._list_of[pairs] < 0])
        if len(missing):
            first = self._n_lists
            self._n_lists += len(missing)
            n, b = self._n_lists, self.segments
            self._l_start = _grow(self._l_start, n)
            self._l_len = _grow(self._l_len, n)
            self._l_cap = _grow(self._l_cap, n)
            self._l_sig = _grow(self._l_sig, n)
            self._l_family = _grow(self._l_family, n)
            self._seg_off = _grow(self._seg_off, n * (b + 1))
            self._s_sig = _grow(self._s_sig, n * b)
            self._list_of[missing] = first + np.arange(len(missing), dtype=np.int64)
            self._l_family[first:n] = (missing % N_FAMILIES).astype(np.int8)
        attr = np.asarray(rows.attr, dtype=np.int64)
        ta = np.asarray(rows.ta, dtype=np.int32)
        val = np.asarray(rows.val, dtype=np.float64) + 0.0
        cslot = np.asarray(rows.cslot, dtype=np.int32)
        weight = np.asarray(rows.weight, dtype=np.int8)
        seg = np.empty(len(ta), dtype=np.int64)
        bit = np.empty(len(ta), dtype=np.int64)
        K.item_keys(family, attr, ta, _bits(val), _VALUE_SIGNED, self.segments, self.signature_bits, seg, bit)
        return self._list_of[pairs], seg, ta, val, cslot, weight, bit

    def _store(self, rows: _Rows) -> None:
        if not len(rows):
            return
        if self.evaluate == "entries":
            self._store_entries(rows)
            return
        cols = self._pack(rows)
        order = np.lexsort((cols[3], cols[2], cols[1], cols[0]))
        lst, seg, ta, val, cslot, weight, bit = (c[order] for c in cols)
        done = 0
        while True:
            done = K.insert_items(done, lst, seg, ta, val, cslot, weight, bit, self.segments, self._l_start,
                                  self._l_len, self._l_cap, self._l_sig, self._seg_off, self._s_sig,
                                  self._it_ta, self._it_val, self._it_slot, self._it_w, self._pool_state)
            if done == len(lst):
                break
            need = int(self._pool_state[0]) + 4 * (len(lst) - done) + 2 * int(self._l_cap[lst[done]]) + 8
            size = max(2 * len(self._it_ta), need)
            self._it_ta = _grow(self._it_ta, size)
            self._it_val = _grow(self._it_val, size)
            self._it_slot = _grow(self._it_slot, size)
            self._it_w = _grow(self._it_w, size)

    def _unstore(self, rows: _Rows) -> None:
        if not len(rows):
            return
        if self.evaluate == "entries":
            self._unstore_entries(rows)
            return
        lst, seg, ta, val, cslot, weight, _ = self._pack(rows)
        missing = K.delete_items(lst, seg, ta, val, cslot, weight, self.segments, self._l_start, self._l_len,
                                 self._seg_off, self._it_ta, self._it_val, self._it_slot, self._it_w)
        if missing:
            raise AssertionError(f"opindex: {missing} items to delete were not found")
        K.resign(np.unique(lst), self._l_family, _VALUE_SIGNED, self.signature_bits, self.segments,
                 self._l_start, self._seg_off, self._l_sig, self._s_sig, self._it_ta, self._it_val.view(np.uint64))
        # lists only grow and deletes leave their capacity: compact (and fit the
        # capacities) when holes and free capacity exceed half of the pool
        used, live = int(self._pool_state[0]), int(self._l_len[: self._n_lists].sum())
        if used - live > max(self.compact_min_holes, used // 2):
            self._compact()

    def _compact(self) -> None:
        size = max(1024, (int(self._l_len[: self._n_lists].sum()) + 4 * self._n_lists) * 5 // 4)
        new = (np.zeros(size, np.int32), np.zeros(size, np.float64), np.zeros(size, np.int32),
               np.zeros(size, np.int8))
        used = K.compact(self._l_start[: self._n_lists], self._l_len, self._l_cap, self._it_ta, self._it_val,
                         self._it_slot, self._it_w, *new)
        self._it_ta, self._it_val, self._it_slot, self._it_w = new
        self._pool_state[0] = used

    def _store_entries(self, rows: _Rows) -> None:
        """Append the new entries' items to the item pool, then insert the records."""
        if rows.entries:
            entries = np.asarray(rows.entries, dtype=np.int64)
            nitem = np.asarray(rows.nitem, dtype=np.int64)
            n, at = len(rows.ta), self._q_used
            self._q = _grow(self._q, 2 * (at + n))
            self._q[2 * at:2 * (at + n):2] = K.item_meta(rows.ta, rows.family, rows.weight, rows.end)
            self._q[2 * at + 1:2 * (at + n):2] = _bits(np.asarray(rows.val, dtype=np.float64)).view(np.int64)
            self._q_used = at + n
            self._e_item[entries] = at + np.cumsum(nitem) - nitem
            self._e_nitem[entries] = nitem
        if not rows.rslot:
            return
        slot = np.asarray(rows.rslot, dtype=np.int64)
        entry = np.asarray(rows.rentry, dtype=np.int32)
        order = np.lexsort((entry, slot))
        slot, entry = slot[order], entry[order]
        done = 0
        while True:
            done = K.insert_records(done, slot, entry, self._e_item, self._e_key, self._q, self._q.view(np.float64),
                                    self.signature_bits, self._hdr, self._r_key, self._r_x, self._r_y, self._r_state)
            if done == len(slot):
                break
            cap = int(self._hdr[slot[done] * K.HS + K.H_CAP])
            size = max(2 * len(self._r_key), int(self._r_state[0]) + 4 * (len(slot) - done) + 2 * cap + 8)
            self._r_key, self._r_x, self._r_y = (_grow(a, size) for a in (self._r_key, self._r_x, self._r_y))

    def _live_records(self) -> int:
        hdr = self._hdr[: self._n_pivots * K.HS]
        return int((hdr[K.N_GROUPS::K.HS] - hdr[::K.HS]).sum())

    def _unstore_entries(self, rows: _Rows) -> None:
        """Remove records (the dropped entries' items are already counted as holes)."""
        slot = np.asarray(rows.rslot, dtype=np.int64)
        entry = np.asarray(rows.rentry, dtype=np.int32)
        missing = K.delete_records(slot, entry, self._e_item, self._q, self._q.view(np.float64), self.signature_bits,
                                   self._hdr, self._r_key, self._r_x, self._r_y)
        if missing:
            raise AssertionError(f"opindex: {missing} records to delete were not found")
        # blocks only grow and deletes leave their capacity: compact (and fit the
        # capacities) when holes and free capacity exceed half of the pool
        used, live = int(self._r_state[0]), self._live_records()
        if used - live > max(self.compact_min_holes, used // 2):
            size = max(1024, (live + 4 * self._n_pivots) * 5 // 4)
            new = np.zeros(size, dtype=np.float64), np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
            used = K.compact_records(self._n_pivots, self._hdr, self._r_key, self._r_x, self._r_y, *new)
            self._r_key, self._r_x, self._r_y = new
            self._r_state[0] = used
        if self._q_holes > max(self.compact_min_holes, self._q_used // 2):
            self._compact_items()

    def _compact_items(self) -> None:
        """Rewrite the item pool without the dropped entries' items, in pool order."""
        live = np.fromiter(self._entry_info, dtype=np.int64, count=len(self._entry_info))
        live = live[np.argsort(self._e_item[live], kind="stable")]
        first, nitem = self._e_item[live], self._e_nitem[live].astype(np.int64)
        total = int(nitem.sum())
        new_first = np.cumsum(nitem) - nitem
        idx = np.repeat(first - new_first, nitem) + np.arange(total)
        new = np.zeros(2 * max(1024, total * 5 // 4), dtype=np.int64)
        new[: 2 * total] = self._q.reshape(-1, 2)[idx].ravel()
        self._q = new
        self._e_item[live] = new_first
        self._q_used, self._q_holes = total, 0

    # -- Matcher --------------------------------------------------------------------
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        specs = []
        n_slots = 0
        used: list[int] = []
        for key, sub in entries:
            for terms, is_cnf in self._entries_for(sub):
                aids = self._attr_ids(terms)
                specs.append((key, terms, is_cnf, aids))
                used.extend(aids)
                n_slots += len(terms)
        # the subscription-side frequencies (the fallback of Eq. 1) count the whole batch first
        self.freq.use(used, 1)
        self._reserve(len(specs), n_slots)
        # entries of one pivot get neighbouring counters (the paper's per-pivot counter
        # arrays): a bulk load is laid out pivot by pivot
        chosen = [(self._choose_pivots(terms, is_cnf, aids), i) for i, (_, terms, is_cnf, aids) in enumerate(specs)]
        chosen.sort()
        rows = _Rows()
        for pivots, i in chosen:
            key, terms, is_cnf, _ = specs[i]
            self._new_entry(key, terms, is_cnf, pivots, rows)
        self._store(rows)

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        rows = _Rows()
        dropped = []
        for key, _ in entries:
            for entry in self._entries_of.pop(key):
                dropped.append(self._entry_info[entry][0])
                self._drop_entry(entry, rows)
        self._unstore(rows)
        for terms in dropped:
            self._release_strings(terms)

    def _match(self, batch: EventBatch) -> Matches:
        self.freq.observe(batch.attrs, batch.n)
        if self.repivot_every and self.freq.seen_events - self._last_check >= self.repivot_every:
            self._last_check = self.freq.seen_events
            self.repivot()
        ev_val = event_values(batch)
        soff, spid = self.strings.entry_hits(batch)
        ev_pos = np.full(3 * self.dictionary.n_attrs, -1, np.int32)
        out = np.empty(max(16, batch.n), np.int32)
        if self.evaluate == "entries":
            offsets, keys = K.match_entries(
                batch.offsets, batch.attrs, batch.kinds, ev_val, soff, spid, self._pivot_slot, self.signature_bits,
                self._hdr, self._r_key, self._r_x, self._r_y, self._e_item, self._e_key,
                self._q, self._q.view(np.float64), ev_pos, out)
            return Matches(offsets, keys[: offsets[-1]].copy())
        offsets, keys, self._epoch = K.match_batch(
            batch.offsets, batch.attrs, batch.kinds, ev_val, _bits(ev_val), soff, spid,
            _bits(spid.astype(np.float64)), self._pivot_slot, self._list_of,
            N_FAMILIES, self.segments, self.signature_bits, _VALUE_SIGNED, self.sweep_factor,
            self._l_start, self._l_len, self._l_sig, self._seg_off, self._s_sig,
            self._it_ta, self._it_val, self._it_slot, self._it_w, self._s_meta,
            self._e_nslots, self._e_key, self._s_word, self._e_word,
            self._epoch, ev_pos, np.empty(max(1, self._n_cslots), np.int32), np.empty(max(1, self._n_entries), np.int32),
            out)
        return Matches(offsets, keys[: offsets[-1]].copy())

    # -- re-pivoting --------------------------------------------------------------------
    def repivot(self) -> int:
        """Move entries whose pivot became too frequent in the event window; returns the count."""
        if not self._by_pivot or not self.freq.events_in_window:
            return 0
        pivots = np.fromiter(self._by_pivot, dtype=np.int64, count=len(self._by_pivot))
        freq = self.freq.event_frequency(pivots)
        hot = pivots[freq > self.repivot_gap]
        moves = []
        for p in hot.tolist():
            for entry in self._by_pivot[p]:
                terms, old, base, is_cnf = self._entry_info[entry]
                new = self._choose_pivots(terms, is_cnf)
                if new == old:
                    continue
                before, after = self._cost(old), self._cost(new)
                if before - after > self.repivot_gap and before > self.repivot_ratio * after:
                    moves.append((entry, new))
        if not moves:
            return 0
        old_rows, new_rows = _Rows(), _Rows()
        for entry, new in dict(moves).items():
            terms, old, base, is_cnf = self._entry_info[entry]
            if self.evaluate == "lists":
                self._emit(entry, old_rows, acquire=False)
            else:
                self._emit_records(entry, old, old_rows)
                self._q_holes += int(self._e_nitem[entry])
            for p in old:
                members = self._by_pivot[p]
                members.discard(entry)
                if not members:
                    del self._by_pivot[p]
            self._entry_info[entry] = (terms, new, base, is_cnf)
            for p in new:
                self._by_pivot[p].add(entry)
            if self.evaluate == "lists":
                self._emit(entry, new_rows, acquire=False)
            else:  # the new pivot's clause goes first
                self._emit_items(entry, terms, new, is_cnf, new_rows, acquire=False)
                self._emit_records(entry, new, new_rows)
        self._unstore(old_rows)
        self._store(new_rows)
        self.repivots += len(dict(moves))
        return len(dict(moves))

    def _cost(self, pivots: tuple[int, ...]) -> float:
        return float(self.freq.event_frequency(np.asarray(pivots, dtype=np.int64)).sum())

    # -- introspection ------------------------------------------------------------------
    def pivot_of(self, sub_id: str) -> list[tuple[str, ...]]:
        """Pivot attribute names of each entry of a subscription (for tests and tools)."""
        names = self.dictionary.attr_names
        return [tuple(names[p] for p in self._entry_info[e][1]) for e in self._entries_of[self.key_of(sub_id)]]

    def stats(self) -> dict[str, float]:
        """Sizes of the structures: pivots, lists, items, entries, string predicates."""
        items = (int(self._l_len[: self._n_lists].sum()) if self.evaluate == "lists"
                 else self._q_used - self._q_holes)
        return {
            "pivots": self._n_pivots,
            "lists": self._n_lists,
            "items": items,
            "entries": len(self._entry_info),
            "string_predicates": len(self._spids),
        }

    def memory_bytes(self) -> int:
        arrays: tuple[np.ndarray, ...] = (self._pivot_slot, self._e_key)
        if self.evaluate == "lists":
            arrays += (self._list_of, self._l_start, self._l_len, self._l_cap, self._l_sig, self._l_family,
                       self._seg_off, self._s_sig, self._it_ta, self._it_val, self._it_slot, self._it_w,
                       self._s_meta, self._s_word, self._e_nslots, self._e_word)
        else:
            arrays += (self._hdr, self._r_key, self._r_x, self._r_y, self._e_item, self._e_nitem, self._q)
        return int(sum(a.nbytes for a in arrays) + self.strings.memory_bytes() + self.freq.memory_bytes())


@register("opindex-paper", baseline=True)
class OpIndexPaper(OpIndex):
    """The paper's OpIndex: Algorithm 2 over the operator lists (``evaluate="lists"``)."""

    def __init__(self, dictionary=None, **params):
        params.setdefault("evaluate", "lists")
        super().__init__(dictionary, **params)


@register("opindex-bs", baseline=True)
class OpIndexBS(OpIndex):
    """OpIndex-BS: the paper's unoptimised variant, one segment per list, no signatures,
    every list searched by value (no whole-list sweep)."""

    def __init__(self, dictionary=None, **params):
        params.setdefault("evaluate", "lists")
        params.setdefault("segments", 1)
        params.setdefault("signature_bits", 0)
        params.setdefault("sweep_factor", 0.0)
        super().__init__(dictionary, **params)

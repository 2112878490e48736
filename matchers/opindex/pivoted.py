"""What ``opindex`` and the paper's ``opindex-paper`` share: level 1 of the OpIndex.

Level 1 puts each *entry* (a DNF conjunction, or in CNF mode a whole subscription)
under its pivot attribute, the least frequent of its attributes in the event stream
(Eq. 1, :mod:`.pivot`); CNF entries are stored under every attribute of their
smallest clause (Section 6.1), and a CNF expansion that is too large falls back to DNF
entries for that subscription.  A predicate becomes one or more *items* whose weights
add up to 1 exactly when it holds:

* ``= IN`` one equality item per value (at most one can fire);
* ``< <= > >=`` one ordering item (``<`` is ``<=`` the next float below);
* ``BETWEEN lo hi`` is ``>= lo`` (+1) and ``> hi`` (-1); ``NOT BETWEEN`` is ``< lo``
  (+1) and ``> hi`` (+1): two items, no expansion (footnote 7);
* ``!= NOT IN`` a presence item (+1) and one equality item per value (-1);
* string operators (prefix, suffix, contains, LIKE, regex, string ordering, and
  their negations) one item on the id of the string predicate, evaluated once per
  distinct (attribute, string) of a batch by :class:`matchers.strings.StringEvaluator`.

Re-pivoting: every ``repivot_every`` events, entries whose pivot's event frequency
exceeds ``repivot_gap`` are revisited, and one moves when another of its attributes
(or clauses) is cheaper by more than ``repivot_gap`` *and* by a factor
``repivot_ratio`` (a move costs a delete and an insert; the expected saving per event
is the frequency difference).

:class:`PivotedIndex` holds all of this; a subclass stores the entries of a pivot
(level 2) and matches: :class:`matchers.opindex.index.OpIndex` (an entry store) and
:class:`matchers.opindex.paper.PaperOpIndex` (the paper's operator lists).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from matchers.arrays import grown
from matchers.base import Matcher, Matches
from matchers.errors import SubscriptionError
from matchers.events import EventBatch
from matchers.expr import DEFAULT_MAX_TERMS, RANGE_OPS, Kind, Op, Pred, Subscription, cnf
from matchers.opindex.layout import F_EQ, F_GE, F_LE, F_PRES, F_STR, Events, events
from matchers.opindex.pivot import Frequencies
from matchers.strings import StringEvaluator

_NEG_INF, _POS_INF = -math.inf, math.inf


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


def bits(values: np.ndarray) -> np.ndarray:
    """IEEE bits of float64 values with -0.0 folded into 0.0 (equal values, equal bits)."""
    return (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)


class Rows:
    """Items and records being built: columns as Python lists, packed once.

    The paper's lists use one item row per (pivot, item); the entry store uses the item
    columns once per new entry (``entries``, ``nitem``, ``end``) and one record
    ``(rslot, rentry)`` per (pivot, entry).
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


class PivotedIndex(Matcher):
    """Entries under pivot attributes, their items, re-pivoting; level 2 is the subclass's.

    Parameters
    ----------
    signature_bits : bits of a signature, 0 to 64 (0 disables signatures).
    normal_form : ``"dnf"`` (a conjunction per entry) or ``"cnf"`` (a subscription per
        entry with the pivots of its smallest clause).
    window : events over which attribute frequencies are measured.
    repivot_every : events between two re-pivoting checks (0 disables re-pivoting).
    repivot_gap, repivot_ratio : how much cheaper a new pivot must be to move an entry.
    max_clauses : bound on the CNF expansion of a subscription before falling back to DNF.

    A subclass implements :meth:`_reserve_level2`, :meth:`_new_pivot`, :meth:`_attach`,
    :meth:`_detach`, :meth:`_move`, :meth:`_store`, :meth:`_unstore`, :meth:`_match_events`,
    :meth:`_level2_stats` and :meth:`_arrays`.
    """

    compact_min_holes = 1 << 16
    """Pool slots (holes and free capacity) tolerated before compaction, whatever the pool size."""
    selective_pivots = False
    """Whether a DNF pivot is chosen with the guessed selectivity of its predicate (Eq. 1
    weighted), not by frequency alone."""

    def __init__(self, dictionary=None, signature_bits: int = 64, normal_form: str = "dnf",
                 window: int = 20_000, repivot_every: int = 10_000, repivot_gap: float = 0.05,
                 repivot_ratio: float = 2.0, max_clauses: int = DEFAULT_MAX_TERMS, **params):
        super().__init__(dictionary, **params)
        if not 0 <= int(signature_bits) <= 64:
            raise ValueError("signature_bits must be between 0 and 64")
        if normal_form not in ("dnf", "cnf"):
            raise ValueError("normal_form must be 'dnf' or 'cnf'")
        self.signature_bits = int(signature_bits)
        self.normal_form = normal_form
        self.repivot_every = int(repivot_every)
        self.repivot_gap = float(repivot_gap)
        self.repivot_ratio = float(repivot_ratio)
        self.max_clauses = int(max_clauses)
        self.freq = Frequencies(window)
        self.strings = StringEvaluator()
        self._spids: dict[Pred, list[int]] = {}  # string predicate -> [id, references]
        self._free_spids: list[int] = []
        self._n_spids = 0
        self._pivot_slot = np.full(0, -1, dtype=np.int32)  # pivot attribute -> slot
        self._n_pivots = 0
        self._n_entries = 0
        self._free_entries: list[int] = []
        self._e_key = np.zeros(0, dtype=np.int32)  # entry -> subscription key
        self._entry_info: dict[int, tuple] = {}  # entry -> (terms, pivots, slot base, is_cnf)
        self._entries_of: dict[int, list[int]] = {}  # subscription key -> entries
        self._by_pivot: dict[int, set[int]] = defaultdict(set)
        self._last_check = 0
        self.repivots = 0
        """Entries moved to another pivot so far."""

    # -- what a subclass stores ---------------------------------------------------------
    def _reserve_level2(self, n_entries: int, n_cslots: int) -> None:
        """Grow the subclass's per-entry arrays to ``n_entries`` (and clause slots by ``n_cslots``)."""
        raise NotImplementedError

    def _new_pivot(self, slot: int) -> None:
        """Make room for pivot slot ``slot`` (just allocated)."""
        raise NotImplementedError

    def _attach(self, entry: int, terms, is_cnf: bool, pivots: tuple[int, ...], rows: Rows) -> int:
        """Emit a new entry into ``rows``; returns its clause slot base (-1: none)."""
        raise NotImplementedError

    def _detach(self, entry: int, terms, pivots: tuple[int, ...], base: int, rows: Rows) -> None:
        """Emit a dropped entry into ``rows`` for :meth:`_unstore`."""
        raise NotImplementedError

    def _move(self, entry: int, terms, is_cnf: bool, old: tuple[int, ...], new: tuple[int, ...],
              old_rows: Rows, new_rows: Rows) -> None:
        """Emit an entry that moves from pivots ``old`` to ``new`` (its info already ``new``)."""
        raise NotImplementedError

    def _store(self, rows: Rows) -> None:
        raise NotImplementedError

    def _unstore(self, rows: Rows) -> None:
        raise NotImplementedError

    def _match_events(self, ev: Events, ev_pos: np.ndarray, out: np.ndarray) -> Matches:
        """Match ``ev`` (``ev_pos``: -1 per typed attribute; ``out``: a first output array)."""
        raise NotImplementedError

    def _level2_stats(self) -> dict[str, int]:
        """``lists`` and ``items`` stored."""
        raise NotImplementedError

    def _arrays(self) -> tuple[np.ndarray, ...]:
        """The subclass's arrays (for :meth:`memory_bytes`)."""
        raise NotImplementedError

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
            if not self.selective_pivots or len(aids) == 1:
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

    def _new_entry(self, key: int, terms, is_cnf: bool, pivots: tuple[int, ...], rows: Rows) -> None:
        """Index one entry (arrays already reserved, its attributes already counted)."""
        entry = self._free_entries.pop() if self._free_entries else self._n_entries
        if entry == self._n_entries:
            self._n_entries += 1
        self._e_key[entry] = key
        self._entries_of.setdefault(key, []).append(entry)
        by_pivot = self._by_pivot
        for p in pivots:
            by_pivot[p].add(entry)
        self._entry_info[entry] = (terms, pivots, self._attach(entry, terms, is_cnf, pivots, rows), is_cnf)

    def _drop_entry(self, entry: int, rows: Rows) -> None:
        terms, pivots, base, _ = self._entry_info.pop(entry)
        self._detach(entry, terms, pivots, base, rows)
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

    def _release_strings(self, terms) -> None:
        attr = self.dictionary.attr
        for clause in terms:
            for p in clause:
                if p.kind is Kind.STR and StringEvaluator.owns(p):
                    self._release(p, attr(p.attr))

    def _slot_of(self, pivot: int) -> int:
        if pivot >= len(self._pivot_slot):
            self._pivot_slot = grown(self._pivot_slot, pivot + 1, -1)
        slot = int(self._pivot_slot[pivot])
        if slot < 0:
            slot = self._n_pivots
            self._n_pivots += 1
            self._pivot_slot[pivot] = slot
            self._new_pivot(slot)
        return slot

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
        n = self._n_entries + len(specs)
        self._e_key = grown(self._e_key, n)
        self._reserve_level2(n, n_slots)
        # entries of one pivot get neighbouring counters (the paper's per-pivot counter
        # arrays): a bulk load is laid out pivot by pivot
        chosen = [(self._choose_pivots(terms, is_cnf, aids), i) for i, (_, terms, is_cnf, aids) in enumerate(specs)]
        chosen.sort()
        rows = Rows()
        for pivots, i in chosen:
            key, terms, is_cnf, _ = specs[i]
            self._new_entry(key, terms, is_cnf, pivots, rows)
        if len(rows):
            self._store(rows)

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        rows = Rows()
        dropped = []
        for key, _ in entries:
            for entry in self._entries_of.pop(key):
                dropped.append(self._entry_info[entry][0])
                self._drop_entry(entry, rows)
        if len(rows):
            self._unstore(rows)
        for terms in dropped:
            self._release_strings(terms)

    def _match(self, batch: EventBatch) -> Matches:
        self.freq.observe(batch.attrs, batch.n)
        if self.repivot_every and self.freq.seen_events - self._last_check >= self.repivot_every:
            self._last_check = self.freq.seen_events
            self.repivot()
        soff, spid = self.strings.entry_hits(batch)
        ev_pos = np.full(3 * self.dictionary.n_attrs, -1, np.int32)
        out = np.empty(max(16, batch.n), np.int32)
        return self._match_events(events(batch, soff, spid), ev_pos, out)

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
        old_rows, new_rows = Rows(), Rows()
        for entry, new in dict(moves).items():
            terms, old, base, is_cnf = self._entry_info[entry]
            for p in old:
                members = self._by_pivot[p]
                members.discard(entry)
                if not members:
                    del self._by_pivot[p]
            self._entry_info[entry] = (terms, new, base, is_cnf)
            for p in new:
                self._by_pivot[p].add(entry)
            self._move(entry, terms, is_cnf, old, new, old_rows, new_rows)
        if len(old_rows):
            self._unstore(old_rows)
        if len(new_rows):
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
        return {
            "pivots": self._n_pivots,
            **self._level2_stats(),
            "entries": len(self._entry_info),
            "string_predicates": len(self._spids),
        }

    def memory_bytes(self) -> int:
        arrays = (self._pivot_slot, self._e_key, *self._arrays())
        return int(sum(a.nbytes for a in arrays) + self.strings.memory_bytes() + self.freq.memory_bytes())

"""Phase 1 of two-phase matching: which distinct predicates does each event satisfy?

:class:`PredicateIndex` gives every distinct predicate a dense id (shared, reference
counted) and hands it to the evaluator that owns its operator:

* :class:`~matchers.phase1.equality.EqualityEvaluator`: ``= != IN NOT IN`` (hashing);
* a range evaluator for numeric ``< <= > >= BETWEEN NOT BETWEEN``: by default
  :class:`~matchers.phase1.ranges.RangeEvaluator` (sorted operands), replaceable;
* :class:`~matchers.strings.StringEvaluator`: the string side path.

An evaluator has ``owns(pred) -> bool``, ``add(pid, pred, attr_id)``,
``remove(pid, pred, attr_id)``, ``satisfied(batch) -> (event_idx, pid)`` (int32 pairs, held
until its next call) and ``memory_bytes()``.
"""

from __future__ import annotations

import itertools
import operator
import sys

import numpy as np

from matchers.arrays import grown, stored
from matchers.events import Dictionary, EventBatch
from matchers.expr import Pred
from matchers.phase1 import kernels
from matchers.phase1.columns import PredColumns
from matchers.phase1.equality import EqualityEvaluator
from matchers.phase1.layout import Scratch
from matchers.phase1.ranges import RangeEvaluator
from matchers.strings import StringEvaluator

__all__ = ["PredicateIndex", "EqualityEvaluator", "RangeEvaluator", "StringEvaluator"]


class PredicateIndex:
    """Distinct predicates with dense ids and the evaluators that test them.

    Ids given by :meth:`acquire_many` to the new predicates of a batch follow the order
    (attribute, type, operator, operand), and :meth:`renumber` restores that order for
    every predicate: the satisfied predicates of a value, which a range evaluator finds
    as runs of sorted operands, then have consecutive ids, and per-predicate tables are
    read sequentially.

    Parameters
    ----------
    dictionary : the shared attribute and string dictionaries.
    range_evaluator : evaluator for numeric ranges (default :class:`RangeEvaluator`).
    """

    per_event: float | None = None
    """Satisfied ids per event in the last :meth:`satisfied` (``None`` before the first): the
    shared match entry sizes a batch's chunks by it (:meth:`matchers.base.Matcher.match`)."""

    def __init__(self, dictionary: Dictionary, range_evaluator=None):
        self.dictionary = dictionary
        self.evaluators = [
            EqualityEvaluator(dictionary),
            range_evaluator if range_evaluator is not None else RangeEvaluator(),
            StringEvaluator(),
        ]
        self._owners: dict[tuple, object] = {}
        self._ids: dict[Pred, int] = {}  # predicate -> handle
        self._pid_of = np.zeros(0, dtype=np.int32)  # handle -> id (-1: unused handle)
        self._n_handles = 0
        self._preds: list[Pred | None] = []
        self._refs = np.zeros(0, dtype=np.int32)
        self._free: list[int] = []
        self.unordered = 0
        """Ids given out of order since the last :meth:`renumber` (reused or single acquisitions)."""
        self._merged = Scratch(1)  # satisfied's pids with reuse

    def _owner(self, p: Pred):
        """The evaluator of ``p`` (by operator and type, looked up once per pair)."""
        owner = self._owners.get((p.op, p.kind))
        if owner is None:
            owner = next((e for e in self.evaluators if e.owns(p)), None)
            if owner is None:
                raise ValueError(f"no phase-1 evaluator owns predicate {p}")
            self._owners[(p.op, p.kind)] = owner
        return owner

    def _attr_id(self, name: str) -> int:
        return self.dictionary.attr(name)  # a name only events had asked for becomes a subscription's too

    def _new_handles(self, n: int) -> int:
        """Reserve ``n`` handles; returns the first."""
        first = self._n_handles
        self._n_handles += n
        self._pid_of = grown(self._pid_of, self._n_handles, -1)
        return first

    def _compact_handles(self) -> None:
        """Handle = id for every live predicate (handles of released or known predicates
        offered to :meth:`acquire_many` are otherwise never reused)."""
        self._ids = {p: pid for pid, p in enumerate(self._preds) if p is not None}
        self._pid_of = np.arange(len(self._preds), dtype=np.int32)
        self._n_handles = len(self._preds)

    def acquire(self, p: Pred) -> int:
        """Id of ``p``, adding it on first use; every call takes one reference."""
        h = self._ids.get(p)
        if h is not None:
            pid = int(self._pid_of[h])
            self._refs[pid] += 1
            return pid
        owner = self._owner(p)
        pid = stored(self._preds, self._free, p)
        self._refs = grown(self._refs, pid + 1)
        self._refs[pid] = 1
        h = self._new_handles(1)
        self._pid_of[h] = pid
        self._ids[p] = h
        self.unordered += 1
        owner.add(pid, p, self._attr_id(p.attr))
        return pid

    def acquire_many(self, preds: list[Pred]) -> np.ndarray:
        """Ids of ``preds`` (int32, in order), as :meth:`acquire` on each, in bulk.

        The batch's new predicates take ids in (attribute, type, operator, operand)
        order: consecutive ids when no freed id is waiting for reuse.  Each predicate
        object is hashed once (and each new one once more): a bulk read makes the
        predicates its subscriptions repeat one object (:func:`matchers.packed.from_tuples`).
        """
        n = len(preds)
        by_object = dict(zip(map(id, preds), preds, strict=True))  # each object once (held by ``preds`` meanwhile)
        objects = list(by_object.values())
        m = len(objects)
        if m == n:
            return self.acquire_counted(objects)
        position = dict(zip(by_object, range(m), strict=True))
        at = np.fromiter(map(position.__getitem__, map(id, preds)), dtype=np.int64, count=n)
        return self.acquire_counted(objects, np.bincount(at, minlength=m))[at]

    def acquire_counted(self, preds: list[Pred], counts: np.ndarray | None = None) -> np.ndarray:
        """Ids of ``preds`` (int32, in order: distinct objects, equal or not), each taking
        ``counts[i]`` references (at least one; one each without ``counts``), as :meth:`acquire_many`."""
        if self._n_handles > 2 * len(self._ids) + 4096:
            self._compact_handles()
        ids = self._ids
        objects, m = preds, len(preds)
        base = self._new_handles(m)  # handle of a new predicate: base + its first position
        found = np.fromiter(map(ids.setdefault, objects, itertools.count(base)), dtype=np.int64, count=m)
        first = np.flatnonzero(found == base + np.arange(m, dtype=np.int64))
        if len(first):
            new = [objects[i] for i in first.tolist()]
            try:
                self._pid_of[base + first] = self._add_new(new)
            except BaseException:
                for p in new:
                    del ids[p]
                raise
        out = self._pid_of[found]
        if counts is None:
            counts = np.ones(m, dtype=np.int64)
        if m < self.capacity // 16:
            np.add.at(self._refs, out, counts.astype(self._refs.dtype))
        else:
            self._refs[: self.capacity] += np.bincount(out, counts, minlength=self.capacity).astype(self._refs.dtype)
        return out

    def _add_new(self, new: list[Pred]) -> np.ndarray:
        """Give ids to ``new`` and hand them to their evaluators; returns the ids."""
        attrs, ops, kinds, operands = zip(*map(_FIELDS, new), strict=True)
        known = self.dictionary.attr_ids
        for name in set(attrs):  # new names, and names only events had asked for (see Dictionary.attr)
            if self.dictionary.attr(name) < 0:
                raise MemoryError(f"attribute dictionary is full ({self.dictionary.max_attributes} names)")
        cols = PredColumns(np.array([known[a] for a in attrs], dtype=np.int32), np.array(ops, dtype=np.int8),
                           np.array(kinds, dtype=np.int8), list(operands))
        pair = cols.ops.astype(np.int64) * 4 + cols.kinds
        owner = np.zeros(len(new), dtype=np.int8)
        for code, i in zip(*np.unique(pair, return_index=True), strict=True):
            owner[pair == code] = self._evaluator_index(new[int(i)])
        order = np.lexsort((cols.first_numbers(), cols.ops, cols.kinds, cols.attr_ids))
        n_new = len(new)
        n_reuse = min(len(self._free), n_new)
        reused = sorted(self._free[len(self._free) - n_reuse:])
        start = len(self._preds)
        pids = np.empty(n_new, dtype=np.int32)
        pids[order] = np.r_[np.asarray(reused, dtype=np.int32), np.arange(start, start + n_new - n_reuse)]
        for e, ev in enumerate(self.evaluators):
            idx = np.flatnonzero(owner == e)
            if len(idx) == 0:
                continue
            part = [new[i] for i in idx.tolist()]
            if hasattr(ev, "add_many"):
                ev.add_many(pids[idx], part, cols.take(idx))
            else:
                for pid, p, aid in zip(pids[idx].tolist(), part, cols.attr_ids[idx].tolist(), strict=True):
                    ev.add(pid, p, aid)
        del self._free[len(self._free) - n_reuse:]
        self.unordered += n_reuse
        in_order = [new[i] for i in order.tolist()]
        for p, pid in zip(in_order[:n_reuse], reused, strict=True):
            self._preds[pid] = p
        self._preds.extend(in_order[n_reuse:])
        self._refs = grown(self._refs, len(self._preds))
        return pids

    def _evaluator_index(self, p: Pred) -> int:
        owner = self._owner(p)
        return next(i for i, e in enumerate(self.evaluators) if e is owner)

    def release(self, p: Pred) -> None:
        """Drop one reference to ``p``; the predicate leaves the index with its last one."""
        h = self._ids[p]
        pid = int(self._pid_of[h])
        self._refs[pid] -= 1
        if self._refs[pid] == 0:
            self._owner(p).remove(pid, p, self._attr_id(p.attr))
            del self._ids[p]
            self._pid_of[h] = -1
            self._preds[pid] = None
            self._free.append(pid)

    def release_counted(self, pids: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Drop ``counts[i]`` references (one each without ``counts``) to id ``pids[i]`` (distinct
        live ids), as :meth:`release` per reference; only predicates losing their last one are hashed."""
        pids = np.asarray(pids, dtype=np.int64)
        counts = np.ones(len(pids), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
        if len(pids) == 0:
            return
        if len(np.unique(pids)) != len(pids) or pids.min() < 0 or pids.max() >= self.capacity:
            raise ValueError("release_counted takes distinct ids in the index")
        left = self._refs[pids] - counts
        if (left < 0).any() or (counts < 1).any():
            raise ValueError("release_counted drops more references than an id holds")
        self._refs[pids] = left
        for pid in pids[left == 0].tolist():
            p = self._preds[pid]
            assert p is not None  # a referenced id holds its predicate
            self._owner(p).remove(pid, p, self._attr_id(p.attr))
            self._pid_of[self._ids.pop(p)] = -1
            self._preds[pid] = None
            self._free.append(pid)

    def renumber(self) -> np.ndarray | None:
        """Give the live predicates ids ``0..len-1`` in (attribute, type, operator, operand) order.

        Returns ``new_of_old`` (int32 over the old capacity, ``-1`` for a free id) for
        callers to remap the ids they hold, or ``None``, changing nothing, when an
        evaluator cannot renumber (it has no ``renumber(new_of_old)`` method).
        """
        if not all(hasattr(e, "renumber") for e in self.evaluators):
            return None
        live = [i for i, p in enumerate(self._preds) if p is not None]
        preds = [p for p in self._preds if p is not None]
        attr_ids = np.fromiter((self.dictionary.attr_ids[p.attr] for p in preds), dtype=np.int32,
                               count=len(preds))
        order = sort_order(preds, attr_ids)
        old = np.asarray(live, dtype=np.int64)[order]
        new_of_old = np.full(len(self._preds), -1, dtype=np.int32)
        new_of_old[old] = np.arange(len(old), dtype=np.int32)
        for e in self.evaluators:
            e.renumber(new_of_old)
        self._preds = [preds[i] for i in order.tolist()]
        used = self._pid_of[: self._n_handles] >= 0
        self._pid_of[: self._n_handles][used] = new_of_old[self._pid_of[: self._n_handles][used]]
        refs = np.zeros(len(self._preds), dtype=np.int32)
        refs[:] = self._refs[old]
        self._refs = refs
        self._free = []
        self.unordered = 0
        return new_of_old

    def id_of(self, p: Pred) -> int:
        """Id of a predicate in the index (``KeyError`` if absent)."""
        return int(self._pid_of[self._ids[p]])

    def predicate(self, pid: int) -> Pred:
        p = self._preds[pid]
        if p is None:
            raise KeyError(pid)
        return p

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def capacity(self) -> int:
        """One more than the largest id ever given (size for per-predicate arrays)."""
        return len(self._preds)

    def satisfied(self, batch: EventBatch, reuse: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Satisfied predicate ids of each event, as CSR ``(offsets int64[n+1], pids int32)``;
        with ``reuse`` the pids may be in a buffer of the index that its next call overwrites
        (for a caller done with them by then: no allocation, no page faults)."""
        parts = [e.satisfied(batch) for e in self.evaluators]  # each held until the evaluator's next call
        parts = [p for p in parts if len(p[0])] or parts[:1]
        total = sum(len(p[0]) for p in parts)
        self.per_event = total / max(batch.n, 1)
        if len(parts) == 1:
            ev, pid = parts[0]
            return kernels.grouped_to_csr(batch.n, ev, pid if reuse else pid.copy())
        out = self._merged.take(total)[0] if reuse else np.empty(total, dtype=np.int32)
        merged = kernels.merge_grouped(batch.n, tuple(np.ascontiguousarray(p[0], np.int32) for p in parts),
                                       tuple(np.ascontiguousarray(p[1], np.int32) for p in parts), out)
        if merged is not None:
            return merged
        return kernels.pairs_to_csr(batch.n, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def memory_bytes(self) -> int:
        """Evaluator structures, the id table and the reference counts."""
        table = sys.getsizeof(self._ids) + 8 * len(self._preds) + self._refs.nbytes + self._pid_of.nbytes
        return sum(e.memory_bytes() for e in self.evaluators) + table


def sort_order(preds: list[Pred], attr_ids: np.ndarray) -> np.ndarray:
    """Positions of ``preds`` in (attribute, type, operator, first numeric operand) order."""
    if not preds:
        return np.zeros(0, dtype=np.int64)
    _, ops, kinds, operands = zip(*map(_FIELDS, preds), strict=True)
    cols = PredColumns(attr_ids, np.array(ops, dtype=np.int8), np.array(kinds, dtype=np.int8), list(operands))
    return np.lexsort((cols.first_numbers(), cols.ops, cols.kinds, cols.attr_ids))


_FIELDS = operator.attrgetter("attr", "op", "kind", "operand")

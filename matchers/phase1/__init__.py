"""Phase 1 of two-phase matching: which distinct predicates does each event satisfy?

:class:`PredicateIndex` gives every distinct predicate a dense id (shared, reference
counted) and hands it to the evaluator that owns its operator:

* :class:`~matchers.phase1.equality.EqualityEvaluator`: ``= != IN NOT IN`` (hashing);
* a range evaluator for numeric ``< <= > >= BETWEEN NOT BETWEEN``: by default
  :class:`~matchers.phase1.ranges.RangeEvaluator` (sorted operands), replaceable;
* :class:`~matchers.strings.StringEvaluator`: the string side path.

An evaluator has ``owns(pred) -> bool``, ``add(pid, pred, attr_id)``,
``remove(pid, pred, attr_id)``, ``satisfied(batch) -> (event_idx, pid)`` (int32 pairs)
and ``memory_bytes()``.
"""

from __future__ import annotations

import numpy as np

from matchers.events import Dictionary, EventBatch
from matchers.expr import Pred
from matchers.phase1 import kernels
from matchers.phase1.equality import EqualityEvaluator
from matchers.phase1.ranges import RangeEvaluator
from matchers.strings import StringEvaluator

__all__ = ["PredicateIndex", "EqualityEvaluator", "RangeEvaluator", "StringEvaluator"]


class PredicateIndex:
    """Distinct predicates with dense ids and the evaluators that test them.

    Parameters
    ----------
    dictionary : the shared attribute and string dictionaries.
    range_evaluator : evaluator for numeric ranges (default :class:`RangeEvaluator`).
    """

    def __init__(self, dictionary: Dictionary, range_evaluator=None):
        self.dictionary = dictionary
        self.evaluators = [
            EqualityEvaluator(dictionary),
            range_evaluator if range_evaluator is not None else RangeEvaluator(),
            StringEvaluator(),
        ]
        self._owners: dict[tuple, object] = {}
        self._ids: dict[Pred, int] = {}
        self._preds: list[Pred | None] = []
        self._refs: list[int] = []
        self._free: list[int] = []

    def _owner(self, p: Pred):
        """The evaluator of ``p`` (by operator and type, looked up once per pair)."""
        owner = self._owners.get((p.op, p.kind))
        if owner is None:
            owner = next((e for e in self.evaluators if e.owns(p)), None)
            if owner is None:
                raise ValueError(f"no phase-1 evaluator owns predicate {p}")
            self._owners[(p.op, p.kind)] = owner
        return owner

    def acquire(self, p: Pred) -> int:
        """Id of ``p``, adding it on first use; every call takes one reference."""
        pid = self._ids.get(p)
        if pid is not None:
            self._refs[pid] += 1
            return pid
        if self._free:
            pid = self._free.pop()
            self._preds[pid] = p
            self._refs[pid] = 1
        else:
            pid = len(self._preds)
            self._preds.append(p)
            self._refs.append(1)
        self._ids[p] = pid
        owner = self._owners.get((p.op, p.kind)) or self._owner(p)
        attr_id = self.dictionary.attr_ids.get(p.attr)
        owner.add(pid, p, attr_id if attr_id is not None else self.dictionary.attr(p.attr))
        return pid

    def release(self, p: Pred) -> None:
        """Drop one reference to ``p``; the predicate leaves the index with its last one."""
        pid = self._ids[p]
        self._refs[pid] -= 1
        if self._refs[pid] == 0:
            self._owner(p).remove(pid, p, self.dictionary.attr(p.attr))
            del self._ids[p]
            self._preds[pid] = None
            self._free.append(pid)

    def id_of(self, p: Pred) -> int:
        """Id of a predicate in the index (``KeyError`` if absent)."""
        return self._ids[p]

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

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """Satisfied predicate ids of each event, as CSR ``(offsets int64[n+1], pids int32)``."""
        parts = [e.satisfied(batch) for e in self.evaluators]
        ev = np.concatenate([p[0] for p in parts])
        pid = np.concatenate([p[1] for p in parts])
        return kernels.pairs_to_csr(batch.n, ev, pid)

    def memory_bytes(self) -> int:
        """Evaluator structures plus the id table."""
        return sum(e.memory_bytes() for e in self.evaluators) + 16 * len(self._preds)

"""Phase-1 range evaluator on VCI indexes, for :class:`matchers.phase1.PredicateIndex`.

``PredicateIndex(dictionary, range_evaluator=VciRangeEvaluator())`` evaluates the
numeric ``< <= > >= BETWEEN NOT BETWEEN`` predicates with one
:class:`~matchers.vci.grid.GridIntervalIndex` per attribute: each predicate becomes one
interval (two for ``NOT BETWEEN``) and an event value is one stabbing query.  Changes
are buffered and applied in bulk before the next match.
"""

from __future__ import annotations

import numpy as np

from matchers.arrays import grown
from matchers.events import NUM, EventBatch
from matchers.expr import Kind, Op, Pred
from matchers.vci.grid import GridIntervalIndex
from matchers.vci.intervals import pred_intervals

_OPS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN, Op.NOT_BETWEEN})
_EMPTY = np.zeros(0, dtype=np.int32)


class AttributeIntervals:
    """The intervals of one attribute: their index, their owners and the pending changes."""

    def __init__(self, scheme: str, L: int, max_units: int):
        self.index = GridIntervalIndex(scheme, L, max_units)
        self.owner = np.zeros(64, dtype=np.int32)  # interval id -> predicate id
        self.free: list[int] = []
        self.next_id = 0
        self.adds: dict[int, tuple[float, float, bool, bool]] = {}
        self.removes: list[int] = []

    def new_id(self, owner: int) -> int:
        """A free interval id, owned by ``owner`` (a predicate id or a subscription key)."""
        iid = self.free.pop() if self.free else self.next_id
        if iid == self.next_id:
            self.next_id += 1
        self.owner = grown(self.owner, iid + 1)
        self.owner[iid] = owner
        return iid

    def add(self, owner: int, intervals) -> list[int]:
        """Queue intervals owned by ``owner``; returns their interval ids."""
        iids = []
        for interval in intervals:
            iid = self.new_id(owner)
            self.adds[iid] = tuple(interval)
            iids.append(iid)
        return iids

    def remove(self, iids: list[int]) -> None:
        """Queue the removal of intervals."""
        for iid in iids:
            if self.adds.pop(iid, None) is None:
                self.removes.append(iid)
            self.free.append(iid)

    def flush(self) -> None:
        """Apply the queued changes to the index."""
        if self.removes:
            self.index.delete(self.removes)
            self.removes = []
        if self.adds:
            ids = np.fromiter(self.adds, dtype=np.int64, count=len(self.adds))
            rows = list(self.adds.values())
            self.index.insert(ids, [r[0] for r in rows], [r[1] for r in rows],
                              [r[2] for r in rows], [r[3] for r in rows])
            self.adds = {}


class VciRangeEvaluator:
    """Numeric range predicates through per-attribute VCI indexes.

    Parameters
    ----------
    scheme : VCI scheme of the indexes (see :data:`matchers.vci.layout.SCHEMES`).
    L : longest virtual construct interval.
    max_units : grid points per attribute domain (see :class:`GridIntervalIndex`).
    """

    def __init__(self, scheme: str = "LCI-BV(DT)", L: int = 64, max_units: int = 1 << 12):
        self.scheme, self.L, self.max_units = scheme, L, max_units
        self._attrs: dict[int, AttributeIntervals] = {}
        self._of_pid: dict[int, tuple[int, list[int]]] = {}

    @staticmethod
    def owns(p: Pred) -> bool:
        return p.kind is Kind.NUM and p.op in _OPS

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        """Index predicate ``pid`` (one of the owned operators) on attribute ``attr_id``."""
        if pid in self._of_pid:
            raise ValueError(f"predicate id {pid} is already indexed")
        attr = self._attrs.get(attr_id)
        if attr is None:
            attr = self._attrs[attr_id] = AttributeIntervals(self.scheme, self.L, self.max_units)
        self._of_pid[pid] = (attr_id, attr.add(pid, pred_intervals(p)))

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        """Forget predicate ``pid``."""
        attr_id, iids = self._of_pid.pop(pid)
        self._attrs[attr_id].remove(iids)

    def __len__(self) -> int:
        return len(self._of_pid)

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` int32 pairs of the satisfied predicates, ascending by event."""
        if not self._of_pid or batch.n == 0:
            return _EMPTY, _EMPTY
        return stab(batch, self._attrs)

    def memory_bytes(self) -> int:
        """The attribute indexes and the interval -> predicate maps."""
        total = 0
        for attr in self._attrs.values():
            attr.flush()
            total += attr.index.memory_bytes() + attr.owner.nbytes
        return total


def stab(batch: EventBatch, attrs: dict[int, AttributeIntervals]) -> tuple[np.ndarray, np.ndarray]:
    """``(event_idx, owner)`` int32 pairs: the intervals containing each numeric event value.

    Pairs are ascending by event; ``attrs`` maps attribute ids to their intervals.
    """
    entries = np.flatnonzero(batch.kinds == NUM)
    if len(entries) == 0:
        return _EMPTY, _EMPTY
    entry_attrs = batch.attrs[entries]
    order = np.argsort(entry_attrs, kind="stable")
    entries, entry_attrs = entries[order], entry_attrs[order]
    cuts = np.flatnonzero(np.diff(entry_attrs)) + 1
    starts = np.concatenate([[0], cuts]).tolist()
    ends = np.concatenate([cuts, [len(entries)]]).tolist()
    events = (np.searchsorted(batch.offsets, entries, side="right") - 1).astype(np.int32)
    ev_parts, owner_parts = [], []
    for s, e in zip(starts, ends, strict=True):
        attr = attrs.get(int(entry_attrs[s]))
        if attr is None:
            continue
        attr.flush()
        if not len(attr.index):
            continue
        offsets, iids = attr.index.query_many(batch.nums[entries[s:e]])
        ev_parts.append(np.repeat(events[s:e], np.diff(offsets)))
        owner_parts.append(attr.owner[iids])
    if not ev_parts:
        return _EMPTY, _EMPTY
    if len(ev_parts) == 1:  # one attribute: entries, hence events, are already in order
        return ev_parts[0], owner_parts[0]
    ev = np.concatenate(ev_parts)
    owner = np.concatenate(owner_parts)
    order = np.argsort(ev, kind="stable")
    return ev[order], owner[order]

"""VCI interval indexing (Wu, Chen, Yu, Mei): the index, its baselines, and its matchers.

* :class:`~matchers.vci.interval_index.IntervalIndex`: the paper's index over integer cells, in
  every scheme (SCI, SCI-BC, LCI, LCI-BC, LCI-BV, LCI-BV(DT), and SCI-BV, SCI-BV(DT)).
* :class:`~matchers.vci.grid.GridIntervalIndex`: real intervals (open, closed,
  half-infinite, zero-length) and any value, exact, on top of it.
* :class:`~matchers.vci.evaluator.VciRangeEvaluator`: the phase-1 range evaluator.
* :class:`VciMatcher`, registered as ``"vci"``: the stand-alone matcher.
"""

from __future__ import annotations

import numpy as np

from matchers.arrays import grown
from matchers.base import Matcher, Matches, register
from matchers.catalog import create
from matchers.events import EventBatch
from matchers.expr import Subscription
from matchers.vci import kernels
from matchers.vci.evaluator import AttributeIntervals, VciRangeEvaluator, stab
from matchers.vci.grid import GridIntervalIndex
from matchers.vci.interval_index import IntervalIndex
from matchers.vci.intervals import Interval, conjunction_intervals, is_interval_pred, union

__all__ = ["IntervalIndex", "GridIntervalIndex", "VciRangeEvaluator", "VciMatcher", "interval_form"]


def interval_form(sub: Subscription) -> tuple[str, list[Interval]] | None:
    """``(attribute, disjoint intervals)`` when ``sub`` tests one numeric attribute only.

    That is, every conjunction of its DNF is made of numeric ``= != < <= > >= IN NOT IN
    BETWEEN NOT BETWEEN`` predicates on one and the same attribute; ``None`` otherwise.
    """
    attr = None
    parts: list[Interval] = []
    for conj in sub.conjunctions:
        names = {p.attr for p in conj}
        if len(names) != 1 or not all(is_interval_pred(p) for p in conj):
            return None
        name = names.pop()
        if attr is not None and name != attr:
            return None
        attr = name
        parts.extend(conjunction_intervals(conj))
    if attr is None:
        return None
    return attr, union(parts)


@register("vci")
class VciMatcher(Matcher):
    """Single-attribute interval subscriptions on VCI indexes; the rest delegated.

    A subscription whose expression tests one numeric attribute (``price BETWEEN 10 AND
    20``, ``x < 3 OR x >= 7``, ``x != 0``) becomes disjoint intervals in that attribute's
    VCI index, and an event value is one stabbing query.  Any other subscription is
    handed to an inner ``"counting"`` matcher over the same dictionary.

    Parameters
    ----------
    scheme : VCI scheme (see :data:`matchers.vci.layout.SCHEMES`).
    L : longest virtual construct interval.
    max_units : grid points per attribute domain.
    """

    def __init__(self, dictionary=None, scheme: str = "LCI-BV(DT)", L: int = 64,
                 max_units: int = 1 << 12, **params):
        super().__init__(dictionary, **params)
        GridIntervalIndex(scheme, L, max_units)  # validates the parameters
        self.scheme, self.L, self.max_units = scheme, L, max_units
        self._attrs: dict[int, AttributeIntervals] = {}
        self._placed: dict[int, tuple[int, list[int]]] = {}  # key -> (attribute, interval ids)
        self.inner = create("counting", self.dictionary)
        self._inner_key = np.zeros(0, dtype=np.int32)  # inner key -> our key

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        delegated = []
        for key, sub in entries:
            form = interval_form(sub)
            if form is None:
                delegated.append(sub)
                continue
            attr_id = self.dictionary.attr(form[0])
            attr = self._attrs.get(attr_id)
            if attr is None:
                attr = self._attrs[attr_id] = AttributeIntervals(self.scheme, self.L, self.max_units)
            self._placed[key] = (attr_id, attr.add(key, form[1]))
        if delegated:
            self.inner.add(delegated)
            self._inner_key = grown(self._inner_key, self.inner.capacity, -1)
            for sub in delegated:
                self._inner_key[self.inner.key_of(sub.id)] = self.key_of(sub.id)

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        delegated = []
        for key, sub in entries:
            placed = self._placed.pop(key, None)
            if placed is None:
                delegated.append(sub.id)
            else:
                self._attrs[placed[0]].remove(placed[1])
        if delegated:
            self.inner.remove(delegated)

    def _match(self, batch: EventBatch) -> Matches:
        ev, keys = stab(batch, self._attrs) if self._placed else (np.zeros(0, np.int32),) * 2
        if len(self.inner):
            inner = self.inner.match(batch)
            ev = np.concatenate([ev, np.repeat(np.arange(batch.n, dtype=np.int32), np.diff(inner.offsets))])
            keys = np.concatenate([keys, self._inner_key[inner.keys]])
        return Matches(*kernels.pairs_to_sorted_csr(batch.n, ev, keys))

    @property
    def delegated(self) -> int:
        """How many subscriptions the inner counting matcher holds."""
        return len(self.inner)

    def memory_bytes(self) -> int:
        """Attribute indexes (after applying queued changes), the inner matcher, the key maps."""
        total = 0
        for attr in self._attrs.values():
            attr.flush()
            total += attr.index.memory_bytes() + attr.owner.nbytes
        return total + self.inner.memory_bytes() + self._inner_key.nbytes + 64 * len(self._placed)

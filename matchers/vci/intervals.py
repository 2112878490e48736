"""Numeric predicates as sets of real intervals (the input of the interval indexes).

Every operator on a number denotes a union of disjoint intervals of the value (the
predicate is false on a missing attribute or a value of another type, which the
callers test separately): ``< <= > >=`` one half-infinite interval, ``BETWEEN`` one
closed interval, ``=`` / ``IN`` points, ``!=`` / ``NOT IN`` / ``NOT BETWEEN`` the gaps
around them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from matchers.expr import Kind, Op, Pred

INF = math.inf

NUMERIC_OPS = frozenset({
    Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.IN, Op.NOT_IN, Op.BETWEEN, Op.NOT_BETWEEN,
})
"""Operators whose numeric predicates are interval sets."""


class Interval(NamedTuple):
    """``lo .. hi`` with each end included when its flag is set (infinite ends are open)."""

    lo: float
    hi: float
    lo_closed: bool
    hi_closed: bool

    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_closed and self.hi_closed))

    def contains(self, v: float) -> bool:
        return (v > self.lo or (self.lo_closed and v == self.lo)) and (
            v < self.hi or (self.hi_closed and v == self.hi))


def point(v: float) -> Interval:
    return Interval(v, v, True, True)


def _gaps(points: list[float]) -> list[Interval]:
    """The open intervals around and between sorted distinct points."""
    out, prev = [], -INF
    for v in points:
        out.append(Interval(prev, v, False, False))
        prev = v
    out.append(Interval(prev, INF, False, False))
    return out


def is_interval_pred(p: Pred) -> bool:
    """Whether ``p`` is a numeric predicate an interval index can evaluate."""
    return p.kind is Kind.NUM and p.op in NUMERIC_OPS


def pred_intervals(p: Pred) -> list[Interval]:
    """The disjoint intervals, ascending, of the values satisfying numeric predicate ``p``."""
    op = p.op
    x: Any = p.operand
    if op is Op.LT:
        return [Interval(-INF, x, False, False)]
    if op is Op.LE:
        return [Interval(-INF, x, False, True)]
    if op is Op.GT:
        return [Interval(x, INF, False, False)]
    if op is Op.GE:
        return [Interval(x, INF, True, False)]
    if op is Op.BETWEEN:
        return [Interval(x[0], x[1], True, True)]
    if op is Op.NOT_BETWEEN:
        return [Interval(-INF, x[0], False, False), Interval(x[1], INF, False, False)]
    if op is Op.EQ:
        return [point(x)]
    if op is Op.IN:
        return [point(v) for v in x]
    if op is Op.NE:
        return _gaps([x])
    if op is Op.NOT_IN:
        return _gaps(list(x))
    raise ValueError(f"{p} is not an interval predicate")


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Intersection of two interval sets (each disjoint), normalised."""
    out = []
    for u in a:
        for v in b:
            if u.lo > v.lo:
                lo, loc = u.lo, u.lo_closed
            elif v.lo > u.lo:
                lo, loc = v.lo, v.lo_closed
            else:
                lo, loc = u.lo, u.lo_closed and v.lo_closed
            if u.hi < v.hi:
                hi, hic = u.hi, u.hi_closed
            elif v.hi < u.hi:
                hi, hic = v.hi, v.hi_closed
            else:
                hi, hic = u.hi, u.hi_closed and v.hi_closed
            w = Interval(lo, hi, loc, hic)
            if not w.empty():
                out.append(w)
    return union(out)


def union(intervals: list[Interval]) -> list[Interval]:
    """Disjoint, ascending intervals covering the same values (touching ones merged)."""
    items = sorted((i for i in intervals if not i.empty()), key=lambda i: (i.lo, not i.lo_closed))
    out: list[Interval] = []
    for i in items:
        if out:
            last = out[-1]
            touches = i.lo < last.hi or (i.lo == last.hi and (i.lo_closed or last.hi_closed))
            if touches:
                if i.hi > last.hi or (i.hi == last.hi and i.hi_closed and not last.hi_closed):
                    out[-1] = Interval(last.lo, i.hi, last.lo_closed, i.hi_closed)
                continue
        out.append(i)
    return out


def conjunction_intervals(conj: tuple[Pred, ...]) -> list[Interval]:
    """Interval set of a conjunction of numeric predicates on one attribute."""
    result = [Interval(-INF, INF, False, False)]
    for p in conj:
        result = intersect(result, pred_intervals(p))
        if not result:
            break
    return result

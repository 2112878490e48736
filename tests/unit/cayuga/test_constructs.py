"""The language's constructs beyond the EDBT 2006 algebra, each against the reference evaluator."""

from __future__ import annotations

import math

from matchers.cayuga.algebra import Event
from matchers.cayuga.static import StaticFilters

from .helpers import engine_matches, reference_matches, same


def _stock(*ticks) -> list[Event]:
    return [Event(f"e{i}", "Stock", t, t, {"price": p}) for i, (t, p) in enumerate(ticks)]


def _pairs(matches) -> list[tuple]:
    return sorted(m[5] for m in matches)


def test_nan_bound_keeps_the_sorted_instances_usable():
    events = _stock((0, 7), (0, math.nan), (0, 5), (1, 10))
    subs = {"q": "Stock NEXT{$2.price > $1.price} Stock"}
    assert _pairs(reference_matches(subs, events)) == [("e0", "e3"), ("e2", "e3")]
    for kw in ({}, {"indexed": False}):
        assert same(engine_matches(subs, events, **kw)) == same(reference_matches(subs, events))


def test_nan_from_arithmetic_overflow():
    events = _stock((0, math.inf), (1, 3), (1, 1), (2, 4))
    subs = {"q": "Stock NEXT{$2.price > $1.price - $1.price} Stock"}  # inf - inf is NaN
    assert same(engine_matches(subs, events)) == same(reference_matches(subs, events))
    assert _pairs(reference_matches(subs, events)) == [("e1", "e3"), ("e2", "e3")]


def test_nan_event_satisfies_no_static_range():
    sf = StaticFilters()
    sf.add(0, "Stock", (("price", ">=", 5),))
    sf.add(1, "Stock", (("price", "<=", 5),))
    sf.add(2, "Stock", (("price", "!=", 5),))
    assert sf.match("Stock", {"price": math.nan}) == {2}
    assert sf.match("Stock", {"price": 5}) == {0, 1}

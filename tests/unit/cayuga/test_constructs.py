"""The language's constructs beyond the EDBT 2006 algebra, each against the reference evaluator."""

from __future__ import annotations

import math

import pytest

from matchers.cayuga.algebra import Event
from matchers.cayuga.engine import Engine
from matchers.cayuga.language import parse
from matchers.cayuga.static import StaticFilters
from matchers.errors import SubscriptionError

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


def test_three_rising_prices_within_10_ticks():
    text = ("FILTER{name = 'IBM'}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
            " NEXT{$2.name = $1.name AND $2.price > $1.price} Stock WITHIN 10")
    events = [Event(f"e{i}", "Stock", t, t, {"name": "IBM", "price": p})
              for i, (t, p) in enumerate([(0, 1), (4, 2), (10, 3), (11, 4), (30, 5)])]
    assert _pairs(reference_matches({"q": text}, events)) == [("e0", "e1", "e2"), ("e1", "e2", "e3")]
    assert same(engine_matches({"q": text}, events)) == same(reference_matches({"q": text}, events))


def test_within_bounds_every_node_of_the_chain():
    eng = Engine()
    eng.add("q", "A NEXT{TRUE} B NEXT{TRUE} C WITHIN 5")
    assert all(node.deadline == 6 for node in eng.nodes.values())
    for t in range(100):
        eng.process(Event(f"a{t}", "A", t, t, {}))
    assert eng.instances <= 7


@pytest.mark.parametrize(("text", "position", "message"), [
    ("S NEXT{TRUE} SELECT a FROM T", 14, "needs parentheses"),
    ("S UNION select * FROM T", 9, "needs parentheses"),
    ("S FOLD{TRUE, TRUE} (A NEXT{TRUE} B)", 21, "left-deep"),
    ("S NEXT{TRUE}\n  (A UNION B)", "line 2, column 4", "left-deep"),
])
def test_positioned_errors(text, position, message):
    with pytest.raises(SubscriptionError) as exc:
        parse(text)
    assert exc.value.position == position and message in exc.value.reason


def test_select_inside_filter_needs_no_double_parentheses():
    assert parse("FILTER{x > 1}(SELECT * FROM S)") == parse("FILTER{x > 1}((SELECT * FROM S))")


def test_min_max_values():
    from matchers.cayuga import algebra as A
    from matchers.cayuga.closures import value_fn

    # the first of the smallest (1, not 1.0); NaN propagates; a mismatch or a missing value is unknown
    cases = [([3, 1, 2], 1, 3), ([1, 1.0], 1, 1), ([1.0, 1], 1.0, 1.0), (["b", "a"], "a", "b"), ([1, "a"], None, None),
             ([1, None], None, None), ([True, 1], None, None), ([2, math.nan], math.nan, math.nan), ([math.inf, 1], 1, math.inf)]
    for values, lo, hi in cases:
        ctx = {A.LAST: {f"v{i}": v for i, v in enumerate(values) if v is not None}}
        args = tuple(A.Attr(A.LAST, f"v{i}") for i in range(len(values)))
        for name, want in (("min", lo), ("max", hi)):
            term = A.Func(name, args)
            got = A.eval_value(term, ctx, None)
            assert (repr(got), type(got)) == (repr(want), type(want)), (name, values)
            assert repr(value_fn(term)({}, ctx[A.LAST], {}, None)) == repr(got)


def test_fold_keeps_running_min_and_max():
    text = ("SELECT name, lo, hi FROM FILTER{DUR >= 3}((SELECT name, price AS lo, price AS hi FROM Stock)"
            " FOLD{$2.name = $.name, TRUE, min($.lo, $2.price) AS lo, max($.hi, $2.price) AS hi} Stock)")
    events = [Event(f"e{i}", "Stock", i, i, {"name": "A", "price": p}) for i, p in enumerate([5, 3, 8, 4])]
    got = reference_matches({"q": text}, events)
    assert [(m[2], m[5]) for m in got if m[5][0] == "e0"] == [
        ((("hi", 8), ("lo", 3), ("name", "A")), ("e0", "e1", "e2")),
        ((("hi", 8), ("lo", 3), ("name", "A")), ("e0", "e1", "e2", "e3")),
    ]
    assert same(engine_matches({"q": text}, events)) == same(got)


RISE = "Stock FOLD{$2.price > $.price, TRUE} Stock"


@pytest.mark.parametrize(("skip", "pairs"), [
    ("", [("e0", "e1"), ("e0", "e1", "e2"), ("e1", "e2"), ("e0", "e1", "e2", "e3"), ("e1", "e2", "e3"), ("e2", "e3"),
          ("e4", "e5")]),
    # the next match starts after the last event of the previous one
    ("SKIP PAST LAST", [("e0", "e1"), ("e2", "e3"), ("e4", "e5")]),
    # one match per start event: the first
    ("SKIP TO NEXT", [("e0", "e1"), ("e1", "e2"), ("e2", "e3"), ("e4", "e5")]),
])
def test_after_match_skip(skip, pairs):
    events = _stock((0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (5, 1))
    subs = {"q": f"{RISE} {skip}"}
    got = reference_matches(subs, events)
    assert sorted(m[5] for m in got) == sorted(pairs)
    assert same(engine_matches(subs, events)) == same(got)


def test_skip_marks_are_per_subscription_on_shared_nodes():
    events = _stock((0, 1), (1, 2), (2, 3), (3, 4))
    subs = {"all": RISE, "past": f"{RISE} SKIP PAST LAST", "next": f"{RISE} SKIP TO NEXT"}
    eng = Engine()
    for k, v in subs.items():
        eng.add(k, v)
    assert len(eng.nodes) == 1
    assert same(engine_matches(subs, events)) == same(reference_matches(subs, events))


def test_skip_must_end_the_subscription():
    with pytest.raises(SubscriptionError):
        parse("(S SKIP TO NEXT) NEXT{TRUE} S")

"""The VCI phase-1 evaluator (under counting) and the stand-alone "vci" matcher vs the oracle."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.catalog import create
from matchers.counting import CountingMatcher
from matchers.events import Dictionary
from matchers.expr import And, Not, Or, Subscription, pred
from matchers.phase1 import PredicateIndex, RangeEvaluator
from matchers.vci import VciMatcher, VciRangeEvaluator, interval_form
from tests.differential import check_pickled, insert_delete, no_regex
from tests.strategies import random_event, random_subscriptions

NUMS = (-1e9, -3, -1, 0, 0.5, 1, 2, 2.5, 3, 7, 10, 1e3)
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in", "between", "not between")


def _num_pred(rng: random.Random, attr: str):
    op = rng.choice(OPS)
    if op in ("in", "not in"):
        return pred(attr, op, rng.sample(NUMS, 3))
    if op in ("between", "not between"):
        return pred(attr, op, sorted(rng.sample(NUMS, 2)))
    return pred(attr, op, rng.choice(NUMS))


def _interval_sub(rng: random.Random, i: int) -> Subscription:
    """A single-attribute numeric subscription: AND / OR / NOT of 1-3 predicates."""
    attr = rng.choice(("x", "y"))
    parts = [_num_pred(rng, attr) for _ in range(rng.randint(1, 3))]
    if len(parts) == 1:
        expr = parts[0]
    else:
        expr = rng.choice((And, Or))(tuple(parts))
    if rng.random() < 0.2:
        expr = Not(expr)
    return Subscription.of(f"s{i}", expr)


def _event(rng: random.Random) -> dict:
    ev: dict[str, object] = {}
    for attr in ("x", "y", "z"):
        r = rng.random()
        if r < 0.6:
            ev[attr] = rng.choice(NUMS + (rng.uniform(-20, 20), 4, 1e12, -0.0))
        elif r < 0.7:
            ev[attr] = rng.choice(("1", True, False))
    return ev


def _run(matcher, subs, events, rng) -> None:
    insert_delete(matcher, subs, events, rng, steps=4, batch=len(subs) // 3, gone=lambda step, n: n // 3)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("scheme", ["LCI-BV(DT)", "LCI-BC", "SCI-BV", "LCI"])
def test_vci_matcher_interval_subscriptions(seed, scheme):
    rng = random.Random(seed)
    subs = [_interval_sub(rng, i) for i in range(300)]
    events = [_event(rng) for _ in range(120)]
    matcher = create("vci", scheme=scheme, L=8, max_units=64)
    _run(matcher, subs, events, rng)


@pytest.mark.parametrize("seed", [4, 5])
def test_vci_matcher_mixed_with_delegation(seed):
    rng = random.Random(seed)
    subs = [_interval_sub(rng, i) for i in range(200)] + random_subscriptions(rng, 200)
    subs = list({s.id: s for s in subs}.values())
    events = [_event(rng) | random_event(rng) for _ in range(100)]
    matcher = VciMatcher(Dictionary(), L=16)
    _run(matcher, subs, events, rng)


def test_interval_form():
    s = Subscription.of("a", And((pred("x", ">", 1), pred("x", "<=", 5))))
    attr, ivs = interval_form(s)
    assert attr == "x" and [tuple(i) for i in ivs] == [(1.0, 5.0, False, True)]
    s = Subscription.of("b", Or((pred("x", "<", 1), pred("x", "between", (0, 3)))))
    assert [tuple(i) for i in interval_form(s)[1]] == [(-np.inf, 3.0, False, True)]
    assert interval_form(Subscription.of("c", And((pred("x", ">", 1), pred("y", "<", 1))))) is None
    assert interval_form(Subscription.of("d", pred("x", "=", "IBM"))) is None
    s = Subscription.of("e", And((pred("x", ">", 5), pred("x", "<", 1))))
    assert interval_form(s) == ("x", [])
    m = VciMatcher()
    m.add([s, Subscription.of("f", pred("s", "=", "a"))])
    assert m.delegated == 1 and m.match_events([{"x": 3}, {"s": "a"}]) == [[], ["f"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counting_over_vci_evaluator_matches_oracle(seed):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 400) + [_interval_sub(rng, 1000 + i) for i in range(100)]
    events = [random_event(rng) | _event(rng) for _ in range(120)]
    matcher = CountingMatcher(range_evaluator=VciRangeEvaluator(L=8, max_units=32))
    _run(matcher, subs, events, rng)
    assert matcher.memory_bytes() > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_phase1_vci_equals_sorted_ranges(seed):
    rng = random.Random(seed)
    d1, d2 = Dictionary(), Dictionary()
    a = PredicateIndex(d1, range_evaluator=VciRangeEvaluator(L=4, max_units=16))
    b = PredicateIndex(d2, range_evaluator=RangeEvaluator())
    preds = [_num_pred(rng, rng.choice(("x", "y"))) for _ in range(40)]
    for p in preds:
        a.acquire(p)
        b.acquire(p)
    for p in rng.sample(preds, 15):
        a.release(p)
        b.release(p)
    events = [_event(rng) for _ in range(30)]
    from matchers.events import encode

    ba, bb = encode(events, d1), encode(events, d2)
    oa, pa = a.satisfied(ba)
    ob, pb = b.satisfied(bb)
    for i in range(len(events)):
        got = sorted(str(a.predicate(p)) for p in pa[oa[i]:oa[i + 1]])
        want = sorted(str(b.predicate(p)) for p in pb[ob[i]:ob[i + 1]])
        assert got == want, events[i]


def test_matcher_pickles_and_keeps_answering():
    rng = random.Random(9)
    subs = [_interval_sub(rng, i) for i in range(100)] + no_regex(random_subscriptions(rng, 50))
    subs = list({s.id: s for s in subs}.values())
    check_pickled(create("vci", L=8), subs, [_event(rng) | random_event(rng) for _ in range(40)], 30)

"""Counting matcher: the fold of pending and dead entries keeps it equal to the oracle."""

from __future__ import annotations

import random

from matchers import oracle
from matchers.counting import CountingMatcher
from matchers.expr import And, Subscription, pred
from tests.strategies import random_event, random_subscriptions


def test_folds_keep_results_equal_to_oracle():
    rng = random.Random(7)
    subs = random_subscriptions(rng, 800)
    evs = [random_event(rng) for _ in range(120)]
    matcher = CountingMatcher()
    matcher.pending_min = matcher.dead_min = 16  # fold often
    matcher.unordered_min = 0  # and renumber predicates at every fold
    live: dict[str, Subscription] = {}
    folds = 0
    for _ in range(12):
        before = len(matcher._main_val)
        batch = rng.sample(subs, 100)
        matcher.add(batch)
        live.update({s.id: s for s in batch})
        gone = rng.sample(sorted(live), 70)
        matcher.remove(gone)
        for sub_id in gone:
            del live[sub_id]
        folds += len(matcher._main_val) != before
        for event, ids in zip(evs, matcher.match_events(evs)):
            assert ids == oracle.match(live.values(), event)
    assert folds > 3


def test_shared_predicates_are_counted_once_per_conjunction():
    m = CountingMatcher()
    p, q = pred("a", "=", 1), pred("b", "<", 5)
    m.add([Subscription.of("x", p), Subscription.of("y", And((p, q)))])
    assert len(m.phase1) == 2
    assert m.match_events([{"a": 1, "b": 3}, {"a": 1}, {"b": 1}]) == [["x", "y"], ["x"], []]
    m.remove(["x"])
    assert m.match_events([{"a": 1, "b": 3}]) == [["y"]]
    m.remove(["y"])
    assert len(m.phase1) == 0


def test_large_batch_spans_chunks():
    m = CountingMatcher()
    m.add([Subscription.of(f"s{i}", pred("a", "=", float(i % 7))) for i in range(50)])
    evs = [{"a": float(i % 7)} for i in range(5000)]
    got = m.match_events(evs)
    assert got[4999] == sorted(f"s{i}" for i in range(50) if i % 7 == 4999 % 7)
    assert sum(map(len, got)) == sum(len([i for i in range(50) if i % 7 == e["a"]]) for e in evs)

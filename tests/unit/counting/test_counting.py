"""Counting matcher and its phase 1: folds, bulk acquisition order, renumbering, buffer
regrowth and deleted one-predicate conjunctions keep results equal to the oracle."""

from __future__ import annotations

import random

import numpy as np
import pytest

from matchers import oracle
from matchers.counting import CountingMatcher
from matchers.events import Dictionary
from matchers.expr import And, Or, Subscription, pred
from matchers.phase1 import PredicateIndex, RangeEvaluator
from matchers.phase1.columns import _first_number
from tests.differential import check, check_pickled
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
        check(matcher, live, evs)
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


def _phase1_reference(index: PredicateIndex, events: list[dict], dictionary) -> list[list[int]]:
    """Satisfied ids per event, by the oracle over every live predicate."""
    live = [(pid, index.predicate(pid)) for pid in range(index.capacity) if index._preds[pid] is not None]
    return [sorted(pid for pid, p in live if oracle.holds(p, e)) for e in events]


def _satisfied_lists(index: PredicateIndex, batch) -> list[list[int]]:
    off, pids = index.satisfied(batch)
    return [sorted(pids[off[i]:off[i + 1]].tolist()) for i in range(batch.n)]


def test_bulk_acquire_orders_new_ids_and_counts_references():
    rng = random.Random(3)
    preds = [p for s in random_subscriptions(rng, 300) for c in s.conjunctions for p in c]
    rng.shuffle(preds)
    d = Dictionary()
    index = PredicateIndex(d)
    pids = index.acquire_many(preds)
    assert [index.predicate(int(i)) for i in pids] == preds
    distinct = list(dict.fromkeys(preds))
    assert len(index) == len(distinct) == index.capacity
    by_id = [index.predicate(i) for i in range(index.capacity)]
    keys = [(d.attr_ids[p.attr], int(p.kind), int(p.op), _first_number(p.operand)) for p in by_id]
    assert keys == sorted(keys)
    assert index.acquire(preds[0]) == pids[0]  # single and bulk share the table
    for p in preds + [preds[0]]:
        index.release(p)
    assert len(index) == 0


def test_bulk_acquire_changes_nothing_when_a_predicate_has_no_evaluator():
    index = PredicateIndex(Dictionary())
    index.evaluators = index.evaluators[:2]  # no string side path
    good, bad = pred("a", "<", 3), pred("s", "like", "a%c")
    with pytest.raises(ValueError):
        index.acquire_many([good, bad])
    assert len(index) == 0
    assert index.acquire_many([good]).tolist() == [index.id_of(good)]


def test_renumber_restores_order_and_keeps_phase1_and_matches_equal():
    rng = random.Random(11)
    subs = random_subscriptions(rng, 400)
    evs = [random_event(rng) for _ in range(80)]
    m = CountingMatcher()
    m.pending_min = m.dead_min = 8
    m.unordered_min = 0
    live: dict[str, Subscription] = {}
    for sub in subs[:200]:  # one at a time: single acquisitions, ids out of order
        m.add([sub])
        live[sub.id] = sub
    m.remove([s.id for s in subs[:60]])
    for s in subs[:60]:
        del live[s.id]
    m.add(subs[200:260])
    live.update({s.id: s for s in subs[200:260]})
    m._rebuild()
    assert m.phase1.unordered == 0
    index = m.phase1
    d = m.dictionary
    keys = [(d.attr_ids[p.attr], int(p.kind), int(p.op), _first_number(p.operand))
            for p in (index.predicate(i) for i in range(len(index)))]
    assert keys == sorted(keys) and index.capacity == len(index)
    batch = m.encode(evs)
    assert _satisfied_lists(index, batch) == _phase1_reference(index, evs, d)
    check(m, live, evs)


class _NoRenumber:
    """A range evaluator with only the required contract (no ``add_many``, no ``renumber``)."""

    def __init__(self) -> None:
        self.inner = RangeEvaluator()

    def owns(self, p):
        return self.inner.owns(p)

    def add(self, pid, p, attr_id):
        self.inner.add(pid, p, attr_id)

    def remove(self, pid, p, attr_id):
        self.inner.remove(pid, p, attr_id)

    def satisfied(self, batch):
        return self.inner.satisfied(batch)

    def memory_bytes(self):
        return self.inner.memory_bytes()


def test_renumber_is_skipped_when_an_evaluator_cannot():
    rng = random.Random(13)
    subs = random_subscriptions(rng, 300)
    evs = [random_event(rng) for _ in range(60)]
    m = CountingMatcher(range_evaluator=_NoRenumber())
    m.pending_min = m.dead_min = 8
    m.unordered_min = 0
    for sub in subs[:150]:
        m.add([sub])
    m.remove([s.id for s in subs[:50]])
    m.add(subs[150:])
    m._rebuild()
    assert m.phase1.renumber() is None and m.phase1.unordered > 0
    live = subs[50:]
    check(m, live, evs)


def test_short_output_estimates_are_regrown():
    rng = random.Random(5)
    subs = random_subscriptions(rng, 300)
    evs = [random_event(rng) for _ in range(60)]
    m = CountingMatcher()
    m.add(subs)
    expected = m.match_events(evs)
    for ev in m.phase1.evaluators[:2]:
        ev._expect = 0.0  # buffers of 64 pairs: every evaluator reruns into exact buffers
    m._visited = np.zeros(1, dtype=np.int32)
    batch = m.encode(evs)
    assert _satisfied_lists(m.phase1, batch) == _phase1_reference(m.phase1, evs, m.dictionary)
    assert m.match_events(evs) == expected
    assert expected == [oracle.match(subs, e) for e in evs]


def test_deleted_single_predicate_conjunctions_stay_dead_when_keys_are_reused():
    m = CountingMatcher()
    p = pred("a", "=", 1)
    m.add([Subscription.of(f"x{i}", p) for i in range(10)] + [Subscription.of("or", Or((p, pred("b", "=", 2))))])
    m._rebuild()  # the one-predicate conjunctions now sit in main as keys
    m.remove([f"x{i}" for i in range(0, 10, 2)] + ["or"])
    m.add([Subscription.of(f"y{i}", pred("b", "=", 2)) for i in range(6)])  # reuse the freed keys
    got = m.match_events([{"a": 1}, {"b": 2}, {"a": 1, "b": 2}])
    xs = [f"x{i}" for i in range(1, 10, 2)]
    ys = [f"y{i}" for i in range(6)]
    assert got == [xs, ys, sorted(xs + ys)]
    m.add([Subscription.of("or", Or((p, pred("b", "=", 2))))])
    assert m.match_events([{"a": 1, "b": 2}]) == [sorted(xs + ys + ["or"])]


def test_oversized_conjunction_is_rejected_with_its_subscription(monkeypatch):
    from matchers.counting import kernels
    from matchers.errors import SubscriptionError

    monkeypatch.setattr(kernels, "MAX_SIZE", 2)
    m = CountingMatcher()
    ok = Subscription.of("ok", And((pred("a", "=", 1), pred("b", "=", 1))))
    big = Subscription.of("big", And((pred("a", "=", 1), pred("b", "=", 1), pred("c", "=", 1))))
    with pytest.raises(SubscriptionError, match="big"):
        m._insert([(0, ok), (1, big)])
    assert len(m.phase1) == 0


def test_pickled_matcher_with_string_predicates_matches_the_same():
    rng = random.Random(11)  # matching before pickling compiles the RE2 sets and automata
    check_pickled(CountingMatcher(), random_subscriptions(rng, 300), [random_event(rng) for _ in range(100)], 50)


@pytest.mark.parametrize(("n_subs", "seed"), [(20, 1), (600, 2), (5000, 3)])
def test_keys_sorted_and_distinct_per_event(n_subs, seed):
    """An event's keys come sorted and distinct whichever way they were sorted (by insertion
    for a few, through the bitmap when dense, ``np.sort`` when sparse), as the oracle's ids."""
    rng = random.Random(seed)
    subs = random_subscriptions(rng, n_subs)
    m = CountingMatcher()
    m.add(subs)
    gone = {s.id for s in rng.sample(subs, n_subs // 3)}
    m.remove(sorted(gone))  # free keys among the live ones
    evs = [random_event(rng) for _ in range(150)]
    result = m.match(m.encode(evs))
    counts = np.diff(result.offsets)
    assert (counts <= 16).any() and (n_subs < 100 or counts.max() > 16)  # short runs, and long ones
    for i in range(len(evs)):
        keys = result.keys[result.offsets[i]:result.offsets[i + 1]]
        assert (np.diff(keys) > 0).all()
    check(m, [s for s in subs if s.id not in gone], evs)


def test_keys_sorted_when_sparse_over_many_keys():
    """Twenty matches spread over 8,000 keys (more words than the bitmap is read for): ``np.sort``."""
    subs = [Subscription.of(f"k{i}", pred("k", "=", i % 400)) for i in range(8000)]
    subs += [Subscription.of(f"j{i}", And((pred("k", "=", i % 400), pred("j", "=", i % 7)))) for i in range(300)]
    m = CountingMatcher()
    m.add(subs)
    evs = [{"k": v, "j": v % 7} for v in (0, 3, 399, 200, 17)]
    result = m.match(m.encode(evs))
    assert np.diff(result.offsets).min() >= 20
    for i in range(len(evs)):
        assert (np.diff(result.keys[result.offsets[i]:result.offsets[i + 1]]) > 0).all()
    check(m, subs, evs)

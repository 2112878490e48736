"""Deferred predicates of the counting matcher: a folded conjunction is counted through its
predicates other than negated tests and ``NOT EXISTS`` (checked last), with the oracle's results
through folds, deletes, re-adds and pickling."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.counting import CountingMatcher
from matchers.counting import kernels as K
from matchers.counting.layout import near_always
from matchers.events import flatten
from matchers.expr import Subscription
from matchers.language import parse_text
from matchers.language.eventbridge import parse_pattern
from tests import differential
from tests.strategies import event_patterns, extended_array_events

EVENTS = [{}, {"a": 1.0}, {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": None}, {"a": 2.0, "c": "x"},
          {"a": 1.0, "c": "y"}, {"c": "x"}, {"b": 1.0, "c": "z"},
          flatten({"a": [1.0, 2.0], "c": "y"})]
TEXTS = ["a = 1 AND NOT EXISTS b", "a = 1 AND c != 'x'", "NOT EXISTS b AND c NOT IN ('x', 'z')",
         "NOT EXISTS a", "c != 'x'", "a = 1", "(a = 2 OR NOT EXISTS b) AND c <> 'y'", "EXISTS b AND b != 2"]


def _subs() -> list[Subscription]:
    return [Subscription.of(f"t{i}", parse_text(t)) for i, t in enumerate(TEXTS)]


def test_near_always_predicates_are_deferred_but_one_trigger_kept():
    matcher = CountingMatcher()
    subs = _subs()
    matcher.add(subs)
    differential.check(matcher, subs, EVENTS)  # the first match folds the build
    n = matcher._n_slots
    sizes, n_def = matcher._size[:n].astype(int), matcher._n_def[:n].astype(int)
    assert matcher._deferring and (n_def < sizes).all()  # every slot keeps a trigger
    for v in range(n):
        pids = matcher._flat[matcher._slot_start[v]:matcher._slot_start[v] + sizes[v]]
        near = [near_always(matcher.phase1.predicate(int(p))) for p in pids]
        assert all(near[:n_def[v]])  # the deferred ones are near-always, first
        assert n_def[v] == (sum(near) - (sum(near) == sizes[v]))  # all of them but a last trigger
    assert int(matcher._left[:n].sum()) == int((sizes - n_def).sum())  # counters back to the triggers


def test_deferred_first_orders_each_slot():
    flat = np.array([3, 1, 2, 1, 3, 0, 3], dtype=np.int32)
    starts, lengths = np.array([0, 3, 5, 6]), np.array([3, 2, 1, 1])
    near = np.array([False, False, False, True])
    out, n_def = K.deferred_first(flat, starts, lengths, near)
    assert out.tolist() == [3, 1, 2, 3, 1, 0, 3] and n_def.tolist() == [1, 1, 0, 0]
    out, n_def = K.deferred_first(flat, starts, lengths, np.ones(4, dtype=np.bool_))
    assert out.tolist() == flat.tolist() and n_def.tolist() == [2, 1, 0, 0]


def test_updates_and_pickling_after_a_fold_keep_the_oracle():
    matcher = CountingMatcher()
    matcher.pending_min = matcher.dead_min = 2  # fold at nearly every change
    subs = _subs()
    live = {s.id: s for s in subs}
    matcher.add(subs)
    differential.check(matcher, live, EVENTS)
    for gone in (["t0", "t3"], ["t6"], ["t2", "t7"]):
        matcher.remove(gone)
        for sub_id in gone:
            del live[sub_id]
        differential.check(matcher, live, EVENTS)
        again = [Subscription.of(g, parse_text(TEXTS[(int(g[1:]) + 1) % len(TEXTS)])) for g in gone]
        matcher.add(again)
        live.update({s.id: s for s in again})
        differential.check(matcher, live, EVENTS)
        clone = pickle.loads(pickle.dumps(matcher))
        differential.check(clone, live, EVENTS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns=st.lists(event_patterns(), min_size=1, max_size=12),
       evs=st.lists(extended_array_events, min_size=1, max_size=8), fold=st.sampled_from([1, 8, 4096]),
       data=st.data())
def test_hypothesis_patterns_through_folds_updates_and_pickling(patterns, evs, fold, data):
    """EventBridge patterns (anything-but, exists false, nulls, arrays, missing fields, $or) folded
    early or late, then a delete, a re-add and a pickled copy, against the oracle."""
    subs = differential.subscriptions_of(parse_pattern(p) for p in patterns)
    matcher = CountingMatcher()
    matcher.pending_min = matcher.dead_min = fold
    live = differential.check_updates(matcher, subs, evs, data, event_patterns().map(parse_pattern))
    differential.check(pickle.loads(pickle.dumps(matcher)), live, evs)

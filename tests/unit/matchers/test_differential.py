"""Every registered matcher against the reference oracle, on random workloads.

Covers every operator on numbers, strings and booleans, missing attributes, type
mismatches, DNF expansion, and interleaved add / remove / re-add (upsert) sequences;
the extended workloads add the operators beyond the classic ones (existence and null
tests, ...), which most indexes leave to their residual matcher, and null values;
the array workloads events with arrays (rows, merged per event by the base class).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create, names
from matchers.events import Dictionary, flatten
from matchers.expr import Subscription
from matchers.language import parse_subscription
from tests.differential import check, check_trees, insert_delete
from tests.strategies import (
    array_events,
    events,
    exprs,
    extended_array_events,
    extended_events,
    extended_exprs,
    random_array_event,
    random_event,
    random_subscriptions,
)

MATCHERS = names()


@pytest.mark.parametrize("name", MATCHERS)
@pytest.mark.parametrize(("seed", "extended", "arrays"), [
    (1, False, False), (2, False, False), (3, False, False), (4, True, False), (5, True, False),
    (6, False, True), (7, True, True)])
def test_delta_sequence_matches_oracle(name, seed, extended, arrays):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 500, extended=extended)
    evs = [random_array_event(rng, extended) for _ in range(100)] if arrays else [
        random_event(rng, extended) for _ in range(150)]  # events with arrays: ~2.4 rows each (up to 128)
    matcher = create(name)
    live = insert_delete(matcher, subs, evs, rng, steps=5, batch=150, gone=lambda step, _: 60 + 20 * step,
                         unknown=["never-added"])
    # upsert: same ids, new expressions
    replacements = [Subscription.of(s.id, r.expr) for s, r in zip(list(live.values())[:50], subs[-50:], strict=False)]
    matcher.add(replacements)
    live.update({s.id: s for s in replacements})
    check(matcher, live, evs)
    assert len(matcher) == len(live)
    assert matcher.memory_bytes() > 0
    matcher.remove(list(live))
    assert len(matcher) == 0
    assert all(ids == [] for ids in matcher.match_events(evs))


@pytest.mark.parametrize("name", MATCHERS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs, min_size=1, max_size=12), evs=st.lists(events, min_size=1, max_size=8))
def test_hypothesis_matches_oracle(name, trees, evs):
    check_trees(create(name, Dictionary()), trees, evs)


@pytest.mark.parametrize("name", MATCHERS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(extended_exprs, min_size=1, max_size=12), evs=st.lists(extended_events, min_size=1, max_size=8))
def test_hypothesis_extended_matches_oracle(name, trees, evs):
    test_hypothesis_matches_oracle.hypothesis.inner_test(name, trees, evs)


@pytest.mark.parametrize("name", MATCHERS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs, min_size=1, max_size=12), evs=st.lists(array_events, min_size=1, max_size=8))
def test_hypothesis_arrays_match_oracle(name, trees, evs):
    test_hypothesis_matches_oracle.hypothesis.inner_test(name, trees, evs)


@pytest.mark.parametrize("name", MATCHERS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(extended_exprs, min_size=1, max_size=12),
       evs=st.lists(extended_array_events, min_size=1, max_size=8))
def test_hypothesis_extended_arrays_match_oracle(name, trees, evs):
    test_hypothesis_matches_oracle.hypothesis.inner_test(name, trees, evs)


ARRAY_CASES = [  # (subscription, matching events, other events): one element per array in each row
    ("tags = 'b'", [{"tags": ["a", "b"]}], [{"tags": ["a"]}, {"tags": []}, {"tags": "a"}]),
    ("n BETWEEN 1 AND 2", [{"n": [0, 1.5, 9]}], [{"n": [0, 9]}]),
    ("n > 1 AND n < 3", [{"n": [2]}, {"n": [0, 2]}], [{"n": [0, 5]}]),  # both on one element
    ("tags = 'a' AND tags = 'b'", [], [{"tags": ["a", "b"]}]),
    ("tags != 'a'", [{"tags": ["a", "b"]}, {"tags": "b"}], [{"tags": ["a", "a"]}, {"tags": []}]),  # some element differs
    ("NOT tags IN ('a', 'b')", [{"tags": ["a", "c"]}], [{"tags": ["a", "b"]}]),
    ("items.sku = 'x' AND items.qty > 2", [{"items": [{"sku": "y", "qty": 9}, {"sku": "x", "qty": 3}]}],
     [{"items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 3}]}]),
    ("EXISTS tags", [{"tags": [1]}], [{"tags": []}]),
    ("NOT EXISTS items.qty", [{"items": [{"qty": 1}, {"sku": "x"}]}, {"items": []}], [{"items": [{"qty": 1}]}]),
    ("tags IS NULL", [{"tags": ["a", None]}], [{"tags": ["a"]}]),
    ("ip IN CIDR '10.0.0.0/8' AND tags = 'a'", [{"ip": ["1.2.3.4", "10.1.1.1"], "tags": ["b", "a"]}],
     [{"ip": ["1.2.3.4"], "tags": "a"}]),
]


@pytest.mark.parametrize("name", MATCHERS)
def test_array_semantics(name):
    subs = [parse_subscription(text, f"c{i}", 64) for i, (text, _, _) in enumerate(ARRAY_CASES)]
    matcher = create(name)
    matcher.add(subs)
    for i, (_, yes, no) in enumerate(ARRAY_CASES):
        evs = [flatten(e) for e in yes + no]
        hits = [f"c{i}" in ids for ids in matcher.match_events(evs)]
        assert hits == [True] * len(yes) + [False] * len(no), (name, ARRAY_CASES[i][0])
        assert [f"c{i}" in oracle.match(subs, e) for e in evs] == hits


@pytest.mark.parametrize("name", MATCHERS)
def test_empty_batch_and_empty_index(name):
    matcher = create(name)
    assert matcher.match_events([{"a": 1.0}]) == [[]]
    matcher.add(random_subscriptions(random.Random(0), 10))
    result = matcher.match(matcher.encode([]))
    assert result.offsets.tolist() == [0] and len(result.keys) == 0

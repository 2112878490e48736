"""The brute-force matcher against the reference oracle: generators, hypothesis, delta sequences."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import matchers.brute as brute
from matchers.brute import BruteForceMatcher
from matchers.events import Dictionary
from matchers.expr import Subscription, pred
from scripts.workloads import generate
from tests.differential import check, subscriptions_of
from tests.strategies import events, exprs, random_event, random_subscriptions

# Small value domains so that the paper workloads produce matches at small sizes.
GENERATORS = {
    "fabret-w0": dict(lo=1, hi=3),
    "fabret-w1": dict(lo=1, hi=3),
    "fabret-w2": dict(lo=1, hi=4, n_t=12, n_a=12),
    "fabret-w3": dict(lo=1, hi=3),
    "fabret-w4": dict(lo=1, hi=3),
    "fabret-w5": dict(lo=1, hi=3),
    "fabret-w6": dict(lo=1, hi=3),
    "opindex": dict(d=40, m=12, sigma=6),
    "opindex-zipf": dict(d=40, m=12, sigma=6),
    "vci": dict(R=300, W=60),
    "amkh": dict(x=12, event_hi=12),
    "stock": dict(n_symbols=30),
    "ecommerce": dict(n_brands=20),
}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_match_oracle(name):
    w = generate(name, n_subs=400, n_events=120, seed=11, **GENERATORS[name])
    matcher = BruteForceMatcher()
    matcher.add(w.subscriptions)
    assert check(matcher, w.subscriptions, w.events) > 0


@pytest.mark.parametrize("name", ["stock", "ecommerce", "opindex"])
def test_add_remove_readd_sequences(name):
    rng = random.Random(5)
    w = generate(name, n_subs=600, n_events=80, seed=3, **GENERATORS[name])
    other = generate(name, n_subs=600, n_events=1, seed=4, **GENERATORS[name]).subscriptions
    matcher = BruteForceMatcher(cell_budget=5000)
    live: dict[str, Subscription] = {}
    for step in range(4):
        batch = rng.sample(w.subscriptions, 200)
        matcher.add(batch)
        live.update({s.id: s for s in batch})
        check(matcher, live.values(), w.events)
        gone = rng.sample(sorted(live), 80)
        assert matcher.remove(gone + ["missing"]) == len(gone)
        for sub_id in gone:
            del live[sub_id]
        check(matcher, live.values(), w.events)
        # upsert: known ids with other expressions, then re-add removed ones
        swapped = [Subscription.of(sub_id, other[step * 50 + i].expr) for i, sub_id in enumerate(sorted(live)[:50])]
        matcher.add(swapped)
        live.update({s.id: s for s in swapped})
        back = [s for s in w.subscriptions if s.id in set(gone[:30])]
        matcher.add(back)
        live.update({s.id: s for s in back})
        assert len(matcher) == len(live)
        check(matcher, live.values(), w.events)
    matcher.remove(list(live))
    assert len(matcher) == 0 and matcher._pid_of == {}
    assert matcher.match_events(w.events) == [[] for _ in w.events]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_expressions_every_operator(seed):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 400)
    evs = [random_event(rng) for _ in range(200)]
    matcher = BruteForceMatcher(cell_budget=997)  # many chunks
    matcher.add(subs)
    check(matcher, subs, evs)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(exprs, min_size=1, max_size=8), st.lists(events, min_size=1, max_size=6),
       st.integers(min_value=1, max_value=64))
def test_hypothesis_matches_oracle(expr_list, evs, budget):
    subs = subscriptions_of(expr_list, max_terms=32)
    matcher = BruteForceMatcher(cell_budget=budget)
    matcher.add(subs)
    check(matcher, subs, evs)
    if subs:
        matcher.remove([subs[0].id])
        check(matcher, subs[1:], evs)


def test_shared_dictionary_unknown_strings_and_new_attributes():
    dictionary = Dictionary()
    matcher = BruteForceMatcher(dictionary)
    subs = [Subscription.of("a", pred("sym", "=", "IBM")), Subscription.of("b", pred("sym", "!=", "IBM")),
            Subscription.of("c", pred("sym", "like", "I%")), Subscription.of("d", pred("n", ">", 1))]
    matcher.add(subs)
    assert matcher.match_events([{"sym": "IBM"}]) == [["a", "c"]]
    # strings no subscription names, attributes the index has never seen, type mismatches
    evs = [{"sym": "INTC", "zzz": 5, "n": 2}, {"sym": 3.0, "n": "2"}, {}, {"other": "IBM"}, {"sym": True}]
    assert matcher.match_events(evs) == [["b", "c", "d"], [], [], [], []]
    batch = matcher.encode(evs)
    assert dictionary.attr("zzz", create=False) >= 0 and batch.n == 5


def test_string_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(brute, "STRING_CACHE_LIMIT", 3)
    matcher = BruteForceMatcher()
    sub = Subscription.of("p", pred("s", "like", "a%"))
    matcher.add([sub])
    evs = [{"s": f"a{i}"} for i in range(20)] + [{"s": f"b{i}"} for i in range(20)]
    for _ in range(2):
        assert matcher.match_events(evs) == [["p"]] * 20 + [[]] * 20
    assert matcher._cached <= 3 + 40


def test_memory_and_empty_inputs():
    matcher = BruteForceMatcher()
    empty = matcher.match(matcher.encode([]))
    assert empty.total == 0 and list(empty.offsets) == [0]
    w = generate("stock", n_subs=200, n_events=10, seed=1)
    matcher.add(w.subscriptions)
    assert matcher.memory_bytes() > 0
    result = matcher.match(matcher.encode(w.events))
    assert result.offsets.dtype == np.int64 and len(result.offsets) == 11
    for i in range(10):
        keys = result.keys[result.offsets[i]:result.offsets[i + 1]]
        assert np.all(np.diff(keys) > 0)
    with pytest.raises(ValueError):
        BruteForceMatcher(cell_budget=0)
    with pytest.raises(TypeError):
        BruteForceMatcher(bogus=1)

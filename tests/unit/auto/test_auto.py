"""The ``auto`` matcher: the index it picks follows the workload's shape, it re-decides on
drift, and it stays equal to the oracle through rebuilds, key reuse and pickling."""

from __future__ import annotations

import pickle

import pytest

from matchers.auto import CHOICES, DRIFT, AutoMatcher
from matchers.base import create
from matchers.expr import Subscription
from scripts.workloads import generate
from tests.differential import check


@pytest.mark.parametrize(("workload", "index"), [
    ("dense", "bitmark"),
    ("fabret-w2", "static"),
    ("fabret-w0", "static"),
    ("fabret-w3", "propagation"),
    ("fabret-w6", "propagation"),
    ("amkh", "propagation"),
    ("opindex", "opindex"),
    ("stock", "static"),
    ("ecommerce", "counting"),
    ("vci", "vci"),
])
def test_choice_follows_the_shape(workload, index):
    wl = generate(workload, n_subs=2000, n_events=30, seed=1)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == index and index in CHOICES
    described = matcher.describe()
    assert described["matcher"] == index and described["reason"]
    assert described["shape"]["subscriptions"] == 2000
    check(matcher, wl.subscriptions, wl.events[:30])


def test_large_spread_equality_sets_get_dynamic(monkeypatch):
    monkeypatch.setattr("matchers.auto.DYNAMIC_FROM", 1500)
    for workload, index in (("fabret-w3", "dynamic"), ("fabret-w6", "propagation")):
        wl = generate(workload, n_subs=2000, n_events=20, seed=1)
        matcher = create("auto")
        matcher.add(wl.subscriptions)
        assert matcher.choice == index
        check(matcher, wl.subscriptions, wl.events)


def test_drift_redecides_and_stays_exact():
    dense = generate("dense", n_subs=400, n_events=20, seed=2)
    fabret = generate("fabret-w0", n_subs=2000, n_events=20, seed=2)
    eq_subs = [Subscription(f"e{s.id}", s.expr, s.conjunctions) for s in fabret.subscriptions]
    events = dense.events + fabret.events
    matcher = create("auto")
    matcher.add(dense.subscriptions)
    assert matcher.choice == "bitmark"
    # fewer changes than the drift threshold: the choice stays until the threshold is passed
    few = int(DRIFT * 400) - 10
    matcher.add(eq_subs[:few])
    check(matcher, dense.subscriptions + eq_subs[:few], events)
    assert matcher.choice == "bitmark"
    matcher.add(eq_subs[few:])
    live = dense.subscriptions + eq_subs
    check(matcher, live, events)  # the match re-decides
    assert matcher.choice == "static"
    # removing the equality subscriptions drifts back
    matcher.remove(s.id for s in eq_subs)
    check(matcher, dense.subscriptions, events)
    assert matcher.choice == "bitmark"


def test_reused_keys_keep_matches_sorted():
    wl = generate("fabret-w0", n_subs=600, n_events=40, seed=3)
    subs = wl.subscriptions
    matcher = create("auto")
    matcher.add(subs)
    matcher.remove(s.id for s in subs[:100:3])
    back = [Subscription(f"x{s.id}", s.expr, s.conjunctions) for s in subs[:100:3]]
    matcher.add(back)  # the inner index hands out keys in its own order
    live = [s for s in subs if s not in subs[:100:3]] + back
    check(matcher, live, wl.events)


def test_pickled_matcher_matches_and_changes():
    wl = generate("dense", n_subs=500, n_events=20, seed=4)
    matcher = create("auto")
    matcher.add(wl.subscriptions[:400])
    copy = pickle.loads(pickle.dumps(matcher, protocol=5))
    assert isinstance(copy, AutoMatcher) and copy.choice == matcher.choice
    check(copy, wl.subscriptions[:400], wl.events)
    copy.add(wl.subscriptions[400:])
    copy.remove(s.id for s in wl.subscriptions[:50])
    check(copy, wl.subscriptions[50:], wl.events)


def test_failed_insert_leaves_the_shape_unchanged():
    matcher = create("auto")
    wl = generate("fabret-w0", n_subs=50, n_events=5, seed=5)
    matcher.add(wl.subscriptions)
    before = matcher.describe()
    inner = matcher._inner
    inner_add = inner.add

    def failing(subs):
        raise MemoryError("full")

    inner.add = failing
    with pytest.raises(MemoryError):
        matcher.add([Subscription(f"y{s.id}", s.expr, s.conjunctions) for s in wl.subscriptions[:5]])
    inner.add = inner_add
    assert matcher.describe() == before
    check(matcher, wl.subscriptions, wl.events)


@pytest.mark.parametrize(("k", "index"), [(2, "counting"), (3, "bitmark")])
def test_dense_variants_by_predicates_per_subscription(k, index):
    wl = generate("dense", n_subs=500, n_events=20, k=k, seed=6)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == index
    check(matcher, wl.subscriptions, wl.events)


def test_shared_index_round_trip_then_changes(tmp_path, monkeypatch):
    from streaming import shared_index

    monkeypatch.setattr(shared_index, "directory", lambda: tmp_path)
    wl = generate("fabret-w0", n_subs=300, n_events=20, seed=7)
    matcher = create("auto")
    matcher.add(wl.subscriptions[:250])
    key = shared_index.SharedKey("app-auto-test", str(tmp_path / "registry"), "auto")
    loaded = shared_index.load(shared_index.publish(matcher, key, 1))
    check(loaded, wl.subscriptions[:250], wl.events)
    loaded.remove(s.id for s in wl.subscriptions[:30])
    loaded.add(wl.subscriptions[250:])
    check(loaded, wl.subscriptions[30:], wl.events)

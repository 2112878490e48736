"""The bulk remove and delete of the Fabret matchers (ids to keys at once, no subscription read,
entries' predicate ids gathered at once, released by id with PredicateIndex.release_counted)
against the per-id remove and per-entry, per-predicate delete they replaced,
``add`` of the survivors and the oracle (the counting matcher's, which releases the same way,
against the last two): deletes, re-adds and replaces interleaved (packed or
not), predicates shared by removed and kept subscriptions, and counts reaching zero; the dynamic
matcher's ``_unmark`` against the pairwise one it replaced."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.catalog import create
from matchers.expr import Subscription
from matchers.language import parse_subscription
from matchers.packed import pack, unpack
from matchers.subtable import SubscriptionTable
from scripts.bench.packed import pairwise_unmark, per_id_remove, per_predicate_delete
from tests import differential
from tests.strategies import random_event, random_subscriptions
from tests.unit.fabret.test_fabret import CONFIGS, IDS, SMALL_DYNAMIC, check_store


def check(m, live: dict[str, Subscription], evs: list[dict]) -> None:
    """The oracle's matches (and a Fabret matcher's store invariants)."""
    differential.check(m, live, evs, (lambda m: check_store(m.store)) if hasattr(m, "store") else None)


def _old(name: str, params: dict):
    """A matcher removing as before the bulk remove and delete (id by id, each subscription read,
    its predicates released one by one)."""
    m = create(name, **params)
    m._delete = per_predicate_delete.__get__(m)  # type: ignore[method-assign]  # the delete replaced, on one instance
    m._remove = per_id_remove.__get__(m)  # type: ignore[method-assign]  # the remove replaced, on one instance
    return m


def _refs(m) -> dict:
    """Each live predicate's references, which a Fabret matcher's own per-id counts equal."""
    ix = m.phase1
    out = {p: int(ix._refs[ix.id_of(p)]) for p in ix._ids}
    if not hasattr(m, "pid_refs"):  # the counting matcher
        return out
    for p, n in out.items():
        assert int(m.pid_refs[ix.id_of(p)]) == n
    assert int(m.pid_refs.sum()) == sum(out.values())
    return out


def _run(name: str, params: dict, seed: int, shared: bool, steps: int = 4) -> None:
    new: Any
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 160, extended=seed % 2 == 0)
    if shared:  # one predicate object per distinct predicate, as a shard's bulk read makes them
        cache: dict = {}
        subs = [unpack(pack(s), s.id, cache) for s in subs]
    evs = [random_event(rng, extended=True) for _ in range(40)]
    new, old = create(name, **params), (_old(name, params) if name != "counting" else create(name, **params))
    if name == "counting":  # folds and rebuilds every few changes: deletes of folded and pending slots
        for m in (new, old):
            setattr(m, "pending_min", 16)  # noqa: B010  (an attribute of the counting matcher only)
            setattr(m, "dead_min", 16)  # noqa: B010
    new.add_packed(SubscriptionTable.pack(subs[:100]))
    old.add(subs[:100])
    live = {s.id: s for s in subs[:100]}
    for step in range(steps):
        gone = rng.sample(sorted(live), min(len(live), rng.choice([1, 10, 40])))
        back = [live[i] for i in gone[: len(gone) // 3]]  # re-added
        replaced = [Subscription.of(i, s.expr) for i, s in zip(rng.sample(sorted(live), 8), rng.sample(subs, 8),
                                                                 strict=True)]
        fresh = [s for s in subs if s.id not in live][:10]
        for m in (new, old):
            assert m.remove(gone + ["never-added"]) == len(gone)
        for i in gone:
            del live[i]
        assert _refs(new) == _refs(old)
        check(new, live, evs)
        for m in (new, old):
            m.add(back + fresh) if step % 2 else m.add_packed(SubscriptionTable.pack(back + fresh))
            m.add(replaced)
        live.update({s.id: s for s in back + fresh + replaced})
        assert _refs(new) == _refs(old)
        assert new.match_events(evs) == old.match_events(evs)
        check(new, live, evs)
    survivors = create(name, **params)
    survivors.add(list(live.values()))
    assert _refs(survivors) == _refs(new)
    assert survivors.match_events(evs) == new.match_events(evs)
    everything = sorted(live)
    for m in (new, old):
        m.remove(everything)  # every count reaches zero
    assert len(new.phase1) == 0 and _refs(new) == {}
    assert name == "counting" or new.store.n_entries == 0
    check(new, {}, evs)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("shared", [False, True])
def test_bulk_delete_equals_per_predicate_delete(name, params, seed, shared):
    _run(name, params, seed, shared)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("shared", [False, True])
def test_counting_bulk_delete_matches_the_survivors_and_the_oracle(seed, shared):
    """The counting matcher's delete (slots' ids gathered, released by id; its per-predicate
    delete is not kept to compare with): checked against add of the survivors and the oracle."""
    _run("counting", {}, seed, shared)


@pytest.mark.parametrize(("name", "params"), CONFIGS[2:4], ids=IDS[2:4])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), shared=st.booleans())
def test_bulk_delete_equals_per_predicate_delete_for_any_seed(name, params, seed, shared):
    _run(name, params, seed, shared, steps=2)


def test_a_predicate_shared_by_removed_and_kept_subscriptions_stays():
    subs = [parse_subscription(text, i) for i, text in
            [("a", "x = 1 AND y > 2"), ("b", "x = 1 OR z < 3"), ("c", "x = 1 AND y > 2 AND z < 3")]]
    m = create("dynamic")
    m.add(subs)
    ix = m.phase1
    assert {str(p): n for p, n in _refs(m).items()} == {"x = 1": 3, "y > 2": 2, "z < 3": 2}
    gone = ix.id_of(next(p for p in ix._ids if str(p) == "y > 2"))
    m.remove(["a", "c"])
    assert {str(p): n for p, n in _refs(m).items()} == {"x = 1": 1, "z < 3": 1}
    assert gone in ix._free
    check(m, {"b": subs[1]}, [{"x": 1}, {"z": 1}, {"y": 5}])


@pytest.mark.parametrize("params", [SMALL_DYNAMIC, dict(SMALL_DYNAMIC, max_schema=2), {}], ids=["small", "pairs", "default"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unmark_by_int64_keys_equals_the_pairwise_unmark(params, seed):
    """The dynamic matcher's ``_unmark`` (the (group, width) pairs as int64 keys) against the
    ``np.unique(axis=1)`` one it replaced: the same benefits (bit for bit), marks, tables and
    matches through removes, re-adds, replaces and maintenance."""
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 300)
    evs = [random_event(rng) for _ in range(60)]
    new, old = create("dynamic", **params), create("dynamic", **params)
    old._unmark = pairwise_unmark.__get__(old)  # the one replaced, on one instance
    calls = [0]
    unmark = new._unmark

    def counted(entries):
        width = new.mark_width  # not grown yet: entries past it are unmarked
        calls[0] += int((width[entries[entries < len(width)]] > 0).sum())
        unmark(entries)

    new._unmark = counted  # counts the marked entries taken back
    live = {s.id: s for s in subs[:200]}
    for m in (new, old):
        m.add(subs[:200])
    for step in range(6):
        for m in (new, old):
            m.match_events(evs)  # events drive the statistics and maintenance
        gone = rng.sample(sorted(live), rng.choice([5, 30, 80]))
        replaced = [Subscription.of(i, s.expr) for i, s in zip(rng.sample(sorted(set(live) - set(gone)), 10),
                                                                 rng.sample(subs, 10), strict=True)]
        back = [live[i] for i in gone[::2]]
        for m in (new, old):
            m.remove(gone)
            m.add(replaced)
            m.add_packed(SubscriptionTable.pack(back)) if step % 2 else m.add(back)
            m.maintain()
        for i in gone:
            del live[i]
        live.update({s.id: s for s in replaced + back})
        n = len(old.benefit)
        assert np.array_equal(new.benefit[:n], old.benefit) and not new.benefit[n:].any()
        assert np.array_equal(new.mark_width[:len(old.mark_width)], old.mark_width[:len(new.mark_width)])
        assert (new.tables_created, new.tables_deleted, new.moves) == (old.tables_created, old.tables_deleted, old.moves)
        assert new.match_events(evs) == old.match_events(evs)
        for m in (new, old):  # both see the same events: they drive the statistics
            check(m, live, evs)
    assert calls[0] > 0 or not params  # marked entries were taken back (the small thresholds')

"""The per-worker index cache: catch-up by shipped deltas, from disk, rebuilds; always equal to the oracle."""

from __future__ import annotations

import random

import pytest

from matchers.oracle import match as oracle_match
from streaming import executor_cache
from streaming.executor_cache import IndexSpec, index_for
from streaming.records import DELETE, UPSERT, Change
from streaming.registry import Registry

from .helpers import random_event, random_subscriptions


@pytest.fixture(autouse=True)
def empty_cache():
    executor_cache.clear()
    yield
    executor_cache.clear()


def check(entry, registry_subs, rng, n_events=60):
    events = [random_event(rng) for _ in range(n_events)]
    from matchers.events import flatten

    flat = [flatten(e) for e in events]
    got = entry.matcher.match_events(flat)
    want = [oracle_match(registry_subs.values(), e) for e in flat]
    assert got == want


def evolve(reg: Registry, rng: random.Random, batch_id: int, pool):
    changes = []
    for _ in range(rng.randint(1, 15)):
        sub = rng.choice(pool)
        if rng.random() < 0.3:
            changes.append(Change(DELETE, sub.id, None))
        else:
            changes.append(Change(UPSERT, sub.id, sub))
    return reg.append(batch_id, changes, float(batch_id))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_catch_up_paths_match_the_oracle(tmp_path, seed):
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 40, "a") + random_subscriptions(rng, 40, "b")
    reg = Registry(tmp_path, snapshot_every=4, snapshots_kept=2, recent=3)
    spec = lambda v, deltas=(): IndexSpec(str(tmp_path), "counting", v, tuple(deltas), max_catchup=5)  # noqa: E731
    entry = index_for(spec(0))
    assert entry.version == 0 and len(entry.matcher) == 0
    for b in range(12):
        evolve(reg, rng, b, pool)
        mode = b % 3
        if mode == 0:  # shipped deltas
            entry = index_for(spec(reg.version, reg.deltas_since(entry.version) or ()))
        elif mode == 1:  # nothing shipped: from disk (or a rebuild when pruned)
            entry = index_for(spec(reg.version))
        else:  # skip a batch, then catch up two versions at once
            continue
        assert entry.version == reg.version
        check(entry, reg.subscriptions, rng)
    assert entry.catchups > 0


def test_rebuild_when_too_far_behind_or_ahead(tmp_path):
    rng = random.Random(7)
    pool = random_subscriptions(rng, 30)
    reg = Registry(tmp_path, snapshot_every=5)
    entry = index_for(IndexSpec(str(tmp_path), "counting", 0))
    for b in range(8):
        evolve(reg, rng, b, pool)
    far = index_for(IndexSpec(str(tmp_path), "counting", reg.version, max_catchup=3))
    assert far.rebuilds == 2 and far.version == 8
    check(far, reg.subscriptions, rng)
    from streaming.registry import load_state

    back = index_for(IndexSpec(str(tmp_path), "counting", 6))  # a replayed older batch
    assert back.version == 6 and back.rebuilds == 3
    check(back, load_state(tmp_path, 6).subscriptions, rng)
    assert entry is not back


def test_same_version_is_served_from_cache(tmp_path):
    reg = Registry(tmp_path)
    rng = random.Random(1)
    evolve(reg, rng, 0, random_subscriptions(rng, 10))
    a = index_for(IndexSpec(str(tmp_path), "counting", 1))
    b = index_for(IndexSpec(str(tmp_path), "counting", 1))
    assert a is b and a.rebuilds == 1 and a.catchups == 0


def test_long_lived_freezes_what_it_builds_and_restores_collection():
    import gc

    from streaming.executor_cache import long_lived

    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # lists are tracked by the collector
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()

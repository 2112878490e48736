"""The per-worker index cache: catch-up by shipped deltas, rebuilds from the broadcast snapshot; equal to the oracle."""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest

from matchers.oracle import match as oracle_match
from streaming import executor_cache
from streaming.executor_cache import IndexSpec, index_for
from streaming.match import RegistryBroadcast
from streaming.records import DELETE, UPSERT, Change
from streaming.registry import Registry, RegistryError, load_state
from tests.strategies import random_event, random_subscriptions

from .helpers import LocalBroadcast


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
def test_catch_up_and_rebuild_paths_match_the_oracle(tmp_path, seed):
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 40, "a") + random_subscriptions(rng, 40, "b")
    reg = Registry(tmp_path, snapshot_every=4, snapshots_kept=2, recent=3)
    shipping = RegistryBroadcast(LocalBroadcast)
    start = len(LocalBroadcast.made)
    entry = index_for(shipping.spec(reg, "counting", 0, 3))
    assert entry.version == 0 and len(entry.matcher) == 0
    rebuilds = 0
    for b in range(14):
        evolve(reg, rng, b, pool)
        if b % 3 == 2:  # skip a batch, then catch up two versions at once
            continue
        if b % 4 == 3:  # a new Python worker: built from the broadcast snapshot and the shipped deltas
            rebuilds += 1
            executor_cache.clear()
        entry = index_for(shipping.spec(reg, "counting", reg.version, 3))
        assert entry.version == reg.version
        check(entry, reg.subscriptions, rng)
    assert entry.catchups > 0 and rebuilds > 1
    assert shipping.made > 2  # every broadcast but the base and the deltas the last batch shipped is destroyed:
    alive = [b for b in LocalBroadcast.made[start:] if not b.destroyed]
    assert shipping.base is not None
    assert {id(b) for b in alive} == {*map(id, shipping.base), *map(id, shipping.deltas.values())}
    assert sorted(shipping.deltas) == list(range(reg.version - 2, reg.version + 1))  # max_catchup 3


def test_rebuild_when_too_far_behind_or_ahead(tmp_path):
    rng = random.Random(7)
    pool = random_subscriptions(rng, 30)
    reg = Registry(tmp_path, snapshot_every=5)
    shipping = RegistryBroadcast(LocalBroadcast)
    entry = index_for(shipping.spec(reg, "counting", 0, 3))
    for b in range(8):
        evolve(reg, rng, b, pool)
    far = index_for(shipping.spec(reg, "counting", reg.version, 3))
    assert far.rebuilds == 2 and far.version == 8
    check(far, reg.subscriptions, rng)
    back = index_for(shipping.spec(reg, "counting", 6, 3))  # a replayed older batch: a snapshot of version 6
    assert back.version == 6 and back.rebuilds == 3 and shipping.base_version == 6
    check(back, load_state(tmp_path, 6).subscriptions, rng)
    assert entry is not back


def test_same_version_is_served_from_cache_and_the_broadcast_is_reused(tmp_path):
    reg = Registry(tmp_path)
    rng = random.Random(1)
    evolve(reg, rng, 0, random_subscriptions(rng, 10))
    shipping = RegistryBroadcast(LocalBroadcast)
    a = index_for(shipping.spec(reg, "counting", 1, 20))
    b = index_for(shipping.spec(reg, "counting", 1, 20))
    assert a is b and a.rebuilds == 1 and a.catchups == 0 and shipping.made == 1
    assert shipping.base is not None and len(shipping.base) == 1
    assert not hasattr(shipping.base[0], "_value")  # the worker keeps the index, not the snapshot as well
    executor_cache.clear()
    again = index_for(shipping.spec(reg, "counting", 1, 20))  # a new worker, the same broadcast
    assert again is not a and shipping.made == 1
    check(again, reg.subscriptions, rng)


def test_a_spec_that_cannot_make_its_version_is_an_error(tmp_path):
    reg = Registry(tmp_path)
    rng = random.Random(2)
    for b in range(3):
        evolve(reg, rng, b, random_subscriptions(rng, 10))
    with pytest.raises(RegistryError, match="no registry snapshot"):
        index_for(IndexSpec(reg.directory.uri, "counting", 3))
    old = (LocalBroadcast(load_state(tmp_path, 1)),)
    with pytest.raises(RegistryError, match="do not make version 3"):  # delta 2 is not shipped
        index_for(IndexSpec(reg.directory.uri, "counting", 3, tuple(reg.recent[-1:]), base=old))


def test_a_base_of_another_form_is_refused_as_the_spec_is_made(tmp_path):
    """``base`` is one broadcast per shard, always a tuple: anything else fails on the driver, at once."""
    reg = Registry(tmp_path)
    rng = random.Random(5)
    evolve(reg, rng, 0, random_subscriptions(rng, 20))
    snap = load_state(tmp_path, 1)
    one = SimpleNamespace(value=snap)  # a broadcast of the whole registry: the 1-tuple of one shard
    assert len(index_for(IndexSpec(reg.directory.uri, "counting", 1, base=(one,))).matcher) == len(reg.subscriptions)
    shipping = RegistryBroadcast(LocalBroadcast)
    spec = shipping.spec(reg, "counting", 1, 20, 2)
    assert len(spec.base) == 2 and replace(spec, shard=1).shard == 1
    for wrong, error, says in (
        (dict(base=one), TypeError, "base is a tuple .* not a SimpleNamespace"),  # the single form, no more
        (dict(base=[one]), TypeError, "not a list"),
        (dict(base=(snap,)), TypeError, "holds a Snapshot, not a broadcast"),  # the snapshot itself
        (dict(base=(one, one), shards=1), ValueError, "2 snapshot broadcasts for 1 shards"),
        (dict(base=(one,), shards=2), ValueError, "1 snapshot broadcasts for 2 shards"),
        (dict(shard=2, shards=2), ValueError, "shard 2 of 2"),
        (dict(shard=-1), ValueError, "shard -1 of 1"),
    ):
        with pytest.raises(error, match=says):
            IndexSpec(reg.directory.uri, "counting", 1, **{"base": (one,), **wrong})
    with pytest.raises(ValueError, match="shard 2 of 2"):  # a changed spec is checked as well
        replace(spec, shard=2)
    with pytest.raises(TypeError, match="not a SimpleNamespace"):
        replace(spec, base=one, shards=1)


def test_long_lived_freezes_what_it_builds_and_restores_collection():
    import gc

    from matchers.collector import long_lived

    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # lists are tracked by the collector
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()


def test_long_lived_collects_frozen_cyclic_garbage_once_the_frozen_set_grows():
    import gc
    import weakref

    from matchers import collector
    from matchers.collector import long_lived

    class Node:
        pass

    collector._frozen.update(alive=0, since=0)  # as in a new worker: the first freeze collects in full
    try:
        with long_lived():
            cycle = Node()
            cycle.me = cycle  # a reference cycle
        ref = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert ref() is not None  # frozen: collections skip it
        kept: list = []
        while ref() is not None and len(kept) < 50:
            with long_lived():  # each step freezes a tenth more objects
                kept.append([[i] for i in range(gc.get_freeze_count() // 10 + 100)])
        assert ref() is None, "the frozen garbage was never collected"
        assert len(kept) <= 4  # as soon as the frozen set grew past REFREEZE_GROWTH (1.1 ** 3 > 1.25)
    finally:
        gc.unfreeze()


def test_shard_indexes_partition_the_subscriptions(tmp_path):
    from streaming.executor_cache import shard_of

    rng = random.Random(3)
    pool = random_subscriptions(rng, 60)
    reg = Registry(tmp_path)
    shipping = RegistryBroadcast(LocalBroadcast)
    for b in range(4):
        evolve(reg, rng, b, pool)
        specs = [replace(shipping.spec(reg, "counting", reg.version, 20, 3), shard=s) for s in range(3)]
        entries = [index_for(spec) for spec in specs]  # built at b == 0, caught up after
        for s, entry in enumerate(entries):
            check(entry, {i: sub for i, sub in reg.subscriptions.items() if shard_of(i, 3) == s}, rng, 20)
    assert sum(len(e.matcher) for e in entries) == len(reg.subscriptions) and entries[0].catchups == 3
    # one broadcast per shard, each of that shard's subscriptions only (a shard's build loads no other)
    assert shipping.base is not None and len(shipping.base) == 3
    for s, part in enumerate(shipping.base):
        assert part.value.subscriptions and all(shard_of(i, 3) == s for i in part.value.subscriptions)


def test_each_shipped_delta_is_broadcast_once(tmp_path):
    rng = random.Random(4)
    reg = Registry(tmp_path)
    pool = random_subscriptions(rng, 30)
    shipping = RegistryBroadcast(LocalBroadcast)
    evolve(reg, rng, 0, pool)
    evolve(reg, rng, 1, pool)
    first = shipping.spec(reg, "counting", reg.version, 20)
    made = len(LocalBroadcast.made)
    again = shipping.spec(reg, "counting", reg.version, 20)  # the next batch, no subscription changes
    assert len(LocalBroadcast.made) == made and again.deltas == first.deltas and len(first.deltas) == 2
    evolve(reg, rng, 2, pool)
    later = shipping.spec(reg, "counting", reg.version, 20)  # one more delta: one more broadcast
    assert len(LocalBroadcast.made) == made + 1 and later.deltas[:2] == first.deltas
    assert [d.version for d in later.shipped] == [1, 2, 3]
    entry = index_for(later)
    check(entry, reg.subscriptions, rng)

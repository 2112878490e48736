"""The per-worker index cache: built from the columnar registry's files, caught up from its
deltas, rebuilt when too far behind, ahead (a replay) or when the deltas it needs were pruned;
equal to the oracle over the subscriptions of the version."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest

from matchers.oracle import match as oracle_match
from streaming import executor_cache, shared_index
from streaming.errors import RegistryError
from streaming.executor_cache import IndexSpec, index_for, shard_of
from streaming.registry_columns import files
from tests.strategies import random_event, random_subscriptions

from .helpers import ModelRegistry


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


def evolve(reg: ModelRegistry, rng: random.Random, batch_id: int, pool):
    """A batch of 1 to 15 random upserts and deletes of ``pool``'s subscriptions."""
    changes = []
    for _ in range(rng.randint(1, 15)):
        sub = rng.choice(pool)
        changes.append(sub.id if rng.random() < 0.3 else sub)
    return reg.apply(batch_id, changes, float(batch_id))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_catch_up_and_rebuild_paths_match_the_oracle(tmp_path, seed):
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 40, "a") + random_subscriptions(rng, 40, "b")
    reg = ModelRegistry(tmp_path, snapshot_every=4, snapshots_kept=2)
    entry = index_for(reg.spec(max_catchup=3))
    assert entry.version == 0 and len(entry.matcher) == 0
    rebuilds = 0
    for b in range(14):
        evolve(reg, rng, b, pool)
        if b % 3 == 2:  # skip a batch, then catch up two versions at once
            continue
        if b % 4 == 3:  # a new Python worker: built from the snapshot and deltas on disk
            rebuilds += 1
            executor_cache.clear()
        entry = index_for(reg.spec(max_catchup=3))
        assert entry.version == reg.version
        check(entry, reg.subscriptions, rng)
    assert entry.catchups > 0 and rebuilds > 1 and files.snapshot_versions(reg.registry.directory)


def test_rebuild_when_too_far_behind_or_ahead(tmp_path):
    rng = random.Random(7)
    pool = random_subscriptions(rng, 30)
    reg = ModelRegistry(tmp_path, snapshot_every=5)
    entry = index_for(reg.spec(max_catchup=3))
    for b in range(8):
        evolve(reg, rng, b, pool)
    far = index_for(reg.spec(max_catchup=3))  # 8 versions behind, more than 3: rebuilt
    assert far.rebuilds == 2 and far.catchups == 0 and far.version == 8
    check(far, reg.subscriptions, rng)
    near = index_for(reg.spec(version=6, max_catchup=3))  # a replayed older batch: rebuilt at version 6
    assert near.version == 6 and near.rebuilds == 3
    check(near, reg.versions[6], rng)
    ahead = index_for(reg.spec(max_catchup=3))  # 2 behind: caught up
    assert ahead.version == 8 and ahead.rebuilds == 3 and ahead.catchups == 1
    check(ahead, reg.subscriptions, rng)
    assert entry is not far


def test_same_version_is_served_from_cache(tmp_path):
    rng = random.Random(1)
    reg = ModelRegistry(tmp_path)
    evolve(reg, rng, 0, random_subscriptions(rng, 10))
    a = index_for(reg.spec())
    b = index_for(reg.spec())
    assert a is b and a.rebuilds == 1 and a.catchups == 0
    executor_cache.clear()
    again = index_for(reg.spec())  # a new worker reads the files again
    assert again is not a and again.rebuilds == 1
    check(again, reg.subscriptions, rng)


def test_rebuild_from_the_snapshot_when_the_deltas_it_needs_were_pruned(tmp_path):
    rng = random.Random(4)
    pool = random_subscriptions(rng, 30)
    reg = ModelRegistry(tmp_path, snapshot_every=2, snapshots_kept=1)
    evolve(reg, rng, 0, pool)
    entry = index_for(reg.spec())
    for b in range(1, 5):
        evolve(reg, rng, b, pool)
    assert files.delta_versions(reg.registry.directory)[0] > 2  # delta 2 is gone
    later = index_for(reg.spec())  # within max_catchup, but the deltas are not there: rebuilt
    assert later is not entry and later.version == reg.version and later.rebuilds == 2 and later.catchups == 0
    check(later, reg.subscriptions, rng)


def test_a_version_the_files_do_not_hold_is_an_error(tmp_path):
    rng = random.Random(2)
    reg = ModelRegistry(tmp_path, snapshot_every=2, snapshots_kept=1)
    for b in range(5):
        evolve(reg, rng, b, random_subscriptions(rng, 10))
    with pytest.raises(RegistryError, match="is not stored"):
        index_for(reg.spec(version=reg.version + 1))
    with pytest.raises(RegistryError, match="was pruned"):
        index_for(reg.spec(version=1))
    assert not executor_cache._CACHE


def test_a_shard_of_another_count_is_refused_as_the_spec_is_made(tmp_path):
    spec = IndexSpec(str(tmp_path), "counting", 1, shards=2)
    assert replace(spec, shard=1).shard == 1
    for wrong in (dict(shard=2, shards=2), dict(shard=-1)):
        with pytest.raises(ValueError, match=f"shard {wrong['shard']} of {wrong.get('shards', 1)}"):
            IndexSpec(str(tmp_path), "counting", 1, **wrong)
    with pytest.raises(ValueError, match="shard 2 of 2"):  # a changed spec is checked as well
        replace(spec, shard=2)


def test_an_expression_over_the_default_term_bound_loads_as_accepted(tmp_path):
    """An expression accepted under a larger ``match.max_terms`` than the default: the worker
    loads it packed, as the driver accepted it (it parses nothing again)."""
    from matchers.language import parse_record

    wide = parse_record({"id": "w", "expr": " AND ".join(f"(a{i} = 1 OR b{i} = 1)" for i in range(9))}, 1024)
    reg = ModelRegistry(tmp_path)
    reg.apply(0, [wide])
    entry = index_for(reg.spec())
    assert len(entry.matcher) == 1 and len(wide.conjunctions) == 512


def test_workers_of_a_machine_share_the_index_with_app_id(tmp_path):
    rng = random.Random(8)
    pool = random_subscriptions(rng, 30)
    reg = ModelRegistry(tmp_path)
    evolve(reg, rng, 0, pool)
    app = f"test-{uuid.uuid4().hex[:8]}"
    try:
        first = index_for(reg.spec(app_id=app))
        executor_cache.clear()
        second = index_for(reg.spec(app_id=app))  # a restarted worker maps what the first published
        assert (first.rebuilds, first.maps, second.rebuilds, second.maps) == (1, 0, 0, 1)
        evolve(reg, rng, 1, pool)
        later = index_for(reg.spec(app_id=app))  # caught up privately from the delta
        assert later is second and later.catchups == 1 and later.rebuilds == 0
        check(later, reg.subscriptions, rng)
    finally:
        shared_index.remove_application(app)


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
    rng = random.Random(3)
    pool = random_subscriptions(rng, 60)
    reg = ModelRegistry(tmp_path, shards=3, snapshot_every=2)
    for b in range(4):
        evolve(reg, rng, b, pool)
        specs = [reg.spec(shard=s, shards=3) for s in range(3)]
        entries = [index_for(spec) for spec in specs]  # built at b == 0, caught up after
        for s, entry in enumerate(entries):
            check(entry, {i: sub for i, sub in reg.subscriptions.items() if shard_of(i, 3) == s}, rng, 20)
    assert sum(len(e.matcher) for e in entries) == len(reg.subscriptions)
    # built once, then caught up (the registry prunes what a snapshot makes old when the next batch comes)
    assert [(e.rebuilds, e.catchups) for e in entries] == [(1, 3)] * 3
    executor_cache.clear()
    two = [index_for(reg.spec(shard=s, shards=2)) for s in range(2)]  # another count than the snapshot's parts
    for s, entry in enumerate(two):
        check(entry, {i: sub for i, sub in reg.subscriptions.items() if shard_of(i, 2) == s}, rng, 20)


def test_a_shard_another_worker_builds_is_waited_for_after_building_a_next_one(tmp_path):
    """With ``then``, a worker that finds another one building its shard (the builder's lock
    held) builds and publishes one of the next shards first, then waits and maps or builds its
    own: the machine's workers build different shards at once. Both match the oracle."""
    import fcntl
    import threading
    import time

    rng = random.Random(5)
    subs = random_subscriptions(rng, 60)
    reg = ModelRegistry(tmp_path, shards=2)
    reg.apply(0, subs)
    app = f"test-{uuid.uuid4().hex}"
    spec = reg.spec(app_id=app, shards=2)
    key0, key1 = (executor_cache._shared_key(replace(spec, shard=s)) for s in (0, 1))
    got: dict = {}
    try:
        with open(key0.folder() / "builder.lock", "a+b") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another worker builds shard 0
            worker = threading.Thread(target=lambda: got.update(entry=index_for(replace(spec, shard=0), then=(1,))))
            worker.start()
            patience = time.monotonic() + 300  # no timing asserted: a bound on a hang only
            while not key1.path(spec.version).exists() and worker.is_alive() and time.monotonic() < patience:
                time.sleep(0.01)
            assert key1.path(spec.version).exists() and not key0.path(spec.version).exists()
            assert worker.is_alive()  # waiting for shard 0's lock
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)
        worker.join()
        ahead = index_for(replace(spec, shard=1))
        assert (ahead.rebuilds, ahead.maps) == (1, 0)  # the one built ahead, from the cache
        assert (got["entry"].rebuilds, got["entry"].maps) == (1, 0)
        for shard, entry in ((0, got["entry"]), (1, ahead)):
            check(entry, {s.id: s for s in subs if shard_of(s.id, 2) == shard}, random.Random(shard))
    finally:
        shared_index.remove_application(app)

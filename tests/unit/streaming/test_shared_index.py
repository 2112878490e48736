"""Shared indexes: a matcher mapped from its file matches exactly what the built one and the oracle match."""

from __future__ import annotations

import mmap
import multiprocessing
import pickle
import random
import shutil
import time
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.base import SubscriptionTable
from matchers.catalog import create, names
from matchers.events import flatten
from matchers.oracle import match as oracle_match
from streaming import executor_cache, shared_index
from streaming.executor_cache import IndexSpec, index_for, shard_of
from streaming.shared_index import CorruptIndex, SharedKey
from tests.strategies import random_event, random_subscriptions

from .helpers import ModelRegistry
from .test_executor_cache import check, evolve


@pytest.fixture
def key(tmp_path):
    """A key of this test alone (its registry location is the test's directory); its files go afterwards."""
    key = SharedKey(f"test-{uuid.uuid4().hex[:8]}", str(tmp_path), "counting")
    yield key
    for folder in shared_index.directory().glob(key.folder().name.split(".")[0] + ".*"):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def empty_cache():
    executor_cache.clear()
    yield
    executor_cache.clear()


def backing(array):
    """What an array's memory belongs to in the end."""
    while isinstance(array, np.ndarray):
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def same_matches(matchers, subs, rng, n_events=80):
    events = [flatten(random_event(rng)) for _ in range(n_events)]
    want = [oracle_match(subs, e) for e in events]
    for m in matchers:
        assert m.match_events(events) == want


@pytest.mark.parametrize("name", names())
def test_mapped_index_matches_the_built_one_and_the_oracle(key, name):
    rng = random.Random(name)
    subs = random_subscriptions(rng, 150)
    built = create(name)
    built.add(subs)
    key = key._replace(matcher=name)
    mapped = shared_index.load(shared_index.publish(built, key, 3))
    assert type(mapped) is type(built) and len(mapped) == len(built)
    assert isinstance(mapped._subs, SubscriptionTable)
    assert isinstance(backing(mapped._subs.sub_bytes), mmap.mmap)  # a view of the mapping, not a copy
    same_matches([built, mapped], subs, rng)
    assert [mapped.id_of(k) for k, _ in built.subscriptions()] == [s.id for _, s in built.subscriptions()]

    # a catch-up changes the worker's private copy: built and mapped stay equal, the file does not change
    gone = {s.id for s in rng.sample(subs, 40)}
    fresh = random_subscriptions(rng, 30, prefix="n")
    for m in (built, mapped):
        m.remove(gone)
        m.add(fresh)
    now = [s for s in subs if s.id not in gone] + fresh
    same_matches([built, mapped], now, rng)
    again = shared_index.load(key.path(3))
    same_matches([again], subs, rng)
    same_matches([pickle.loads(pickle.dumps(mapped, protocol=5))], now, rng)  # a changed table repacks


def test_table_keeps_changes_beside_the_packed_arrays():
    subs = random_subscriptions(random.Random(5), 6)
    table = SubscriptionTable.pack([subs[0], None, subs[2]])
    assert len(table) == 3 and table[1] is None and table[2] == subs[2] and table.id_of(0) == subs[0].id
    table[1] = subs[1]
    table.append(subs[3])
    table.extend(subs[4:])
    table[0] = None
    assert list(table) == [None, *subs[1:]] and table[-1] == subs[5] and table.id_of(3) == subs[3].id
    with pytest.raises(IndexError):
        table[6]
    assert list(pickle.loads(pickle.dumps(table))) == list(table)


_POOL = random_subscriptions(random.Random(11), 8)
_slots = st.one_of(st.none(), st.sampled_from(_POOL))


@settings(max_examples=150, deadline=None)
@given(start=st.lists(_slots, max_size=6),
       ops=st.lists(st.tuples(st.booleans(), st.integers(0, 20), _slots), max_size=12))
def test_table_behaves_as_the_list_it_packs(start, ops):
    table, model = SubscriptionTable.pack(start), list(start)
    for append, at, sub in ops:
        if append or not model:
            table.append(sub)
            model.append(sub)
        else:
            table[at % len(model)] = sub
            model[at % len(model)] = sub
        assert list(table) == model and len(table) == len(model)
    assert list(pickle.loads(pickle.dumps(table))) == model
    assert [table.id_of(k) for k, s in enumerate(model) if s] == [s.id for s in model if s]


def test_numba_kernels_take_the_mapped_arrays_without_compiling_again(key):
    rng = random.Random(2)
    subs = random_subscriptions(rng, 100)
    built = create("counting")
    built.add(subs)
    same_matches([built], subs, rng)
    from matchers.counting import kernels

    before = {name: len(f.signatures) for name, f in vars(kernels).items() if hasattr(f, "signatures")}
    mapped = shared_index.load(shared_index.publish(built, key, 1))
    assert mapped._flat.flags.writeable and mapped._flat.flags.aligned
    same_matches([mapped], subs, rng)
    after = {name: len(f.signatures) for name, f in vars(kernels).items() if hasattr(f, "signatures")}
    assert after == before


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_file_is_detected_and_rebuilt_never_served(key, damage):
    rng = random.Random(3)
    subs = random_subscriptions(rng, 80)
    built = create("counting")
    built.add(subs)
    path = shared_index.publish(built, key, 7)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:len(data) - 100]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndex):
        shared_index.load(path)
    assert shared_index.newest(key, -1, 7) is None
    calls = []

    def make():
        calls.append(1)
        return built

    matcher, made = shared_index.obtain(key, 7, make)
    assert made and calls == [1]
    same_matches([matcher], subs, rng)
    assert shared_index.obtain(key, 7, make)[1] is False and calls == [1]


def test_publishing_removes_older_versions_and_other_applications(key):
    m = create("counting")
    m.add(random_subscriptions(random.Random(4), 10))
    other = key._replace(app_id="other-app")
    foreign = shared_index.publish(m, other, 5)
    crashed = key.folder() / "x.000000000003.index123.tmp"  # a maker that died while writing
    crashed.write_bytes(b"partial")
    old = shared_index.publish(m, key, 1)
    assert not foreign.exists() and not crashed.exists()
    mapped = shared_index.load(old)
    newer = shared_index.publish(m, key, 2)
    assert not old.exists() and newer.exists()
    assert len(mapped) == 10 and shared_index.newest(key, -1, 9)[0] == 2  # a mapped file outlives its name


def _worker(registry_dir, version, app_id, barrier, results):
    """A Python worker of the same machine asking for the same index at the same time."""
    spec = IndexSpec(registry_dir, "counting", version, app_id=app_id)
    slow_build = executor_cache.build

    def build(s):
        time.sleep(1.0)  # long enough for the other process to find the lock taken
        return slow_build(s)

    executor_cache.build = build
    barrier.wait()
    entry = index_for(spec)
    events = [flatten(random_event(random.Random(i))) for i in range(100)]
    results.put((entry.rebuilds, entry.maps, entry.matcher.match_events(events)))


def test_two_processes_get_a_correct_index_and_only_one_builds(tmp_path, key):
    rng = random.Random(6)
    pool = random_subscriptions(rng, 60)
    reg = ModelRegistry(tmp_path)
    for b in range(12):
        evolve(reg, rng, b, pool)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), reg.version, key.app_id, barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted((r, m) for r, m, _ in got) == [(0, 1), (1, 0)]
    events = [flatten(random_event(random.Random(i))) for i in range(100)]
    want = [oracle_match(reg.subscriptions.values(), e) for e in events]
    assert all(matches == want for _, _, matches in got)


@pytest.mark.parametrize("seed", [1, 2])
def test_workers_sharing_an_index_catch_up_and_match_the_oracle(tmp_path, key, seed):
    """Two workers (one process, the cache cleared in between) through versions: map, catch up, rebuild."""
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 40, "a") + random_subscriptions(rng, 40, "b")
    reg = ModelRegistry(tmp_path, snapshot_every=4, snapshots_kept=2)
    first = index_for(reg.spec(max_catchup=5, app_id=key.app_id))
    assert (first.rebuilds, first.maps) == (1, 0)
    executor_cache.clear()
    second = index_for(reg.spec(max_catchup=5, app_id=key.app_id))  # a restarted worker maps what the first published
    assert (second.rebuilds, second.maps) == (0, 1)
    maps = 0
    for b in range(10):
        evolve(reg, rng, b, pool)
        if b % 4 == 3:
            executor_cache.clear()  # a new worker: maps the newest file and catches up, or rebuilds
        entry = index_for(reg.spec(max_catchup=5, app_id=key.app_id))
        assert entry.version == reg.version
        check(entry, reg.subscriptions, rng)
        maps += entry.maps
    assert entry.catchups > 0 and maps > 0


def test_turned_off_nothing_is_published(tmp_path, key):
    reg = ModelRegistry(tmp_path)
    rng = random.Random(9)
    evolve(reg, rng, 0, random_subscriptions(rng, 10))
    entry = index_for(reg.spec())
    assert entry.rebuilds == 1 and not list(key.folder().glob("*.index"))


def test_an_application_removes_its_files_as_it_stops(key):
    m = create("counting")
    m.add(random_subscriptions(random.Random(8), 5))
    mine = [shared_index.publish(m, key._replace(matcher=name), 1) for name in ("counting", "brute")]
    theirs = shared_index.publish(m, key._replace(registry_dir=key.registry_dir + "/x", app_id="other"), 1)
    shared_index.remove_application(key.app_id)
    assert not any(p.exists() for p in mine) and theirs.exists()
    shutil.rmtree(theirs.parent)


def test_without_room_for_the_file_the_worker_keeps_its_own_index(key, monkeypatch):
    subs = random_subscriptions(random.Random(10), 30)
    built = create("counting")
    built.add(subs)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shared_index, "publish", full)
    matcher, made = shared_index.obtain(key, 1, lambda: built)
    assert made and matcher is built and not list(key.folder().glob("*.index"))


def test_what_a_matcher_builds_lazily_is_published_built(key):
    """The k-index builds on its first match: the file holds it built, so a worker mapping it does not."""
    rng = random.Random(12)
    subs = random_subscriptions(rng, 60)
    built = create("kindex")
    built.add(subs)
    assert built._stale
    mapped = shared_index.load(shared_index.publish(built, key._replace(matcher="kindex"), 1))
    assert not mapped._stale
    same_matches([mapped], subs, rng)


def test_a_shard_no_longer_used_leaves_the_worker_and_the_machine(tmp_path, key):
    """A worker drops the index of a shard it has not matched with for a while and many tasks
    (its group moved to another executor), and its file when no worker of the machine used it
    that long; a shard still used stays, and one that comes back is built again."""
    reg = ModelRegistry(tmp_path)
    rng = random.Random(12)
    evolve(reg, rng, 0, random_subscriptions(rng, 30))
    specs = [reg.spec(shard=s, shards=2, app_id=key.app_id) for s in (0, 1)]
    try:
        entries = [index_for(spec) for spec in specs]
        files = [list(executor_cache._shared_key(spec).folder().glob("*.index")) for spec in specs]
        assert all(len(f) == 1 for f in files)
        t, uses = time.monotonic(), executor_cache._uses[0]
        entries[0].used, entries[1].used, entries[1].use = t, t - 100, uses - 200
        assert executor_cache.sweep(specs[0], t, time.time(), 300, 100) == []  # used 100 s ago: kept
        entries[1].used, entries[1].use = t - 400, uses - 50
        assert executor_cache.sweep(specs[0], t, time.time(), 300, 100) == []  # a quiet stream: kept
        assert all(f[0].exists() for f in files)
        entries[1].use = uses - 200
        assert executor_cache.sweep(specs[0], t, time.time() + 200, 300, 100) == [1]
        assert files[1][0].exists()  # touched (or written) 200 s ago by some worker: the file stays
        index_for(specs[1])
        executor_cache._CACHE[specs[1].key].used, executor_cache._CACHE[specs[1].key].use = t - 400, uses - 200
        assert executor_cache.sweep(specs[0], t, time.time() + 400, 300, 100) == [1]
        assert specs[1].key not in executor_cache._CACHE and specs[0].key in executor_cache._CACHE
        assert files[0][0].exists() and not files[1][0].exists()  # shard 0 is in use: touched, kept
        again = index_for(specs[1])
        assert again.rebuilds == 1 and again.maps == 0
        check(again, {i: s for i, s in reg.subscriptions.items() if shard_of(i, 2) == 1}, rng, 20)
    finally:
        shared_index.remove_application(key.app_id)

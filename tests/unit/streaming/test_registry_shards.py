"""Executors' shards from the columnar registry's files (issue 29, step 3): a shard built at any
version, or caught up from any older one, matches what a dictionary of that version's
expressions in that shard matches (the oracle, on the records parsed again), whatever the
interleaving of upserts, deletes, kind changes and expiry times, with 1 or 3 shards and
snapshots in between; the shard loads the subscriptions packed at parse time."""

from __future__ import annotations

import dataclasses
import pickle
import random
import zlib

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.base import SubscriptionTable
from matchers.catalog import create
from matchers.expr import Subscription
from matchers.packed import pack
from streaming.errors import RegistryError
from streaming.records import default_parser
from streaming.registry_columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    ColumnRegistry,
    read_shard,
    view,
)
from streaming.registry_columns import files as rfiles
from streaming.registry_columns.shards import build_shard, catch_up, subscriptions
from tests.strategies import random_event, random_subscriptions
from tests.unit.streaming.helpers import ModelRegistry

PARSE = default_parser()
IDS = [f"s{i}" for i in range(14)] + ["t1:s1", "t1>n.t1.x:s2"]
EVENTS = [{"price": p, "symbol": s} for p in (0, 5, 15, 50) for s in ("A", "B")]


def _expression(rnd: random.Random) -> dict:
    if rnd.random() < 0.5:
        return {"expr": f"price > {rnd.randrange(40)}" + (" AND symbol = 'A'" if rnd.random() < 0.5 else "")}
    return {"rule": {"price": [{"numeric": ["<", rnd.randrange(60)]}]}}


def _history(seed: int, batches: int = 12) -> list[list[tuple]]:
    """Batches of ``(id, op, kind, record, expires, tenant)``; records as the topic holds them
    (an expression record may carry another id and a target: the row's id is what counts)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(batches):
        batch: list[tuple] = []
        for _ in range(rnd.randrange(1, 9)):
            sub_id = rnd.choice(IDS)
            roll = rnd.random()
            if roll < 0.25:
                batch.append((sub_id, DELETE, 0, None, float("nan"), ""))
            elif roll < 0.4:
                record = orjson.dumps({"id": sub_id, "pattern": "SELECT * FROM FILTER{price > 1}(S)"})
                batch.append((sub_id, UPSERT, PATTERN, record, float("nan"), ""))
            else:
                record = orjson.dumps({"id": "x", "target": "n.t1.x", **_expression(rnd)})
                batch.append((sub_id, UPSERT, EXPRESSION, record, float("nan"), ""))
        out.append(batch)
    return out


def _parsed(sub_id: str, record: bytes) -> Subscription:
    """The subscription of a stored record under the row's id (what parsing it again gives)."""
    obj = {k: v for k, v in orjson.loads(record).items() if k != "target"}
    return PARSE({**obj, "id": sub_id}, 4096)


def batch_of(changes: list[tuple]) -> ChangeBatch:
    """The changes as columns, each expression packed as :mod:`~streaming.registry_columns.parse` does."""
    sub_ids, ops, kinds, records, expires, tenants = (list(c) for c in zip(*changes, strict=True))
    packed = [None if op != UPSERT else pack(_parsed(i, r)) if k == EXPRESSION else
              view.packed(orjson.loads(r)["pattern"], None) for i, op, k, r in zip(sub_ids, ops, kinds, records, strict=True)]
    return ChangeBatch.of(sub_ids, ops, kinds, records, expires, tenants, packed=packed)


def _model(history: list[list[tuple]], version: int) -> dict[str, bytes]:
    """``{id: record}`` of the expressions live after the first ``version`` batches."""
    live: dict[str, tuple[int, bytes]] = {}
    for batch in history[:version]:
        for sub_id, op, kind, record, _expires, _tenant in batch:
            if op == UPSERT:
                live[sub_id] = (kind, record)
            else:
                live.pop(sub_id, None)
    return {i: r for i, (k, r) in live.items() if k == EXPRESSION}


def _expected(model: dict[str, bytes], shard: int, shards: int) -> list[list[str]]:
    subs = [_parsed(i, r) for i, r in model.items() if zlib.crc32(i.encode()) % shards == shard]
    return [sorted(oracle.match(subs, e)) for e in EVENTS]


def _make():
    return create("counting")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shards", [1, 3])
def test_built_and_caught_up_shards_match_the_dictionary(tmp_path, seed, shards):
    history = _history(seed)
    registry = ColumnRegistry(tmp_path / "reg", shards=shards, snapshot_every=4, snapshots_kept=100)
    versions = [0]
    for batch_id, batch in enumerate(history):
        versions.append(registry.apply(batch_id, batch_of(batch), 1000.0 + batch_id).version)
    snaps = rfiles.snapshot_versions(registry.directory)
    oldest = snaps[0] if snaps else 0  # versions below the oldest snapshot are pruned
    for step, version in enumerate(versions):
        if 0 < version < oldest:
            with pytest.raises(RegistryError, match="was pruned"):
                build_shard(registry.directory, version, 0, shards, _make)
            continue
        model = _model(history, step)
        for shard in range(shards):
            want = _expected(model, shard, shards)
            built = build_shard(registry.directory, version, shard, shards, _make)
            assert built.match_events(EVENTS) == want, (seed, step, shard)
            older = versions[max(0, step - 3)]
            if older >= oldest or older == 0 and oldest == 0:  # caught up from 3 batches before
                index = build_shard(registry.directory, older, shard, shards, _make)
                catch_up(index, registry.directory, older, version, shard, shards)
                assert index.match_events(EVENTS) == want, (seed, step, shard, "caught up")


@pytest.mark.parametrize("shards", [1, 2])
def test_shards_of_every_operator_match_the_oracle(tmp_path, shards):
    """Subscriptions of the whole language, packed and stored, then unpacked into each shard: the
    shards together match what the oracle says of the subscriptions themselves."""
    rng = random.Random(11)
    subs = random_subscriptions(rng, 400, extended=True)
    subs[::7] = [dataclasses.replace(s, id=f"t:{s.id}", expires=1e10 + i) for i, s in enumerate(subs[::7])]
    reg = ModelRegistry(tmp_path / "reg", shards=shards, snapshot_every=2)
    reg.apply(0, subs[:250])
    reg.apply(1, [s.id for s in subs[:50]] + subs[250:])  # a snapshot, then a delta
    reg.apply(2, subs[:10])
    events = [random_event(rng, extended=True) for _ in range(60)]
    loaded = {s.id: s for shard in range(shards)
              for s in subscriptions(read_shard(reg.uri, reg.version, shard, shards))}
    want = reg.subscriptions
    assert loaded == want
    assert all(s.conjunctions == want[i].conjunctions and s.expires == want[i].expires for i, s in loaded.items())
    got = [set() for _ in events]
    for shard in range(shards):
        for seen, matched in zip(got, build_shard(reg.uri, reg.version, shard, shards, _make).match_events(events),
                                 strict=True):
            seen.update(matched)
    assert got == [set(oracle.match(list(want.values()), e)) for e in events]


def test_an_unreadable_packed_form_is_a_registry_error(tmp_path):
    registry = ColumnRegistry(tmp_path / "reg")
    registry.apply(0, ChangeBatch.of(["a"], [UPSERT], [EXPRESSION], [b'{"expr": "price > 1"}'],
                                     packed=[b"not packed"]), 1.0)
    with pytest.raises(RegistryError, match="'a': its packed form cannot be read"):
        list(subscriptions(read_shard(registry.directory, 1)))


def _churn(seed: int, versions: int, per_version: int) -> tuple[list[Subscription], list[list]]:
    """A first set and ``versions`` batches of changes to it, drawn as the churn benchmark draws
    them (an existing id given a new expression, an existing id deleted, a new id; ids repeat
    within a batch); expressions over few attributes and values, so predicates repeat."""
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 60 + versions * per_version, extended=True)
    first, fresh = pool[:60], iter(pool[60:])
    live = [s.id for s in first]
    batches = []
    for v in range(versions):
        batch: list = []
        for i in range(per_version):
            roll, expr = rng.randrange(3), next(fresh)
            if roll == 1 and live:
                batch.append(live.pop(rng.randrange(len(live))))
                continue
            sub_id = rng.choice(live) if roll == 0 and live else f"n{v}.{i}"
            if sub_id not in live:
                live.append(sub_id)
            batch.append(dataclasses.replace(expr, id=sub_id))
        batches.append(batch)
    return first, batches


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), versions=st.integers(1, 6), per_version=st.integers(1, 12),
       matcher=st.sampled_from(["auto", "static", "dynamic", "counting"]))
@example(seed=1, versions=6, per_version=12, matcher="auto")
@example(seed=2, versions=3, per_version=12, matcher="static")
@example(seed=3, versions=5, per_version=9, matcher="dynamic")
def test_catch_up_in_steps_or_at_once_matches_a_shard_built_on_the_final_set(tmp_path_factory, seed, versions,
                                                                              per_version, matcher):
    """Upserts, replaces and deletes caught up one version at a time or all at once leave a
    matcher that matches what one built from scratch on the final set matches, and the oracle."""
    first, batches = _churn(seed, versions, per_version)
    reg = ModelRegistry(tmp_path_factory.mktemp("reg"), snapshot_every=1000)
    reg.apply(0, first)
    start = reg.version
    steps = [start]
    for batch_id, batch in enumerate(batches, 1):
        steps.append(reg.apply(batch_id, batch).version)

    def make():
        return create(matcher)

    stepwise, at_once = build_shard(reg.uri, start, 0, 1, make), build_shard(reg.uri, start, 0, 1, make)
    for a, b in zip(steps, steps[1:], strict=False):
        catch_up(stepwise, reg.uri, a, b, 0, 1)
    catch_up(at_once, reg.uri, start, reg.version, 0, 1)
    built = build_shard(reg.uri, reg.version, 0, 1, make)
    final = reg.subscriptions
    rng = random.Random(seed)
    events = [random_event(rng, extended=True) for _ in range(40)]
    want = [sorted(oracle.match(list(final.values()), e)) for e in events]
    assert built.match_events(events) == want
    for index in (stepwise, at_once):
        assert {s.id: s for _, s in index.subscriptions()} == final
        assert index.match_events(events) == want


def test_a_catch_up_that_cannot_read_a_change_leaves_the_matcher_as_it_was(tmp_path):
    registry = ColumnRegistry(tmp_path / "reg")
    first = _parsed("a", b'{"expr": "price > 1"}')
    registry.apply(0, ChangeBatch.of(["a"], [UPSERT], [EXPRESSION], [b'{"expr": "price > 1"}'],
                                     packed=[pack(first)]), 1.0)
    registry.apply(1, ChangeBatch.of(["a", "b"], [DELETE, UPSERT], [0, EXPRESSION], [None, b'{"expr": "price > 2"}'],
                                     packed=[None, b"not packed"]), 2.0)
    index = build_shard(registry.directory, 1, 0, 1, _make)
    with pytest.raises(RegistryError, match="'b': its packed form cannot be read"):
        catch_up(index, registry.directory, 1, 2, 0, 1)
    assert [s for _, s in index.subscriptions()] == [first]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), matcher=st.sampled_from(["auto", "static", "dynamic", "counting"]))
@example(seed=5, matcher="dynamic")
@example(seed=6, matcher="auto")
def test_a_built_shard_holds_its_rows_packed_as_the_subscriptions_added_one_by_one(tmp_path_factory, seed, matcher):
    """build_shard keeps the rows' packed bytes as the matcher's subscriptions (Matcher.hold): by
    key, the same subscriptions as a matcher given them one at a time, through pickling and
    through deletes and inserts after the build, matching as the oracle says."""
    first, batches = _churn(seed, 3, 10)
    reg = ModelRegistry(tmp_path_factory.mktemp("reg"), snapshot_every=1000)
    reg.apply(0, first[:10])
    reg.apply(1, [s.id for s in first[:4]] + first[10:])
    built = build_shard(reg.uri, reg.version, 0, 1, lambda: create(matcher), packed=True)
    assert isinstance(built._inner._subs if matcher == "auto" else built._subs, SubscriptionTable)
    one_by_one = create(matcher)
    for sub in subscriptions(read_shard(reg.uri, reg.version)):
        one_by_one.add([sub])
    assert {s.id: s for _, s in built.subscriptions()} == {s.id: s for _, s in one_by_one.subscriptions()} \
        == reg.subscriptions
    assert all(built.subscription(built.key_of(i)) == s for i, s in reg.subscriptions.items())
    rng = random.Random(seed)
    events = [random_event(rng, extended=True) for _ in range(30)]
    for batch_id, batch in enumerate(batches, 2):  # deletes, replaces and inserts on the held table, a pickled copy
        copy = pickle.loads(pickle.dumps(built, protocol=5))
        for index in (built, copy, one_by_one):
            for change in batch:  # in order: an id may come twice
                index.remove([change]) if isinstance(change, str) else index.add([change])
        reg.apply(batch_id, batch)
        want = [sorted(oracle.match(list(reg.subscriptions.values()), e)) for e in events]
        for index in (built, copy, one_by_one):
            assert {s.id: s for _, s in index.subscriptions()} == reg.subscriptions
            assert index.match_events(events) == want


@pytest.mark.parametrize("matcher", ["auto", "dynamic", "counting", "bitmark"])
def test_a_packed_shard_keeps_the_table_it_was_built_from_where_it_took_it(tmp_path, monkeypatch, matcher):
    """build_shard(packed=True) of a matcher that took the rows' table as it is (its rows, no
    changes) keeps it, without table_of; one that holds objects, or rows added apart (a presence
    test), is given table_of's; both the same bytes by key as table_of makes."""
    from streaming.registry_columns import shards

    made: list[SubscriptionTable] = []
    real = shards.table_of
    for extended in (False, True):
        reg = ModelRegistry(tmp_path / f"reg-{extended}")
        subs = random_subscriptions(random.Random(11), 60, extended=extended)
        reg.apply(0, subs)
        made.clear()
        monkeypatch.setattr(shards, "table_of", lambda m, rows: made.append(real(m, rows)) or made[-1])
        built = build_shard(reg.uri, reg.version, 0, 1, lambda: create(matcher), packed=True)
        monkeypatch.setattr(shards, "table_of", real)
        held = built.held_table()
        assert held is not None and (held is made[0] if made else True)
        assert bool(made) == (extended or matcher == "bitmark")
        want = real(built, shards.expressions(read_shard(reg.uri, reg.version)))
        for a, b in ((held.id_offsets, want.id_offsets), (held.id_bytes, want.id_bytes),
                     (held.sub_offsets, want.sub_offsets), (held.sub_bytes, want.sub_bytes)):
            assert a.tolist() == b.tolist()
        assert {s.id: s for _, s in built.subscriptions()} == reg.subscriptions


def test_hold_refuses_a_table_of_other_keys(tmp_path):
    reg = ModelRegistry(tmp_path / "reg")
    reg.apply(0, random_subscriptions(random.Random(3), 5))
    built = build_shard(reg.uri, reg.version, 0, 1, _make, packed=True)
    with pytest.raises(ValueError, match="a table of 4 subscriptions for 5 keys"):
        built.hold(SubscriptionTable.pack([s for _, s in built.subscriptions()][:4]))


@pytest.mark.parametrize("matcher", ["auto", "dynamic", "counting"])
def test_removing_from_a_held_or_unpickled_matcher_reads_each_subscription_once(tmp_path, monkeypatch, matcher):
    """Matcher.pop returns what it removed, each read once; remove of a matcher that deletes by
    key reads only the removed subscriptions that test presence (auto's counts the removed
    ones out of its tally from their packed rows: at most one read each, of those with an
    ``ANYTHING BUT``)."""
    subs = random_subscriptions(random.Random(4), 40, extended=True)
    reg = ModelRegistry(tmp_path / "reg")
    reg.apply(0, subs)
    index = pickle.loads(pickle.dumps(build_shard(reg.uri, reg.version, 0, 1, lambda: create(matcher), packed=True)))
    reads: list[int] = []
    unpacked = SubscriptionTable.__getitem__
    monkeypatch.setattr(SubscriptionTable, "__getitem__", lambda self, key: reads.append(key) or unpacked(self, key))
    gone = [s.id for s in subs[::3]]
    inner = index._inner if matcher == "auto" else index
    keys = {inner.key_of(i) for i in gone}
    stated = keys & inner._stated
    assert stated and stated < keys  # both kinds removed
    assert index.remove(gone + ["absent"]) == len(gone)
    if matcher == "auto":
        assert len(reads) < len(gone)
    else:
        assert len(reads) == len(set(reads)) and set(reads) == stated
    reads.clear()
    popped = index.pop([s.id for s in subs[1::3]] + [gone[0]])
    assert popped == [s for s in subs[1::3]]
    assert len(reads) == len(set(reads)) == len(popped)
    rng = random.Random(4)
    events = [random_event(rng, extended=True) for _ in range(30)]
    left = [s for s in subs if s.id not in set(gone) | {p.id for p in popped}]
    assert index.match_events(events) == [sorted(oracle.match(left, e)) for e in events]

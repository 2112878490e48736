"""The pickled registry of earlier releases converted once into the columnar one (issue 29):
every subscription, its expiry and its tenant come back from the new files (unpacked), and each
stored record parses back to the subscription it was written from."""

from __future__ import annotations

import dataclasses
import math
import random

import orjson

from matchers.expr import DEFAULT_MAX_TERMS, Subscription, pred
from streaming.records import DELETE, UPSERT, Change, default_parser
from streaming.registry import Registry, load_state
from streaming.registry_columns import EXPRESSION, ChangeBatch, ColumnRegistry, read_shard
from streaming.registry_columns.migrate import convert_pickled
from streaming.registry_columns.shards import subscriptions
from streaming.tenants import parts
from tests.strategies import random_subscriptions

TENANT_IDS = ["acme:x", "acme>notifications.acme.alerts:y", ":a:b", "globex:x"]


def _old_registry(directory, seed: int = 3) -> Registry:
    """A pickled registry after a few batches (upserts, deletes, expiry times, tenants' ids, a snapshot)."""
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 60)
    pool += [Subscription.of(i, pred("price", "<", n), expires=2e9 if n % 2 else None)
             for n, i in enumerate(TENANT_IDS)]
    reg = Registry(directory, snapshot_every=3, snapshots_kept=2)
    for batch in range(7):
        changes = []
        for sub in rng.sample(pool, 25):
            if rng.random() < 0.2:
                changes.append(Change(DELETE, sub.id, None))
            else:
                expires = 1.9e9 + batch if rng.random() < 0.3 else sub.expires
                changes.append(Change(UPSERT, sub.id, dataclasses.replace(sub, expires=expires)))
        reg.append(batch * 2, changes, 1000.0 + batch)
    reg.append(14, [Change(UPSERT, i, s) for s in pool if (i := s.id) in TENANT_IDS], 1007.0)
    return reg


def test_the_pickled_registry_converts_once_into_the_same_subscriptions(tmp_path):
    old = _old_registry(tmp_path / "registry")
    state = load_state(tmp_path / "registry")
    assert len(state.subscriptions) > 30 and state.batch_id == 14
    registry = ColumnRegistry(tmp_path / "registry-columns", shards=2)
    applied = convert_pickled(old.directory.uri, registry)
    assert applied is not None and (applied.version, applied.added, applied.replay) == (1, len(state.subscriptions),
                                                                                      False)
    assert (registry.batch_id, registry.stamps[-1].time, len(registry)) == (14, 1007.0, len(state.subscriptions))
    rows, loaded = {}, {}
    for shard in range(2):
        table = read_shard(registry.directory, 1, shard, 2)
        rows.update((row["id"], row) for row in table.to_pylist())
        loaded.update((s.id, s) for s in subscriptions(table))
    assert loaded == state.subscriptions and set(rows) == set(state.subscriptions)  # unpacked: equal
    assert all(s.conjunctions == state.subscriptions[i].conjunctions for i, s in loaded.items())
    for sub_id, row in rows.items():
        sub = state.subscriptions[sub_id]
        tenant, target, public = parts(sub_id)
        assert row["kind"] == EXPRESSION and row["tenant"] == tenant
        assert (row["expires"] if not math.isnan(row["expires"]) else None) == sub.expires
        record = orjson.loads(row["record"])
        assert record["id"] == public and record.get("target") == target  # as the tenant's topic held it
        obj = {k: v for k, v in record.items() if k != "target"}
        assert default_parser()({**obj, "id": sub_id}, DEFAULT_MAX_TERMS) == sub  # the record parses back
    assert rows["acme>notifications.acme.alerts:y"]["tenant"] == "acme"
    assert registry.held()[("acme", EXPRESSION)] == (2, 2)  # the tenants' quotas count what was converted
    # converted once: neither this registry nor one loaded from its files converts again
    assert convert_pickled(old.directory.uri, registry) is None
    again = ColumnRegistry(tmp_path / "registry-columns", shards=2)
    assert convert_pickled(old.directory.uri, again) is None and again.version == 1 and len(again) == len(rows)
    # Spark's replay of the old registry's last batch finds the converted version
    replay = again.apply(14, ChangeBatch.of([], []), 5.0)
    assert replay.replay and (replay.version, replay.time) == (1, 1007.0)


def test_nothing_to_convert_without_a_pickled_registry_or_with_an_empty_one(tmp_path):
    registry = ColumnRegistry(tmp_path / "registry-columns")
    assert convert_pickled(tmp_path / "registry", registry) is None  # none at all
    Registry(tmp_path / "registry")  # made, never appended to
    assert convert_pickled(tmp_path / "registry", registry) is None and registry.version == 0

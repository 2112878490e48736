"""The pickled registry of earlier releases converted once into the columnar one (issue 29):
every subscription, its expiry and its tenant come back from the new files (unpacked), and each
stored record parses back to the subscription it was written from."""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
from pathlib import Path

import orjson
import pytest

from matchers.expr import (
    DEFAULT_MAX_TERMS,
    And,
    Not,
    Op,
    Or,
    Pred,
    Subscription,
    anything_but,
    pred,
)
from matchers.packed import to_tuples
from streaming.errors import RegistryError
from streaming.records import DELETE, UPSERT, default_parser
from streaming.registry_columns import EXPRESSION, ChangeBatch, ColumnRegistry, read_shard
from streaming.registry_columns.legacy import read_pickled
from streaming.registry_columns.migrate import convert_pickled
from streaming.registry_columns.shards import subscriptions
from streaming.storage import Directory
from streaming.tenants import parts
from tests.strategies import random_subscriptions

TENANT_IDS = ["acme:x", "acme>notifications.acme.alerts:y", ":a:b", "globex:x"]
FIXTURE = Path(__file__).parent / "data" / "pickled_registry"
"""A pickled registry the previous release's own code wrote (snapshot 2, delta 3; see :func:`test_the_previous_release_s_files_convert`)."""


def _pickled(name: str, version: int, batch_id: int, time: float, payload: tuple) -> bytes:
    """The old format's file: a pickle of ``streaming.registry.<name>(version, batch_id, time, payload)``
    (written by hand: that module is gone, and nothing but a test writes the format)."""
    return b"\x80\x02c" + f"streaming.registry\n{name}\n".encode() + pickle.dumps(
        (version, batch_id, time, payload), 2)[2:-1] + b"R."


def _pack(sub: Subscription) -> tuple:
    return (sub.id, *to_tuples(sub))


def write_pickled(directory: Path, batches: list[tuple[int, float, list[tuple[str, str, Subscription | None]]]],
                  snapshot_every: int = 3, snapshots_kept: int = 2) -> dict[str, Subscription]:
    """The files the old registry left after recording ``batches`` (``(batch id, time, [(op, id, sub)])``,
    one version each): a delta per version, a snapshot every ``snapshot_every`` versions, the older
    snapshots and the deltas at or below the oldest kept one pruned. Returns the final subscriptions."""
    deltas, snaps = directory / "deltas", directory / "snapshots"
    deltas.mkdir(parents=True)
    snaps.mkdir()
    state: dict[str, Subscription] = {}
    for version, (batch_id, time, changes) in enumerate(batches, 1):
        packed = tuple((op, i, None if s is None else _pack(s)) for op, i, s in changes)
        (deltas / f"{version:012d}.pkl").write_bytes(_pickled("_delta", version, batch_id, time, packed))
        for op, i, s in changes:
            if op == UPSERT:
                state[i] = s  # type: ignore[assignment]  # an upsert carries its subscription
            else:
                state.pop(i, None)
        if version % snapshot_every == 0:
            subs = tuple(_pack(s) for s in state.values())
            (snaps / f"{version:012d}.pkl").write_bytes(_pickled("_snapshot", version, batch_id, time, subs))
            kept = sorted(snaps.iterdir())[-snapshots_kept:]
            for f in sorted(snaps.iterdir())[:-snapshots_kept]:
                f.unlink()
            for f in deltas.iterdir():
                if int(f.stem) <= int(kept[0].stem):
                    f.unlink()
    return dict(state)


def _old_registry(directory: Path, seed: int = 3) -> dict[str, Subscription]:
    """A pickled registry after a few batches (upserts, deletes, expiry times, tenants' ids, a snapshot)."""
    rng = random.Random(seed)
    pool = random_subscriptions(rng, 60)
    pool += [Subscription.of(i, pred("price", "<", n), expires=2e9 if n % 2 else None)
             for n, i in enumerate(TENANT_IDS)]
    batches = []
    for batch in range(7):
        changes: list[tuple[str, str, Subscription | None]] = []
        for sub in rng.sample(pool, 25):
            if rng.random() < 0.2:
                changes.append((DELETE, sub.id, None))
            else:
                expires = 1.9e9 + batch if rng.random() < 0.3 else sub.expires
                changes.append((UPSERT, sub.id, dataclasses.replace(sub, expires=expires)))
        batches.append((batch * 2, 1000.0 + batch, changes))
    batches.append((14, 1007.0, [(UPSERT, s.id, s) for s in pool if s.id in TENANT_IDS]))
    return write_pickled(directory, batches)


def test_the_pickled_registry_converts_once_into_the_same_subscriptions(tmp_path):
    held = _old_registry(tmp_path / "registry")
    old = Directory(tmp_path / "registry")
    assert sorted(f.name for f in (tmp_path / "registry" / "snapshots").iterdir()) == ["000000000003.pkl",
                                                                                   "000000000006.pkl"]
    state = read_pickled(old)
    assert state.subscriptions == held and len(held) > 30 and (state.version, state.batch_id) == (8, 14)
    registry = ColumnRegistry(tmp_path / "registry-columns", shards=2)
    applied = convert_pickled(old.uri, registry)
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
    assert convert_pickled(old.uri, registry) is None
    again = ColumnRegistry(tmp_path / "registry-columns", shards=2)
    assert convert_pickled(old.uri, again) is None and again.version == 1 and len(again) == len(rows)
    # Spark's replay of the old registry's last batch finds the converted version
    replay = again.apply(14, ChangeBatch.of([], []), 5.0)
    assert replay.replay and (replay.version, replay.time) == (1, 1007.0)


def test_nothing_to_convert_without_a_pickled_registry_or_with_an_empty_one(tmp_path):
    registry = ColumnRegistry(tmp_path / "registry-columns")
    assert convert_pickled(tmp_path / "registry", registry) is None  # none at all
    (tmp_path / "registry" / "deltas").mkdir(parents=True)  # made, never appended to
    (tmp_path / "registry" / "snapshots").mkdir()
    assert convert_pickled(tmp_path / "registry", registry) is None and registry.version == 0


def test_the_previous_release_s_files_convert(tmp_path):
    """``FIXTURE`` was written by the previous release's ``streaming.registry.Registry`` (pickle
    protocol 5): batch 3 upserted the first three, batch 5 the other two (snapshot at version 2),
    batch 8 deleted ``gone`` (delta 3)."""
    subs = [Subscription.of("plain", pred("price", "<", 10)),
            Subscription.of("acme:x", And((pred("a", "=", 1), pred("b", ">=", 2.5))), expires=2e9),
            Subscription.of("acme>notifications.acme.alerts:y", Or((pred("s", "=", "x"), Not(pred("t", "<", 3))))),
            Subscription.of(":a:b", pred("c", "!=", "z"))]
    state = read_pickled(Directory(FIXTURE))
    assert (state.version, state.batch_id, state.time) == (3, 8, 102.0)
    assert state.subscriptions == {s.id: s for s in subs}
    registry = ColumnRegistry(tmp_path / "registry-columns")
    applied = convert_pickled(FIXTURE, registry)
    assert applied is not None and (applied.version, applied.added, registry.batch_id) == (1, 4, 8)
    assert {s.id: s for s in subscriptions(read_shard(registry.directory, 1))} == state.subscriptions


def test_the_older_form_with_the_negated_predicate_itself_converts(tmp_path):
    """Before 2026-11-29 the old registry packed an ``ANYTHING BUT``'s operand as the ``Pred`` itself."""
    sub = Subscription.of("t:x", And((anything_but(pred("s", "in", ["a", "b"])), pred("n", ">", 2))), expires=2e9)
    but = next(p for conj in sub.conjunctions for p in conj if p.op is Op.ANYTHING_BUT)
    expires, preds, tree, conjunctions = to_tuples(sub)
    older = tuple((a, o, but.operand if o == int(Op.ANYTHING_BUT) else x, k) for a, o, x, k in preds)
    directory = tmp_path / "registry"
    (directory / "deltas").mkdir(parents=True)
    (directory / "deltas" / "000000000001.pkl").write_bytes(
        _pickled("_delta", 1, 4, 9.0, ((UPSERT, sub.id, (sub.id, expires, older, tree, conjunctions)),)))
    assert any(isinstance(p[2], Pred) for p in older)
    state = read_pickled(Directory(directory))
    assert state.subscriptions == {"t:x": sub} and (state.version, state.batch_id) == (1, 4)
    registry = ColumnRegistry(tmp_path / "registry-columns")
    assert convert_pickled(directory, registry) is not None
    assert [s.id for s in subscriptions(read_shard(registry.directory, 1))] == ["t:x"]


def test_a_bad_pickled_file_is_a_registry_error(tmp_path):
    write_pickled(tmp_path / "registry", [(0, 1.0, [(UPSERT, "a", Subscription.of("a", pred("p", "=", 1)))])])
    (tmp_path / "registry" / "deltas" / "000000000002.pkl").write_bytes(pickle.dumps(print))  # not the format's
    with pytest.raises(RegistryError, match="builtins.print is not part of"):
        read_pickled(Directory(tmp_path / "registry"))
    (tmp_path / "registry" / "deltas" / "000000000002.pkl").unlink()
    (tmp_path / "registry" / "deltas" / "000000000003.pkl").write_bytes(b"\x80\x02")  # a gap, then a torn file
    with pytest.raises(RegistryError, match="000000000002.pkl is missing"):
        read_pickled(Directory(tmp_path / "registry"))

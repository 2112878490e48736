"""The service's storage layer (:mod:`streaming.storage`) on a real S3 server and a real HDFS.

Files written whole (read back, listed, stamped, replaced, removed) at ``s3a://`` and
``hdfs://`` locations, seen by the store's own client too; the registry's snapshots and
deltas round-trip there, and a pickled registry of the earlier release converts from there. Fast (no Spark), but it needs the servers of
``tests/integration/hadoop_fixtures.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from matchers.expr import Subscription, pred
from matchers.packed import pack
from streaming.registry_columns import (
    DELETE,
    EXPRESSION,
    UPSERT,
    ChangeBatch,
    ColumnRegistry,
    read_shard,
)
from streaming.registry_columns.migrate import convert_pickled, record_of
from streaming.storage import Directory, join, local_path, write_file
from tests.integration.hadoop_fixtures import Store

pytestmark = pytest.mark.integration


def test_files_are_written_whole_and_listed(hadoop_store: Store, monkeypatch: pytest.MonkeyPatch):
    hadoop_store.use(monkeypatch)
    base = hadoop_store.location("storage")
    assert local_path(base) is None
    d = Directory(base).sub("dir")
    assert not d.exists()
    with pytest.raises(FileNotFoundError):
        d.names()
    d.write("a", b"first")
    d.write("b c", b"x" * 100_000)
    assert d.exists() and sorted(d.names()) == ["a", "b c"]
    assert d.read("a") == b"first" and d.read("b c") == b"x" * 100_000
    stamp = d.stamp("a")
    assert stamp is not None and stamp[2] == 5 and d.stamp("missing") is None
    d.write("a", b"second!")  # replaced whole
    assert d.read("a") == b"second!" and d.stamp("a") != stamp
    with pytest.raises(FileNotFoundError):
        d.read("missing")
    d.remove("b c")
    d.remove("missing")
    write_file(join(base, "status.json"), b"{}")
    assert hadoop_store.files(base) == ["dir/a", "status.json"]  # no temporary file left


def test_a_file_rewritten_while_read_is_old_or_new(hadoop_store: Store, monkeypatch: pytest.MonkeyPatch):
    """A reader sees the old content or the new, never a missing or partial file."""
    hadoop_store.use(monkeypatch)
    d = Directory(hadoop_store.location("atomic"))
    versions = [bytes([65 + i]) * (50_000 + i) for i in range(6)]
    d.write("f", versions[0])
    seen: list[bytes | BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.append(d.read("f"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                seen.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for v in versions[1:]:
            d.write("f", v)
    finally:
        done.set()
        reader.join(60)
    assert seen and all(s in versions for s in seen), [s if isinstance(s, BaseException) else len(s) for s in seen]
    assert d.read("f") == versions[-1] and d.names() == ["f"]


def test_registry_round_trips(hadoop_store: Store, monkeypatch: pytest.MonkeyPatch):
    """Deltas, snapshots and their pruning at the location; a second registry (a restart) reads them back."""
    hadoop_store.use(monkeypatch)
    location = join(hadoop_store.location("registry"), "registry-columns")
    reg = ColumnRegistry(location, shards=2, snapshot_every=3, snapshots_kept=2)
    for batch in range(7):
        ids, ops = [f"s{batch}"], [UPSERT]
        if batch % 2:
            ids.append(f"s{batch - 1}")
            ops.append(DELETE)
        subs = [Subscription.of(i, pred("a", "=", batch)) if op == UPSERT else None for i, op in zip(ids, ops, strict=True)]
        reg.apply(batch, ChangeBatch.of(ids, ops, [EXPRESSION] * len(ids),
                                        [record_of(s.id, s) if s else None for s in subs],
                                        packed=[pack(s) if s else None for s in subs]), float(batch))
    again = ColumnRegistry(location, shards=2)
    assert (again.version, again.batch_id) == (7, 6)
    live = {"s1", "s3", "s5", "s6"}
    assert set(again.live().column("id").to_pylist()) == set(reg.live().column("id").to_pylist()) == live
    assert {r for s in range(2) for r in read_shard(location, 7, s, 2).column("id").to_pylist()} == live
    files = hadoop_store.files(location)
    assert files == [*(f"deltas/{v:012d}.arrow" for v in (4, 5, 6, 7)),
                     *(f"snapshots/{v:012d}{part}" for v in (3, 6)
                       for part in ("-00000-of-00002.arrow", "-00001-of-00002.arrow", ".json"))], files


def test_a_pickled_registry_converts_from_the_store(hadoop_store: Store, monkeypatch: pytest.MonkeyPatch):
    """The previous release's pickled registry (the unit tests' fixture) copied to the store converts there."""
    hadoop_store.use(monkeypatch)
    old = Directory(join(hadoop_store.location("registry"), "registry"))
    fixture = Path(__file__).parents[1] / "unit" / "streaming" / "data" / "pickled_registry"
    for f in sorted(fixture.rglob("*.pkl")):
        old.sub(f.parent.name).write(f.name, f.read_bytes())
    registry = ColumnRegistry(join(hadoop_store.location("registry"), "registry-columns"))
    applied = convert_pickled(old, registry)
    assert applied is not None and (applied.version, applied.added, registry.batch_id) == (1, 4, 8)
    assert sorted(registry.live().column("id").to_pylist()) == [":a:b", "acme:x", "acme>notifications.acme.alerts:y",
                                                                "plain"]

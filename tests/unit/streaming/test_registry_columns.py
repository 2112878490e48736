"""The columnar registry's differential test: any interleaving of upserts and cancels of both
kinds, replayed from any version and read per shard, equals a plain dictionary, and the pattern
view at every version equals the dictionary's patterns; plus replays after a crash, restarts,
and missing or corrupt files."""

from __future__ import annotations

import math
import random
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.errors import RegistryError
from streaming.registry_columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    ChangeBatchError,
    ColumnRegistry,
    kernels,
    read_shard,
    view,
)
from streaming.registry_columns import files as rfiles
from streaming.storage import Directory

Model = dict[str, tuple[int, bytes, float, str]]
"""``{id: (kind, record, expires, tenant)}``: what the registry must equal."""


def _key(expires: float) -> float | None:
    return None if math.isnan(expires) else expires


def apply_model(model: Model, changes: list[tuple]) -> Model:
    out = dict(model)
    for sub_id, op, kind, record, expires, tenant in changes:
        if op == UPSERT:
            out[sub_id] = (kind, record, expires, tenant)
        else:
            out.pop(sub_id, None)
    return out


def packed_of(kind: int, record: bytes | None) -> bytes | None:
    """An upsert's packed column: an expression's is its record (bytes the registry stores and does
    not read), a pattern's its text (the record in hex) and partition attribute (by the record's length)."""
    if record is None or kind not in (EXPRESSION, PATTERN):
        return None
    return record if kind == EXPRESSION else view.packed(record.hex(), "a" if len(record) % 2 else None)


def batch_of(changes: list[tuple]) -> ChangeBatch:
    """The changes as columns; an upsert's predicate count is its record's length, its packed
    column :func:`packed_of`."""
    cols: list[tuple] = list(zip(*changes, strict=True)) if changes else [()] * 6
    return ChangeBatch.of(list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3]), list(cols[4]), list(cols[5]),
                          [len(r or b"") for r in cols[3]], [packed_of(k, r) for k, r in zip(cols[2], cols[3], strict=True)])


def as_model(table: pa.Table) -> Model:
    rows = table.to_pylist()
    assert all(r["predicates"] == len(r["record"]) for r in rows)
    assert all(r["packed"] == packed_of(r["kind"], r["record"]) for r in rows)
    out = {r["id"]: (r["kind"], r["record"], r["expires"], r["tenant"]) for r in rows}
    assert len(out) == len(rows), "an id twice in one table"
    return out


def same(a: Model, b: Model) -> bool:
    norm = lambda m: {k: (v[0], v[1], _key(v[2]), v[3]) for k, v in m.items()}  # noqa: E731
    return norm(a) == norm(b)


def read_all(directory, version: int, shards: int) -> Model:
    out: Model = {}
    for s in range(shards):
        part = as_model(read_shard(directory, version, s, shards))
        assert all(zlib.crc32(k.encode()) % shards == s for k in part)
        assert not out.keys() & part.keys()
        out.update(part)
    return out


def stored(directory, version: int) -> bool:
    """Whether the files still make ``version``: a snapshot at or below it, or every delta from 1
    (the next batch after a snapshot prunes the deltas at or below the oldest one kept)."""
    snaps = rfiles.snapshot_versions(rfiles.Directory(directory))
    deltas = rfiles.delta_versions(rfiles.Directory(directory))
    return version == 0 or not snaps or version >= snaps[0] or (bool(deltas) and deltas[0] == 1)


def check_versions(directory, models: dict[int, Model], shards: int, sinces: dict[int, dict[str, int]]) -> None:
    """Every version still stored reads back as its model (per shard, and in another shard
    count), and its pattern view (the newest at or below it) as the model's patterns; one whose
    files were pruned is an error."""
    for version, expected in models.items():
        if not stored(directory, version):
            with pytest.raises(RegistryError, match="pruned"):
                read_shard(directory, version)
            continue
        assert same(read_all(directory, version, shards), expected), version
        assert same(read_all(directory, version, shards + 1), expected), version
        assert view.newest(Directory(str(directory)), version).patterns == patterns_of(expected, sinces[version]), version


def patterns_of(model: Model, since: dict[str, int]) -> view.Patterns:
    """The pattern view of a model: ``{id: [text, since, attribute]}`` (:func:`packed_of`)."""
    return {k: [v[1].hex(), since[k], "a" if len(v[1]) % 2 else None] for k, v in model.items() if v[0] == PATTERN}


def next_since(since: dict[str, int], changes: list[tuple], version: int) -> dict[str, int]:
    """The version of each id's last upsert after ``changes`` recorded as ``version``."""
    out = dict(since)
    for sub_id, op, *_ in changes:
        if op == UPSERT:
            out[sub_id] = version
        else:
            out.pop(sub_id, None)
    return out


def check_driver(reg: ColumnRegistry, model: Model, since: dict[str, int] | None = None) -> None:
    if since is not None:
        assert reg.pattern_view() == patterns_of(model, since)
        assert view.latest(reg.directory.uri).patterns == patterns_of(model, since)
    live = reg.live().to_pylist()
    assert {r["id"]: (r["kind"], _key(r["expires"]), r["tenant"]) for r in live} == {
        k: (v[0], _key(v[2]), v[3]) for k, v in model.items()}
    assert len(reg) == len(model)
    assert all(r["crc"] == zlib.crc32(r["id"].encode()) for r in live)
    assert all(r["predicates"] == len(model[r["id"]][1]) for r in live)
    held = columns_held(model)
    assert reg.held() == held
    assert reg.counts() == {k: n for k, (n, _) in held.items()}


def columns_held(model: Model) -> dict[tuple[str, int], tuple[int, int]]:
    held: dict[tuple[str, int], tuple[int, int]] = {}
    for kind, record, _, tenant in model.values():
        n, p = held.get((tenant, kind), (0, 0))
        held[(tenant, kind)] = (n + 1, p + len(record))
    return held


def random_changes(rng: random.Random, pool: list[str], n: int) -> list[tuple]:
    out: list[tuple] = []
    for _ in range(n):
        sub_id = rng.choice(pool)
        if rng.random() < 0.35:
            out.append((sub_id, DELETE, 0, None, math.nan, ""))
        else:
            expires = rng.choice([math.nan, float(rng.randint(0, 50))])
            out.append((sub_id, UPSERT, rng.choice([EXPRESSION, PATTERN]), rng.randbytes(rng.randint(0, 12)),
                        expires, rng.choice(["", "acme", "globex"])))
    return out


def run_interleaving(tmp, rng: random.Random, batches: int, pool: list[str], shards: int, snapshot_every: int,
                     restarts: bool = True) -> None:
    reg = ColumnRegistry(tmp, shards=shards, snapshot_every=snapshot_every, snapshots_kept=10_000)
    models: dict[int, Model] = {0: {}}
    sinces: dict[int, dict[str, int]] = {0: {}}
    model: Model = {}
    batch_id = 0
    for _ in range(batches):
        batch_id += rng.randint(1, 3)
        changes = random_changes(rng, pool, rng.randint(0, 12))
        before = reg.version
        got = reg.apply(batch_id, batch_of(changes), float(batch_id))
        sinces[got.version] = next_since(sinces[before], changes, got.version) if got.version != before \
            else sinces[before]
        new = apply_model(model, changes)
        assert not got.replay
        if same(new, model):
            assert got.version == reg.version and got.version == max(models)
        else:
            assert got.version == max(models) + 1
        recorded = not same(new, model)
        model = new
        models[got.version] = model
        if rng.random() < 0.3:  # a replay of the batch changes nothing and finds its version
            # (one that recorded nothing is not known as a replay: its same records change nothing again)
            again = reg.apply(batch_id, batch_of(random_changes(rng, pool, 3) if recorded else changes), 0.0)
            assert again.replay == recorded and again.version == got.version
        if restarts and rng.random() < 0.2:  # the driver restarts
            reg = ColumnRegistry(tmp, shards=shards, snapshot_every=snapshot_every, snapshots_kept=10_000)
        check_driver(reg, model, sinces[reg.version])
        if rng.random() < 0.2:  # the columns at an older version, as a replay of an old batch reads them
            v = rng.choice([v for v in sorted(models) if stored(tmp, v)])
            assert reg.columns_at(v).held_by_tenant() == columns_held(models[v])
    check_versions(tmp, models, shards, sinces)
    check_driver(ColumnRegistry(tmp, shards=shards), model, sinces[reg.version])


@pytest.mark.parametrize("seed", range(6))
def test_interleavings_equal_a_dictionary(tmp_path, seed):
    rng = random.Random(seed)
    pool = [f"s{i}" for i in range(rng.choice([3, 10, 40]))] + ["é", "a:b", "x" * 300]
    run_interleaving(tmp_path, rng, 40, pool, shards=rng.choice([1, 2, 5]), snapshot_every=rng.choice([1, 3, 7, 100]))


@pytest.fixture
def weak_hash(monkeypatch):
    """Every id hashes to one of four values: the byte comparisons decide."""
    real = kernels.hash_ids

    def weak(offsets, data, table):
        h, crc = real(offsets, data, table)
        return h & np.uint64(3), crc

    monkeypatch.setattr(kernels, "hash_ids", weak)


@pytest.mark.parametrize("seed", range(3))
def test_hash_collisions_are_told_apart(tmp_path, weak_hash, seed):
    rng = random.Random(100 + seed)
    run_interleaving(tmp_path, rng, 30, [f"id{i}" for i in range(25)], shards=3, snapshot_every=4)


id_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)
change = st.tuples(st.sampled_from([UPSERT, UPSERT, DELETE]), st.sampled_from([EXPRESSION, PATTERN]),
                   st.binary(max_size=4), st.sampled_from([math.nan, 5.0]), st.sampled_from(["", "t"]))


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(id_text, min_size=1, max_size=5, unique=True),
       batches=st.lists(st.lists(st.tuples(st.integers(0, 4), change), max_size=8), max_size=6),
       shards=st.integers(1, 4), snapshot_every=st.integers(1, 4))
def test_any_interleaving_equals_a_dictionary(tmp_path_factory, ids, batches, shards, snapshot_every):
    tmp = tmp_path_factory.mktemp("reg")
    reg = ColumnRegistry(tmp, shards=shards, snapshot_every=snapshot_every, snapshots_kept=1_000)
    models = {0: {}}
    sinces: dict[int, dict[str, int]] = {0: {}}
    model: Model = {}
    for batch_id, batch in enumerate(batches):
        changes = [(ids[i % len(ids)], op, kind if op == UPSERT else 0, rec if op == UPSERT else None,
                    exp if op == UPSERT else math.nan, ten if op == UPSERT else "")
                   for i, (op, kind, rec, exp, ten) in batch]
        before = reg.version
        got = reg.apply(batch_id, batch_of(changes), 1.0)
        sinces[got.version] = next_since(sinces[before], changes, got.version) if got.version != before \
            else sinces[before]
        model = apply_model(model, changes)
        models[got.version] = model
        check_driver(reg, model, sinces[got.version])
    check_versions(tmp, models, shards, sinces)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=20), max_size=20))
def test_shard_hash_is_zlib_crc32(texts):
    off, data = kernels.string_buffers(pa.array(texts, pa.string()))
    _, crc = kernels.hash_ids(off, data, kernels.CRC_TABLE)
    assert crc.tolist() == [zlib.crc32(t.encode()) for t in texts]


def test_last_change_of_an_id_wins_within_a_batch(tmp_path):
    reg = ColumnRegistry(tmp_path)
    changes = [("x", UPSERT, EXPRESSION, b"1", math.nan, ""), ("x", DELETE, 0, None, math.nan, ""),
               ("x", UPSERT, PATTERN, b"3", math.nan, ""), ("y", UPSERT, EXPRESSION, b"y", math.nan, ""),
               ("y", DELETE, 0, None, math.nan, ""), ("z", DELETE, 0, None, math.nan, "")]
    got = reg.apply(7, batch_of(changes), 1.0)
    assert (got.version, got.added, got.deleted) == (1, 1, 0)
    assert same(as_model(read_shard(tmp_path, 1)), {"x": (PATTERN, b"3", math.nan, "")})
    delta, stamp = rfiles.read_delta(reg.directory, 1)
    assert delta.column("id").to_pylist() == ["x"] and stamp.batch_id == 7  # y and z changed nothing
    assert reg.apply(8, batch_of([("nobody", DELETE, 0, None, math.nan, "")]), 2.0).version == 1
    assert reg.lookup(["x", "y", "nobody"]).tolist() == [PATTERN, 0, 0]


def test_replay_after_a_crash_finds_its_version(tmp_path):
    reg = ColumnRegistry(tmp_path, snapshot_every=2)
    up = lambda i: [(i, UPSERT, EXPRESSION, i.encode(), math.nan, "")]  # noqa: E731
    assert reg.apply(3, batch_of(up("a")), 30.0).version == 1
    assert reg.apply(4, ChangeBatch.of([], []), 40.0).version == 1  # nothing recorded
    assert reg.apply(5, batch_of(up("b")), 50.0).version == 2  # a snapshot at 2
    assert reg.apply(6, batch_of(up("c")), 60.0).version == 3
    crashed = ColumnRegistry(tmp_path, snapshot_every=2)  # the driver died before Spark committed batch 6
    replay = crashed.apply(6, batch_of(up("c") + up("d")), 99.0)
    assert replay == (3, 60.0, True, 0, 0, 0) and len(crashed) == 3
    assert crashed.apply(5, batch_of(up("zz")), 1.0)[:3] == (2, 50.0, True)
    with pytest.raises(RegistryError, match="older than"):
        crashed.apply(2, batch_of(up("zz")), 1.0)
    assert crashed.apply(7, batch_of(up("d")), 70.0).version == 4


def test_incomplete_snapshot_is_ignored_and_replaced(tmp_path, monkeypatch):
    reg = ColumnRegistry(tmp_path, shards=2, snapshot_every=100)
    reg.apply(0, batch_of([(f"s{i}", UPSERT, EXPRESSION, b"r", math.nan, "") for i in range(20)]), 1.0)

    def crash(*args):
        raise OSError("the driver died")

    monkeypatch.setattr(rfiles, "write_manifest", crash)
    with pytest.raises(OSError):
        reg.snapshot()  # the parts are written, the manifest is not
    monkeypatch.undo()
    assert rfiles.part_files(reg.directory) and rfiles.snapshot_versions(reg.directory) == []
    again = ColumnRegistry(tmp_path, shards=2, snapshot_every=1)
    assert again.version == 1 and len(again) == 20
    again.apply(1, batch_of([("s0", DELETE, 0, None, math.nan, "")]), 2.0)  # a snapshot at 2, prune
    assert {v for v, _ in rfiles.part_files(again.directory)} == {2}
    assert len(read_all(tmp_path, 2, 2)) == 19


def test_missing_and_corrupt_files_are_errors(tmp_path):
    reg = ColumnRegistry(tmp_path, shards=2, snapshot_every=2, snapshots_kept=1)
    for b in range(5):
        reg.apply(b, batch_of([(f"s{b}", UPSERT, PATTERN, b"p", math.nan, "")]), float(b))
    deltas, snaps = reg.directory.sub(rfiles.DELTAS), reg.directory.sub(rfiles.SNAPSHOTS)
    assert rfiles.delta_versions(reg.directory) == [5] and rfiles.snapshot_versions(reg.directory) == [4]
    with pytest.raises(RegistryError, match="not stored"):
        read_shard(tmp_path, 6)
    with pytest.raises(RegistryError, match="pruned"):
        read_shard(tmp_path, 3)
    good = deltas.read(rfiles.delta_name(5))
    deltas.write(rfiles.delta_name(5), good[: len(good) // 2])
    with pytest.raises(RegistryError, match="cannot read"):
        ColumnRegistry(tmp_path)
    deltas.write(rfiles.delta_name(5), rfiles.to_ipc(pa.table({"id": ["x"]})))
    with pytest.raises(RegistryError, match="cannot read|schema"):
        read_shard(tmp_path, 5)
    deltas.write(rfiles.delta_name(5), good)
    table, stamp = rfiles.read_delta(reg.directory, 5)  # a delta of format 2 (no packed subscriptions)
    meta = {**rfiles._metadata(stamp), b"registry.format": b"2"}
    deltas.write(rfiles.delta_name(5), rfiles.to_ipc(table.drop_columns(["packed"]).replace_schema_metadata(meta)))
    with pytest.raises(RegistryError, match=f"(?s)has format 2 .*not format {rfiles.FORMAT}"):
        read_shard(tmp_path, 5)
    deltas.write(rfiles.delta_name(5), good)
    assert len(read_all(tmp_path, 5, 2)) == 5
    deltas.write(rfiles.delta_name(6), good)  # version 5's file under the name of 6
    with pytest.raises(RegistryError, match="holds version 5"):
        read_shard(tmp_path, 6)
    deltas.remove(rfiles.delta_name(6))
    part = snaps.read(rfiles.part_name(4, 1, 2))
    snaps.remove(rfiles.part_name(4, 1, 2))
    with pytest.raises(RegistryError, match="missing"):
        ColumnRegistry(tmp_path, shards=2)
    snaps.write(rfiles.part_name(4, 1, 2), snaps.read(rfiles.part_name(4, 0, 2)))
    with pytest.raises(RegistryError, match="its manifest says"):
        read_shard(tmp_path, 5, 1, 2)
    snaps.write(rfiles.part_name(4, 1, 2), part)
    snaps.write(rfiles.manifest_name(4), b"{not json")
    with pytest.raises(RegistryError, match="cannot read"):
        read_shard(tmp_path, 4, 0, 2)
    snaps.remove(rfiles.manifest_name(4))
    with pytest.raises(RegistryError, match="pruned"):  # deltas 1..4 are gone with the snapshot
        read_shard(tmp_path, 5)


def test_expired_and_tenants(tmp_path):
    reg = ColumnRegistry(tmp_path)
    reg.apply(0, batch_of([("a", UPSERT, EXPRESSION, b"a", 10.0, "acme"), ("b", UPSERT, PATTERN, b"b", 20.0, ""),
                           ("c", UPSERT, EXPRESSION, b"c", math.nan, "acme")]), 1.0)
    assert reg.expired(5.0).to_pylist() == []
    assert reg.expired(10.0).to_pylist() == ["a"]
    reg.apply(1, batch_of([("a", DELETE, 0, None, math.nan, "")]), 2.0)
    assert reg.expired(30.0).to_pylist() == ["b"]
    assert reg.counts() == {("acme", EXPRESSION): 1, ("", PATTERN): 1}


def test_held_per_tenant_and_target_survive_a_restart(tmp_path):
    reg = ColumnRegistry(tmp_path, snapshot_every=2)
    ups = ChangeBatch.of(["t:x", "t>n.t.a:y", "t>n.t.b:z", "u:p", "plain", ":a>b:c"], ["upsert"] * 6,
                         [EXPRESSION, EXPRESSION, EXPRESSION, PATTERN, EXPRESSION, EXPRESSION], [b"r"] * 6,
                         tenants=["t", "t", "t", "u", "", ""], predicates=[2, 3, 4, 0, 5, 1],
                         packed=[b"p"] * 3 + [view.packed("p", None)] + [b"p"] * 2)
    reg.apply(0, ups, 1.0)
    reg.apply(1, ChangeBatch.of(["u:p"], ["upsert"], [PATTERN], [b"q"], tenants=["u"], packed=[view.packed("q", None)]),
              2.0)  # a snapshot at 2
    reg.apply(2, ChangeBatch.of(["t>n.t.b:z"], ["delete"]), 3.0)
    for r in (reg, ColumnRegistry(tmp_path)):
        assert r.held() == {("t", EXPRESSION): (2, 5), ("u", PATTERN): (1, 0), ("", EXPRESSION): (2, 6)}
        assert r.columns.live_targets() == {"t": ["n.t.a"]}
    old = reg.columns_at(2)
    assert old.live_targets() == {"t": ["n.t.a", "n.t.b"]} and old.held_by_tenant()[("t", EXPRESSION)] == (3, 9)
    assert read_shard(tmp_path, 3).sort_by("id").column("predicates").to_pylist() == [1, 5, 2, 3, 0]


def test_many_deletes_compact_the_driver_columns(tmp_path):
    reg = ColumnRegistry(tmp_path, snapshot_every=1000)
    ids = [f"sub-{i}" for i in range(20_000)]
    reg.apply(0, ChangeBatch.of(ids, np.zeros(len(ids), np.int8), np.ones(len(ids), np.int8), [b"r"] * len(ids),
                                packed=[b"p"] * len(ids)), 1.0)
    reg.apply(1, ChangeBatch.of(ids[:15_000], np.ones(15_000, np.int8)), 2.0)
    assert reg.columns.n < 20_000 and len(reg) == 5_000
    assert set(reg.live().column("id").to_pylist()) == set(ids[15_000:])
    assert reg.lookup(ids[14_999:15_001]).tolist() == [0, EXPRESSION]


@pytest.mark.parametrize("kwargs, match", [
    (dict(ids=["a", None], ops=["upsert", "delete"], kinds=[1, 0], records=[b"", None]), "non-empty"),
    (dict(ids=["a", ""], ops=["delete", "delete"]), "non-empty"),
    (dict(ids=["a"], ops=["insert"]), "'upsert' or 'delete'"),
    (dict(ids=["a"], ops=np.array([3])), "'upsert' or 'delete'"),
    (dict(ids=["a"], ops=["upsert"], kinds=[3], records=[b"x"]), "kind"),
    (dict(ids=["a"], ops=["upsert"], kinds=[1]), "record"),
    (dict(ids=["a", "b"], ops=["upsert"]), "1 values for 2"),
    (dict(ids=["a"], ops=["upsert"], kinds=[1], records=[b"x"], expires=[math.inf]), "finite"),
    (dict(ids=["a", "b"], ops=["upsert"] * 2, kinds=[2, 1], records=[b"x"] * 2, packed=[None, None]), "packed"),
    (dict(ids=[1], ops=["delete"]), "ids must be"),
])
def test_bad_batches_give_one_clear_error(kwargs, match):
    with pytest.raises(ChangeBatchError, match=match):
        ChangeBatch.of(**kwargs)


def test_the_version_before_a_snapshot_stays_until_the_next_batch(tmp_path):
    """A replay of the batch that wrote a snapshot judges against the version before it; the
    files of that version go when the next batch comes (the batch is committed by then)."""
    reg = ColumnRegistry(tmp_path, snapshot_every=2, snapshots_kept=1)
    reg.apply(0, batch_of([("a", UPSERT, EXPRESSION, b"aa", math.nan, "t")]), 1.0)
    reg.apply(1, batch_of([("b", UPSERT, EXPRESSION, b"b", math.nan, "t")]), 2.0)  # a snapshot at 2
    crashed = ColumnRegistry(tmp_path, snapshot_every=2, snapshots_kept=1)
    assert crashed.apply(1, batch_of([]), 9.0)[:3] == (2, 2.0, True)
    assert crashed.columns_at(1).held_by_tenant() == {("t", EXPRESSION): (1, 2)}
    crashed.apply(2, batch_of([("a", DELETE, 0, None, math.nan, "")]), 3.0)
    with pytest.raises(RegistryError, match="pruned"):
        crashed.columns_at(1)
    assert crashed.held() == {("t", EXPRESSION): (1, 1)}


def test_a_snapshot_written_beside_the_batch_is_the_one_apply_writes(tmp_path):
    """The match query's way (``apply(..., snapshot=False)``, then :meth:`snapshot` in a thread
    when due, joined before the next batch) leaves the files and versions ``apply`` leaves."""
    from streaming.match.job import _Beside

    rng = random.Random(3)
    inline = ColumnRegistry(tmp_path / "inline", shards=2, snapshot_every=3, snapshots_kept=1)
    beside = ColumnRegistry(tmp_path / "beside", shards=2, snapshot_every=3, snapshots_kept=1)
    for batch in range(10):
        changes = [(f"s{rng.randrange(20)}", rng.choice([UPSERT, UPSERT, DELETE]), EXPRESSION, b"r", math.nan, "")
                   for _ in range(rng.randint(1, 6))]
        changes = [(i, op, kind if op == UPSERT else 0, rec if op == UPSERT else None, e, t)
                   for i, op, kind, rec, e, t in changes]
        a = inline.apply(batch, batch_of(changes), float(batch))
        b = beside.apply(batch, batch_of(changes), float(batch), snapshot=False)
        assert a == b and not inline.snapshot_due
        if beside.snapshot_due:
            writer = _Beside(beside.snapshot)
            writer.join()
            assert writer.error is None and writer.ms > 0
        assert rfiles.snapshot_versions(inline.directory) == rfiles.snapshot_versions(beside.directory)
        assert rfiles.delta_versions(inline.directory) == rfiles.delta_versions(beside.directory)
        assert inline.snapshot_version == beside.snapshot_version
        for shard in range(2):
            assert same(as_model(read_shard(tmp_path / "inline", a.version, shard, 2)),
                        as_model(read_shard(tmp_path / "beside", b.version, shard, 2)))
    failing = _Beside(lambda: (_ for _ in ()).throw(RegistryError("files and driver differ")))
    failing.join()
    assert isinstance(failing.error, RegistryError)

"""Subscription records parsed in tasks (issue 29, item 3): the tasks' ranges cover each record
once, and what the tasks send back is the driver's rows (one error record per bad record);
below :data:`~streaming.match.changes.DRIVER_RECORDS`, the driver's fast parse and the general
path on the driver or in tasks (past ``general_records``) give the same rows, replays too."""

from __future__ import annotations

import random

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.kafka.offsets import OffsetRange
from streaming.match import changes
from streaming.match.changes import parse_ranges, parse_subscription_records, parse_tasks
from streaming.registry_columns import ColumnRegistry
from streaming.registry_columns.admit import admit
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA
from tests.unit.streaming.test_registry_parse import KEYS, RAW


def _offsets(todo: list[tuple[OffsetRange, ...]]) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, o) for task in todo for r in task for o in range(r.start, r.end))


@pytest.mark.parametrize(("sizes", "slots", "task_records", "tasks"), [
    ([0, 0], 4, 10, 0), ([5], 4, 10, 1), ([100], 4, 10, 4), ([100], 2, 10, 2), ([37, 0, 3, 21], 3, 10, 3),
    ([1] * 50, 2, 10, 2), ([25], 8, 10, 2),
])
def test_tasks_cover_every_record_once(sizes, slots, task_records, tasks):
    ranges = [OffsetRange("s", p, 7, 7 + n) for p, n in enumerate(sizes)]
    todo = parse_tasks(ranges, slots, task_records)
    assert len(todo) == tasks and all(todo)
    assert _offsets(todo) == sorted(("s", p, o) for p, n in enumerate(sizes) for o in range(7, 7 + n))
    if todo:
        loads = [sum(r.end - r.start for r in t) for t in todo]
        assert max(loads) - min(loads) <= max(sizes)


def _records(n_partitions: int = 3) -> pa.Table:
    """Every value of the parse tests (good, bad, patterns, deletes) under every key, spread over partitions."""
    pairs = [(k, v) for k in KEYS for v in RAW]
    return pa.table({"key": [k for k, _ in pairs], "value": [v for _, v in pairs],
                     "topic": ["subs"] * len(pairs), "partition": [i % n_partitions for i in range(len(pairs))],
                     "offset": [i // n_partitions for i in range(len(pairs))]}, schema=changes.RECORD_SCHEMA)


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


@pytest.mark.parametrize("targets", [False, True])
@pytest.mark.parametrize("route_by", ["", "a0"])
def test_the_tasks_rows_are_the_drivers(monkeypatch, targets, route_by):
    records = _records()
    by_partition = {p: records.filter(pa.compute.equal(records.column("partition"), p)) for p in range(3)}

    def read_range(kafka, rng):  # a task's read of its range, from the table instead of a broker
        part = by_partition[rng.partition]
        offsets = part.column("offset")
        mask = pa.compute.and_(pa.compute.greater_equal(offsets, rng.start), pa.compute.less(offsets, rng.end))
        yield from part.filter(mask).to_batches(max_chunksize=4)

    monkeypatch.setattr(changes, "read_range", read_range)
    ranges = [OffsetRange("subs", p, 0, by_partition[p].num_rows) for p in range(3)]
    todo = parse_tasks(ranges, 5, 7)
    assert len(todo) == 5
    streams = [blob for i in range(len(todo))
               for blob in parse_ranges([i], None, todo, targets=targets, route_by=route_by)]
    tasks = pa.concat_tables(pa.ipc.open_stream(b).read_all() for b in streams)
    driver = parse_subscription_records(records, targets=targets, route_by=route_by)
    assert (tasks.column("route").null_count == tasks.num_rows) == (not route_by)
    assert tasks.schema == driver.schema == PARSED_SCHEMA
    assert _sorted(tasks) == _sorted(driver)
    assert tasks.num_rows == records.num_rows  # one row, so at most one error record, per record
    assert 0 < pa.compute.sum(pa.compute.equal(tasks.column("op"), ERROR)).as_py() < records.num_rows


# -- the driver's bound by cost: the fast parse on the driver, the general path in tasks past GENERAL_RECORDS --
FAST = [orjson.dumps({"op": "upsert", "id": f"f{i}", "json": {"all": [["a0", "=", i], ["b", "<=", 2.5 * i]]}})
        for i in range(6)] + [orjson.dumps({"id": "f9", "json": ["name", "!=", "x"]})]
"""Records of the common JSON form (the fast parse takes them)."""
GENERAL = [orjson.dumps({"id": f"e{i}", "expr": f"price > {i} AND symbol = 'X{i}'"}) for i in range(6)] + [
    orjson.dumps({"id": "f1", "op": "delete"}), orjson.dumps({"id": "p", "pattern": "SELECT * FROM FILTER{price > 1}(S)"}),
    orjson.dumps({"id": "z", "json": {"all": [["a", "=", True]]}})]
"""Records the fast parse refuses and the general path accepts (deletes and patterns too)."""
BAD = [b"{broken", b"", None, orjson.dumps({"expr": "price > 1"}), orjson.dumps({"id": "y", "expr": "price >"}),
       orjson.dumps({"id": "e1", "json": {"price": [{"numeric": [">", 1]}]}}), orjson.dumps([1, 2]),
       orjson.dumps({"id": "p", "pattern": "SELECT * FROM ("})]
"""Bad records (each gives one error record), some of the common form's near misses."""


class _Job:
    """An RDD of ``parallelize(data, n)`` as the parse job uses it (``mapPartitions`` then
    ``collect``), run in this process: the tasks' function, partition by partition."""

    def __init__(self, data: list, n: int, fn=None):
        self.data, self.n, self.fn = data, n, fn

    def mapPartitions(self, fn):  # noqa: N802 (Spark's name)
        return _Job(self.data, self.n, fn)

    def collect(self) -> list:
        share = -(-len(self.data) // self.n) if self.data else 1
        return [out for lo in range(0, len(self.data), share) for out in self.fn(iter(self.data[lo:lo + share]))]


class _Context:
    defaultParallelism = 3  # noqa: N815 (Spark's name)
    jobs = 0

    def parallelize(self, data, n):
        _Context.jobs += 1
        return _Job(list(data), n)


def _mixed(rng: random.Random, n: int) -> pa.Table:
    """``n`` records drawn from the three kinds (keys: the id's, none, or another's), over two partitions."""
    kinds: list[list[bytes | None]] = [list(FAST), list(GENERAL), BAD]
    values = [rng.choice(rng.choice(kinds)) for _ in range(n)]
    keys = [rng.choice([None, b"k", (orjson.loads(v).get("id", "x").encode() if v and v[:1] == b"{" and
                                     v != b"{broken" else None)]) for v in values]
    return pa.table({"key": keys, "value": values, "topic": ["subs"] * n,
                     "partition": [i % 2 for i in range(n)], "offset": [i // 2 for i in range(n)]},
                    schema=changes.RECORD_SCHEMA)


def _in_tasks(monkeypatch, records: pa.Table, general_records: int, targets: bool = False,
              route_by: str = "") -> tuple[pa.Table, int]:
    """:func:`parse_in_tasks` of ``records`` (read from the table) and the jobs it ran."""
    monkeypatch.setattr(changes, "read_records", lambda kafka, ranges: records)
    _Context.jobs = 0
    ranges = [OffsetRange("subs", p, 0, records.num_rows) for p in (0,)]
    got = changes.parse_in_tasks(_Context(), None, ranges, targets=targets,  # type: ignore[arg-type]  # the stand-in job
                                 general_records=general_records, route_by=route_by)
    return got, _Context.jobs


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("targets", [False, True])
def test_below_and_above_the_general_bound_the_rows_are_the_all_driver_paths(monkeypatch, seed, targets):
    rng = random.Random(seed)
    records = _mixed(rng, rng.randint(1, 80))
    route_by = "a0" if seed % 2 else ""  # the routes found where the rows are parsed
    want = _sorted(parse_subscription_records(records, targets=targets, route_by=route_by))
    done, rest = changes.driver_parse(records)
    refused = rest.num_rows
    assert done.num_rows + refused == records.num_rows
    for bound, jobs in ((refused + 1, 0), (refused, 1 if refused else 0), (1, 1 if refused else 0)):
        got, ran = _in_tasks(monkeypatch, records, bound, targets, route_by)
        assert ran == jobs
        assert got.schema == PARSED_SCHEMA and _sorted(got) == want
        again, _ = _in_tasks(monkeypatch, records, bound, targets, route_by)  # a replay: the same rows
        assert _sorted(again) == want
    assert got.num_rows == records.num_rows  # one row, so at most one error record, per record


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FAST + GENERAL + BAD), min_size=0, max_size=40), st.integers(1, 30),
       st.integers(1, 4))
def test_any_mix_gives_the_drivers_rows_and_one_error_record_per_bad_record(monkeypatch, values, bound, slots):
    n = len(values)
    records = pa.table({"key": [None] * n, "value": values, "topic": ["subs"] * n, "partition": [0] * n,
                        "offset": list(range(n))}, schema=changes.RECORD_SCHEMA)
    monkeypatch.setattr(_Context, "defaultParallelism", slots)
    got, _ = _in_tasks(monkeypatch, records, bound)
    assert _sorted(got) == _sorted(parse_subscription_records(records))
    assert sorted(got.column("offset").to_pylist()) == list(range(n))
    errors = pa.compute.equal(got.column("op"), ERROR).to_pylist()
    assert sum(errors) == sum(v in BAD for v in values)


@pytest.mark.parametrize(("total", "slots", "task_records", "tasks"), [
    (0, 2, 10, 0), (5, 2, 10, 1), (100, 2, 10, 2), (100, 8, 10, 8), (25, 8, 10, 2)])
def test_general_tasks_cover_every_record_once(total, slots, task_records, tasks):
    records = pa.table({"key": [None] * total, "value": [b"x"] * total, "topic": ["s"] * total,
                        "partition": [0] * total, "offset": list(range(total))}, schema=changes.RECORD_SCHEMA)
    blobs = changes.general_tasks(records, slots, task_records)
    assert len(blobs) == tasks
    got = [o for b in blobs for o in pa.ipc.open_file(b).read_all().column("offset").to_pylist()]
    assert got == list(range(total))


def test_a_replay_through_the_other_path_admits_the_same(tmp_path, monkeypatch):
    """A batch parsed with the general records in tasks, applied, then replayed with them on
    the driver (and the reverse order for the next batch): the same changes and error records."""
    registry = ColumnRegistry(tmp_path / "reg")
    rng = random.Random(7)
    for batch_id, (first, second) in enumerate([(1, 10**6), (10**6, 1), (1, 1)]):
        records = _mixed(rng, 60)
        a, _ = _in_tasks(monkeypatch, records, first)
        b, _ = _in_tasks(monkeypatch, records, second)
        got = admit(a, registry, batch_id, None, lambda t: True, 1000.0 + batch_id)
        registry.apply(batch_id, got.changes, got.now)
        again = admit(b, registry, batch_id, None, lambda t: True, 2000.0)
        assert again.replay and again.now == got.now
        assert again.errors.equals(got.errors) and again.accepted == got.accepted
        assert again.changes.ids.equals(got.changes.ids) and (again.changes.ops == got.changes.ops).all()
        assert again.changes.packed.equals(got.changes.packed)

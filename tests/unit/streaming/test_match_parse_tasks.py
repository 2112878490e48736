"""Subscription records parsed in tasks (issue 29, item 3): the tasks' ranges cover each record
once, and what the tasks send back is the driver's rows (one error record per bad record)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streaming.kafka.offsets import OffsetRange
from streaming.match import changes
from streaming.match.changes import parse_ranges, parse_subscription_records, parse_tasks
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
def test_the_tasks_rows_are_the_drivers(monkeypatch, targets):
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
    streams = [blob for i in range(len(todo)) for blob in parse_ranges([i], None, todo, targets=targets)]
    tasks = changes.without_patterns(pa.concat_tables(pa.ipc.open_stream(b).read_all() for b in streams))
    driver = parse_subscription_records(records, targets=targets)
    assert tasks.schema == driver.schema == PARSED_SCHEMA
    assert _sorted(tasks) == _sorted(driver)
    assert tasks.num_rows == records.num_rows  # one row, so at most one error record, per record
    assert 0 < pa.compute.sum(pa.compute.equal(tasks.column("op"), ERROR)).as_py() < records.num_rows

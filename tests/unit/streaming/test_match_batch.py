"""The match query's pure functions: registry changes, executor matching, retro notifications."""

from __future__ import annotations

import json
import random

import orjson
import pyarrow as pa
import pytest

from matchers.catalog import create
from matchers.events import flatten
from matchers.expr import Subscription, pred
from matchers.oracle import match as oracle_match
from streaming import executor_cache, notifications
from streaming.config import Settings
from streaming.kafka import offsets
from streaming.kafka.offsets import OffsetRange
from streaming.match import (
    TASK_SCHEMA,
    BatchContext,
    logged_ranges,
    match_partition,
    match_pinned,
    match_ranges,
    new_subscriptions,
    pinned_tasks,
    plan_tasks,
    retro_notifications,
    shard_groups,
)
from streaming.match.changes import records_table
from streaming.match.tasks import TaskMetrics, TaskResult
from streaming.patterns.registry import current
from streaming.registry_columns import EXPRESSION, PATTERN, ColumnRegistry
from streaming.registry_columns.shards import build_shard, catch_up
from streaming.validity import ValidEvent, ValidityStore, decode
from tests.strategies import random_event, random_subscriptions

from .helpers import NO_KAFKA, ModelRegistry, kafka_batch, record_batch

pytestmark = pytest.mark.usefixtures("empty_cache")


def settings_for(tmp_path, **match):
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)}, match=match)


def sub_rows(records, topic="subscriptions"):
    """Subscription records as the driver reads them (Arrow columns of the Kafka source)."""
    return records_table(kafka_batch([orjson.dumps(r) if isinstance(r, dict) else r for r in records], topic))




def _collect(rows: list[dict]):
    """A ``produce`` that appends the records to ``rows``."""
    def produce(batches):
        before = len(rows)
        rows.extend(r for rb in batches for r in rb.to_pylist())
        return len(rows) - before
    return produce


def run_partition(settings, registry, batch_id, now, batches, payload="event"):
    """Rows sent by one task, its metrics and its valid events (as the driver stores them)."""
    settings = settings.replace(notifications={"payload": payload})
    ctx = BatchContext.of(settings, batch_id, now, registry.spec(), NO_KAFKA)
    rows: list[dict] = []

    def produce(batches):
        before = len(rows)
        rows.extend(r for rb in batches for r in rb.to_pylist())
        return len(rows) - before

    out = [r for rb in match_partition(iter(batches), ctx, produce) for r in rb.to_pylist()]
    assert len(out) == 1
    result = TaskResult.from_row(out[0])
    assert result.metrics.records == len(rows)
    assert result.valid_events == decode(out[0]["valid_events"])
    assert len(result.valid_events) == result.metrics.valid
    ValidityStore(settings.validity_dir).write(batch_id, result.valid_events)
    return rows, TaskMetrics.total([result.metrics])


@pytest.mark.parametrize("seed", [11, 12])
def test_notifications_equal_the_oracle(tmp_path, seed):
    rng = random.Random(seed)
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    subs = random_subscriptions(rng, 120)
    reg.apply(0, subs)
    events = [random_event(rng) for _ in range(300)]
    raw = [orjson.dumps(e) for e in events]
    bad = {17: b"{not json", 40: b"\xff\xfe", 41: b"[1,2]"}
    for i, v in bad.items():
        raw[i] = v
    events[99] = {"a": [1, 2], "price": None, "symbol": "IBM"}  # an array, matched element by element
    raw[99] = orjson.dumps(events[99])
    batches = [kafka_batch(raw[:150], first_offset=0), kafka_batch(raw[150:], first_offset=150)]
    rows, m = run_partition(settings, reg, 1, 1000.0, batches)
    got = {(r["key"].decode(), orjson.loads(r["value"])["offset"]) for r in rows if r["topic"] == "notifications"}
    want = set()
    for i, e in enumerate(events):
        if i in bad:
            continue
        for sid in oracle_match(subs, flatten(e)):
            want.add((sid, i))
    assert got == want and len(got) > 50
    errors = [orjson.loads(r["value"]) for r in rows if r["topic"] == "errors"]
    assert sorted((e["offset"], e["stage"]) for e in errors) == [
        (17, "event"), (40, "event"), (41, "event")]
    assert {e["offset"]: e["encoding"] for e in errors}[40] == "base64"
    assert all(e["id"] == notifications.notification_id(e["stage"], "events", 0, e["offset"]) for e in errors)
    assert m.events == 297 and m.errors == 3 and m.matches == len(want)
    one = next(orjson.loads(r["value"]) for r in rows if r["topic"] == "notifications")
    assert one["id"] == notifications.notification_id(one["subscription"], "events", 0, one["offset"])
    assert one["event"] == orjson.loads(raw[one["offset"]]) and one["event_time_ms"] == 1_700_000_000_000
    assert one["event_id"] == f"events/0/{one['offset']}"


def test_id_payload_and_event_id_field(tmp_path):
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    from matchers.expr import Subscription, pred
    reg.apply(0, [Subscription.of("s", pred("price", "<", 5))])
    batch = kafka_batch([b'{"id": "e-1", "price": 1}', b'{"price": 1}', b'{"price": 9}'])
    rows, _ = run_partition(settings, reg, 1, 0.0, [batch], payload="id")
    docs = [orjson.loads(r["value"]) for r in rows]
    assert [d["event_id"] for d in docs] == ["e-1", "events/0/1"]
    assert all("event" not in d for d in docs)


def live_ids(registry):
    return set(registry.live().column("id").to_pylist())


def test_changes_then_replay_then_expiry(tmp_path):
    reg = ColumnRegistry(tmp_path / "registry")
    rows = sub_rows([
        {"op": "upsert", "id": "s1", "expr": "price < 5"},
        {"op": "upsert", "id": "s2", "expr": "price > 5", "expires": 50},
        {"op": "upsert", "id": "bad", "expr": "price <"},
        {"op": "upsert", "id": "old", "expr": "price > 5", "expires": 5},
    ])
    applied, now, out = record_batch(reg, 0, rows, 10.0)
    assert not applied.replay and now == 10.0 and out.accepted == 3 and out.expired == 1
    assert [orjson.loads(e)["offset"] for e in out.errors.column("value").to_pylist()] == [2]
    assert out.errors.column("topic").to_pylist() == ["errors"]
    assert live_ids(reg) == {"s1", "s2"} and reg.version == applied.version == 1
    assert [s.id for s in new_subscriptions(reg.directory, applied.version)] == ["s1", "s2"]
    again, now, out = record_batch(ColumnRegistry(tmp_path / "registry"), 0, rows, 99.0)  # a restart's replay
    assert again.replay and again.version == 1 and now == 10.0 and out.errors.num_rows == 1
    later, now, out = record_batch(reg, 1, sub_rows([]), 60.0)
    assert out.expired == 1 and live_ids(reg) == {"s1"} and reg.version == later.version == 2 and now == 60.0
    nothing, now, out = record_batch(reg, 2, sub_rows([]), 61.0)
    assert (nothing.version, nothing.replay, now, out.expired) == (2, False, 61.0, 0)
    assert new_subscriptions(reg.directory, 2) == [] and new_subscriptions(reg.directory, 0) == []


def test_records_apply_in_offset_order_and_an_expired_upsert_is_deleted_in_its_batch(tmp_path):
    reg = ColumnRegistry(tmp_path / "registry")
    record_batch(reg, 0, sub_rows([{"id": "gone", "expr": "price > 1", "expires": 100}]), 1.0)
    first = sub_rows([{"id": "x", "op": "delete"}, {"id": "y", "expr": "price > 1", "expires": 5},
                      {"id": "gone", "expr": "price > 2"}])
    second = sub_rows([{"id": "x", "expr": "price > 1"}, {"id": "y", "expr": "price > 1"}], "subscriptions")
    second = second.set_column(4, "offset", pa.array([3, 4], pa.int64()))
    records = pa.concat_tables([second, first])  # read out of order: the offsets decide
    applied, _, out = record_batch(reg, 1, records, 150.0)
    assert live_ids(reg) == {"x", "y", "gone"} and out.expired == 0 and applied.added == 2 and applied.replaced == 1
    applied, _, out = record_batch(reg, 2, sub_rows([{"id": "z", "expr": "price > 1", "expires": 5},
                                                     {"id": "y", "expr": "price > 1", "expires": 7}]), 150.0)
    assert live_ids(reg) == {"x", "gone"} and out.expired == 2 and applied.deleted == 1  # z never was


def test_pattern_records_are_stored_and_their_errors_reported_once(tmp_path):
    """A pattern record replaces the expression of its id (one id names one kind at a time) and is
    stored as a pattern, in the pattern view; a bad one changes nothing and is one error record
    (stage ``pattern``), as a bad expression is (stage ``subscription``)."""
    reg = ColumnRegistry(tmp_path / "registry")
    record_batch(reg, 0, sub_rows([{"id": "a", "expr": "price > 1"}, {"id": "b", "expr": "price > 1"},
                                   {"id": "c", "expr": "price > 1"}]), 1.0)
    applied, _, out = record_batch(reg, 1, sub_rows([
        {"id": "a", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"},
        {"id": "b", "pattern": "SELECT * FROM ("},
        {"id": "p", "pattern": 7},
        {"id": "q", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"},
        {"id": "c", "expr": "price <"}]), 2.0)
    assert live_ids(reg) == {"a", "b", "c", "q"} and (applied.added, applied.replaced, applied.deleted) == (1, 1, 0)
    assert reg.lookup(["a", "b", "c", "p", "q"]).tolist() == [PATTERN, EXPRESSION, EXPRESSION, 0, PATTERN]
    errors = [orjson.loads(e) for e in out.errors.column("value").to_pylist()]
    assert [(e["offset"], e["stage"]) for e in errors] == [(1, "pattern"), (2, "pattern"), (4, "subscription")]
    assert sorted(reg.pattern_view()) == ["a", "q"] and sorted(current(reg.directory.uri).patterns) == ["a", "q"]


STOCK = "SELECT * FROM FILTER{price > 10}(Stock)"
KIND_CHANGES = [  # x: expression, pattern, expression; y: pattern, expression, pattern
    ({"id": "x", "expr": "price > 1"}, {"id": "y", "pattern": STOCK}),
    ({"id": "x", "pattern": STOCK}, {"id": "y", "expr": "price > 3"}),
    ({"id": "x", "expr": "price > 2"}, {"id": "y", "pattern": STOCK.replace("10", "20")}),
]


@pytest.mark.parametrize("batches", [1, 2, 3])
def test_an_id_changing_kind_ends_with_its_last_record(tmp_path, batches):
    """Ids changing kind expression → pattern → expression (and back) within one batch or across
    batches: the match index (built from the files, and caught up from each version) and the
    pattern view end with the last record of each id."""
    reg = ColumnRegistry(tmp_path / "registry")
    records = [r for pair in KIND_CHANGES for r in pair]
    cuts = {1: [0, 6], 2: [0, 3, 6], 3: [0, 2, 4, 6]}[batches]
    index, at = create("counting"), 0
    for b, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        record_batch(reg, b, sub_rows(records[lo:hi]), 1.0 + b)
        catch_up(index, reg.directory, at, reg.version, 0, 1)
        at = reg.version
    events = [{"price": 5}, {"price": 1.5}]  # y's expression (price > 3) and x's first (price > 1) are gone
    built = build_shard(reg.directory, reg.version, 0, 1, lambda: create("counting"))
    assert [sorted(m) for m in built.match_events(events)] == [sorted(m) for m in index.match_events(events)] == \
        [["x"], []]
    assert reg.lookup(["x", "y"]).tolist() == [EXPRESSION, PATTERN]
    view = current(reg.directory.uri)
    assert {i: e[0] for i, e in view.patterns.items()} == {"y": STOCK.replace("10", "20")} == \
        {i: e[0] for i, e in ColumnRegistry(tmp_path / "registry").pattern_view().items()}
    assert view.patterns["y"][1] == view.version  # registered at the version of its last record


def test_valid_events_are_kept_and_matched_by_new_subscriptions(tmp_path):
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    batch = kafka_batch([
        b'{"price": 3, "valid_until": 500}',
        b'{"price": 4, "valid_until": 50}',
        b'{"price": 8, "valid_until": 500}',
        b'{"price": 2}',
    ])
    rows, m = run_partition(settings, reg, 0, 100.0, [batch])
    assert rows == [] and m.valid == 2
    store = ValidityStore(settings.validity_dir)
    assert [e.offset for e in store.valid_events(1, 100.0)] == [0, 2]
    assert store.valid_events(0, 100.0) == []  # the batch's own events are matched by the main path
    applied, now, _ = record_batch(reg.registry, 1, sub_rows([{"id": "late", "expr": "price < 5"}]), 200.0)
    new = new_subscriptions(reg.registry.directory, applied.version)
    retro, errors = retro_notifications("counting", new, store.valid_events(1, now), 1, "event")
    assert len(retro) == 1 and errors == []
    doc = orjson.loads(retro[0][1])
    assert retro[0][0] == "late" and doc["offset"] == 0 and doc["retro"] is True
    assert doc["id"] == notifications.notification_id("late", "events", 0, 0)
    assert store.valid_events(2, 600.0) == []
    assert store.prune(600.0) == 1 and store.count_files() == 0
    # a replayed batch rewrites its file instead of adding one
    run_partition(settings, reg, 0, 100.0, [batch])
    run_partition(settings, reg, 0, 100.0, [batch])
    assert store.count_files() == 1


def test_an_oversized_retro_notification_goes_id_only_and_a_huge_id_is_one_error():
    sub = Subscription.of("late", pred("price", "<", 5))
    big = orjson.dumps({"price": 1, "pad": "x" * 6_000})
    huge = orjson.dumps({"price": 2, "id": "i" * 6_000})
    events = [ValidEvent("events", 0, 0, None, 500.0, "e0", big),
              ValidEvent("events", 0, 1, None, 500.0, "i" * 6_000, huge),
              ValidEvent("events", 0, 2, None, 500.0, "e2", b'{"price": 3}')]
    retro, errors = retro_notifications("counting", [sub], events, 1, "event", message_bytes=5_000)
    docs = {orjson.loads(v)["offset"]: orjson.loads(v) for _, v in retro}
    assert sorted(docs) == [0, 2] and "event" not in docs[0] and "limits.message_bytes" in docs[0]["note"]
    assert docs[2]["event"] == {"price": 3} and "note" not in docs[2]
    assert [(e.position.offset, e.stage) for e in errors] == [(1, "event")] and "even without" in errors[0].reason
    assert all(len(k) + len(v) <= 5_000 - notifications.RECORD_OVERHEAD for k, v in retro)


def test_the_total_of_task_metrics_adds_counts_and_keeps_the_largest_index():
    a = TaskMetrics(events=1, errors=1, matches=1, match_ns=1, index_ns=1, valid=1, index_bytes=10, records=1,
                    read_ns=1, task_ns=1)
    b = TaskMetrics(events=2, errors=2, matches=2, match_ns=2, index_ns=2, valid=2, index_bytes=7, records=2,
                    read_ns=2, task_ns=2)
    total = TaskMetrics.total([a, b])
    assert total == TaskMetrics(3, 3, 3, 3, 3, 3, 10, 3, 3, 3) and TaskMetrics.total([]) == TaskMetrics()


def test_a_task_result_travels_as_one_row_of_the_task_schema():
    valid = [ValidEvent("events", 0, 4, 1_000, 9.0, "e4", b'{"price": 3}')]
    result = TaskResult(TaskMetrics(events=5, index_bytes=7), valid, {"matcher": "counting"}, "host/pid1", [2, 0])
    row = result.to_batch().to_pylist()
    assert len(row) == 1 and list(row[0]) == TASK_SCHEMA.names
    back = TaskResult.from_row(row[0])
    assert back == TaskResult(result.metrics, valid, {"matcher": "counting"}, "host/pid1", [0, 2])
    assert TaskResult.from_row(TaskResult().to_batch().to_pylist()[0]) == TaskResult()


def test_logged_ranges_read_spark_offset_log(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    (log / "3").write_text(f'v1\n{meta}\n{{"events": {{"0": 5, "1": 7}}, "subs": {{"0": 2}}}}')
    (log / "4").write_text(f'v1\n{meta}\n{{"events": {{"0": 9, "1": 7}}, "subs": {{"0": 4, "1": 1}}}}')
    for location in (str(tmp_path), tmp_path.as_uri()):  # a path or a URI (any file system pyarrow opens)
        assert logged_ranges(location, 4) == [("events", 0, 5, 9), ("subs", 0, 2, 4), ("subs", 1, 0, 1)]
        assert logged_ranges(location, 3) is None  # batch 2's ends are gone
        assert logged_ranges(location, 5) is None


@pytest.mark.parametrize("java", [True, False])
def test_logged_ranges_of_the_first_batch_start_at_the_sources_initial_offsets(tmp_path, java):
    """Batch 0 starts at ``sources/0/0``: the Java connector's file (a NUL byte, a version line,
    the JSON form) or the one ``kafka-py`` keeps with ``initialOffsetsLog`` (the same without
    the NUL byte); a partition it does not name starts at 0; no file, no ranges."""
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text(f'v1\n{meta}\n{{"events": {{"0": 5, "1": 7}}, "subs": {{"0": 4, "1": 1}}}}')
    assert logged_ranges(str(tmp_path), 0) is None
    start = {("events", 0): 2, ("events", 1): 7, ("subs", 0): 0}
    text = offsets.initial_offsets_text(start)
    assert offsets.read_initial_offsets(text) == start
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_bytes(b"\x00" + text if java else text)
    assert logged_ranges(str(tmp_path), 0) == [("events", 0, 2, 5), ("subs", 0, 0, 4), ("subs", 1, 0, 1)]
    with pytest.raises(ValueError):
        offsets.read_initial_offsets(b"v2\n" + text.partition(b"\n")[2])


def test_match_ranges_reads_its_ranges_and_matches_like_match_partition(tmp_path, monkeypatch):
    from matchers.expr import Subscription, pred
    from streaming.match import executor
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, [Subscription.of("s", pred("price", "<", 5))])
    log = {("events", 1): [b'{"price": 1}', b'{"price": 9}', b'{"price": 2}']}
    monkeypatch.setattr(executor, "read_range", lambda consumer, rng: iter([kafka_batch(
        log[rng.topic, rng.partition][rng.start:rng.end], rng.topic, rng.partition, rng.start)]))
    ctx = BatchContext.of(settings, 1, 0.0, reg.spec(), NO_KAFKA)
    sent: list[dict] = []

    def produce(batches):
        sent.extend(r for rb in batches for r in rb.to_pylist())
        return len(sent)

    todo = [((OffsetRange("events", 0, 0, 5),), (0,)), ((OffsetRange("events", 1, 1, 3),), (0,))]  # the task's partition names the second
    out = list(match_ranges(iter([1]), ctx, todo, produce))
    assert [orjson.loads(r["value"])["offset"] for r in sent] == [2] and len(out) == 1 and out[0]["events"] == 2
    assert list(out[0]) == TASK_SCHEMA.names


def test_oversized_notification_goes_id_only_with_a_note(tmp_path):
    from matchers.expr import Subscription, pred
    settings = settings_for(tmp_path).replace(limits={"message_bytes": 5_000})
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, [Subscription.of("s", pred("price", "<", 5))])
    big = orjson.dumps({"price": 1, "pad": "x" * 6_000})
    rows, m = run_partition(settings, reg, 1, 0.0, [kafka_batch([b'{"price": 2}', big])])
    docs = {d["offset"]: d for d in (orjson.loads(r["value"]) for r in rows)}
    assert docs[0]["event"] == {"price": 2} and "note" not in docs[0]
    assert "event" not in docs[1] and "limits.message_bytes" in docs[1]["note"]
    assert docs[1]["id"] == notifications.notification_id("s", "events", 0, 1)
    assert all(len(r["value"]) + len(r["key"]) <= 5_000 - notifications.RECORD_OVERHEAD for r in rows)
    assert m.events == 2 and m.errors == 0


@pytest.mark.parametrize("shards", [1, 3])
def test_a_record_that_cannot_be_encoded_is_an_error_alone_and_once(tmp_path, monkeypatch, shards):
    """A batch-wide encode failure falls back to one event at a time; only the culprit is rejected
    (an event of the general path: the scanner of the JSON path does not call ``encode``), once
    whatever the shards (the batch is encoded once for all of them)."""
    from matchers.expr import Subscription, pred
    from streaming.match import executor
    settings = settings_for(tmp_path, shards=shards)
    reg = ModelRegistry(settings.registry_columns_dir)
    subs = [Subscription.of(f"s{i}", pred("price", "<", 5)) for i in range(8)]
    reg.apply(0, subs)
    real = executor.encode
    calls: list[int] = []

    def picky(events, dictionary, known_only=False):
        calls.append(len(events))
        if any("poison" in e for e in events):
            raise OverflowError("cannot encode poison")
        return real(events, dictionary, known_only)

    monkeypatch.setattr(executor, "encode", picky)
    batch = kafka_batch([b'{"price": 1}', b'{"price": 2, "poison": [[true]]}', b'{"price": 3, "x": "\\u0041"}'])
    ctx = BatchContext.of(settings, 1, 0.0, reg.spec(shards=shards), NO_KAFKA)
    rows: list[dict] = []
    out = [r for rb in match_partition(iter([batch]), ctx, _collect(rows), tuple(range(shards))) for r in rb.to_pylist()]
    notes = sorted((r["key"].decode(), orjson.loads(r["value"])["offset"]) for r in rows if r["topic"] == "notifications")
    errors = [orjson.loads(r["value"]) for r in rows if r["topic"] == "errors"]
    assert notes == sorted((s.id, o) for s in subs for o in (0, 2))
    assert [(e["offset"], e["stage"]) for e in errors] == [(1, "event")]
    assert "cannot be encoded for the matcher: OverflowError: cannot encode poison" in errors[0]["reason"]
    assert calls == [2, 1, 1, 1]  # the batch's general-path events, then each alone, then the rest: once
    m = TaskResult.from_row(out[0]).metrics
    assert m.events == 2 and m.errors == 1 and sorted(json.loads(out[0]["shards"])) == list(range(shards))


def test_an_event_whose_id_alone_is_too_large_is_an_error(tmp_path):
    from matchers.expr import Subscription, pred
    settings = settings_for(tmp_path).replace(limits={"message_bytes": 5_000})
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, [Subscription.of(s, pred("price", "<", 5)) for s in ("s", "t")])
    huge = orjson.dumps({"price": 1, "id": "i" * 6_000, "valid_until": 10_000})
    rows, m = run_partition(settings, reg, 1, 0.0, [kafka_batch([huge, b'{"price": 2}'])])
    notes = [orjson.loads(r["value"]) for r in rows if r["topic"] == "notifications"]
    errors = [orjson.loads(r["value"]) for r in rows if r["topic"] == "errors"]
    assert sorted((n["subscription"], n["offset"]) for n in notes) == [("s", 1), ("t", 1)]
    assert [(e["offset"], e["stage"]) for e in errors] == [(0, "event")] and "even without the event" in errors[0]["reason"]
    assert m.events == 1 and m.errors == 1 and m.valid == 0


def test_plan_tasks_share_small_ranges_and_fill_the_slots_with_shard_groups():
    assert shard_groups(1, 2, 2) == [(0,)]
    assert shard_groups(4, 2, 2) == [(0, 1, 2, 3)]  # the ranges fill the slots: one task per range
    assert shard_groups(4, 1, 2) == [(0, 2), (1, 3)]
    assert shard_groups(3, 2, 8) == [(0,), (1,), (2,)]
    a, b, c = OffsetRange("e", 0, 0, 30_000), OffsetRange("e", 1, 5, 10_005), OffsetRange("e", 2, 0, 12_000)
    assert plan_tasks([], 2, 2) == []
    assert plan_tasks([a, b, c], 1, 2) == [((a,), (0,)), ((c,), (0,)), ((b,), (0,))]  # 52,000 events: 3 tasks
    assert plan_tasks([b, c], 1, 2, task_events=20_000) == [((c, b), (0,))]  # 22,000 events: one task
    assert plan_tasks([a, b], 1, 2, task_events=20_000) == [((a,), (0,)), ((b,), (0,))]
    assert plan_tasks([b, c], 3, 2, task_events=20_000) == [((c, b), (0, 1, 2))]  # a small batch: one task
    assert plan_tasks([b, c], 3, 2, task_events=10_000) == [((c,), (0, 1, 2)), ((b,), (0, 1, 2))]
    assert plan_tasks([a], 3, 2) == [((a,), (0, 2)), ((a,), (1,))]  # one large range: the shards fill the slots
    assert plan_tasks([c], 3, 2) == [((c,), (0, 1, 2))]


@pytest.mark.parametrize(("shards", "slots", "task_events", "executors"),
                         [(1, 2, 50, 0), (3, 2, 50, 0), (3, 4, 50, 0), (3, 2, 1000, 0),
                          (3, 2, 50, 2), (4, 4, 50, 2), (3, 2, 1000, 5), (2, 8, 50, 1)])
def test_sharded_tasks_send_the_oracle_notifications_and_each_error_once(tmp_path, monkeypatch, shards, slots,
                                                                         task_events, executors):
    """Tasks of plan_tasks (``executors`` = 0) or of the groups pinned to ``executors`` executors
    (each task a partition of the anchors' cartesian with the bins) match like the oracle."""
    from streaming.match import executor
    from streaming.placement import pinned_bins, pinned_groups
    rng = random.Random(5)
    settings = settings_for(tmp_path, shards=shards)
    reg = ModelRegistry(settings.registry_columns_dir)
    subs = random_subscriptions(rng, 90)
    reg.apply(0, subs)
    events = [random_event(rng) for _ in range(200)]
    for e in events[::4]:
        e["valid_until"] = 500
    raw = [orjson.dumps(e) for e in events]
    raw[7] = b"{broken"
    log = {("events", p): raw[p::2] for p in (0, 1)}
    monkeypatch.setattr(executor, "read_range", lambda consumer, rng: iter([kafka_batch(
        log[rng.topic, rng.partition][rng.start:rng.end], rng.topic, rng.partition, rng.start)]))
    ctx = BatchContext.of(settings, 1, 100.0, reg.spec(shards=shards), NO_KAFKA)
    sent: list[dict] = []

    def produce(batches):
        before = len(sent)
        sent.extend(r for rb in batches for r in rb.to_pylist())
        return len(sent) - before

    prepared: list[int] = []
    real_prepare = executor.PreparedBatch
    monkeypatch.setattr(executor, "PreparedBatch",
                        lambda rb, limits: prepared.append(rb.num_rows) or real_prepare(rb, limits))
    ranges = [OffsetRange("events", p, 0, 100) for p in (0, 1)]
    if executors:
        groups = pinned_groups(shards, executors)
        bins = pinned_bins(ranges, len(groups), slots, task_events)
        todo = pinned_tasks(bins, groups)
        out = [r for g in range(len(groups)) for b in range(len(bins))
               for r in match_pinned(iter([((g, "executor"), b)]), ctx, todo, len(bins), produce)]
        assert sorted(json.loads(r["shards"]) for r in out) == sorted([list(g) for g in groups] * len(bins))
    else:
        todo = plan_tasks(ranges, shards, slots, task_events)
        out = [r for i in range(len(todo)) for r in match_ranges(iter([i]), ctx, todo, produce)]
    got = [(r["key"].decode(), orjson.loads(r["value"])["partition"], orjson.loads(r["value"])["offset"])
           for r in sent if r["topic"] == "notifications"]
    want = {(sid, i % 2, i // 2) for i, e in enumerate(events) if i != 7 for sid in oracle_match(subs, flatten(e))}
    assert sorted(got) == sorted(want) and len(got) == len(set(got))  # each match once, in one shard
    assert [orjson.loads(r["value"])["offset"] for r in sent if r["topic"] == "errors"] == [3]
    m = TaskMetrics.total(TaskResult.from_row(r).metrics for r in out)
    valid = [e for r in out for e in decode(r["valid_events"])]
    assert m.events == 199 and m.errors == 1 and m.valid == len(valid) == 50
    assert len(out) == len(todo)
    assert sorted(prepared) == sorted(r.end - r.start for ranges, _ in todo for r in ranges)  # once per task


@pytest.mark.parametrize("matcher", ["counting", "auto"])
def test_the_task_row_says_which_index_matched(tmp_path, matcher):
    """The task's row carries its matcher's description (``auto``: the index it chose and why),
    which the driver puts in the status file; a task without events built none."""
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, [Subscription.of(f"s{i}", pred("price", ">", i)) for i in range(20)])
    ctx = BatchContext.of(settings, 1, 1000.0, reg.spec(matcher), NO_KAFKA)

    def row(batches):
        out = [r for rb in match_partition(iter(batches), ctx, lambda b: sum(rb.num_rows for rb in b))
               for r in rb.to_pylist()]
        return out[0]["index"]

    index = json.loads(row([kafka_batch([b'{"price": 3}'])]))
    assert index["matcher"] == ("vci" if matcher == "auto" else "counting")  # auto: one range per conjunction
    if matcher == "auto":
        assert index["chosen_by"] == "auto" and "numeric range" in index["reason"]
        assert index["shape"]["subscriptions"] == 20
    else:
        assert set(index) == {"matcher"}
    assert row([kafka_batch([])]) is None


def test_scanned_and_general_events_alike(tmp_path):
    """Ids, validity and matches are the same whichever path reads the event (the scan or read_event)."""
    settings = settings_for(tmp_path)
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, [Subscription.of("s", pred("d.price", "<", 5))])
    raws = [b'{"id": "e-1", "d": {"price": 1}, "valid_until": 500}',  # scanned
            b'{"id": "e-\\u0032", "d": {"price": 1}, "valid_until": 500}',  # an escape: read_event
            b'{"id": 7.50, "d": {"price": [9, 2]}}',  # scanned, two rows
            b'{"id": null, "d": {"price": [[2]]}}',  # an array in an array: read_event; a null id
            b'{"d": {"price": 9}, "id": "e-5"}']
    rows, m = run_partition(settings, reg, 0, 100.0, [kafka_batch(raws)])
    docs = [orjson.loads(r["value"]) for r in rows if r["topic"] == "notifications"]
    assert [(d["offset"], d["event_id"]) for d in docs] == [(0, "e-1"), (1, "e-2"), (2, 7.5), (3, "events/0/3")]
    assert m.valid == 2 and m.events == 5 and m.errors == 0


def test_show_lists_the_columnar_registry(tmp_path, capsys):
    from scripts.show import show_registry

    settings = settings_for(tmp_path)
    show_registry(settings, 2)
    assert "registry: none at" in capsys.readouterr().out
    ModelRegistry(settings.registry_columns_dir).apply(3, [Subscription.of(f"s{i}", pred("price", "<", i)) for i in range(4)])
    show_registry(settings, 2)
    out = capsys.readouterr().out
    assert "version=1 subscriptions=4 expressions=4 last batch=3" in out
    assert "  s0: price < 0\n  s1: price < 1\n" in out and "s2" not in out


@pytest.mark.parametrize("matcher", ["counting", "dynamic"])
def test_shards_that_gain_names_and_strings_between_tasks_match_like_the_oracle(tmp_path, matcher):
    """A worker's common dictionary and its shards' translations follow the shards' catch-ups: new
    attribute names, new strings, and a shard rebuilt (its dictionary a new one) all match as the oracle."""
    rng = random.Random(3)
    shards = 3
    settings = settings_for(tmp_path, shards=shards)
    reg = ModelRegistry(settings.registry_columns_dir)
    reg.apply(0, random_subscriptions(rng, 60))
    events = [random_event(rng) for _ in range(80)]
    for e in events[::3]:
        e["late"] = rng.choice(["p", "q", 2.0])
        e["s"] = rng.choice(["fresh", "new-s"])
    raws = [orjson.dumps(e) for e in events]

    def run(version: int, max_catchup: int = 20) -> list[tuple[str, int]]:
        ctx = BatchContext.of(settings, version, 100.0, reg.spec(matcher, shards=shards, max_catchup=max_catchup),
                              NO_KAFKA)
        rows: list[dict] = []
        for task in match_partition(iter([kafka_batch(raws)]), ctx, _collect(rows), tuple(range(shards))):
            assert TaskResult.from_row(task.to_pylist()[0]).metrics.events == len(raws)
        got = sorted((r["key"].decode(), orjson.loads(r["value"])["offset"]) for r in rows
                     if r["topic"] == "notifications")
        live = list(reg.subscriptions.values())
        assert got == sorted((sid, i) for i, e in enumerate(events) for sid in oracle_match(live, flatten(e)))
        return got

    first = run(1)
    reg.apply(1, [Subscription.of("late-p", pred("late", "=", "p")), Subscription.of("late-n", pred("late", ">", 1)),
                  Subscription.of("fresh", pred("s", "=", "fresh")), Subscription.of("new-s", pred("s", "in", ("new-s", "z")))])
    second = run(2)  # caught up: the same matchers, their dictionaries grown
    assert len(second) > len(first)
    assert all(e.catchups == 1 and e.rebuilds == 1 for e in executor_cache._CACHE.values())
    reg.apply(2, ["late-p", Subscription.of("late-q", pred("late", "=", "q"))])
    run(3, max_catchup=0)  # rebuilt: new matchers, new dictionaries
    assert all(e.rebuilds == 2 for e in executor_cache._CACHE.values()) and len(executor_cache._CACHE) == shards

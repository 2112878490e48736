"""The match query's pure functions: registry changes, executor matching, retro notifications."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from matchers.events import flatten
from matchers.expr import Subscription, pred
from matchers.oracle import match as oracle_match
from streaming import notifications
from streaming.config import Settings
from streaming.kafka.offsets import OffsetRange
from streaming.match import (
    TASK_SCHEMA,
    BatchContext,
    RegistryBroadcast,
    apply_changes,
    logged_ranges,
    match_all_shards,
    match_partition,
    match_pinned,
    match_ranges,
    new_subscriptions,
    pinned_tasks,
    plan_tasks,
    retro_notifications,
    shard_groups,
)
from streaming.match.tasks import TaskMetrics, TaskResult
from streaming.records import default_parser
from streaming.registry import Registry
from streaming.validity import ValidEvent, ValidityStore, decode
from tests.strategies import random_event, random_subscriptions

from .helpers import NO_KAFKA, LocalBroadcast, kafka_batch

pytestmark = pytest.mark.usefixtures("empty_cache")


def settings_for(tmp_path, **match):
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)}, match=match)


def sub_rows(records, topic="subscriptions"):
    return [(r.get("id", "").encode() if isinstance(r, dict) else None,
             orjson.dumps(r) if isinstance(r, dict) else r, topic, 0, i) for i, r in enumerate(records)]


def run_partition(settings, registry, batch_id, now, batches, payload="event"):
    """Rows sent by one task, its metrics and its valid events (as the driver stores them)."""
    settings = settings.replace(notifications={"payload": payload})
    spec = RegistryBroadcast(LocalBroadcast).spec(registry, "counting", registry.version, 20)
    ctx = BatchContext.of(settings, batch_id, now, spec, NO_KAFKA)
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
    reg = Registry(settings.registry_dir)
    subs = random_subscriptions(rng, 120)
    from streaming.records import UPSERT, Change

    reg.append(0, [Change(UPSERT, s.id, s) for s in subs], 0.0)
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
    reg = Registry(settings.registry_dir)
    from matchers.expr import Subscription, pred
    from streaming.records import UPSERT, Change

    reg.append(0, [Change(UPSERT, "s", Subscription.of("s", pred("price", "<", 5)))], 0.0)
    batch = kafka_batch([b'{"id": "e-1", "price": 1}', b'{"price": 1}', b'{"price": 9}'])
    rows, _ = run_partition(settings, reg, 1, 0.0, [batch], payload="id")
    docs = [orjson.loads(r["value"]) for r in rows]
    assert [d["event_id"] for d in docs] == ["e-1", "events/0/1"]
    assert all("event" not in d for d in docs)


def test_changes_then_replay_then_expiry(tmp_path):
    parse = default_parser()
    reg = Registry(tmp_path / "registry")
    rows = sub_rows([
        {"op": "upsert", "id": "s1", "expr": "price < 5"},
        {"op": "upsert", "id": "s2", "expr": "price > 5", "expires": 50},
        {"op": "upsert", "id": "bad", "expr": "price <"},
        {"op": "upsert", "id": "old", "expr": "price > 5", "expires": 5},
    ])
    out = apply_changes(reg, 0, rows, parse, 256, now=10.0)
    assert not out.replay and out.accepted == 3 and out.expired == 1
    assert [e.position.offset for e in out.errors] == [2]
    assert set(reg.subscriptions) == {"s1", "s2"} and reg.version == 1
    assert [s.id for s in new_subscriptions(out.delta)] == ["s1", "s2"]
    again = apply_changes(Registry(tmp_path / "registry"), 0, rows, parse, 256, now=99.0)
    assert again.replay and again.delta == out.delta and again.now == 10.0 and len(again.errors) == 1
    later = apply_changes(reg, 1, [], parse, 256, now=60.0)
    assert later.expired == 1 and set(reg.subscriptions) == {"s1"} and reg.version == 2
    nothing = apply_changes(reg, 2, [], parse, 256, now=61.0)
    assert nothing.delta is None and reg.version == 2


def test_valid_events_are_kept_and_matched_by_new_subscriptions(tmp_path):
    settings = settings_for(tmp_path)
    reg = Registry(settings.registry_dir)
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
    out = apply_changes(reg, 1, sub_rows([{"id": "late", "expr": "price < 5"}]), default_parser(), 256, 200.0)
    retro, errors = retro_notifications("counting", new_subscriptions(out.delta), store.valid_events(1, 200.0), 1,
                                        "event")
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
        assert logged_ranges(location, 3) is None  # the start of a checkpoint's first batch is not logged
        assert logged_ranges(location, 5) is None


def test_match_ranges_reads_its_ranges_and_matches_like_match_partition(tmp_path, monkeypatch):
    from matchers.expr import Subscription, pred
    from streaming.match import executor
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path)
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, "s", Subscription.of("s", pred("price", "<", 5)))], 0.0)
    log = {("events", 1): [b'{"price": 1}', b'{"price": 9}', b'{"price": 2}']}
    monkeypatch.setattr(executor, "read_range", lambda consumer, rng: iter([kafka_batch(
        log[rng.topic, rng.partition][rng.start:rng.end], rng.topic, rng.partition, rng.start)]))
    spec = RegistryBroadcast(LocalBroadcast).spec(reg, "counting", reg.version, 20)
    ctx = BatchContext.of(settings, 1, 0.0, spec, NO_KAFKA)
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
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path).replace(limits={"message_bytes": 5_000})
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, "s", Subscription.of("s", pred("price", "<", 5)))], 0.0)
    big = orjson.dumps({"price": 1, "pad": "x" * 6_000})
    rows, m = run_partition(settings, reg, 1, 0.0, [kafka_batch([b'{"price": 2}', big])])
    docs = {d["offset"]: d for d in (orjson.loads(r["value"]) for r in rows)}
    assert docs[0]["event"] == {"price": 2} and "note" not in docs[0]
    assert "event" not in docs[1] and "limits.message_bytes" in docs[1]["note"]
    assert docs[1]["id"] == notifications.notification_id("s", "events", 0, 1)
    assert all(len(r["value"]) + len(r["key"]) <= 5_000 - notifications.RECORD_OVERHEAD for r in rows)
    assert m.events == 2 and m.errors == 0


def test_a_record_the_matcher_cannot_encode_is_an_error_alone(tmp_path, monkeypatch):
    """A batch-wide encode failure falls back to one event at a time; only the culprit is rejected
    (an event of the general path: the scanner of the JSON path does not call ``encode``)."""
    from matchers.expr import Subscription, pred
    from streaming.match import executor
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path)
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, "s", Subscription.of("s", pred("price", "<", 5)))], 0.0)
    real = executor.index_for

    class Picky:
        def __init__(self, matcher):
            self.matcher = matcher

        def __getattr__(self, name):
            return getattr(self.matcher, name)

        def encode(self, events):
            if any("poison" in e for e in events):
                raise OverflowError("cannot encode poison")
            return self.matcher.encode(events)

    monkeypatch.setattr(executor, "index_for", lambda spec: type("C", (), {"matcher": Picky(real(spec).matcher)}))
    batch = kafka_batch([b'{"price": 1}', b'{"price": 2, "poison": [[true]]}', b'{"price": 3}'])
    rows, m = run_partition(settings, reg, 1, 0.0, [batch])
    notes = sorted(orjson.loads(r["value"])["offset"] for r in rows if r["topic"] == "notifications")
    errors = [orjson.loads(r["value"]) for r in rows if r["topic"] == "errors"]
    assert notes == [0, 2]
    assert [(e["offset"], e["stage"]) for e in errors] == [(1, "event")]
    assert "cannot be encoded for the matcher: OverflowError: cannot encode poison" in errors[0]["reason"]
    assert m.events == 2 and m.errors == 1


def test_an_event_whose_id_alone_is_too_large_is_an_error(tmp_path):
    from matchers.expr import Subscription, pred
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path).replace(limits={"message_bytes": 5_000})
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, s, Subscription.of(s, pred("price", "<", 5))) for s in ("s", "t")], 0.0)
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
    from streaming.records import UPSERT, Change

    rng = random.Random(5)
    settings = settings_for(tmp_path, shards=shards)
    reg = Registry(settings.registry_dir)
    subs = random_subscriptions(rng, 90)
    reg.append(0, [Change(UPSERT, s.id, s) for s in subs], 0.0)
    events = [random_event(rng) for _ in range(200)]
    for e in events[::4]:
        e["valid_until"] = 500
    raw = [orjson.dumps(e) for e in events]
    raw[7] = b"{broken"
    log = {("events", p): raw[p::2] for p in (0, 1)}
    monkeypatch.setattr(executor, "read_range", lambda consumer, rng: iter([kafka_batch(
        log[rng.topic, rng.partition][rng.start:rng.end], rng.topic, rng.partition, rng.start)]))
    spec = RegistryBroadcast(LocalBroadcast).spec(reg, "counting", reg.version, 20, shards)
    ctx = BatchContext.of(settings, 1, 100.0, spec, NO_KAFKA)
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
    sent.clear()  # the first batch's path: every shard over one partition's records
    first = [r for p in (0, 1) for rb in match_all_shards(iter([kafka_batch(log["events", p], "events", p)]), ctx,
                                                          produce) for r in rb.to_pylist()]
    assert sorted((r["key"].decode(), orjson.loads(r["value"])["partition"], orjson.loads(r["value"])["offset"])
                  for r in sent if r["topic"] == "notifications") == sorted(want)
    assert len(first) == 2 and sum(r["errors"] for r in first) == 1


@pytest.mark.parametrize("matcher", ["counting", "auto"])
def test_the_task_row_says_which_index_matched(tmp_path, matcher):
    """The task's row carries its matcher's description (``auto``: the index it chose and why),
    which the driver puts in the status file; a task without events built none."""
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path)
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, f"s{i}", Subscription.of(f"s{i}", pred("price", ">", i))) for i in range(20)], 0.0)
    ctx = BatchContext.of(settings, 1, 1000.0, RegistryBroadcast(LocalBroadcast).spec(reg, matcher, reg.version, 20),
                          NO_KAFKA)

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
    from streaming.records import UPSERT, Change

    settings = settings_for(tmp_path)
    reg = Registry(settings.registry_dir)
    reg.append(0, [Change(UPSERT, "s", Subscription.of("s", pred("d.price", "<", 5)))], 0.0)
    raws = [b'{"id": "e-1", "d": {"price": 1}, "valid_until": 500}',  # scanned
            b'{"id": "e-\\u0032", "d": {"price": 1}, "valid_until": 500}',  # an escape: read_event
            b'{"id": 7.50, "d": {"price": [9, 2]}}',  # scanned, two rows
            b'{"id": null, "d": {"price": [[2]]}}',  # an array in an array: read_event; a null id
            b'{"d": {"price": 9}, "id": "e-5"}']
    rows, m = run_partition(settings, reg, 0, 100.0, [kafka_batch(raws)])
    docs = [orjson.loads(r["value"]) for r in rows if r["topic"] == "notifications"]
    assert [(d["offset"], d["event_id"]) for d in docs] == [(0, "e-1"), (1, "e-2"), (2, 7.5), (3, "events/0/3")]
    assert m.valid == 2 and m.events == 5 and m.errors == 0

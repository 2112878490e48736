"""The match query on a real Spark session and the embedded broker, checked against the oracle."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from matchers.expr import to_text
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match import MatchJob, changes
from streaming.notifications import notification_id
from streaming.shared_index import SharedKey
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import (
    drain,
    expected_pairs,
    make_topics,
    notification_docs,
    pairs,
    service_settings,
)
from tests.strategies import random_event, random_subscriptions

pytestmark = pytest.mark.integration


def sub_record(sub, **extra) -> tuple[str, bytes]:
    return sub.id, orjson.dumps({"op": "upsert", "id": sub.id, "expr": to_text(sub.expr), **extra})


def test_known_workload_bad_records_and_tail(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, connector: str
):
    rng = random.Random(2024)
    topics = make_topics(topic_factory)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers, connector,
                                snapshot_every=1)  # a snapshot written beside each changing batch's match job
    job = MatchJob(settings, spark, kafka_config)
    subs = random_subscriptions(rng, 100)
    bad_subs = [
        ("b1", b'{"op": "upsert", "id": "b1", "expr": "price <'),  # malformed JSON
        ("b2", b"\xff\xfe\x00 not utf-8"),  # not UTF-8
        ("b3", b'{"op": "upsert", "id": "b3", "expr": "price ~~ 3"}'),  # unknown operator
        ("b4", b'{"op": "upsert", "id": "b4", "expr": "flag < true"}'),  # type error
        ("b5", b'{"op": "upsert", "id": "b5", "expr": "symbol IN (1, \'x\')"}'),  # type error
    ]
    produce(
        kafka_config,
        topics.subscriptions,
        [sub_record(s) for s in subs[:60]] + bad_subs + [sub_record(s) for s in subs[60:]],
        linger_ms=100,
    )
    query = job.start()
    try:
        query.processAllAvailable()  # every subscription is registered before the events arrive
    except BaseException:
        query.stop()
        raise
    events = [random_event(rng) for _ in range(1500)]
    raw = [orjson.dumps(e) for e in events]
    bad_events = {300: b"{oops", 301: b"\xc3\x28", 302: b"[1, 2]", 1499: b'"tail"'}
    for i, v in bad_events.items():
        raw[i] = v
    # several producer batches per partition, the last one multi-record (the broker hides its tail)
    for start in range(0, 1500, 500):
        produce(
            kafka_config,
            topics.events,
            [(str(i % 7), raw[i]) for i in range(start, start + 500)],
            linger_ms=200,
        )
    drain(query)

    positions = consume_all(kafka_config, topics.events)
    assert len(positions) == 1500
    located = [
        (p, o, orjson.loads(r.body))
        for r in positions
        for p, o in [(r.partition, r.offset)]
        if r.value not in bad_events.values()
    ]
    want = expected_pairs(subs, located)
    docs = notification_docs(kafka_config, topics.notifications, min_records=len(want))
    got = pairs(docs)
    assert got == want and len(want) > 1000
    assert all(
        d["id"] == notification_id(d["subscription"], topics.events, d["partition"], d["offset"])
        for d in docs
    )
    last = max(positions, key=lambda r: (r.partition, r.offset))
    errors = notification_docs(kafka_config, topics.errors, min_records=9)
    reasons = {(e["stage"], e["key"]): e["reason"] for e in errors if e["stage"] == "subscription"}
    assert "malformed JSON" in reasons[("subscription", "b1")]
    assert "not UTF-8" in reasons[("subscription", "b2")]
    assert "~~" in reasons[("subscription", "b3")] or "operator" in reasons[("subscription", "b3")]
    assert "booleans" in reasons[("subscription", "b4")]
    assert "mixes types" in reasons[("subscription", "b5")]
    event_errors = [e for e in errors if e["stage"] == "event"]
    assert len(event_errors) == 4
    assert {e["encoding"] for e in event_errors} == {"utf-8", "base64"}
    assert job.registry.version >= 1 and len(job.registry) == 100
    assert job.registry.snapshot_version == job.registry.version and any(m.snapshot_ms > 0 for m in job.history)
    assert any(d["partition"] == last.partition for d in docs)
    shared = SharedKey(spark.sparkContext.applicationId, settings.registry_columns_dir, settings.match.matcher)
    assert shared.path(job.registry.version).exists()  # the match tasks' workers shared one index


def test_deletes_expiry_and_valid_events(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, monkeypatch: Any
):
    monkeypatch.setattr(changes, "DRIVER_RECORDS", 0)  # the later batches' few records parsed in tasks too
    on_driver: list[int] = []
    driver_parse = changes.driver_parse

    def parse_here(records: Any, *args: Any, **kwargs: Any) -> Any:
        on_driver.append(records.num_rows)
        return driver_parse(records, *args, **kwargs)

    monkeypatch.setattr(changes, "driver_parse", parse_here)
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers)
    job = MatchJob(settings, spark, kafka_config)
    query = job.start()
    soon = time.time() + 20
    try:
        produce(
            kafka_config,
            topics.subscriptions,
            [
                ("keep", orjson.dumps({"id": "keep", "expr": "price < 10"})),
                ("gone", orjson.dumps({"id": "gone", "expr": "price < 10"})),
                ("brief", orjson.dumps({"id": "brief", "expr": "price < 10", "expires": soon})),
            ],
        )
        query.processAllAvailable()
        produce(
            kafka_config,
            topics.events,
            [
                orjson.dumps({"price": 1, "id": "e1"}),
                orjson.dumps({"price": 2, "id": "e2", "valid_until": time.time() + 600}),
                orjson.dumps({"price": 50, "id": "e3", "valid_until": time.time() + 600}),
            ],
        )
        query.processAllAvailable()
        produce(
            kafka_config,
            topics.subscriptions,
            [("gone", orjson.dumps({"op": "delete", "id": "gone"}))],
        )
        query.processAllAvailable()
        time.sleep(max(0.0, soon - time.time()) + 0.5)
        produce(kafka_config, topics.events, [orjson.dumps({"price": 3, "id": "e4"})])
        query.processAllAvailable()
        produce(
            kafka_config,
            topics.subscriptions,
            [
                ("late", orjson.dumps({"id": "late", "expr": "price > 40"})),
                ("late2", orjson.dumps({"id": "late2", "expr": "price < 5"})),
            ],
        )
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    docs = notification_docs(kafka_config, topics.notifications, min_records=9)
    got = sorted((d["subscription"], d["event_id"], d["retro"]) for d in docs)
    assert got == sorted(
        [
            ("keep", "e1", False),
            ("gone", "e1", False),
            ("brief", "e1", False),
            ("keep", "e2", False),
            ("gone", "e2", False),
            ("brief", "e2", False),
            ("keep", "e4", False),
            ("late", "e3", True),
            ("late2", "e2", True),
        ]
    )
    assert set(job.registry.live().column("id").to_pylist()) == {"keep", "late", "late2"}
    assert sum(m.subscription_records for m in job.history) == 6 and sum(on_driver) == 0  # all in tasks


def test_event_patterns_existence_and_nulls(spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path):
    """Rule records (EventBridge patterns), EXISTS / IS NULL / IGNORE CASE / CIDR and null values,
    through a real broker and Spark session, against the oracle."""
    from matchers.language import parse_record

    topics = make_topics(topic_factory)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers)
    job = MatchJob(settings, spark, kafka_config)
    records: list[dict[str, Any]] = [
        {"id": "ec2", "rule": {"source": ["aws.ec2"], "detail": {"state": [{"anything-but": ["pending"]}]}}},
        {"id": "quiet", "rule": {"detail": {"error": [{"exists": False}], "cpu": [{"numeric": [">=", 50]}]}}},
        {"id": "nulls", "rule": {"detail": {"state": [None]}}},
        {"id": "eu", "expr": "region = 'EU-WEST-1' IGNORE CASE AND ip IN CIDR '10.0.0.0/8'"},
        {"id": "has-err", "expr": "EXISTS detail.error AND detail.error IS NOT NULL"},
    ]
    subs = [parse_record(r) for r in records]
    produce(kafka_config, topics.subscriptions, [(r["id"], orjson.dumps({"op": "upsert", **r})) for r in records])
    query = job.start()
    try:
        query.processAllAvailable()
        rng = random.Random(16)
        events = [{"source": rng.choice(["aws.ec2", "custom", 5, None]),
                   "detail": {k: v for k, v in (("state", rng.choice(["pending", "running", None, 3])),
                                                 ("cpu", rng.choice([10, 50, 90])),
                                                 ("error", rng.choice(["boom", None, "skip"]))) if v != "skip"},
                   "region": rng.choice(["eu-west-1", "EU-West-1", "us-east-1"]),
                   "ip": rng.choice(["10.1.2.3", "11.0.0.1", "::1"])} for _ in range(300)]
        produce(kafka_config, topics.events, [(str(i % 3), orjson.dumps(e)) for i, e in enumerate(events)])
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(kafka_config, topics.events)]
    want = expected_pairs(subs, located)
    assert {sid for sid, _, _ in want} == {r["id"] for r in records}  # every rule matches some event
    assert pairs(notification_docs(kafka_config, topics.notifications, min_records=len(want))) == want


def _arrow_pid(batches):
    import os

    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}])


def _rdd_pid(numbers):
    import os

    for _ in numbers:
        pass
    yield os.getpid()


def test_match_tasks_and_mapinarrow_tasks_share_the_python_workers(spark: Any):
    """The match job's RDD tasks run in the same Python workers as mapInArrow tasks (the first
    batch's, the patterns query's), so a worker's cached index serves both (streaming.spark)."""
    arrow = {r.pid for r in spark.range(0, 2, 1, 2).mapInArrow(_arrow_pid, "pid long").collect()}
    rdd = set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(_rdd_pid).collect())
    assert arrow & rdd

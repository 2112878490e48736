"""No record waits for the next one: a burst, then nothing, is notified within three triggers.

The match query runs on a processing-time trigger, as the service does. A burst of events
is published in multi-record producer batches and nothing follows it: every event's
notification must reach the notifications topic within three trigger intervals of the
event's publication (Kafka's record timestamps: the event's producer time, the
notification's), the last record of the last batch included. The same for a burst of
subscription changes (replacements and cancellations) followed at once by events that tell
the old expressions from the new: every event is matched against the new set, and
promptly. The burst runs with both Kafka connectors (each finds the log's end its own way),
the changes with the default one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from matchers.expr import Subscription
from matchers.language import parse_text
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match import MatchJob
from tests.integration.kafka_helpers import Record, consume_all, produce
from tests.integration.service_fixtures import (
    expected_pairs,
    make_topics,
    notification_docs,
    service_settings,
)

pytestmark = pytest.mark.integration

TRIGGER_S = 3
BOUND_MS = 3 * TRIGGER_S * 1000


def _upsert(sid: str, expr: str) -> tuple[str, bytes]:
    return sid, orjson.dumps({"op": "upsert", "id": sid, "expr": expr})


def _start(spark: Any, kafka_config: KafkaClientConfig, topics: Any, tmp_path: Path, connector: str | None,
           n_subs: int) -> tuple[MatchJob, Any]:
    """The match query on a 3 s trigger, once it has registered ``n_subs`` subscriptions and
    matched a first event (the Python workers' start is not what these tests measure)."""
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers, connector).replace(
        spark={"trigger_interval": f"{TRIGGER_S} seconds"})
    job = MatchJob(settings, spark, kafka_config)
    query = job.start()
    deadline = time.monotonic() + 300
    while len(job.registry) < n_subs:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{len(job.registry)} of {n_subs} subscriptions registered"
        time.sleep(0.5)
    produce(kafka_config, topics.events, [orjson.dumps({"warm-up": True})])
    while sum(b.events for b in job.history) < 1:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the warm-up event was not matched"
        time.sleep(0.5)
    return job, query


def _late(events: list[Record], docs: list[dict]) -> list[tuple[int, int, int]]:
    """(partition, offset, delay in ms) of the notifications later than three triggers."""
    published = {(r.partition, r.offset): r.timestamp_ms for r in events}
    return [(d["partition"], d["offset"], d["ts"] - published[(d["partition"], d["offset"])])
            for d in docs if d["ts"] - published[(d["partition"], d["offset"])] > BOUND_MS]


def _notifications(kafka_config: KafkaClientConfig, topic: str, n: int) -> list[dict]:
    """The notification documents with each record's timestamp as ``ts``; waits for ``n``."""
    records = consume_all(kafka_config, topic, timeout=120, min_records=n)
    return [{**orjson.loads(r.body), "ts": r.timestamp_ms} for r in records]


def test_a_burst_then_nothing_is_notified_within_three_triggers(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, connector: str
) -> None:
    topics = make_topics(topic_factory)
    subs = [_upsert(f"s{k}", f"k = {k}") for k in range(20)]
    produce(kafka_config, topics.subscriptions, subs)
    job, query = _start(spark, kafka_config, topics, tmp_path, connector, len(subs))
    try:
        # 3 producer batches per partition (linger), the last multi-record one ends the burst
        burst = [(str(i), orjson.dumps({"k": i % 20, "i": i})) for i in range(600)]
        for start in range(0, len(burst), 200):
            produce(kafka_config, topics.events, burst[start:start + 200], linger_ms=300)
        events = [r for r in consume_all(kafka_config, topics.events) if b"warm-up" not in r.body]
        assert len(events) == 600
        docs = _notifications(kafka_config, topics.notifications, 600)
        assert query.exception() is None
    finally:
        query.stop()
    assert {(d["subscription"], d["partition"], d["offset"]) for d in docs} == {
        (f"s{orjson.loads(r.body)['k']}", r.partition, r.offset) for r in events}
    last = {p: max(r.offset for r in events if r.partition == p) for p in {r.partition for r in events}}
    assert all(any(d["partition"] == p and d["offset"] == o for d in docs) for p, o in last.items())
    assert _late(events, docs) == []


def test_changes_then_events_match_the_new_expressions_promptly(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    topics = make_topics(topic_factory)
    n = 30
    produce(kafka_config, topics.subscriptions, [_upsert(f"s{k}", f"k = {k} AND tag = 'old'") for k in range(n)])
    job, query = _start(spark, kafka_config, topics, tmp_path, None, n)
    try:
        # a burst of changes: every third cancelled, the others replaced; then events at once
        changes: list[tuple[str, bytes]] = []
        final: list[Subscription] = []
        for k in range(n):
            if k % 3 == 0:
                changes.append((f"s{k}", orjson.dumps({"op": "delete", "id": f"s{k}"})))
            else:
                changes.append(_upsert(f"s{k}", f"k = {k} AND tag = 'new'"))
                final.append(Subscription.of(f"s{k}", parse_text(f"k = {k} AND tag = 'new'")))
        produce(kafka_config, topics.subscriptions, changes, linger_ms=300)
        burst = [(str(k), orjson.dumps({"k": k, "tag": tag})) for k in range(n) for tag in ("old", "new")]
        produce(kafka_config, topics.events, burst, linger_ms=300)
        events = [r for r in consume_all(kafka_config, topics.events) if b"warm-up" not in r.body]
        want = expected_pairs(final, [(r.partition, r.offset, orjson.loads(r.body)) for r in events])
        docs = _notifications(kafka_config, topics.notifications, len(want))
        time.sleep(TRIGGER_S)  # one more trigger: nothing else may come (an old expression's match)
        docs = _notifications(kafka_config, topics.notifications, len(want))
        assert query.exception() is None
    finally:
        query.stop()
    assert {(d["subscription"], d["partition"], d["offset"]) for d in docs} == want
    assert len(want) == len(final) and len(docs) == len(want)
    assert _late(events, docs) == []
    assert notification_docs(kafka_config, topics.errors) == []

"""The match query with ``match.route_by`` on a real Spark session and the embedded broker: three
shards, all subscriptions but one routed by ``s`` (so that two shards at least see only the
events of their values), then changes that move ids between values and
between routed and unrouted; the notifications are the oracle's in both phases."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from matchers.expr import to_text
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match import MatchJob
from streaming.records import default_parser
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import (
    drain,
    expected_pairs,
    make_topics,
    notification_docs,
    pairs,
    service_settings,
)
from tests.strategies import STRS, random_event, random_subscriptions

pytestmark = pytest.mark.integration
PARSE = default_parser()


def _routed(rng: random.Random, sub_id: str):
    value = rng.choice(STRS[:6])
    rest = rng.choice(["", f" AND a > {rng.randrange(4)}", f" OR (s = '{value}' AND b < 2)"])
    return PARSE({"id": sub_id, "expr": f"s = '{value}'{rest}"}, 256)


def _record(sub) -> tuple[str, bytes]:
    return sub.id, orjson.dumps({"op": "upsert", "id": sub.id, "expr": to_text(sub.expr)})


def _events(kafka_config, topic: str, rng: random.Random, n: int) -> None:
    produce(kafka_config, topic, [(str(i % 5), orjson.dumps(random_event(rng))) for i in range(n)], linger_ms=100)


def test_routed_shards_notify_as_the_oracle(spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any,
                                            tmp_path: Path):
    rng = random.Random(29)
    topics = make_topics(topic_factory)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers, shards=3, route_by="s",
                                snapshot_every=2)
    job = MatchJob(settings, spark, kafka_config)
    subs = {s.id: s for s in [_routed(rng, f"r{i}") for i in range(60)]
            + [dataclasses.replace(s, id=f"u{i}") for i, s in enumerate(random_subscriptions(rng, 1))]}
    produce(kafka_config, topics.subscriptions, [_record(s) for s in subs.values()], linger_ms=100)
    query = job.start()
    try:
        query.processAllAvailable()
        _events(kafka_config, topics.events, rng, 600)
        query.processAllAvailable()
        moved = [_routed(rng, i) for i in rng.sample(sorted(subs), 20)]  # to other values
        unrouted = [dataclasses.replace(s, id=i) for s, i in
                    zip(random_subscriptions(rng, 1), rng.sample(sorted(subs), 1), strict=True)]
        gone = rng.sample(sorted(subs), 3)
        produce(kafka_config, topics.subscriptions, [_record(s) for s in moved + unrouted]
                + [(i, orjson.dumps({"op": "delete", "id": i})) for i in gone], linger_ms=100)
        query.processAllAvailable()
        old = {(r.partition, r.offset) for r in consume_all(kafka_config, topics.events)}
        _events(kafka_config, topics.events, rng, 600)
        drain(query)
    finally:
        query.stop()
    later = {**subs, **{s.id: s for s in moved + unrouted}}
    for i in gone:
        later.pop(i)
    positions = consume_all(kafka_config, topics.events)
    assert len(positions) == 1200 and len(old) == 600
    located = [(r.partition, r.offset, orjson.loads(r.body)) for r in positions]
    want = (expected_pairs(subs.values(), [x for x in located if (x[0], x[1]) in old])
            | expected_pairs(later.values(), [x for x in located if (x[0], x[1]) not in old]))
    docs = notification_docs(kafka_config, topics.notifications, min_records=len(want))
    assert pairs(docs) == want and len(want) > 200
    assert len(job.registry) == len(later) and job.registry.version == 2

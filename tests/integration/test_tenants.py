"""Tenants on the real broker and Spark: ids, notification and error topics kept apart, quotas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from streaming.kafka.admin import ensure_topics
from streaming.kafka.config import KafkaClientConfig
from streaming.match_job import MatchJob
from streaming.metrics import read_status
from streaming.tenants import Tenants
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import make_topics, notification_docs, service_settings

pytestmark = pytest.mark.integration


def upsert(sub_id: str, expr: str) -> tuple[str, bytes]:
    return sub_id, orjson.dumps({"id": sub_id, "expr": expr})


def test_tenants_are_kept_apart_and_held_to_their_quotas(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
):
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        tenants={"names": "acme,beta", "subscriptions": 2})
    tenants = Tenants.of(settings)
    ensure_topics(kafka_config, tenants.topic_partitions(settings))
    acme, beta = (f"{topics.subscriptions}.{t}" for t in ("acme", "beta"))
    # acme and beta both name a subscription "x"; acme's third subscription is past its quota of 2
    produce(kafka_config, acme, [upsert("x", "price < 5"), upsert("a2", "price = 100"), upsert("a3", "price < 50")])
    produce(kafka_config, beta, [upsert("x", "price > 5")])
    job = MatchJob(settings, spark, kafka_config)
    query = job.start()
    try:
        query.processAllAvailable()
        produce(kafka_config, topics.events, [b'{"price": 3}', b'{"price": 8}'], partition=0)
        query.processAllAvailable()
        # acme deletes its "x" (by record and by tombstone): beta's "x" goes on matching
        produce(kafka_config, acme, [("x", orjson.dumps({"op": "delete", "id": "x"})), ("x", None)])
        query.processAllAvailable()
        produce(kafka_config, topics.events, [b'{"price": 2}', b'{"price": 9}'], partition=0)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()

    def seen(topic: str, n: int) -> set[tuple[str, int]]:
        return {(d["subscription"], d["offset"]) for d in notification_docs(kafka_config, topic, n)}

    assert seen(f"{topics.notifications}.acme", 1) == {("x", 0)}
    assert seen(f"{topics.notifications}.beta", 2) == {("x", 1), ("x", 3)}
    assert consume_all(kafka_config, topics.notifications) == []  # the operator's topic: nobody's
    errors = notification_docs(kafka_config, f"{topics.errors}.acme", 1)
    assert len(errors) == 1 and "a3" in errors[0]["reason"] and "quota of 2" in errors[0]["reason"]
    assert errors[0]["topic"] == acme
    assert consume_all(kafka_config, f"{topics.errors}.beta") == []
    assert consume_all(kafka_config, topics.errors) == []
    assert sorted(job.registry.subscriptions) == ["acme:a2", "beta:x"]
    usage = read_status(settings.status.status_file)["tenants"]
    assert usage["acme"]["subscriptions"] == 1 and usage["beta"] == {
        "subscriptions": 1, "predicates": 1, "quotas": {"subscriptions": 2, "predicates": 0}}


def test_a_tenant_added_by_a_restart_is_read_from_its_first_record(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
):
    topics = make_topics(topic_factory, event_partitions=1)
    first = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(tenants={"names": "acme"})
    both = first.replace(tenants={"names": "acme,beta"})
    ensure_topics(kafka_config, Tenants.of(both).topic_partitions(both))
    produce(kafka_config, f"{topics.subscriptions}.acme", [upsert("x", "price < 5")])
    produce(kafka_config, f"{topics.subscriptions}.beta", [upsert("x", "price > 5")])  # before beta is served
    for settings, event in ((first, b'{"price": 8}'), (both, b'{"price": 9}')):
        query = MatchJob(settings, spark, kafka_config).start()
        try:
            query.processAllAvailable()
            produce(kafka_config, topics.events, [event], partition=0)
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()
    assert {d["offset"] for d in notification_docs(kafka_config, f"{topics.notifications}.beta", 1)} == {1}
    assert consume_all(kafka_config, f"{topics.notifications}.acme") == []

"""Helpers of the service's integration tests: a match query on unique topics, oracle expectations."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from matchers.events import flatten
from matchers.expr import Subscription
from matchers.oracle import match as oracle_match
from streaming.config import Settings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.registry_columns import files
from streaming.storage import Directory
from tests.integration.kafka_helpers import Record, consume_all

#: Spark's own Kafka connector and the project's ``kafka-py`` source: the tests that take the
#: ``connector`` fixture run with each.
CONNECTORS = ("java", "kafka-py")


class Topics(NamedTuple):
    events: str
    subscriptions: str
    notifications: str
    errors: str


def make_topics(topic_factory: Any, event_partitions: int = 2) -> Topics:
    return Topics(
        topic_factory("events", partitions=event_partitions),
        topic_factory("subscriptions", partitions=1),
        topic_factory("notifications", partitions=2),
        topic_factory("errors", partitions=1),
    )


def service_settings(topics: Topics, checkpoint: Path, bootstrap: str, connector: str | None = None,
                     **match: Any) -> Settings:
    """Settings of a match query on ``topics``; ``connector`` (:data:`CONNECTORS`) or the default one."""
    return Settings().replace(
        kafka={
            **connector_settings(connector),
            "bootstrap_servers": bootstrap,
            "events_topic": topics.events,
            "subscriptions_topic": topics.subscriptions,
            "notifications_topic": topics.notifications,
            "errors_topic": topics.errors,
            "max_offsets_per_trigger": 400,
        },
        spark={"checkpoint_dir": str(checkpoint), "trigger_interval": "0 seconds"},
        match=match,
        status={"status_file": str(checkpoint / "status.json")},
    )


def connector_settings(connector: str | None) -> dict[str, bool]:
    """``kafka.use_java_connector`` of ``connector`` ("java" or "kafka-py"; none: the default)."""
    if connector is None:
        return {}
    if connector not in CONNECTORS:
        raise ValueError(f"unknown connector {connector!r}: one of {CONNECTORS}")
    return {"use_java_connector": connector == "java"}


def job_env(kafka_config: KafkaClientConfig, topics: Topics, checkpoint: str | Path, status_file: Path,
            connector: str | None = None, **variables: str) -> dict[str, str]:
    """Environment of a ``python -m streaming run`` subprocess on the test broker and ``topics``
    (small batches, back-to-back triggers, frequent snapshots), with ``connector`` (or the
    default one), plus ``variables``."""
    return {
        **os.environ,
        **{f"PUBSUB_KAFKA_{k.upper()}": str(v).lower() for k, v in connector_settings(connector).items()},
        "PUBSUB_KAFKA_BOOTSTRAP_SERVERS": kafka_config.bootstrap_servers,
        "PUBSUB_KAFKA_EVENTS_TOPIC": topics.events,
        "PUBSUB_KAFKA_SUBSCRIPTIONS_TOPIC": topics.subscriptions,
        "PUBSUB_KAFKA_NOTIFICATIONS_TOPIC": topics.notifications,
        "PUBSUB_KAFKA_ERRORS_TOPIC": topics.errors,
        "PUBSUB_KAFKA_MAX_OFFSETS_PER_TRIGGER": "250",
        "PUBSUB_SPARK_CHECKPOINT_DIR": str(checkpoint),
        "PUBSUB_SPARK_TRIGGER_INTERVAL": "0 seconds",
        "PUBSUB_MATCH_SNAPSHOT_EVERY": "4",
        "PUBSUB_STATUS_STATUS_FILE": str(status_file),
        **variables,
    }


def expected_pairs(
    subs: Iterable[Subscription], events: Iterable[tuple[int, int, dict]]
) -> set[tuple[str, int, int]]:
    """(subscription id, partition, offset) of every match by the oracle."""
    subs = list(subs)
    return {(sid, p, o) for p, o, e in events for sid in oracle_match(subs, flatten(e))}


def notification_docs(
    config: KafkaClientConfig, topic: str, min_records: int = 0, timeout: float = 60.0
) -> list[dict]:
    return [orjson.loads(r.body) for r in consume_all(config, topic, timeout, min_records)]


def pairs(docs: Iterable[dict]) -> set[tuple[str, int, int]]:
    return {(d["subscription"], d["partition"], d["offset"]) for d in docs}


def event_positions(config: KafkaClientConfig, topic: str) -> list[Record]:
    return consume_all(config, topic)


class RegistryState(NamedTuple):
    """The match query's columnar registry as its files hold it."""

    version: int
    ids: set[str]
    """The live subscriptions' ids at ``version``."""
    batch_ids: list[int]
    """The batch id of each stored delta, in version order."""


def registry_state(location: str | Path) -> RegistryState:
    """The columnar registry at ``location`` (``<checkpoint>/registry-columns``) at its latest version."""
    directory = Directory(location)
    version = files.latest_version(directory)
    table, _ = files.shard_table(directory, version, 0, 1)
    batch_ids = [files.read_delta(directory, v)[1].batch_id for v in files.delta_versions(directory)]
    return RegistryState(version, set(table.column("id").to_pylist()), batch_ids)


def drain(query: Any) -> None:
    """Run the streaming ``query`` over what its topics hold, check that it did not fail, then stop it."""
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()

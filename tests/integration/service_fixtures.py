"""Helpers of the service's integration tests: a match query on unique topics, oracle expectations."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from matchers.events import flatten
from matchers.expr import Subscription
from matchers.oracle import match as oracle_match
from streaming.config import Settings
from tests.integration.kafka_helpers import Record, consume_all


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


def service_settings(topics: Topics, checkpoint: Path, bootstrap: str, **match: Any) -> Settings:
    return Settings().replace(
        kafka={
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


def expected_pairs(
    subs: Iterable[Subscription], events: Iterable[tuple[int, int, dict]]
) -> set[tuple[str, int, int]]:
    """(subscription id, partition, offset) of every match by the oracle."""
    subs = list(subs)
    return {(sid, p, o) for p, o, e in events for sid in oracle_match(subs, flatten(e))}


def notification_docs(
    config: dict, topic: str, min_records: int = 0, timeout: float = 60.0
) -> list[dict]:
    return [orjson.loads(r.value) for r in consume_all(config, topic, timeout, min_records)]


def pairs(docs: Iterable[dict]) -> set[tuple[str, int, int]]:
    return {(d["subscription"], d["partition"], d["offset"]) for d in docs}


def event_positions(config: dict, topic: str) -> list[Record]:
    return consume_all(config, topic)

"""The match query's first batch reads its ranges like every other: they start at the source's
initial offsets in the checkpoint (``sources/0/0``, written by either connector), and a restart
before that batch commits replays the same records."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from matchers.expr import to_text
from streaming.kafka import offsets
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match import MatchJob, job, logged_ranges
from streaming.storage import Directory, join
from tests.integration.kafka_helpers import produce
from tests.integration.service_fixtures import drain, make_topics, service_settings
from tests.strategies import random_subscriptions

pytestmark = pytest.mark.integration


def records(subs: list[Any]) -> list[tuple[str, bytes]]:
    return [(s.id, orjson.dumps({"id": s.id, "expr": to_text(s.expr)})) for s in subs]


def rows(parsed: pa.Table) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["id"], r["op"]) for r in parsed.to_pylist())


def test_a_restart_before_the_first_batch_commits_replays_its_records(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, connector: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """The first batch (30 records) fails after they were parsed; more records arrive; the
    restarted query's first batch parses the same rows (its ranges from ``sources/0/0``, which
    either connector wrote), the next batch the rest, and the registry holds them all."""
    subs = random_subscriptions(random.Random(29), 50)
    topics = make_topics(topic_factory)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers, connector)
    produce(kafka_config, topics.subscriptions, records(subs[:30]))
    seen: list[tuple[int, pa.Table]] = []
    admit = job.admit

    def failing_first(parsed: pa.Table, registry: Any, batch_id: int, *rest: Any) -> Any:
        seen.append((batch_id, parsed))
        if len(seen) == 1:
            raise RuntimeError("killed before the first batch commits")
        return admit(parsed, registry, batch_id, *rest)

    monkeypatch.setattr(job, "admit", failing_first)
    query = MatchJob(settings, spark, kafka_config).start()
    try:
        with pytest.raises(Exception, match="killed before the first batch commits"):
            query.processAllAvailable()
    finally:
        query.stop()
    checkpoint = join(settings.checkpoint, "query")
    start = offsets.read_initial_offsets(Directory(join(checkpoint, "sources", "0")).read("0"))
    assert start == {(topics.subscriptions, 0): 0, (topics.events, 0): 0, (topics.events, 1): 0}
    assert [(r.topic, r.start, r.end) for r in logged_ranges(checkpoint, 0) or ()] == [(topics.subscriptions, 0, 30)]

    produce(kafka_config, topics.subscriptions, records(subs[30:]))  # past the first batch's end
    restarted = MatchJob(settings, spark, kafka_config)
    drain(restarted.start())
    assert [b for b, _ in seen] == [0, 0, 1]
    assert rows(seen[1][1]) == rows(seen[0][1]) and [r[1] for r in rows(seen[0][1])] == list(range(30))
    assert [r[1] for r in rows(seen[2][1])] == list(range(30, 50))
    assert len(restarted.registry) == 50 and restarted.history[0].subscription_records == 30

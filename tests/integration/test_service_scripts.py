"""The operator scripts against the real broker (no Spark): publish, subscribe, follow, show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from scripts import follow, publish, show, subscribe
from streaming.kafka.client_config import KafkaClientConfig
from streaming.notifications import encode
from tests.integration.kafka_helpers import consume_all, produce

pytestmark = pytest.mark.integration


def base(kafka_config: KafkaClientConfig, **topics: str) -> list[str]:
    args = ["--bootstrap", kafka_config.bootstrap_servers]
    for key, name in topics.items():
        args += ["--set", f"kafka.{key}={name}"]
    return args


def test_subscribe_add_cancel_and_reject(kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, capsys):
    topic = topic_factory("subs")
    args = base(kafka_config, subscriptions_topic=topic)
    assert subscribe.main([*args, "add", "--id", "a", "--expr", "price < 5", "--expires", "2030-01-01T00:00:00"]) == 0
    f = tmp_path / "subs.jsonl"
    f.write_text('{"id": "b", "json": ["symbol", "=", "IBM"]}\n\n{"id": "c", "expr": "x IN (1, 2)"}\n')
    assert subscribe.main([*args, "add", "--file", str(f)]) == 0
    assert subscribe.main([*args, "cancel", "--id", "a", "b"]) == 0
    assert subscribe.main([*args, "add", "--id", "bad", "--expr", "price <"]) == 1
    recs = consume_all(kafka_config, topic)
    got = [((r.key or b"").decode(), orjson.loads(r.body)["op"]) for r in recs]
    assert got == [("a", "upsert"), ("b", "upsert"), ("c", "upsert"), ("a", "delete"), ("b", "delete")]
    assert orjson.loads(recs[0].body)["expires"] == "2030-01-01T00:00:00"


def test_publish_file_with_validity_and_rate(kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path):
    topic = topic_factory("events")
    f = tmp_path / "events.jsonl"
    f.write_bytes(b"".join(orjson.dumps({"id": i, "price": i}) + b"\n" for i in range(50)))
    args = base(kafka_config, events_topic=topic)
    assert publish.main([*args, "--file", str(f), "--rate", "1000", "--valid-for", "60", "--key-field", "id"]) == 0
    recs = consume_all(kafka_config, topic, min_records=50)
    docs = [orjson.loads(r.body) for r in recs]
    assert sorted(d["id"] for d in docs) == list(range(50)) and all("valid_until" in d for d in docs)
    assert {r.key for r in recs} == {str(i).encode() for i in range(50)}


def test_follow_from_beginning_reads_everything_again_whatever_the_group_committed(
        kafka_config: KafkaClientConfig, topic_factory: Any, capsys):
    """Two ``--from-beginning`` runs in the default group (README's command) both print every
    record; without it the group goes on from what it committed (nothing new: nothing)."""
    topic = topic_factory("notifications")
    produce(kafka_config, topic, [encode(f"s{i}", "events", 0, i, i, b'{"p": 1}', 1, 2, 0) for i in range(4)])
    args = [*base(kafka_config, notifications_topic=topic), "--json", "--idle-timeout", "8"]
    for _ in range(2):
        assert follow.main([*args, "--from-beginning"]) == 0
        assert sorted(orjson.loads(line)["subscription"] for line in capsys.readouterr().out.splitlines()) == [
            "s0", "s1", "s2", "s3"]
    assert follow.main(args) == 0
    assert capsys.readouterr().out == ""


def test_follow_drops_replay_duplicates_and_show(kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, capsys):
    topic = topic_factory("notifications")
    values = [encode(f"s{i % 3}", "events", 0, i, i, b'{"p": 1}', 1, 2, 0) for i in range(6)]
    produce(kafka_config, topic, values + values[:2])  # a replay sends two again
    args = base(kafka_config, notifications_topic=topic)
    assert follow.main([*args, "--group", f"g-{topic}", "--from-beginning", "--json", "--idle-timeout", "8"]) == 0
    out = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 6 and len({d["id"] for d in out}) == 6
    assert show.main([*args, "--set", f"spark.checkpoint_dir={tmp_path}", "--set",
                      f"status.status_file={tmp_path / 's.json'}"]) == 0
    text = capsys.readouterr().out
    assert f"{topic}" in text and "records=8" in text and "registry: none" in text

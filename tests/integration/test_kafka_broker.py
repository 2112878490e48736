"""The embedded Apache Kafka broker and topic administration against it."""

from __future__ import annotations

import os
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from streaming import jars
from streaming.instance import InUseError, start_time
from streaming.kafka.admin import ensure_topics, partition_counts
from streaming.kafka.broker import EmbeddedBroker, recorded_address
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import BrokerError
from streaming.kafka.watermarks import Watermarks
from tests.integration.kafka_helpers import consume_all, produce

pytestmark = pytest.mark.integration


def test_broker_starts_answers_and_stops(tmp_path: Any) -> None:
    log_path = tmp_path / "broker.log"
    with EmbeddedBroker(log_path=log_path) as broker:
        assert broker.running
        host, port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        config = KafkaClientConfig.create(broker.bootstrap_servers)
        assert ensure_topics(config, {"solo": 2}) == {"solo": 2}
        process = broker._process  # noqa: SLF001 - checking the process really goes away
        assert process is not None
        pid = process.pid
    assert not broker.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert log_path.exists()
    broker.stop()  # idempotent


def test_broker_with_a_data_directory_keeps_its_topics(tmp_path: Any) -> None:
    data = tmp_path / "broker"
    with EmbeddedBroker(data_dir=data) as broker:
        address = broker.bootstrap_servers
        assert recorded_address(data) == address
        config = KafkaClientConfig.create(address)
        ensure_topics(config, {"kept": 2})
        produce(config, "kept", [f"a{i}" for i in range(500)], linger_ms=200)
        with pytest.raises(InUseError, match="data directory"):
            EmbeddedBroker(data_dir=data).start()
        pids = broker.pids
        assert set(pids) == {"kafka"}
    assert all(start_time(pid) is None for pid in pids.values())
    with EmbeddedBroker(data_dir=data) as broker:
        assert broker.bootstrap_servers == address  # the last run's port, free again
        produce(config, "kept", [f"b{i}" for i in range(10)], partition=1)
        watermarks = Watermarks(config.kafka_python("consumer"))
        try:
            ends = watermarks.latest([("kept", 0), ("kept", 1)])
        finally:
            watermarks.close()
        values = [r.body for r in consume_all(config, "kept")]
    assert sum(ends.values()) == 510 and len(values) == 510
    assert {v.decode() for v in values} == {f"a{i}" for i in range(500)} | {f"b{i}" for i in range(10)}


def test_broker_without_its_jars_is_a_clear_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars, "JARS_DIR", tmp_path / "no-jars")
    with pytest.raises(BrokerError, match="make setup"):
        EmbeddedBroker(log_path=tmp_path / "log").start()


def test_a_broker_refusing_its_settings_is_reported(tmp_path: Any) -> None:
    bad = EmbeddedBroker(log_path=tmp_path / "log", properties={"num.network.threads": "zero"})
    with pytest.raises(BrokerError, match="Invalid value zero for configuration num.network.threads"):
        bad.start()
    assert not bad.running


def test_ensure_topics_is_idempotent(kafka_config: KafkaClientConfig, topic_factory: Any) -> None:
    name = topic_factory("admin", partitions=3)
    assert ensure_topics(kafka_config, {name: 3}) == {name: 3}
    assert ensure_topics(kafka_config, {name: 5}) == {name: 3}  # existing count kept
    assert partition_counts(kafka_config, [name, f"{name}-missing"]) == {name: 3}


def test_end_offsets_cover_the_tail_of_a_multi_record_batch(
    kafka_config: KafkaClientConfig, topic_factory: Any
) -> None:
    """ListOffsets counts the last record of a multi-record producer batch (Tansu did not)."""
    topic = topic_factory("tail", partitions=1)
    produce(kafka_config, topic, [f"r{i}" for i in range(3000)], partition=0, linger_ms=500)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=kafka_config.bootstrap_servers)
    try:
        assert consumer.end_offsets([tp])[tp] == 3000
    finally:
        consumer.close()
    watermarks = Watermarks(kafka_config.kafka_python("consumer"))
    try:
        assert watermarks.latest([(topic, 0)]) == {(topic, 0): 3000}
        produce(kafka_config, topic, ["one-more"], partition=0)
        assert watermarks.latest([(topic, 0)]) == {(topic, 0): 3001}
    finally:
        watermarks.close()
    assert len(consume_all(kafka_config, topic)) == 3001

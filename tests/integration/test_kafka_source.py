"""The kafka-py source against the real broker and a real Spark session."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import NewPartitions
from kafka.errors import IncompatibleBrokerVersion

from streaming.kafka import read_stream
from streaming.kafka.admin import admin_client, ensure_topics
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import FetchTimeoutError
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetRange
from tests.integration.kafka_helpers import consume_all, produce

pytestmark = pytest.mark.integration
# New partitions are found by a metadata refresh at most once a second.
DISCOVERY_S = 1.2


def _collect(spark: Any, df: Any, checkpoint: Path) -> tuple[Any, dict[int, list[tuple]]]:
    """Start ``df`` with a foreachBatch sink recording each batch's rows by batch id."""
    batches: dict[int, list[tuple]] = {}
    lock = threading.Lock()

    def sink(batch_df: Any, batch_id: int) -> None:
        rows = [
            (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp is not None)
            for r in batch_df.collect()
        ]
        with lock:
            batches[batch_id] = sorted(rows)

    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()
    return query, batches


def _rows(batches: dict[int, list[tuple]]) -> list[tuple]:
    return sorted(row for rows in batches.values() for row in rows)


def _expected(kafka_config: KafkaClientConfig, *topics: str) -> list[tuple]:
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, True)
        for topic in topics
        for r in consume_all(kafka_config, topic)
    )


def test_stream_reads_two_topics_exactly_once_with_tail(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    events = topic_factory("events", partitions=3)
    subs = topic_factory("subs", partitions=2)
    # Large multi-record producer batches: the broker's ListOffsets hides their tails.
    produce(kafka_config, events, [(f"k{i}", f"e{i}") for i in range(900)], linger_ms=200)
    produce(kafka_config, subs, [(f"s{i}", f"s{i}") for i in range(101)], linger_ms=200)
    df = read_stream(spark, kafka_config, [events, subs], starting="earliest")
    query, batches = _collect(spark, df, tmp_path / "chk")
    try:
        query.processAllAvailable()
        first = _rows(batches)
        assert len(first) == 1001
        produce(kafka_config, events, [f"late{i}" for i in range(57)], partition=1, linger_ms=200)
        query.processAllAvailable()
    finally:
        query.stop()
    got = _rows(batches)
    assert got == _expected(kafka_config, events, subs)
    assert len(got) == 1058
    assert len({(t, p, o) for t, p, o, *_ in got}) == len(got)
    assert {t for t, *_ in got} == {events, subs}
    assert {p for t, p, *_ in got if t == events} == {0, 1, 2}


def test_cap_per_trigger_is_respected(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory("capped", partitions=2)
    produce(kafka_config, topic, [f"v{i}" for i in range(250)], linger_ms=100)
    df = read_stream(spark, kafka_config, topic, starting="earliest", max_per_trigger=60)
    query, batches = _collect(spark, df, tmp_path / "chk")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    sizes = [len(batches[b]) for b in sorted(batches)]
    assert all(size <= 60 for size in sizes), sizes
    assert sum(sizes) == 250
    assert len([s for s in sizes if s]) >= 5
    assert _rows(batches) == _expected(kafka_config, topic)


def test_topic_and_partitions_created_mid_stream_are_read_from_offset_zero(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    existing = topic_factory("old", partitions=1)
    later = f"{existing}-later"
    produce(kafka_config, existing, ["a", "b"])
    df = read_stream(spark, kafka_config, [existing, later], starting="latest")
    query, batches = _collect(spark, df, tmp_path / "chk")
    try:
        query.processAllAvailable()
        assert _rows(batches) == []
        produce(kafka_config, existing, ["c"])
        ensure_topics(kafka_config, {later: 2})
        produce(kafka_config, later, [f"n{i}" for i in range(40)], linger_ms=100)
        time.sleep(DISCOVERY_S)
        query.processAllAvailable()
        assert sorted(v for t, _, _, _, v, _ in _rows(batches) if t == later) == sorted(
            f"n{i}".encode() for i in range(40)
        )
        added = _add_partition(kafka_config, later, 3)
        if added:
            produce(kafka_config, later, [f"p{i}" for i in range(9)], partition=2)
            time.sleep(DISCOVERY_S)
            query.processAllAvailable()
    finally:
        query.stop()
    got = _rows(batches)
    assert [v for t, _, _, _, v, _ in got if t == existing] == [b"c"]
    assert sorted(r for r in got if r[0] == later) == _expected(kafka_config, later)
    if added:
        assert sorted(v for t, p, _, _, v, _ in got if t == later and p == 2) == sorted(
            f"p{i}".encode() for i in range(9)
        )


def _add_partition(kafka_config: KafkaClientConfig, topic: str, total: int) -> bool:
    """Grow ``topic`` to ``total`` partitions; False if the broker cannot."""
    admin = admin_client(kafka_config)
    try:
        admin.create_partitions({topic: NewPartitions(total)})
        return True
    except IncompatibleBrokerVersion:
        return False
    finally:
        admin.close()


def test_restart_from_checkpoint_rereads_uncommitted_batch_and_continues(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory("restart", partitions=2)
    produce(kafka_config, topic, [f"a{i}" for i in range(300)], linger_ms=100)
    checkpoint = tmp_path / "chk"
    df = read_stream(spark, kafka_config, topic, starting="earliest", max_per_trigger=150)
    query, run1 = _collect(spark, df, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    last = max(b for b in run1 if run1[b])
    # Crash between the batch's side effects and its commit: drop the commit marker.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    offsets = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
    assert topic in offsets
    produce(kafka_config, topic, [f"b{i}" for i in range(250)], linger_ms=100)
    df = read_stream(spark, kafka_config, topic, starting="earliest", max_per_trigger=150)
    query, run2 = _collect(spark, df, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert min(run2) == last
    assert run2[last] == run1[last]  # the same range, read again deterministically
    merged = {**run1, **run2}
    rows = _rows(merged)
    assert rows == _expected(kafka_config, topic)
    assert len(rows) == 550


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_batch_read_between_json_offsets(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, client: str
) -> None:
    topic = topic_factory("batch", partitions=2)
    produce(kafka_config, topic, [f"x{i}" for i in range(40)], partition=0, linger_ms=100)
    produce(kafka_config, topic, [f"y{i}" for i in range(30)], partition=1, linger_ms=100)
    start = json.dumps({topic: {"0": 5, "1": -2}})
    end = json.dumps({topic: {"0": -1, "1": 12}})
    df = (
        spark.read.format("kafka-py")
        .option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", start)
        .option("endingOffsets", end)
        .option("kafkaClient", client)
        .load()
    )
    rows = sorted((r.partition, r.offset, r.value) for r in df.collect())
    assert rows == [(0, i, f"x{i}".encode()) for i in range(5, 40)] + [
        (1, i, f"y{i}".encode()) for i in range(12)
    ]
    everything = (
        spark.read.format("kafka-py")
        .option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
        .option("subscribe", topic)
        .option("kafkaClient", client)
        .load()
    )
    assert everything.count() == 70
    assert [f.name for f in everything.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
    ]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_read_range_past_the_log_end_times_out_clearly(
    kafka_config: KafkaClientConfig, topic_factory: Any, client: str
) -> None:
    topic = topic_factory("short", partitions=1)
    produce(kafka_config, topic, [f"s{i}" for i in range(10)], linger_ms=50)
    config = KafkaClientConfig.create(kafka_config.bootstrap_servers, data_client=client)
    got = list(read_range(config, OffsetRange(topic, 0, 3, 10)))
    assert [o for b in got for o in b.column("offset").to_pylist()] == list(range(3, 10))
    with pytest.raises(FetchTimeoutError, match=r"no progress at offset 10 .* \[3, 12\)"):
        list(read_range(config, OffsetRange(topic, 0, 3, 12), timeout_s=1.5))


def test_trigger_available_now_reads_everything_then_stops(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory("avail", partitions=2)
    produce(kafka_config, topic, [f"v{i}" for i in range(120)], linger_ms=100)
    df = read_stream(spark, kafka_config, topic, starting="earliest", max_per_trigger=50)
    batches: dict[int, list[tuple]] = {}

    def sink(batch_df: Any, batch_id: int) -> None:
        batches[batch_id] = sorted(
            (r.topic, r.partition, r.offset, r.key, r.value, True) for r in batch_df.collect()
        )

    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180)
    finally:
        query.stop()
    assert _rows(batches) == _expected(kafka_config, topic)
    assert max(len(rows) for rows in batches.values()) <= 50


def test_java_connector_switch_selects_spark_format_kafka(spark: Any, kafka_config: KafkaClientConfig) -> None:
    """``use_java_connector=True`` asks Spark for ``format("kafka")`` with the same options."""
    try:
        df = read_stream(spark, kafka_config, "events", use_java_connector=True)
    except Exception as exc:  # noqa: BLE001 - the connector jar is absent here
        assert "Failed to find data source: kafka" in str(exc)
    else:  # a cluster with the connector: same columns as kafka-py
        assert df.columns[:6] == ["key", "value", "topic", "partition", "offset", "timestamp"]

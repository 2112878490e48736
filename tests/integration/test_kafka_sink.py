"""The kafka-py sink (batch and streaming writes) against the real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from streaming.instance import free_port
from streaming.kafka import read_stream, write_batch
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import DeliveryError, KafkaOptionError
from streaming.kafka.sink import check_schema, produce_batches
from tests.integration.kafka_helpers import Record, consume_all, produce

pytestmark = pytest.mark.integration


def _values(records: list[Record]) -> list[bytes]:
    """Sorted values of ``records``, none of which may be null."""
    values = [r.value for r in records]
    assert all(v is not None for v in values)
    return sorted(v for v in values if v is not None)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_batch_write_routes_rows_by_topic_column(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, client: str
) -> None:
    notes = topic_factory("notifications", partitions=2)
    errors = topic_factory("errors", partitions=1)
    rows: list[tuple[Any, ...]] = [
        (f"k{i}", f"note{i}", notes if i % 3 else errors) for i in range(300)
    ]
    rows += [(None, "default-topic", None)]  # a null topic falls back to the option
    df = spark.createDataFrame(rows, "key string, value string, topic string").repartition(3)
    (
        df.write.format("kafka-py")
        .option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
        .option("topic", notes)
        .option("kafkaClient", client)
        .mode("append")
        .save()
    )
    got_notes = consume_all(kafka_config, notes)
    got_errors = consume_all(kafka_config, errors)
    want_notes = sorted(
        [(k.encode(), v.encode()) for k, v, t in rows if t == notes] + [(None, b"default-topic")],
        key=repr,
    )
    assert sorted(((r.key, r.value) for r in got_notes), key=repr) == want_notes
    assert sorted((r.key, r.value) for r in got_errors) == sorted(
        (k.encode(), v.encode()) for k, v, t in rows if t == errors
    )


def test_batch_write_binary_values_and_explicit_partition(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any
) -> None:
    topic = topic_factory("binary", partitions=3)
    payloads = [bytes([i % 256, 0, 255]) * (i % 7 + 1) for i in range(50)]
    df = spark.createDataFrame([(p, 2) for p in payloads], "value binary, partition int")
    write_batch(df, kafka_config, topic=topic)  # the service's entry point, default client
    got = consume_all(kafka_config, topic)
    assert {r.partition for r in got} == {2}
    assert _values(got) == sorted(payloads)
    assert all(r.key is None for r in got)


def test_streaming_write_delivers_every_row(
    spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
) -> None:
    source = topic_factory("in", partitions=2)
    out_a = topic_factory("out-a", partitions=1)
    out_b = topic_factory("out-b", partitions=2)
    produce(kafka_config, source, [(f"k{i}", f"{i}") for i in range(400)], linger_ms=100)
    df = read_stream(spark, kafka_config, source, starting="earliest")
    routed = df.selectExpr(
        "key",
        "concat('seen-', cast(value as string)) as value",
        f"if(cast(cast(value as string) as int) % 2 = 0, '{out_a}', '{out_b}') as topic",
    )
    query = (
        routed.writeStream.format("kafka-py")
        .option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got_a = consume_all(kafka_config, out_a)
    got_b = consume_all(kafka_config, out_b)
    assert _values(got_a) == sorted(f"seen-{i}".encode() for i in range(0, 400, 2))
    assert _values(got_b) == sorted(f"seen-{i}".encode() for i in range(1, 400, 2))
    assert {r.key for r in got_a + got_b} == {f"k{i}".encode() for i in range(400)}


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_undeliverable_records_raise(client: str) -> None:
    """A producer that cannot reach its broker fails the write instead of dropping rows."""
    options = {
        "bootstrap_timeout_ms": 1000,
        "max_block_ms": 1000,
        "request_timeout_ms": 1000,
        "delivery_timeout_ms": 1500,
        "retries": 0,
    }
    config = KafkaClientConfig.create(f"127.0.0.1:{free_port()}", options, client)
    batch = pa.RecordBatch.from_pydict({"value": [b"x", b"y"]})
    with pytest.raises(Exception) as info:
        produce_batches(config, "nowhere", iter([batch]))
    assert not isinstance(info.value, (AssertionError, ValueError))
    if client == "confluent":
        assert isinstance(info.value, DeliveryError)
        assert "2 of 2 records were not delivered" in str(info.value)


def test_row_without_topic_is_a_delivery_error(kafka_config: KafkaClientConfig) -> None:
    batch = pa.RecordBatch.from_pydict({"value": ["a"], "topic": pa.array([None], pa.string())})
    with pytest.raises(DeliveryError, match="null topic"):
        produce_batches(kafka_config, None, iter([batch]))


def test_write_schema_is_checked(spark: Any) -> None:
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(KafkaOptionError, match="value"):
        check_schema(df.schema, "t")
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(KafkaOptionError, match="topic"):
        check_schema(df.schema, None)
    check_schema(df.schema, "t")
    assert issubclass(DeliveryError, Exception)

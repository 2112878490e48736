"""Kafka sink: Arrow batches of ``value`` (and optional ``key``, ``topic``, ``partition``) to Kafka.

The producer is the configuration's data-path client: confluent-kafka (librdkafka, the
default) or kafka-python (option ``kafkaClient``).

Every write flushes its producer and fails if any record was not acknowledged
(``acks=all`` with retries), so a failed delivery fails the Spark task instead of
dropping records. Delivery is at-least-once: a retried task may write a record twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
from kafka import KafkaProducer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.clients import ClientCache
from streaming.kafka.errors import DeliveryError, KafkaOptionError
from streaming.kafka.refusals import kafka_python_refusals, rdkafka_refusals, refusal

_PRODUCER_SETTINGS = {"acks": "all", "retries": 5, "linger_ms": 5}
# Delivery reports of failed records only: the write needs the failures (the successes are
# what flush() waits for), and a Python callback per delivered record is most of the
# producer's CPU for small records.
_RDKAFKA_WRITE_SETTINGS = {"acks": "all", "retries": 5, "linger.ms": 5, "delivery.report.only.error": True}
_FLUSH_TIMEOUT_S = 120.0


class _Reports(NamedTuple):
    """What a cached confluent producer was told during its current write."""

    refused: list[str]
    """Refused logins and TLS handshakes."""
    failed: list[Any]
    """The errors of the records not delivered (the producer's own delivery callback: one
    passed to every ``produce`` call costs about 0.6 µs per record, measured)."""


_REPORTS: dict[str, _Reports] = {}


def _new_producer(key: str, client: str, conf: Mapping[str, Any]) -> Any:
    if client == "confluent":
        from confluent_kafka import Producer

        reports = _REPORTS[key] = _Reports([], [])
        failed = reports.failed

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        return Producer({**conf, "error_cb": rdkafka_refusals(reports.refused), "on_delivery": on_delivery})
    return KafkaProducer(**{**_PRODUCER_SETTINGS, **conf})


def _close_producer(key: str, producer: Any) -> None:
    _REPORTS.pop(key, None)
    if isinstance(producer, KafkaProducer):
        producer.close(timeout=5)
    else:
        producer.flush(5)


_PRODUCERS = ClientCache(_new_producer, _close_producer)


def close_producers() -> None:
    """Flush and close every cached producer of this process."""
    _PRODUCERS.close_all()


def check_schema(schema: StructType, topic: str | None) -> None:
    """Check the columns a Kafka write needs.

    Raises
    ------
    KafkaOptionError
        If ``value`` is missing, a column has an unsupported type, or no topic is given
        by either a ``topic`` column or the ``topic`` option.
    """
    types = {f.name: f.dataType for f in schema.fields}
    allowed = {
        "value": (StringType, BinaryType),
        "key": (StringType, BinaryType),
        "topic": (StringType,),
        "partition": (IntegerType,),
    }
    if "value" not in types:
        raise KafkaOptionError(f"a Kafka write needs a 'value' column; got {schema.fieldNames()}")
    for name, dtype in types.items():
        if name in allowed and not isinstance(dtype, allowed[name]):
            want = " or ".join(t.__name__ for t in allowed[name])
            raise KafkaOptionError(f"column {name!r} must be {want}, got {dtype.simpleString()}")
    if "topic" not in types and not topic:
        raise KafkaOptionError("a Kafka write needs the 'topic' option or a 'topic' column")


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return value.encode("utf-8")


def produce_batches(
    config: KafkaClientConfig,
    topic: str | None,
    batches: Iterator[pa.RecordBatch],
) -> int:
    """Send every row of ``batches`` and wait until all are acknowledged.

    Parameters
    ----------
    config : KafkaClientConfig
        Connection and security options, and the client that produces.
    topic : str or None
        Default topic; a non-null ``topic`` column value overrides it per row.
    batches : Iterator[pyarrow.RecordBatch]
        Rows with a ``value`` column and optional ``key``, ``topic``, ``partition``.

    Returns
    -------
    int
        Number of records delivered.

    Raises
    ------
    DeliveryError
        If a row has no topic or any record is not acknowledged.
    AuthenticationError
        If the broker refuses the producer's SASL login or TLS handshake.
    """
    if config.data_client == "confluent":
        return _produce_confluent(config, topic, batches)
    with kafka_python_refusals(config):
        return _produce_kafka_python(config.kafka_python("producer"), topic, batches)


def _rows(
    batch: pa.RecordBatch, topic: str | None, first: int
) -> Iterator[tuple[str, bytes | None, bytes | None, int | None]]:
    """(topic, value, key, partition) of each row; a row without topic is an error."""
    values, keys, topics, parts = _columns(batch, topic, first)
    for i in range(batch.num_rows):
        yield topics[i], _as_bytes(values[i]), _as_bytes(keys[i]), parts[i]


def _columns(batch: pa.RecordBatch, topic: str | None,
             first: int) -> tuple[list[Any], list[Any], list[str], list[int | None]]:
    """The rows' values, keys, topics and partitions (``None`` where a column is missing); a row
    without topic is an error."""
    names, n = batch.schema.names, batch.num_rows
    values = batch.column("value").to_pylist()
    keys = batch.column("key").to_pylist() if "key" in names else [None] * n
    parts = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    if "topic" not in names:
        topics = [topic] * n
    else:
        topics = batch.column("topic").to_pylist()
        if topic:
            topics = [t or topic for t in topics]
    if n and not topic and not all(topics):
        i = next(i for i, t in enumerate(topics) if not t)
        raise DeliveryError(f"row {first + i} has a null topic and no topic option is set")
    return values, keys, topics, parts  # type: ignore[return-value]  # no row without a topic


def _flush_confluent(producer: Any, refused: list[str]) -> int:
    """Flush; the number of records left unacknowledged after :data:`_FLUSH_TIMEOUT_S`, or
    as soon as the broker has refused the producer's login (nothing would get through)."""
    deadline = time.monotonic() + _FLUSH_TIMEOUT_S
    while True:
        remaining = int(producer.flush(min(1.0, max(0.0, deadline - time.monotonic()))))
        if not remaining or refused or time.monotonic() >= deadline:
            return remaining


def _produce_confluent(
    config: KafkaClientConfig, topic: str | None, batches: Iterator[pa.RecordBatch]
) -> int:
    key, producer = _PRODUCERS.get({**_RDKAFKA_WRITE_SETTINGS, **config.rdkafka("producer")}, "confluent")
    refused, failures = _REPORTS[key]
    refused.clear()  # this write's reports only
    failures.clear()
    produce = producer.produce
    sent = 0
    try:
        for batch in batches:
            values, keys, topics, parts = _columns(batch, topic, sent)
            for target, value, rkey, part in zip(topics, values, keys, parts, strict=True):
                try:  # a value or key as str is sent as its UTF-8; partition -1: the partitioner's
                    produce(target, value, rkey, -1 if part is None else part)
                except BufferError:  # local queue full: serve callbacks, then retry
                    _retry(producer, config, refused, target, value, rkey, part)
            sent += batch.num_rows
            producer.poll(0)
        remaining = _flush_confluent(producer, refused)
    except BaseException:
        _PRODUCERS.drop(key)
        raise
    if remaining and refused:
        producer.purge()  # nothing gets through: do not wait for the records on closing
        _PRODUCERS.drop(key)
        raise refusal(config, refused[-1])
    if remaining or failures:
        _PRODUCERS.drop(key)
        first = f"; first error: {failures[0]}" if failures else ""
        raise DeliveryError(
            f"{len(failures) + remaining} of {sent} records were not delivered "
            f"({remaining} unacknowledged after {_FLUSH_TIMEOUT_S:.0f} s){first}"
        )
    return sent


def _retry(producer: Any, config: KafkaClientConfig, refused: list[str], target: str, value: Any, rkey: Any,
           part: int | None) -> None:
    """Produce one record again until the local queue takes it, serving callbacks meanwhile."""
    while True:
        if refused:  # it will not drain
            producer.purge()
            raise refusal(config, refused[-1]) from None
        producer.poll(0.05)
        try:
            producer.produce(target, value, rkey, -1 if part is None else part)
            return
        except BufferError:
            continue


def _produce_kafka_python(
    producer_kwargs: Mapping[str, Any], topic: str | None, batches: Iterator[pa.RecordBatch]
) -> int:
    key, producer = _PRODUCERS.get(producer_kwargs, "kafka-python")
    failures: list[BaseException] = []
    sent = 0
    try:
        for batch in batches:
            for target, value, rkey, part in _rows(batch, topic, sent):
                future = producer.send(target, value=value, key=rkey, partition=part)
                future.add_errback(failures.append)
            sent += batch.num_rows
        producer.flush(timeout=_FLUSH_TIMEOUT_S)
    except BaseException:
        _PRODUCERS.drop(key)
        raise
    if failures:
        _PRODUCERS.drop(key)
        raise DeliveryError(
            f"{len(failures)} of {sent} records were not delivered; first error: {failures[0]!r}"
        )
    return sent


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """Number of records one task delivered."""

    records: int


class _TopicWriter:
    """What both writers do: check the rows' schema against the ``topic`` option, deliver a task's rows."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._topic = options.get("topic")
        check_schema(schema, self._topic)
        self._config = KafkaClientConfig.from_spark_options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Deliver one task's rows."""
        return KafkaCommitMessage(produce_batches(self._config, self._topic, iterator))


class KafkaBatchWriter(_TopicWriter, DataSourceArrowWriter):
    """Batch writer of ``df.write.format("kafka-py")``."""


class KafkaStreamWriter(_TopicWriter, DataSourceStreamArrowWriter):
    """Streaming writer of ``df.writeStream.format("kafka-py")`` (at-least-once)."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to do: every task flushed and checked its records before returning."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: Kafka records already delivered stay (at-least-once)."""

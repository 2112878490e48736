"""Executor-side reading of one offset range into Arrow record batches.

Each Python worker keeps one consumer per client configuration (workers are reused
across micro-batches), assigns it the partition of the range at the range's start: no
consumer group is involved. Reading stops at the range's end offset; offsets that hold
no record (compaction, transaction markers) are skipped.

The configuration's data-path client does the fetching: confluent-kafka (librdkafka,
about 3x faster here; the default) or kafka-python. Both build the same Arrow batches.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

import numpy as np
import pyarrow as pa
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.clients import ClientCache
from streaming.kafka.errors import DataLossError, FetchTimeoutError, KafkaConnectorError
from streaming.kafka.offsets import OffsetRange
from streaming.kafka.schema import ARROW_SCHEMA

FETCH_WAIT_MS = 100
"""Longest wait of a fetch request for more data. 5 ms read a 700-record range in 13-17 ms
instead of 150 in one benchmark, but on records written by ``scripts.publish`` to the
embedded broker (its S3 storage) it was 3 to 8 times slower than 100 ms: medians of 12
reads, 336 against 113 ms for 700 records, 868 against 112 for 3,000 (docs/e2e.md)."""

_READ_SETTINGS = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "none",
    "fetch_max_wait_ms": FETCH_WAIT_MS,
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
}
_RDKAFKA_READ_SETTINGS = {
    "group.id": "kafka-py-reader-unused",  # required by librdkafka; never joined
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "fetch.wait.max.ms": FETCH_WAIT_MS,
}


def _new_consumer(_key: str, client: str, kwargs: Mapping[str, Any]) -> Any:
    if client == "confluent":
        from confluent_kafka import Consumer

        return Consumer(dict(kwargs))
    return KafkaConsumer(**{**kwargs, **_READ_SETTINGS})


_SECOND = operator.itemgetter(1)

_CONSUMERS = ClientCache(_new_consumer, lambda _key, consumer: consumer.close())


def close_consumers() -> None:
    """Close every cached consumer of this process."""
    _CONSUMERS.close_all()


def to_batch(
    topic: str,
    partition: int,
    keys: list[bytes | None],
    values: list[bytes | None],
    offsets: list[int],
    timestamps_ms: list[int],
) -> pa.RecordBatch:
    """Build one record batch of the source schema from column lists."""
    n = len(offsets)
    ts = np.asarray(timestamps_ms, dtype=np.int64) * 1000
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, type=pa.binary()),
            pa.array(values, type=pa.binary()),
            pa.array([topic] * n, type=pa.string()),
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(np.asarray(offsets, dtype=np.int64)),
            pa.array(ts, type=pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


class _Rows:
    """The columns of the next batch of a range's records."""

    def __init__(self, rng: OffsetRange) -> None:
        self.rng = rng
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[int] = []

    def add(self, key: bytes | None, value: bytes | None, offset: int, stamp_ms: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.stamps.append(stamp_ms)

    def extend(self, keys: list[bytes | None], values: list[bytes | None], offsets: list[int],
               stamps_ms: list[int]) -> None:
        self.keys += keys
        self.values += values
        self.offsets += offsets
        self.stamps += stamps_ms

    def take(self) -> pa.RecordBatch:
        """The records added since the last take, as one batch; the next batch begins empty."""
        batch = to_batch(self.rng.topic, self.rng.partition, self.keys, self.values, self.offsets, self.stamps)
        self.keys, self.values, self.offsets, self.stamps = [], [], [], []
        return batch


def read_range(
    config: KafkaClientConfig,
    rng: OffsetRange,
    timeout_s: float = 120.0,
    fail_on_data_loss: bool = True,
    batch_rows: int = 10_000,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets ``[start, end)``) as Arrow record batches.

    Parameters
    ----------
    config : KafkaClientConfig
        Connection and security options, and the client that fetches.
    rng : OffsetRange
        Topic, partition and offsets to read.
    timeout_s : float
        Longest time without progress before giving up.
    fail_on_data_loss : bool
        Raise when offsets of the range are no longer in the log; otherwise skip them.
    batch_rows : int
        Rows per yielded batch (at most).

    Raises
    ------
    FetchTimeoutError
        If the consumer's position does not move for ``timeout_s``.
    DataLossError
        If ``fail_on_data_loss`` and the range starts before the log does.
    """
    if rng.end <= rng.start:
        return iter(())
    if config.data_client == "confluent":
        conf = {**config.rdkafka("consumer"), **_RDKAFKA_READ_SETTINGS}
        return _read_confluent(conf, rng, timeout_s, fail_on_data_loss, batch_rows)
    return _read_kafka_python(config.kafka_python("consumer"), rng, timeout_s, fail_on_data_loss, batch_rows)


def _data_loss(rng: OffsetRange, position: int, first: int) -> DataLossError:
    if first <= position:
        return DataLossError(
            f"{rng.topic}-{rng.partition}: offset {position} of range [{rng.start}, {rng.end}) "
            "is past the end of the log (was the topic deleted and recreated?)"
        )
    return DataLossError(
        f"{rng.topic}-{rng.partition}: offsets [{position}, {min(first, rng.end)}) "
        f"of range [{rng.start}, {rng.end}) are no longer in the log "
        f"(log starts at {first}); set failOnDataLoss=false to skip them"
    )


def _no_progress(rng: OffsetRange, position: int, timeout_s: float) -> FetchTimeoutError:
    return FetchTimeoutError(
        f"{rng.topic}-{rng.partition}: no progress at offset {position} for "
        f"{timeout_s:.0f} s while reading [{rng.start}, {rng.end}); "
        "the offsets may not exist (yet) or the broker is unreachable"
    )


def _permanent_errors() -> frozenset[int]:
    try:
        from confluent_kafka import KafkaError
    except ImportError:
        return frozenset()
    names = (
        "_AUTHENTICATION",
        "_SSL",
        "SASL_AUTHENTICATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
    )
    return frozenset(getattr(KafkaError, n) for n in names if hasattr(KafkaError, n))


#: librdkafka errors that waiting cannot cure: a read fails at once on them.
_PERMANENT_ERRORS = _permanent_errors()


def _read_confluent(
    conf: dict[str, Any],
    rng: OffsetRange,
    timeout_s: float,
    fail_on_data_loss: bool,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """confluent-kafka loop; an end-of-partition event at or past ``end`` ends the range."""
    from confluent_kafka import KafkaError, Message
    from confluent_kafka import TopicPartition as CTopicPartition

    key, consumer = _CONSUMERS.get(conf, "confluent")
    try:
        consumer.assign([CTopicPartition(rng.topic, rng.partition, rng.start)])
        rows = _Rows(rng)
        position = rng.start
        progress_at = time.monotonic()
        while position < rng.end:
            # Ask for no more than the range still needs: consume() returns once it has
            # that many messages (an end-of-partition event counts), not at its timeout.
            wanted = max(1, min(batch_rows, rng.end - position))
            msgs = consumer.consume(num_messages=wanted, timeout=0.5)
            offsets: list[int] = ([] if not msgs or any(map(Message.error, msgs))  # an offset is None only on an event
                                  else cast("list[int]", list(map(Message.offset, msgs))))
            if (offsets and position <= offsets[0] and offsets[-1] < rng.end
                    and all(map(operator.lt, offsets, offsets[1:]))):
                # The common case, records in the range and no event: the columns at once,
                # without a Python loop over the messages.
                rows.extend(list(map(Message.key, msgs)), list(map(Message.value, msgs)), offsets,
                            list(map(_SECOND, map(Message.timestamp, msgs))))
                position = offsets[-1] + 1
                progress_at = time.monotonic()
                msgs = []
            for msg in msgs:
                err = msg.error()
                if err is None:
                    offset = msg.offset()
                    if offset < position:  # never deliver an offset twice
                        continue
                    if offset >= rng.end:
                        position = rng.end
                        break
                    rows.add(msg.key(), msg.value(), offset, msg.timestamp()[1])
                    position = offset + 1
                    progress_at = time.monotonic()
                elif err.code() == KafkaError._PARTITION_EOF:
                    # Everything below the partition's end has been delivered; offsets up
                    # to it that held no record (markers, compaction) are skipped.
                    if msg.offset() >= rng.end:
                        position = rng.end
                        break
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    first, _ = consumer.get_watermark_offsets(
                        CTopicPartition(rng.topic, rng.partition), timeout=30
                    )
                    if fail_on_data_loss or first <= position:
                        raise _data_loss(rng, position, first)
                    position = first
                    if position < rng.end:
                        consumer.assign([CTopicPartition(rng.topic, rng.partition, position)])
                    break
                elif err.fatal() or err.code() in _PERMANENT_ERRORS:
                    raise KafkaConnectorError(
                        f"{rng.topic}-{rng.partition}: fetch failed at {position}: {err.str()}"
                    )
                # Other errors (lost connections, leader changes) are transient: librdkafka
                # recovers by itself and the no-progress timeout bounds the wait.
            if position < rng.end and time.monotonic() - progress_at > timeout_s:
                raise _no_progress(rng, position, timeout_s)
            if len(rows.offsets) >= batch_rows:
                yield rows.take()
        if rows.offsets:
            yield rows.take()
        consumer.unassign()
    except BaseException:
        _CONSUMERS.drop(key)
        raise


def _read_kafka_python(
    consumer_kwargs: Mapping[str, Any],
    rng: OffsetRange,
    timeout_s: float,
    fail_on_data_loss: bool,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """kafka-python loop; the consumer's position moves past offsets without records."""
    key, consumer = _CONSUMERS.get(consumer_kwargs, "kafka-python")
    kp = TopicPartition(rng.topic, rng.partition)
    try:
        consumer.assign([kp])
        consumer.seek(kp, rng.start)
        rows = _Rows(rng)
        position = rng.start
        progress_at = time.monotonic()
        while position < rng.end:
            try:
                polled = consumer.poll(timeout_ms=500, max_records=batch_rows).get(kp, ())
            except OffsetOutOfRangeError:
                first = consumer.beginning_offsets([kp])[kp]
                if fail_on_data_loss or first <= position:
                    raise _data_loss(rng, position, first) from None
                position = max(position, first)
                if position >= rng.end:
                    break
                consumer.seek(kp, position)
                continue
            for rec in polled:
                if rec.offset >= rng.end:
                    break
                rows.add(rec.key, rec.value, rec.offset, rec.timestamp)
            moved = consumer.position(kp)
            if moved is not None and moved > position:
                position = moved
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > timeout_s:
                raise _no_progress(rng, position, timeout_s)
            if len(rows.offsets) >= batch_rows:
                yield rows.take()
        if rows.offsets:
            yield rows.take()
        consumer.assign([])
    except BaseException:
        _CONSUMERS.drop(key)
        raise

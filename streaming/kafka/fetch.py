"""Executor-side reading of one offset range into Arrow record batches.

Each Python worker keeps one kafka-python consumer per client configuration (workers
are reused across micro-batches), assigns it the partition of the range and seeks to
its start: no consumer group is involved. Reading stops at the range's end offset;
offsets that hold no record (compaction, transaction markers) are skipped because the
consumer's position moves past them.
"""

from __future__ import annotations

import atexit
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from streaming.kafka.errors import DataLossError, FetchTimeoutError
from streaming.kafka.offsets import OffsetRange
from streaming.kafka.schema import ARROW_SCHEMA

_READ_SETTINGS = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "none",
    "fetch_max_wait_ms": 100,
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
}
_CONSUMERS: dict[str, KafkaConsumer] = {}


def _consumer(kwargs: Mapping[str, Any]) -> tuple[str, KafkaConsumer]:
    """The cached consumer of this process for ``kwargs`` (created on first use)."""
    key = json.dumps(sorted((k, repr(v)) for k, v in kwargs.items()))
    consumer = _CONSUMERS.get(key)
    if consumer is None:
        consumer = KafkaConsumer(**{**kwargs, **_READ_SETTINGS})
        _CONSUMERS[key] = consumer
    return key, consumer


def _drop(key: str) -> None:
    consumer = _CONSUMERS.pop(key, None)
    if consumer is not None:
        try:
            consumer.close()
        except Exception:  # noqa: BLE001 - closing a broken consumer must not mask the error
            pass


@atexit.register
def close_consumers() -> None:
    """Close every cached consumer of this process."""
    for key in list(_CONSUMERS):
        _drop(key)


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


def read_range(
    consumer_kwargs: Mapping[str, Any],
    rng: OffsetRange,
    timeout_s: float = 120.0,
    fail_on_data_loss: bool = True,
    batch_rows: int = 10_000,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets ``[start, end)``) as Arrow record batches.

    Parameters
    ----------
    consumer_kwargs : Mapping[str, Any]
        kafka-python consumer arguments (bootstrap servers, security).
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
        return
    key, consumer = _consumer(consumer_kwargs)
    kp = TopicPartition(rng.topic, rng.partition)
    try:
        consumer.assign([kp])
        consumer.seek(kp, rng.start)
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        offsets: list[int] = []
        stamps: list[int] = []
        position = rng.start
        progress_at = time.monotonic()
        while position < rng.end:
            try:
                polled = consumer.poll(timeout_ms=500, max_records=batch_rows).get(kp, ())
            except OffsetOutOfRangeError:
                first = consumer.beginning_offsets([kp])[kp]
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{rng.topic}-{rng.partition}: offsets [{position}, {min(first, rng.end)}) "
                        f"of range [{rng.start}, {rng.end}) are no longer in the log "
                        f"(log starts at {first}); set failOnDataLoss=false to skip them"
                    ) from None
                position = max(position, first)
                if position >= rng.end:
                    break
                consumer.seek(kp, position)
                continue
            for rec in polled:
                if rec.offset >= rng.end:
                    break
                keys.append(rec.key)
                values.append(rec.value)
                offsets.append(rec.offset)
                stamps.append(rec.timestamp)
            moved = consumer.position(kp)
            if moved is not None and moved > position:
                position = moved
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > timeout_s:
                raise FetchTimeoutError(
                    f"{rng.topic}-{rng.partition}: no progress at offset {position} for "
                    f"{timeout_s:.0f} s while reading [{rng.start}, {rng.end}); "
                    "the offsets may not exist (yet) or the broker is unreachable"
                )
            if len(offsets) >= batch_rows:
                yield to_batch(rng.topic, rng.partition, keys, values, offsets, stamps)
                keys, values, offsets, stamps = [], [], [], []
        if offsets:
            yield to_batch(rng.topic, rng.partition, keys, values, offsets, stamps)
        consumer.assign([])
    except BaseException:
        _drop(key)
        raise

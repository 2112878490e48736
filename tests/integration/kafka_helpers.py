"""Kafka helpers for integration tests: produce records, read a whole topic back.

Both work with assigned partitions and explicit offsets (no consumer group) and read
up to the end offset of each partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import NamedTuple

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.watermarks import Watermarks


class Record(NamedTuple):
    """One Kafka record as read back by :func:`consume_all`."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int

    @property
    def body(self) -> bytes:
        """The value of a record that must have one (a tombstone fails the test)."""
        assert self.value is not None, f"a record without value at {self.topic}/{self.partition}@{self.offset}"
        return self.value


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


def produce(
    config: KafkaClientConfig,
    topic: str,
    records: Iterable[bytes | str | tuple[bytes | str | None, bytes | str | None]],
    partition: int | None = None,
    linger_ms: int = 50,
) -> int:
    """Send ``records`` to ``topic`` and wait for every acknowledgement.

    Parameters
    ----------
    config : KafkaClientConfig
        The client configuration (kafka-python is the client here).
    topic : str
        Target topic.
    records : Iterable
        Values, or ``(key, value)`` pairs; ``str`` is UTF-8 encoded.
    partition : int, optional
        Partition for every record; the default partitioner otherwise (keyed records
        by key hash, unkeyed ones spread).
    linger_ms : int
        Producer linger: the default batches many records per request (multi-record
        batches, whose last record must be read as soon as the others).

    Returns
    -------
    int
        Number of records sent.
    """
    producer = KafkaProducer(
        **config.kafka_python("producer"), acks="all", linger_ms=linger_ms, retries=5
    )
    try:
        futures = []
        for item in records:
            key, value = item if isinstance(item, tuple) else (None, item)
            futures.append(
                producer.send(topic, value=_bytes(value), key=_bytes(key), partition=partition)
            )
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=60)
        return len(futures)
    finally:
        producer.close(timeout=10)


def consume_all(
    config: KafkaClientConfig,
    topic: str,
    timeout: float = 30.0,
    min_records: int = 0,
) -> list[Record]:
    """Read every record of ``topic`` from its first to its true last offset.

    Parameters
    ----------
    config : KafkaClientConfig
        The client configuration (kafka-python is the client here).
    topic : str
        Topic to read.
    timeout : float
        Seconds to wait for the records (and for ``min_records`` to be present).
    min_records : int
        Wait until the topic holds at least this many records (for outputs written
        asynchronously by a running query).

    Returns
    -------
    list[Record]
        Records sorted by partition and offset.

    Raises
    ------
    TimeoutError
        If the records cannot be read (or ``min_records`` are not there) in time.
    """
    kwargs = config.kafka_python("consumer")
    deadline = time.monotonic() + timeout
    watermarks = Watermarks(kwargs)
    try:
        while True:
            tps = watermarks.partitions([topic], refresh=True)
            begin = watermarks.earliest(tps)
            end = watermarks.latest(tps)
            total = sum(end[tp] - begin[tp] for tp in tps)
            if total >= min_records:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{topic}: {total} records after {timeout} s, expected >= {min_records}"
                )
            time.sleep(0.2)
    finally:
        watermarks.close()
    consumer = KafkaConsumer(
        **kwargs, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    out: list[Record] = []
    try:
        parts = {tp: TopicPartition(*tp) for tp in tps if end[tp] > begin[tp]}
        consumer.assign(list(parts.values()))
        for tp, kp in parts.items():
            consumer.seek(kp, begin[tp])
        pending = set(parts)
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: could not read {sorted(pending)} in {timeout} s")
            for kp, recs in consumer.poll(timeout_ms=200).items():
                tp = (kp.topic, kp.partition)
                out.extend(
                    Record(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)
                    for r in recs
                    if r.offset < end[tp]
                )
            for tp in list(pending):
                if consumer.position(parts[tp]) >= end[tp]:
                    pending.discard(tp)
    finally:
        consumer.close()
    out.sort(key=lambda r: (r.partition, r.offset))
    return out

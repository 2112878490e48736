"""Helpers of the service's unit tests: Kafka rows, a local broadcast, a batch context without Kafka.

Random subscriptions and events come from :mod:`tests.strategies`.
"""

from __future__ import annotations

import pickle

import orjson
import pyarrow as pa

from streaming.kafka.client_config import KafkaClientConfig

NO_KAFKA = KafkaClientConfig.create("unused.invalid:9092")
"""The client configuration of a batch context whose tests pass their own ``produce``."""


def kafka_batch(values: list[bytes | None], topic: str = "events", partition: int = 0, first_offset: int = 0,
                timestamp_us: int = 1_700_000_000_000_000) -> pa.RecordBatch:
    """Arrow batch with the Kafka source's columns."""
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(first_offset, first_offset + n), pa.int64()),
            pa.array([timestamp_us] * n, pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )


def dumps(obj) -> bytes:
    return orjson.dumps(obj)


class LocalBroadcast:
    """A stand-in for a pyspark ``Broadcast``: pickled once, loaded on first use into ``_value``."""

    made: list[LocalBroadcast] = []

    def __init__(self, value) -> None:
        self.data = pickle.dumps(value)
        self.destroyed = False
        LocalBroadcast.made.append(self)

    @property
    def value(self):
        assert not self.destroyed, "a destroyed broadcast was used"
        if not hasattr(self, "_value"):
            self._value = pickle.loads(self.data)
        return self._value

    def destroy(self) -> None:
        self.destroyed = True

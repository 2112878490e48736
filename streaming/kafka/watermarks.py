"""Driver-side view of a source's partitions and their earliest and latest offsets (no group)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from streaming.kafka.errors import KafkaConnectorError
from streaming.kafka.offsets import TP, OffsetMap

_SETTINGS = {"group_id": None, "enable_auto_commit": False}


class Watermarks:
    """Partitions, earliest and latest offsets of Kafka topics (no consumer group).

    Parameters
    ----------
    consumer_kwargs : Mapping[str, Any]
        kafka-python consumer arguments (bootstrap servers, security).
    discovery_interval_s : float
        Minimum time between two metadata refreshes looking for new partitions.
    """

    def __init__(
        self,
        consumer_kwargs: Mapping[str, Any],
        discovery_interval_s: float = 1.0,
    ) -> None:
        self._kwargs = {**consumer_kwargs, **_SETTINGS}
        self._discovery_interval_s = discovery_interval_s
        self._consumer: KafkaConsumer | None = None
        self._last_refresh = float("-inf")

    @property
    def consumer(self) -> KafkaConsumer:
        """The consumer asking for offsets, created on first use."""
        if self._consumer is None:
            self._consumer = KafkaConsumer(**self._kwargs)
        return self._consumer

    def close(self) -> None:
        """Close the consumer (the object can be used again afterwards)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self, topics: Iterable[str], refresh: bool = False) -> list[TP]:
        """Partitions of ``topics`` that exist, sorted; missing topics have none.

        Metadata is refreshed when ``refresh`` is set or the discovery interval has passed,
        so that partitions and topics created later are found.
        """
        now = time.monotonic()
        if refresh or now - self._last_refresh >= self._discovery_interval_s:
            self.consumer.topics()  # forces a metadata request for every topic
            self._last_refresh = now
        found: list[TP] = []
        for topic in topics:
            found.extend((topic, p) for p in sorted(self.consumer.partitions_for_topic(topic) or ()))
        return found

    def earliest(self, tps: Iterable[TP]) -> OffsetMap:
        """First offset still in the log of each partition."""
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.beginning_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}

    def latest(self, tps: Iterable[TP]) -> OffsetMap:
        """End offset (offset of the next record to be written) of each partition: under
        ``read_committed`` the last stable offset, as Kafka's ListOffsets answers."""
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}

    def __getstate__(self) -> dict[str, Any]:
        raise KafkaConnectorError("Watermarks holds a live consumer and cannot be pickled")

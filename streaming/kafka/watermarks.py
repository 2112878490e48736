"""Driver-side view of a source's partitions and their true end offsets.

The embedded Tansu broker answers ListOffsets (``end_offsets``) with the base offset of
the last record batch plus one, which hides the tail of a multi-record producer batch
until another batch arrives. The high watermark carried by a *fetch* response is right.
:class:`Watermarks` therefore fetches from ``reported_end - 1`` whenever the reported
end of a partition moves, and takes the fetch's high watermark as the true end. On a
broker whose ``end_offsets`` is right (Apache Kafka) the probe confirms it.

A reported end that has not moved since the last probe means no new batch has
arrived (every produce request appends a new batch with a new base offset), so the
learned true end is reused and an idle source costs one ListOffsets request per call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from streaming.kafka.errors import KafkaConnectorError
from streaming.kafka.offsets import TP, OffsetMap

log = logging.getLogger(__name__)

_PROBE_SETTINGS = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 100,
    "max_partition_fetch_bytes": 64 * 1024,
}


class Watermarks:
    """Partitions, earliest and true latest offsets of Kafka topics (no consumer group).

    Parameters
    ----------
    consumer_kwargs : Mapping[str, Any]
        kafka-python consumer arguments (bootstrap servers, security).
    probe_timeout_s : float
        How long a tail probe may wait for its fetch responses.
    discovery_interval_s : float
        Minimum time between two metadata refreshes looking for new partitions.
    """

    def __init__(
        self,
        consumer_kwargs: Mapping[str, Any],
        probe_timeout_s: float = 10.0,
        discovery_interval_s: float = 1.0,
    ) -> None:
        self._kwargs = {**consumer_kwargs, **_PROBE_SETTINGS}
        self._read_committed = consumer_kwargs.get("isolation_level") == "read_committed"
        self._probe_timeout_s = probe_timeout_s
        self._discovery_interval_s = discovery_interval_s
        self._consumer: KafkaConsumer | None = None
        self._last_refresh = float("-inf")
        self._reported: dict[TP, int] = {}
        self._true: dict[TP, int] = {}

    @property
    def consumer(self) -> KafkaConsumer:
        """The probe's consumer, created on first use."""
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
        topics = list(topics)
        for topic in topics:
            found.extend((topic, p) for p in sorted(self.consumer.partitions_for_topic(topic)))
        # A partition gone from the metadata (topic deleted) forgets its learned end, so
        # that a recreated topic is probed afresh.
        present = set(found)
        for tp in [tp for tp in self._reported if tp[0] in topics and tp not in present]:
            del self._reported[tp], self._true[tp]
        return found

    def earliest(self, tps: Iterable[TP]) -> OffsetMap:
        """First offset still in the log of each partition."""
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.beginning_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}

    def latest(self, tps: Iterable[TP]) -> OffsetMap:
        """True end offset (offset of the next record to be written) of each partition."""
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
        reported = {(tp.topic, tp.partition): off for tp, off in got.items()}
        moved = [tp for tp in tps if reported[tp] > 0 and self._reported.get(tp) != reported[tp]]
        if moved:
            learned = self._probe({tp: reported[tp] for tp in moved})
            for tp in moved:
                self._reported[tp] = reported[tp]
                self._true[tp] = max(reported[tp], learned.get(tp, reported[tp]))
        return {tp: (self._true[tp] if reported[tp] > 0 else 0) for tp in tps}

    def _probe(self, reported: Mapping[TP, int]) -> OffsetMap:
        """Fetch from ``reported - 1`` of each partition; return fetch high watermarks."""
        consumer = self.consumer
        parts = {tp: TopicPartition(*tp) for tp in reported}
        consumer.assign(list(parts.values()))
        for tp, kp in parts.items():
            consumer.seek(kp, reported[tp] - 1)
        pending = set(reported)
        learned: OffsetMap = {}
        deadline = time.monotonic() + self._probe_timeout_s
        while pending and time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=100)
            for tp in list(pending):
                kp = parts[tp]
                last = records.get(kp)
                position = consumer.position(kp)
                if last or (position is not None and position >= reported[tp]):
                    high = consumer.highwater(kp)
                    candidates = [reported[tp], position or 0]
                    if last:
                        candidates.append(last[-1].offset + 1)
                    if high is not None and not self._read_committed:
                        # Under read_committed the end is the last stable offset, which
                        # ListOffsets reports; the high watermark may lie past it.
                        candidates.append(high)
                    learned[tp] = max(candidates)
                    pending.discard(tp)
        if pending:
            log.warning(
                "tail probe got no fetch response in %.1f s for %s; using ListOffsets ends",
                self._probe_timeout_s,
                sorted(pending),
            )
        consumer.assign([])
        return learned

    def __getstate__(self) -> dict[str, Any]:
        raise KafkaConnectorError("Watermarks holds a live consumer and cannot be pickled")

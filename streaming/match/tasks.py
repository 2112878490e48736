"""The match tasks of a batch: what each is given, which events and shards it takes, what it returns.

* :class:`BatchContext`: everything a task needs for its batch (shipped with the task).
* :func:`plan_tasks` (and :func:`shard_groups`): the event ranges and subscription shards
  of each task on ``local`` masters and clusters without shards; :func:`pinned_tasks` the
  tasks of a job whose shard groups are pinned to executors (:mod:`streaming.placement`).
* :class:`TaskResult`: the task's metrics as named fields and its side outputs, sent back
  to the driver as one row of :data:`TASK_SCHEMA`; :meth:`TaskMetrics.total` sums a
  batch's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from streaming.config import LimitsSettings, Settings
from streaming.executor_cache import IndexSpec
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.offsets import OffsetRange
from streaming.notes_kernel import Strings
from streaming.placement import event_bins
from streaming.records import DEFAULT_LIMITS
from streaming.tenants import Tenants
from streaming.validity import ValidEvent, decode, encode

OUT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string())])
"""The records the job sends (notifications and error records), each to its own topic."""


def out_batch(keys: Sequence[bytes | None], values: Sequence[bytes], topics: Sequence[str]) -> pa.RecordBatch:
    """An Arrow batch of :data:`OUT_SCHEMA` records."""
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(topics, pa.string())],
        schema=OUT_SCHEMA)


_MAX_BINARY = 2**31 - 1
"""Bytes of values one Arrow ``binary`` array holds (its offsets are 32-bit)."""


def notes_batches(values: Strings, subs: np.ndarray, keys: Sequence[bytes], topics: Sequence[str]) -> list[pa.RecordBatch]:
    """:data:`OUT_SCHEMA` batches of records whose values are in one buffer (``values``, as
    :func:`~streaming.notifications.build_records` gives them), record ``r``'s key and topic
    ``keys[subs[r]]`` and ``topics[subs[r]]``; the values are not copied. One batch per 2 GiB
    of values."""
    bounds, out = values.bounds, []
    key_col, topic_col = pa.array(keys, pa.binary()), pa.array(topics, pa.string())
    lo, n = 0, len(subs)
    while lo < n:
        hi = max(lo + 1, int(np.searchsorted(bounds, bounds[lo] + _MAX_BINARY, side="right")) - 1)
        offsets = (bounds[lo:hi + 1] - bounds[lo]).astype(np.int32)
        value_col = pa.Array.from_buffers(pa.binary(), hi - lo, [
            None, pa.py_buffer(offsets), pa.py_buffer(values.data[bounds[lo]:bounds[hi]])])
        take = pa.array(subs[lo:hi])
        out.append(pa.RecordBatch.from_arrays([key_col.take(take), value_col, topic_col.take(take)], schema=OUT_SCHEMA))
        lo = hi
    return out


class BatchContext(NamedTuple):
    """Everything an executor needs for a batch (shipped with the task)."""

    batch_id: int
    now: float
    spec: IndexSpec
    notifications_topic: str
    errors_topic: str
    payload: str
    event_id_field: str
    valid_until_field: str
    max_validity_s: float
    kafka: KafkaClientConfig
    limits: LimitsSettings = DEFAULT_LIMITS
    tenants: Tenants | None = None

    @classmethod
    def of(cls, settings: Settings, batch_id: int, now: float, spec: IndexSpec,
           kafka: KafkaClientConfig) -> BatchContext:
        return cls(batch_id, now, spec, settings.kafka.notifications_topic, settings.kafka.errors_topic,
                   settings.notifications.payload, settings.match.event_id_field,
                   settings.match.valid_until_field, settings.match.max_validity_s, kafka,
                   settings.limits, Tenants.of(settings))


# -- what a task returns ---------------------------------------------------------------------
@dataclass
class TaskMetrics:
    """What one task (or, summed, a batch's tasks) did; times in nanoseconds of the task's clock."""

    events: int = 0
    """Event records matched (shard 0's tasks only: the events' own counts)."""
    errors: int = 0
    """Event records refused (one error record each)."""
    matches: int = 0
    """(subscription, event) matches over every shard."""
    match_ns: int = 0
    """Reading, encoding, matching and building records, index time excluded."""
    index_ns: int = 0
    """Obtaining the shards' indexes (:func:`~streaming.executor_cache.index_for`)."""
    valid: int = 0
    """Events kept for later subscriptions (:mod:`streaming.validity`)."""
    index_bytes: int = 0
    """Memory of the task's indexes (summed over its shards; the largest task's in a total)."""
    records: int = 0
    """Records sent (notifications and error records)."""
    read_ns: int = 0
    """Waiting for the event records (the Kafka read)."""
    task_ns: int = 0
    """The whole task."""

    @classmethod
    def total(cls, metrics: Iterable[TaskMetrics]) -> TaskMetrics:
        """The sums of ``metrics``, except index bytes: the largest."""
        out = cls()
        for m in metrics:
            for name in METRICS:
                if name != "index_bytes":
                    setattr(out, name, getattr(out, name) + getattr(m, name))
            out.index_bytes = max(out.index_bytes, m.index_bytes)
        return out


METRICS = tuple(f.name for f in fields(TaskMetrics))
"""The names of the metrics, in the order of :data:`TASK_SCHEMA`."""


@dataclass
class TaskResult:
    """One task's metrics and side outputs: its still-valid events, its index (what the matcher
    says of itself, :meth:`~matchers.base.Matcher.describe`; empty when the task built none),
    the executor it ran on (:func:`~streaming.placement.executor_name`) and the shards whose
    index it obtained."""

    metrics: TaskMetrics = field(default_factory=TaskMetrics)
    valid_events: list[ValidEvent] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    executor: str = ""
    shards: list[int] = field(default_factory=list)

    def to_batch(self) -> pa.RecordBatch:
        """The result as the one row of :data:`TASK_SCHEMA` a task yields."""
        m = self.metrics
        return pa.RecordBatch.from_arrays(
            [*(pa.array([getattr(m, name)], pa.int64()) for name in METRICS),
             pa.array([encode(self.valid_events)], pa.binary()),
             pa.array([json.dumps(self.index) if self.index else None], pa.string()),
             pa.array([self.executor], pa.string()),
             pa.array([json.dumps(sorted(self.shards))], pa.string())],
            schema=TASK_SCHEMA)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TaskResult:
        """The result from its row (a dict of :data:`TASK_SCHEMA`, as collected by the driver)."""
        return cls(TaskMetrics(**{name: row[name] for name in METRICS}), decode(row["valid_events"]),
                   json.loads(row["index"]) if row["index"] else {}, row["executor"] or "",
                   json.loads(row["shards"] or "[]"))


# The task's result row: its metrics, its still-valid events (validity.encode), its index
# (Matcher.describe as JSON; null when the task built none), the executor it ran on and the
# shards it matched with (JSON list; empty without events).
TASK_SCHEMA = pa.schema([*((name, pa.int64()) for name in METRICS), ("valid_events", pa.binary()),
                         ("index", pa.string()), ("executor", pa.string()), ("shards", pa.string())])


# -- planning --------------------------------------------------------------------------------
TASK_EVENTS = 10_000
"""Events below which a batch's event ranges share a task: a task costs 15 to 26 ms of CPU
before its first event (PySpark's worker protocol), the work of about 1,000 events."""

Task = tuple[tuple[OffsetRange, ...], tuple[int, ...]]
"""One match task of a batch: its event ranges and the subscription shards it matches them against."""


def shard_groups(shards: int, tasks: int, slots: int) -> list[tuple[int, ...]]:
    """The groups of shards that ``tasks`` tasks of event ranges each match (``slots`` task slots).

    All of them in one task, which reads and parses each event once for every shard, unless
    the tasks of event ranges alone leave slots idle: then in as many groups as fill them
    (shard 0, which reports the events' own errors, counts and valid events, in the first).
    """
    groups = max(1, min(shards, -(-slots // max(1, tasks))))
    return [tuple(range(g, shards, groups)) for g in range(groups)]


def plan_tasks(ranges: Sequence[OffsetRange], shards: int, slots: int, task_events: int = TASK_EVENTS) -> list[Task]:
    """The match tasks of a batch's event ``ranges``: as many as have ``task_events`` events each
    (at least one, at most one per range; ranges largest first onto the task with the fewest),
    times the :func:`shard_groups` filling at most as many slots as that many events make tasks."""
    if not ranges:
        return []
    full = sum(r.end - r.start for r in ranges) // task_events
    bins = event_bins(ranges, max(1, full))
    return [(b, group) for b in bins for group in shard_groups(shards, len(bins), max(1, min(slots, full)))]


def pinned_tasks(bins: Sequence[tuple[OffsetRange, ...]], groups: Sequence[tuple[int, ...]]) -> list[Task]:
    """The tasks of a pinned match job, in the order of its partitions (the anchors' ``cartesian``
    with the bins: group-major), so that task ``g * len(bins) + b`` matches bin ``b`` against group ``g``."""
    return [(b, group) for group in groups for b in bins]

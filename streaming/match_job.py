"""The "match" query: subscription changes, then events matched on the executors.

The foreachBatch function (:meth:`MatchJob.process`) only hands off to pure functions:

1. :func:`apply_changes` (driver): parse the batch's subscription records, append the
   accepted ones plus the deletes of expired subscriptions to the registry as the next
   version (idempotent per batch id), and reject bad ones as error records;
2. :func:`retro_notifications` (driver): match new or changed subscriptions against the
   still-valid events of earlier batches (:mod:`streaming.validity`);
3. :func:`match_partition` (executors, an RDD job of :func:`match_ranges`): bring the worker's cached
   index to the batch's version (:mod:`streaming.executor_cache`), parse, flatten, encode
   and match the events, and produce the notification and error records to Kafka itself
   (one Python worker per task does the matching and the writing; only a row of task
   metrics and the task's still-valid events go back to the driver); with subscription
   shards (``match.shards``) each task matches its events against several shards, read
   and parsed once; small batches run one task (:func:`plan_tasks`). On a cluster the
   shards' groups are pinned to executors instead: the job is the persisted anchors'
   ``cartesian`` with the batch's bins of event ranges (:mod:`streaming.placement`,
   :func:`match_pinned`), so a group's tasks run where its indexes are.

Spark's offset log gives each micro-batch's offset ranges (:func:`logged_ranges`, read
through :mod:`streaming.storage` from the checkpoint location, any Hadoop-compatible
one): the driver reads the subscription records of its ranges itself, and each match
task reads its event range from Kafka itself (:func:`match_ranges`), so a micro-batch
runs one Spark job (none without events) and no record passes through the JVM. The first
batch of a new checkpoint, whose start offsets Spark does not log, takes the records of
the micro-batch DataFrame instead. The driver never reads events.

Nothing an executor needs lives on the driver's disk: the registry reaches the tasks as a
Spark broadcast of a snapshot plus a broadcast of each recent delta
(:class:`RegistryBroadcast`), and the valid events come back in the task's result.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import pyarrow as pa

from matchers.base import create
from matchers.collector import long_lived
from matchers.events import FlatEvent, ScanLimits, encode_json
from matchers.expr import Subscription
from streaming import notifications
from streaming.config import LimitsSettings, Settings
from streaming.executor_cache import IndexSpec, index_for, shard_of
from streaming.kafka import offsets
from streaming.kafka.admin import partition_counts
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetMap, OffsetRange
from streaming.kafka.sink import produce_batches
from streaming.metrics import BatchMetrics, StatusFile
from streaming.placement import ShardAnchors, event_bins, executor_name, pinned_bins
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    EVENT,
    SCALARS,
    UPSERT,
    Change,
    ErrorRecord,
    Position,
    SubscriptionParser,
    default_parser,
    error,
    flat_event,
    parse_changes,
    read_event,
)
from streaming.registry import Delta, Registry, RegistryError, Snapshot, load_state
from streaming.storage import Directory, join
from streaming.tenants import Admission, Tenants
from streaming.validity import ValidEvent, ValidityStore, decode, encode, validity_end

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.patterns.census import CurrentWarnings

log = logging.getLogger("streaming.match")

OUT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string())])

# The row of metrics each task returns.
METRICS = ("events", "errors", "matches", "match_ns", "index_ns", "valid", "index_bytes", "records", "read_ns", "task_ns")
(M_EVENTS, M_ERRORS, M_MATCHES, M_MATCH_NS, M_INDEX_NS, M_VALID, M_INDEX_BYTES, M_RECORDS, M_READ_NS,
 M_TASK_NS) = range(len(METRICS))
N_METRICS = len(METRICS)
# The task's result row: its metrics, its still-valid events (validity.encode), its index
# (Matcher.describe as JSON; null when the task built none), the executor it ran on
# (placement.executor_name) and the shards it matched with (JSON list; empty without events).
TASK_SCHEMA = pa.schema([*((name, pa.int64()) for name in METRICS), ("valid_events", pa.binary()),
                         ("index", pa.string()), ("executor", pa.string()), ("shards", pa.string())])
TASK_DDL = (", ".join(f"{name} long" for name in METRICS)
            + ", valid_events binary, index string, executor string, shards string")


def sum_metrics(rows: Iterable[Sequence[int]]) -> list[int]:
    """Element-wise sums of task metric rows, except index bytes: the largest."""
    out = [0] * N_METRICS
    for row in rows:
        out = [max(a, b) if i == M_INDEX_BYTES else a + b for i, (a, b) in enumerate(zip(out, row, strict=True))]
    return out


class ChangeOutcome(NamedTuple):
    """What a batch's subscription records did to the registry."""

    delta: Delta | None
    errors: list[ErrorRecord]
    now: float
    replay: bool
    accepted: int
    expired: int


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


# -- driver side ---------------------------------------------------------------------------
def logged_ranges(query_checkpoint: str, batch_id: int) -> list[OffsetRange] | None:
    """The offset ranges of micro-batch ``batch_id`` (every topic), from the query's offset log.

    Spark writes ``offsets/<batch>`` under the query's checkpoint location (a URI or path;
    a version line, a metadata line, then the end offsets of each source as JSON) before it
    runs the batch, which starts where the previous batch ended. ``None`` when the log does
    not say: the first batch of a checkpoint (its start is the source's initial offset,
    which is not logged).
    """
    log_dir = Directory(join(query_checkpoint, "offsets"))

    def ends(batch: int) -> OffsetMap | None:
        if batch < 0:
            return None
        try:
            text = log_dir.read(str(batch)).decode("utf-8")
        except FileNotFoundError:
            return None
        found: OffsetMap = {}
        for line in text.splitlines()[2:]:
            if line.startswith("{"):
                found.update(offsets.from_json(json.loads(line)))
        return found

    start, end = ends(batch_id - 1), ends(batch_id)
    return None if start is None or end is None else offsets.ranges(start, end)


def read_records(kafka: KafkaClientConfig, ranges: Iterable[OffsetRange]) -> list[tuple[bytes | None, bytes | None, str, int, int]]:
    """``(key, value, topic, partition, offset)`` of the records in ``ranges``."""
    rows: list[tuple[bytes | None, bytes | None, str, int, int]] = []
    for rng in ranges:
        for rb in read_range(kafka, rng):
            cols = [rb.column(name).to_pylist() for name in ("key", "value", "topic", "partition", "offset")]
            rows.extend(zip(*cols, strict=True))
    return rows


def apply_changes(
    registry: Registry,
    batch_id: int,
    rows: Iterable[tuple[bytes | None, bytes | None, str, int, int]],
    parse: SubscriptionParser,
    max_terms: int,
    now: float,
    limits: LimitsSettings = DEFAULT_LIMITS,
    admission: Admission | None = None,
) -> ChangeOutcome:
    """Validate a batch's subscription records and record them as the next registry version.

    With tenants, ``admission`` gives the changes their tenant's ids and refuses those past
    a quota (:mod:`streaming.tenants`). A replayed batch (its id at or below the last one recorded) gets the version and
    the time it recorded the first time, so the same subscriptions match its events.
    Subscriptions whose expiry time is at or before ``now`` are deleted in the same version.
    """
    ordered = sorted(rows, key=lambda r: (r[2], r[3], r[4]))
    changes, errors = parse_changes(ordered, parse, max_terms, limits, targets=admission is not None)
    if admission is not None:
        changes, refused = admission.admit(registry, batch_id, changes, ordered)
        errors += refused
    if registry.is_replay(batch_id):
        delta = registry.delta_of_batch(batch_id)
        return ChangeOutcome(delta, errors, delta.time if delta else now, True, len(changes), 0)
    final: dict[str, Change] = {}
    for c in changes:
        final.pop(c.id, None)
        final[c.id] = c
    expired = [Change(DELETE, i, None) for i in registry.expired(now) if i not in final]
    expired += [Change(DELETE, c.id, None) for c in final.values()
                if c.op == UPSERT and c.subscription.expires is not None and c.subscription.expires <= now]  # type: ignore[union-attr]  # an upsert carries its subscription
    if admission is not None:
        admission.account(registry, [*changes, *expired])
    delta = registry.append(batch_id, [*changes, *expired], now)
    return ChangeOutcome(delta, errors, now, False, len(changes), len(expired))


SHIPPED_CHANGES = 20_000
"""Most changes sent along with a batch's tasks; workers further behind rebuild from the broadcast snapshot."""


def shipped_deltas(registry: Registry, version: int, max_catchup: int) -> tuple[Delta, ...]:
    """The newest deltas up to ``version`` (at most ``max_catchup`` of them and :data:`SHIPPED_CHANGES` changes)."""
    recent = registry.deltas_since(max(0, version - max_catchup)) or []
    out: list[Delta] = []
    total = 0
    for delta in reversed([d for d in recent if d.version <= version]):
        total += len(delta.changes)
        if total > SHIPPED_CHANGES:
            break
        out.append(delta)
    return tuple(reversed(out))


class RegistryBroadcast:
    """The registry state the executors build their indexes from (:meth:`spec`).

    One Spark broadcast of the registry's :class:`Snapshot` per shard at some version (the *base*,
    a tuple: a worker building a shard's index loads that shard's subscriptions only),
    made when a batch needs it and reused by later batches while the deltas shipped with
    their tasks (:func:`shipped_deltas`) still reach back to it; a new one replaces it when
    they no longer do (or for a replayed batch older than the base), and the old one is
    destroyed. Each shipped delta is a broadcast of its own too, made once and destroyed
    when no batch ships it any more: a task's function carries only their handles, and a
    Python worker loads each delta once (inline, the deltas were pickled with every batch
    and unpickled by every task: 0.5 s of driver CPU per batch for 20,000 changes).

    Parameters
    ----------
    broadcast : makes a broadcast of a snapshot or a delta (``SparkContext.broadcast``); the
        result has ``.value`` and ``.destroy()``.
    """

    def __init__(self, broadcast: Callable[[Snapshot | Delta], Any]):
        self.broadcast = broadcast
        self.base: tuple[Any, ...] | None = None
        self.base_version = -1
        self.made = 0
        self.deltas: dict[int, Any] = {}
        """The broadcasts of the deltas shipped with the last batch, by version."""

    def spec(self, registry: Registry, matcher: str, version: int, max_catchup: int, shards: int = 1) -> IndexSpec:
        """What the tasks of a batch at registry ``version`` need to reach that version (shard 0 of ``shards``)."""
        shipped = shipped_deltas(registry, version, max_catchup)
        oldest = shipped[0].version - 1 if shipped else version  # the oldest base the shipped deltas complete
        if self.base is None or not oldest <= self.base_version <= version or len(self.base) != shards:
            if version == registry.version:
                state = Snapshot(version, registry.batch_id, 0.0, registry.subscriptions)
            else:  # a replayed batch: its version from the stored snapshot and deltas
                state = load_state(registry.directory, version)
            self._destroy_base()
            self.base, self.base_version = tuple(self.broadcast(part) for part in split_snapshot(state, shards)), version
            self.made += 1
            log.info("registry broadcast at version %d (%d subscriptions in %d shards)", version,
                     len(state.subscriptions), shards)
        wanted = {d.version for d in shipped}
        for v in [v for v in self.deltas if v not in wanted]:
            self.deltas.pop(v).destroy()
        for d in shipped:
            if d.version not in self.deltas:
                self.deltas[d.version] = self.broadcast(d)
        return IndexSpec(registry.directory.uri, matcher, version, tuple(self.deltas[d.version] for d in shipped),
                         max_catchup, self.base, 0, shards)

    def _destroy_base(self) -> None:
        """Destroy the snapshot's broadcasts (executors and driver drop their copies)."""
        for part in self.base or ():
            part.destroy()
        self.base, self.base_version = None, -1


def split_snapshot(state: Snapshot, shards: int) -> list[Snapshot]:
    """``state`` as one snapshot per shard, each of that shard's subscriptions (:func:`shard_of`)."""
    if shards == 1:
        return [state]
    parts: list[dict[str, Subscription]] = [{} for _ in range(shards)]
    for sid, sub in state.subscriptions.items():
        parts[shard_of(sid, shards)][sid] = sub
    return [state._replace(subscriptions=part) for part in parts]


def new_subscriptions(delta: Delta | None) -> list[Subscription]:
    """Subscriptions a delta adds or changes (and does not delete again)."""
    if delta is None:
        return []
    last: dict[str, Change] = {}
    for c in delta.changes:
        last.pop(c.id, None)
        last[c.id] = c
    return [c.subscription for c in last.values() if c.op == UPSERT]  # type: ignore[misc]  # an upsert carries its subscription


def retro_notifications(
    matcher_name: str,
    subscriptions: Sequence[Subscription],
    events: Sequence[ValidEvent],
    batch_id: int,
    payload: str,
    message_bytes: int = DEFAULT_LIMITS.message_bytes,
    tenants: Tenants | None = None,
    params: tuple[tuple[str, Any], ...] = (),
) -> tuple[list[tuple[str, bytes]], list[ErrorRecord]]:
    """Notifications ``(subscription id, value)`` of new subscriptions for still-valid events
    (matched by a new ``matcher_name`` index with ``params``).

    With ``tenants`` the id is the service's (:meth:`Tenants.route` gives the topic) and
    the value names the tenant's own id.

    A notification past ``message_bytes`` goes in the id-only form with a note, as in
    :func:`match_partition`; an event whose id alone is too large gets one error record.
    """
    if not subscriptions or not events:
        return [], []
    matcher = create(matcher_name, **dict(params))
    matcher.add(subscriptions)
    flat = [flat_event(orjson.loads(e.raw)) for e in events]
    result = matcher.match(matcher.encode(flat))
    now_ms = int(time.time() * 1000)
    room = message_bytes - notifications.RECORD_OVERHEAD
    out: list[tuple[str, bytes]] = []
    errors: list[ErrorRecord] = []
    for i, e in enumerate(events):
        lo, hi = result.offsets[i], result.offsets[i + 1]
        if lo == hi:
            continue
        notes = notifications.EventNotes(e.topic, e.partition, e.offset, e.event_id,
                                         e.raw if payload == "event" else None, e.timestamp_ms, now_ms, batch_id,
                                         retro=True)
        for key in result.keys[lo:hi].tolist():
            sub_id = matcher.id_of(key)
            public = sub_id if tenants is None else tenants.route(sub_id)[1]
            value = notes.encode(public)
            size = len(sub_id.encode("utf-8")) + len(value)
            if size > room:
                notes = _id_only(notes, size)
                value = notes.encode(public)
                if len(sub_id.encode("utf-8")) + len(value) > room:
                    errors.append(error(EVENT, e.raw, Position(e.topic, e.partition, e.offset),
                                        f"its retro notification takes {size} bytes even without the event "
                                        "(its id is that large), past limits.message_bytes"))
                    break
            out.append((sub_id, value))
    return out, errors


# -- executor side -------------------------------------------------------------------------
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


def match_pinned(
    pairs: Iterable[tuple[tuple[int, str], int]],
    ctx: BatchContext,
    todo: Sequence[Task],
    n_bins: int,
    produce: Callable[[Iterator[pa.RecordBatch]], int] | None = None,
) -> Iterator[dict[str, Any]]:
    """:func:`match_ranges` over a partition of the anchors' ``cartesian`` with the bins: each
    ``((group, anchor's executor), bin)`` pair names task ``group * n_bins + bin`` of ``todo``
    (:func:`pinned_tasks`)."""
    yield from match_ranges((g * n_bins + b for (g, _), b in pairs), ctx, todo, produce)


def match_ranges(
    numbers: Iterable[int],
    ctx: BatchContext,
    todo: Sequence[Task],
    produce: Callable[[Iterator[pa.RecordBatch]], int] | None = None,
) -> Iterator[dict[str, Any]]:
    """:func:`match_partition` over the records of this task's offset ranges, read by this task.

    ``todo`` holds the batch's tasks (:func:`plan_tasks`); ``numbers`` (the partition of a
    ``SparkContext.parallelize(range(len(todo)))``) name this task's. Yields the result row
    of each as a dict of :data:`TASK_SCHEMA`.
    """
    for i in numbers:
        ranges, shards = todo[i]
        records = (rb for rng in ranges for rb in read_range(ctx.kafka, rng))
        for rb in match_partition(records, ctx, produce, shards):
            yield from rb.to_pylist()


def match_all_shards(
    batches: Iterator[pa.RecordBatch],
    ctx: BatchContext,
    produce: Callable[[Iterator[pa.RecordBatch]], int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`match_partition` against every shard over one partition of event records (the first batch's path)."""
    yield from match_partition(batches, ctx, produce, tuple(range(ctx.spec.shards)))


def match_partition(
    batches: Iterator[pa.RecordBatch],
    ctx: BatchContext,
    produce: Callable[[Iterator[pa.RecordBatch]], int] | None = None,
    shards: Sequence[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Match one partition's event records, send the results, and yield the task's result row.

    Parameters
    ----------
    batches : Arrow batches with the Kafka source columns (``value, topic, partition,
        offset, timestamp``) of event records.
    ctx : the batch's context.
    produce : sends Arrow batches of ``key, value, topic`` records and returns how many it
        sent (by default to Kafka with ``ctx.kafka``, waiting for every acknowledgement).
    shards : the subscription shards to match against (default ``ctx.spec.shard``). Each
        event is read and parsed once, then encoded and matched per shard. Only with shard 0
        among them does the task report what belongs to the events rather than the
        subscriptions (error records, event counts, valid events); otherwise it sends
        notifications only.

    Yields
    ------
    One row of :data:`TASK_SCHEMA`: the task's metrics and its still-valid events, which
    the driver stores (:class:`ValidityStore`).
    """
    t0 = time.perf_counter_ns()
    if produce is None:
        produce = partial(produce_batches, ctx.kafka, None)
    counts = [0] * N_METRICS
    valid: list[ValidEvent] = []
    shards = (ctx.spec.shard,) if shards is None else tuple(shards)
    index: dict[str, Any] = {}
    used: list[int] = []
    counts[M_RECORDS] = produce(_records(_timed(batches, counts), ctx, shards, counts, valid, index, used))
    counts[M_VALID] = len(valid)
    counts[M_TASK_NS] = time.perf_counter_ns() - t0
    yield pa.RecordBatch.from_arrays([*(pa.array([c], pa.int64()) for c in counts),
                                      pa.array([encode(valid)], pa.binary()),
                                      pa.array([json.dumps(index) if index else None], pa.string()),
                                      pa.array([executor_name()], pa.string()),
                                      pa.array([json.dumps(sorted(used))], pa.string())],
                                     schema=TASK_SCHEMA)


def _timed(batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
    """``batches``, adding the time spent waiting for each to ``counts[M_READ_NS]``."""
    while True:
        t0 = time.perf_counter_ns()
        rb = next(batches, None)
        counts[M_READ_NS] += time.perf_counter_ns() - t0
        if rb is None:
            return
        yield rb


class Prepared(NamedTuple):
    """An Arrow batch of event records as every shard's matching needs it (read once).

    Each shard scans the bytes against its own dictionary (:func:`_read_batch`); the records
    the scan does not take are read once for all shards, into ``reads`` (row -> the parsed
    object, its flat form and what the reading found wrong; ``None`` objects are refused).
    """

    values: list[bytes | None]
    topics: list[str]
    parts: list[int]
    offsets: list[int]
    stamps: list[int | None]
    reads: dict[int, tuple[dict | None, FlatEvent | None, list[tuple[str, int, str]]]]


def _prepare(rb: pa.RecordBatch) -> Prepared:
    """The columns of a batch of event records, as Python lists."""
    return Prepared(rb.column("value").to_pylist(), rb.column("topic").to_pylist(),
                    rb.column("partition").to_pylist(), rb.column("offset").to_pylist(),
                    rb.column("timestamp").cast(pa.int64()).to_pylist(), {})


def _records(
    batches: Iterator[pa.RecordBatch], ctx: BatchContext, shards: tuple[int, ...], counts: list[int],
    valid: list[ValidEvent], index: dict[str, Any], used: list[int],
) -> Iterator[pa.RecordBatch]:
    """Notification and error records of the event batches against ``shards``; fills ``counts``,
    ``valid``, ``index`` (what the matcher says of itself, :meth:`~matchers.base.Matcher.describe`)
    and ``used`` (the shards whose index it obtained).

    Each batch is prepared once (:func:`_prepare`), then read, matched and notified per
    shard (:func:`_shard_records`). A record that cannot be handled (refused by
    :func:`~streaming.records.read_event`, not encodable for the matcher, no notification
    possible) becomes one error record, with shard 0 only.
    """
    matchers: dict[int, Any] = {}
    for rb in batches:
        if rb.num_rows == 0:
            continue
        t1 = time.perf_counter_ns()
        prepared = _prepare(rb)
        for shard in shards:
            matcher = matchers.get(shard)
            if matcher is None:  # a partition without rows never builds an index
                t2 = time.perf_counter_ns()
                matcher = matchers[shard] = index_for(replace(ctx.spec, shard=shard)).matcher
                t1 += time.perf_counter_ns() - t2  # index time is not match time
                counts[M_INDEX_NS] += time.perf_counter_ns() - t2
                counts[M_INDEX_BYTES] += matcher.memory_bytes()
                index.update(matcher.describe())
                used.append(shard)
            out = _shard_records(prepared, matcher, ctx, counts, valid if shard == 0 else None)
            if out is not None:
                yield out
        counts[M_MATCH_NS] += time.perf_counter_ns() - t1


def _shard_records(p: Prepared, matcher: Any, ctx: BatchContext, counts: list[int],
                   valid: list[ValidEvent] | None) -> pa.RecordBatch | None:
    """Records of one prepared batch matched by one shard's ``matcher``: its notifications,
    and with ``valid`` (shard 0) the batch's error records, event counts and valid events."""
    report = valid is not None
    with_event = ctx.payload == notifications.PAYLOAD_EVENT
    until_field, limits = ctx.valid_until_field, ctx.limits
    notes_topic, tenants = ctx.notifications_topic, ctx.tenants
    values, topics, parts, offsets, stamps = p.values, p.topics, p.parts, p.offsets, p.stamps
    out_keys: list[bytes | None] = []
    out_values: list[bytes] = []
    out_topics: list[str] = []
    rejected: list[tuple[str, int, str]] = []  # (stage, row, reason)
    batch, kept = _read_batch(matcher, p, ctx, rejected)
    n_events = len(kept)
    if report:
        counts[M_ERRORS] += len(values) - n_events
    else:
        rejected.clear()  # shard 0 reports them
    if kept:
        result = matcher.match(batch)
        now_ms = int(time.time() * 1000)
        res_off, res_keys = result.offsets.tolist(), result.keys
        room = limits.message_bytes - notifications.RECORD_OVERHEAD
        id_of = matcher.id_of
        for j, (i, event_id, obj) in enumerate(kept):
            if event_id is None:
                event_id = f"{topics[i]}/{parts[i]}/{offsets[i]}"
            stamp = stamps[i]
            ms = stamp // 1000 if stamp is not None else None
            lo, hi = res_off[j], res_off[j + 1]
            if lo < hi:
                try:
                    notes = notifications.EventNotes(topics[i], parts[i], offsets[i], event_id,
                                                     values[i] if with_event else None, ms, now_ms, ctx.batch_id)
                except (TypeError, ValueError, OverflowError, UnicodeError, RecursionError) as exc:
                    if report:
                        rejected.append((EVENT, i, f"cannot build its notification: {type(exc).__name__}: {exc}"))
                        counts[M_ERRORS] += 1
                    n_events -= 1
                    continue
                slim, first, fits = None, len(out_values), True
                for key in res_keys[lo:hi].tolist():
                    sub_id, topic = id_of(key), notes_topic
                    if tenants is not None:
                        topic, sub_id = tenants.route(sub_id)
                    sid, value = sub_id.encode("utf-8"), notes.encode(sub_id)
                    if len(sid) + len(value) > room:  # past the largest message: the id-only form
                        slim = slim or _id_only(notes, len(sid) + len(value))
                        value = slim.encode(sub_id)
                        fits = len(sid) + len(value) <= room  # not with a huge event id
                        if not fits:
                            break
                    out_keys.append(sid)
                    out_values.append(value)
                    out_topics.append(topic)
                if not fits:
                    del out_keys[first:], out_values[first:], out_topics[first:]
                    if report:
                        rejected.append((EVENT, i, f"its notification takes {len(sid) + len(value)} bytes even "
                                         "without the event (its id is that large), past limits.message_bytes"))
                        counts[M_ERRORS] += 1
                    n_events -= 1
                    continue
            if valid is not None and until_field in obj:
                until = validity_end(obj, until_field, ctx.now, ctx.max_validity_s)
                if until is not None:
                    raw = values[i]
                    assert raw is not None  # a record without a value is never kept
                    valid.append(ValidEvent(topics[i], parts[i], offsets[i], ms, until, event_id, raw.strip()))
        counts[M_MATCHES] += result.total
    if report:
        counts[M_EVENTS] += n_events
        for stage, i, reason in rejected:
            out_keys.append(None)
            out_values.append(error(stage, values[i], Position(topics[i], parts[i], offsets[i]), reason).to_json())
            out_topics.append(ctx.errors_topic)
    if not out_values:
        return None
    return pa.RecordBatch.from_arrays(
        [pa.array(out_keys, pa.binary()), pa.array(out_values, pa.binary()), pa.array(out_topics, pa.string())],
        schema=OUT_SCHEMA,
    )


_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, KeyError, UnicodeError, RecursionError)


def _read_batch(matcher: Any, p: Prepared, ctx: BatchContext,
                rejected: list[tuple[str, int, str]]) -> tuple[Any, list[tuple[int, Any, dict]]]:
    """The matcher's encoding of the event records and ``(row, event id or None, object)``
    per encoded event; a refused record is added to ``rejected``.

    The records go through :func:`matchers.events.encode_json` (one scan of the bytes);
    those it does not take through :func:`~streaming.records.read_event` (a small flat
    object through orjson alone), once for all shards (``p.reads``).  The object of a
    scanned event is parsed only when it holds the validity field (``{}`` otherwise); its
    id is the value at its span.
    """
    values = p.values
    limits, id_field, until_field = ctx.limits, ctx.event_id_field, ctx.valid_until_field
    fast_bytes, max_attrs = min(limits.event_bytes, limits.string_length), limits.attributes
    loads, scalars = orjson.loads, SCALARS
    objs: dict[int, dict] = {}
    start = len(rejected)
    check = False  # whether to try encoding each general-path event alone

    def read(i: int) -> tuple[dict | None, FlatEvent | None, list[tuple[str, int, str]]]:
        value, obj = values[i], None
        if value is not None and len(value) <= fast_bytes:
            try:  # a small object of scalars: orjson alone
                obj = loads(value)
            except orjson.JSONDecodeError:
                pass
        if type(obj) is dict and len(obj) <= max_attrs and scalars.issuperset(map(type, obj.values())):
            return obj, obj, []
        got = read_event(value, limits)
        if got.obj is None:
            return None, None, [(EVENT, i, got.problem or "")]
        return got.obj, got.flat, []

    def slow(i: int) -> FlatEvent | None:
        known = p.reads.get(i)
        if known is None:
            known = p.reads[i] = read(i)
        obj, flat, problems = known
        rejected.extend(problems)
        if obj is None or flat is None:
            return None
        if check:
            try:
                matcher.encode([flat])
            except _ENCODE_ERRORS as exc:
                rejected.append((EVENT, i, f"cannot be encoded for the matcher: {type(exc).__name__}: {exc}"))
                return None
        objs[i] = obj
        return flat

    raws = [b"" if v is None else v for v in values]
    scan_limits = ScanLimits(limits.depth, limits.attributes, limits.string_length, limits.array_rows, limits.event_bytes)
    try:
        jb = encode_json(raws, matcher.dictionary, slow, scan_limits, (id_field, until_field), encode_flat=matcher.encode)
    except _ENCODE_ERRORS:  # some event cannot be encoded: again, finding which
        del rejected[start:]
        objs.clear()
        check = True
        jb = encode_json(raws, matcher.dictionary, slow, scan_limits, (id_field, until_field), encode_flat=matcher.encode)
    kept: list[tuple[int, Any, dict]] = []
    spans = jb.spans.tolist()
    for i in jb.events.tolist():
        obj = objs.get(i)
        if obj is None:  # scanned: the id at its span, the object only for its validity
            raw = raws[i]
            lo, hi = spans[i][0], spans[i][1]
            until = spans[i][2] if until_field != id_field else lo  # one key: its span is the first
            obj = loads(raw) if until >= 0 else {}
            kept.append((i, obj.get(id_field) if until >= 0 else loads(raw[lo:hi]) if lo >= 0 else None, obj))
        else:
            kept.append((i, obj.get(id_field), obj))
    return jb.batch, kept


def _id_only(notes: notifications.EventNotes, size: int) -> notifications.EventNotes:
    """The id-only form of an event's notifications, with a note saying why."""
    return notes.without_event(f"sent without the event: with it the record takes {size} bytes, past "
                               f"limits.message_bytes less {notifications.RECORD_OVERHEAD} bytes of record overhead")


def _topic_exists(client_config: KafkaClientConfig) -> Callable[[str], bool]:
    """Whether a topic exists (asking the broker about a topic not seen before)."""
    known: set[str] = set()

    def exists(topic: str) -> bool:
        if topic not in known:
            known.update(partition_counts(client_config, [topic]))
        return topic in known

    return exists


# -- the query -----------------------------------------------------------------------------
class MatchJob:
    """The foreachBatch function of the match query and the state it keeps on the driver.

    Parameters
    ----------
    settings : the service's settings.
    spark : the session.
    client_config : the Kafka client configuration (bootstrap servers resolved).
    parse : subscription record parser (the language's by default).
    """

    def __init__(self, settings: Settings, spark: SparkSession, client_config: KafkaClientConfig,
                 parse: SubscriptionParser | None = None):
        self.settings = settings
        self.spark = spark
        self.client_config = client_config
        self.parse = parse or default_parser()
        m = settings.match
        with long_lived():
            self.registry = Registry(settings.registry_dir, m.snapshot_every, m.snapshots_kept, m.max_catchup_versions)
        self.validity = ValidityStore(settings.validity_dir)
        self.shipping = RegistryBroadcast(spark.sparkContext.broadcast)
        self.status = StatusFile(settings.status.status_file, settings.status.history)
        self.tenants = Tenants.of(settings)
        self.admission = Admission(self.tenants, _topic_exists(client_config)) if self.tenants is not None else None
        master = spark.sparkContext.master or ""
        local = master == "local" or master.startswith("local[")
        self.anchors = ShardAnchors(m.shards) if m.shards > 1 and not local else None
        """The shard groups' anchors (:mod:`streaming.placement`): with shards on a cluster only."""
        self.placement: dict[int, dict[str, int]] = {}
        """Tasks that matched each shard, by executor, since the anchors were last made."""
        self.last: BatchMetrics | None = None
        self.index: list[dict[str, Any]] = []
        """The indexes the last batch with events matched with (one per distinct description)."""
        self.history: list[BatchMetrics] = []
        self.batches = 0
        self._census_warnings: CurrentWarnings | None = None
        self._lock = threading.Lock()

    # foreachBatch
    def process(self, df: DataFrame, batch_id: int) -> None:
        """Handle one micro-batch (see the module docstring)."""
        with self._lock:
            self._process(df, int(batch_id))

    def _process(self, df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        k, m = self.settings.kafka, self.settings.match
        ranges = logged_ranges(self.query_checkpoint, batch_id)
        sub_topics = self.subscription_topics
        if ranges is None:
            rows = [tuple(r) for r in df.filter(F.col("topic").isin(*sub_topics))
                    .select("key", "value", "topic", "partition", "offset").collect()]
        else:
            rows = read_records(self.client_config, [r for r in ranges if r.topic in sub_topics])
        with long_lived() if rows else nullcontext():  # the registry's new subscriptions live on
            outcome = apply_changes(self.registry, batch_id, rows, self.parse, m.max_terms, time.time(),
                                    self.settings.limits, self.admission)
        t1 = time.perf_counter()
        version = outcome.delta.version if outcome.delta is not None and outcome.replay else self.registry.version
        new = new_subscriptions(outcome.delta)
        retro, retro_errors = retro_notifications(  # the stored valid events are read only for new subscriptions
            m.matcher, new, self.validity.valid_events(batch_id, outcome.now) if new else [], batch_id,
            self.settings.notifications.payload,
            self.settings.limits.message_bytes, self.tenants, m.matcher_params())
        index = replace(self.shipping.spec(self.registry, m.matcher, version, m.max_catchup_versions, m.shards),
            app_id=self.spark.sparkContext.applicationId if m.shared_index else None, params=m.matcher_params())
        ctx = BatchContext.of(self.settings, batch_id, outcome.now, index, self.client_config)
        driver_rows: list[tuple[bytes | None, bytes, str]] = [(None, e.to_json(), k.errors_topic) for e in retro_errors]
        driver_rows += [(None, e.to_json(), self.errors_topic_of(e.position.topic)) for e in outcome.errors]
        for sid, value in retro:
            topic, public = (k.notifications_topic, sid) if self.tenants is None else self.tenants.route(sid)
            driver_rows.append((public.encode("utf-8"), value, topic))
        if driver_rows:
            keys, values, topics = zip(*driver_rows, strict=True)
            produce_batches(self.client_config, None, iter([pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(topics, pa.string())],
                schema=OUT_SCHEMA)]))
        t2 = time.perf_counter()
        events = [r for r in ranges or () if r.topic == k.events_topic]
        results: list[dict[str, Any]] = []
        if ranges is None:
            results = [r.asDict() for r in df.filter(F.col("topic") == k.events_topic)
                       .mapInArrow(partial(match_all_shards, ctx=ctx), TASK_DDL).collect()]
        elif events:
            results = self._match(events, ctx)
        v = sum_metrics([r[name] for name in METRICS] for r in results)
        self._note_index([r["index"] for r in results if r["index"]])
        self._note_placement(results)
        self.validity.write(batch_id, [e for r in results for e in decode(r["valid_events"])])
        t3 = time.perf_counter()
        input_rows = len(rows) + v[M_EVENTS] + v[M_ERRORS]
        self.validity.prune(outcome.now)
        metrics = BatchMetrics(
            batch_id=batch_id, input_rows=input_rows, events=v[M_EVENTS], subscription_records=len(rows),
            subscription_changes=outcome.accepted, expired=outcome.expired, rejected=len(outcome.errors),
            event_errors=v[M_ERRORS], matches=v[M_MATCHES], retro_matches=len(retro), valid_events_kept=v[M_VALID],
            match_ms=v[M_MATCH_NS] / 1e6, index_ms=v[M_INDEX_NS] / 1e6, read_ms=v[M_READ_NS] / 1e6,
            task_ms=v[M_TASK_NS] / 1e6, batch_ms=(time.perf_counter() - t0) * 1e3,
            changes_ms=(t1 - t0) * 1e3, retro_ms=(t2 - t1) * 1e3, write_ms=(t3 - t2) * 1e3,
            registry_version=version, subscriptions=len(self.registry), index_bytes=v[M_INDEX_BYTES],
            replay=outcome.replay,
        )
        self.last = metrics
        self.history = (self.history + [metrics])[-1000:]
        self.batches += 1
        log.info(metrics.log_line())
        extra: dict[str, Any] = {}
        if self.admission:
            extra["tenants"] = self.admission.describe(self.registry, self.pattern_ids(), self.pattern_instances())
        if m.shards > 1:
            extra["shards"] = self.describe_shards()
        if self.settings.patterns.enabled:
            extra["pattern_warnings"] = self.pattern_warnings()
        self.status.write("running", metrics, registry=dict(self.registry.describe()), index=self.index, **extra)

    def _match(self, events: list[OffsetRange], ctx: BatchContext) -> list[dict[str, Any]]:
        """The result rows of the batch's match job over its event ranges (an RDD job: the ranges
        travel with the function, the partitions only number the tasks).

        Without anchors the tasks are partitions of a ``parallelize``d range (:func:`plan_tasks`);
        with them, of the anchors' ``cartesian`` with the bins, each preferring the executor that
        caches its group's anchor (:mod:`streaming.placement`).
        """
        sc = self.spark.sparkContext
        if self.anchors is None:
            todo = plan_tasks(events, self.settings.match.shards, sc.defaultParallelism)
            return sc.parallelize(range(len(todo)), len(todo)).mapPartitions(
                partial(match_ranges, ctx=ctx, todo=todo)).collect()
        made = self.anchors.made
        anchors, groups = self.anchors.current(sc)
        if self.anchors.made != made:
            self.placement = {}
        bins = pinned_bins(events, len(groups), sc.defaultParallelism, TASK_EVENTS)
        todo = pinned_tasks(bins, groups)
        return anchors.cartesian(sc.parallelize(range(len(bins)), len(bins))).mapPartitions(
            partial(match_pinned, ctx=ctx, todo=todo, n_bins=len(bins))).collect()

    def _note_placement(self, results: list[dict[str, Any]]) -> None:
        """Count the tasks that matched each shard on each executor (:attr:`placement`)."""
        for r in results:
            for shard in json.loads(r["shards"] or "[]"):
                where = self.placement.setdefault(shard, {})
                where[r["executor"]] = where.get(r["executor"], 0) + 1

    def describe_shards(self) -> dict[str, Any]:
        """The shards' placement for the status file: the groups and where their anchors were
        made (when pinned), and the tasks that matched each shard by executor since then."""
        out: dict[str, Any] = {"pinned": self.anchors is not None,
                               "placement": {str(s): dict(w) for s, w in sorted(self.placement.items())}}
        if self.anchors is not None:
            out.update(anchorings=self.anchors.made, executors=self.anchors.executors,
                       groups=[{"shards": list(g), "anchor": self.anchors.placed.get(i)}
                               for i, g in enumerate(self.anchors.groups)])
        return out

    def _note_index(self, described: list[str]) -> None:
        """Keep the distinct indexes the tasks describe (JSON); log when one is chosen anew."""
        index = [json.loads(d) for d in sorted(set(described))]
        if not index:
            return
        chosen = sorted({(d["matcher"], d.get("reason", "")) for d in index})
        if chosen != sorted({(d["matcher"], d.get("reason", "")) for d in self.index}):
            log.info("index: %s", "; ".join(f"{name} ({reason})" if reason else name for name, reason in chosen))
        self.index = index

    def pattern_ids(self) -> list[str]:
        """The ids in the pattern registry (none while the patterns query has not made it)."""
        from streaming.patterns.queries import registry_dir
        from streaming.patterns.registry import load_registry

        if not self.settings.patterns.enabled:
            return []
        try:
            return list(load_registry(registry_dir(self.settings))[2])
        except RegistryError:
            return []

    def pattern_warnings(self) -> list[dict]:
        """The patterns reading an attribute no event of its stream carried, as the patterns
        query last found them (:mod:`streaming.patterns.census`): the census file is read
        again only when it changed."""
        if self._census_warnings is None:
            from streaming.patterns.census import CurrentWarnings
            from streaming.patterns.queries import checkpoint

            self._census_warnings = CurrentWarnings(checkpoint(self.settings))
        return self._census_warnings()

    def pattern_instances(self) -> dict[str, int]:
        """Each tenant's live pattern instances after the patterns query's last batch (none before one)."""
        from streaming.patterns.queries import state_dir
        from streaming.patterns.state import StateStore

        return StateStore(state_dir(self.settings)).latest() if self.settings.patterns.enabled else {}

    @property
    def subscription_topics(self) -> tuple[str, ...]:
        """The topics subscription records are read from (every tenant's with tenants)."""
        if self.tenants is None:
            return (self.settings.kafka.subscriptions_topic,)
        return self.tenants.subscription_topics

    def errors_topic_of(self, record_topic: str) -> str:
        """The errors topic of a rejected subscription record read from ``record_topic``."""
        if self.tenants is None:
            return self.settings.kafka.errors_topic
        return self.tenants.errors_topic_of(record_topic)

    @property
    def query_checkpoint(self) -> str:
        """The URI of the query's own checkpoint (offset and commit logs)."""
        return join(self.settings.checkpoint, "query")

    def start(self, spark: SparkSession | None = None) -> StreamingQuery:
        """Start the match query (reading events and subscriptions, checkpoint under the settings')."""
        from streaming.kafka import read_stream

        spark = spark or self.spark
        k, s = self.settings.kafka, self.settings.spark
        df = read_stream(spark, self.client_config, [k.events_topic, *self.subscription_topics],
                         starting=k.starting_offsets, max_per_trigger=k.max_offsets_per_trigger or None,
                         use_java_connector=k.use_java_connector)
        self.status.write("starting", registry=dict(self.registry.describe()))
        return (df.writeStream.queryName("match")
                .foreachBatch(self.process)
                .option("checkpointLocation", self.query_checkpoint)
                .trigger(processingTime=s.trigger_interval)
                .start())

"""What runs in a match task, on an executor: read, match, notify, report.

:func:`match_ranges` (the tasks of an RDD job, :func:`match_pinned` when the shard groups
are pinned to executors) reads the task's event ranges from Kafka itself and hands them to
:func:`match_partition`, which brings the worker's cached index of each shard to the batch's
version (:mod:`streaming.executor_cache`), reads and encodes each event once for every shard
(:class:`PreparedBatch`, :func:`read_batch`, against the worker's common dictionary),
translates the batch to each shard's dictionary (:mod:`matchers.translate`) and matches it,
produces the notification and error records to Kafka itself, and yields one
:class:`~streaming.match.tasks.TaskResult` row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import orjson
import pyarrow as pa

from matchers.events import Dictionary, EventBatch, FlatEvent, encode, encode_json
from matchers.translate import Translation
from streaming import executor_cache, notifications
from streaming.config import LimitsSettings
from streaming.executor_cache import index_for
from streaming.kafka.fetch import read_range
from streaming.kafka.sink import produce_batches
from streaming.match.tasks import (
    BatchContext,
    Task,
    TaskMetrics,
    TaskResult,
    notes_batches,
    out_batch,
)
from streaming.placement import executor_name
from streaming.records import EVENT, EventRead, Position, error, read_event_fast
from streaming.routing import EventRoutes, match_routed
from streaming.validity import ValidEvent, validity_end

Produce = Callable[[Iterator[pa.RecordBatch]], int]
"""Sends Arrow batches of ``key, value, topic`` records and returns how many it sent."""


def match_pinned(pairs: Iterable[tuple[tuple[int, str], int]], ctx: BatchContext, todo: Sequence[Task], n_bins: int,
                 produce: Produce | None = None) -> Iterator[dict[str, Any]]:
    """:func:`match_ranges` over a partition of the anchors' ``cartesian`` with the bins: each
    ``((group, anchor's executor), bin)`` pair names task ``group * n_bins + bin`` of ``todo``
    (:func:`~streaming.match.tasks.pinned_tasks`)."""
    yield from match_ranges((g * n_bins + b for (g, _), b in pairs), ctx, todo, produce)


def match_ranges(numbers: Iterable[int], ctx: BatchContext, todo: Sequence[Task],
                 produce: Produce | None = None) -> Iterator[dict[str, Any]]:
    """:func:`match_partition` over the records of this task's offset ranges, read by this task.

    ``todo`` holds the batch's tasks (:func:`~streaming.match.tasks.plan_tasks`); ``numbers``
    (the partition of a ``SparkContext.parallelize(range(len(todo)))``) name this task's.
    Yields the result row of each as a dict of :data:`~streaming.match.tasks.TASK_SCHEMA`.
    """
    for i in numbers:
        ranges, shards = todo[i]
        records = (rb for rng in ranges for rb in read_range(ctx.kafka, rng))
        for rb in match_partition(records, ctx, produce, shards):
            yield from rb.to_pylist()


def match_partition(
    batches: Iterator[pa.RecordBatch],
    ctx: BatchContext,
    produce: Produce | None = None,
    shards: Sequence[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Match one partition's event records, send the results, and yield the task's result row.

    Parameters
    ----------
    batches : Arrow batches with the Kafka source columns (``value, topic, partition,
        offset, timestamp``) of event records.
    ctx : the batch's context.
    produce : sends the records (by default to Kafka with ``ctx.kafka``, waiting for every
        acknowledgement).
    shards : the subscription shards to match against (default ``ctx.spec.shard``). Each
        event is read, parsed and encoded once, then translated and matched per shard. Only with shard 0
        among them does the task report what belongs to the events rather than the
        subscriptions (error records, event counts, valid events); otherwise it sends
        notifications only.

    Yields
    ------
    The task's :class:`~streaming.match.tasks.TaskResult` as its one row: its metrics and
    its still-valid events, which the driver stores (:class:`~streaming.validity.ValidityStore`).
    """
    t0 = time.perf_counter_ns()
    if produce is None:
        produce = partial(produce_batches, ctx.kafka, None)
    result = TaskResult(executor=executor_name())
    shards = (ctx.spec.shard,) if shards is None else tuple(shards)
    m = result.metrics
    m.records = produce(_records(_timed(batches, m), ctx, shards, result))
    m.valid = len(result.valid_events)
    m.task_ns = time.perf_counter_ns() - t0
    yield result.to_batch()


def _timed(batches: Iterator[pa.RecordBatch], metrics: TaskMetrics) -> Iterator[pa.RecordBatch]:
    """``batches``, adding the time spent waiting for each to ``metrics.read_ns``."""
    while True:
        t0 = time.perf_counter_ns()
        rb = next(batches, None)
        metrics.read_ns += time.perf_counter_ns() - t0
        if rb is None:
            return
        yield rb


class PreparedBatch:
    """An Arrow batch of event records as every shard's matching needs it, read once.

    Its columns as Python lists; the bytes are scanned once against the worker's common
    dictionary (:func:`read_batch`), and the records the scan does not take are read once
    (:meth:`read`, kept).
    """

    __slots__ = ("values", "topics", "parts", "offsets", "stamps", "_limits", "_reads")

    def __init__(self, rb: pa.RecordBatch, limits: LimitsSettings):
        self.values: list[bytes | None] = rb.column("value").to_pylist()
        self.topics: list[str] = rb.column("topic").to_pylist()
        self.parts: list[int] = rb.column("partition").to_pylist()
        self.offsets: list[int] = rb.column("offset").to_pylist()
        self.stamps: list[int | None] = rb.column("timestamp").cast(pa.int64()).to_pylist()
        self._limits = limits
        self._reads: dict[int, EventRead] = {}

    def position(self, i: int) -> Position:
        """Where record ``i`` came from."""
        return Position(self.topics[i], self.parts[i], self.offsets[i])

    def read(self, i: int) -> EventRead:
        """Record ``i`` read (:func:`~streaming.records.read_event_fast`), the first time only."""
        got = self._reads.get(i)
        if got is None:
            got = self._reads[i] = read_event_fast(self.values[i], self._limits)
        return got


def _records(batches: Iterator[pa.RecordBatch], ctx: BatchContext, shards: tuple[int, ...],
             result: TaskResult) -> Iterator[pa.RecordBatch]:
    """Notification and error records of the event batches against ``shards``; fills ``result``.

    Each batch is prepared and encoded once (:class:`PreparedBatch`, :func:`read_batch`, against
    the worker's common dictionary), then translated, matched and notified per shard
    (:func:`shard_records`). A record that cannot be handled (refused by
    :func:`~streaming.records.read_event`, not encodable, no notification possible) becomes one
    error record, with shard 0 only.
    """
    m = result.metrics
    indexes: list[tuple[int, Any, Translation]] = []
    for rb in batches:
        if rb.num_rows == 0:
            continue
        t1 = time.perf_counter_ns()
        if not indexes:  # a partition without rows never builds an index
            before = m.index_ns
            indexes = _indexes(ctx, shards, result)
            t1 += m.index_ns - before  # index time is not match time
        prepared = PreparedBatch(rb, ctx.limits)
        read = read_batch(prepared, ctx, executor_cache.common())
        route = ctx.spec.routing
        routes = None if route is None else EventRoutes.of(read.batch, executor_cache.common().attr_ids.get(route.attr, -1))
        for shard, matcher, translation in indexes:
            yield from shard_records(prepared, read, matcher, translation, ctx, m,
                                     result.valid_events if shard == 0 else None, (shard, routes))
        m.match_ns += time.perf_counter_ns() - t1


def _indexes(ctx: BatchContext, shards: tuple[int, ...], result: TaskResult) -> list[tuple[int, Any, Translation]]:
    """``(shard, matcher, translation)`` of each of ``shards`` at the batch's version (their
    translations brought up to date once all are obtained); adds the time to ``index_ns``."""
    m = result.metrics
    t0 = time.perf_counter_ns()
    entries = [index_for(replace(ctx.spec, shard=shard), shards[i + 1:]) for i, shard in enumerate(shards)]
    out = [(shard, entry.matcher, executor_cache.translation(entry)) for shard, entry in zip(shards, entries, strict=True)]
    for shard, matcher, translation in out:
        m.index_bytes += matcher.memory_bytes() + translation.memory_bytes()
        result.index.update(matcher.describe())
        result.shards.append(shard)
    m.index_ns += time.perf_counter_ns() - t0
    return out


class ReadBatch(NamedTuple):
    """:func:`read_batch`'s result: a batch read and encoded once for every shard of a task."""

    batch: EventBatch
    """The encoded events, against the worker's common dictionary."""
    kept: list[tuple[int, Any, dict]]
    """``(row, event id or None, object)`` of each encoded event."""
    rejected: list[tuple[str, int, str]]
    """``(stage, row, reason)`` of each refused record."""


def shard_records(p: PreparedBatch, read: ReadBatch, matcher: Any, translation: Translation, ctx: BatchContext,
                  m: TaskMetrics, valid: list[ValidEvent] | None,
                  routed: tuple[int, EventRoutes | None] = (0, None)) -> list[pa.RecordBatch]:
    """Records of one prepared batch matched by one shard's ``matcher`` (the batch as its own through
    ``translation``): its notifications, and with ``valid`` (shard 0) the batch's error records,
    event counts and valid events. ``routed``: the shard's number and the batch's route values
    (with ``match.route_by``: a shard of routed subscriptions only matches the events that can
    match it, :func:`streaming.routing.match_routed`)."""
    report = valid is not None
    out = Out([], [], [], [])
    rejected = list(read.rejected)
    kept = read.kept
    n_events = len(kept)
    if kept:
        shard, routes = routed
        result = match_routed(matcher, read.batch, translation.apply, routes, shard, ctx.spec.shards,
                              ctx.spec.routing.spread if ctx.spec.routing is not None else 1)
        n_events -= notify(p, kept, result, matcher, ctx, out, rejected, valid)
        m.matches += result.total
    if report:  # shard 0 reports what belongs to the events
        m.errors += len(p.values) - n_events
        m.events += n_events
        for stage, i, reason in rejected:
            out.keys.append(None)
            out.values.append(error(stage, p.values[i], p.position(i), reason).to_json())
            out.topics.append(ctx.errors_topic)
    return out.notes + [out_batch(out.keys, out.values, out.topics)] if out.values else out.notes


class Out(NamedTuple):
    """A task's outgoing records: the notifications' batches, and the columns of the others
    (:func:`~streaming.match.tasks.out_batch`)."""

    keys: list[bytes | None]
    values: list[bytes]
    topics: list[str]
    notes: list[pa.RecordBatch]


def notify(p: PreparedBatch, kept: Sequence[tuple[int, Any, dict]], result: Any, matcher: Any, ctx: BatchContext,
           out: Out, rejected: list[tuple[str, int, str]], valid: list[ValidEvent] | None) -> int:
    """Append the notification records of ``result`` (the matches of the ``kept`` events,
    :func:`read_batch`) to ``out.notes``, built in bulk (:func:`~streaming.notifications.build_records`),
    and with ``valid`` the events still valid to it; returns how many events got no
    notification because none could be built (each added to ``rejected`` with its reason)."""
    topics, parts, offsets, stamps, values = p.topics, p.parts, p.offsets, p.stamps, p.values
    m = notifications.matched(result.offsets, result.keys, matcher.ids_of)
    hit: list[tuple[int, Any, dict]] = [kept[j] for j in m.hits.tolist()]  # the kept events with matches
    rows = [i for i, _, _ in hit]
    event_ids = [eid for _, eid, _ in hit]
    for n, (i, eid) in enumerate(zip(rows, event_ids, strict=True)):
        if eid is None:
            event_ids[n] = p.position(i).event_id()
    events = notifications.EventColumns(
        [topics[i] for i in rows], [parts[i] for i in rows], [offsets[i] for i in rows], event_ids,
        [values[i] for i in rows] if ctx.payload == notifications.PAYLOAD_EVENT else None,  # type: ignore[misc]  # a kept record has a value
        [None if stamps[i] is None else stamps[i] // 1000 for i in rows])  # type: ignore[operator]  # not None there
    if ctx.tenants is None:
        sub_ids, tags = m.ids, [ctx.notifications_topic] * len(m.ids)
    else:
        routed = list(map(ctx.tenants.route, m.ids))
        sub_ids, tags = [sid for _, sid in routed], [topic for topic, _ in routed]
    built = notifications.build_records(events, m.bounds, sub_ids, m.which, int(time.time() * 1000), ctx.batch_id,
                                        ctx.limits.message_bytes - notifications.RECORD_OVERHEAD)
    out.notes.extend(notes_batches(built.values, built.subs, built.keys, tags))
    failed = built.failures
    for n, reason in failed:
        rejected.append((EVENT, rows[n], reason))
    if valid is not None:
        _add_valid(p, kept, {rows[n] for n, _ in failed}, ctx, valid)
    return len(failed)


def _add_valid(p: PreparedBatch, kept: Sequence[tuple[int, Any, dict]], failed: set[int], ctx: BatchContext,
               valid: list[ValidEvent]) -> None:
    """Append the ``kept`` events still valid (not among the ``failed`` rows) to ``valid``."""
    field = ctx.valid_until_field
    for i, event_id, obj in kept:
        if field in obj and i not in failed:
            until = validity_end(obj, field, ctx.now, ctx.max_validity_s)
            if until is not None:
                raw, stamp = p.values[i], p.stamps[i]
                assert raw is not None  # a record without a value is never kept
                if event_id is None:
                    event_id = p.position(i).event_id()
                valid.append(ValidEvent(p.topics[i], p.parts[i], p.offsets[i], None if stamp is None else stamp // 1000,
                                        until, event_id, raw.strip()))


_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, KeyError, UnicodeError, RecursionError)


def read_batch(p: PreparedBatch, ctx: BatchContext, dictionary: Dictionary) -> ReadBatch:
    """The event records encoded against ``dictionary`` (a worker's common one: names no index
    uses are left out), once for every shard.

    The records go through :func:`matchers.events.encode_json` (one scan of the bytes);
    those it does not take through :meth:`PreparedBatch.read` and :func:`~matchers.events.encode`.
    The object of a scanned event is parsed only when it holds the validity field (``{}``
    otherwise); its id is the value at its span. An event that cannot be encoded is refused.
    """
    limits, id_field, until_field = ctx.limits, ctx.event_id_field, ctx.valid_until_field
    loads = orjson.loads
    objs: dict[int, dict] = {}
    rejected: list[tuple[str, int, str]] = []
    check = False  # whether to try encoding each general-path event alone
    encode_flat = partial(encode, dictionary=dictionary, known_only=True)

    def slow(i: int) -> FlatEvent | None:
        obj, flat, problem = p.read(i)
        if obj is None:
            rejected.append((EVENT, i, problem or ""))
            return None
        if check:
            try:
                encode_flat([flat])
            except _ENCODE_ERRORS as exc:
                rejected.append((EVENT, i, f"cannot be encoded for the matcher: {type(exc).__name__}: {exc}"))
                return None
        objs[i] = obj
        return flat

    raws = [b"" if v is None else v for v in p.values]
    scan_limits = limits.scan()
    try:
        jb = encode_json(raws, dictionary, slow, scan_limits, (id_field, until_field), encode_flat=encode_flat)
    except _ENCODE_ERRORS:  # some event cannot be encoded: again, finding which
        rejected.clear()
        objs.clear()
        check = True
        jb = encode_json(raws, dictionary, slow, scan_limits, (id_field, until_field), encode_flat=encode_flat)
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
    return ReadBatch(jb.batch, kept, rejected)

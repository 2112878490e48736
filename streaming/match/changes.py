"""A batch's subscription records: read and parsed as columns (in Spark tasks, or on the
driver for a few), and the new subscriptions matched retroactively.

Everything here is columns (Arrow), never a Python object per subscription kept past the batch:

* :func:`parse_in_tasks`: the rows of the records of the batch's subscription offset ranges,
  each task reading its ranges from Kafka and parsing them (one RDD job; none without records;
  for fewer than :data:`DRIVER_RECORDS` the driver reads them and takes the fast parse itself,
  :func:`driver_parse`, and the general path too unless :data:`GENERAL_RECORDS` need it, which
  then go to one RDD job as bytes);
* :func:`read_records`: the subscription records of offset ranges (:data:`RECORD_SCHEMA`), on the driver;
* :func:`parse_subscription_records`: one row per record
  (:func:`~streaming.registry_columns.parse.parse_records`), on the driver;
* the rows (expressions and patterns alike) go to
  :func:`streaming.registry_columns.admit.admit` (tenants' ids, targets, quotas, expiry, in
  offset order whatever the rows' order), whose changes the registry applies;
* :func:`new_subscriptions` and :func:`retro_notifications`: the expressions a version adds or
  changes (read back from its delta) matched against the still-valid events of earlier
  batches (:mod:`streaming.validity`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from matchers.catalog import create
from matchers.expr import DEFAULT_MAX_TERMS, Subscription
from streaming import notifications
from streaming.config import LimitsSettings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetRange
from streaming.placement import event_bins
from streaming.records import (
    DEFAULT_LIMITS,
    EVENT,
    ErrorRecord,
    Position,
    SubscriptionParser,
    default_parser,
    error,
    flat_event,
)
from streaming.registry_columns import UPSERT, Applied, ColumnRegistry, files
from streaming.registry_columns.admit import Admitted, admit
from streaming.registry_columns.parse import (
    PARSED_SCHEMA,
    parse_fast,
    parse_partition,
    parse_records,
)
from streaming.registry_columns.shards import subscriptions
from streaming.storage import Directory
from streaming.tenants import Tenants
from streaming.validity import ValidEvent

if TYPE_CHECKING:
    from pyspark import SparkContext

RECORD_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                           ("partition", pa.int32()), ("offset", pa.int64())])
"""Subscription records as the driver reads them (the Kafka source's columns it needs)."""


def records_table(data: pa.Table | pa.RecordBatch) -> pa.Table:
    """The :data:`RECORD_SCHEMA` columns of Kafka source rows (a collected micro-batch, a fetch)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    return table.select(RECORD_SCHEMA.names).cast(RECORD_SCHEMA)


def read_records(kafka: KafkaClientConfig, ranges: Iterable[OffsetRange]) -> pa.Table:
    """The records in ``ranges`` (:data:`RECORD_SCHEMA`)."""
    parts = [records_table(rb) for rng in ranges for rb in read_range(kafka, rng)]
    return pa.concat_tables(parts) if parts else RECORD_SCHEMA.empty_table()


def parse_subscription_records(records: pa.Table, parse: SubscriptionParser | None = None,
                               max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                               targets: bool = False, route_by: str = "") -> pa.Table:
    """The :data:`~streaming.registry_columns.parse.PARSED_SCHEMA` rows of a batch's records (in
    their order: :func:`~streaming.registry_columns.admit.admit` judges them in offset order;
    ``route_by``: the registry's routing attribute, ``match.route_by``)."""
    parsed = [parse_records(rb, parse, max_terms, limits, targets, route_by) for rb in records.to_batches()
              if rb.num_rows]
    return pa.Table.from_batches(parsed, schema=PARSED_SCHEMA)


def records_of(rows: Iterable[tuple]) -> pa.Table:
    """Subscription records ``(key, value, topic, partition, offset)`` as a :data:`RECORD_SCHEMA` table."""
    cols = list(zip(*rows, strict=True)) or [()] * len(RECORD_SCHEMA)
    return pa.table([pa.array(c, f.type) for c, f in zip(cols, RECORD_SCHEMA, strict=True)], schema=RECORD_SCHEMA)


def register_records(registry: ColumnRegistry, batch_id: int, records: pa.Table, now: float,
                     tenants: Tenants | None = None, limits: LimitsSettings = DEFAULT_LIMITS,
                     topic_exists: Callable[[str], bool] = lambda _topic: True,
                     errors_topic: str = "errors") -> tuple[Applied, Admitted]:
    """A batch of subscription records (:data:`RECORD_SCHEMA`, expressions and patterns) parsed,
    judged and recorded on the driver, as the match query's step does it
    (:meth:`streaming.match.job.MatchJob.process`, without tasks): for tools and tests."""
    parsed = parse_subscription_records(records, limits=limits, targets=tenants is not None,
                                        route_by=registry.routing.attr if registry.routing else "")
    admitted = admit(parsed, registry, batch_id, tenants, topic_exists, now, errors_topic)
    return registry.apply(batch_id, admitted.changes, admitted.now), admitted


TASK_RECORDS = 10_000
"""Subscription records a parse task is given at least (a batch of more fills the slots)."""

DRIVER_RECORDS = 20_000
"""Fewer subscription records than this in a batch are read by the driver, which parses those
the fast parse takes (:func:`~streaming.registry_columns.parse.parse_fast`) itself: a Spark
job's fixed cost is more than parsing them there. Measured on a 2-core machine under a load
of 4-5 (``python -m scripts.bench.parse_tasks --records 20000 --rounds 3``, records of Fabret
W1, 2026-11-29): a job for one record took 0.06-0.46 s of wall time, 20,000 records 0.34-0.44 s
in tasks (1.9 s in the session's first job) and 0.27-0.35 s on the driver (8-13 µs of its CPU
each); 100,000 records 1.5-3.3 s in tasks and 1.3-1.6 s on the driver, whose CPU does not grow
with a cluster as the tasks' does."""

GENERAL_RECORDS = 2_000
"""From this many records the fast parse refuses (the ``expr`` text form, any other shape) in
a batch the driver reads, those records go to parse tasks (as bytes: :func:`general_tasks`,
:func:`parse_blobs`); fewer are parsed on the driver. The general path costs about 200 µs of
the driver's CPU a record against the fast path's 8-22 µs, so the bound is by cost: at most
about 0.4 s of the driver's CPU either way. Measured on the 2-core machine, 2026-11-29 23:50,
load 2.6-7.3 (``python -m scripts.bench.parse_tasks --form expr --rounds 3 --records N``,
driver CPU): 1,000 ``expr`` records 0.21-0.24 s on the driver against a job of 0.37-0.40 s of
wall; 2,000 0.44-0.60 s on the driver, 0.016-0.038 s with this bound; 5,000 1.07-1.18 s
against 0.025 s; 19,999 4.39-4.52 s against 0.08-0.14 s."""

GENERAL_TASK_RECORDS = 1_000
"""Records of the general path a parse task is given at least (a batch of more fills the slots)."""


def parse_tasks(ranges: Sequence[OffsetRange], slots: int,
                task_records: int = TASK_RECORDS) -> list[tuple[OffsetRange, ...]]:
    """The parse tasks of ``ranges`` (empty ones dropped): as many as have ``task_records``
    records each, at most ``slots`` (at least one with records), a range split across tasks
    when it is larger than a task's share."""
    ranges = [r for r in ranges if r.end > r.start]
    total = sum(r.end - r.start for r in ranges)
    if not total:
        return []
    n = max(1, min(slots, total // task_records))
    share = -(-total // n)
    pieces = [OffsetRange(r.topic, r.partition, lo, min(lo + share, r.end))
              for r in ranges for lo in range(r.start, r.end, share)]
    return event_bins(pieces, n)


STREAM_COMPRESSION = "lz4"
"""The compression of the parse tasks' Arrow streams (their buffers): what goes through the JVM
to the driver. 1,000,000 W1 rows: 372 MB plain, 87 MB with lz4, which costs the task less
CPU than writing them plain (0.4 against 2.3 s, 2026-11-30)."""


def _stream(batches: Iterable[pa.RecordBatch]) -> bytes:
    """One Arrow IPC stream of :data:`PARSED_SCHEMA` rows (what a parse task returns; buffers
    compressed, :data:`STREAM_COMPRESSION`)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, PARSED_SCHEMA,
                           options=pa.ipc.IpcWriteOptions(compression=STREAM_COMPRESSION)) as writer:
        for rb in batches:
            writer.write_batch(rb)
    return sink.getvalue().to_pybytes()


def parse_ranges(numbers: Iterable[int], kafka: KafkaClientConfig, todo: Sequence[tuple[OffsetRange, ...]],
                 max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                 targets: bool = False, route_by: str = "") -> Iterator[bytes]:
    """What a parse task of ranges runs: the records of its ranges (``todo[i]`` for each ``i``
    of ``numbers``, a partition of ``parallelize(range(len(todo)))``) read from Kafka and parsed
    (:func:`~streaming.registry_columns.parse.parse_partition`), yielded as one Arrow IPC
    stream of :data:`PARSED_SCHEMA` rows."""
    batches = (rb for i in numbers for rng in todo[i] for rb in read_range(kafka, rng))
    yield _stream(parse_partition(batches, max_terms, limits, targets, route_by))


def driver_parse(records: pa.Table, max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                 route_by: str = "") -> tuple[pa.Table, pa.Table]:
    """The rows of the records (:data:`RECORD_SCHEMA`) the fast parse takes, and the other
    records (for the general path: on the driver or in tasks)."""
    done, rest = [], []
    for rb in records.to_batches():
        if rb.num_rows:
            rows, other = parse_fast(rb, max_terms, limits, route_by)
            done.append(rows)
            rest.append(other)
    return pa.Table.from_batches(done, schema=PARSED_SCHEMA), pa.Table.from_batches(rest, schema=RECORD_SCHEMA)


def general_tasks(records: pa.Table, slots: int, task_records: int = GENERAL_TASK_RECORDS) -> list[bytes]:
    """``records`` (:data:`RECORD_SCHEMA`) as the parse tasks' inputs: as many as have
    ``task_records`` records each, at most ``slots`` (at least one with records), each an Arrow
    IPC file of a slice of them (:func:`~streaming.registry_columns.files.to_ipc`)."""
    total = records.num_rows
    if not total:
        return []
    n = max(1, min(slots, total // task_records))
    share = -(-total // n)
    return [files.to_ipc(records.slice(lo, share)) for lo in range(0, total, share)]


def parse_blobs(blobs: Iterable[bytes], max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                targets: bool = False, route_by: str = "") -> Iterator[bytes]:
    """What a parse task of records runs: the records of each of ``blobs`` (a partition of
    :func:`general_tasks`' list) parsed by the general path (the driver's fast parse refused
    them), yielded as one Arrow IPC stream of :data:`PARSED_SCHEMA` rows."""
    parse = default_parser()
    batches = (rb for blob in blobs for rb in pa.ipc.open_file(blob).read_all().to_batches())
    yield _stream(parse_records(rb, parse, max_terms, limits, targets, route_by) for rb in batches if rb.num_rows)


def parse_in_tasks(sc: SparkContext, kafka: KafkaClientConfig, ranges: Sequence[OffsetRange],
                   max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                   targets: bool = False, task_records: int = TASK_RECORDS,
                   driver_records: int | None = None, general_records: int | None = None,
                   route_by: str = "") -> pa.Table:
    """The rows of the subscription records in ``ranges`` (as :func:`parse_subscription_records`
    gives them, in no particular order), read and parsed by Spark tasks: one RDD job
    (:func:`parse_tasks`, :func:`parse_ranges`); the driver gets columns.

    No job without records. Fewer than ``driver_records`` (:data:`DRIVER_RECORDS` by default)
    are read by the driver (:func:`read_records`), which parses those the fast parse takes
    (:func:`driver_parse`) and the others too when they are fewer than ``general_records``
    (:data:`GENERAL_RECORDS`); when they are more, one RDD job parses them
    (:func:`general_tasks`, :func:`parse_blobs`). Every path gives the same rows, with their
    routes by ``route_by`` (``match.route_by``: the registry's routing) found where they are parsed.
    """
    count = sum(max(0, r.end - r.start) for r in ranges)
    if count < max(1, DRIVER_RECORDS if driver_records is None else driver_records):  # none: no job, no read
        done, rest = driver_parse(read_records(kafka, ranges), max_terms, limits, route_by)
        if rest.num_rows < max(1, GENERAL_RECORDS if general_records is None else general_records):
            general = [parse_records(rb, default_parser(), max_terms, limits, targets, route_by)
                       for rb in rest.to_batches()]
            return pa.Table.from_batches([*done.to_batches(), *general], schema=PARSED_SCHEMA)
        blobs = general_tasks(rest, sc.defaultParallelism)
        streams = sc.parallelize(blobs, len(blobs)).mapPartitions(
            partial(parse_blobs, max_terms=max_terms, limits=limits, targets=targets, route_by=route_by)).collect()
        return pa.concat_tables([done, *(pa.ipc.open_stream(b).read_all() for b in streams)])
    todo = parse_tasks(ranges, sc.defaultParallelism, task_records)
    streams = sc.parallelize(range(len(todo)), len(todo)).mapPartitions(
        partial(parse_ranges, kafka=kafka, todo=todo, max_terms=max_terms, limits=limits, targets=targets,
                route_by=route_by)).collect()
    tables = [pa.ipc.open_stream(blob).read_all() for blob in streams]
    return pa.concat_tables(tables) if tables else PARSED_SCHEMA.empty_table()


def new_subscriptions(directory: str | Directory, version: int) -> list[Subscription]:
    """The expressions registry ``version`` adds or changes (its delta's upserts, unpacked)."""
    if version <= 0:
        return []
    location = directory if isinstance(directory, Directory) else Directory(directory)
    table, _ = files.read_delta(location, version)
    return list(subscriptions(table.filter(pc.equal(table.column("op"), UPSERT))))


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

    Records are built as the tasks build theirs (:func:`~streaming.notifications.match_records`):
    one past ``message_bytes`` goes in the id-only form with a note; an event whose id alone
    is too large gets one error record and no notification.
    """
    if not subscriptions or not events:
        return [], []
    matcher = create(matcher_name, **dict(params))
    matcher.add(subscriptions)
    flat = [flat_event(orjson.loads(e.raw)) for e in events]
    result = matcher.match(matcher.encode(flat))
    m = notifications.matched(result.offsets, result.keys, matcher.ids_of)
    hit = [events[i] for i in m.hits.tolist()]
    cols = notifications.EventColumns([e.topic for e in hit], [e.partition for e in hit], [e.offset for e in hit],
                                      [e.event_id for e in hit],
                                      [e.raw for e in hit] if payload == notifications.PAYLOAD_EVENT else None,
                                      [e.timestamp_ms for e in hit])
    values: list[bytes] = []
    sent: list[str] = []
    failed = notifications.match_records(
        cols, m.bounds, m.ids if tenants is None else [tenants.route(s)[1] for s in m.ids], m.which,
        int(time.time() * 1000), batch_id, message_bytes - notifications.RECORD_OVERHEAD, ([], values, sent), m.ids,
        retro=True)
    out = list(zip(sent, values, strict=True))
    errors = [error(EVENT, hit[n].raw, Position(hit[n].topic, hit[n].partition, hit[n].offset), reason)
              for n, reason in failed]
    return out, errors

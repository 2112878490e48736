"""The patterns query, started by the service (:func:`starters`).

The patterns are subscriptions of the one registry the match query keeps
(:class:`~streaming.registry_columns.ColumnRegistry`: it reads the subscriptions topics, judges
pattern records and reports their errors); this query reads its pattern view
(:mod:`streaming.registry_columns.view`, :func:`~streaming.patterns.registry.current`).

``patterns`` reads the events topic: the events are keyed (:func:`keyed_watched`,
:mod:`streaming.patterns.keyed`), watermarked by their end (``withWatermark``, minus
``patterns.watermark_delay``; the keying tasks' marks carry the latest end they read, so
events without a key move it too; the processor drops the marks) and grouped by state key into the stateful processor
(:mod:`streaming.patterns.processor`, ``transformWithStateInPandas``: the instances in
Spark's keyed state, RocksDB with changelog checkpointing, ``patterns.state_partitions``
partitions; Spark's event-time timers). Its output goes to the foreachBatch function
(:class:`PatternSink`): the tasks send the notifications and error records
(:func:`send_records`); the driver adds up the keys' changes of live instances, records
them with the watermark (:mod:`streaming.patterns.live`), and the tenants at their
``pattern_instances`` quota start no new instances from the next batch (one error record,
stage ``pattern-quota``, on the tenant's errors topic when it reaches it). The keying tasks'
attribute tallies reach the driver through the processor, for the unknown-attribute
warning (:class:`AttributeWarnings`, :mod:`streaming.patterns.census`). A checkpoint holding
the older layout (state partitions written by the service) is refused (:func:`refuse_old_layout`).

The collector: the keying and the processor's tasks run with the cyclic garbage collector
paused and end with one collection of what the task left and a freeze of what survives
(:func:`matchers.collector.long_lived`: the compiled patterns, the cached state, the imported
modules). Spark's reused Python worker runs a full ``gc.collect()`` after every task: in
process, with 1,000 patterns and the modules a worker imports, that took 0.4 to 1.0 s per
task, and the operator spent 75 to 78 µs per event against 31 with the freeze (keying 21 to
23 against 11; 40,000 events, load 8 to 9, 2026-11-25).

It checkpoints under ``<spark.checkpoint_dir>/patterns``, starts from ``patterns.starting_offsets``
and triggers every ``patterns.trigger_interval``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import Settings, interval_ms
from streaming.kafka.client_config import KafkaClientConfig
from streaming.patterns import census
from streaming.patterns.census import ATTRIBUTE_WARNING
from streaming.patterns.keyed import ROWS_DDL, keyed_rows
from streaming.patterns.live import LiveRecord, StateError, add_changes
from streaming.patterns.operator import PENDING
from streaming.patterns.processor import CENSUS, LIVE, RECORD
from streaming.patterns.registry import current
from streaming.records import ErrorRecord, Position, error
from streaming.registry_columns import view
from streaming.storage import Directory, join
from streaming.tenants import Tenants, topic_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming.patterns")

PATTERN_QUOTA = "pattern-quota"
"""Stage of the error record of a tenant reaching its ``pattern_instances`` quota."""
SENT_DDL = "kind string, value binary, watermark long, sent long"
"""What :func:`send_records` passes on to the driver: the processor's rows other than records
(``live``, ``census``), and one ``sent`` row per task with the count of records it sent."""


def send_records(batches: Iterator[pa.RecordBatch], kafka: KafkaClientConfig) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body over the processor's output (:data:`~streaming.patterns.processor.OUT_DDL`):
    the task sends the ``record`` rows to their topics and passes the others on (:data:`SENT_DDL`)."""
    from streaming.kafka.sink import produce_batches

    sent = 0
    for rb in batches:
        is_record = pc.equal(rb.column("kind"), RECORD)
        records = rb.filter(is_record)
        if records.num_rows:
            produce_batches(kafka, None, iter([records.select(["key", "value", "topic"])]))
            sent += records.num_rows
        rest = rb.filter(pc.invert(is_record))
        if rest.num_rows:
            yield pa.RecordBatch.from_arrays([rest.column("kind"), rest.column("value"), rest.column("watermark"),
                                              pa.nulls(rest.num_rows, pa.int64())],
                                             names=["kind", "value", "watermark", "sent"])
    yield pa.RecordBatch.from_pydict({"kind": ["sent"], "value": pa.nulls(1, pa.binary()),
                                      "watermark": pa.nulls(1, pa.int64()), "sent": [sent]})


def checkpoint(settings: Settings) -> str:
    """Where the patterns query keeps its checkpoint and records."""
    return join(settings.checkpoint, "patterns")


def registry_dir(settings: Settings) -> str:
    """The registry whose pattern view the executors read (the match query's)."""
    return settings.registry_columns_dir


def legacy_registry_dir(settings: Settings) -> str:
    """The pattern registry of earlier releases (imported once: :func:`streaming.registry_columns.migrate.import_patterns`)."""
    return join(checkpoint(settings), "pattern-registry")


def live_dir(settings: Settings) -> str:
    """Where the driver records each batch's watermark and live instances (:mod:`streaming.patterns.live`)."""
    return join(checkpoint(settings), "pattern-live")


OLD_STATE = "pattern-state"
"""The directory of the state partitions that held the instances before they moved to Spark's keyed state."""


def refuse_old_layout(settings: Settings) -> None:
    """Raise :class:`~streaming.patterns.live.StateError` when the checkpoint holds pattern state
    of the older layout (state partitions snapshotted by the service itself): it is not read."""
    old = Directory(join(checkpoint(settings), OLD_STATE))
    if old.exists():
        raise StateError(
            f"the patterns checkpoint holds pattern instances in the older layout ({old.uri}: state partitions "
            "written by the service), which this version does not read: its instances now live in Spark's keyed "
            "state. Start over with `python -m streaming run --reset` (moves the checkpoint aside and reads the "
            "topics again), or move that checkpoint's patterns directory "
            f"({checkpoint(settings)}) aside by hand to start the patterns query alone from scratch.")


def _starting(settings: Settings) -> str:
    return settings.patterns.starting_offsets or settings.kafka.starting_offsets


def _trigger(settings: Settings) -> str:
    return settings.patterns.trigger_interval or settings.spark.trigger_interval


def instance_quota_errors(tenants: Tenants, events_topic: str, batch_id: int, blocked: Collection[str],
                          live: Mapping[str, int]) -> list[tuple[str, ErrorRecord]]:
    """``(errors topic, error record)`` of each tenant that reached its ``pattern_instances``
    quota in batch ``batch_id``: at it with ``live`` instances after the batch, not ``blocked``
    (at it) before. A replayed batch gives the same records (same ids: the position is the
    events topic, partition -1 and the batch id)."""
    where = Position(events_topic, -1, batch_id)
    return [(topic_of(tenants.errors_topic, t), error(PATTERN_QUOTA, None, where,
                                                       tenants.instance_quota_reason(t, live[t])))
            for t in sorted(tenants.at_instance_quota(live) - set(blocked))]


class PatternSink:
    """The foreachBatch function of the ``patterns`` query, after the stateful processor
    (see the module docstring)."""

    def __init__(self, spark: SparkSession, settings: Settings, client_config: KafkaClientConfig):
        self.spark, self.settings, self.kafka = spark, settings, client_config
        self.live = LiveRecord(live_dir(settings))
        self.tenants = Tenants.of(settings)
        self.attributes = AttributeWarnings(settings, registry_dir(settings), self.tenants) \
            if settings.patterns.unknown_attribute_events > 0 else None

    def process(self, df: DataFrame, batch_id: int) -> None:
        """One micro-batch of the processor's output: send its records (from the tasks), add up
        the keys' changes of live instances, the quota records and the attribute warnings."""
        t0 = time.perf_counter()
        watermark_before, live_before = self.live.before(batch_id)
        blocked = self.tenants.at_instance_quota(live_before) if self.tenants is not None else frozenset()
        watch = self.attributes.watch() if self.attributes is not None else None
        rows = df.mapInArrow(partial(send_records, kafka=self.kafka), SENT_DDL).collect()
        sent = sum(r["sent"] for r in rows if r["kind"] == "sent")
        live = add_changes(live_before, [r["value"] for r in rows if r["kind"] == LIVE])
        watermark = max([watermark_before, *(r["watermark"] for r in rows if r["watermark"] is not None)])
        if self.tenants is not None:
            self.send_errors(instance_quota_errors(self.tenants, self.settings.kafka.events_topic, batch_id,
                                                   blocked, live))
        if self.attributes is not None:
            self.send_errors(self.attributes.note(batch_id, [r["value"] for r in rows if r["kind"] == CENSUS], watch))
        self.live.write(batch_id, watermark, live)
        log.info("patterns batch %d: watermark %d ms, %d live instances, %d records sent, %.0f ms",
                 batch_id, watermark, sum(live.values()), sent, (time.perf_counter() - t0) * 1e3)

    def send_errors(self, errors: list[tuple[str, ErrorRecord]]) -> None:
        """Send ``(topic, error record)`` pairs (the driver's own, few)."""
        if not errors:
            return
        from streaming.kafka.sink import produce_batches

        produce_batches(self.kafka, None, iter([pa.RecordBatch.from_pydict({
            "value": pa.array([e.to_json() for _, e in errors], pa.binary()),
            "topic": pa.array([t for t, _ in errors], pa.string())})]))
        for topic, e in errors:
            if e.stage != ATTRIBUTE_WARNING:  # logged when found (AttributeWarnings.note)
                log.warning("patterns: %s (to %s)", e.reason, topic)


class AttributeWarnings:
    """The driver's side of :mod:`streaming.patterns.census`: what keying watches, the census
    kept under the checkpoint, and the warnings (log, errors topic records, status)."""

    def __init__(self, settings: Settings, registry_dir: str, tenants: Tenants | None):
        p = settings.patterns
        self.settings, self.registry_dir, self.tenants = settings, registry_dir, tenants
        self.census = census.load(checkpoint(settings), p.unknown_attribute_events, p.stream_attribute_names)
        self.reserved = {p.stream_field: "stream field", p.time_field: "time field (the record's end: DUR)",
                         p.start_field: "start-time field (DUR)", settings.match.event_id_field: "event id field"}
        self.shown: list[dict[str, Any]] | None = None

    def watch(self) -> census.Watch | None:
        """What the keying tasks of the next batch tally (``None``: every read is resolved)."""
        got = current(self.registry_dir)
        return self.census.watch(got.version, got.patterns)

    def note(self, batch_id: int, tallies: list[bytes], watch: census.Watch | None) -> list[tuple[str, ErrorRecord]]:
        """Merge a batch's tallies; log each new unknown read once and return its errors-topic
        record; keep the census (and the reads unknown now, for the status) under the checkpoint."""
        got = current(self.registry_dir)
        version, patterns = got.version, got.patterns
        changed = self.census.merge(tallies, set(watch.names) if watch is not None else set())
        unknown = self.census.unknown(version, patterns)
        fresh = [u for u in unknown if u.key not in self.census.warned]
        out = []
        for u in fresh:
            log.warning("patterns: %s", u.reason(self.reserved))
            tenant, public = Tenants.split(u.pattern)
            k = self.settings.kafka
            out.append((topic_of(k.errors_topic, tenant),
                        census.warning_record(u, topic_of(k.subscriptions_topic, tenant), self.reserved, public)))
            self.census.warned.add(u.key)
        # a warned read stays unknown while its pattern version lives (names only grow, counts
        # stop at the settle point): the others are of deleted or replaced patterns
        pruned = self.census.warned - {u.key for u in unknown}
        self.census.warned -= pruned
        shown = [u.describe(self.reserved) for u in unknown]
        if changed or fresh or pruned or shown != self.shown:
            census.census_dir(checkpoint(self.settings)).write(census.FILE, self.census.to_json(unknown, self.reserved),
                                                               durable=False)
            self.shown = shown
        return out


STATE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
"""The state store of the ``patterns`` query (a setting of the service's ``spark.conf`` wins)."""


def keyed_watched(batches: Iterator[pa.RecordBatch], registry_uri: str, checkpoint_uri: str, settings: Settings,
                  kafka: KafkaClientConfig) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: :func:`~streaming.patterns.keyed.keyed_rows`, tallying the attributes
    that the census (as the driver left it after the previous batch) watches."""
    p = settings.patterns
    watch = None
    if p.unknown_attribute_events > 0:
        got = current(registry_uri)
        watch = census.load(checkpoint_uri, p.unknown_attribute_events, p.stream_attribute_names).watch(got.version,
                                                                                                          got.patterns)
    yield from keyed_rows(batches, registry_dir=registry_uri, settings=settings, kafka=kafka, watch=watch)


def pattern_plan(src: DataFrame, settings: Settings, client_config: KafkaClientConfig) -> DataFrame:
    """The ``patterns`` query from Kafka records to the processor's output rows
    (:data:`~streaming.patterns.processor.OUT_DDL`): keyed, watermarked by event end, grouped by state key."""
    from streaming.patterns.processor import OUT_DDL, PatternProcessor

    p = settings.patterns
    rdir = registry_dir(settings)
    keyed = src.select("value", "topic", "partition", "offset", "timestamp").mapInArrow(
        partial(keyed_watched, registry_uri=rdir, checkpoint_uri=checkpoint(settings), settings=settings,
                kafka=client_config), ROWS_DDL)
    return (keyed.selectExpr("*", f"timestamp_millis((t1 + 1) * {p.time_unit_ms}) AS event_end")
            .withWatermark("event_end", f"{interval_ms(p.watermark_delay)} milliseconds")
            # no filter of the marks here: Spark's optimizer pushes a filter that does not read the
            # event-time column below the watermark, and events without a key would move it no more
            # (a heartbeat would not fire the last events' timers); the processor drops them
            .select("gkey", *PENDING)  # no event-time column: Spark drops no late event, the operator reports it
            .groupBy("gkey")
            .transformWithStateInPandas(PatternProcessor(rdir, live_dir(settings), settings), OUT_DDL, "append",
                                        "EventTime"))


def start_patterns_query(spark: SparkSession, settings: Settings, client_config: KafkaClientConfig) -> StreamingQuery:
    """The stateful query: events keyed by partition value, instances in Spark's keyed state
    (``patterns.state_partitions`` state store partitions, fixed for a checkpoint)."""
    from streaming import kafka

    kafka.register(spark)
    refuse_old_layout(settings)
    Directory(registry_dir(settings)).sub(view.VIEWS).make()  # exists before the executors read it
    sink = PatternSink(spark, settings, client_config)
    src = kafka.read_stream(spark, client_config, settings.kafka.events_topic, starting=_starting(settings),
                            max_per_trigger=settings.kafka.max_offsets_per_trigger or None,
                            use_java_connector=settings.kafka.use_java_connector)
    with query_conf(spark, settings):
        return (pattern_plan(src, settings, client_config).writeStream.foreachBatch(sink.process)
                .option("checkpointLocation", join(checkpoint(settings), "patterns"))
                .queryName("patterns").trigger(processingTime=_trigger(settings)).start())


@contextmanager
def query_conf(spark: SparkSession, settings: Settings) -> Iterator[None]:
    """The session's settings for starting the ``patterns`` query: ``patterns.state_partitions``
    shuffle partitions and :data:`STATE_CONF`. The query's session takes a copy of them at
    start (and its checkpoint keeps them); the session's own come back after."""
    conf = {"spark.sql.shuffle.partitions": str(settings.patterns.state_partitions),
            **{k: v for k, v in STATE_CONF.items() if k not in settings.spark.conf}}
    saved = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def starters(settings: Settings, spark: SparkSession, client_config: KafkaClientConfig) -> list[Callable[[], StreamingQuery]]:
    """How to start the patterns query (the service supervises it), or nothing when disabled."""
    if not settings.patterns.enabled:
        return []
    return [partial(start_patterns_query, spark, settings, client_config)]

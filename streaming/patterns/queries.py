"""The two patterns queries, started by the service (:func:`starters`).

* ``pattern-subscriptions`` reads the subscriptions topic (and every tenant's) and keeps the
  pattern registry (:mod:`streaming.patterns.registry`); its bad pattern records go to the
  errors topic of the record's tenant.
* ``patterns`` reads the events topic; its foreachBatch function (:class:`PatternJob`) keys
  the events (:mod:`streaming.patterns.keyed`), computes the event-time watermark (the
  largest event time seen, minus ``patterns.watermark_delay``), and runs one task per state
  partition (:func:`run_partitions`): the pattern operator
  (:class:`~streaming.patterns.operator.PatternOperator`) over the partition's state
  (:mod:`streaming.patterns.state`), its notifications and error records sent to their
  topics by the task. Every partition runs every batch, with or without events, so timers
  fire when the watermark passes them. Each partition reports its live instances per
  tenant; the driver sums them, records them with the watermark, and the tenants at their
  ``pattern_instances`` quota start no new instances in the next batch (one error record,
  stage ``pattern-quota``, on the tenant's errors topic when it reaches it). The keying tasks'
  attribute tallies come back the same way, for the unknown-attribute warning
  (:class:`AttributeWarnings`, :mod:`streaming.patterns.census`).

The collector: the keying and the partition tasks run with the cyclic garbage collector
paused and end with one collection of what the task left and a freeze of what survives
(:func:`matchers.collector.long_lived`: the compiled patterns, the cached state, the imported
modules). Spark's reused Python worker runs a full ``gc.collect()`` after every task: in
process, with 1,000 patterns and the modules a worker imports, that took 0.4 to 1.0 s per
task, and the operator spent 75 to 78 µs per event against 31 with the freeze (keying 21 to
23 against 11; 40,000 events, load 8 to 9, 2026-11-25).

Both checkpoint under ``<spark.checkpoint_dir>/patterns`` (the registry under it too), start
from ``patterns.starting_offsets`` and trigger every ``patterns.trigger_interval``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from matchers.collector import long_lived
from streaming.config import Settings, interval_ms
from streaming.kafka.client_config import KafkaClientConfig
from streaming.patterns import census
from streaming.patterns.census import ATTRIBUTE_WARNING, CENSUS_KEY
from streaming.patterns.keyed import (
    NO_KEY,
    ROWS_DDL,
    ROWS_SCHEMA,
    event_time_ms,
    keyed_rows,
)
from streaming.patterns.operator import PatternOperator, live_instances
from streaming.patterns.registry import PatternRegistry, apply_pattern_records, load_registry
from streaming.patterns.state import StateError, StateStore
from streaming.records import ErrorRecord, Position, error
from streaming.storage import join
from streaming.tenants import Tenants, topic_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming.patterns")

OUT_DDL = "key binary, value binary, topic string"
PATTERN_QUOTA = "pattern-quota"
"""Stage of the error record of a tenant reaching its ``pattern_instances`` quota."""
RESULT_SCHEMA = pa.schema([("part", pa.int32()), ("watermark", pa.int64()), ("events", pa.int64()),
                           ("keys", pa.int64()), ("instances", pa.int64()), ("pending", pa.int64()),
                           ("sent", pa.int64()), ("live", pa.map_(pa.string(), pa.int64())),
                           ("census", pa.list_(pa.binary()))])
"""One row per state partition and batch: the watermark after the batch, the partition's new
events, keys, live instances and pending events after the batch, the records it sent, its
live instances per tenant (the operator's under ``""``) and the keying tasks' census tallies
that reached it (:mod:`streaming.patterns.census`)."""
RESULT_DDL = ("part int, watermark long, events long, keys long, instances long, pending long, sent long, "
              "live map<string, long>, census array<binary>")


def checkpoint(settings: Settings) -> str:
    """Where the patterns queries keep their checkpoints and the registry."""
    return join(settings.checkpoint, "patterns")


def registry_dir(settings: Settings) -> str:
    return join(checkpoint(settings), "pattern-registry")


def state_dir(settings: Settings) -> str:
    """Where the state partitions' snapshots live (:class:`~streaming.patterns.state.StateStore`)."""
    return join(checkpoint(settings), "pattern-state")


def _starting(settings: Settings) -> str:
    return settings.patterns.starting_offsets or settings.kafka.starting_offsets


def _trigger(settings: Settings) -> str:
    return settings.patterns.trigger_interval or settings.spark.trigger_interval


def start_subscriptions_query(spark: SparkSession, settings: Settings, client_config: KafkaClientConfig) -> StreamingQuery:
    """The query keeping the pattern registry from the subscriptions topic."""
    from streaming import kafka

    kafka.register(spark)
    registry = PatternRegistry(registry_dir(settings))
    config, k, tenants = client_config, settings.kafka, Tenants.of(settings)

    def on_batch(df: DataFrame, batch_id: int) -> None:
        rows = [(r.key, r.value, r.topic, r.partition, r.offset)
                for r in df.select("key", "value", "topic", "partition", "offset").collect()]
        version, errors = apply_pattern_records(registry, batch_id, rows, settings.limits, tenants)
        if errors:
            err_df = spark.createDataFrame([(None, e.to_json(), k.errors_topic if tenants is None else
                                             tenants.errors_topic_of(e.position.topic)) for e in errors], OUT_DDL)
            kafka.write_batch(err_df, config, use_java_connector=k.use_java_connector)
        log.info("pattern registry at version %d after batch %d (%d errors)", version, batch_id, len(errors))

    topics = [k.subscriptions_topic] if tenants is None else list(tenants.subscription_topics)
    src = kafka.read_stream(spark, config, topics, starting=_starting(settings), use_java_connector=k.use_java_connector)
    return (src.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", join(checkpoint(settings), "pattern-subscriptions"))
            .queryName("pattern-subscriptions").trigger(processingTime=_trigger(settings)).start())


def run_partitions(batches: Iterator[pa.RecordBatch], batch_id: int, watermark_ms: int, settings: Settings,
                   kafka: KafkaClientConfig, registry_uri: str, state_uri: str,
                   blocked: Collection[str] = ()) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of one task of the ``patterns`` query, after the shuffle by state
    partition: for each partition among its rows (:data:`~streaming.patterns.keyed.ROWS_SCHEMA`;
    each partition has the marks of every keying task, :func:`~streaming.patterns.keyed.partition_marks`),
    the watermark moves from ``watermark_ms`` (the previous batch's) to the latest event time of
    the batch minus ``patterns.watermark_delay``; the operator runs from the state before
    ``batch_id`` (under ``state_uri``, with the patterns of the registry at ``registry_uri``:
    URIs made on the driver; the tenants ``blocked`` start no new instances), the output
    records are sent, then the state is written. One :data:`RESULT_SCHEMA` row per partition."""
    from streaming.kafka.sink import produce_batches

    with long_lived():  # the module docstring (the collector)
        table = pa.Table.from_batches([rb.cast(ROWS_SCHEMA) for rb in batches], schema=ROWS_SCHEMA)
        is_census = pc.equal(table.column("gkey"), CENSUS_KEY).to_numpy(zero_copy_only=False)
        census = table.filter(pa.array(is_census)).column("attrs").to_pylist()
        table = table.filter(pa.array(~is_census))
        op = PatternOperator(registry_uri, settings)
        store = StateStore(state_uri)
        delay = interval_ms(settings.patterns.watermark_delay)
        parts = table.column("part").to_numpy()
        results: list[tuple[Any, ...]] = []
        for part in sorted(set(parts.tolist())):
            rows = table.filter(pa.array(parts == part))
            latest = pc.max(rows.column("t1")).as_py()
            watermark = watermark_ms if latest is None else max(
                watermark_ms, event_time_ms(latest, settings.patterns.time_unit_ms) - delay)
            events = {c: rows.column(c).to_pylist() for c in rows.column_names}
            new, out = op.run(store.load(part, batch_id), events, watermark, blocked)
            if out:
                keys, values, topics = zip(*out, strict=True)
                produce_batches(kafka, None, iter([pa.RecordBatch.from_arrays(
                    [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(topics, pa.string())],
                    names=["key", "value", "topic"])]))
            store.save(part, batch_id, new)
            live = live_instances(new)
            results.append((part, watermark, sum(g != NO_KEY for g in events["gkey"]), len(new), sum(live.values()),
                            sum(len(ks.pending["t1"]) for ks in new.values()), len(out), list(live.items()),
                            census if not results else []))
    yield pa.RecordBatch.from_pylist([dict(zip(RESULT_SCHEMA.names, r, strict=True)) for r in results],
                                     schema=RESULT_SCHEMA)


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


class PatternJob:
    """The foreachBatch function of the ``patterns`` query (see the module docstring)."""

    def __init__(self, spark: SparkSession, settings: Settings, client_config: KafkaClientConfig):
        self.spark, self.settings, self.kafka = spark, settings, client_config
        self.registry_dir = registry_dir(settings)
        PatternRegistry(self.registry_dir)  # exists before the executors read it
        self.state_uri = state_dir(settings)
        self.store = StateStore(self.state_uri)
        self.partitions = settings.patterns.state_partitions
        self.store.check(self.partitions)
        self.tenants = Tenants.of(settings)
        self.attributes = AttributeWarnings(settings, self.registry_dir, self.tenants) \
            if settings.patterns.unknown_attribute_events > 0 else None

    def process(self, df: DataFrame, batch_id: int) -> None:
        """One micro-batch: key the events, shuffle them by state partition, run every partition."""
        t0 = time.perf_counter()
        before, live_before = self.store.before(batch_id)
        blocked = self.tenants.at_instance_quota(live_before) if self.tenants is not None else frozenset()
        if blocked:
            log.info("patterns batch %d: tenants %s at their pattern_instances quota start no new instances",
                     batch_id, sorted(blocked))
        # the marks of a task with no events, so that every partition runs even when no source task does
        none = self.spark.range(0, self.partitions, 1, 1).selectExpr(
            f"'{NO_KEY}' AS gkey", "CAST(id AS INT) AS part", "CAST(NULL AS LONG) AS t0", "CAST(NULL AS LONG) AS t1",
            "CAST(NULL AS STRING) AS eid", "CAST(NULL AS STRING) AS stream", "CAST(NULL AS BINARY) AS attrs",
            "CAST(NULL AS INT) AS partition", "CAST(NULL AS LONG) AS offset")
        watch = self.attributes.watch() if self.attributes is not None else None
        keyed = df.select("value", "topic", "partition", "offset", "timestamp").mapInArrow(
            partial(keyed_rows, registry_dir=self.registry_dir, settings=self.settings, kafka=self.kafka,
                    watch=watch), ROWS_DDL)
        results = (keyed.unionByName(none).repartition(self.partitions, "part")
                   .mapInArrow(partial(run_partitions, batch_id=batch_id, watermark_ms=before,
                                       settings=self.settings, kafka=self.kafka, registry_uri=self.registry_dir,
                                       state_uri=self.state_uri, blocked=blocked), RESULT_DDL).collect())
        if {r["part"] for r in results} != set(range(self.partitions)) or len({r["watermark"] for r in results}) != 1:
            raise StateError(f"patterns batch {batch_id}: partitions {sorted((r['part'], r['watermark']) for r in results)}"
                             f" (expected each of {self.partitions} once, with one watermark)")
        watermark = results[0]["watermark"]
        live: Counter[str] = Counter()
        for r in results:
            live.update(dict(r["live"]))
        if self.tenants is not None:
            self.send_errors(instance_quota_errors(self.tenants, self.settings.kafka.events_topic, batch_id,
                                                   blocked, live))
        if self.attributes is not None:
            self.send_errors(self.attributes.note(batch_id, [b for r in results for b in r["census"] or ()], watch))
        self.store.write_batch(batch_id, watermark, dict(live))
        total = [sum(r[i] for r in results) for i in range(2, len(RESULT_SCHEMA) - 2)]
        log.info("patterns batch %d: %d keyed events, watermark %d ms, %d keys, %d instances, %d pending, "
                 "%d records sent, %.0f ms", batch_id, total[0], watermark, *total[1:],
                 (time.perf_counter() - t0) * 1e3)

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
        version, _, patterns = load_registry(self.registry_dir)
        return self.census.watch(version, patterns)

    def note(self, batch_id: int, tallies: list[bytes], watch: census.Watch | None) -> list[tuple[str, ErrorRecord]]:
        """Merge a batch's tallies; log each new unknown read once and return its errors-topic
        record; keep the census (and the reads unknown now, for the status) under the checkpoint."""
        version, _, patterns = load_registry(self.registry_dir)
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


def start_patterns_query(spark: SparkSession, settings: Settings, client_config: KafkaClientConfig) -> StreamingQuery:
    """The stateful query: events keyed by partition value, instances in the state partitions."""
    from streaming import kafka

    kafka.register(spark)
    job = PatternJob(spark, settings, client_config)
    src = kafka.read_stream(spark, client_config, settings.kafka.events_topic, starting=_starting(settings),
                            max_per_trigger=settings.kafka.max_offsets_per_trigger or None,
                            use_java_connector=settings.kafka.use_java_connector)
    return (src.writeStream.foreachBatch(job.process)
            .option("checkpointLocation", join(checkpoint(settings), "patterns"))
            .queryName("patterns").trigger(processingTime=_trigger(settings)).start())


def starters(settings: Settings, spark: SparkSession, client_config: KafkaClientConfig) -> list[Callable[[], StreamingQuery]]:
    """How to start both queries (the service supervises them), or none when disabled."""
    if not settings.patterns.enabled:
        return []
    return [partial(start_subscriptions_query, spark, settings, client_config),
            partial(start_patterns_query, spark, settings, client_config)]

"""The "match" query: its foreachBatch function (:meth:`MatchJob.process`) and the driver's state.

Each micro-batch hands off to the package's other modules: :mod:`~streaming.match.changes`
(the subscription records, as columns, become the columnar registry's next version; new
subscriptions meet the still-valid events of earlier batches), :mod:`~streaming.match.tasks` (the batch's tasks: event ranges times
groups of shards, pinned to executors on a cluster with shards, :mod:`streaming.placement`)
and :mod:`~streaming.match.executor` (one RDD job: each task reads its event ranges from
Kafka, matches them, produces its records itself and returns one row to the driver).

Spark's checkpoint gives each micro-batch's offset ranges (:func:`logged_ranges`, read
through :mod:`streaming.storage` from any Hadoop-compatible checkpoint location: the offset
log, and the source's initial offsets for the first batch): the driver never reads events
and does not parse subscription records one by one: the batch's subscription ranges are
read and parsed by the tasks of one RDD job (:func:`~streaming.match.changes.parse_in_tasks`;
none without subscription records, and none for a few, which the driver reads and parses
itself, but for many the fast parse refuses: those go to the job as the bytes it read) and the
driver gets their rows as columns; a micro-batch runs at most two Spark jobs (the match job:
none without events) and no record passes through the JVM but those bytes. The driver keeps the registry as columns
(:class:`~streaming.registry_columns.ColumnRegistry` under ``<checkpoint>/registry-columns``:
no Python object per subscription) and sends the tasks its location and the batch's
version; each executor builds or catches up its index from the registry's files, so the
checkpoint location must be one every executor reaches (as it is for Spark's own state).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming.config import Settings
from streaming.errors import CheckpointError
from streaming.executor_cache import IndexSpec
from streaming.kafka import offsets
from streaming.kafka.admin import partition_counts
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.offsets import OffsetMap, OffsetRange
from streaming.kafka.sink import produce_batches
from streaming.match.changes import (
    new_subscriptions,
    parse_in_tasks,
    retro_notifications,
)
from streaming.match.executor import match_pinned, match_ranges
from streaming.match.tasks import (
    TASK_EVENTS,
    BatchContext,
    TaskMetrics,
    TaskResult,
    out_batch,
    pinned_tasks,
    plan_tasks,
)
from streaming.metrics import BatchMetrics, StatusFile
from streaming.patterns.queries import legacy_registry_dir
from streaming.placement import ShardAnchors, pinned_bins
from streaming.registry_columns import EXPRESSION, ColumnRegistry
from streaming.registry_columns.admit import admit, warm
from streaming.registry_columns.migrate import convert_pickled, import_patterns
from streaming.routing import routing_of
from streaming.storage import Directory, join
from streaming.tenants import Tenants
from streaming.validity import ValidityStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.patterns.census import CurrentWarnings
    from streaming.spark import WorkerKeeper

log = logging.getLogger("streaming.match")


def logged_ranges(query_checkpoint: str, batch_id: int) -> list[OffsetRange] | None:
    """The offset ranges of micro-batch ``batch_id`` (every topic), from the query's checkpoint.

    Spark writes ``offsets/<batch>`` under the query's checkpoint location (a URI or path;
    a version line, a metadata line, then the end offsets of each source as JSON) before it
    runs the batch, which starts where the previous batch ended; the first batch starts at
    the source's initial offsets, in ``sources/0/0`` (the query's one source: the Java
    connector writes it, and ``kafka-py`` with ``initialOffsetsLog``, as :meth:`MatchJob.start`
    gives it; :func:`~streaming.kafka.offsets.read_initial_offsets`). ``None`` when the
    checkpoint does not say.
    """
    log_dir = Directory(join(query_checkpoint, "offsets"))

    def ends(batch: int) -> OffsetMap | None:
        try:
            if batch < 0:
                return offsets.read_initial_offsets(Directory(join(query_checkpoint, "sources", "0")).read("0"))
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


def _topic_exists(client_config: KafkaClientConfig) -> Callable[[str], bool]:
    """Whether a topic exists (asking the broker about a topic not seen before)."""
    known: set[str] = set()

    def exists(topic: str) -> bool:
        if topic not in known:
            known.update(partition_counts(client_config, [topic]))
        return topic in known

    return exists


def tenant_usage(tenants: Tenants, held: Mapping[tuple[str, int], tuple[int, int]], patterns: Iterable[str] = (),
                 instances: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Each tenant's usage and quotas, for the status file: its expressions and their predicates
    (``held``: :meth:`ColumnRegistry.held`), its patterns (the registry's pattern ids
    ``patterns``) and its live pattern instances after the last patterns batch (``instances``)."""
    count = Counter(Tenants.split(p)[0] for p in patterns)
    live = instances or {}
    out = {}
    for t in tenants.names:
        n, predicates = held.get((t, EXPRESSION), (0, 0))
        out[t] = {"subscriptions": n, "predicates": predicates, "patterns": count[t],
                  "pattern_instances": live.get(t, 0), "quotas": dict(tenants.quotas.get(t, {}))}
    return out


class _Beside(threading.Thread):
    """``fn`` run beside the batch's other steps (the registry's snapshot, which reads only its
    files, beside the retro matching and the match job: 0.9-1.7 s of the driver at 1,000,000
    subscriptions, ``scripts.bench.churn_steps``); after :meth:`join`, its error if it raised
    and its wall time."""

    def __init__(self, fn: Callable[[], None]):
        super().__init__(name="registry-snapshot", daemon=True)
        self.fn = fn
        self.error: BaseException | None = None
        self.ms = 0.0
        self.start()

    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            self.fn()
        except BaseException as exc:  # raised again by the batch, after the join
            self.error = exc
        self.ms = (time.perf_counter() - t0) * 1e3


# -- the query -----------------------------------------------------------------------------
class MatchJob:
    """The foreachBatch function of the match query and the state it keeps on the driver.

    Parameters
    ----------
    settings : the service's settings.
    spark : the session.
    client_config : the Kafka client configuration (bootstrap servers resolved).

    Subscription records are parsed by the language's parser (:func:`~streaming.records.default_parser`)
    in Spark tasks (on the driver: a batch's few); the registry stores each accepted expression
    packed (:mod:`matchers.packed`), which the executors and the retroactive matching unpack.
    """

    def __init__(self, settings: Settings, spark: SparkSession, client_config: KafkaClientConfig):
        self.settings = settings
        self.spark = spark
        self.client_config = client_config
        m = settings.match
        self.routing = routing_of(m.route_by, m.route_spread)
        self.registry = ColumnRegistry(settings.registry_columns_dir, m.shards, m.snapshot_every, m.snapshots_kept,
                                       self.routing)
        threading.Thread(target=warm, name="registry-warm", daemon=True).start()  # beside the query's start
        convert_pickled(settings.registry_dir, self.registry)  # a checkpoint of an earlier release, once
        import_patterns(legacy_registry_dir(settings), self.registry)  # its patterns' own registry, once
        self.validity = ValidityStore(settings.validity_dir)
        self.status = StatusFile(settings.status.status_file, settings.status.history)
        self.tenants = Tenants.of(settings)
        self.topic_exists = _topic_exists(client_config)
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
        self.keeper: WorkerKeeper | None = None
        """Keeps the Python workers and their indexes alive between batches (:meth:`start`)."""

    # foreachBatch
    def process(self, df: DataFrame, batch_id: int) -> None:
        """Handle one micro-batch (see the module docstring)."""
        with self._lock:
            self._process(df, int(batch_id))

    def _process(self, df: DataFrame, batch_id: int) -> None:
        t0 = time.perf_counter()
        k, m = self.settings.kafka, self.settings.match
        ranges = logged_ranges(self.query_checkpoint, batch_id)
        if ranges is None:
            raise CheckpointError(f"the checkpoint {self.query_checkpoint} does not say where batch {batch_id} starts"
                                  " (offsets/, or sources/0/0 for the first batch)")
        sub_topics = self.subscription_topics
        parsed = parse_in_tasks(self.spark.sparkContext, self.client_config,
                                [r for r in ranges if r.topic in sub_topics], m.max_terms, self.settings.limits,
                                self.tenants is not None, route_by=m.route_by)
        t_parsed = time.perf_counter()
        admitted = admit(parsed, self.registry, batch_id, self.tenants, self.topic_exists, time.time(), k.errors_topic)
        now = admitted.now  # a replay's: the time it recorded
        t_admitted = time.perf_counter()
        applied = self.registry.apply(batch_id, admitted.changes, now, snapshot=False)
        t1 = time.perf_counter()
        beside = _Beside(self.registry.snapshot) if self.registry.snapshot_due else None
        try:
            # a replay adds none (it notified them the first time); the new subscriptions are read
            # back only when there are still-valid events to match them with
            valid = self.validity.valid_events(batch_id, now) if applied.added or applied.replaced else []
            new = new_subscriptions(self.registry.directory, applied.version) if valid else []
            retro, retro_errors = retro_notifications(
                m.matcher, new, valid, batch_id,
                self.settings.notifications.payload,
                self.settings.limits.message_bytes, self.tenants, m.matcher_params())
            index = IndexSpec(self.registry.directory.uri, m.matcher, applied.version, m.max_catchup_versions, 0, m.shards,
                              self.spark.sparkContext.applicationId if m.shared_index else None, m.matcher_params(),
                              self.routing)
            ctx = BatchContext.of(self.settings, batch_id, now, index, self.client_config)
            driver_rows: list[tuple[bytes | None, bytes, str]] = [(None, e.to_json(), k.errors_topic) for e in retro_errors]
            errors = admitted.errors
            driver_rows += [(None, value, topic) for value, topic in
                            zip(errors.column("value").to_pylist(), errors.column("topic").to_pylist(), strict=True)]
            for sid, value in retro:
                topic, public = (k.notifications_topic, sid) if self.tenants is None else self.tenants.route(sid)
                driver_rows.append((public.encode("utf-8"), value, topic))
            if driver_rows:
                keys, values, topics = zip(*driver_rows, strict=True)
                produce_batches(self.client_config, None, iter([out_batch(keys, values, topics)]))
            t2 = time.perf_counter()
            events = [r for r in ranges if r.topic == k.events_topic]
            rows_out = self._match(events, ctx) if events else []
            results = [TaskResult.from_row(r) for r in rows_out]
            v = TaskMetrics.total(r.metrics for r in results)
            self._note_index([r.index for r in results if r.index])
            self._note_placement(results)
            self.validity.write(batch_id, [e for r in results for e in r.valid_events])
        finally:  # the next batch prunes: the snapshot is whole before it starts
            if beside is not None:
                beside.join()
        if beside is not None and beside.error is not None:
            raise beside.error
        t3 = time.perf_counter()
        input_rows = parsed.num_rows + v.events + v.errors
        self.validity.prune(now)
        metrics = BatchMetrics(
            batch_id=batch_id, input_rows=input_rows, events=v.events, subscription_records=parsed.num_rows,
            subscription_changes=admitted.accepted, expired=0 if applied.replay else admitted.expired,
            rejected=errors.num_rows,
            event_errors=v.errors, matches=v.matches, retro_matches=len(retro), valid_events_kept=v.valid,
            match_ms=v.match_ns / 1e6, index_ms=v.index_ns / 1e6, read_ms=v.read_ns / 1e6,
            task_ms=v.task_ns / 1e6, batch_ms=(time.perf_counter() - t0) * 1e3,
            changes_ms=(t1 - t0) * 1e3, parse_ms=(t_parsed - t0) * 1e3, admit_ms=(t_admitted - t_parsed) * 1e3,
            apply_ms=(t1 - t_admitted) * 1e3, retro_ms=(t2 - t1) * 1e3, write_ms=(t3 - t2) * 1e3,
            snapshot_ms=beside.ms if beside is not None else 0.0,
            registry_version=applied.version, subscriptions=len(self.registry), index_bytes=v.index_bytes,
            replay=applied.replay,
        )
        self.last = metrics
        self.history = (self.history + [metrics])[-1000:]
        self.batches += 1
        log.info(metrics.log_line())
        extra: dict[str, Any] = {}
        if self.tenants is not None:
            extra["tenants"] = self.describe_tenants()
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
            rows = sc.parallelize(range(len(todo)), len(todo)).mapPartitions(
                partial(match_ranges, ctx=ctx, todo=todo)).collect()
        else:
            made = self.anchors.made
            anchors, groups = self.anchors.current(sc)
            if self.anchors.made != made:
                self.placement = {}
            bins = pinned_bins(events, len(groups), sc.defaultParallelism, TASK_EVENTS)
            pinned = pinned_tasks(bins, groups)
            rows = anchors.cartesian(sc.parallelize(range(len(bins)), len(bins))).mapPartitions(
                partial(match_pinned, ctx=ctx, todo=pinned, n_bins=len(bins))).collect()
        if self.keeper is not None:
            self.keeper.touch()
        return rows

    def _note_placement(self, results: list[TaskResult]) -> None:
        """Count the tasks that matched each shard on each executor (:attr:`placement`)."""
        for r in results:
            for shard in r.shards:
                where = self.placement.setdefault(shard, {})
                where[r.executor] = where.get(r.executor, 0) + 1

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

    def _note_index(self, described: list[dict[str, Any]]) -> None:
        """Keep the distinct indexes the tasks describe; log when one is chosen anew."""
        distinct = {json.dumps(d): d for d in described}
        index = [distinct[text] for text in sorted(distinct)]
        if not index:
            return
        chosen = sorted({(d["matcher"], d.get("reason", "")) for d in index})
        if chosen != sorted({(d["matcher"], d.get("reason", "")) for d in self.index}):
            log.info("index: %s", "; ".join(f"{name} ({reason})" if reason else name for name, reason in chosen))
        self.index = index

    def describe_tenants(self) -> dict[str, Any]:
        """:func:`tenant_usage` now (the tenants layout only)."""
        assert self.tenants is not None
        return tenant_usage(self.tenants, self.registry.held(), self.pattern_ids(), self.pattern_instances())

    def pattern_ids(self) -> list[str]:
        """The ids of the registry's live patterns."""
        return list(self.registry.patterns)

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
        from streaming.patterns.live import LiveRecord
        from streaming.patterns.queries import live_dir

        return LiveRecord(live_dir(self.settings)).latest() if self.settings.patterns.enabled else {}

    @property
    def subscription_topics(self) -> tuple[str, ...]:
        """The topics subscription records are read from (every tenant's with tenants)."""
        if self.tenants is None:
            return (self.settings.kafka.subscriptions_topic,)
        return self.tenants.subscription_topics

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
                         use_java_connector=k.use_java_connector,
                         options=None if k.use_java_connector else
                         {"initialOffsetsLog": join(self.query_checkpoint, "sources", "0")})
        self.status.write("starting", registry=dict(self.registry.describe()))
        query = (df.writeStream.queryName("match")
                 .foreachBatch(self.process)
                 .option("checkpointLocation", self.query_checkpoint)
                 .trigger(processingTime=s.trigger_interval)
                 .start())
        if self.keeper is not None:  # a restarted query's: the new one takes over
            self.keeper.stop()
            self.keeper = None
        if s.worker_keepalive_s:
            # imported here: the driver's only, not on the executors' imports of this package
            from streaming.spark import WorkerKeeper

            self.keeper = WorkerKeeper(spark.sparkContext, s.worker_keepalive_s, lambda: bool(query.isActive))
            self.keeper.start()
        return query

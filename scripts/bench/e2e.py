"""End-to-end benchmark of the match service: Kafka in, Spark micro-batches, Kafka out.

For each subscription count (100,000 and 1,000,000; ``--quick``: 100,000 with fewer
events) on Fabret et al.'s workload W1 (Table 1: two fixed ``=``, one fixed ``<=`` and
one free ``=`` predicate per subscription, events of 32 attributes, values 1..35), it
runs its own embedded broker and the service's match query in this process and measures:

* **registration**: the subscriptions sent as records (JSON form) until the registry holds them;
* **sustained events/s**: a backlog of ``--events`` events is put on the events topic
  while the query is stopped, then the query restarts and drains it; events divided by
  the wall time of the drain (and by the summed batch times). The drain includes the
  query's start (PySpark starts the Python data source's runner process);
* **steady events/s**: the same backlog put on the topic while the query runs, idle after
  a batch; events divided by the wall time from the first record produced to the last
  batch's end (no query start);
* **latency**: a producer offers ``--rate`` events/s for ``--duration`` seconds while a
  reader takes the notifications off their topic; produce-to-notification latency is
  the reader's receive time minus the event record's Kafka timestamp (p50, p99, max);
* **churn** (``--churn R``): the latency run again while ``R`` subscription changes/s are
  offered on the subscriptions topic (a third each: an id given a new expression, an id
  cancelled, a new id; ids repeat, so one id changes several times in a batch), next to the
  run without; afterwards the registry must hold as many subscriptions as the changes applied
  in order leave;
* **where the time goes**: the per-event cost of each executor step measured in this
  process (JSON parsing, flattening, encoding, matching, building notifications) and the
  plain read rate of the ``kafka-py`` source into Spark, next to the batch times;
* **Spark SQL baseline**, the way a Spark user would write the matching: predicates
  exploded into a table, events parsed and exploded into (event, attribute, value), a
  join on the attribute, the operator applied in a filter, and the satisfied predicates
  counted per (event, subscription); a subscription matches when the count equals its
  number of predicates. It runs on a sample of the events (it is far slower) and its
  matches are checked against the service's matcher on that sample.

Results: ``docs/bench/e2e.json`` (``--out``), its tables in ``docs/bench/e2e.md`` and plot in
``docs/bench/e2e.png``; docs/e2e.md holds the figures chosen from such runs, by hand.

Usage: ``python -m scripts.bench.e2e [--quick] [--subs 100000,1000000] [--events N] [--connectors java,kafka-py]``
(each connector measured in turn on the same broker and Spark session).
Past about 1,000,000 subscriptions give ``--sql-events 0 --cost-events 0``: those two steps hold
every subscription as an object in this process (the rest generates and sends them one at a time).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from tqdm import tqdm

from scripts.bench import e2e_threads, kit
from scripts.bench.e2e_report import registration_line, registration_phases, save
from scripts.bench.feed import (
    READER_SETTINGS,
    WORKLOAD,
    produce_all,
    producer,
    subscription_records,
    workload_events,
    workload_subscriptions,
)
from streaming.kafka.client_config import KafkaClientConfig

DOCS = Path(__file__).resolve().parents[2] / "docs"


def log(msg: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def worker_memory() -> list[dict[str, int]]:
    """Memory (:func:`scripts.bench.kit.process_memory`) of each Spark Python worker of this process."""
    out = []
    for pid in kit.python_workers(os.getpid()):
        try:
            out.append(kit.process_memory(pid))
        except OSError:
            pass  # ended meanwhile
    return out


def cpu_delta(before: dict[str, float], n: int) -> dict[str, float]:
    """Microseconds of CPU per event of each kind since ``before`` (and their total)."""
    after = kit.cpu_by_kind()
    out = {k: 1e6 * (after[k] - before[k]) / max(1, n) for k in before}
    out["total"] = sum(out.values())
    return out


def step_costs(subs, events: list[dict], matcher_name: str):
    """Per-event microseconds of each executor step, in this process, and the matcher built for it."""
    from matchers.catalog import create
    from matchers.events import flatten
    from streaming import notifications
    from streaming.records import flat_event, load_json

    m = create(matcher_name)
    t = time.perf_counter()
    m.add(subs)
    build_s = time.perf_counter() - t
    raw = [orjson.dumps({"id": i, **e}) for i, e in enumerate(events)]
    m.match(m.encode([flatten(e) for e in events[:10]]))  # compile / load kernels
    t0 = time.perf_counter()
    objs = [load_json(v)[0] or {} for v in raw]
    t1 = time.perf_counter()
    flat = [flat_event(o) for o in objs]  # what the service does: flatten only nested objects
    t2 = time.perf_counter()
    batch = m.encode(flat)
    t3 = time.perf_counter()
    res = m.match(batch)
    t4 = time.perf_counter()
    got = notifications.matched(res.offsets, res.keys, m.ids_of)
    hits, bounds, ids, which = got.hits.tolist(), got.bounds, got.ids, got.which
    notifications.match_records(notifications.EventColumns(["events"] * len(hits), [0] * len(hits), hits, hits,
                                                           [raw[i] for i in hits], [1] * len(hits)),
                                bounds, ids, which, 2, 0, 2**62, ([], [], []), ids)
    t5 = time.perf_counter()
    n = len(events)
    return {"build_s": build_s, "parse_us": 1e6 * (t1 - t0) / n, "flatten_us": 1e6 * (t2 - t1) / n,
            "encode_us": 1e6 * (t3 - t2) / n, "match_us": 1e6 * (t4 - t3) / n, "notify_us": 1e6 * (t5 - t4) / n,
            "matches_per_event": res.total / n, "index_mb": m.memory_bytes() / 2**20}, m


def source_read_rate(spark, bootstrap: str, topic: str) -> float:
    """Records/s of a plain batch read of ``topic`` through the kafka-py source into a Spark count."""
    df = (spark.read.format("kafka-py").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())
    t = time.perf_counter()
    n = df.count()
    return n / (time.perf_counter() - t)


def _empty_task(numbers):
    for _ in numbers:
        pass
    yield {"n": 1}


def spark_job_overhead(spark, jobs: int = 20) -> dict[str, float]:
    """Wall time per job and CPU of an empty job of 2 tasks as the match job runs them (what every micro-batch pays)."""
    sc = spark.sparkContext
    for _ in range(3):
        sc.parallelize(range(2), 2).mapPartitions(_empty_task).collect()
    cpu0 = kit.cpu_by_kind()
    t = time.perf_counter()
    for _ in range(jobs):
        sc.parallelize(range(2), 2).mapPartitions(_empty_task).collect()
    wall = (time.perf_counter() - t) / jobs
    cpu = cpu_delta(cpu0, jobs)
    return {"wall_ms": 1e3 * wall, "python_cpu_ms_per_task": cpu["python workers"] / 1e3 / 2,
            "jvm_cpu_ms": cpu["jvm"] / 1e3, "load": os.getloadavg()[0]}


def spark_sql_matching(spark, subs, events: list[dict]) -> tuple[float, set[tuple[int, str]]]:
    """Seconds and (event, subscription) matches of the exploded-join formulation."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, MapType, StringType

    preds = []
    for s in subs:
        for c, conj in enumerate(s.conjunctions):
            for p in conj:
                preds.append((s.id, c, len(conj), p.attr, p.op.name, float(p.operand)))
    ptab = spark.createDataFrame(preds, "sub string, conj int, n_preds int, attr string, op string, operand double")
    etab = spark.createDataFrame([(i, orjson.dumps(e).decode()) for i, e in enumerate(events)], "event long, value string")
    exploded = etab.select("event", F.explode(F.from_json("value", MapType(StringType(), DoubleType()))).alias("attr", "v"))
    joined = exploded.join(ptab, "attr")
    holds = (F.when(F.col("op") == "EQ", F.col("v") == F.col("operand"))
             .when(F.col("op") == "NE", F.col("v") != F.col("operand"))
             .when(F.col("op") == "LT", F.col("v") < F.col("operand"))
             .when(F.col("op") == "LE", F.col("v") <= F.col("operand"))
             .when(F.col("op") == "GT", F.col("v") > F.col("operand"))
             .when(F.col("op") == "GE", F.col("v") >= F.col("operand"))
             .otherwise(F.lit(False)))
    counted = (joined.filter(holds).groupBy("event", "sub", "conj", "n_preds").count()
               .filter(F.col("count") == F.col("n_preds")).select("event", "sub").distinct())
    t = time.perf_counter()
    rows = counted.collect()
    return time.perf_counter() - t, {(int(r.event), r.sub) for r in rows}


class NotificationReader(threading.Thread):
    """Reads the notifications topic from its current end; records receive time minus event time."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        self.consumer = Consumer({**KafkaClientConfig.create(bootstrap).rdkafka("consumer"), **READER_SETTINGS})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
        self.latencies_ms: list[float] = []
        self.seen_events: set[str] = set()
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            for msg in self.consumer.consume(num_messages=5000, timeout=0.1):
                value = msg.value()
                if msg.error() or value is None:
                    continue
                now = time.time() * 1000
                doc = orjson.loads(value)
                eid = doc["event_id"]
                if eid in self.seen_events or doc.get("event_time_ms") is None:
                    continue
                self.seen_events.add(eid)
                self.latencies_ms.append(now - doc["event_time_ms"])
        self.consumer.close()


def offered_load(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], rate: float,
                 duration: float) -> int:
    """Offer ``records`` (key, value; cycled) at ``rate`` per second for ``duration`` seconds."""
    p = producer(bootstrap)
    start = time.perf_counter()
    sent = 0
    total = round(rate * duration)
    with tqdm(total=total, desc=f"{topic} {rate:.0f}/s", unit="rec", mininterval=2.0, file=sys.stderr) as bar:
        while sent < total:
            due = int((time.perf_counter() - start) * rate) + 1
            for _ in range(min(due, total) - sent):
                key, value = records[sent % len(records)]
                p.produce(topic, value=value, key=key)
                sent += 1
            p.poll(0)
            bar.n = sent
            bar.refresh()
            time.sleep(0.005)
    p.flush(60)
    return sent


def churn_records(n_subs: int, n_changes: int, seed: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """``n_changes`` subscription records, a third of each kind: an existing id given a new W1
    expression, an existing id cancelled, a new id added (existing ids drawn with repeats, so one
    id may change several times within a batch); and how many subscriptions the registry holds
    once they are all applied in order."""
    from matchers.language import to_json

    rng = np.random.default_rng(seed + 1)
    fresh = workload_subscriptions(n_changes, seed + 1)
    live = {f"s{i}" for i in range(n_subs)}
    records = []
    for i, (kind, target) in enumerate(zip(rng.integers(0, 3, n_changes).tolist(),
                                           rng.integers(0, n_subs, n_changes).tolist(), strict=True)):
        expr = next(fresh).expr
        sub_id = f"c{i}" if kind == 2 else f"s{target}"
        if kind == 1:
            live.discard(sub_id)
            records.append((sub_id.encode(), orjson.dumps({"op": "delete", "id": sub_id})))
        else:
            live.add(sub_id)
            records.append((sub_id.encode(), orjson.dumps({"op": "upsert", "id": sub_id, "json": to_json(expr)})))
    return records, len(live)


def latency_run(bootstrap: str, topics: dict[str, str], job, query, values: list[bytes], args: argparse.Namespace,
                changes: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    """Produce-to-notification latency while ``args.rate`` events/s are offered for
    ``args.duration`` s on the running query, with ``changes`` offered evenly over the same time
    on the subscriptions topic; the first tenth of the notifications (the start) is left out."""
    reader = NotificationReader(bootstrap, topics["notifications"], 2)
    reader.start()
    time.sleep(3)
    before = len(job.history)
    cpu0, threads0 = kit.cpu_by_kind(), e2e_threads.snapshot()
    churn = None
    if changes:
        churn = threading.Thread(target=offered_load, daemon=True,
                                 args=(bootstrap, topics["subscriptions"], changes, len(changes) / args.duration,
                                       args.duration))
        churn.start()
    offered = offered_load(bootstrap, topics["events"], [(None, v) for v in values], args.rate, args.duration)
    if churn:
        churn.join()
    query.processAllAvailable()
    time.sleep(2)
    reader.stop_flag.set()
    reader.join(30)
    lat = np.array(reader.latencies_ms)
    skip = int(len(lat) * 0.1)  # the first tenth: the query's start-up
    steady = lat[skip:] if len(lat) > 20 else lat
    batches = job.history[before:]
    return {
        "offered_per_s": args.rate, "duration_s": args.duration, "offered": offered,
        "events_notified": int(len(lat)),
        "p50_s": float(np.percentile(steady, 50) / 1e3) if len(steady) else None,
        "p99_s": float(np.percentile(steady, 99) / 1e3) if len(steady) else None,
        "max_s": float(steady.max() / 1e3) if len(steady) else None,
        "batch_ms_median": float(np.median([b.batch_ms for b in batches])) if batches else None,
        "batch_ms_max": float(max(b.batch_ms for b in batches)) if batches else None,
        "changes_ms_max": float(max(b.changes_ms for b in batches)) if batches else None,
        "events_per_batch_median": float(np.median([b.events for b in batches])) if batches else None,
        "changes_offered": len(changes or ()), "changes_applied": sum(b.subscription_changes for b in batches),
        "cpu_us_per_event": cpu_delta(cpu0, offered), "load_average": os.getloadavg(),
        "threads_us_per_event": e2e_threads.per_event(threads0, e2e_threads.snapshot(), offered),
        "steps_ms": {name: {"median": float(np.median([getattr(b, name) for b in batches])),
                            "max": float(max(getattr(b, name) for b in batches))} for name in BATCH_STEPS}
        if batches else {},
    }


def warm_up_events(task_events: int) -> int:
    """Events of the warm-up, taken as one batch (its ``maxOffsetsPerTrigger`` is this count, so
    it never binds): two tasks' worth (:func:`~streaming.match.tasks.plan_tasks`) and a tenth
    more. A binding limit of exactly two tasks' worth is shared between the partitions rounded
    down (19,999 of 20,000), which makes one task: it built all 8 shards of 10,000,000 alone."""
    return 2 * task_events + task_events // 5


BATCH_STEPS = ("parse_ms", "admit_ms", "apply_ms", "retro_ms", "index_ms", "read_ms", "match_ms", "task_ms",
               "write_ms", "batch_ms")
"""The :class:`~streaming.metrics.BatchMetrics` times a latency run reports (median and max over
its batches): the driver's steps for the subscription changes, then the match job's (``index_ms``:
the tasks' index builds and catch-up, summed over the tasks)."""


# -- one size --------------------------------------------------------------------------------
def run_size(spark, bootstrap: str, n_subs: int, args: argparse.Namespace, workdir: Path,
             connector: str = "java", run: int = 0) -> dict[str, Any]:
    from streaming.config import Settings
    from streaming.kafka.admin import ensure_topics
    from streaming.match import TASK_EVENTS, MatchJob

    seed = 7
    tag = f"e2e{n_subs}-{connector}-{run}"
    topics = {k: f"{tag}-{k}" for k in ("events", "subscriptions", "notifications", "errors")}
    client = KafkaClientConfig.create(bootstrap)
    ensure_topics(client, {topics["events"]: 2, topics["subscriptions"]: 1,
                                                     topics["notifications"]: 2, topics["errors"]: 1})
    log(f"{n_subs:,} subscriptions, {connector} connector: generating Fabret {WORKLOAD} with {args.events:,} events")
    n_warm = warm_up_events(TASK_EVENTS)
    events = workload_events(args.events + n_warm, seed)
    warm, backlog = events[:n_warm], events[n_warm:]
    settings = Settings().replace(
        kafka={"bootstrap_servers": bootstrap, "events_topic": topics["events"],
               "subscriptions_topic": topics["subscriptions"], "notifications_topic": topics["notifications"],
               "errors_topic": topics["errors"], "max_offsets_per_trigger": max(args.per_trigger, args.register_per_trigger or n_subs + 1),
               "use_java_connector": connector == "java"},
        spark={"checkpoint_dir": str(workdir / tag), "trigger_interval": "0 seconds",
               "worker_keepalive_s": args.keepalive},
        match={"matcher": args.matcher, "snapshot_every": 1000, "shards": args.shards},
        status={"status_file": str(workdir / f"{tag}-status.json")},
    )
    result: dict[str, Any] = {"n_subs": n_subs, "connector": connector, "workload": f"fabret-{WORKLOAD}",
                              "matcher": args.matcher,
                              "shards": args.shards,
                              "events": len(backlog), "per_trigger": args.per_trigger, "trigger": args.trigger,
                              "register_per_trigger": args.register_per_trigger}

    produce_all(bootstrap, topics["subscriptions"], subscription_records(workload_subscriptions(n_subs, seed)),
                "subscriptions", n_subs)
    job = MatchJob(settings, spark, client)
    t, started = time.perf_counter(), time.time()
    query = job.start()
    query.processAllAvailable()
    result["register_s"] = time.perf_counter() - t
    result["register_load"] = os.getloadavg()[0]
    result["register_batches"] = [dataclasses.asdict(b) for b in job.history]
    result["registered"] = len(job.registry)
    query.stop()
    # warm-up: one batch of two tasks (a smaller one is one task), so that both Python workers
    # build or map their indexes (and load the kernels) before the measurements
    job.settings = settings.replace(kafka={"max_offsets_per_trigger": n_warm})
    produce_all(bootstrap, topics["events"], [(None, orjson.dumps({"id": f"w{i}", **e})) for i, e in enumerate(warm)],
                "warm-up")
    registered, t = len(job.history), time.perf_counter()
    query = job.start()
    query.processAllAvailable()
    result["warmup_s"] = time.perf_counter() - t
    query.stop()
    result["register_phases"] = registration_phases(result["register_batches"], started, result["register_s"],
                                                    [dataclasses.asdict(b) for b in job.history[registered:]])
    log(registration_line(result))

    # sustained: drain a backlog
    job.settings = settings = settings.replace(kafka={"max_offsets_per_trigger": args.per_trigger})
    produce_all(bootstrap, topics["events"], [(None, orjson.dumps({"id": i, **e})) for i, e in enumerate(backlog)],
                "backlog")
    before = len(job.history)
    cpu0, threads0 = kit.cpu_by_kind(), e2e_threads.snapshot()
    t = time.perf_counter()
    query = job.start()
    query.processAllAvailable()
    wall = time.perf_counter() - t
    threads1 = e2e_threads.snapshot()  # before the query's threads end
    query.stop()
    batches = job.history[before:]
    drained = sum(b.events for b in batches)
    result["drain_cpu_us_per_event"] = cpu_delta(cpu0, drained)
    result["drain_threads_us_per_event"] = e2e_threads.per_event(threads0, threads1, drained)
    result["drain_load_average"] = os.getloadavg()
    result.update({
        "drain_wall_s": wall, "drained_events": drained, "events_per_s": drained / wall,
        "batches": len(batches), "batch_s_sum": sum(b.batch_ms for b in batches) / 1e3,
        "events_per_batch_s": drained / max(1e-9, sum(b.batch_ms for b in batches) / 1e3),
        "task_match_s_sum": sum(b.match_ms for b in batches) / 1e3,
        "task_index_s_sum": sum(b.index_ms for b in batches) / 1e3,
        "matches": sum(b.matches for b in batches), "index_mb": max(b.index_bytes for b in batches) / 2**20,
        "drain_batches": [dataclasses.asdict(b) for b in batches],
        "worker_memory": worker_memory(),
    })
    mem = result["worker_memory"]
    log(f"Python workers: {len(mem)}, PSS {sum(m['pss'] for m in mem) / 2**20:,.0f} MB in all "
        f"({', '.join(str(m['pss'] >> 20) for m in mem)} MB), largest task index {result['index_mb']:,.0f} MB")
    log(f"sustained: {drained:,} events in {wall:.1f} s = {result['events_per_s']:,.0f} events/s "
        f"({len(batches)} batches, {result['matches']:,} notifications); CPU us/event "
        + ", ".join(f"{k} {v:.0f}" for k, v in result["drain_cpu_us_per_event"].items())
        + f"; load {result['drain_load_average'][0]:.1f}; by thread: {e2e_threads.line(result['drain_threads_us_per_event'])}")

    # steady state: the same backlog again, put on the topic while the query runs (started,
    # idle after a batch), so that the drain holds no query start; this query (the latency
    # runs' too) triggers every --trigger
    job.settings = settings.replace(spark={"trigger_interval": args.trigger})
    query = job.start()
    query.processAllAvailable()
    time.sleep(2)
    before = len(job.history)
    cpu0 = kit.cpu_by_kind()
    t = time.perf_counter()
    produce_all(bootstrap, topics["events"], [(None, orjson.dumps({"id": f"s{i}", **e})) for i, e in enumerate(backlog)],
                "steady backlog")
    query.processAllAvailable()
    wall = time.perf_counter() - t
    batches = job.history[before:]
    drained = sum(b.events for b in batches)
    result["steady"] = {
        "wall_s": wall, "events": drained, "events_per_s": drained / wall, "batches": len(batches),
        "batch_s_sum": sum(b.batch_ms for b in batches) / 1e3, "matches": sum(b.matches for b in batches),
        "cpu_us_per_event": cpu_delta(cpu0, drained), "load_average": os.getloadavg(),
    }
    log(f"steady: {drained:,} events in {wall:.1f} s = {result['steady']['events_per_s']:,.0f} events/s "
        f"({len(batches)} batches); CPU us/event " + ", ".join(
            f"{k} {v:.0f}" for k, v in result["steady"]["cpu_us_per_event"].items())
        + f"; load {result['steady']['load_average'][0]:.1f}")

    # latency at a fixed offered rate, on the running query; then again with subscription
    # changes offered beside the events (--churn changes/s), and the registry checked after it
    values = [orjson.dumps({"id": f"l{i}", **e}) for i, e in enumerate(backlog[: int(args.rate * 10)])]
    result["latency"] = latency_run(bootstrap, topics, job, query, values, args)
    log(f"latency at {args.rate:,.0f}/s: p50 {result['latency']['p50_s']} s, p99 {result['latency']['p99_s']} s; CPU us/event "
        + ", ".join(f"{k} {v:.0f}" for k, v in result["latency"]["cpu_us_per_event"].items())
        + f"; by thread: {e2e_threads.line(result['latency']['threads_us_per_event'])}")
    if args.churn:
        changes, expected = churn_records(n_subs, int(args.churn * args.duration), seed)
        result["churn"] = latency_run(bootstrap, topics, job, query, values, args, changes)
        result["churn"].update({"changes_per_s": args.churn, "expected_subscriptions": expected,
                                "subscriptions_after": len(job.registry)})
        c = result["churn"]
        log(f"latency at {args.rate:,.0f}/s with {args.churn:,.0f} changes/s: p50 {c['p50_s']} s, p99 {c['p99_s']} s"
            f" ({c['changes_applied']:,} of {c['changes_offered']:,} changes applied; {c['subscriptions_after']:,}"
            f" subscriptions, {expected:,} expected)")
        for part in ("latency", "churn"):
            log(f"  {part} batches, ms median/max: " + ", ".join(
                f"{name[:-3]} {v['median']:.0f}/{v['max']:.0f}" for name, v in result[part]["steps_ms"].items()))
    query.stop()

    # where the time goes, and the Spark SQL baseline (each skipped when given 0 events: they
    # hold every subscription as an object in this process)
    result["source_read_per_s"] = source_read_rate(spark, bootstrap, topics["events"])
    result["empty_job"] = spark_job_overhead(spark)
    if not (args.cost_events or args.sql_events):
        return result
    subs = list(workload_subscriptions(n_subs, seed))
    result["steps_us"], m = step_costs(subs, backlog[: args.cost_events or 10], args.matcher)
    if not args.sql_events:
        return result
    sql_events = backlog[: max(10, args.sql_events * 100_000 // n_subs)]  # about the same joined rows per size
    sql_s, sql_matches = spark_sql_matching(spark, subs, sql_events)
    from matchers.events import flatten

    ours = {(i, sid) for i, ids in enumerate(m.match_events([flatten(e) for e in sql_events])) for sid in ids}
    result["spark_sql"] = {"events": len(sql_events), "seconds": sql_s, "events_per_s": len(sql_events) / sql_s,
                           "matches": len(sql_matches), "agrees_with_service_matcher": sql_matches == ours}
    log(f"Spark SQL exploded join: {len(sql_events)} events in {sql_s:.1f} s "
        f"({len(sql_events) / sql_s:,.1f} events/s), agrees: {sql_matches == ours}")
    return result


def spark_setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--conf`` as ``(KEY, VALUE)`` (the value may hold ``=``)."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.e2e", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 subscriptions, fewer events (about a few minutes)")
    parser.add_argument("--subs", default=None, help="comma-separated subscription counts (default 100000,1000000)")
    parser.add_argument("--events", type=int, default=None, help="backlog events (default 200,000; quick 20,000)")
    parser.add_argument("--per-trigger", type=int, default=50_000, help="maxOffsetsPerTrigger of the drain")
    parser.add_argument("--register-per-trigger", type=int, default=0,
                        help="maxOffsetsPerTrigger of the registration (0: every subscription in one batch)")
    parser.add_argument("--trigger", default="0 seconds",
                        help="trigger interval of the steady drain and the latency runs (the drain's: 0 seconds)")
    parser.add_argument("--keepalive", type=float, default=30.0,
                        help="spark.worker_keepalive_s of the service (0: no keep-alive job)")
    parser.add_argument("--rate", type=float, default=5000.0, help="offered events/s of the latency run")
    parser.add_argument("--duration", type=float, default=None, help="seconds of the latency run (60; quick 15)")
    parser.add_argument("--matcher", default="dynamic",
                        help="matcher of the service (dynamic: Fabret's clustering; counting is ~80x slower on W1)")
    parser.add_argument("--churn", type=float, default=0.0,
                        help="subscription changes/s offered during a second latency run (0: not run)")
    parser.add_argument("--shards", type=int, default=1, help="match.shards: subscription shards of the service")
    parser.add_argument("--sql-events", type=int, default=None,
                        help="events of the Spark SQL baseline (200; quick 50; 0: not run)")
    parser.add_argument("--cost-events", type=int, default=20_000,
                        help="events of the in-process step costs (0 with --sql-events 0: not run; both hold every"
                             " subscription as an object in the benchmark's process)")
    parser.add_argument("--connectors", default="java",
                        help="comma-separated Kafka connectors of the query, each measured in turn in the same run"
                             " (a name may repeat: java,kafka-py,kafka-py,java pairs them against the JVM's warm-up):"
                             " java (Spark's format(\"kafka\")), kafka-py (the project's Python source)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", type=spark_setting,
                        help="a Spark setting of the session over the service's (repeatable), e.g."
                             " spark.driver.extraJavaOptions=-XX:StartFlightRecording=filename=e2e.jfr")
    parser.add_argument("--out", type=Path, default=DOCS / "bench" / "e2e.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.subs.split(",")] if args.subs else ([100_000] if args.quick else [100_000, 1_000_000])
    args.events = args.events or (20_000 if args.quick else 200_000)
    args.duration = args.duration or (15.0 if args.quick else 60.0)
    args.sql_events = (50 if args.quick else 200) if args.sql_events is None else args.sql_events
    args.cost_events = min(args.cost_events, args.events)
    print(f"e2e: subscriptions {sizes}, backlog {args.events:,} events, {args.per_trigger:,} per trigger, "
          f"latency at {args.rate:,.0f}/s for {args.duration:.0f} s (trigger {args.trigger}), matcher {args.matcher}, "
          f"Spark SQL on {args.sql_events} events", file=sys.stderr)

    from streaming.kafka.broker import EmbeddedBroker
    from streaming.spark import get_session

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped from outside: clean up as on Ctrl-C
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="e2e-"))
    runs: list[dict] = []
    try:
        with EmbeddedBroker(log_path=workdir / "kafka.log") as broker:
            conf = {"spark.driver.memory": "6g", **dict(args.conf)}
            spark = get_session("pubsub-e2e", "local[2]", conf)
            try:
                for n in sizes:
                    for connector in args.connectors.split(","):
                        runs.append(run_size(spark, broker.bootstrap_servers, n, args, workdir, connector, len(runs)))
                        save(args, runs, started)  # each run as soon as it is measured
            finally:
                from streaming.shared_index import remove_application

                remove_application(spark.sparkContext.applicationId)  # its shared index files, as the service's driver does
                spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for r in runs:
        print(f"{r['n_subs']:>9,} subs, {r.get('connector', 'kafka-py')}: {r['events_per_s']:>9,.0f} events/s sustained (with a query start), "
              f"{r['steady']['events_per_s']:,.0f} steady, "
              f"p50 {r['latency']['p50_s']:.2f} s p99 {r['latency']['p99_s']:.2f} s at {args.rate:,.0f}/s"
              + (f"; Spark SQL {r['spark_sql']['events_per_s']:,.2f} events/s" if "spark_sql" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The keyed state's cost per micro-batch of the ``patterns`` operator (issue 28): live
instances over many partition values, a batch touching 1 % of them.

Each layout's stateful processor (``--trees label=path``: a checkout of this project, e.g. a
detached worktree of an older commit) runs in its own process under PySpark's ``TwsTester``
(the processor's own code and state calls, in memory; no JVM, no RocksDB): one pattern
partitioned by ``symbol`` whose every event starts an instance that nothing completes
(``--per-value`` instances per symbol after the fill), (filled ``--fill-batch`` symbols a batch,
each with all its events), then ``--batches`` batches of one event for each of ``--touched``
symbols. Per batch: CPU seconds of the processor (its input
rows and the timers, ``time.process_time``), and what it hands the state store: rows and
bytes written (values and map keys; a long 8 bytes) and removed. The processes of the
trees and sizes run one after the other, interleaved (:func:`scripts.bench.kit.interleaved`).

``python -m scripts.bench.patterns_state --trees new=. base=/work/scratch/state-base
--values 1000 100000 --per-value 10 --touched 1000``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PATTERN = "Stock NEXT{$2.symbol = $1.symbol AND $2.price > 1000000000} Stock"
"""Partitioned by ``symbol``; every event starts an instance waiting for a price never reached."""


def _size(x) -> int:
    if x is None or isinstance(x, (int, float)):
        return 8
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    if isinstance(x, str):
        return len(x.encode("utf-8"))
    return sum(_size(v) for v in x)


def child(values: int, per_value: int, touched: int, batches: int, buckets: int, fill_batch: int) -> dict:
    """One layout (the processor on ``sys.path``) at one size: the per-batch figures."""
    import tempfile

    import orjson
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import MapState, ValueState
    from pyspark.sql.streaming.tws_tester import TwsTester

    from streaming.config import Settings
    from streaming.match.changes import records_of, register_records
    from streaming.patterns.keyed import event_time_ms, group_key
    from streaming.patterns.processor import PatternProcessor
    from streaming.patterns.queries import live_dir, registry_dir
    from streaming.registry_columns import ColumnRegistry

    tmp = tempfile.mkdtemp(prefix="patterns-state-")
    settings = Settings().replace(spark={"checkpoint_dir": tmp}, patterns={"key_buckets": buckets})
    register_records(ColumnRegistry(registry_dir(settings)), 0,
                     records_of([(b"up", orjson.dumps({"op": "upsert", "id": "up", "pattern": PATTERN}), "s", 0, 0)]), 0.0)
    t = TwsTester(PatternProcessor(registry_dir(settings), live_dir(settings), settings), timeMode="EventTime",
                  eventTimeExtractor=lambda row: 2**62)
    written = {"rows": 0, "bytes": 0, "removed": 0}

    def counting(state):
        if isinstance(state, ValueState):
            update, clear = state.update, state.clear

            def counted_update(row):
                written["rows"] += 1
                written["bytes"] += _size(row)
                update(row)

            def counted_clear():
                written["removed"] += 1
                clear()

            state.update, state.clear = counted_update, counted_clear
        elif isinstance(state, MapState):
            update_value, remove_key = state.updateValue, state.removeKey

            def counted_value(key, row):
                written["rows"] += 1
                written["bytes"] += _size(key) + _size(row)
                update_value(key, row)

            def counted_remove(key):
                written["removed"] += 1
                remove_key(key)

            state.updateValue, state.removeKey = counted_value, counted_remove

    for v in vars(t.processor).values():
        counting(v)
    offset = 0
    cols = ["t1", "partition", "offset", "t0", "eid", "stream", "attrs"]

    def batch(symbols: list[int], tick: int, each: int = 1) -> tuple[float, dict]:
        nonlocal offset
        recs = []
        for s, at in [(s, tick + k) for k in range(each) for s in symbols]:
            sym = f"S{s:07d}"
            recs.append({"gkey": group_key("symbol", sym, buckets), "t1": at, "partition": 0, "offset": offset,
                         "t0": at, "eid": f"e{offset}", "stream": "Stock",
                         "attrs": orjson.dumps({"id": f"e{offset}", "stream": "Stock", "ts": at, "symbol": sym,
                                                "price": 1.0})})
            offset += 1
        frame = pd.DataFrame(recs)
        for k in written:
            written[k] = 0
        c0 = time.process_time()
        t._currentWatermarkMs = max(t._currentWatermarkMs, event_time_ms(tick + each - 1, 1000))  # its last tick
        for gkey, group in frame.groupby("gkey"):
            t.testInPandas(gkey, group[cols].reset_index(drop=True))
        t._handleExpiredTimers()
        return time.process_time() - c0, dict(written)

    tick = 0
    symbols = list(range(values))
    fill_s = time.process_time()
    for lo in range(0, values, fill_batch):  # the fill: per_value events of each symbol, ticks going on
        batch(symbols[lo:lo + fill_batch], tick, per_value)
        tick += per_value
    fill_s = time.process_time() - fill_s
    step = max(1, values // touched)
    out = []
    for b in range(batches):
        cpu, w = batch(symbols[b % step::step][:touched], tick)
        tick += 1
        out.append({"batch": b, "cpu_s": round(cpu, 4), **w, "load_1m": os.getloadavg()[0]})
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return {"values": values, "per_value": per_value, "touched": touched, "buckets": buckets,
            "fill_cpu_s": round(fill_s, 1), "batches": out}


def spark_child(values: int, per_value: int, touched: int, batches: int, buckets: int, fill_batch: int) -> dict:
    """The same workload through the ``patterns`` query's plan in Spark (``local[2]``, a JSON file
    source, one file a batch, a memory sink): per data batch and the no-data batch after it,
    Spark's state figures (rows updated and removed, RocksDB bytes written) and the CPU seconds of
    the process tree (driver, JVM, Python workers)."""
    import shutil
    import tempfile

    import orjson

    from scripts.bench.kit import tree_cpu_s
    from streaming.config import Settings, interval_ms
    from streaming.kafka.client_config import KafkaClientConfig
    from streaming.match.changes import records_of, register_records
    from streaming.patterns.queries import pattern_plan, query_conf, registry_dir
    from streaming.registry_columns import ColumnRegistry
    from streaming.spark import get_session

    tmp = Path(tempfile.mkdtemp(prefix="patterns-state-spark-"))
    settings = Settings().replace(spark={"checkpoint_dir": str(tmp / "ck")}, patterns={"key_buckets": buckets})
    register_records(ColumnRegistry(registry_dir(settings)), 0,
                     records_of([(b"up", orjson.dumps({"op": "upsert", "id": "up", "pattern": PATTERN}), "s", 0, 0)]), 0.0)
    spark = get_session(app_name="bench-patterns-state", master="local[2]")
    src_dir = tmp / "in"
    src_dir.mkdir()
    src = (spark.readStream.schema("value string, topic string, partition int, offset long, timestamp timestamp")
           .option("maxFilesPerTrigger", 1).json(str(src_dir))
           .selectExpr("CAST(value AS BINARY) AS value", "topic", "partition", "offset", "timestamp"))
    with query_conf(spark, settings):
        q = (pattern_plan(src, settings, KafkaClientConfig.create("unused.invalid:9092")).writeStream.format("noop")
             .option("checkpointLocation", str(tmp / "query")).trigger(processingTime="0 seconds").start())
    offset, n_file = 0, 0

    def batch(symbols: list[int], tick: int, each: int = 1) -> tuple[float, list[dict]]:
        nonlocal offset, n_file
        lines = []
        for s, at in [(s, tick + k) for k in range(each) for s in symbols]:
            v = orjson.dumps({"id": f"e{offset}", "stream": "Stock", "ts": at, "symbol": f"S{s:07d}", "price": 1.0})
            lines.append(orjson.dumps({"value": v.decode(), "topic": "events", "partition": 0, "offset": offset,
                                       "timestamp": "2026-11-29T00:00:00Z"}))
            offset += 1
        seen = len(q.recentProgress)
        c0 = tree_cpu_s()
        (src_dir / f"{n_file:06d}.json").write_bytes(b"\n".join(lines) + b"\n")
        n_file += 1
        q.processAllAvailable()
        deadline = time.time() + 60  # the no-data batch of the watermark Spark runs after it
        while time.time() < deadline and not any(p["numInputRows"] == 0 for p in q.recentProgress[seen:]):
            time.sleep(0.2)
        cpu = tree_cpu_s() - c0
        out = []
        for p in q.recentProgress[seen:]:
            op = (p.get("stateOperators") or [{}])[0]
            m = op.get("customMetrics", {})
            out.append({"rows": p["numInputRows"], "state_rows": op.get("numRowsTotal"),
                        "updated": op.get("numRowsUpdated"), "removed": op.get("numRowsRemoved"),
                        "rocksdb_bytes_written": m.get("rocksdbTotalBytesWritten"),
                        "rocksdb_put_ms": m.get("rocksdbPutLatency"), "commit_ms": op.get("commitTimeMs"),
                        "ms": p["durationMs"].get("triggerExecution")})
        return cpu, out

    tick = 0
    try:
        fill_s = time.process_time()
        for lo in range(0, values, fill_batch):
            batch(list(range(lo, min(values, lo + fill_batch))), tick, per_value)
            tick += per_value
        fill_s = time.process_time() - fill_s
        # one event far enough on for the watermark to pass the whole fill (settings' watermark_delay):
        # the batches timed then each process the events of a batch before, as in the steady state
        batch([0], tick + 2 * interval_ms(settings.patterns.watermark_delay) // 1000)
        tick += 2 * interval_ms(settings.patterns.watermark_delay) // 1000 + 1
        step = max(1, values // touched)
        res = []
        for b in range(batches):
            cpu, prog = batch(list(range(values))[b % step::step][:touched], tick)
            tick += 1
            res.append({"batch": b, "cpu_s": round(cpu, 3), "bytes": sum(p["rocksdb_bytes_written"] or 0 for p in prog),
                        "rows": sum(p["updated"] or 0 for p in prog), "progress": prog, "load_1m": os.getloadavg()[0]})
            print(json.dumps(res[-1]), file=sys.stderr, flush=True)
    finally:
        q.stop()
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"values": values, "per_value": per_value, "touched": touched, "buckets": buckets, "spark": True,
            "fill_cpu_s": round(fill_s, 1), "batches": res}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", default=["new=."], help="label=path of each code tree")
    ap.add_argument("--values", type=int, nargs="+", default=[1000, 100000])
    ap.add_argument("--per-value", type=int, default=10)
    ap.add_argument("--touched", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--buckets", type=int, default=64)
    ap.add_argument("--fill-batch", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", default="docs/bench/patterns_state.json")
    ap.add_argument("--spark", action="store_true", help="through Spark's state store (RocksDB) instead of TwsTester")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        res = (spark_child if a.spark else child)(a.values[0], a.per_value, a.touched, a.batches, a.buckets,
                                                  a.fill_batch)
        print(json.dumps(res))
        return
    from scripts.bench import kit

    trees = dict(x.split("=", 1) for x in a.trees)
    runs = []
    for rnd in range(a.rounds):
        for n in a.values:
            for label in kit.interleaved(list(trees), rnd):
                tree = Path(trees[label]).resolve()
                load = os.getloadavg()
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--values", str(n),
                       "--per-value", str(a.per_value), "--touched", str(a.touched), "--batches", str(a.batches),
                       "--buckets", str(a.buckets), "--fill-batch", str(a.fill_batch), *(["--spark"] if a.spark else [])]
                env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_NUM_THREADS": "1"}
                t0 = time.time()
                p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
                if p.returncode:
                    raise SystemExit(f"{label} at {n} values failed:\n{p.stderr[-3000:]}")
                res = json.loads(p.stdout.strip().splitlines()[-1])
                uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
                runs.append({"tree": label, "path": str(tree), "round": rnd, "wall_s": round(time.time() - t0, 1),
                             "load_before": load, "uptime_after": uptime, **res})
                bs = res["batches"][1:] or res["batches"]
                print(f"{label} values={n} instances={n * a.per_value} touched={a.touched} buckets={a.buckets}: "
                      f"per batch CPU {sorted(b['cpu_s'] for b in bs)[len(bs) // 2]:.3f} s, "
                      f"written {sorted(b['bytes'] for b in bs)[len(bs) // 2]:,} B in "
                      f"{sorted(b['rows'] for b in bs)[len(bs) // 2]:,} rows (median, first batch left out); "
                      f"{uptime}", flush=True)
    params = {"spark": a.spark, "pattern": PATTERN, "values": a.values, "per_value": a.per_value, "touched": a.touched,
              "batches": a.batches, "buckets": a.buckets, "fill_batch": a.fill_batch, "trees": trees}
    path = kit.save(Path(a.out).stem, kit.record(params, runs))
    print(path)


if __name__ == "__main__":
    main()

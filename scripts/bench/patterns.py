"""End-to-end benchmark of the patterns queries: Kafka -> Spark keyed state -> Kafka.

Workload (``scripts.bench.cayuga``'s stock ticker): ``--events`` trades over ``--symbols``
symbols, one per tick, and ``--patterns`` subscriptions "a trade of SYM above P, then the
next trade of the same stock above P2, within W ticks" (partitioned by ``name``). Each
run starts the embedded broker, starts Spark (``local[2]``), applies the subscriptions,
runs the patterns query over ``--warmup`` earlier trades and stops it (the service's
steady state: Python workers started, engines compiled, state in the store), loads the
timed trades, then times the query restarted from its checkpoint until every event has
been processed and the last notification written. With ``--warmup 0`` the timed run
starts cold and is mostly start-up: about 14 s of CPU for 1,000 events against 15-17 s
for 60,000 (2026-11-24).

Each round runs every code tree given (``--tree``, default: this one and the baseline
worktree ``/work/scratch/patsvc/base`` when it exists) in its own process, interleaved,
so both see the same machine load. Reported per run: events per wall second of the
query, CPU seconds of the process tree during that time (driver, JVM, Python workers,
from ``/proc``), the notifications written (must be equal across trees) and the
1-minute load average.

Run ``python -m scripts.bench.patterns [--quick]``; results go to ``docs/bench/patterns.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path("/work/scratch/patsvc/base")


def child(n_events: int, n_patterns: int, symbols: int, seed: int, warmup: int = 0) -> dict:
    """One run in this process with the ``streaming`` package first on ``sys.path``."""
    import tempfile

    import orjson
    from kafka import KafkaProducer

    import streaming.patterns as P
    try:
        from scripts.bench.kit import tree_cpu_s
        from scripts.tickers import cel, make_events, make_subscriptions
    except ImportError:  # a tree from before the kit (its own helpers)
        from scripts.bench.cayuga import cel, make_events, make_subscriptions  # noqa: I001  # an old tree has them
        from scripts.bench.patterns import tree_cpu_s  # type: ignore[attr-defined, no-redef]  # an old tree has it
    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.broker import EmbeddedBroker
    from streaming.kafka.client_config import KafkaClientConfig
    from streaming.kafka.watermarks import Watermarks

    def records_in(topic: str) -> int:
        """How many records ``topic`` holds (offsets from the earliest to the latest)."""
        marks = Watermarks(config.kafka_python("consumer"))
        try:
            tps = marks.partitions([topic], refresh=True)
            begin, end = marks.earliest(tps), marks.latest(tps)
        finally:
            marks.close()
        return sum(end[tp] - begin[tp] for tp in tps)

    everything = make_events(warmup + n_events, symbols, seed)
    early, events = everything[:warmup], everything[warmup:]
    subs = make_subscriptions(n_patterns, symbols, seed)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as ckpt:
        config = KafkaClientConfig.create(broker.bootstrap_servers)
        ensure_topics(config, {"ev": 2, "sub": 1, "note": 2, "err": 1})
        prod = KafkaProducer(**config.kafka_python("producer"), linger_ms=20)

        def send_events(batch: list, heartbeat: bool) -> None:
            for e in batch:
                prod.send("ev", key=e.attrs["name"].encode(),
                          value=orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs}))
            if heartbeat:
                prod.send("ev", value=orjson.dumps({"id": "heartbeat", "stream": "heartbeat",
                                                    "ts": len(everything) + 100000}))
            prod.flush()

        send_events(early, heartbeat=False)
        from streaming.spark import get_session

        spark = get_session(app_name="bench-patterns", master="local[2]")
        from streaming.config_sources import load

        settings = load().replace(  # conf/pubsub.toml and PUBSUB_* (e.g. PUBSUB_PATTERNS_KEY_BUCKETS)
            kafka={"events_topic": "ev", "subscriptions_topic": "sub", "notifications_topic": "note",
                   "errors_topic": "err"},
            spark={"checkpoint_dir": ckpt, "trigger_interval": "0 seconds"})
        from streaming.match.changes import records_of, register_records
        from streaming.patterns.queries import registry_dir
        from streaming.registry_columns import ColumnRegistry

        register_records(ColumnRegistry(registry_dir(settings)), 0, records_of(  # what the match query does
            [(f"q{i}".encode(), orjson.dumps({"id": f"q{i}", "pattern": cel(*sub)}), "sub", 0, i)
             for i, sub in enumerate(subs)]), time.time())
        start_q = lambda: P.start_patterns_query(spark, settings, config)  # noqa: E731

        def drain(q: Any) -> None:
            q.processAllAvailable()
            drained = time.perf_counter()
            # Spark's stateful operator (before the state partitions) needs the watermark's no-data batch
            while q.lastProgress is None or (q.lastProgress.get("stateOperators") and q.lastProgress["numInputRows"]):
                time.sleep(0.2)
                if time.perf_counter() - drained > 120:
                    break

        if early:
            q = start_q()
            drain(q)
            q.stop()
        warm_notes = records_in("note") if early else 0
        send_events(events, heartbeat=True)
        prod.close()
        t, cpu0, by0 = time.perf_counter(), tree_cpu_s(), tree_cpu_s(by_command=True)
        q = start_q()
        drain(q)
        elapsed = time.perf_counter() - t
        progress = [{"rows": p["numInputRows"], **p["durationMs"], **state_progress(p)} for p in q.recentProgress]
        cpu = tree_cpu_s() - cpu0
        by = {k: round(v - by0.get(k, 0.0), 2) for k, v in tree_cpu_s(by_command=True).items()}
        q.stop()
        spark.stop()
        notes = records_in("note") - warm_notes
    return {"events": n_events, "warmup": warmup, "patterns": n_patterns, "symbols": symbols, "seconds": elapsed,
            "events_per_s": n_events / elapsed, "cpu_s": cpu, "events_per_cpu_s": n_events / cpu, "cpu_by_process": by,
            "batches": len(progress), "progress": progress, "notifications": notes}


def state_progress(p: dict) -> dict:
    """A batch's keyed-state figures from its progress (none without Spark's state store): keys
    held and written, and the bytes RocksDB wrote."""
    ops = p.get("stateOperators") or []
    if not ops:
        return {}
    metrics = ops[0].get("customMetrics", {})
    return {"state_keys": ops[0].get("numRowsTotal"), "state_updated": ops[0].get("numRowsUpdated"),
            "state_removed": ops[0].get("numRowsRemoved"), "rocksdb_bytes_written": metrics.get("rocksdbTotalBytesWritten"),
            "state_commit_ms": ops[0].get("commitTimeMs")}


def run_tree(tree: Path, args: argparse.Namespace) -> dict:
    """One child run over ``tree``'s code; adds the process tree's CPU time and the load."""
    from scripts.bench import kit

    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--events", str(args.events),
           "--patterns", str(args.patterns), "--symbols", str(args.symbols), "--seed", str(args.seed),
           "--warmup", str(args.warmup)]
    ran = kit.run(cmd, cwd=tree, env=kit.tree_env(tree, one_thread=False, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}"))
    ran.stderr = "\n".join(ln for ln in ran.stderr.splitlines() if not ln.startswith("%"))  # not librdkafka's retries
    r = ran.check().result_line()
    r.update(tree=str(tree), load=os.getloadavg())
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.patterns", description=__doc__.split("\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="20,000 events, one round")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--patterns", type=int, default=1000)
    ap.add_argument("--symbols", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=20_000, help="events through the query before the timed run")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tree", action="append", type=Path, help="code trees to compare (repeatable)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "patterns.json")
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.events, args.patterns, args.symbols, args.seed, args.warmup)), flush=True)
        return 0
    if args.quick:
        args.events, args.rounds = 20_000, 1
    trees = args.tree or [ROOT, *([BASELINE] if BASELINE.exists() else [])]
    params = {"events": args.events, "warmup": args.warmup, "patterns": args.patterns, "symbols": args.symbols, "seed": args.seed,
              "rounds": args.rounds, "trees": [str(t) for t in trees], "load_at_start": os.getloadavg()}
    print("workload:", json.dumps(params), flush=True)
    results = []
    for rnd in range(args.rounds):
        for tree in trees:
            r = run_tree(tree, args)
            r["round"] = rnd
            results.append(r)
            print(f"round {rnd} {tree}: {r['events_per_s']:.0f} events/s ({r['seconds']:.1f} s wall, "
                  f"{r['cpu_s']:.1f} s CPU of the process tree, {r['events_per_cpu_s']:.0f} events per CPU s, {r['batches']} batches, "
                  f"{r['notifications']} notifications) load {r['load'][0]:.1f}", flush=True)
    if len(trees) > 1:
        for tree in trees[1:]:
            ratios = [a["events_per_s"] / b["events_per_s"] for a, b in zip(
                [r for r in results if r["tree"] == str(trees[0])], [r for r in results if r["tree"] == str(tree)],
                strict=True)]
            print(f"{trees[0]} / {tree}: events/s ratios per round {[round(x, 2) for x in ratios]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"params": params, "results": results}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

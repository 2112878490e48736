"""Memory per executor on a standalone cluster, the subscriptions in one shard or pinned shards.

``python -m scripts.bench.cluster_memory [--subs 200000] [--shards 1 2] [--events 40000]``

For each shard count: a standalone master and two 1-core workers on loopback (the cluster
tests' :mod:`streaming.standalone`), the embedded broker, and ``python -m streaming run``
on the cluster. The workload's subscriptions (Fabret W1, as ``scripts.bench.e2e``) are
registered, then ``--events`` events are matched twice (a trigger every 5 s, so that a
batch holds a whole round: two event partitions of half of them each, two tasks; with one
shard each executor runs one range, with two shards pinned each executor one group). Then it reads each executor's Python workers
(the processes its ``pyspark.daemon`` forked): RSS (the mapped shared index pages counted
in full in each), PSS and the PSS of the mapped index files
(``scripts.bench.shared_index.memory``), and the status file's shard placement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from scripts.bench import kit

MB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(f"[cluster-memory {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def status(path: Path) -> dict[str, Any]:
    from streaming.metrics import read_status

    return read_status(path) or {}


def wait(what: str, predicate, job: subprocess.Popen, log_path: Path, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if job.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"waiting for {what}: job {job.returncode}\n{log_path.read_text()[-3000:]}")
        time.sleep(1.0)


def run(n_subs: int, shards: int, n_events: int, bootstrap: str, workdir: Path) -> dict[str, Any]:
    from scripts.bench.feed import (
        produce_all,
        subscription_records,
        workload_events,
        workload_subscriptions,
    )
    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.client_config import KafkaClientConfig
    from streaming.standalone import standalone_cluster

    tag = f"s{shards}-{int(time.time())}"
    topics = {name: f"{name}-{tag}" for name in ("events", "subscriptions", "notifications", "errors")}
    ensure_topics(KafkaClientConfig.create(bootstrap), {topics["events"]: 2, topics["subscriptions"]: 1,
                                                         topics["notifications"]: 2, topics["errors"]: 1})
    subs, events = workload_subscriptions(n_subs, seed=7), workload_events(n_events, seed=7)
    status_file, log_path = workdir / f"status-{tag}.json", workdir / f"job-{tag}.log"
    with standalone_cluster(workdir / f"cluster-{tag}") as cluster:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
               "PUBSUB_SPARK_MASTER": cluster.url, "PUBSUB_SPARK_CONF_SPARK.DRIVER.HOST": "127.0.0.1",
               "PUBSUB_SPARK_CONF_SPARK.EXECUTOR.MEMORY": "512m", "PUBSUB_SPARK_CONF_SPARK.LOCALITY.WAIT": "60s",
               "PUBSUB_SPARK_CHECKPOINT_DIR": str(workdir / f"ckpt-{tag}"), "PUBSUB_SPARK_TRIGGER_INTERVAL": "5 seconds",
               "PUBSUB_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "PUBSUB_KAFKA_EVENTS_TOPIC": topics["events"],
               "PUBSUB_KAFKA_SUBSCRIPTIONS_TOPIC": topics["subscriptions"],
               "PUBSUB_KAFKA_NOTIFICATIONS_TOPIC": topics["notifications"],
               "PUBSUB_KAFKA_ERRORS_TOPIC": topics["errors"], "PUBSUB_KAFKA_MAX_OFFSETS_PER_TRIGGER": "0",
               "PUBSUB_MATCH_SHARDS": str(shards), "PUBSUB_PATTERNS_ENABLED": "false",
               "PUBSUB_STATUS_STATUS_FILE": str(status_file)}
        env.pop("PYTHONPATH", None)
        with open(log_path, "ab") as out:
            job = subprocess.Popen([sys.executable, "-m", "streaming", "run"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            t0 = time.monotonic()
            produce_all(bootstrap, topics["subscriptions"], subscription_records(subs), "subscriptions")
            wait("the subscriptions", lambda: (status(status_file).get("registry") or {}).get("subscriptions", 0)
                 >= n_subs, job, log_path)
            log(f"shards={shards}: {n_subs:,} subscriptions registered in {time.monotonic() - t0:.0f} s")
            values = [(None, orjson.dumps({"id": i, **e})) for i, e in enumerate(events)]
            for round_ in range(2):  # the second round: the indexes are there, the memory steady
                t0 = time.monotonic()
                produce_all(bootstrap, topics["events"], values, f"events, round {round_ + 1}")
                wait("the events", lambda r=round_: (status(status_file).get("totals") or {}).get("events", 0)
                     >= (r + 1) * n_events, job, log_path)
                log(f"shards={shards}: round {round_ + 1}, {n_events:,} events matched in "
                    f"{time.monotonic() - t0:.0f} s")
            executors = []
            for w in range(2):
                for jvm in cluster.executors(w):
                    pids = kit.python_workers(jvm)
                    log(f"executor {jvm}: Python workers {[(pid, kit.processes()[pid].ppid) for pid in pids]}")
                    mem = [kit.process_memory(pid) for pid in pids]
                    executors.append({"worker": w, "python_workers": len(mem),
                                      "each_mb": [{k: round(v / MB) for k, v in m.items()} for m in mem],
                                      "rss_mb": sum(m["rss"] for m in mem) / MB,
                                      "pss_mb": sum(m["pss"] for m in mem) / MB,
                                      "index_file_pss_mb": sum(m["file_pss"] for m in mem) / MB})
            doc = status(status_file)
        finally:
            job.terminate()
            try:
                job.wait(120)
            except subprocess.TimeoutExpired:
                job.kill()
    last = doc.get("last_batch") or {}
    return {"subscriptions": n_subs, "shards": shards, "events": n_events, "executors": executors,
            "index_mb": last.get("index_bytes", 0) / MB, "placement": doc.get("shards"),
            "load_average": os.getloadavg()}


def main(argv: Sequence[str] | None = None) -> int:
    from streaming.kafka.broker import EmbeddedBroker

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subs", type=int, default=200_000)
    p.add_argument("--shards", type=int, nargs="+", default=[1, 2])
    p.add_argument("--events", type=int, default=40_000)
    args = p.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="cluster-memory-") as tmp:
        workdir = Path(tmp)
        with EmbeddedBroker(log_path=workdir / "kafka.log") as broker:
            for shards in args.shards:
                r = run(args.subs, shards, args.events, broker.bootstrap_servers, workdir)
                results.append(r)
                for e in r["executors"]:
                    log(f"shards={shards}: executor on worker {e['worker']}: {e['python_workers']} Python worker(s), "
                        f"RSS {e['rss_mb']:,.0f} MB, PSS {e['pss_mb']:,.0f} MB "
                        f"(index files {e['index_file_pss_mb']:,.0f} MB); each: {e['each_mb']}")
                log(f"shards={shards}: placement {r['placement']}; load average {r['load_average']}")
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

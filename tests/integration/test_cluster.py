"""The service on a real Spark standalone cluster (master and two workers on loopback).

The job runs as a subprocess (``python -m streaming run``, the real command line; the test
run's own local session occupies this process's one SparkContext). The workers run in
their own directories without ``PYTHONPATH``: nothing an executor needs may live on the
driver's disk or depend on a working directory. Checked against the oracle: the match
path with a relative checkpoint and with a ``file://`` URI, retro notifications of valid
events, a Cayuga pattern, shard groups pinned to the executors (each shard matched on one
executor only), the checkpoint on HDFS and on S3 (executors reading and writing the
patterns' files there), and a SIGKILLed executor mid-stream with the subscriptions in three shards
(its shards move; every expected notification arrives; duplicates carry the original ids).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest

from matchers.expr import to_text
from streaming.kafka.client_config import KafkaClientConfig
from streaming.metrics import read_status
from streaming.notifications import notification_id
from streaming.storage import HADOOP_ENV, join
from tests.integration.hadoop_fixtures import Store
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import expected_pairs, make_topics, registry_state
from tests.integration.service_fixtures import job_env as service_env
from tests.strategies import random_event, random_subscriptions
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 600  # a Spark start-up and the first tasks on every executor on a loaded 2-core machine


def job_env(kafka_config: KafkaClientConfig, topics: Any, checkpoint: str, status_file: Path, cluster: Any,
            patterns: bool) -> dict[str, str]:
    return service_env(kafka_config, topics, checkpoint, status_file, **{
        "SPARK_LOCAL_IP": "127.0.0.1",  # the driver's address on this machine (docs/deploy.md)
        "PUBSUB_SPARK_MASTER": cluster.url,
        "PUBSUB_SPARK_CONF_SPARK.DRIVER.HOST": "127.0.0.1",
        "PUBSUB_SPARK_CONF_SPARK.EXECUTOR.MEMORY": "512m",
        "PUBSUB_MATCH_MAX_CATCHUP_VERSIONS": "3",
        "PUBSUB_PATTERNS_ENABLED": str(patterns).lower(),
    })


def start_job(env: dict[str, str], log: Path) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen([sys.executable, "-m", "streaming", "run"], cwd=ROOT, env=env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop_job(job: subprocess.Popen) -> int | None:
    if job.poll() is None:
        job.send_signal(signal.SIGTERM)
        try:
            return job.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    return job.returncode


def wait_for(predicate, what: str, job: subprocess.Popen, log: Path, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if job.poll() is not None:
            raise AssertionError(f"the job exited with {job.returncode} waiting for {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def totals(status_file: Path) -> dict:
    return ((read_status(status_file) or {}).get("totals")) or {}


def notes(kafka_config: KafkaClientConfig, topic: str) -> list[dict]:
    return [orjson.loads(r.body) for r in consume_all(kafka_config, topic)]


def match_pairs(docs: Iterable[dict]) -> set[tuple[str, int, int]]:
    return {(d["subscription"], d["partition"], d["offset"]) for d in docs if d.get("kind") != "pattern"}


def sub_records(subs) -> list[tuple[str, bytes]]:
    return [(s.id, orjson.dumps({"id": s.id, "expr": to_text(s.expr)})) for s in subs]


def assert_nothing_in_worker_dirs(cluster: Any) -> None:
    """Executors wrote no registry, validity or checkpoint file of their own."""
    for d in cluster.worker_dirs:
        stray = [p for p in d.rglob("*") if p.name in ("registry", "validity", "pattern-registry", "query")]
        assert not stray, stray


def test_match_retro_and_patterns_with_a_relative_checkpoint(
    spark_cluster: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
):
    rng = random.Random(41)
    topics = make_topics(topic_factory)
    status_file, log = tmp_path / "status.json", tmp_path / "job.log"
    relative = os.path.relpath(tmp_path / "ckpt", ROOT)  # relative to the job's cwd (the project root)
    job = start_job(job_env(kafka_config, topics, relative, status_file, spark_cluster, patterns=True), log)
    try:
        subs = random_subscriptions(rng, 40)
        pattern = TABLE1["S3"]
        produce(kafka_config, topics.subscriptions,
                [*sub_records(subs), ("rise", orjson.dumps({"id": "rise", "pattern": pattern}))])
        wait_for(lambda: totals(status_file).get("subscription_changes", 0) >= 40, "the subscriptions", job, log)
        # a pattern over stock ticks first (their event time is small; keyed by symbol, so each symbol's
        # ticks keep their order), then the heartbeat that completes them
        ticks = stock_ticks(120, 3)
        produce(kafka_config, topics.events,
                [(e.attrs["name"], orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs})) for e in ticks]
                + [(None, orjson.dumps({"id": "heartbeat", "stream": "heartbeat", "ts": ticks[-1].t1 + 1000}))])
        want_patterns = {k[5] for k in reference_matches({"rise": pattern}, ticks)}
        assert want_patterns

        def pattern_witnesses() -> set:
            return {tuple(d["witness"]["events"]) for d in notes(kafka_config, topics.notifications)
                    if d.get("kind") == "pattern"}

        wait_for(lambda: pattern_witnesses() >= want_patterns, "the pattern notifications", job, log)
        # then plain events, a third of them valid for ten minutes
        events = [random_event(rng) for _ in range(900)]
        for i in range(0, len(events), 3):
            events[i]["valid_until"] = time.time() + 600
        produce(kafka_config, topics.events, [orjson.dumps(e) for e in events], linger_ms=100)
        located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(kafka_config, topics.events)]
        assert len(located) == len(ticks) + 1 + len(events)
        want = expected_pairs(subs, located)  # the ticks are events too
        wait_for(lambda: match_pairs(notes(kafka_config, topics.notifications)) >= want, "the notifications", job, log)
        # a subscription registered later sees the still-valid events (retro), only those
        late = random_subscriptions(random.Random(5), 6, "late")
        produce(kafka_config, topics.subscriptions, sub_records(late))
        valid = [(p, o, e) for p, o, e in located if "valid_until" in e]
        want_retro = expected_pairs(late, valid)
        assert want_retro

        def retro() -> set:
            return match_pairs(d for d in notes(kafka_config, topics.notifications) if d.get("retro"))

        wait_for(lambda: retro() >= want_retro, "the retro notifications", job, log)
        assert stop_job(job) == 0
    finally:
        stop_job(job)
    docs = notes(kafka_config, topics.notifications)
    assert match_pairs(d for d in docs if not d.get("retro")) == want and retro() == want_retro
    assert pattern_witnesses() == want_patterns
    assert registry_state(tmp_path / "ckpt" / "registry-columns").ids == {s.id for s in subs + late} | {"rise"}  # one registry
    assert_nothing_in_worker_dirs(spark_cluster)


@pytest.mark.timeout(1800)
def test_match_and_patterns_with_a_hadoop_checkpoint(
    spark_cluster: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, hadoop_store: Store,
    monkeypatch: pytest.MonkeyPatch,
):
    """The checkpoint on S3 (``s3a://``) or HDFS (``hdfs://``), its settings given as ``spark.conf``
    only: the executors' Python workers read the registry's pattern view and write the patterns' state
    there (through the environment the driver gives them), Spark its logs; every match and
    every pattern notification arrives."""
    rng = random.Random(44)
    topics = make_topics(topic_factory)
    status_file, log = tmp_path / "status.json", tmp_path / "job.log"
    checkpoint = hadoop_store.location("cluster")
    env = {k: v for k, v in job_env(kafka_config, topics, checkpoint, status_file, spark_cluster, patterns=True).items()
           if k not in HADOOP_ENV.values()}
    # Spark's own Kafka connector: no Python source runner per query, which must connect back
    # within 10 s (the three queries' runners at once on a loaded machine sometimes miss it)
    job = start_job({**env, **hadoop_store.job_env(), "PUBSUB_KAFKA_USE_JAVA_CONNECTOR": "true"}, log)
    hadoop_store.use(monkeypatch)  # this process's storage, to look at what the job wrote
    try:
        subs = random_subscriptions(rng, 30)
        pattern = TABLE1["S3"]
        produce(kafka_config, topics.subscriptions,
                [*sub_records(subs), ("rise", orjson.dumps({"id": "rise", "pattern": pattern}))])
        wait_for(lambda: totals(status_file).get("subscription_changes", 0) >= 30, "the subscriptions", job, log)
        ticks = stock_ticks(60, 2)
        produce(kafka_config, topics.events,
                [(e.attrs["name"], orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs})) for e in ticks]
                + [(None, orjson.dumps({"id": "heartbeat", "stream": "heartbeat", "ts": ticks[-1].t1 + 1000}))])
        produce(kafka_config, topics.events, [orjson.dumps(random_event(rng)) for _ in range(300)], linger_ms=100)
        want_patterns = {k[5] for k in reference_matches({"rise": pattern}, ticks)}
        assert want_patterns

        def pattern_witnesses() -> set:
            return {tuple(d["witness"]["events"]) for d in notes(kafka_config, topics.notifications)
                    if d.get("kind") == "pattern"}

        located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(kafka_config, topics.events)]
        assert len(located) == len(ticks) + 1 + 300
        want = expected_pairs(subs, located)
        wait_for(lambda: pattern_witnesses() >= want_patterns, "the pattern notifications", job, log)
        wait_for(lambda: match_pairs(notes(kafka_config, topics.notifications)) >= want, "the notifications", job, log)
        assert stop_job(job) == 0
    finally:
        stop_job(job)
    assert match_pairs(notes(kafka_config, topics.notifications)) == want
    assert pattern_witnesses() == want_patterns
    assert registry_state(join(checkpoint, "registry-columns")).ids == {s.id for s in subs} | {"rise"}  # one registry
    files = hadoop_store.files(checkpoint)
    for kind in ("query/offsets/", "registry-columns/deltas/", "registry-columns/patterns/", "patterns/pattern-live/",
                 "patterns/patterns/state/",
                 "patterns/patterns/offsets/"):
        assert any(f.startswith(kind) for f in files), (kind, files)
    assert_nothing_in_worker_dirs(spark_cluster)


def test_each_shard_group_stays_on_one_executor(
    spark_cluster: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
):
    """With 4 shards on 2 executors each executor matches (and keeps the indexes of) one group of
    2 shards, batch after batch: what the tasks report (their executor and shards) says so. The
    events' own errors and counts come once (from shard 0's group)."""
    rng = random.Random(43)
    topics = make_topics(topic_factory)
    status_file, log = tmp_path / "status.json", tmp_path / "job.log"
    env = job_env(kafka_config, topics, (tmp_path / "ckpt").as_uri(), status_file, spark_cluster, patterns=False)
    job = start_job({**env, "PUBSUB_MATCH_SHARDS": "4",
                     # a loaded 2-core machine: let a task wait for its group's executor rather than
                     # run on the other one after Spark's default 3 s
                     "PUBSUB_SPARK_CONF_SPARK.LOCALITY.WAIT": "60s"}, log)
    try:
        subs = random_subscriptions(rng, 60)
        produce(kafka_config, topics.subscriptions, sub_records(subs))
        wait_for(lambda: totals(status_file).get("subscription_changes", 0) >= 60, "the subscriptions", job, log)
        raw = [orjson.dumps(random_event(rng)) for _ in range(1500)]
        broken = {100, 700, 1400}
        for i in broken:
            raw[i] = b"{broken"
        for r in range(6):
            produce(kafka_config, topics.events, raw[r * 250:(r + 1) * 250], linger_ms=100)
            time.sleep(1.0)
        located = [(r.partition, r.offset, r.body) for r in consume_all(kafka_config, topics.events)]
        want = expected_pairs(subs, [(p, o, orjson.loads(b)) for p, o, b in located if b != b"{broken"])
        wait_for(lambda: match_pairs(notes(kafka_config, topics.notifications)) >= want,
                 "every expected notification", job, log)
        wait_for(lambda: totals(status_file).get("events", 0) + totals(status_file).get("event_errors", 0)
                 >= len(raw), "every event counted", job, log)
        shards = (read_status(status_file) or {})["shards"]
        counted = totals(status_file)
        assert stop_job(job) == 0
    finally:
        stop_job(job)
    assert match_pairs(notes(kafka_config, topics.notifications)) == want
    errors = [(d["partition"], d["offset"]) for d in notes(kafka_config, topics.errors)]
    assert sorted(errors) == sorted((p, o) for p, o, b in located if b == b"{broken")  # each once
    assert counted["events"] == len(raw) - len(broken) and counted["event_errors"] == len(broken), counted
    assert shards["pinned"] and shards["executors"] == 2, shards
    groups = {tuple(g["shards"]) for g in shards["groups"]}
    assert groups == {(0, 2), (1, 3)} and len({g["anchor"] for g in shards["groups"]}) == 2, shards
    placement = {int(s): w for s, w in shards["placement"].items()}
    assert sorted(placement) == [0, 1, 2, 3], shards
    assert all(len(w) == 1 for w in placement.values()), shards  # each shard on one executor only
    on = {s: next(iter(w)) for s, w in placement.items()}
    assert on[0] == on[2] != on[1] == on[3], shards  # each executor one group, none every shard
    assert sum(placement[0].values()) >= 2, shards  # several batches since the groups were made
    print(f"shard placement: {shards}")


def test_an_executor_killed_mid_stream_with_a_file_uri_checkpoint(
    spark_cluster: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path
):
    rng = random.Random(42)
    topics = make_topics(topic_factory)
    status_file, log = tmp_path / "status.json", tmp_path / "job.log"
    checkpoint = (tmp_path / "ckpt").as_uri()
    env = job_env(kafka_config, topics, checkpoint, status_file, spark_cluster, patterns=False)
    job = start_job({**env, "PUBSUB_MATCH_SHARDS": "3"}, log)  # three match tasks per event range
    n_events, rounds = 2000, 8
    feeder_error: list[BaseException] = []
    try:
        subs = random_subscriptions(rng, 40)
        produce(kafka_config, topics.subscriptions, sub_records(subs))
        wait_for(lambda: totals(status_file).get("subscription_changes", 0) >= 40, "the subscriptions", job, log)
        events = [random_event(rng) for _ in range(n_events)]

        def feed() -> None:  # events, and changes of never-matching subscriptions (new versions, new broadcasts)
            try:
                per_round = n_events // rounds
                for r in range(rounds):
                    produce(kafka_config, topics.events,
                            [orjson.dumps(e) for e in events[r * per_round:(r + 1) * per_round]], linger_ms=100)
                    produce(kafka_config, topics.subscriptions,
                            [(f"z{r}", orjson.dumps({"id": f"z{r}", "expr": f"never_present = {r}"}))])
                    time.sleep(1.0)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                feeder_error.append(exc)

        feeder = threading.Thread(target=feed)
        feeder.start()
        wait_for(lambda: totals(status_file).get("events", 0) >= n_events // 4, "a quarter of the events", job, log)
        wait_for(lambda: spark_cluster.executors(0), "an executor on worker 0", job, log)
        killed = spark_cluster.executors(0)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        feeder.join(300)
        assert not feeder_error, feeder_error
        located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(kafka_config, topics.events)]
        assert len(located) == n_events
        want = expected_pairs(subs, located)
        wait_for(lambda: match_pairs(notes(kafka_config, topics.notifications)) >= want,
                 "every expected notification", job, log)
        wait_for(lambda: spark_cluster.executors(0) and set(spark_cluster.executors(0)).isdisjoint(killed),
                 "a new executor on worker 0", job, log)
        assert stop_job(job) == 0
    finally:
        stop_job(job)
    assert "Lost executor" in log.read_text()  # the driver saw it go (and retried any task it ran)
    assert "shard groups for 2 executor(s)" in log.read_text()  # the shards were pinned (and moved after the loss)
    docs = notes(kafka_config, topics.notifications)
    assert match_pairs(docs) == want
    ids: dict[tuple, set] = {}
    for d in docs:
        ids.setdefault((d["subscription"], d["partition"], d["offset"]), set()).add(d["id"])
    assert all(v == {notification_id(s, topics.events, p, o)} for (s, p, o), v in ids.items())
    assert registry_state(checkpoint + "/registry-columns").ids == {s.id for s in subs} | {f"z{r}" for r in range(rounds)}
    assert_nothing_in_worker_dirs(spark_cluster)
    print(f"duplicates after killing {len(killed)} executor(s): {len(docs) - len(match_pairs(docs))}")

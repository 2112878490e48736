"""Crash test: the job is SIGKILLed mid-stream and restarted from its checkpoint.

No expected notification may be missing, every duplicate carries the id of one already
sent, and the registry comes back at the version it had (no replayed batch appends
its changes twice).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
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
from tests.integration.service_fixtures import expected_pairs, job_env, make_topics, registry_state
from tests.strategies import random_event, random_subscriptions

pytestmark = pytest.mark.integration
# Two Spark start-ups in subprocesses: generous waits for a loaded 2-core machine.
WAIT_S = 600
ROOT = Path(__file__).resolve().parents[2]
N_EVENTS = 1600
ROUNDS = 8


def start_job(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen:
    """``python -m streaming run *args`` as the README runs it, in its own process group."""
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "streaming", "run", *args], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the job exited with {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def totals(status_file: Path) -> dict:
    doc = read_status(status_file)
    return (doc or {}).get("totals") or {}


@pytest.mark.timeout(1800)
def test_sigkill_mid_stream_then_restart(kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path,
                                        connector: str):
    sigkill_then_restart(kafka_config, topic_factory, tmp_path, connector, str(tmp_path / "ckpt"))


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("hadoop_store", ["hdfs"], indirect=True)  # S3: test_restart's Ctrl-C restart
def test_sigkill_mid_stream_then_restart_on_hadoop(kafka_config: KafkaClientConfig, topic_factory: Any,
                                                   tmp_path: Path, hadoop_store: Store,
                                                   monkeypatch: pytest.MonkeyPatch):
    """The same with the checkpoint on HDFS (``hdfs://``): Spark's logs and the registry are
    there, and nothing is lost."""
    hadoop_store.use(monkeypatch)  # this process's storage, to look at what the job wrote
    checkpoint = hadoop_store.location("sigkill")
    sigkill_then_restart(kafka_config, topic_factory, tmp_path, None, checkpoint, hadoop_store.job_env())
    files = hadoop_store.files(checkpoint)
    for kind in ("query/offsets/", "query/commits/", "query/metadata", "registry-columns/deltas/"):
        assert any(f.startswith(kind) for f in files), (kind, files)


def sigkill_then_restart(kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path, connector: str | None,
                         checkpoint: str, variables: dict[str, str] | None = None) -> None:
    """SIGKILL of the job mid-stream, then a restart from ``checkpoint`` (a path or URI) until every
    expected notification is out; ``variables``: more of the job's environment."""
    rng = random.Random(99)
    topics = make_topics(topic_factory)
    registry = join(checkpoint, "registry-columns")
    status_file = tmp_path / "status.json"
    env = job_env(kafka_config, topics, checkpoint, status_file, connector,
                  # this test is about the match query (patterns: test_patterns_restart)
                  PUBSUB_PATTERNS_ENABLED="false", **(variables or {}))
    for var in HADOOP_ENV.values():  # a store's settings reach the job through its spark.conf only
        env.pop(var, None)
    log = tmp_path / "job.log"
    subs = random_subscriptions(rng, 40)
    produce(kafka_config, topics.subscriptions,
            [(s.id, orjson.dumps({"id": s.id, "expr": to_text(s.expr)})) for s in subs])
    job = start_job(env, log)
    producer_error: list[BaseException] = []
    try:
        wait_for(lambda: totals(status_file).get("subscription_changes", 0) >= 40, WAIT_S, "the subscriptions", job)
        events = [random_event(rng) for _ in range(N_EVENTS)]
        per_round = N_EVENTS // ROUNDS

        def feed() -> None:  # events, and changes of never-matching subscriptions that bump the version
            try:
                for r in range(ROUNDS):
                    chunk = events[r * per_round:(r + 1) * per_round]
                    produce(kafka_config, topics.events, [orjson.dumps(e) for e in chunk], linger_ms=100)
                    dummy = [(f"z{r}", orjson.dumps({"id": f"z{r}", "expr": f"never_present = {r}"}))]
                    if r % 2:
                        dummy.append((f"z{r - 1}", orjson.dumps({"op": "delete", "id": f"z{r - 1}"})))
                    produce(kafka_config, topics.subscriptions, dummy)
                    time.sleep(0.5)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                producer_error.append(exc)

        feeder = threading.Thread(target=feed)
        feeder.start()
        wait_for(lambda: totals(status_file).get("events", 0) >= N_EVENTS // 4, WAIT_S, "a quarter of the events", job)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        version_before = registry_state(registry).version
        feeder.join(120)
        assert not producer_error, producer_error
        status_file.unlink()
        job = start_job(env, log)
        wait_for(lambda: (read_status(status_file) or {}).get("registry") is not None, WAIT_S, "the restart", job)
        assert (read_status(status_file) or {})["registry"]["version"] == version_before
        wait_for(lambda: sum(1 for _ in consume_all(kafka_config, topics.events)) == N_EVENTS, 60, "the events")
        located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(kafka_config, topics.events)]
        want = expected_pairs(subs, located)

        def delivered() -> set:
            docs = [orjson.loads(r.body) for r in consume_all(kafka_config, topics.notifications)]
            return {(d["subscription"], d["partition"], d["offset"]) for d in docs}

        wait_for(lambda: delivered() >= want, WAIT_S, "every expected notification", job)
        time.sleep(2)  # the batches after the last event carry the last dummy changes
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    docs = [orjson.loads(r.body) for r in consume_all(kafka_config, topics.notifications)]
    got = {(d["subscription"], d["partition"], d["offset"]) for d in docs}
    assert got == want
    ids: dict[tuple, set] = {}
    for d in docs:
        ids.setdefault((d["subscription"], d["partition"], d["offset"]), set()).add(d["id"])
    assert all(v == {notification_id(s, topics.events, p, o)} for (s, p, o), v in ids.items())
    state = registry_state(registry)
    assert state.ids == {s.id for s in subs} | {f"z{r}" for r in range(1, ROUNDS, 2)}
    assert state.batch_ids == sorted(set(state.batch_ids))  # one version per batch, never two
    print(f"duplicates after the crash: {len(docs) - len(got)}; registry version {version_before} -> {state.version}")

"""Restarts of ``python -m streaming run`` on its embedded defaults (durable embedded broker).

The service runs as a subprocess exactly as the README starts it, with the default
configuration except its var/ paths (in ``tmp_path``), a back-to-back trigger and no
patterns queries. One
test stops it every way it can stop: SIGINT, SIGTERM, SIGKILL of its process group, and a
"reboot" (every process of it killed at once, broker and storage included), restarting
after each; no expected notification may be missing, every duplicate carries an id
already sent, and no process of it is left behind. Another removes the broker's data
behind the checkpoint: the service says so and stops, and ``run --reset`` starts over.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from matchers.expr import to_text
from streaming.instance import PidRecord, start_time
from streaming.kafka.broker import recorded_address
from streaming.kafka.client_config import KafkaClientConfig
from streaming.metrics import read_status
from streaming.notifications import notification_id
from streaming.storage import join
from tests.integration.hadoop_fixtures import Store
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import expected_pairs, registry_state
from tests.integration.test_crash_recovery import WAIT_S, start_job, totals, wait_for
from tests.strategies import random_event, random_subscriptions

pytestmark = pytest.mark.integration

N_SUBS = 30
EVENTS_PER_RUN = 60


class Service:
    """The service under test: its environment, log, and every process it ran."""

    def __init__(self, var: Path) -> None:
        self.var = var
        self.status_file = var / "status.json"
        self.data_dir = var / "broker"
        self.log = var / "service.log"
        var.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "PUBSUB_SPARK_CHECKPOINT_DIR": str(var / "checkpoint"),
            "PUBSUB_STATUS_STATUS_FILE": str(self.status_file),
            "PUBSUB_KAFKA_EMBEDDED_DATA_DIR": str(self.data_dir),
            "PUBSUB_SPARK_TRIGGER_INTERVAL": "0 seconds",
            # The match query only (patterns restarts: test_patterns_restart.py): each query's
            # source starts a Python worker that must connect back to Spark within a fixed 10 s,
            # which three starting at once on a loaded 2-core machine sometimes miss.
            "PUBSUB_PATTERNS_ENABLED": "false",
        }
        self.env.pop("PUBSUB_KAFKA_BOOTSTRAP_SERVERS", None)
        self.job: subprocess.Popen | None = None
        self.seen: set[tuple[int, int | None]] = set()  # (pid, start time) of the broker's processes
        self.sessions: set[int] = set()  # the service's sessions (its pid: start_new_session)

    def start(self, *args: str) -> subprocess.Popen:
        self.status_file.unlink(missing_ok=True)
        self.job = start_job(self.env, self.log, *args)
        self.sessions.add(self.job.pid)
        return self.job

    def started(self) -> KafkaClientConfig:
        """Wait for the job's query; the client configuration of its broker."""
        wait_for(lambda: (read_status(self.status_file) or {}).get("registry") is not None, WAIT_S,
                 "the job to start", self.job)
        children = PidRecord(self.data_dir / "pids").alive()
        assert set(children) == {"kafka"}, children
        self.seen |= {(pid, start_time(pid)) for pid in children.values()}
        return KafkaClientConfig.create(recorded_address(self.data_dir))

    def broker_pids(self) -> list[int]:
        return list(PidRecord(self.data_dir / "pids").alive().values())

    def stop(self, sig: signal.Signals) -> int:
        """Signal the service (SIGINT: its whole process group, as Ctrl-C does); its exit code."""
        assert self.job is not None
        if sig == signal.SIGINT:
            os.killpg(self.job.pid, sig)
        else:
            self.job.send_signal(sig)
        return self.job.wait(120)

    def kill_group(self) -> None:
        assert self.job is not None
        os.killpg(self.job.pid, signal.SIGKILL)
        self.job.wait(30)

    def left_behind(self) -> list[int]:
        """Live processes of any run: in one of its sessions, or a recorded broker process."""
        out = [pid for pid, ticks in self.seen if start_time(pid) == ticks]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and start_time(int(entry.name)) is not None:
                try:
                    session = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3])
                except (OSError, IndexError, ValueError):
                    continue
                if session in self.sessions:
                    out.append(int(entry.name))
        return sorted(set(out))

    def orphans(self, timeout: float = 30.0) -> list[int]:
        """:meth:`left_behind` once it is empty, or after ``timeout`` (the JVM exits last)."""
        deadline = time.monotonic() + timeout
        while (left := self.left_behind()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def end(self) -> None:
        """Kill whatever is left (a failed test must not leave processes behind)."""
        if self.job is not None and self.job.poll() is None:
            os.killpg(self.job.pid, signal.SIGKILL)
            self.job.wait(30)
        for pid in self.left_behind():
            os.kill(pid, signal.SIGKILL)


def subscribe(config: KafkaClientConfig, subs: list) -> None:
    produce(config, "subscriptions", [(s.id, orjson.dumps({"id": s.id, "expr": to_text(s.expr)})) for s in subs])


def publish(config: KafkaClientConfig, events: list[dict]) -> None:
    produce(config, "events", [orjson.dumps(e) for e in events], linger_ms=100)


def wait_matched(service: Service, count: int) -> None:
    wait_for(lambda: totals(service.status_file).get("events", 0) >= count, WAIT_S, "a batch of events", service.job)


def run_then_publish(service: Service, config: KafkaClientConfig, rng: random.Random) -> int:
    """Half the events matched, the other half just published (a kill follows at once)."""
    half = EVENTS_PER_RUN // 2
    publish(config, [random_event(rng) for _ in range(half)])
    wait_matched(service, half)
    publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN - half)])
    return EVENTS_PER_RUN


@pytest.mark.timeout(2400)
def test_restarts_lose_nothing_and_leave_nothing(tmp_path: Path):
    rng = random.Random(7)
    subs = random_subscriptions(rng, N_SUBS)
    service = Service(tmp_path / "var")
    published = 0
    try:
        # 1: subscriptions and events, then SIGINT (Ctrl-C). A second `run` meanwhile is refused.
        service.start()
        config = service.started()
        subscribe(config, subs)
        wait_for(lambda: totals(service.status_file).get("subscription_changes", 0) >= N_SUBS, WAIT_S,
                 "the subscriptions", service.job)
        second = start_job(service.env, service.var / "second.log")
        assert second.wait(120) == 3
        assert "in use by another running instance" in (service.var / "second.log").read_text()
        publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN)])
        published += EVENTS_PER_RUN
        wait_matched(service, 1)
        assert service.stop(signal.SIGINT) == 0
        # 2: restart, events mid-stream, SIGTERM.
        service.start()
        config = service.started()
        publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN)])
        published += EVENTS_PER_RUN
        wait_matched(service, 1)
        assert service.stop(signal.SIGTERM) == 0
        # 3: restart, events mid-stream, SIGKILL of the process group: the broker's
        # processes get their death signal; the next start ends any still running.
        service.start()
        config = service.started()
        published += run_then_publish(service, config, rng)
        service.kill_group()
        kafka_pid = PidRecord(service.data_dir / "pids").read()["kafka"][0]
        wait_for(lambda: start_time(kafka_pid) is None, 30, "the broker to die with the service")
        # 4: restart, events mid-stream, "reboot": every process killed at the same moment.
        service.start()
        config = service.started()
        published += run_then_publish(service, config, rng)
        broker = service.broker_pids()
        assert service.job is not None
        os.killpg(service.job.pid, signal.SIGKILL)
        for pid in broker:
            os.kill(pid, signal.SIGKILL)
        service.job.wait(30)
        # 5: restart, everything delivered, graceful stop.
        service.start()
        config = service.started()
        events = consume_all(config, "events")
        assert len(events) == published  # the topics outlived every kind of stop
        want = expected_pairs(subs, [(r.partition, r.offset, orjson.loads(r.body)) for r in events])
        docs = wait_delivered(service, config, want)
        assert service.stop(signal.SIGTERM) == 0
        orphans = service.orphans()
    finally:
        service.end()
    got = {(d["subscription"], d["partition"], d["offset"]) for d in docs}
    assert got == want
    assert all(d["id"] == notification_id(d["subscription"], "events", d["partition"], d["offset"]) for d in docs)
    assert orphans == []
    print(f"restarts: expected {len(want)}, received {len(docs)} ({len(got)} distinct), "
          f"duplicates {len(docs) - len(got)}, events {published}, orphans {len(orphans)}")


def wait_delivered(service: Service, config: KafkaClientConfig, want: set[tuple[str, int, int]]) -> list[dict]:
    """The notifications once they hold every pair of ``want`` (duplicates included)."""

    def delivered() -> list[dict]:
        return [orjson.loads(r.body) for r in consume_all(config, "notifications")]

    wait_for(lambda: {(d["subscription"], d["partition"], d["offset"]) for d in delivered()} >= want,
             WAIT_S, "every expected notification", service.job)
    return delivered()


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("hadoop_store", ["s3a"], indirect=True)  # HDFS: the SIGKILL restart of test_crash_recovery
def test_restarts_from_a_hadoop_checkpoint(tmp_path: Path, hadoop_store: Store, monkeypatch: pytest.MonkeyPatch):
    """The checkpoint on S3 (``s3a://``) or HDFS (``hdfs://``): Ctrl-C mid-stream, a restart that
    carries on (registry, offsets) from there, a graceful stop; nothing lost, nothing left."""
    rng = random.Random(9)
    subs = random_subscriptions(rng, N_SUBS)
    checkpoint = hadoop_store.location("restart")
    service = Service(tmp_path / "var")  # the store's settings reach the job as spark.conf only:
    service.env.update({"PUBSUB_SPARK_CHECKPOINT_DIR": checkpoint, **hadoop_store.job_env()})
    hadoop_store.use(monkeypatch)  # and this process's storage, to look at what it wrote
    try:
        service.start()
        config = service.started()
        subscribe(config, subs)
        wait_for(lambda: totals(service.status_file).get("subscription_changes", 0) >= N_SUBS, WAIT_S,
                 "the subscriptions", service.job)
        publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN)])
        wait_matched(service, 1)
        assert service.stop(signal.SIGINT) == 0
        version = registry_state(join(checkpoint, "registry-columns")).version
        assert version >= 1
        service.start()
        config = service.started()
        assert (read_status(service.status_file) or {})["registry"]["version"] == version  # read back from the store
        publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN)])
        events = consume_all(config, "events")
        assert len(events) == 2 * EVENTS_PER_RUN
        want = expected_pairs(subs, [(r.partition, r.offset, orjson.loads(r.body)) for r in events])
        docs = wait_delivered(service, config, want)
        assert service.stop(signal.SIGTERM) == 0
        orphans = service.orphans()
    finally:
        service.end()
    assert {(d["subscription"], d["partition"], d["offset"]) for d in docs} == want
    assert all(d["id"] == notification_id(d["subscription"], "events", d["partition"], d["offset"]) for d in docs)
    assert orphans == []
    assert registry_state(join(checkpoint, "registry-columns")).ids == {s.id for s in subs}
    files = hadoop_store.files(checkpoint)
    for kind in ("query/offsets/", "query/commits/", "registry-columns/deltas/"):
        assert any(f.startswith(kind) for f in files), (kind, files)
    assert not (service.var / "checkpoint").exists()  # nothing on the local disk instead


@pytest.mark.timeout(1200)
def test_lost_broker_data_stops_the_service_and_reset_starts_over(tmp_path: Path):
    rng = random.Random(8)
    subs = random_subscriptions(rng, N_SUBS)
    service = Service(tmp_path / "var")
    checkpoint = service.var / "checkpoint"
    try:
        service.start()
        config = service.started()
        subscribe(config, subs)
        publish(config, [random_event(rng) for _ in range(EVENTS_PER_RUN)])
        wait_matched(service, EVENTS_PER_RUN)
        assert service.stop(signal.SIGTERM) == 0
        shutil.rmtree(service.data_dir)  # the broker's data is gone
        size = service.log.stat().st_size
        assert service.start().wait(WAIT_S) == 1
        said = service.log.read_bytes()[size:].decode(errors="replace")
        assert re.search(r"ERROR streaming: stopped: the topics no longer hold records that the checkpoint", said)
        assert "run --reset" in said
        assert (read_status(service.status_file) or {}).get("state") == "failed"
        service.start("--reset")
        config = service.started()
        assert len(list(service.var.glob("checkpoint.reset-*"))) == 1
        subscribe(config, subs)  # the topics as they are now: empty, filled again
        events = [random_event(rng) for _ in range(EVENTS_PER_RUN)]
        publish(config, events)
        located = [(r.partition, r.offset, orjson.loads(r.body)) for r in consume_all(config, "events")]
        want = expected_pairs(subs, located)
        wait_for(lambda: {(d["subscription"], d["partition"], d["offset"]) for d in
                          (orjson.loads(r.body) for r in consume_all(config, "notifications"))} >= want,
                 WAIT_S, "the notifications after the reset", service.job)
        assert service.stop(signal.SIGTERM) == 0
        assert checkpoint.exists() and service.orphans() == []
    finally:
        service.end()

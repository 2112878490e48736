"""Instances in flight survive a SIGKILL of the service and complete after the restart.

The service runs as the README runs it (``python -m streaming run``, both queries), the
patterns queries configured by ``[patterns]`` through the environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from streaming.spark import PROJECT_ROOT
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks

from .kafka_helpers import consume_all, produce
from .service_fixtures import Topics, job_env
from .test_patterns import event_json, heartbeat

pytestmark = pytest.mark.integration

SUBS = {k: TABLE1[k] for k in ("S2", "S3", "S4", "AutQ")}


def _start(kafka_config, topics, checkpoint: Path, log: Path) -> subprocess.Popen:
    env = job_env(kafka_config, Topics(topics["events"], topics["subs"], topics["notes"], topics["errors"]),
                  checkpoint, checkpoint.parent / "status.json", PYTHONPATH=str(PROJECT_ROOT),
                  PUBSUB_SPARK_TRIGGER_INTERVAL="1 second", PUBSUB_PATTERNS_WATERMARK_DELAY="5 seconds",
                  PUBSUB_STATUS_LOG_DIR=str(checkpoint.parent / "logs"))
    return subprocess.Popen([sys.executable, "-m", "streaming", "run"], cwd=PROJECT_ROOT, env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _wait_for(pred, proc: subprocess.Popen, log: Path, timeout: float, what: str, describe=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the job exited ({proc.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what} ({describe()}):\n{log.read_text()[-3000:]}")


def _distinct(kafka_config, topic, timeout: float = 30) -> dict[str, tuple]:
    """Notifications by id (a replayed batch may send one twice); empty while unreadable."""
    out = {}
    try:
        records = consume_all(kafka_config, topic, timeout=timeout)
    except TimeoutError:
        return out
    for r in records:
        n = orjson.loads(r.value)
        out[n["id"]] = (n["subscription"], tuple(n["witness"]["events"]))
    return out


def _errors(kafka_config, topic) -> list[str]:
    try:
        return [orjson.loads(r.value)["reason"] for r in consume_all(kafka_config, topic, timeout=30)]
    except TimeoutError:
        return ["(unreadable)"]


def test_sigkill_and_restart(kafka_config, topic_factory, tmp_path):
    topics = {"events": topic_factory("rev", 2), "subs": topic_factory("rsub"),
              "notes": topic_factory("rnote"), "errors": topic_factory("rerr")}
    checkpoint, log = tmp_path / "ckpt", tmp_path / "job.log"
    events = stock_ticks(240, 7)
    first, second = events[:120], events[120:]
    # the watermark (5 ticks behind) lets the first half's early events through
    early = [e for e in first if e.t1 < first[-1].t1 - 10]
    expected_first = {(k[1], k[5]) for k in reference_matches(SUBS, early)}
    expected_all = {(k[1], k[5]) for k in reference_matches(SUBS, events)}
    assert expected_all - expected_first, "some patterns must span the restart"

    produce(kafka_config, topics["subs"],
            [(n, orjson.dumps({"op": "upsert", "id": n, "pattern": t})) for n, t in SUBS.items()])
    proc = _start(kafka_config, topics, checkpoint, log)
    try:
        registry = checkpoint / "patterns" / "pattern-registry"
        _wait_for(lambda: (registry / "v000000000001.json").exists(), proc, log, 300, "the registry's first version")
        produce(kafka_config, topics["events"], [(e.attrs["name"], event_json(e)) for e in first])
        _wait_for(lambda: set(_distinct(kafka_config, topics["notes"]).values()) >= expected_first,
                  proc, log, 300, "the first half's notifications",
                  lambda: f"missing {sorted(expected_first - set(_distinct(kafka_config, topics['notes']).values()))[:5]}"
                          f" of {len(expected_first)}; errors {_errors(kafka_config, topics['errors'])}")
        commits = checkpoint / "patterns" / "patterns" / "commits"
        n_commits = len(list(commits.iterdir()))
        _wait_for(lambda: len(list(commits.iterdir())) > n_commits or n_commits > 0, proc, log, 30, "a commit")
    finally:
        _kill(proc, signal.SIGKILL)
    produce(kafka_config, topics["events"],
            [(e.attrs["name"], event_json(e)) for e in second] + [(None, heartbeat(events[-1].t1))])
    proc = _start(kafka_config, topics, checkpoint, log)
    try:
        _wait_for(lambda: set(_distinct(kafka_config, topics["notes"]).values()) >= expected_all,
                  proc, log, 300, "every notification after the restart")
    finally:
        _kill(proc, signal.SIGTERM)
    got = _distinct(kafka_config, topics["notes"], timeout=60)
    assert set(got.values()) == expected_all
    assert len(got) == len(expected_all)

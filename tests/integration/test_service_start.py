"""How the service starts and fails: Spark settings, quiet logs, one-paragraph failures."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streaming.__main__ import RESTARTS
from streaming.config import PROJECT_ROOT
from streaming.kafka.client_config import KafkaClientConfig
from streaming.metrics import read_status
from streaming.spark import LOG4J_CONF
from tests.integration.kafka_helpers import produce

pytestmark = pytest.mark.integration


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (Linux: /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, len(address), 8))
            ip = ipaddress.ip_address(raw)
            found.add(str(getattr(ip, "ipv4_mapped", None) or ip))
    return found


def test_session_settings_reach_spark(spark: Any) -> None:
    sc = spark.sparkContext
    assert sc.master == "local[2,4]"  # local[2] asked for: a failed task is retried
    jvm = sc._jvm
    assert jvm.java.lang.System.getProperty("log4j2.configurationFile") == f"file:{LOG4J_CONF}"
    level = jvm.org.apache.logging.log4j.LogManager.getLogger(
        "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor").getLevel()
    assert str(level) == "ERROR"
    assert sc.uiWebUrl.startswith("http://127.0.0.1:")
    if Path("/proc/net/tcp").exists():
        assert listening_addresses(int(sc.uiWebUrl.rsplit(":", 1)[1])) == {"127.0.0.1"}


def test_a_spark_failure_is_one_paragraph_and_the_status_says_failed(kafka_broker: Any, tmp_path: Path) -> None:
    status_file, logs = tmp_path / "status.json", tmp_path / "logs"
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "--set", f"kafka.bootstrap_servers={kafka_broker.bootstrap_servers}",
         "--set", f"spark.checkpoint_dir={tmp_path / 'checkpoint'}", "--set", f"status.status_file={status_file}",
         "--set", f"status.log_dir={logs}",
         "--set", "spark.conf.spark.sql.streaming.stateStore.providerClass=no.such.Provider", "run"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 1
    console = done.stdout + done.stderr
    errors = [line for line in console.splitlines() if " ERROR " in line]
    assert len(errors) == 1, console
    assert "start-up failed: " in errors[0] and "ClassNotFoundException: no.such.Provider" in errors[0]
    assert f"{logs / 'service.log'}" in errors[0]
    assert "Traceback" not in console and "\tat " not in console, console
    doc = read_status(status_file)
    assert doc is not None and doc["state"] == "failed" and "no.such.Provider" in doc["error"], json.dumps(doc)
    trace = (logs / "service.log").read_text()
    assert "Traceback (most recent call last)" in trace and "\tat org.apache.spark" in trace


SLOW_PYTHON = """#!/bin/sh
# The first streaming source runner connects back after Spark's fixed 10 s have passed.
case "$*" in *python_streaming_source_runner*) if mkdir "{mark}" 2>/dev/null; then sleep 15; fi;; esac
exec "{python}" "$@"
"""


def test_a_python_worker_connecting_back_late_restarts_the_query(kafka_config: KafkaClientConfig, tmp_path: Path) -> None:
    """What a loaded machine does now and then, made certain: the query restarts, nothing else.
    With the ``kafka-py`` source, whose planner is a Python process (Spark's connector has none)."""
    wrapper = tmp_path / "python"
    wrapper.write_text(SLOW_PYTHON.format(mark=tmp_path / "delayed", python=sys.executable))
    wrapper.chmod(0o755)
    tag = uuid.uuid4().hex[:10]
    topics = {t: f"{t}-{tag}" for t in ("events", "subscriptions", "notifications", "errors")}
    status_file, console = tmp_path / "status.json", tmp_path / "console.txt"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "PYSPARK_PYTHON": str(wrapper),
           **{f"PUBSUB_KAFKA_{t.upper()}_TOPIC": name for t, name in topics.items()}}
    service = subprocess.Popen(
        [sys.executable, "-m", "streaming", "--set", f"kafka.bootstrap_servers={kafka_config.bootstrap_servers}",
         "--set", f"spark.checkpoint_dir={tmp_path / 'checkpoint'}", "--set", f"status.status_file={status_file}",
         "--set", f"status.log_dir={tmp_path / 'logs'}", "--set", "patterns.enabled=false",
         "--set", "kafka.use_java_connector=false", "run"],
        cwd=tmp_path, env=env, stdout=console.open("wb"), stderr=subprocess.STDOUT)
    try:
        def running() -> bool:
            assert service.poll() is None, console.read_text(errors="replace")
            return bool((read_status(status_file) or {}).get("batches"))

        wait(running, 600)
        text = console.read_text(errors="replace")
        assert ("query match failed (Python worker failed to connect back.); restarting it from its checkpoint "
                f"(1 of {RESTARTS})") in text
        produce(kafka_config, topics["events"], [b'{"price": 1}', b'{"price": 2}', b'{"price": 3}'])
        wait(lambda: running() and (read_status(status_file) or {})["totals"].get("events") == 3, 300)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=180) == 0
        assert (read_status(status_file) or {})["state"] == "stopped"
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()


def wait(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)

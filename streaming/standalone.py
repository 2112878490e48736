"""A Spark standalone cluster on loopback, started from the pip-installed pyspark (for the cluster
tests, one per test run, and `scripts.bench.cluster_memory`).

A master and two workers (``--cores 1 --memory 1g``), each worker in its own temporary
directory (its cwd and ``--work-dir``, never the repository) and with no ``PYTHONPATH``:
what the executors need must come through Spark (``spark.executorEnv.PYTHONPATH``, the
tasks' functions) or the checkpoint location (the registry's files).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from streaming.instance import free_ports

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 180


class StandaloneCluster:
    """A running master and its workers; :meth:`executors` finds the executor processes."""

    def __init__(self, root: Path, workers: int = 2):
        self.root = root
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []
        self.worker_dirs = [root / f"worker{i}" for i in range(workers)]
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_DAEMON_MEMORY="256m")

    def _start(self, cwd: Path, *args: str) -> subprocess.Popen:
        cwd.mkdir(parents=True, exist_ok=True)
        log = open(cwd / "daemon.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], cwd=cwd, env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(proc)
        return proc

    def start(self) -> None:
        self._start(self.root / "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for d, ui_port in zip(self.worker_dirs, self.worker_ui_ports, strict=True):
            self._start(d, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "1g", "--work-dir", str(d / "work"),
                        "--webui-port", str(ui_port))
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() < len(self.worker_dirs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"the standalone cluster did not start: see the logs under {self.root}")
            time.sleep(0.5)

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                doc = json.load(r)
        except (OSError, ValueError, http.client.HTTPException):  # a UI still starting: cut short, or not JSON yet
            return 0
        return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")

    def executors(self, worker: int) -> list[int]:
        """Process ids of the executor JVMs a worker launched (its child processes)."""
        pid = self.processes[1 + worker].pid
        out = subprocess.run(["pgrep", "-P", str(pid), "-f", "CoarseGrainedExecutorBackend"],
                             capture_output=True, text=True, check=False)
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.processes):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


@contextmanager
def standalone_cluster(root: Path, workers: int = 2) -> Iterator[StandaloneCluster]:
    """Start a cluster under ``root`` and stop every one of its processes at the end."""
    cluster = StandaloneCluster(root, workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()

"""Checkpoints on real Hadoop file systems: an S3 server (SeaweedFS) and an HDFS (MiniDFSCluster).

Session fixtures, each started once per test run on loopback and stopped at its end (and
killed with the test process): ``s3_store`` (``s3a://pubsub/...``) and ``hdfs_cluster``
(``hdfs://127.0.0.1:PORT/...``); ``hadoop_store`` is each in turn. A store gives a fresh
checkpoint URI (:meth:`Store.location`), the settings the service needs for it (the
``spark.hadoop.*`` entries of ``spark.conf``, as environment variables of the job or as a
mapping) and a listing of what is really there through the store's own client
(:meth:`Store.files`), not through :mod:`streaming.storage`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow.fs as pafs
import pytest

from streaming import storage
from streaming.instance import ChildServer, free_ports
from streaming.jars import classpath
from tests.integration.s3_server import SeaweedS3, end_group, spawn_tied

MINI_HDFS = Path(__file__).parent / "java" / "MiniHdfs.java"
HDFS_START_TIMEOUT_S = 300.0  # a JVM compiling MiniHdfs.java and formatting a name node, on 2 loaded cores


@dataclass
class Store:
    """A Hadoop file system of the tests: where checkpoints go and how to reach it."""

    scheme: str
    base: str  # s3a://bucket or hdfs://host:port
    hadoop: dict[str, str]  # Hadoop settings (without "spark.hadoop.")
    client: pafs.FileSystem = field(repr=False)  # the store's own client (not the service's)

    def location(self, name: str) -> str:
        """A new, unique checkpoint URI ``<base>/<name>-<random>``."""
        return f"{self.base}/{name}-{uuid.uuid4().hex[:8]}"

    def spark_conf(self) -> dict[str, str]:
        return {f"spark.hadoop.{k}": v for k, v in self.hadoop.items()}

    def job_env(self) -> dict[str, str]:
        """The same settings as environment variables of ``python -m streaming`` (``PUBSUB_SPARK_CONF_...``)."""
        return {f"PUBSUB_SPARK_CONF_{k.upper()}": v for k, v in self.spark_conf().items()}

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Let :mod:`streaming.storage` of this process reach the store (for the tests' own reads)."""
        for var, value in storage.environment(self.spark_conf()).items():
            monkeypatch.setenv(var, value)
        storage._open.cache_clear()

    def _path(self, uri: str) -> str:
        assert uri.startswith(self.base + "/"), uri
        return uri[len("s3a://"):] if self.scheme == "s3a" else uri[len(self.base):]  # bucket/key, or /path

    def files(self, uri: str) -> list[str]:
        """Paths (relative to ``uri``) of every file under ``uri``, as the store lists them."""
        root = self._path(uri)
        infos = self.client.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return sorted(i.path[len(root):].lstrip("/") for i in infos if i.type == pafs.FileType.File)


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An S3 server on loopback (SeaweedFS) with bucket ``pubsub``; checkpoints ``s3a://pubsub/...``."""
    with SeaweedS3(tmp_path_factory.mktemp("s3")) as server:
        yield Store("s3a", f"s3a://{server.bucket}", server.hadoop_conf(), server.client())


class MiniHdfs(ChildServer):
    """``java MiniHdfs.java``: a name node and a data node on 127.0.0.1 in one JVM (context manager).

    Ends when its standard input closes (:meth:`stop`), or is killed with the test process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rpc_port = self.http_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> MiniHdfs:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else (shutil.which("java") or "java")
        cp = os.pathsep.join(classpath("hdfs-minicluster"))
        log_path = self.root / "minihdfs.log"
        for attempt in range(3):
            self.rpc_port, self.http_port = free_ports(2)
            data = self.root / f"data{attempt}"
            self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
            start = self._log.tell()
            self.process = spawn_tied(
                [java, "-Xmx512m", "-XX:TieredStopAtLevel=1", "-cp", cp, str(MINI_HDFS), str(data),
                 str(self.rpc_port), str(self.http_port)],
                self._log, {**os.environ, "HADOOP_USER_NAME": os.environ.get("HADOOP_USER_NAME", "root")},
                stdin=subprocess.PIPE)
            deadline = time.monotonic() + HDFS_START_TIMEOUT_S
            while time.monotonic() < deadline and self.process.poll() is None:
                with open(log_path, "rb") as f:
                    f.seek(start)
                    if b"MiniHdfs ready" in f.read():
                        return self
                time.sleep(0.5)
            exited = self.process.poll() is not None
            self.stop()
            if not (exited and attempt < 2):
                break
        raise RuntimeError(f"the HDFS mini-cluster did not start: see {log_path}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.stdin is not None:
                try:
                    process.stdin.close()  # its signal to shut down
                except OSError:
                    pass
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                pass
            end_group(process)
        self._close_log()


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """An HDFS (MiniDFSCluster: one name node, one data node) on loopback; checkpoints
    ``hdfs://127.0.0.1:PORT/...``, the service's own files through WebHDFS."""
    from streaming.webhdfs import WebHdfs

    with MiniHdfs(tmp_path_factory.mktemp("hdfs")) as hdfs:
        http = f"127.0.0.1:{hdfs.http_port}"
        client = pafs.PyFileSystem(pafs.FSSpecHandler(WebHdfs("127.0.0.1", hdfs.http_port, user="root")))
        yield Store("hdfs", f"hdfs://127.0.0.1:{hdfs.rpc_port}", {"dfs.namenode.http-address": http}, client)


@pytest.fixture(params=["s3a", "hdfs"])
def hadoop_store(request: pytest.FixtureRequest) -> Any:
    """Each Hadoop store in turn (``s3_store``, then ``hdfs_cluster``), started on first use."""
    return request.getfixturevalue("s3_store" if request.param == "s3a" else "hdfs_cluster")

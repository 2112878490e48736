"""Environment checks of ``streaming.spark`` that need no running Spark."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streaming import jars
from streaming import spark as session


def _unset(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Unset ``names`` for the test: what ``_prepare_environment`` sets then goes at its end too
    (``delenv`` of an unset variable would restore nothing)."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_missing_java_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(jars.JavaNotFoundError, match="JAVA_HOME"):
        jars.check_java()


def test_environment_points_workers_at_this_interpreter_and_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _unset(monkeypatch, "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "SPARK_HOME")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    session._prepare_environment(local=True)
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [
        str(session.PROJECT_ROOT),
        "/somewhere/else",
    ]
    session._prepare_environment(local=True)  # idempotent
    assert os.environ["PYTHONPATH"].count(str(session.PROJECT_ROOT)) == 1


def test_a_local_spark_home_links_pyspark_but_not_its_python_zip(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    import pyspark

    src = Path(pyspark.__file__).resolve().parent
    monkeypatch.setattr(session, "SPARK_HOME_DIR", tmp_path / "var" / "spark-home")  # made if missing
    home = session.local_spark_home()
    assert home is not None and home.parent == tmp_path / "var" / "spark-home"
    assert (home / "bin").resolve() == src / "bin" and (home / "jars").resolve() == src / "jars"
    assert not (home / "python").exists()  # Spark's python/lib/pyspark.zip is not found there
    assert session.local_spark_home() == home  # idempotent (and concurrent starts keep the links)
    _unset(monkeypatch, "SPARK_HOME")
    session._prepare_environment(local=True)
    assert os.environ["SPARK_HOME"] == str(home)
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")  # the environment's wins
    session._prepare_environment(local=True)
    assert os.environ["SPARK_HOME"] == "/opt/spark"


def test_a_read_only_project_leaves_spark_home_to_pyspark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "var"
    blocker.write_text("a file where the directory should be")
    monkeypatch.setattr(session, "SPARK_HOME_DIR", blocker / "spark-home")
    assert session.local_spark_home() is None


def test_explicit_settings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    _unset(monkeypatch, "SPARK_HOME")
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python")
    session._prepare_environment(local=True)
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python"


def test_local_masters_retry_failed_tasks() -> None:
    assert session.retrying_master("local[2]") == "local[2,4]"
    assert session.retrying_master("local[*]") == "local[*,4]"
    assert session.retrying_master("local") == "local[1,4]"
    assert session.retrying_master("local[2,8]") == "local[2,8]"
    assert session.retrying_master("spark://h:7077") == "spark://h:7077"


class FakeBuilder:
    """Records the settings; the first ``failures`` starts raise."""

    def __init__(self, failures: int) -> None:
        self.failures, self.starts = failures, 0
        self.conf: dict[str, str] = {}
        self.master_url: str | None = None

    def appName(self, _name: str) -> FakeBuilder:
        return self

    def master(self, url: str) -> FakeBuilder:
        self.master_url = url
        return self

    def config(self, key: str, value: str) -> FakeBuilder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> Any:
        self.starts += 1
        if self.starts <= self.failures:
            raise RuntimeError("Java gateway process exited before sending its port number")
        return SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=lambda level: None),
                               dataSource=SimpleNamespace(register=lambda source: None))


@pytest.mark.parametrize("failures", [0, 1, 2])
def test_get_session_passes_the_settings_and_retries_a_failed_start_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failures: int,
) -> None:
    builder = FakeBuilder(failures)
    monkeypatch.setattr(session, "SparkSession", SimpleNamespace(builder=builder))
    monkeypatch.setattr(session, "check_java", lambda: "java")
    conf = {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": "-Dmine=1"}
    if failures > 1:
        with pytest.raises(RuntimeError, match="Java gateway"):
            session.get_session("a", "local[2]", conf, log_dir=tmp_path / "logs")
        return
    session.get_session("a", "local[2]", conf, log_dir=tmp_path / "logs")
    assert builder.starts == failures + 1 and builder.master_url == "local[2,4]"
    assert builder.conf["spark.ui.enabled"] == "false" and builder.conf["spark.sql.session.timeZone"] == "UTC"
    # the offset and commit logs without child processes per file (Hadoop's FileContext spawns readlink, chmod)
    assert builder.conf["spark.sql.streaming.checkpointFileManagerClass"].endswith(".FileSystemBasedCheckpointFileManager")
    assert builder.conf["spark.driver.extraJavaOptions"] == (
        f"-Dlog4j2.configurationFile=file:{session.LOG4J_CONF} -Dpubsub.log.dir={tmp_path / 'logs'} "
        f"{session.DRIVER_JIT} -Dmine=1")  # the caller's options last: they win
    assert (tmp_path / "logs").is_dir()


def test_only_local_masters_are_pinned_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    session._prepare_environment(local=False)
    assert "SPARK_LOCAL_IP" not in os.environ
    assert [session.is_local(m) for m in ("local", "local[2]", "local[*]", "spark://h:7077", "yarn")] == [
        True, True, True, False, False]
    assert session.cluster_conf() == {"spark.executorEnv.PYTHONPATH": str(session.PROJECT_ROOT)}


def test_storage_conf_loads_hadoop_aws_for_s3a_only_and_passes_the_storage_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session, "classpath", lambda name: [f"/jars/{name}-1.jar", f"/jars/{name}-2.jar"])
    configured: list[dict] = []

    def configure(conf: dict) -> dict[str, str]:  # as storage.configure, without changing os.environ
        configured.append(dict(conf))
        return session.storage.environment(conf)

    monkeypatch.setattr(session.storage, "configure", configure)
    conf = {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:8333", "spark.hadoop.fs.s3a.secret.key": "s",
            "spark.driver.extraClassPath": "/mine.jar"}
    local = session.storage_conf(["s3a://bucket/ckpt"], True, conf)
    assert local == {"spark.driver.extraClassPath": "/mine.jar:/jars/hadoop-aws-1.jar:/jars/hadoop-aws-2.jar"}
    assert configured == [conf]  # the driver's storage follows the same settings
    cluster = session.storage_conf(["s3a://bucket/ckpt"], False, conf)
    assert cluster["spark.executor.extraClassPath"] == "/jars/hadoop-aws-1.jar:/jars/hadoop-aws-2.jar"
    assert cluster["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://127.0.0.1:8333"
    assert cluster["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "s"
    hdfs = session.storage_conf(["hdfs://nn:8020/ckpt", "file:///x"], False,
                                {"spark.hadoop.dfs.namenode.http-address": "nn:9870"})
    assert hdfs == {"spark.executorEnv.PUBSUB_WEBHDFS_ADDRESS": "nn:9870"}  # no jars: pyspark reads HDFS itself
    assert session.storage_conf(["file:///x"], True, {}) == {}


def test_broadcast_chunks_stay_below_half_the_smallest_g1_region() -> None:
    """Each job's task binary is broadcast in chunks of ``spark.broadcast.blockSize``, each
    allocated whole: one of half a G1 region or more (1 MB regions at a 1 GB heap) is humongous."""
    size = session.DEFAULT_CONF["spark.broadcast.blockSize"]
    assert size.endswith("k") and int(size[:-1]) * 1024 < 2**20 // 2


@pytest.mark.parametrize(("banner", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_402"', 8),
    ('openjdk version "25-ea" 2025-09-16', 25),
    ("java", None),
])
def test_java_major_reads_the_version_banner(banner: str, major: int | None) -> None:
    assert session.java_major(banner) == major


@pytest.mark.parametrize(("banner", "vfork"), [
    ('openjdk version "17.0.15" 2025-04-15', True),
    ('openjdk version "21.0.2" 2024-01-16', True),
    ('openjdk version "25" 2025-09-16', False),  # deprecated there
    ('java version "1.8.0_402"', False),
    ("", False),
])
def test_the_driver_spawns_by_vfork_on_java_17_to_21_only(banner: str, vfork: bool) -> None:
    options = session.java_options("/logs", "-Dmine=1", banner).split(" ")
    assert (session.DRIVER_SPAWN in options) is vfork
    assert options[-1] == "-Dmine=1" and session.DRIVER_JIT in options  # the caller's options last: they win


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_worker_keeper_runs_a_job_only_when_none_ran_for_its_period() -> None:
    clock, jobs, alive = _Clock(), [], [True]
    keeper = session.WorkerKeeper(SimpleNamespace(defaultParallelism=2), 30.0, lambda: alive[0],
                                  run_job=lambda: jobs.append(clock.now), clock=clock)
    assert keeper.step() and jobs == [] and keeper.wait_s() == 30.0
    clock.now += 29.0
    keeper.touch()  # a match job ran
    clock.now += 29.0
    assert keeper.step() and jobs == [] and keeper.wait_s() == 1.0
    clock.now += 1.0
    assert keeper.step() and jobs == [159.0] and keeper.jobs == 1 and keeper.wait_s() == 30.0
    clock.now += 45.0  # late (a loaded machine): runs at once
    assert keeper.step() and jobs == [159.0, 204.0]
    alive[0] = False  # the query stopped
    clock.now += 30.0
    assert not keeper.step() and len(jobs) == 2


def test_the_worker_keeper_stops_when_told_or_when_its_job_fails() -> None:
    clock = _Clock()
    keeper = session.WorkerKeeper(SimpleNamespace(defaultParallelism=2), 10.0, lambda: True,
                                  run_job=lambda: None, clock=clock)
    keeper.stop()
    clock.now += 10.0
    assert not keeper.step() and keeper.jobs == 0

    def stopped_session() -> None:
        raise RuntimeError("SparkContext was shut down")

    failing = session.WorkerKeeper(SimpleNamespace(defaultParallelism=2), 10.0, lambda: True,
                                   run_job=stopped_session, clock=clock)
    clock.now += 10.0
    assert not failing.step()
    def gone() -> bool:
        raise RuntimeError("py4j: the Java side is gone")

    broken = session.WorkerKeeper(SimpleNamespace(defaultParallelism=2), 10.0, gone, clock=clock)
    assert not broken.step()


@pytest.mark.parametrize("period", [0.0, -1.0, session.WORKER_IDLE_S, 90.0])
def test_the_worker_keeper_period_must_be_under_sparks_idle_minute(period: float) -> None:
    with pytest.raises(ValueError, match="keep-alive period"):
        session.WorkerKeeper(SimpleNamespace(defaultParallelism=2), period, lambda: True)


def test_the_worker_keepers_job_has_one_empty_task_per_slot() -> None:
    calls: list[tuple[int | str, int]] = []

    class _RDD:
        def foreach(self, fn: Any) -> None:
            assert fn(0) is None
            calls.append(("foreach", 0))

    class _SC:
        defaultParallelism = 3

        def parallelize(self, data: Any, slices: int) -> _RDD:
            calls.append((len(data), slices))
            return _RDD()

    keeper = session.WorkerKeeper(_SC(), 5.0, lambda: True)
    keeper.run_job()
    assert calls == [(3, 3), ("foreach", 0)]

"""The Spark session of the service, configured for Python workers and both Kafka connectors.

Spark's JVM logs through ``conf/log4j2.properties``: warnings on the console one line each,
whole records with their stack traces in ``<log dir>/spark.log``. The web UI is on, bound
to loopback (``spark.ui.enabled=false`` turns it off).

A local master (``local[...]``) binds the driver to loopback. Any other master (a
standalone cluster, YARN, Kubernetes) keeps Spark's own address choice (set
``spark.driver.host`` in ``spark.conf`` where it guesses wrong), and its executors run
the interpreter ``PYSPARK_PYTHON`` names (this one by default) with ``PYTHONPATH`` = this
project's root unless ``spark.conf`` sets ``spark.executorEnv.PYTHONPATH``: the project
and its environment must be at those paths on every node, or shipped (docs/deploy.md).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streaming import storage
from streaming.config import PROJECT_ROOT
from streaming.jars import check_java, classpath

log = logging.getLogger(__name__)

LOG4J_CONF = PROJECT_ROOT / "conf" / "log4j2.properties"
DEFAULT_LOG_DIR = PROJECT_ROOT / "var" / "logs"

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "true",  # bound to SPARK_LOCAL_IP (127.0.0.1 unless set)
    "spark.ui.port": "4040",  # the next free port after it when taken
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopTimeout": "30s",
    # Offset and commit logs through Hadoop's FileSystem API: the default (FileContext)
    # spawns `readlink` and `chmod` processes for every log file on a local disk without
    # Hadoop's native library, about a third of the driver JVM's CPU per micro-batch
    # (docs/e2e.md). Its rename is atomic on local disks and HDFS, as the default's is.
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    # Python workers are pooled by their environment, and a simplified traceback is an
    # environment variable of SQL's Python workers only: with it, the match query's RDD
    # tasks and the patterns query's mapInArrow tasks ran in two pools of workers. Off,
    # they share one (full tracebacks).
    "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
    # Every Spark job broadcasts its task binary in chunks of this size, each chunk allocated
    # whole however small the binary (a few kB here). Spark's 4 MB is a humongous allocation for
    # G1 (half a heap region or more: regions are 1-4 MB at 1-8 GB of heap), which can start a
    # young collection and a marking cycle of the driver's heap: 4-18 such collections in a
    # 4-minute benchmark, 0-3 with this (docs/e2e.md, "Where the time goes"). 256 kB is under
    # half the smallest region.
    "spark.broadcast.blockSize": "256k",
}

#: Added for local masters only: the driver and its Python workers stay on loopback.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def is_local(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver's JVM (``local``, ``local[2]``, ...)."""
    return master == "local" or master.startswith("local[")


def cluster_conf() -> dict[str, str]:
    """Settings a cluster's executors need to import the project (its root on their ``PYTHONPATH``)."""
    return {"spark.executorEnv.PYTHONPATH": str(PROJECT_ROOT)}


def _prepare_environment(local: bool) -> None:
    """Python workers must run this interpreter, reach the driver and import the project."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        home = local_spark_home()
        if home is not None:
            os.environ.setdefault("SPARK_HOME", str(home))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PROJECT_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *paths])


SPARK_HOME_DIR = PROJECT_ROOT / "var" / "spark-home"
_HOME_ENTRIES = ("bin", "sbin", "jars", "conf", "data", "licenses", "examples")


def local_spark_home() -> Path | None:
    """``SPARK_HOME`` for a local master (set only when the environment sets none): the
    installed pyspark's own directories (``bin``, ``jars``...) linked from a directory of
    :data:`SPARK_HOME_DIR` named after that installation, all but ``python/``.

    Why: Spark starts each Python process with ``$SPARK_HOME/python/lib/pyspark.zip`` (and
    py4j's zip) first on its ``PYTHONPATH``, before anything the environment or
    ``spark.executorEnv.PYTHONPATH`` adds (``PythonUtils.sparkPythonPath``; no setting changes
    the order), and a zip import compiles every module each time (no bytecode cache). The
    patterns processor's driver-side process (``transform_with_state_driver_worker``) has
    10 s to connect back; its imports took 2.1 s of CPU from the zip against 0.45 s from
    ``site-packages`` (6.4-7.5 s against 1.7 s of wall clock at load 6.5; 5.5 s against
    0.2 s at load 11). Without ``python/`` Spark's entries name nothing and the interpreter
    (``PYSPARK_PYTHON``, the same installation) imports its own pyspark with cached bytecode.

    A standalone cluster is not affected: its executors take their worker's ``SPARK_HOME``.
    None (pyspark's own home, as without this) when pyspark's directory is not a Spark home
    or the links cannot be made (a read-only project directory)."""
    import zlib

    import pyspark

    src = Path(pyspark.__file__).resolve().parent
    if not (src / "jars").is_dir() or not (src / "bin").is_dir():
        return None
    # one directory per installation: sessions of two interpreters never rewrite each other's links
    home = SPARK_HOME_DIR / f"{pyspark.__version__}-{zlib.crc32(str(src).encode('utf-8')):08x}"
    try:
        home.mkdir(parents=True, exist_ok=True)
        for name in _HOME_ENTRIES:
            link = home / name
            if (src / name).is_dir() and not link.is_symlink():
                try:
                    link.symlink_to(src / name, target_is_directory=True)
                except FileExistsError:  # another process made it meanwhile
                    pass
    except OSError as exc:
        log.warning("SPARK_HOME left to pyspark (%s): its Python processes import pyspark from its zip, "
                    "more slowly", exc)
        return None
    return home


#: The driver's JVM compiles with C1 only: it plans micro-batches and schedules jobs, no record
#: passes through it, and C2 recompiling the code each batch generates took about a fifth of a
#: core at 5,000 events/s (docs/e2e.md). ``-XX:TieredStopAtLevel=4`` in ``extra`` undoes it.
DRIVER_JIT = "-XX:TieredStopAtLevel=1"


#: The driver's JVM starts processes by ``vfork`` and ``exec``, not through ``jspawnhelper``
#: (``posix_spawn`` of a helper that then execs the command): Hadoop's local file system starts
#: a ``chmod`` for every checkpoint log file and its checksum without its native library, four
#: a micro-batch, and each took 2.1 ms of CPU and 4.5 ms of wall that way against 1.1 and 2.3
#: (docs/e2e.md). Java 17 to 21 only: later releases deprecate the mechanism.
DRIVER_SPAWN = "-Djdk.lang.Process.launchMechanism=VFORK"
_VFORK_JAVA = range(17, 22)


def java_major(banner: str) -> int | None:
    """The major version in a ``java -version`` banner (``openjdk version "17.0.15" ...``: 17;
    ``"1.8.0_402"``: 8), or None."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def java_options(log_dir: str | Path | None = None, extra: str = "", java: str = "") -> str:
    """``spark.driver.extraJavaOptions``: our log4j configuration and log directory, :data:`DRIVER_JIT`,
    :data:`DRIVER_SPAWN` when ``java`` (the ``java -version`` banner) is Java 17 to 21, ``extra``."""
    log_dir = Path(log_dir) if log_dir else DEFAULT_LOG_DIR
    spawn = DRIVER_SPAWN if java_major(java) in _VFORK_JAVA else ""
    return " ".join(filter(None, (f"-Dlog4j2.configurationFile=file:{LOG4J_CONF}",
                                  f"-Dpubsub.log.dir={log_dir}", DRIVER_JIT, spawn, extra)))


def retrying_master(master: str) -> str:
    """``local[N]`` as ``local[N,4]``: local mode retries a failed task only when told to."""
    if master.startswith("local[") and "," not in master:
        return master[:-1] + ",4]"
    return "local[1,4]" if master == "local" else master


S3A_SCHEMES = ("s3a://", "s3n://", "s3://")


def storage_conf(locations: Iterable[str], local: bool, conf: Mapping[str, Any]) -> dict[str, str]:
    """Spark settings for the file systems of ``locations`` (URIs the session reads and writes:
    the service's checkpoint), over ``conf`` (the session's settings so far).

    * An ``s3a://`` location puts the ``hadoop-aws`` jar set (:mod:`streaming.jars`) on the
      driver's class path, and on a cluster on the executors' (``extraClassPath``: local paths,
      so the jars must be at the same paths on every node, as the project's environment is;
      nothing is shipped). Without one the set is not loaded at all.
    * The storage of this process follows the Hadoop settings of ``conf``
      (:func:`streaming.storage.configure`: ``spark.hadoop.fs.s3a.*``,
      ``spark.hadoop.dfs.namenode.http-address``); on a cluster the executors' Python workers
      get the same environment (``spark.executorEnv.*``). A local master's inherit it.

    Raises
    ------
    JarsError
        If a location is ``s3a://`` and the ``hadoop-aws`` set is not resolved (``make setup``).
    """
    out: dict[str, str] = {}
    if any(str(u).startswith(S3A_SCHEMES) for u in locations):
        jars = classpath("hadoop-aws")
        for key in ("spark.driver.extraClassPath",) + (() if local else ("spark.executor.extraClassPath",)):
            out[key] = os.pathsep.join(filter(None, (str(conf.get(key, "")), *jars)))
    env = storage.configure(conf)
    if not local:
        out.update({f"spark.executorEnv.{var}": value for var, value in env.items()
                    if f"spark.executorEnv.{var}" not in conf})
    return out


def get_session(
    app_name: str = "pubsub",
    master: str = "local[2,4]",
    conf: Mapping[str, Any] | None = None,
    log_dir: str | Path | None = None,
    locations: Iterable[str] = (),
) -> SparkSession:
    """Create (or return the active) Spark session with both Kafka connectors: Spark's own
    ``format("kafka")`` (the ``spark-kafka`` jars, :mod:`streaming.jars`) and ``kafka-py``.

    A failed start is retried once (a loaded machine can time a start out).

    Parameters
    ----------
    app_name : str
        Spark application name.
    master : str
        Spark master URL; ``local[N]`` becomes ``local[N,4]`` so that a failed task is retried.
    conf : Mapping[str, Any], optional
        Extra Spark settings, applied over the defaults (2 shuffle partitions, Arrow on,
        UI on loopback, UTC session time zone; a local master binds the driver to 127.0.0.1,
        any other gets :func:`cluster_conf`); a ``spark.driver.extraJavaOptions`` given here
        is appended to the logging options, a ``spark.jars`` to the connector's jars.
    log_dir : path, optional
        Directory of Spark's log file ``spark.log`` (default ``var/logs`` of the project).
    locations : URIs, optional
        Where the session reads and writes (the checkpoint): their file systems' settings
        (:func:`storage_conf`: ``hadoop-aws``'s jars for ``s3a://``).

    Returns
    -------
    SparkSession
        The session, with log level WARN.

    Raises
    ------
    JavaNotFoundError
        If Java is missing.
    JarsError
        If the connector's jars are not resolved (``make setup``).
    """
    local = is_local(master)
    _prepare_environment(local)
    banner = check_java()
    Path(log_dir or DEFAULT_LOG_DIR).mkdir(parents=True, exist_ok=True)
    settings = {**DEFAULT_CONF, **(LOCAL_CONF if local else cluster_conf()), **(conf or {})}
    settings["spark.driver.extraJavaOptions"] = java_options(
        log_dir, str(settings.get("spark.driver.extraJavaOptions", "")), banner)
    settings["spark.jars"] = ",".join(filter(None, (str(settings.get("spark.jars", "")), *classpath("spark-kafka"))))
    settings.update(storage_conf(locations, local, settings))  # s3a:// and hdfs:// locations
    builder = SparkSession.builder.appName(app_name).master(retrying_master(master))
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # any start-up failure gets one more try
        log.warning("Spark did not start (%s); trying once more", str(exc).splitlines()[0] if str(exc) else exc)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from streaming.kafka import register

    register(spark)
    return spark


#: Spark stops every idle Python worker of an executor once none was released for a minute
#: (``PythonWorkerFactory.IDLE_WORKER_TIMEOUT_NS``, checked every 10 s; fixed in Spark 4.x: no
#: setting changes it, ``spark.python.worker.idleTimeoutSeconds`` is about a running task), and a
#: worker's cached indexes go with it (at 10,000,000 subscriptions a new worker took 49 s to map
#: its shards back in). Any worker's release restarts that minute for all of them.
WORKER_IDLE_S = 60.0


def _nothing(_: Any) -> None:
    """The keep-alive job's task (:class:`WorkerKeeper`)."""


class WorkerKeeper(threading.Thread):
    """Keeps the executors' Python workers (and the indexes they cache) alive while no batch
    runs: a job of ``tasks`` empty tasks (``sc.defaultParallelism`` by default: on a local
    master every slot's worker) whenever no job ran for ``period`` seconds (under
    :data:`WORKER_IDLE_S`); :meth:`touch` says one did. Stops when ``alive()`` turns false or
    a job fails (the session stopping). ``run_job`` (default: the empty job on ``sc``) and
    ``clock`` are for tests."""

    def __init__(self, sc: Any, period: float, alive: Callable[[], bool], tasks: int = 0,
                 run_job: Callable[[], None] | None = None, clock: Callable[[], float] = time.monotonic):
        super().__init__(name="python-worker-keeper", daemon=True)
        if not 0 < period < WORKER_IDLE_S:
            raise ValueError(f"keep-alive period {period} s: must be over 0 and under {WORKER_IDLE_S:.0f} s")
        self.period, self.alive, self.clock = period, alive, clock
        n = tasks or sc.defaultParallelism
        self.run_job = run_job or (lambda: sc.parallelize(range(n), n).foreach(_nothing))
        self.last = clock()
        self.jobs = 0
        self.stopped = threading.Event()

    def touch(self) -> None:
        """A job just ran Python workers."""
        self.last = self.clock()

    def wait_s(self) -> float:
        """Seconds until the next keep-alive job is due (0: now)."""
        return max(0.0, self.last + self.period - self.clock())

    def step(self) -> bool:
        """Run the keep-alive job if due; False when the keeper should stop."""
        if self.stopped.is_set():
            return False
        try:
            if not self.alive():
                return False
            if self.wait_s() > 0:
                return True
            self.run_job()
        except Exception as exc:  # the session stopping under the job
            log.info("Python worker keep-alive stopped: %s", str(exc).splitlines()[0] if str(exc) else exc)
            return False
        self.jobs += 1
        self.touch()
        return True

    def run(self) -> None:
        while self.step():
            self.stopped.wait(self.wait_s() or self.period)

    def stop(self) -> None:
        self.stopped.set()

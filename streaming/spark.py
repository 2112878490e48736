"""The Spark session of the service, configured for Python workers and the ``kafka-py`` source.

A local master (``local[...]``) binds the driver to loopback. Any other master (a
standalone cluster, YARN, Kubernetes) keeps Spark's own address choice (set
``spark.driver.host`` in ``spark.conf`` where it guesses wrong), and its executors run
the interpreter ``PYSPARK_PYTHON`` names (this one by default) with ``PYTHONPATH`` = this
project's root unless ``spark.conf`` sets ``spark.executorEnv.PYTHONPATH``: the project
and its environment must be at those paths on every node, or shipped (docs/deploy.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

#: Root of the project (the directory holding the ``streaming`` package).
PROJECT_ROOT = Path(__file__).resolve().parents[1]

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopTimeout": "30s",
}

#: Added for local masters only: the driver and its Python workers stay on loopback.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


class JavaNotFoundError(RuntimeError):
    """No usable Java runtime for Spark."""


def check_java() -> str:
    """Return the ``java -version`` banner of the Java Spark will use.

    Raises
    ------
    JavaNotFoundError
        If no ``java`` is found (``JAVA_HOME`` or ``PATH``) or it does not run.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    fix = "install a Java 17 or 21 runtime (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    if not java or not Path(java).exists():
        raise JavaNotFoundError(f"Spark needs Java but none was found: {fix}")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, timeout=60, check=False)
    except OSError as exc:
        raise JavaNotFoundError(f"{java} does not run ({exc}): {fix}") from None
    if done.returncode != 0:
        raise JavaNotFoundError(f"{java} -version failed: {fix}")
    return done.stderr.decode(errors="replace").splitlines()[0] if done.stderr else java


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
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(PROJECT_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *paths])


def get_session(
    app_name: str = "pubsub",
    master: str = "local[2]",
    conf: Mapping[str, Any] | None = None,
) -> SparkSession:
    """Create (or return the active) Spark session with the ``kafka-py`` source registered.

    Parameters
    ----------
    app_name : str
        Spark application name.
    master : str
        Spark master URL (``local[2]`` by default).
    conf : Mapping[str, Any], optional
        Extra Spark settings, applied over the defaults (2 shuffle partitions, Arrow on,
        UI off, UTC session time zone; a local master binds the driver to 127.0.0.1, any
        other gets :func:`cluster_conf`).

    Returns
    -------
    SparkSession
        The session, with log level WARN.

    Raises
    ------
    JavaNotFoundError
        If Java is missing.
    """
    local = is_local(master)
    _prepare_environment(local)
    check_java()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**DEFAULT_CONF, **(LOCAL_CONF if local else cluster_conf()), **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from streaming.kafka import register

    register(spark)
    return spark

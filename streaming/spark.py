"""The Spark session of the service, configured for Python workers and the ``kafka-py`` source."""

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
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.stopTimeout": "30s",
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


def _prepare_environment() -> None:
    """Python workers must run this interpreter, reach the driver and import the project."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
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
        UI off, UTC session time zone, driver bound to 127.0.0.1).

    Returns
    -------
    SparkSession
        The session, with log level WARN.

    Raises
    ------
    JavaNotFoundError
        If Java is missing.
    """
    _prepare_environment()
    check_java()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from streaming.kafka import register

    register(spark)
    return spark

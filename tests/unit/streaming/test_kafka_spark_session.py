"""Environment checks of ``streaming.spark`` that need no running Spark."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streaming import spark as session


def test_missing_java_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(session.JavaNotFoundError, match="JAVA_HOME"):
        session.check_java()


def test_environment_points_workers_at_this_interpreter_and_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP"):
        monkeypatch.delenv(name, raising=False)
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


def test_explicit_settings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python")
    session._prepare_environment(local=True)
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python"


def test_only_local_masters_are_pinned_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    session._prepare_environment(local=False)
    assert "SPARK_LOCAL_IP" not in os.environ
    assert [session.is_local(m) for m in ("local", "local[2]", "local[*]", "spark://h:7077", "yarn")] == [
        True, True, True, False, False]
    assert session.cluster_conf() == {"spark.executorEnv.PYTHONPATH": str(session.PROJECT_ROOT)}

"""The project's Java parts: jar sets resolved from Maven Central once, then used offline.

Each set is a POM in ``conf/maven/`` (:data:`SETS`). ``python -m streaming.jars resolve``
(run by ``make setup``) asks Maven for each set's runtime jars and writes their paths in the
local Maven repository (``~/.m2``, Maven's own cache) to ``.venv/jars/<set>.classpath``,
next to a copy of the POM it was resolved from. Later calls of :func:`classpath` read that
file: no network, no Maven. A set whose POM changed, or whose jars left the Maven cache, is
resolved again by ``resolve`` and reported by :func:`classpath` with the command that fixes it.

Sets:

* ``kafka-broker``: Apache Kafka's broker (:mod:`streaming.kafka.broker`);
* ``spark-kafka``: Spark's own Kafka connector, ``format("kafka")`` (:mod:`streaming.spark`);
* ``hadoop-aws``: Hadoop's ``s3a://`` file system for Spark;
* ``hdfs-minicluster``: an HDFS name node and data node in one JVM, for the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from matchers.errors import PubSubError
from streaming.config import PROJECT_ROOT

POM_DIR = PROJECT_ROOT / "conf" / "maven"
SETS = ("kafka-broker", "spark-kafka", "hadoop-aws", "hdfs-minicluster")
#: Where the resolved classpaths live: with the virtual environment, as the Python packages do.
JARS_DIR = Path(os.environ.get("PUBSUB_JARS_DIR", str(PROJECT_ROOT / ".venv" / "jars")))


class JarsError(PubSubError, RuntimeError):
    """A jar set is not resolved, or Maven cannot resolve it."""


class JavaNotFoundError(PubSubError, RuntimeError):
    """No usable Java runtime (Spark and the broker need one)."""


def java_binary() -> str:
    """The ``java`` of ``JAVA_HOME``, else of ``PATH``.

    Raises
    ------
    JavaNotFoundError
        If there is none.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JavaNotFoundError(f"Spark and the embedded broker need Java but none was found: {_JAVA_FIX}")
    return java


_JAVA_FIX = "install a Java 17 or 21 runtime (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"


def check_java() -> str:
    """Return the ``java -version`` banner of :func:`java_binary`.

    Raises
    ------
    JavaNotFoundError
        If no ``java`` is found (``JAVA_HOME`` or ``PATH``) or it does not run.
    """
    java = java_binary()
    try:
        done = subprocess.run([java, "-version"], capture_output=True, timeout=60, check=False)
    except OSError as exc:
        raise JavaNotFoundError(f"{java} does not run ({exc}): {_JAVA_FIX}") from None
    if done.returncode != 0:
        raise JavaNotFoundError(f"{java} -version failed: {_JAVA_FIX}")
    return done.stderr.decode(errors="replace").splitlines()[0] if done.stderr else java


def _pom(name: str) -> Path:
    if name not in SETS:
        raise JarsError(f"unknown jar set {name!r}; the sets are {', '.join(SETS)}")
    return POM_DIR / f"{name}.xml"


def _files(name: str) -> tuple[Path, Path]:
    """The classpath file of set ``name`` and the POM it was resolved from."""
    return JARS_DIR / f"{name}.classpath", JARS_DIR / f"{name}.pom.xml"


def _current(name: str) -> list[str] | None:
    """The jars of ``name`` when resolved from its present POM and all still on disk."""
    cp_file, resolved_pom = _files(name)
    try:
        if resolved_pom.read_bytes() != _pom(name).read_bytes():
            return None
        jars = [p for p in cp_file.read_text().strip().split(os.pathsep) if p]
    except OSError:
        return None
    return jars if jars and all(Path(j).is_file() for j in jars) else None


def classpath(name: str) -> list[str]:
    """Paths of the jars of set ``name``.

    Raises
    ------
    JarsError
        If the set was not resolved (``make setup``), its POM changed since, or a jar is gone.
    """
    jars = _current(name)
    if jars is None:
        raise JarsError(
            f"the Java jars of {name!r} are not resolved (or {_pom(name).relative_to(PROJECT_ROOT)} "
            f"changed): run `make setup` (or `{sys.executable} -m streaming.jars resolve {name}`); "
            "it needs Maven (mvn) and Java 17+, and Maven Central the first time")
    return jars


def mvn() -> str:
    """The ``mvn`` command.

    Raises
    ------
    JarsError
        If Maven is not on the machine.
    """
    found = shutil.which("mvn")
    if not found:
        raise JarsError("Maven (mvn) is missing: it resolves the project's Java jars once "
                        "(Debian: apt-get install maven); Java 17+ is needed too")
    return found


def resolve(name: str, offline: bool = False) -> list[str]:
    """Resolve set ``name`` with Maven (from its cache when it can) and record its classpath.

    Raises
    ------
    JarsError
        If Maven is missing or fails (its last lines are in the message).
    """
    jars = _current(name)
    if jars is not None:
        return jars
    cp_file, resolved_pom = _files(name)
    JARS_DIR.mkdir(parents=True, exist_ok=True)
    tmp = cp_file.with_suffix(".tmp")
    argv = [mvn(), "-B", "-q", *(["-o"] if offline else []), "-f", str(_pom(name)),
            "dependency:build-classpath", "-Dmdep.includeScope=runtime",
            f"-Dmdep.outputFile={tmp}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not tmp.is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise JarsError(f"Maven could not resolve the jar set {name!r} ({' '.join(argv)}):\n{tail}")
    tmp.replace(cp_file)
    shutil.copyfile(_pom(name), resolved_pom)
    return classpath(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streaming.jars", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    res = sub.add_parser("resolve", help="resolve jar sets (all by default) and record their classpaths")
    res.add_argument("names", nargs="*", metavar="SET", help=f"of {', '.join(SETS)}")
    res.add_argument("--offline", action="store_true", help="from Maven's cache only")
    show = sub.add_parser("classpath", help="print the classpath of a resolved set")
    show.add_argument("name", choices=SETS)
    args = parser.parse_args(argv)
    try:
        if args.command == "classpath":
            print(os.pathsep.join(classpath(args.name)))
            return 0
        for name in args.names or SETS:
            started = time.monotonic()
            print(f"jars {name}: resolving (Maven; downloads once, then cached) ...", flush=True)
            jars = resolve(name, offline=args.offline)
            size = sum(Path(j).stat().st_size for j in jars) / 2**20
            print(f"jars {name}: {len(jars)} jars, {size:.0f} MiB, {time.monotonic() - started:.1f} s",
                  flush=True)
    except JarsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU of the benchmark's JVMs by thread, for :mod:`scripts.bench.e2e`: where Spark's and the
broker's CPU goes outside the Python tasks (docs/e2e.md, "Where the time goes").

:func:`snapshot` reads every thread of each Java process below this one from ``/proc``
(Linux keeps the first 15 characters of a thread's name) and sums them by :data:`GROUPS`;
the ``children`` group is the CPU of the processes it started and waited for (the ``chmod``
that Hadoop's local file system starts for each checkpoint log file). :func:`per_event`
turns two snapshots into microseconds per event, the threads that ended between them as
``ended threads`` (the process's CPU less its live threads').
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from scripts.bench import kit

GROUPS = (
    ("stream exec", "trigger loop"), ("C1 Compiler", "JIT"), ("C2 Compiler", "JIT"), ("Sweeper", "JIT"),
    ("G1 ", "GC"), ("GC Thread", "GC"), ("VM Thread", "GC"), ("Executor task", "task threads"),
    ("dag-scheduler", "scheduler"), ("dispatcher", "scheduler"), ("task-result", "scheduler"),
    ("spark-listener", "listeners"), ("element-tracki", "listeners"), ("kafka-admin", "Kafka admin"),
    ("data-plane", "requests"), ("kafka-network", "requests"), ("kafka-request", "requests"),
)
"""Thread name prefixes and their groups; a thread matching none is ``other``."""


_PROCESS = "process"
"""The key of a snapshot's whole-process CPU (its threads', ended ones' too)."""


def group(name: str) -> str:
    """The group of a thread named ``name`` (:data:`GROUPS`)."""
    return next((g for prefix, g in GROUPS if name.startswith(prefix)), "other")


def _threads(pid: int) -> defaultdict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out: defaultdict[str, float] = defaultdict(float)
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        f = stat[stat.rindex(")") + 2:].split()
        out[group(stat[stat.index("(") + 1:stat.rindex(")")])] += (int(f[11]) + int(f[12])) / tick
    return out


def snapshot() -> dict[str, dict[str, float]]:
    """CPU seconds by thread group of each Java process below this one: ``jvm`` (Spark's) and
    ``broker`` (the embedded broker), as :func:`scripts.bench.kit.cpu_by_kind` names them."""
    procs = kit.processes()
    out: dict[str, defaultdict[str, float]] = {}
    for pid in kit.descendants(os.getpid(), procs):
        p = procs[pid]
        if not p.cmd or "java" not in p.cmd.split(" ")[0]:
            continue
        try:
            counts = _threads(pid)
        except OSError:
            continue
        counts["children"] += p.reaped_s
        counts[_PROCESS] += p.cpu_s
        kind = "broker" if " kafka.Kafka " in f" {p.cmd} " else "jvm"
        into = out.setdefault(kind, defaultdict(float))
        for g, seconds in counts.items():
            into[g] += seconds
    return {kind: dict(counts) for kind, counts in out.items()}


def per_event(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
              n: int) -> dict[str, dict[str, float]]:
    """Microseconds per event of each group between two :func:`snapshot` s, largest first, and
    ``ended threads``: the process's CPU that no live thread accounts for (a group whose
    threads ended meanwhile would be negative: groups are floored at 0)."""
    out = {}
    for kind, counts in after.items():
        d = {g: 1e6 * (s - before.get(kind, {}).get(g, 0.0)) / max(1, n) for g, s in counts.items()}
        process = d.pop(_PROCESS, 0.0)
        d["ended threads"] = process - sum(us for g, us in d.items() if g != "children")
        out[kind] = dict(sorted(((g, max(0.0, us)) for g, us in d.items()), key=lambda kv: -kv[1]))
    return out


def line(groups: dict[str, dict[str, float]]) -> str:
    """``groups`` for the log: each kind's groups above 0.5 µs."""
    return "; ".join(f"{kind} " + ", ".join(f"{g} {us:.1f}" for g, us in d.items() if us >= 0.5)
                     for kind, d in sorted(groups.items()))

"""Every benchmark of this package, declared once: its arguments in ``make bench`` and
``make bench-quick``, and where its record and its rendering go.

``python -m scripts.bench --all [--quick]`` runs the benchmarks that have arguments for
that mode one after the other, each in its own process (``python -m
scripts.bench.<module> <arguments>``), and stops at the first that fails. A benchmark
module is a sweep (measurements over a grid of workload parameters, one record written by
:func:`scripts.bench.kit.save`) and a render (the record to markdown, written into its page
by :func:`scripts.bench.kit.write_section`); it imports the kit and the library, never
another benchmark. Each matcher benchmark loops over the registered matchers itself
(:func:`matchers.base.names`); a new benchmark module is one line of :data:`BENCHES`.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    """One benchmark module and its runs."""

    module: str
    """``scripts.bench.<module>``; ``harness`` is ``python -m scripts.bench``."""
    full: tuple[str, ...] | None = ()
    """Arguments of its run in ``make bench``; ``None``: not part of it (it compares code
    trees, needs a cluster, or is run by hand for one question)."""
    quick: tuple[str, ...] | None = ("--quick",)
    """Arguments of its run in ``make bench-quick``; ``None``: not part of it."""
    record: str = ""
    """The JSON it writes under ``docs/bench/`` and the page its rendering goes to."""

    def command(self, quick: bool, extra: Sequence[str] = ()) -> list[str]:
        """The command line of this run (``extra`` appended)."""
        module = "scripts.bench" if self.module == "harness" else f"scripts.bench.{self.module}"
        args = self.quick if quick else self.full
        assert args is not None
        return [sys.executable, "-m", module, *args, *extra]


BENCHES: tuple[Bench, ...] = (
    Bench("harness", record="harness-<date>.json -> bench.md"),
    Bench("harness", ("--goal",), quick=None, record="goal-<date>.json -> bench.md"),
    Bench("counting", record="counting.json -> counting.md"),
    Bench("fabret", record="fabret.json -> fabret.md"),
    Bench("opindex", record="opindex.json -> opindex.md"),
    Bench("vci", record="vci.json -> vci.md"),
    Bench("amkh", record="amkh.json -> amkh.md"),
    Bench("cayuga", record="cayuga.json -> cayuga.md"),
    Bench("kafka_read", record="kafka_read.json -> kafka.md"),
    Bench("e2e", record="e2e.json -> bench/e2e.md"),
    Bench("stages", record="stages.json -> e2e.md"),
    Bench("dense", ("--n-subs", "100000", "--n-subs", "1000000", "--matchers", "bitmark,counting,vci,brute,opindex",
                    "--matchers-for", "1000000:bitmark"), quick=None, record="dense.json (--record) -> bench.md"),
    Bench("quamina", quick=None, record="quamina.json -> rules-bench.md"),  # needs --with 'quamina=--quamina PATH'
    Bench("flink", quick=None, record="flink.json -> cayuga.md"),  # needs --with 'flink=--flink-python PATH'
    Bench("auto", None, None, record="auto.json (--record) -> bench.md"),
    Bench("trees", None, None, record="trees-<goal>.json -> bench.md"),
    Bench("cayuga_trees", None, None, record="--json PATH"),
    Bench("patterns", None, None, record="patterns.json"),
    Bench("patterns_state", None, None, record="patterns_state.json -> cayuga.md"),
    Bench("census", None, None, record="census.json"),
    Bench("keyed_state", None, None, record="keyed_state.json"),
    Bench("shared_index", None, None, record="printed"),
    Bench("cluster_memory", None, None, record="printed"),
    Bench("shard_tasks", None, None, record="printed"),
)


def selected(quick: bool) -> list[Bench]:
    """The runs of ``make bench`` (``quick``: of ``make bench-quick``)."""
    return [b for b in BENCHES if (b.quick if quick else b.full) is not None]


def run(quick: bool, extra: Mapping[str, str] | None = None, dry_run: bool = False) -> int:
    """Run the suite; ``extra`` maps a module to more arguments (a shell-quoted string).

    Returns the exit code of the first run that fails, else 0.
    """
    extra = extra or {}
    unknown = set(extra) - {b.module for b in BENCHES}
    if unknown:
        raise SystemExit(f"--with names no benchmark of the suite: {sorted(unknown)}")
    for bench in selected(quick):
        cmd = bench.command(quick, shlex.split(extra.get(bench.module, "")))
        print("$ python", shlex.join(cmd[1:]), flush=True)
        if dry_run:
            continue
        code = subprocess.call(cmd)
        if code:
            return code
    return 0

"""The benchmark suite: every benchmark of ``make bench`` and ``make bench-quick``, declared once.

``python -m scripts.bench --all [--quick]`` runs them one after the other, each in its own
process (``python -m scripts.bench.<module> <arguments>``), and stops at the first that
fails. Each matcher benchmark loops over the registered matchers itself
(:func:`matchers.base.names`); a new benchmark module is added to :data:`BENCHES` here.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    """One run of a benchmark module: its arguments at paper sizes and in quick mode."""

    module: str
    """``scripts.bench.<module>``; ``harness`` is ``python -m scripts.bench``."""
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = ("--quick",)
    """Arguments of the quick run; ``None``: not part of ``--quick``."""

    def command(self, quick: bool, extra: Sequence[str] = ()) -> list[str]:
        """The command line of this run (``extra`` appended)."""
        module = "scripts.bench" if self.module == "harness" else f"scripts.bench.{self.module}"
        args = self.quick if quick else self.full
        assert args is not None
        return [sys.executable, "-m", module, *args, *extra]


BENCHES: tuple[Bench, ...] = (
    Bench("harness"),
    Bench("harness", ("--goal",), quick=None),
    Bench("counting"),
    Bench("fabret"),
    Bench("opindex"),
    Bench("vci"),
    Bench("amkh"),
    Bench("cayuga"),
    Bench("kafka_read"),
    Bench("e2e"),
    Bench("dense", ("--n-subs", "100000", "--n-subs", "1000000", "--matchers", "bitmark,counting,vci,brute,opindex",
                    "--matchers-for", "1000000:bitmark"), quick=None),
    Bench("quamina", quick=None),  # needs --with 'quamina=--quamina PATH'
    Bench("flink", quick=None),  # needs --with 'flink=--flink-python PATH'
)


def selected(quick: bool) -> list[Bench]:
    """The runs of ``make bench`` (``quick``: of ``make bench-quick``)."""
    return [b for b in BENCHES if not quick or b.quick is not None]


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

"""Counting matcher benchmark: the goal of issue 2 on OpIndex Table 3 defaults.

For each N, the Table 3 workload of :func:`scripts.workloads.opindex` (d = 20K
attributes, Γmax = 4, m = 20 attributes per event, θ1 = 40% '=', the rest '<=' / '>=',
σ = 50) is generated (not timed), then measured with CPU time (``time.process_time``)
and wall time, next to the machine's load average (the machine is shared):

* build: ``add`` of every subscription (split into predicate acquisition, the fold into
  the main CSR and the rest) plus the first match's lazy phase-1 build;
* matching: µs per event and events/s on one core, split into phase 1 (satisfied
  predicates) and phase 2 (counting);
* memory: ``memory_bytes()`` per predicate of all DNF conjunctions;
* an incremental delta: remove 100 subscriptions, add 100 new ones, match 10 events.

Goal (issue 2): at N = 1M, at least 25,000 events/s, build under 10 s, under 100
bytes per predicate.  Run ``python -m scripts.bench.counting [--quick]``; results go to
``docs/bench/counting.json`` (``counting-quick.json``) and a table to
``docs/counting.md`` (full mode only).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from matchers.counting import CHUNK_EVENTS, CountingMatcher
from scripts.bench import kit
from scripts.workloads import opindex

ROOT = Path(__file__).resolve().parents[2]
TABLE3: dict[str, Any] = {"d": 20_000, "gamma_max": 4, "m": 20, "theta1": 0.4, "sigma": 50}
FULL = {"sizes": [100_000, 300_000, 1_000_000], "events": 5000}
QUICK = {"sizes": [100_000, 300_000], "events": 3000}
GOAL = {"events_per_s": 25_000, "build_s": 10.0, "bytes_per_pred": 100}
BEFORE = {
    "note": "the lead's first counting matcher, N = 1M, CPU time at load ~12 on 2 cores",
    "add_s": 24.0, "first_match_s": 1.5, "us_per_event": 144.0, "events_per_s": 6900,
    "phase1_us_per_event": 19.0, "bytes_per_pred": 109,
}
"""Figures of the first version (measured by the lead), for context."""


class Clock:
    """CPU and wall seconds of a block."""

    def __enter__(self) -> Clock:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.cpu = time.process_time() - self.cpu0
        self.wall = time.perf_counter() - self.wall0


def _timed(obj, name: str, totals: dict[str, float]) -> None:
    """Wrap ``obj.name`` to add its CPU seconds to ``totals[name]``."""
    inner = getattr(obj, name)

    def wrapper(*args):
        t = time.process_time()
        try:
            return inner(*args)
        finally:
            totals[name] = totals.get(name, 0.0) + time.process_time() - t

    setattr(obj, name, wrapper)


def run_one(n_subs: int, n_events: int) -> dict:
    """Every figure for one N."""
    w = opindex(n_subs=n_subs + 100, n_events=n_events + 10, seed=1, **TABLE3)
    subs, spare = w.subscriptions[:n_subs], w.subscriptions[n_subs:]
    events, delta_events = w.events[:n_events], w.events[n_events:]
    n_preds = sum(len(c) for s in subs for c in s.conjunctions)
    load0 = os.getloadavg()[0]
    m = CountingMatcher()
    parts: dict[str, float] = {}
    _timed(m.phase1, "acquire_many", parts)
    _timed(m, "_rebuild", parts)
    with Clock() as add:
        m.add(subs)
    first = m.encode(events[:10])
    with Clock() as lazy:
        m.match(first)
    batch = m.encode(events)
    with Clock() as match:
        result = m.match(batch)
    with Clock() as phase1:
        for lo in range(0, batch.n, CHUNK_EVENTS):
            m.phase1.satisfied(batch.slice(lo, min(lo + CHUNK_EVENTS, batch.n)))
    sat = m.phase1.satisfied(batch.slice(0, min(batch.n, CHUNK_EVENTS)))[1]
    memory = m.memory_bytes()
    removed = [s.id for s in subs[:: max(1, n_subs // 100)][:100]]
    delta_batch = m.encode(delta_events)
    with Clock() as delta:
        m.remove(removed)
        m.add(spare)
        m.match(delta_batch)
    load1 = os.getloadavg()[0]
    us = match.cpu / batch.n * 1e6
    build = add.cpu + lazy.cpu
    return {
        "n_subs": n_subs, "n_events": batch.n, "n_predicates": n_preds, "distinct_predicates": len(m.phase1),
        "add_cpu_s": add.cpu, "add_wall_s": add.wall,
        "add_acquire_cpu_s": parts.get("acquire_many", 0.0), "add_fold_cpu_s": parts.get("_rebuild", 0.0),
        "add_other_cpu_s": add.cpu - parts.get("acquire_many", 0.0) - parts.get("_rebuild", 0.0),
        "first_match_cpu_s": lazy.cpu, "first_match_wall_s": lazy.wall,
        "build_cpu_s": build, "build_wall_s": add.wall + lazy.wall,
        "us_per_event": us, "us_per_event_wall": match.wall / batch.n * 1e6,
        "events_per_s": batch.n / match.cpu, "events_per_s_wall": batch.n / match.wall,
        "phase1_us_per_event": phase1.cpu / batch.n * 1e6,
        "phase2_us_per_event": max(match.cpu - phase1.cpu, 0.0) / batch.n * 1e6,
        "satisfied_per_event": len(sat) / min(batch.n, CHUNK_EVENTS), "matches_per_event": result.total / batch.n,
        "bytes_per_pred": memory / n_preds, "memory_mb": memory / 1e6,
        "delta_100_cpu_s": delta.cpu, "delta_100_wall_s": delta.wall,
        "load_avg_before": load0, "load_avg_after": load1,
        "goal_met": {
            "events_per_s": batch.n / match.cpu >= GOAL["events_per_s"],
            "build_s": build < GOAL["build_s"], "bytes_per_pred": memory / n_preds < GOAL["bytes_per_pred"],
        } if n_subs == 1_000_000 else None,
    }


def table(rows: list[dict]) -> str:
    head = ("| N | build s CPU (wall) | add: acquire / fold / rest s | first match s | µs/event CPU (wall) "
            "| events/s CPU | phase 1 / phase 2 µs | satisfied / matches per event | B/pred | 100-sub delta s "
            "| load avg |\n|" + "---|" * 11)
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['n_subs']:,} | {r['build_cpu_s']:.2f} ({r['build_wall_s']:.2f}) "
            f"| {r['add_acquire_cpu_s']:.2f} / {r['add_fold_cpu_s']:.2f} / {r['add_other_cpu_s']:.2f} "
            f"| {r['first_match_cpu_s']:.2f} | {r['us_per_event']:.1f} ({r['us_per_event_wall']:.1f}) "
            f"| {r['events_per_s']:,.0f} | {r['phase1_us_per_event']:.1f} / {r['phase2_us_per_event']:.1f} "
            f"| {r['satisfied_per_event']:.0f} / {r['matches_per_event']:.1f} | {r['bytes_per_pred']:.0f} "
            f"| {r['delta_100_cpu_s']:.3f} | {r['load_avg_before']:.1f} → {r['load_avg_after']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small N (about a minute)")
    ap.add_argument("--sizes", type=int, nargs="*", help="override the list of N")
    ap.add_argument("--events", type=int, help="override the number of events")
    args = ap.parse_args(argv)
    cfg: dict[str, Any] = dict(QUICK if args.quick else FULL)
    if args.sizes:
        cfg["sizes"] = args.sizes
    if args.events:
        cfg["events"] = args.events
    print(f"counting on OpIndex Table 3 ({TABLE3}), events per run {cfg['events']}, "
          f"N {cfg['sizes']}; goal at N=1M: {GOAL}", file=sys.stderr)
    rows = []
    for n in tqdm(cfg["sizes"], desc="counting", file=sys.stderr):
        r = run_one(n, cfg["events"])
        rows.append(r)
        print(f"N={n:,}: build {r['build_cpu_s']:.2f} s CPU ({r['build_wall_s']:.2f} wall), "
              f"{r['us_per_event']:.1f} µs/event = {r['events_per_s']:,.0f} events/s CPU "
              f"({r['events_per_s_wall']:,.0f} wall), phase 1 {r['phase1_us_per_event']:.1f} µs, "
              f"{r['bytes_per_pred']:.0f} B/pred, load {r['load_avg_before']:.1f}", file=sys.stderr)
    print(table(rows))
    out = {"workload": {"generator": "scripts.workloads.opindex", "seed": 1, **TABLE3}, "events": cfg["events"],
           "goal": GOAL, "before": BEFORE, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
           "rows": rows}
    kit.save("counting-quick" if args.quick else "counting", out)
    if not args.quick:
        write_doc(rows)
    return 0


def write_doc(rows: list[dict]) -> None:
    """Replace the table between the bench markers of ``docs/counting.md``."""
    kit.write_section(ROOT / "docs" / "counting.md", table(rows), "<!-- bench:start -->", "<!-- bench:end -->")


if __name__ == "__main__":
    raise SystemExit(main())

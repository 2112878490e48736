"""Benchmark harness: every registered matcher on named workloads, next to counting and brute.

Each (workload, matcher) run happens in a forked child process with numba limited to one
thread, so that a run uses one core, a crash or a hang cannot take the harness down, and
a run over its time limit is killed and reported as skipped.

A run measures, in this order:

* ``jit_s``: a throw-away instance on 20 subscriptions and 4 events, so that compiling
  or loading the kernels from numba's cache stays out of the other figures;
* ``add_s``: ``matcher.add(subscriptions)``;
* ``prepare_s``: the first ``match`` of one event (lazy packing, if the matcher does it);
  ``build_s = add_s + prepare_s``;
* ``encode_us``: encoding the events with the matcher's dictionary, per event (not part
  of the matching time);
* ``match_us``: ``matcher.match`` over the encoded events in batches of ``batch_size``
  (smaller for a matcher too slow for them), per event; when the matching phase exceeds
  its budget (``MATCH_BUDGET_S`` or half the time limit) it stops early and the figure
  covers the events matched so far (noted);
* the same in CPU time of the process (``build_cpu_s``, ``match_cpu_us``,
  ``events_per_cpu_s``): on a machine shared with other jobs, wall time counts the time
  the run waits for its core, CPU time does not;
* ``memory_bytes`` (the matcher's own report) and bytes per predicate (predicate
  occurrences in the subscriptions' DNF);
* the ids matched on a sample of events, compared with ``counting`` (or ``brute`` when
  counting is absent) and, on a smaller sample, with :mod:`matchers.oracle`.

Results go to ``docs/bench/harness-<date>.json`` (``goal-<date>.json`` for ``--goal``) and
``docs/bench.md`` is rendered from the newest of each.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scripts.bench import kit

BASELINES = ("counting", "brute")

MATCH_BUDGET_S = 30.0
"""Matching time after which a run stops and reports on the events matched so far."""

DOCS = kit.DOCS

FULL_SIZES: dict[str, tuple[int, int]] = {
    "fabret-w0": (100_000, 1111),
    "fabret-w1": (100_000, 1111),
    "fabret-w2": (100_000, 1111),
    "fabret-w6": (100_000, 1111),
    "opindex": (1_000_000, 10_000),
    "opindex-zipf": (1_000_000, 10_000),
    "vci": (100_000, 10_000),
    "amkh": (100_000, 1000),
    "stock": (100_000, 10_000),
    "ecommerce": (50_000, 5000),
    "dense": (100_000, 500),
}
"""Default (n_subs, n_events) of a full run (the per-paper benchmarks sweep the sizes)."""

QUICK_SIZES: dict[str, tuple[int, int]] = {
    "fabret-w0": (10_000, 500),
    "opindex": (20_000, 1000),
    "stock": (5000, 1000),
    "ecommerce": (5000, 500),
}
"""Workloads and sizes of ``--quick`` (about a minute)."""

GOAL: dict[str, Any] = dict(workload="opindex", n_subs=1_000_000, n_events=20_000, events_per_s=25_000, build_s=10.0,
            bytes_per_predicate=100.0)
"""Issue 2's goal: counting on OpIndex Table 3 defaults at N = 1,000,000."""


# -- one run, in a child process ------------------------------------------------------
def measure(name: str, workload: Any, batch_size: int, match_budget_s: float, sample: int, params: dict) -> dict:
    """Build and time one matcher on ``workload`` (runs in the child)."""
    from matchers.catalog import create

    subscriptions, events = workload
    t0 = time.perf_counter()
    warm = create(name, **params)  # compile or load the kernels outside the measurements
    warm.add(subscriptions[:20])
    warm.match(warm.encode(events[:4]))
    jit_s = time.perf_counter() - t0
    del warm
    matcher = create(name, **params)
    t0, c0 = time.perf_counter(), time.process_time()
    matcher.add(subscriptions)
    add_s, add_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    batch = matcher.encode(events)
    encode_s = time.perf_counter() - t0
    first = matcher.encode(events[:1])
    t0, c0 = time.perf_counter(), time.process_time()
    matcher.match(first)
    prepare_s, prepare_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    n = len(events)
    clock = kit.MatchClock()
    note = ""
    size = min(batch_size, 10)  # a first small batch tells whether full batches fit the time budget
    while clock.events < n:
        clock.match(matcher, batch.slice(clock.events, min(n, clock.events + size)))
        if clock.wall_s > match_budget_s and clock.events < n:
            note += f"matched {clock.events} of {n} events (time limit)"
            break
        per_event = clock.wall_s / clock.events
        size = int(max(1, min(batch_size, match_budget_s / 4 / per_event if per_event > 0 else batch_size)))
        if size < batch_size // 2 and "batches" not in note:
            note = f"batches of {size} events (slow) "
    match_s, match_cpu_s, matched, total_matches = clock.wall_s, clock.cpu_s, clock.events, clock.matches
    memory = matcher.memory_bytes()
    per_event = match_s / max(matched, 1)
    sample = min(sample, n, max(20, int(match_budget_s / 2 / per_event) if per_event > 0 else sample))
    ids = matcher.match_ids(batch.slice(0, sample))
    return dict(
        matcher=name, jit_s=jit_s, add_s=add_s, prepare_s=prepare_s, build_s=add_s + prepare_s,
        encode_us=encode_s / max(n, 1) * 1e6, match_us=match_s / max(matched, 1) * 1e6,
        events_per_s=matched / match_s if match_s > 0 else float("inf"), events_matched=matched,
        build_cpu_s=add_cpu_s + prepare_cpu_s, match_cpu_us=match_cpu_s / max(matched, 1) * 1e6,
        events_per_cpu_s=matched / match_cpu_s if match_cpu_s > 0 else float("inf"),
        matches_per_event=total_matches / max(matched, 1), memory_bytes=int(memory), note=note,
        sample_ids=ids,
    )


def run_isolated(name: str, workload, timeout_s: float, batch_size: int = 1000, sample: int = 200,
                 params: dict | None = None, match_budget_s: float = MATCH_BUDGET_S) -> dict:
    """Measure one matcher in a :class:`~scripts.bench.kit.Child` (the workload inherited
    through the fork); a timeout or crash becomes a result with a note."""
    budget = min(timeout_s / 2, match_budget_s)
    start = time.perf_counter()
    try:
        payload = kit.in_child(measure, name, workload, batch_size, budget, sample, params or {}, timeout_s=timeout_s)
    except kit.ChildFailed as exc:
        return dict(matcher=name, note=str(exc).strip(), failed=True)
    payload["wall_s"] = time.perf_counter() - start
    payload["load_avg_1min"] = os.getloadavg()[0]
    return payload


# -- agreement ------------------------------------------------------------------------
def _oracle_ids(subscriptions, events) -> list[list[str]]:
    from matchers.oracle import match

    return [match(subscriptions, e) for e in events]


def _disagreements(ids: list[list[str]], reference: list[list[str]]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(ids, reference, strict=False)) if a != b]


# -- a workload -------------------------------------------------------------------------
def bench_workload(name: str, matchers: Sequence[str], n_subs: int, n_events: int, seed: int, timeout_s: float,
                   batch_size: int, progress=None, params: dict | None = None,
                   match_budget_s: float = MATCH_BUDGET_S) -> dict:
    """Generate one workload and run every matcher on it; returns the workload's record."""
    from scripts.workloads import generate, parameters

    gen_params = {**(params or {}), "n_subs": n_subs, "n_events": n_events, "seed": seed}
    t0 = time.perf_counter()
    subscriptions, events = generate(name, **gen_params)
    generate_s = time.perf_counter() - t0
    n_preds = sum(len(c) for s in subscriptions for c in s.conjunctions)
    described = {**parameters(name), **gen_params}
    print(f"\n== {name}: {described}", flush=True)
    print(f"   {len(subscriptions)} subscriptions, {n_preds} predicates, {len(events)} events "
          f"(generated in {generate_s:.1f} s)", flush=True)
    oracle_n = max(0, min(20, 2_000_000 // max(1, n_subs)))
    oracle = _oracle_ids(subscriptions, events[:oracle_n])
    runs = []
    order = [m for m in BASELINES if m in matchers] + [m for m in matchers if m not in BASELINES]
    for m in order:
        if progress is not None:
            progress.set_description(f"{name} / {m}")
        run = run_isolated(m, (subscriptions, events), timeout_s, batch_size, match_budget_s=match_budget_s)
        runs.append(run)
        if run.get("failed"):
            print(f"   {m}: FAILED: {run['note'].splitlines()[0]}", flush=True)
        else:
            print(f"   {m}: build {run['build_s']:.2f} s, match {run['match_us']:.2f} µs/event "
                  f"({run['events_per_s']:,.0f} events/s), {run['memory_bytes'] / max(1, n_preds):.1f} B/predicate "
                  f"{run['note']}", flush=True)
        if progress is not None:
            progress.update(1)
    reference_name = next((r["matcher"] for r in runs if r["matcher"] in BASELINES and not r.get("failed")), None)
    reference = next((r["sample_ids"] for r in runs if r["matcher"] == reference_name), None)
    base = {r["matcher"]: r for r in runs if not r.get("failed")}
    for r in runs:
        if r.get("failed"):
            continue
        ids = r.pop("sample_ids")
        r["bytes_per_predicate"] = r["memory_bytes"] / max(1, n_preds)
        for b in BASELINES:  # in CPU time: robust to other jobs on the machine, equal to wall time when idle
            if b in base and base[b]["match_cpu_us"] > 0:
                r[f"speedup_vs_{b}"] = base[b]["match_cpu_us"] / r["match_cpu_us"] if r["match_cpu_us"] > 0 else None
        r["oracle_checked"] = oracle_n
        bad_oracle = _disagreements(ids, oracle)
        r["oracle_disagreements"] = len(bad_oracle)
        if reference is not None and r["matcher"] != reference_name:
            bad = _disagreements(ids, reference)
            r["reference"] = reference_name
            r["disagreements"] = len(bad)
            r["disagreeing_events"] = bad[:20]
        r["sample_checked"] = min(len(ids), len(reference)) if reference is not None else 0
        if bad_oracle or r.get("disagreements"):
            print(f"\n!!!!!!!! DISAGREEMENT: {r['matcher']} on {name}: {r.get('disagreements', 0)} of "
                  f"{r['sample_checked']} sample events differ from {reference_name}, "
                  f"{len(bad_oracle)} of {oracle_n} from the oracle (events {r.get('disagreeing_events', bad_oracle)[:10]})"
                  " !!!!!!!!\n", flush=True)
    print(table(runs), flush=True)
    return dict(workload=name, parameters=described, n_subscriptions=len(subscriptions), n_predicates=n_preds,
                n_events=len(events), generate_s=generate_s, runs=runs)


# -- output ---------------------------------------------------------------------------------
COLUMNS = ("matcher", "build s (add + prepare)", "encode µs/ev", "match µs/ev", "events/s", "events/CPU-s",
           "× counting", "× brute",
           "memory MB", "B/pred", "matches/ev", "agrees", "load", "note")


def _row(r: dict) -> list[str]:
    if r.get("failed"):
        return [r["matcher"]] + ["-"] * (len(COLUMNS) - 2) + [r["note"].splitlines()[0][:120]]

    def ratio(key: str) -> str:
        v = r.get(key)
        return f"{v:.2f}" if v is not None else "-"

    agrees = f"yes ({r.get('sample_checked', 0)}; oracle {r.get('oracle_checked', 0)})"
    if r.get("oracle_disagreements") or r.get("disagreements"):
        agrees = f"**NO** ({r.get('disagreements', 0)} vs {r.get('reference')}, {r['oracle_disagreements']} vs oracle)"
    return [r["matcher"], f"{r['build_s']:.2f} ({r['add_s']:.2f} + {r['prepare_s']:.2f})", f"{r['encode_us']:.1f}", f"{r['match_us']:.2f}",
            f"{r['events_per_s']:,.0f}", f"{r['events_per_cpu_s']:,.0f}" if "events_per_cpu_s" in r else "-",
            ratio("speedup_vs_counting"), ratio("speedup_vs_brute"),
            f"{r['memory_bytes'] / 1e6:.1f}", f"{r['bytes_per_predicate']:.1f}", f"{r['matches_per_event']:.2f}",
            agrees, f"{r['load_avg_1min']:.1f}" if r.get("load_avg_1min") is not None else "-", r.get("note", "")]


def table(runs: list[dict]) -> str:
    """Markdown table of a workload's runs."""
    return kit.table(COLUMNS, [_row(r) for r in runs])


def render_goal(goal: dict) -> str:
    """The goal section of ``docs/bench.md``."""
    out = ["## Goal of issue 2", "", f"Run {goal['date']} ({goal['environment']['processor']}, "
           f"numpy {goal['environment']['numpy']}, numba {goal['environment']['numba']}).", "",
           f"Workload: `{goal['workload']['workload']}` {goal['workload']['parameters']}.", ""]
    out += [f"* {c['what']}: {c['value']} (goal {c['goal']}): **{'met' if c['met'] else 'NOT met'}**"
            for c in goal["checks"]]
    return "\n".join([*out, "", table(goal["workload"]["runs"])])


def render(harness: dict) -> str:
    """The section of ``docs/bench.md`` of a run over every matcher."""
    out = [f"## All matchers ({'quick' if harness['quick'] else 'full'} run, {harness['date']})", "",
           f"Environment: {harness['environment']}.", "", "![events/s per workload and matcher](img/harness.png)"]
    for w in harness["workloads"]:
        out += ["", f"### {w['workload']}", "", f"Parameters: `{w['parameters']}`; {w['n_subscriptions']:,} "
                f"subscriptions, {w['n_predicates']:,} predicates, {w['n_events']:,} events.", "", table(w["runs"])]
    return "\n".join(out)


def plot(workloads: list[dict], path: Path) -> None:
    """Grouped bars of events/s (log scale) per workload and matcher."""
    matchers = sorted({r["matcher"] for w in workloads for r in w["runs"]},
                      key=lambda m: (m not in BASELINES, BASELINES.index(m) if m in BASELINES else 0, m))
    series = {m: [(f"{w['workload']}\n{w['n_subscriptions']:,} subs", r["events_per_s"]) for w in workloads
                  for r in w["runs"] if r["matcher"] == m and not r.get("failed")] for m in matchers}
    kit.plot(path, series, bars=True, logy=True, title="Matching throughput per workload", xlabel="",
             ylabel="events/s (one core, log scale)", size=(max(6.0, 1.6 * len(workloads) + 2), 4.5))


def _write(kind: str, record: dict) -> Path:
    path = kit.save(f"{kind}-{record['date']}", record)
    if kind == "harness":
        plot(record["workloads"], DOCS / "img" / "harness.png")
        kit.write_section(DOCS / "bench.md", render(record), *MARKERS["harness"])
    else:
        kit.write_section(DOCS / "bench.md", render_goal(record), *MARKERS["goal"])
    return path


MARKERS = {k: (f"<!-- bench:{k} -->", f"<!-- /bench:{k} -->") for k in ("goal", "harness")}
"""The sections of ``docs/bench.md`` this module writes (``auto`` and ``dense`` write their own)."""


# -- entry point -------------------------------------------------------------------------
def goal(args) -> int:
    """Issue 2's goal: counting (and brute as the baseline) on OpIndex Table 3 defaults at 1M."""
    from tqdm import tqdm

    n_subs = args.n_subs or GOAL["n_subs"]
    n_events = args.n_events or GOAL["n_events"]
    matchers = args.matchers.split(",") if args.matchers else ["counting", "brute"]
    with tqdm(total=len(matchers), file=sys.stderr, unit="run") as bar:
        record = bench_workload(GOAL["workload"], matchers, n_subs, n_events, args.seed, args.timeout,
                                args.batch, bar, match_budget_s=args.match_budget)
    counting = next((r for r in record["runs"] if r["matcher"] == "counting" and not r.get("failed")), None)
    checks = []
    if counting is None:
        print("!!!!!!!! counting did not run: goal not measured !!!!!!!!")
    else:
        checks = [
            dict(what="events/s on one core", value=round(counting["events_per_s"]), goal=f">= {GOAL['events_per_s']:,}",
                 met=counting["events_per_s"] >= GOAL["events_per_s"] and not counting["note"]),
            dict(what="events per CPU second (process CPU time)", value=round(counting["events_per_cpu_s"]),
                 goal=f">= {GOAL['events_per_s']:,}",
                 met=counting["events_per_cpu_s"] >= GOAL["events_per_s"] and not counting["note"]),
            dict(what="build time (s)", value=round(counting["build_s"], 2), goal=f"< {GOAL['build_s']}",
                 met=counting["build_s"] < GOAL["build_s"]),
            dict(what="build CPU time (s)", value=round(counting["build_cpu_s"], 2), goal=f"< {GOAL['build_s']}",
                 met=counting["build_cpu_s"] < GOAL["build_s"]),
            dict(what="bytes per predicate", value=round(counting["bytes_per_predicate"], 1),
                 goal=f"< {GOAL['bytes_per_predicate']}", met=counting["bytes_per_predicate"] < GOAL["bytes_per_predicate"]),
            dict(what="agrees with the oracle on the sample", value=counting["oracle_disagreements"] == 0,
                 goal="True", met=counting["oracle_disagreements"] == 0),
        ]
        print(f"\nGoal (counting, opindex defaults, N = {n_subs:,}, {n_events:,} events):")
        for c in checks:
            print(f"  {c['what']}: {c['value']} (goal {c['goal']}) -> {'MET' if c['met'] else 'NOT MET'}")
    out = dict(date=dt.date.today().isoformat(), environment=kit.environment(), workload=record, checks=checks,
               met=bool(checks) and all(c["met"] for c in checks if "CPU" not in c["what"]))
    if not args.no_write:
        print(f"wrote {_write('goal', out)} and {DOCS / 'bench.md'}")
    # a benchmark, not a test: an unmet goal is reported, only a failed or wrong run is an error
    return 0 if counting is not None and counting["oracle_disagreements"] == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    from tqdm import tqdm

    from matchers.catalog import names
    from scripts.workloads import WORKLOADS

    parser = argparse.ArgumentParser(prog="python -m scripts.bench",
                                     description="Every registered matcher on named workloads, next to counting "
                                                 "and brute measured in the same run.")
    parser.add_argument("--matchers", help="comma-separated matcher names (default: all registered); counting "
                                           "and brute are always added as baselines")
    parser.add_argument("--workloads", help=f"comma-separated workload names out of: {', '.join(WORKLOADS)}")
    parser.add_argument("--n-subs", type=int, help="subscriptions per workload (default: per workload)")
    parser.add_argument("--n-events", type=int, help="events per workload (default: per workload)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1000, help="events per match call (a micro-batch)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per (workload, matcher) run before it is killed and skipped "
                             "(default 300, quick 60)")
    parser.add_argument("--match-budget", type=float, default=MATCH_BUDGET_S,
                        help="seconds of matching after which a run reports on the events matched so far")
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument("--goal", action="store_true", help="issue 2's goal: counting on OpIndex defaults at 1M")
    parser.add_argument("--no-baselines", action="store_true",
                        help="do not add counting and brute to the --matchers given")
    parser.add_argument("--no-write", action="store_true", help="print only, write no files")
    parser.add_argument("--all", action="store_true",
                        help="run every benchmark of the suite (scripts.bench.suite; with --quick, its quick mode)")
    parser.add_argument("--with", dest="extra", action="append", default=[], metavar="MODULE=ARGS",
                        help="with --all: more arguments for one benchmark (dense='--peer-for ...')")
    parser.add_argument("--dry-run", action="store_true", help="with --all: print the commands, run nothing")
    args = parser.parse_args(argv)
    if args.all:
        from scripts.bench import suite

        return suite.run(args.quick, dict(e.split("=", 1) for e in args.extra if e.split("=", 1)[1:] != [""]),
                         args.dry_run)
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 300.0
    if args.goal:
        return goal(args)
    registered = names()
    matchers = args.matchers.split(",") if args.matchers else registered
    if not args.no_baselines:
        matchers = list(dict.fromkeys([m for m in BASELINES if m in registered] + matchers))
    unknown = [m for m in matchers if m not in registered]
    if unknown:
        parser.error(f"unknown matchers {unknown}; registered: {', '.join(registered)}")
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    workloads = args.workloads.split(",") if args.workloads else list(sizes)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    records = []
    with tqdm(total=len(workloads) * len(matchers), file=sys.stderr, unit="run") as bar:
        for w in workloads:
            n_subs, n_events = sizes.get(w, (10_000, 1000))
            records.append(bench_workload(w, matchers, args.n_subs or n_subs, args.n_events or n_events,
                                          args.seed, args.timeout, args.batch, bar,
                                          match_budget_s=args.match_budget))
    out = dict(date=dt.date.today().isoformat(), quick=args.quick, environment=kit.environment(),
               arguments=vars(args), workloads=records)
    failures = [(w["workload"], r["matcher"]) for w in records for r in w["runs"]
                if r.get("disagreements") or r.get("oracle_disagreements")]
    if failures:
        print(f"\n!!!!!!!! {len(failures)} matcher runs DISAGREE with the reference: {failures} !!!!!!!!")
    if not args.no_write:
        print(f"wrote {_write('harness', out)} and {DOCS / 'bench.md'}")
    return 1 if failures else 0

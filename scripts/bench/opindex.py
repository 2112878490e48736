"""OpIndex benchmarks: Section 7.3 and Fig. 14 of Zhang, Chan, Tan (VLDB 2014), rerun here.

Matching time per event against N, Γmax, m, θ1, σ and the Zipf exponent; memory
against N and σ; insertion time; the prefix operator (Fig. 14).  Every figure is
measured for OpIndex, OpIndex-BS, the k-index and this project's counting matcher in
the same run, on the Table 3 generator of :mod:`scripts.workloads` (defaults: N = 1M,
d = 20K, Γmax = 4, m = 20, θ1 = 40%, σ = 50, Zipf = 0), and reported with the ratios
to the baselines.

Run ``python -m scripts.bench.opindex [--quick]``; results go to
``docs/bench/opindex.json``, tables to ``docs/opindex.md`` (between the bench
markers) and plots to ``docs/img/opindex-*.png``; ``--quick`` (about two minutes on
a quiet machine) writes ``docs/bench/opindex-quick.json`` and
``docs/img/opindex-quick-*.png`` and prints its tables.  ``--goal [--n-subs 1000000
--rounds 15]`` measures only the issue's goals (counting, OpIndex, OpIndex-paper and the
k-index built in one process, matched in interleaved rounds) into
``docs/bench/opindex-goal.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from matchers.catalog import create
from scripts.bench import kit
from scripts.draws import Workload
from scripts.rules import prefix_workload
from scripts.workloads import generate, parameters

ROOT = Path(__file__).resolve().parents[2]
MATCHERS = ("opindex", "opindex-paper", "opindex-bs", "counting", "kindex")
TABLE3 = {"n_subs": 1_000_000, "d": 20_000, "gamma_max": 4, "m": 20, "theta1": 0.4, "sigma": 50, "zipf": 0.0}

QUICK: dict[str, Any] = {
    "events": 200, "d_n": 1000, "d_sweep": 1000, "base_n": 20_000, "n": [10_000, 20_000, 40_000],
    "gamma_max": [4, 12], "m": [20, 60], "theta1": [0.2, 1.0], "sigma": [50, 12_800],
    "zipf": [0.0, 1.0], "prefix_n": 10_000, "prefix_share": [0.0, 1.0], "prefix_len": [1, 5],
    "big_n_matchers": MATCHERS, "kindex_max_n": 40_000,
}
FULL: dict[str, Any] = {
    "events": 1000, "d_n": 20_000, "d_sweep": 2_000, "base_n": 100_000,
    "n": [1_000_000, 2_000_000, 5_000_000, 10_000_000],
    "gamma_max": [4, 12, 20], "m": [20, 60, 120], "theta1": [0.2, 0.6, 1.0],
    "sigma": [50, 800, 12_800], "zipf": [0.0, 0.5, 1.0],
    "prefix_n": 100_000, "prefix_share": [0.0, 0.5, 1.0], "prefix_len": [1, 3, 6],
    "big_n_matchers": ("opindex", "opindex-paper", "counting"), "kindex_max_n": 1_000_000,
}
"""``d_n``: attributes on the N axis (Table 3's d in full mode); ``d_sweep``: attributes of
the parameter sweeps, at ``base_n`` subscriptions, chosen so that N/d = 50 as at N = 1M,
d = 20K (the same number of entries per pivot, so the same list sizes as the paper's
defaults, at a tenth of the build time)."""


KINDEX_MAX_POSTINGS = 80_000_000
"""The k-index is skipped where its range expansion would pass this many postings
(about 1.5 GB while it builds): the paper's k-index ran out of memory there too."""


def kindex_postings(workload: dict) -> float:
    """Rough count of the k-index's postings on a Table 3 workload (ranges cover half of 2σ cells)."""
    if workload.get("generator") == "fig14-prefix":
        return 0.0
    gamma = (workload["gamma_max"] + 1) / 2
    return workload["n_subs"] * gamma * (1 - workload["theta1"]) * workload["sigma"]


# -- measuring ----------------------------------------------------------------------------
def prepared(name: str, w: Workload) -> tuple:
    """A new matcher holding ``w``'s subscriptions, ready to time: ``(matcher, encoded
    events, insertion CPU seconds, entries re-pivoted)``.  Compilation and re-pivoting
    on the observed events happen here, outside any timing."""
    gc.collect()
    matcher = create(name)
    t0 = time.process_time()
    matcher.add(w.subscriptions)
    if hasattr(matcher, "build"):
        matcher.build()  # the k-index is static: its build is its insertion
    insert_s = time.process_time() - t0
    batch = matcher.encode(w.events)
    matcher.match(matcher.encode(w.events[:10]))  # compile (numba caches) outside the timing
    moved = 0
    if hasattr(matcher, "repivot"):
        matcher.match(batch)
        moved = matcher.repivot()  # settle the pivots on the observed event stream
    return matcher, batch, insert_s, moved


def measure(name: str, w: Workload, repeats: int = 5) -> dict:
    """Insert ``w``'s subscriptions into a new matcher and time matching its events.

    Times are CPU seconds of this process (the machine is shared: wall time would
    charge other jobs' load to whichever matcher ran during it); matching is the best
    of ``repeats`` passes over the events."""
    matcher, batch, insert_s, moved = prepared(name, w)
    best = float("inf")
    matches = 0
    for _ in range(repeats):
        t0 = time.process_time()
        result = matcher.match(batch)
        best = min(best, time.process_time() - t0)
        matches = result.total
    out = {
        "matcher": name,
        "insert_s": insert_s,
        "insert_us_per_sub": 1e6 * insert_s / max(1, len(w.subscriptions)),
        "match_ms_per_event": 1e3 * best / max(1, len(w.events)),
        "matches_per_event": matches / max(1, len(w.events)),
        "memory_mb": matcher.memory_bytes() / 2**20,
    }
    if moved:
        out["repivoted"] = moved
    if hasattr(matcher, "postings"):
        out["postings"] = matcher.postings
    del matcher, batch
    gc.collect()
    return out


def table3(n_subs: int, n_events: int, **overrides) -> Workload:
    params = {"n_subs": n_subs, "n_events": n_events, "d": TABLE3["d"], "gamma_max": TABLE3["gamma_max"],
              "m": TABLE3["m"], "theta1": TABLE3["theta1"], "sigma": TABLE3["sigma"]}
    zipf = overrides.pop("zipf", 0.0)
    params.update(overrides)
    if zipf > 0:
        return generate("opindex-zipf", zipf_alpha=zipf, **params)
    return generate("opindex", **params)


AXES = {
    "n": ("N (subscriptions)", "Matching time vs N (Fig. 10a)"),
    "gamma_max": ("Γmax", "Matching time vs Γmax (Fig. 10b)"),
    "m": ("m (event size)", "Matching time vs m (Fig. 10c)"),
    "theta1": ("θ1 (share of =)", "Matching time vs θ1 (Fig. 10d)"),
    "sigma": ("σ (value space)", "Matching time vs σ (Fig. 10e)"),
    "zipf": ("Zipf exponent", "Matching time vs Zipf (Fig. 10f)"),
    "prefix_share": ("share of prefix predicates", "Prefix operator: share (Fig. 14a)"),
    "prefix_len": ("prefix length", "Prefix operator: length (Fig. 14b)"),
}


# -- experiments ----------------------------------------------------------------------------
def run(quick: bool, progress: bool = True, partial: Path | None = None,
        axes: tuple[str, ...] = tuple(AXES), kept: Sequence[dict] = ()) -> dict:
    """Run the experiments of ``axes``; with ``partial``, results are saved there after
    each measurement and the ones already there (same mode) are not measured again.
    ``kept``: earlier results of the other axes, carried into the output."""
    cfg = QUICK if quick else FULL
    n_events = cfg["events"]
    experiments: list[tuple[str, object, dict, tuple[str, ...]]] = []
    for n in cfg["n"]:
        names = tuple(x for x in MATCHERS if x in cfg["big_n_matchers"] or n <= cfg["kindex_max_n"])
        names = tuple(x for x in names if x != "kindex" or n <= cfg["kindex_max_n"])
        experiments.append(("n", n, {"n_subs": n, "d": cfg["d_n"]}, names))
    for key in ("gamma_max", "m", "theta1", "sigma", "zipf"):
        for value in cfg[key]:
            experiments.append((key, value, {"n_subs": cfg["base_n"], "d": cfg["d_sweep"], key: value}, MATCHERS))
    for share in cfg["prefix_share"]:
        experiments.append(("prefix_share", share, {"prefix": True, "share": share, "length": 3},
                            ("opindex", "counting")))
    for length in cfg["prefix_len"]:
        experiments.append(("prefix_len", length, {"prefix": True, "share": 1.0, "length": length},
                            ("opindex", "counting")))
    experiments = [e for e in experiments if e[0] in axes]
    results: list[dict] = [r for r in kept if r["axis"] not in axes]
    if partial is not None and partial.exists():
        saved = json.loads(partial.read_text())
        if saved.get("mode") == ("quick" if quick else "full"):
            results = saved["results"]
    done = {(r["axis"], r["value"], r["matcher"]) for r in results}
    bar = tqdm(total=sum(len(e[3]) for e in experiments), disable=not progress, file=sys.stderr, unit="run")
    for axis, value, spec, names in experiments:
        names = tuple(n for n in names if (axis, value, n) not in done)
        if not names:
            continue
        spec = dict(spec)
        if spec.pop("prefix", False):
            w = prefix_workload(cfg["prefix_n"], n_events, spec["share"], spec["length"])
            workload = {"generator": "fig14-prefix", "n_subs": cfg["prefix_n"], "n_events": n_events,
                        "share": spec["share"], "length": spec["length"]}
        else:
            n_subs = spec.pop("n_subs")
            w = table3(n_subs, n_events, **spec)
            workload = {**TABLE3, "n_subs": n_subs, "n_events": n_events, **spec}
        for name in names:
            bar.set_description(f"{axis}={value} {name}")
            if name == "kindex" and kindex_postings(workload) > KINDEX_MAX_POSTINGS:
                results.append({"matcher": name, "axis": axis, "value": value, "workload": workload,
                                "skipped": f"about {kindex_postings(workload):.2g} postings: over the memory budget"})
                tqdm.write(f"{axis}={value} kindex: skipped (range expansion over the memory budget)", file=sys.stderr)
                bar.update()
                continue
            r = measure(name, w, repeats=2 if quick else 5)
            r.update(axis=axis, value=value, workload=workload)
            results.append(r)
            if partial is not None:
                partial.write_text(json.dumps({"mode": "quick" if quick else "full", "results": results},
                                              indent=1, default=float))
            tqdm.write(f"{axis}={value} {name}: {r['match_ms_per_event']:.4f} ms/event, "
                       f"{r['insert_us_per_sub']:.1f} us/sub, {r['memory_mb']:.1f} MB, "
                       f"{r['matches_per_event']:.1f} matches/event", file=sys.stderr)
            bar.update()
        del w
        gc.collect()
    bar.close()
    return {
        "mode": "quick" if quick else "full",
        "machine": {"python": platform.python_version(), "cpus": _cpus(), "platform": platform.platform()},
        "table3_defaults": TABLE3,
        "config": {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in cfg.items()},
        "workload_defaults": parameters("opindex"),
        "results": results,
        "goals": goals(results),
    }


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def _pick(results: list[dict], axis: str, value, name: str) -> dict | None:
    for r in results:
        if r["axis"] == axis and r["value"] == value and r["matcher"] == name and "skipped" not in r:
            return r
    return None


def goals(results: list[dict]) -> dict:
    """The issue's goals, on the smallest N of the N sweep (N = 1M in full mode), for OpIndex
    and (for comparison) the paper's lists."""
    ns = sorted({r["value"] for r in results if r["axis"] == "n"})
    out: dict = {}
    if ns:
        n0 = ns[0]
        for name in ("opindex", "opindex-paper"):
            op = _pick(results, "n", n0, name)
            for base, target in (("counting", 3.0), ("kindex", 10.0)):
                other = _pick(results, "n", n0, base)
                if op and other:
                    ratio = other["match_ms_per_event"] / op["match_ms_per_event"]
                    out[f"{name} speedup vs {base}"] = {"n_subs": n0, "ratio": ratio, "target": target,
                                                        "met": ratio >= target}
    sig = [r for r in results if r["axis"] == "sigma" and r["matcher"] == "opindex" and "skipped" not in r]
    if len(sig) >= 2:
        mems = [r["memory_mb"] for r in sorted(sig, key=lambda r: r["value"])]
        spread = max(mems) / min(mems)
        out["memory_flat_in_sigma"] = {"max_over_min": spread, "target": 1.1, "met": spread <= 1.1}
    return out


# -- output --------------------------------------------------------------------------------


def markdown(data: dict) -> str:
    res = [r for r in data["results"] if "skipped" not in r]
    lines = [f"Mode: **{data['mode']}**; machine: {data['machine']['cpus']} CPUs, Python "
             f"{data['machine']['python']}. Table 3 defaults: " + ", ".join(f"{k}={v}" for k, v in TABLE3.items())
             + f"; N axis with d = {data['config']['d_n']:,}; parameter sweeps at N = {data['config']['base_n']:,} "
             f"and d = {data['config']['d_sweep']:,} (N/d as at the defaults), {data['config']['events']} events per "
             "measurement, best of the repeats. Times are CPU milliseconds per event; ratios are "
             "baseline time / OpIndex time measured in the same run.", ""]
    goals_ = data["goals"]
    if goals_:
        lines += ["### Goals", "", "| goal | measured | target | met |", "|---|---|---|---|"]
        for key, g in goals_.items():
            if "ratio" in g:
                lines.append(f"| {key} (N = {g['n_subs']:,}) | {g['ratio']:.2f}x | "
                             f">= {g['target']:.0f}x | {'yes' if g['met'] else 'no'} |")
            else:
                lines.append(f"| OpIndex memory max/min over σ | {g['max_over_min']:.3f} | <= {g['target']} | "
                             f"{'yes' if g['met'] else 'no'} |")
        lines.append("")
    for axis, (label, title) in AXES.items():
        rows = [r for r in res if r["axis"] == axis]
        if not rows:
            continue
        names = [n for n in MATCHERS if any(r["matcher"] == n for r in rows)]
        values = sorted({r["value"] for r in rows})
        lines += [f"### {title}", "", f"![{title}](img/{_stem(data)}-{axis}.png)", ""]
        head = f"| {label} | " + " | ".join(f"{n} ms" for n in names)
        ratio_names = [n for n in names if n != "opindex"]
        head += " | " + " | ".join(f"{n}/opindex" for n in ratio_names) + " | matches/event |"
        lines += [head, "|" + "---|" * (2 + len(names) + len(ratio_names))]
        for v in values:
            cells = []
            by = {n: _pick(res, axis, v, n) for n in names}
            for n in names:
                r = by[n]
                cells.append(f"{r['match_ms_per_event']:.4f}" if r else "–")
            op = by.get("opindex")
            for n in ratio_names:
                r = by[n]
                cells.append(f"{r['match_ms_per_event'] / op['match_ms_per_event']:.2f}" if r and op else "–")
            mpe = next((r["matches_per_event"] for r in by.values() if r), 0.0)
            lines.append(f"| {v:,} | " + " | ".join(cells) + f" | {mpe:.1f} |" if isinstance(v, int)
                         else f"| {v} | " + " | ".join(cells) + f" | {mpe:.1f} |")
        lines.append("")
    for axis, title in (("n", "Memory and insertion vs N (Fig. 8a, 9a)"), ("sigma", "Memory vs σ (Fig. 8b)"),
                        ("gamma_max", "Insertion vs Γmax (Fig. 9b)")):
        rows = [r for r in res if r["axis"] == axis]
        if not rows:
            continue
        names = [n for n in MATCHERS if any(r["matcher"] == n for r in rows)]
        lines += [f"### {title}", "", f"![{title}](img/{_stem(data)}-memory-{axis}.png)", "",
                  f"| {AXES[axis][0]} | " + " | ".join(f"{n} MB | {n} µs/sub" for n in names) + " |",
                  "|" + "---|" * (1 + 2 * len(names))]
        for v in sorted({r["value"] for r in rows}):
            cells = []
            for n in names:
                r = _pick(res, axis, v, n)
                cells += [f"{r['memory_mb']:.1f}", f"{r['insert_us_per_sub']:.1f}"] if r else ["–", "–"]
            lines.append(f"| {v:,} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _stem(data: dict) -> str:
    return "opindex-quick" if data["mode"] == "quick" else "opindex"


def plots(data: dict, img_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    res = [r for r in data["results"] if "skipped" not in r]
    for axis, (label, title) in AXES.items():
        rows = [r for r in res if r["axis"] == axis]
        if not rows:
            continue
        kit.plot(img_dir / f"{_stem(data)}-{axis}.png",
                 {name: sorted((r["value"], r["match_ms_per_event"]) for r in rows if r["matcher"] == name)
                  for name in MATCHERS}, title=f"{title} [{data['mode']}]", xlabel=label, ylabel="ms per event",
                 logy=True, size=(6, 4))
    for axis in ("n", "sigma", "gamma_max"):
        rows = [r for r in res if r["axis"] == axis]
        if not rows:
            continue
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        for name in MATCHERS:
            pts3 = sorted((r["value"], r["memory_mb"], r["insert_us_per_sub"]) for r in rows if r["matcher"] == name)
            if pts3:
                xs, mem, ins = zip(*pts3, strict=True)
                a1.plot(xs, mem, marker="o", label=name)
                a2.plot(xs, ins, marker="o", label=name)
        for a, ylabel in ((a1, "memory (MB)"), (a2, "insertion (µs per subscription)")):
            a.set_xlabel(AXES[axis][0])
            a.set_ylabel(ylabel)
            a.set_yscale("log")
            a.grid(alpha=0.3)
            a.legend()
        fig.suptitle(f"Memory and insertion vs {AXES[axis][0]} [{data['mode']}]")
        fig.tight_layout()
        fig.savefig(img_dir / f"{_stem(data)}-memory-{axis}.png", dpi=110)
        plt.close(fig)


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def write_markdown(text: str, path: Path) -> None:
    """Replace the results section of ``path`` (between the bench markers)."""
    kit.write_section(path, text, BEGIN, END)


GOAL_MATCHERS = ("counting", "opindex", "opindex-paper", "kindex")


def goal(n_subs: int, n_events: int, rounds: int, d: int | None = None,
         names: tuple[str, ...] = GOAL_MATCHERS) -> dict:
    """The issue's goals in one process: build every matcher on Table 3 (``d`` defaults
    to N/50, the defaults' ratio), check that they agree, then time ``rounds``
    interleaved rounds matching the same events with each in turn (a change of load
    hits all of them alike); CPU time, min and median per matcher."""
    import os
    import statistics

    import numba

    numba.set_num_threads(1)
    d = d or max(1, n_subs // 50)
    load_before = os.getloadavg()
    t0 = time.time()
    w = table3(n_subs, n_events, d=d)
    workload = {**TABLE3, "n_subs": n_subs, "n_events": n_events, "d": d}
    print(f"Table 3: {workload}; generated in {time.time() - t0:.0f} s; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {load_before}", flush=True)
    matchers, batches, built, reference = {}, {}, {}, None
    for name in names:
        matcher, batches[name], build_s, moved = prepared(name, w)
        ids = matcher.match_ids(batches[name])
        reference = reference or ids
        if ids != reference:
            raise AssertionError(f"{name} does not return the matches of {names[0]}")
        matchers[name] = matcher
        built[name] = {"build_us_per_sub": 1e6 * build_s / n_subs, "memory_mb": matcher.memory_bytes() / 2**20,
                       "matches_per_event": sum(map(len, ids)) / n_events, "repivoted": moved}
        print(f"{name:14s} build {built[name]['build_us_per_sub']:6.1f} us/sub CPU; memory "
              f"{built[name]['memory_mb']:7.1f} MB; {built[name]['matches_per_event']:.2f} matches/event; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    times: dict[str, list[float]] = {name: [] for name in names}
    loads = []
    for _ in range(rounds):
        for name in names:
            t0 = time.process_time()
            matchers[name].match(batches[name])
            times[name].append(1e6 * (time.process_time() - t0) / n_events)
        loads.append(os.getloadavg()[0])
    results = {name: {**built[name], "match_us_per_event_min": min(times[name]),
                      "match_us_per_event_median": statistics.median(times[name]), "rounds_us": times[name]}
               for name in names}
    print(f"matching, CPU us/event, {rounds} interleaved rounds (load {min(loads):.1f}-{max(loads):.1f}):")
    for name in names:
        r = results[name]
        print(f"  {name:14s} min {r['match_us_per_event_min']:7.2f}  median {r['match_us_per_event_median']:7.2f}")
    ratios = {}
    for base, target in (("counting", 3.0), ("kindex", 10.0)):
        if base in results and "opindex" in results:
            ratio = {s: results[base][f"match_us_per_event_{s}"] / results["opindex"][f"match_us_per_event_{s}"]
                     for s in ("min", "median")}
            ratios[f"{base}/opindex"] = {**ratio, "target": target, "met": ratio["min"] >= target}
            print(f"  {base}/opindex: min {ratio['min']:.2f}x, median {ratio['median']:.2f}x (target {target:g}x)")
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": _cpus(), "platform": platform.platform()},
        "workload": workload, "rounds": rounds, "load_before": load_before, "load_after": os.getloadavg(),
        "load_during": [min(loads), max(loads)], "results": results, "goals": ratios,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute or two")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default docs/bench/opindex[-quick].json)")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/opindex.md and the plots")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--axes", default=",".join(AXES),
                        help=f"comma-separated experiments to (re)run, the others are kept from --out "
                             f"(default: all of {','.join(AXES)})")
    parser.add_argument("--goal", action="store_true",
                        help="only the goals: counting, opindex, opindex-paper and kindex built in one process and "
                             "timed in interleaved rounds (writes docs/bench/opindex-goal.json unless --out)")
    parser.add_argument("--n-subs", type=int, default=TABLE3["n_subs"], help="--goal: subscriptions")
    parser.add_argument("--d", type=int, default=None, help="--goal: attributes (default N/50)")
    parser.add_argument("--n-events", type=int, default=2000, help="--goal: events")
    parser.add_argument("--rounds", type=int, default=15, help="--goal: interleaved rounds")
    args = parser.parse_args(argv)
    if args.goal:
        data = goal(args.n_subs, args.n_events, args.rounds, args.d)
        out = args.out or ROOT / "docs" / "bench" / "opindex-goal.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1, default=float))
        print(f"results: {out}", file=sys.stderr)
        return 0
    axes = tuple(a for a in args.axes.split(",") if a)
    unknown = sorted(set(axes) - set(AXES))
    if unknown:
        parser.error(f"unknown axes {unknown}; choose from {', '.join(AXES)}")
    out = args.out or ROOT / "docs" / "bench" / ("opindex-quick.json" if args.quick else "opindex.json")
    mode = "quick" if args.quick else "full"
    kept: list[dict] = []
    if set(axes) != set(AXES) and out.exists():
        saved = json.loads(out.read_text())
        kept = saved["results"] if saved.get("mode") == mode else []
    partial = out.with_suffix(".partial.json")
    data = run(args.quick, progress=not args.no_progress, partial=partial, axes=axes, kept=kept)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=float))
    partial.unlink(missing_ok=True)
    print(markdown(data))
    if not args.no_docs:
        plots(data, ROOT / "docs" / "img")
        if not args.quick:  # the quick run keeps its own plots and leaves the full tables alone
            write_markdown(markdown(data), ROOT / "docs" / "opindex.md")
    print(f"results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cayuga engine benchmark: events/s against the number of stateful subscriptions.

Stock-ticker workload in the spirit of Demers et al. (Section 4): ``--symbols`` stock
symbols, one trade per tick, prices random walks. Subscription ``i`` watches one symbol:
"a trade of SYM above P, then the next trade of the same stock above P2, within W
ticks"::

    FILTER{DUR <= W}(FILTER{name = 'SYM' AND price > P}(Stock)
                     NEXT{$2.name = $1.name AND $2.price > P2} Stock)

with P, P2 and W from small grids, so that subscriptions share prefixes (state merging
has something to merge). Engine configurations, measured in the same run on the same
events: indexes and merging on; merging off; indexes off (every start edge and every
instance of the stream is checked); static predicates through the project's
``counting`` matcher, a batch at a time.

Side by side with the CORE engine (``pycer``, GPL, run as a separate process under
Python 3.13 from ``--pycer-python``; never imported here), like for like: CORE's
``T as a ; T as b FILTER a[name = SYM AND price > P] AND b[price > P2] PARTITION BY
[name] WITHIN W-1 EVENTS`` reports every pair (a, later matching b) in the window (its
selection strategies ``NEXT``/``ANY``/... parse but change nothing in pycer 0.1.6), which
the engine expresses as a FOLD that emits one record per matching trade::

    FILTER{DUR <= W}(FILTER{name = 'SYM' AND price > P}(Stock)
                     FOLD{$2.name = $.name AND $2.price > P2, TRUE} Stock)

(witness: a, the matching trades in between, b). The run first checks that both report
the same pairs on a prefix of the stream, then times both on a steady-state stream
(every symbol trades about 8 times) and a sparse one (10x the symbols: a symbol
rarely trades twice, so there are few partial matches).

Rates are events over CPU time (``time.process_time``) of the process doing the
matching; the machine is shared, so ``os.getloadavg()`` is printed and recorded with
each figure.

Run ``python -m scripts.bench.cayuga [--quick]``; results go to
``docs/bench/cayuga.json``, ``docs/cayuga.md`` (table) and ``docs/img/cayuga_throughput.png``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path

from tqdm import tqdm

from matchers.cayuga.engine import Engine
from scripts.bench import kit
from scripts.tickers import (
    P_GRID,
    RISE,
    WINDOWS,
    cel,
    cel_pairs,
    expr,
    make_events,
    make_subscriptions,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PYCER = "/tmp/pycer-venv/bin/python"

CONFIGS: dict[str, dict] = {
    "indexed+merged": dict(merge=True, indexed=True),
    "indexed, no merging": dict(merge=False, indexed=True),
    "no indexes, merged": dict(merge=True, indexed=False),
    "counting static, merged": dict(merge=True, indexed=True, static_matcher="counting"),
}


def run_engine(config: dict, subs, events, warmup: int, budget_s: float, pairs: bool = False) -> dict:
    """Register, warm up, then time events (CPU time) until done or the time budget is spent.

    ``pairs``: the FOLD form of the subscriptions (:func:`cel_pairs`, as CORE's ``;``).
    Registration time includes the full garbage collection of what it left behind.
    """
    eng = Engine(**config)
    t = time.process_time()
    for i, sub in enumerate(subs):
        eng.add(f"q{i}", cel_pairs(*sub) if pairs else expr(*sub))
    gc.collect()
    register_s = time.process_time() - t
    batch = 512
    batched = bool(config.get("static_matcher"))

    def feed(chunk):
        if batched:
            return len(eng.process_batch(chunk))
        n = 0
        for e in chunk:
            n += len(eng.process(e))
        return n

    t = time.process_time()
    for lo in range(0, warmup, batch):
        feed(events[lo:min(warmup, lo + batch)])
        if time.process_time() - t > budget_s:
            break
    done = matches = 0
    t = time.process_time()
    elapsed = 0.0
    for lo in range(warmup, len(events), batch):
        chunk = events[lo:lo + batch]
        matches += feed(chunk)
        done += len(chunk)
        elapsed = time.process_time() - t
        if elapsed > budget_s:
            break
    return {"events": done, "seconds": elapsed, "events_per_s": done / elapsed if elapsed else 0.0,
            "matches": matches, "register_s": register_s, "nodes": len(eng.nodes),
            "starts": len(eng.starts), "instances": eng.instances, "load": os.getloadavg()}


CORE_SCRIPT = r"""
import json, os, sys, time
import pycer
spec = json.load(sys.stdin)
s = pycer.PyOfflineServer()
s.declare_stream("CREATE STREAM Stock {\n EVENT T { name:string, price:double, vol:int }\n}")
for sym, p, p2, w in spec["subs"]:  # DUR <= w is a span of at most w - 1 events
    s.add_query(f"SELECT * FROM Stock WHERE T as a ; T as b FILTER a[name = '{sym}' AND price > {p}] "
                f"AND b[price > {p2}] PARTITION BY [name] WITHIN {w - 1} EVENTS")
evs = [pycer.PyEvent(0, [pycer.PyStringValue(n), pycer.PyDoubleValue(float(p)), pycer.PyIntValue(int(v))])
       for n, p, v in spec["events"]]
# send_events only queues (each query has its own thread); get_output waits for all of
# them and may be called once (a second call crashes pycer 0.1.6)
t, w = time.process_time(), time.perf_counter()
s.send_events(evs)
output = s.get_output()
cpu, wall = time.process_time() - t, time.perf_counter() - w
out = {"events": len(evs), "seconds": cpu, "events_per_s": len(evs) / cpu, "wall_s": wall,
       "threads": len(os.listdir("/proc/self/task")), "load": os.getloadavg()}
pairs = [[int(x) for x in ln[1:ln.index("]")].split(",")] for ln in output.splitlines() if ln.startswith("[")]
out["matches"] = len(pairs)
if spec["pairs"]:
    out["pairs"] = pairs
print("RESULT " + json.dumps(out))
"""


def run_core(pycer_python: str, subs, events, timeout_s: float, pairs: bool = False) -> dict | None:
    """CORE on the same subscriptions and all ``events``, in its own process: CPU time of
    all its threads from the first event sent until every result is out; ``None`` on
    failure or after ``timeout_s``.

    ``pairs``: also return the positions ``[a, b]`` of every pair it reported.
    """
    spec = {"subs": subs, "events": [(e.attrs["name"], e.attrs["price"], e.attrs["vol"]) for e in events],
            "pairs": pairs}
    workdir = Path("/tmp/pycer-bench")
    workdir.mkdir(exist_ok=True)  # CORE writes logs/ under its working directory
    ran = kit.run([pycer_python, "-c", CORE_SCRIPT], input=json.dumps(spec), timeout_s=timeout_s, cwd=workdir)
    try:
        return None if ran.timed_out else ran.check().result_line()
    except kit.ChildFailed as exc:
        print(f"CORE: {exc}", file=sys.stderr)
        return None


def run_spark(n_events: int, n_subs: int, symbols: int, seed: int) -> dict:
    """End to end through the embedded broker and the patterns queries (``local[2]``): one
    child run of ``scripts.bench.patterns`` (its docstring says what is timed)."""
    r = kit.run([sys.executable, "-m", "scripts.bench.patterns", "--child", "--events", str(n_events), "--patterns",
                 str(n_subs), "--symbols", str(symbols), "--seed", str(seed), "--warmup", "0"], cwd=kit.ROOT)
    r = r.check().result_line()
    return {"config": "spark end-to-end", "subscriptions": n_subs, "events": n_events, "seconds": r["seconds"],
            "events_per_s": r["events_per_s"], "batches": r["batches"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.cayuga", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    ap.add_argument("--symbols", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pycer-python", default=DEFAULT_PYCER, help="Python 3.13 with pycer (CORE) installed")
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--spark", type=int, default=0, metavar="EVENTS",
                    help="also measure the end-to-end rate through Kafka and Spark with this many events")
    args = ap.parse_args(argv)
    if args.quick:
        sizes, n_events, warmup, budget = [1, 100, 1000, 10000], 6000, 2000, 2.0
        limits = {"no indexes, merged": 1000, "counting static, merged": 1000}
        core_sizes, core_timeout = [1, 10, 100], 120.0
    else:
        sizes, n_events, warmup, budget = [1, 10, 100, 300, 1000, 10000, 100000], 40000, 10000, 8.0
        limits = {"no indexes, merged": 1000, "counting static, merged": 10000}
        core_sizes, core_timeout = [1, 10, 100, 300], 150.0
    core_ok = os.path.exists(args.pycer_python)
    symbols = {"steady": args.symbols, "sparse": args.symbols * 10}
    params = {"symbols": args.symbols, "events": n_events, "warmup_events": warmup, "time_budget_s": budget,
              "P": P_GRID, "rise": RISE, "W_ticks": WINDOWS, "seed": args.seed, "sizes": sizes,
              "core_sizes": core_sizes, "sparse_symbols": symbols["sparse"],
              "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
              "load_at_start": os.getloadavg()}
    print("workload:", json.dumps(params))
    print("example subscription:", cel(*make_subscriptions(1, args.symbols, args.seed)[0]))
    print("its CORE-like form:", cel_pairs(*make_subscriptions(1, args.symbols, args.seed)[0]))
    if not core_ok:
        print(f"CORE (pycer) not measured: {args.pycer_python} does not exist "
              "(create a Python 3.13 venv there and pip install pycer)")
    events = {k: make_events(n_events, n, args.seed) for k, n in symbols.items()}
    results: list[dict] = []
    names = list(CONFIGS)
    runs = [(n, c, "steady") for n in sizes for c in names if n <= limits.get(c, 10**9)]
    if core_ok:
        params["pairs_check"] = check_pairs(args.pycer_python, make_subscriptions(100, args.symbols, args.seed),
                                            events["steady"][:min(20000, n_events)])
        print("pairs check:", json.dumps(params["pairs_check"]))
        runs += [(n, c, k) for k in symbols for n in core_sizes for c in ("engine", "CORE")]
    with tqdm(runs, desc="cayuga bench", unit="run") as bar:
        for n, name, stream in bar:
            bar.set_postfix_str(f"{name} {stream} n={n}")
            subs = make_subscriptions(n, symbols[stream], args.seed + n)
            # both over the same events from the start (CORE cannot be stopped part way), CPU time;
            # a quarter of them above 100 subscriptions (CORE's cost grows with each query)
            evs = events[stream] if n <= 100 else events[stream][: n_events // 4]
            if name == "CORE":
                r = run_core(args.pycer_python, subs, evs, core_timeout)
                if r is None:
                    tqdm.write(f"CORE {stream} n={n}: {len(evs)} events not done within {core_timeout:.0f} s")
                    r = {"events": len(evs), "timeout_s": core_timeout, "events_per_s": 0.0, "load": os.getloadavg()}
            elif name == "engine":
                r = run_engine(CONFIGS["indexed+merged"], subs, evs, 0, float("inf"), pairs=True)
            else:
                r = run_engine(CONFIGS[name], subs, events[stream], warmup, budget)
            if name in ("engine", "CORE"):
                name = f"{name} pairs, {stream}"
            r.update({"config": name, "subscriptions": n})
            results.append(r)
            wall = f" (wall {r['events'] / r['wall_s']:.0f}/s, {r['threads']} threads)" if "wall_s" in r else ""
            tqdm.write(f"{name:26s} n={n:>7d}  {r['events_per_s']:>10.0f} events/s{wall}  load {r['load'][0]:.1f}")
    if args.spark:
        for n in (100, 10000) if not args.quick else (100,):
            r = run_spark(args.spark, n, args.symbols, args.seed)
            results.append(r)
            print(f"spark end-to-end n={n}: {r['events_per_s']:.0f} events/s ({r['events']} events, {r['seconds']:.1f} s)")
        names = names + ["spark end-to-end"]
    by = {(r["config"], r["subscriptions"]): r for r in results}
    for r in results:
        if r["config"] not in CONFIGS:
            continue
        base = by.get(("indexed+merged", r["subscriptions"]))
        r["ratio_vs_indexed_merged"] = r["events_per_s"] / base["events_per_s"] if base and base["events_per_s"] else None
    out = Path(args.out)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    (out / "img").mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (out / "bench" / f"cayuga{suffix}.json").write_text(json.dumps({"params": params, "results": results}, indent=1))
    write_table(out / "cayuga.md", f"bench:cayuga{suffix}", params, results, names, sizes, core_sizes)
    pair_names = [f"{c} pairs, {k}" for k in ("steady", "sparse") for c in ("engine", "CORE")]
    plot(out / "img" / f"cayuga_throughput{suffix}.png", params, results, names + pair_names)
    print(f"wrote {out / 'bench' / f'cayuga{suffix}.json'}")
    return 0


def check_pairs(pycer_python: str, subs, events) -> dict:
    """Whether the engine's FOLD form and CORE report the same pairs (positions of a and
    b, over all subscriptions) on ``events``."""
    from collections import Counter

    eng = Engine()
    for i, sub in enumerate(subs):
        eng.add(f"q{i}", cel_pairs(*sub))
    mine = Counter((int(m.witness[0][1:]), int(m.witness[-1][1:])) for _, m in eng.run(events))
    r = run_core(pycer_python, subs, events, 600.0, pairs=True)
    theirs = Counter(tuple(p) for p in r["pairs"]) if r else None
    return {"subscriptions": len(subs), "events": len(events), "engine_pairs": sum(mine.values()),
            "core_pairs": sum(theirs.values()) if theirs is not None else None, "equal": mine == theirs}


def write_table(path: Path, marker: str, params: dict, results: list[dict], names: list[str], sizes: list[int],
                core_sizes: list[int]) -> None:
    """Write the result tables into ``path`` between ``<!-- marker -->`` and ``<!-- /marker -->``."""
    by = {(r["config"], r["subscriptions"]): r for r in results}
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python -m scripts.bench.cayuga"
        f"{' --quick' if 'quick' in marker else ''}`.",
        "",
        f"Workload: {params['symbols']} symbols, one trade per tick, {params['events']} events "
        f"({params['warmup_events']} warm-up, then timed for at most {params['time_budget_s']} s per run); "
        f"P in {list(params['P'])}, P2 = P x {list(params['rise'])}, W in {list(params['W_ticks'])} ticks; "
        f"Python {params['python']}, {params['cpus']} cores (one used). Events per CPU second of the "
        "matching process; ratios are against `indexed+merged` in the same run; the load is the machine's "
        f"1-minute load average after the `indexed+merged` run (at the start: {params['load_at_start'][0]:.1f}).",
        "",
        "| subscriptions | " + " | ".join(names) + " | load |",
        "|---:|" + "---:|" * (len(names) + 1),
    ]
    for n in sizes:
        cells = []
        for name in names:
            r = by.get((name, n))
            if r is None:
                cells.append("-")
            else:
                ratio = r.get("ratio_vs_indexed_merged")
                cells.append(f"{r['events_per_s']:,.0f}" + (f" ({ratio:.2f}x)" if ratio and name != "indexed+merged" else ""))
        base = by.get(("indexed+merged", n))
        cells.append(f"{base['load'][0]:.1f}" if base and "load" in base else "-")
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    lines += ["", "| subscriptions | nodes merged | nodes private | live instances (merged) | registration s (merged) |",
              "|---:|---:|---:|---:|---:|"]
    for n in sizes:
        m, p = by.get(("indexed+merged", n)), by.get(("indexed, no merging", n))
        if m:
            lines.append(f"| {n:,} | {m['nodes']:,} | {p['nodes'] if p else '-':} | {m['instances']:,} | {m['register_s']:.2f} |")
    check = params.get("pairs_check")
    if check:
        lines += ["", f"Engine (`indexed+merged`, FOLD form) against CORE on the same pairs: on the first "
                  f"{check['events']:,} events with {check['subscriptions']} subscriptions the engine reported "
                  f"{check['engine_pairs']:,} pairs and CORE {check['core_pairs']:,}, "
                  f"{'the same multiset' if check['equal'] else 'NOT the same multiset'}. Steady: "
                  f"{params['symbols']:,} symbols; sparse: {params['sparse_symbols']:,} symbols; both engines over "
                  f"the same events from the first ({params['events']:,}, a quarter of them above 100 "
                  "subscriptions), CPU time of all threads until the last result.",
                  "", "| subscriptions | engine, steady | CORE, steady | engine/CORE | engine, sparse | CORE, sparse | "
                  "engine/CORE | load |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for n in core_sizes:
            cells = []
            for stream in ("steady", "sparse"):
                e, c = by.get((f"engine pairs, {stream}", n)), by.get((f"CORE pairs, {stream}", n))
                if c and "timeout_s" in c:  # not done within the time limit: a bound of its wall-clock rate
                    core, ratio = f"not done ({c['events'] / c['timeout_s']:,.0f}/s wall at most)", "-"
                else:
                    core = f"{c['events_per_s']:,.0f}" if c else "-"
                    ratio = f"{e['events_per_s'] / c['events_per_s']:.2f}x" if e and c and c["events_per_s"] else "-"
                cells += [f"{e['events_per_s']:,.0f}" if e else "-", core, ratio]
            last = by.get(("CORE pairs, sparse", n)) or by.get(("engine pairs, sparse", n))
            cells.append(f"{last['load'][0]:.1f}" if last else "-")
            lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    kit.write_section(path, "\n".join(lines), f"<!-- {marker} -->", f"<!-- /{marker} -->")


def plot(path: Path, params: dict, results: list[dict], names: list[str]) -> None:
    kit.plot(path, {name: sorted((r["subscriptions"], r["events_per_s"]) for r in results if r["config"] == name)
                    for name in names}, title=f"Cayuga engine, stock ticker ({params['symbols']} symbols)",
             xlabel="stateful subscriptions", ylabel="events per CPU second", logx=True, logy=True)


if __name__ == "__main__":
    sys.exit(main())

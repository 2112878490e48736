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
``counting`` matcher, a batch at a time. Side by side, the CORE engine (``pycer``,
GPL, run as a separate process under Python 3.13 from ``--pycer-python``; never
imported here) on the same pattern: ``T as a ; T as b FILTER a[...] AND b[...]
PARTITION BY [name] WITHIN W EVENTS``. CORE's ``;`` reports every later matching
trade in the window, Cayuga's ``NEXT`` the first one: same filters, same partitioning,
same window; the outputs differ, the work per event is comparable.

Run ``python -m scripts.bench.cayuga [--quick]``; results go to
``docs/bench/cayuga.json``, ``docs/cayuga.md`` (table) and ``docs/img/cayuga_throughput.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

from matchers.cayuga import algebra as A
from matchers.cayuga.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PYCER = "/tmp/pycer-venv/bin/python"

P_GRID = (95, 100, 105)
RISE = (1.02, 1.05)
WINDOWS = (5000, 20000)


def make_events(n: int, symbols: int, seed: int) -> list[A.Event]:
    """``n`` trades, one per tick, uniform over symbols, random-walk prices around 100."""
    rng = random.Random(seed)
    price = [100.0] * symbols
    out = []
    for t in range(n):
        s = rng.randrange(symbols)
        price[s] = round(min(150.0, max(60.0, price[s] * rng.uniform(0.97, 1.03))), 2)
        out.append(A.Event(f"e{t}", "Stock", t, t, {"name": f"S{s}", "price": price[s], "vol": rng.randrange(100, 20000)}))
    return out


def make_subscriptions(n: int, symbols: int, seed: int) -> list[tuple[str, float, float, int]]:
    """``(symbol, P, P2, W)`` of ``n`` subscriptions."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = rng.choice(P_GRID)
        out.append((f"S{rng.randrange(symbols)}", float(p), round(p * rng.choice(RISE), 2), rng.choice(WINDOWS)))
    return out


def cel(sym: str, p: float, p2: float, w: int) -> str:
    """The subscription in CEL (what a user sends)."""
    return (f"FILTER{{DUR <= {w}}}(FILTER{{name = '{sym}' AND price > {p}}}(Stock)"
            f" NEXT{{$2.name = $1.name AND $2.price > {p2}}} Stock)")


def expr(sym: str, p: float, p2: float, w: int) -> A.Expr:
    """The same subscription built directly as algebra (registering 100,000 is faster)."""
    start = A.Filter(A.And((A.Cmp("=", A.Attr(A.BARE, "name"), A.Const(sym)),
                            A.Cmp(">", A.Attr(A.BARE, "price"), A.Const(p)))), A.Stream("Stock"))
    theta = A.And((A.Cmp("=", A.Attr(A.SECOND, "name"), A.Attr(A.LAST, "name")),
                   A.Cmp(">", A.Attr(A.SECOND, "price"), A.Const(p2))))
    return A.Filter(A.Cmp("<=", A.Dur(), A.Const(w)), A.Next(start, theta, A.Stream("Stock")))


CONFIGS: dict[str, dict] = {
    "indexed+merged": dict(merge=True, indexed=True),
    "indexed, no merging": dict(merge=False, indexed=True),
    "no indexes, merged": dict(merge=True, indexed=False),
    "counting static, merged": dict(merge=True, indexed=True, static_matcher="counting"),
}


def run_engine(config: dict, subs, events, warmup: int, budget_s: float) -> dict:
    """Register, warm up, then time events until done or the time budget is spent."""
    eng = Engine(**config)
    t = time.perf_counter()
    for i, sub in enumerate(subs):
        eng.add(f"q{i}", expr(*sub))
    register_s = time.perf_counter() - t
    batch = 512
    batched = bool(config.get("static_matcher"))

    def feed(chunk):
        if batched:
            return len(eng.process_batch(chunk))
        n = 0
        for e in chunk:
            n += len(eng.process(e))
        return n

    t = time.perf_counter()
    for lo in range(0, warmup, batch):
        feed(events[lo:min(warmup, lo + batch)])
        if time.perf_counter() - t > budget_s:
            break
    done = matches = 0
    t = time.perf_counter()
    elapsed = 0.0
    for lo in range(warmup, len(events), batch):
        chunk = events[lo:lo + batch]
        matches += feed(chunk)
        done += len(chunk)
        elapsed = time.perf_counter() - t
        if elapsed > budget_s:
            break
    return {"events": done, "seconds": elapsed, "events_per_s": done / elapsed if elapsed else 0.0,
            "matches": matches, "register_s": register_s, "nodes": len(eng.nodes),
            "starts": len(eng.starts), "instances": eng.instances}


CORE_SCRIPT = r"""
import json, sys, time
import pycer
spec = json.load(sys.stdin)
s = pycer.PyOfflineServer()
s.declare_stream("CREATE STREAM Stock {\n EVENT T { name:string, price:double, vol:int }\n}")
for sym, p, p2, w in spec["subs"]:
    s.add_query(f"SELECT * FROM Stock WHERE T as a ; T as b FILTER a[name = '{sym}' AND price > {p}] "
                f"AND b[price > {p2}] PARTITION BY [name] WITHIN {w} EVENTS")
evs = [pycer.PyEvent(0, [pycer.PyStringValue(n), pycer.PyDoubleValue(float(p)), pycer.PyIntValue(int(v))])
       for n, p, v in spec["events"]]
warm = spec["warmup"]
t = time.perf_counter()
for lo in range(0, warm, 512):
    s.send_events(evs[lo:min(warm, lo + 512)])
    if time.perf_counter() - t > spec["budget"]:
        break
done, t, elapsed = 0, time.perf_counter(), 0.0
for lo in range(warm, len(evs), 512):
    chunk = evs[lo:lo + 512]
    s.send_events(chunk)
    done += len(chunk)
    elapsed = time.perf_counter() - t
    if elapsed > spec["budget"]:
        break
print("RESULT " + json.dumps({"events": done, "seconds": elapsed, "events_per_s": done / elapsed if elapsed else 0.0}))
"""


def run_core(pycer_python: str, subs, events, warmup: int, budget_s: float) -> dict | None:
    """CORE on the same subscriptions and events, in its own process; ``None`` on failure."""
    spec = {"subs": subs, "events": [(e.attrs["name"], e.attrs["price"], e.attrs["vol"]) for e in events],
            "warmup": warmup, "budget": budget_s}
    workdir = Path("/tmp/pycer-bench")
    workdir.mkdir(exist_ok=True)  # CORE writes logs/ under its working directory
    try:
        done = subprocess.run([pycer_python, "-c", CORE_SCRIPT], input=json.dumps(spec), capture_output=True,
                              text=True, timeout=budget_s * 4 + 600, cwd=workdir, check=False)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        print(f"CORE failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        print(f"CORE printed no result: {done.stdout[-300:]} {done.stderr[-300:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1][len("RESULT "):])


def run_spark(n_events: int, n_subs: int, symbols: int, seed: int) -> dict:
    """End to end: ``n_subs`` patterns and ``n_events`` events through the embedded broker,
    the pattern-registry query and the keyed-state query (``local[2]``).

    The rate is events over the wall time of the patterns query from its start until
    every event has been processed (Spark start-up not included, the first micro-batch's
    planning included).
    """
    import tempfile

    import orjson

    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.broker import EmbeddedBroker
    from streaming.kafka.config import config_client_kwargs
    from streaming.patterns import start_patterns_query, start_subscriptions_query
    from streaming.spark import get_session

    events = make_events(n_events, symbols, seed)
    subs = make_subscriptions(n_subs, symbols, seed)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as ckpt:
        config = {"bootstrap_servers": broker.bootstrap_servers}
        ensure_topics(config, {"ev": 2, "sub": 1, "note": 1, "err": 1})
        from kafka import KafkaProducer

        prod = KafkaProducer(**config_client_kwargs(config, "producer"), linger_ms=20)
        for i, sub in enumerate(subs):
            prod.send("sub", key=f"q{i}".encode(), value=orjson.dumps({"id": f"q{i}", "pattern": cel(*sub)}))
        for e in events:
            prod.send("ev", key=e.attrs["name"].encode(),
                      value=orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs}))
        prod.send("ev", value=orjson.dumps({"id": "heartbeat", "stream": "heartbeat", "ts": n_events + 100000}))
        prod.flush()
        prod.close()
        spark = get_session(app_name="bench-cayuga", master="local[2]")
        q = start_subscriptions_query(spark, config, "sub", "err", ckpt, trigger="0 seconds")
        q.processAllAvailable()
        q.stop()
        t = time.perf_counter()
        q = start_patterns_query(spark, config, "ev", "note", "err", ckpt, trigger="0 seconds")
        q.processAllAvailable()
        drained = time.perf_counter()
        while q.lastProgress is None or q.lastProgress.get("numInputRows", 1):
            time.sleep(0.5)  # the watermark's no-data batch completes the buffered events
            if time.perf_counter() - drained > 60:
                break
        elapsed = time.perf_counter() - t
        progress = q.recentProgress
        q.stop()
        spark.stop()
    return {"config": "spark end-to-end", "subscriptions": n_subs, "events": n_events, "seconds": elapsed,
            "events_per_s": n_events / elapsed, "batches": len(progress)}


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
        limits = {"no indexes, merged": 1000, "CORE": 100, "counting static, merged": 1000}
    else:
        sizes, n_events, warmup, budget = [1, 10, 100, 300, 1000, 10000, 100000], 40000, 10000, 8.0
        limits = {"no indexes, merged": 1000, "CORE": 1000, "counting static, merged": 10000}
    core_ok = os.path.exists(args.pycer_python)
    params = {"symbols": args.symbols, "events": n_events, "warmup_events": warmup, "time_budget_s": budget,
              "P": P_GRID, "rise": RISE, "W_ticks": WINDOWS, "seed": args.seed, "sizes": sizes,
              "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    print("workload:", json.dumps(params))
    print("example subscription:", cel(*make_subscriptions(1, args.symbols, args.seed)[0]))
    if not core_ok:
        print(f"CORE (pycer) not measured: {args.pycer_python} does not exist "
              "(create a Python 3.13 venv there and pip install pycer)")
    events = make_events(n_events, args.symbols, args.seed)
    results: list[dict] = []
    names = list(CONFIGS) + (["CORE"] if core_ok else [])
    runs = [(n, c) for n in sizes for c in names if n <= limits.get(c, 10**9)]
    with tqdm(runs, desc="cayuga bench", unit="run") as bar:
        for n, name in bar:
            bar.set_postfix_str(f"{name} n={n}")
            subs = make_subscriptions(n, args.symbols, args.seed + n)
            if name == "CORE":
                r = run_core(args.pycer_python, subs, events, warmup, budget)
                if r is None:
                    continue
            else:
                r = run_engine(CONFIGS[name], subs, events, warmup, budget)
            r.update({"config": name, "subscriptions": n})
            results.append(r)
            tqdm.write(f"{name:26s} n={n:>7d}  {r['events_per_s']:>10.0f} events/s")
    if args.spark:
        for n in (100, 10000) if not args.quick else (100,):
            r = run_spark(args.spark, n, args.symbols, args.seed)
            results.append(r)
            print(f"spark end-to-end n={n}: {r['events_per_s']:.0f} events/s ({r['events']} events, {r['seconds']:.1f} s)")
        names = names + ["spark end-to-end"]
    by = {(r["config"], r["subscriptions"]): r for r in results}
    for r in results:
        base = by.get(("indexed+merged", r["subscriptions"]))
        r["ratio_vs_indexed_merged"] = r["events_per_s"] / base["events_per_s"] if base and base["events_per_s"] else None
    out = Path(args.out)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    (out / "img").mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (out / "bench" / f"cayuga{suffix}.json").write_text(json.dumps({"params": params, "results": results}, indent=1))
    write_table(out / "cayuga.md", f"bench:cayuga{suffix}", params, results, names, sizes)
    plot(out / "img" / f"cayuga_throughput{suffix}.png", params, results, names)
    print(f"wrote {out / 'bench' / f'cayuga{suffix}.json'}")
    return 0


def write_table(path: Path, marker: str, params: dict, results: list[dict], names: list[str], sizes: list[int]) -> None:
    """Write the result tables into ``path`` between ``<!-- marker -->`` and ``<!-- /marker -->``."""
    by = {(r["config"], r["subscriptions"]): r for r in results}
    lines = [
        f"<!-- {marker} -->",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python -m scripts.bench.cayuga"
        f"{' --quick' if 'quick' in marker else ''}`.",
        "",
        f"Workload: {params['symbols']} symbols, one trade per tick, {params['events']} events "
        f"({params['warmup_events']} warm-up, then timed for at most {params['time_budget_s']} s per run); "
        f"P in {list(params['P'])}, P2 = P x {list(params['rise'])}, W in {list(params['W_ticks'])} ticks; "
        f"Python {params['python']}, {params['cpus']} cores (one used). "
        "Ratios are against `indexed+merged` in the same run.",
        "",
        "| subscriptions | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
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
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    lines += ["", "| subscriptions | nodes merged | nodes private | live instances (merged) | registration s (merged) |",
              "|---:|---:|---:|---:|---:|"]
    for n in sizes:
        m, p = by.get(("indexed+merged", n)), by.get(("indexed, no merging", n))
        if m:
            lines.append(f"| {n:,} | {m['nodes']:,} | {p['nodes'] if p else '-':} | {m['instances']:,} | {m['register_s']:.2f} |")
    lines.append(f"<!-- /{marker} -->")
    block = "\n".join(lines)
    text = path.read_text() if path.exists() else "# Cayuga\n"
    start, end = text.find(f"<!-- {marker} -->"), text.find(f"<!-- /{marker} -->")
    if start >= 0 and end > start:
        text = text[:start] + block + text[end + len(f"<!-- /{marker} -->"):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def plot(path: Path, params: dict, results: list[dict], names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in names:
        pts = sorted((r["subscriptions"], r["events_per_s"]) for r in results if r["config"] == name)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("stateful subscriptions")
    ax.set_ylabel("events / s (one core)")
    ax.set_title(f"Cayuga engine, stock ticker ({params['symbols']} symbols)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

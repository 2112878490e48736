"""Side by side with Flink's ``MATCH_RECOGNIZE`` (PyFlink): "three rising prices per symbol".

Workload: the stock ticker of :mod:`scripts.bench.cayuga` (``--symbols`` symbols, one
trade per tick, random-walk prices) and ``--patterns`` patterns; pattern ``i`` asks for
three trades of one symbol in a row (its next two trades, strict contiguity per symbol),
the first above a threshold ``P_i`` (spread evenly over 80-120) and each higher than the
one before. In Flink SQL::

    SELECT i AS pid, t0, t1, t2 FROM Stock MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts
      MEASURES A.tick AS t0, B.tick AS t1, C.tick AS t2
      ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B C)
      DEFINE A AS A.price > P_i, B AS B.price > A.price, C AS C.price > B.price)

and in Cayuga (:func:`cel`: the next trade of the symbol, then a filter on the price
kept from the trade before)::

    FILTER{price > p1}((SELECT name, price AS p1 FROM FILTER{price > p0}((SELECT name,
      price AS p0 FROM FILTER{price > P_i}(Stock)) NEXT{$2.name = $1.name} Stock))
      NEXT{$2.name = $1.name} Stock)

Cayuga reports every run, one per start trade here, which is what ``SKIP TO NEXT ROW``
reports. Flink runs in its own process (``--flink-python``: the interpreter of a
separate venv with ``apache-flink``; never imported here) as one job, the patterns'
queries in one ``UNION ALL`` over a CSV file source (event time, a watermark on the
tick), parallelism 1, matches written to CSV files; the run checks that both report the
same multiset of ``(pattern, t0, t1, t2)``. Times are CPU seconds: the engine's process
(``time.process_time``) for the matching; for Flink its Python driver and the JVM it
starts (``/proc``), both for the job alone (from its submission to its end, the JVM
already up) and in all (JVM start, planning). Rounds alternate which one runs first;
the 1-minute load average is printed with every figure.

Run ``python -m scripts.bench.flink --flink-python PATH [--quick]``; results go to
``docs/bench/flink.json`` and the table in ``docs/cayuga.md``. Without
``--flink-python`` the benchmark prints that it is skipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from matchers.cayuga import algebra as A
from matchers.cayuga.engine import Engine
from scripts.bench import kit
from scripts.tickers import make_events

Key = tuple[int, int, int, int]  # (pattern, tick of A, of B, of C)


def thresholds(n: int) -> list[float]:
    """The start thresholds ``P_i`` of ``n`` patterns, evenly over 80-120."""
    return [round(80.0 + 40.0 * i / max(1, n - 1), 2) if n > 1 else 100.0 for i in range(n)]


def cel(p: float) -> str:
    """Pattern "three rising trades of one symbol in a row, the first above ``p``" in CEL."""
    s1 = f"SELECT name, price AS p0 FROM FILTER{{price > {p}}}(Stock)"
    s2 = f"SELECT name, price AS p1 FROM FILTER{{price > p0}}(({s1}) NEXT{{$2.name = $1.name}} Stock)"
    return f"FILTER{{price > p1}}(({s2}) NEXT{{$2.name = $1.name}} Stock)"


def sql(pid: int, p: float) -> str:
    """The same pattern as a Flink ``MATCH_RECOGNIZE`` query."""
    return (f"SELECT {pid} AS pid, t0, t1, t2 FROM Stock MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts "
            "MEASURES A.tick AS t0, B.tick AS t1, C.tick AS t2 "
            "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B C) "
            f"DEFINE A AS A.price > {p}, B AS B.price > A.price, C AS C.price > B.price)")


def write_csv(events: list[A.Event], path: Path) -> None:
    """The events as ``tick,name,price`` rows (Flink's source)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        for e in events:
            w.writerow((e.t0, e.attrs["name"], repr(float(e.attrs["price"]))))


def read_matches(out_dir: Path) -> Counter[Key]:
    """The ``(pattern, t0, t1, t2)`` rows Flink wrote (every file under ``out_dir``)."""
    out: Counter[Key] = Counter()
    for path in sorted(p for p in out_dir.rglob("*") if p.is_file() and not p.name.startswith(".")):
        with path.open(newline="") as f:
            for row in csv.reader(f):
                if row:
                    pid, t0, t1, t2 = (int(x) for x in row)
                    out[(pid, t0, t1, t2)] += 1
    return out


def compare(mine: Counter[Key], theirs: Counter[Key], patterns: int) -> dict:
    """Both sides' match counts per pattern and whether the multisets are equal."""
    per_mine, per_theirs = Counter(k[0] for k in mine.elements()), Counter(k[0] for k in theirs.elements())
    differing = [i for i in range(patterns) if per_mine[i] != per_theirs[i]]
    return {"equal": mine == theirs, "engine_matches": sum(mine.values()), "flink_matches": sum(theirs.values()),
            "patterns_with_different_counts": differing,
            "only_engine": sum((mine - theirs).values()), "only_flink": sum((theirs - mine).values())}


def run_engine(events: list[A.Event], ps: list[float]) -> tuple[Counter[Key], dict]:
    """Register the patterns and match ``events``: the matches and the CPU time of matching."""
    eng = Engine()
    for i, p in enumerate(ps):
        eng.add(str(i), cel(p))
    t = time.process_time()
    found = eng.run(events)
    cpu = time.process_time() - t
    mine: Counter[Key] = Counter()
    for _, m in found:
        a, b, c = (int(w[1:]) for w in m.witness)  # event ids are "e<tick>"
        mine[(int(m.sub_id), a, b, c)] += 1
    return mine, {"cpu_s": cpu, "events_per_s": len(events) / cpu if cpu else 0.0, "load": os.getloadavg()}


FLINK_JOB = r"""
import json, os, sys, time

def tree_cpu():
    # CPU seconds of this process and its descendants (the JVM), from /proc
    tick = os.sysconf("SC_CLK_TCK")
    kids, stat = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kids.setdefault(int(fields[1]), []).append(int(d))
            stat[int(d)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stat.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total

spec = json.loads(sys.stdin.read())
from pyflink.table import EnvironmentSettings, TableEnvironment
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("parallelism.default", "1")
env.execute_sql(f"CREATE TABLE Stock (tick BIGINT, name STRING, price DOUBLE, ts AS TO_TIMESTAMP_LTZ(tick, 3), "
                f"WATERMARK FOR ts AS ts) WITH ('connector'='filesystem','path'='{spec['events']}','format'='csv')")
env.execute_sql(f"CREATE TABLE Hits (pid INT, t0 BIGINT, t1 BIGINT, t2 BIGINT) "
                f"WITH ('connector'='filesystem','path'='{spec['out']}','format'='csv')")
cpu0, wall0 = tree_cpu(), time.perf_counter()
env.execute_sql("INSERT INTO Hits " + " UNION ALL ".join(spec["queries"])).wait()
cpu1, wall1 = tree_cpu(), time.perf_counter()
print("RESULT " + json.dumps({"job_cpu_s": cpu1 - cpu0, "job_wall_s": wall1 - wall0, "total_cpu_s": cpu1}))
"""


def run_flink(flink_python: str, events_csv: Path, ps: list[float], workdir: Path,
              timeout_s: float) -> tuple[Counter[Key], dict] | None:
    """The patterns as one Flink job over ``events_csv``: its matches and times (``None``
    when it fails or takes longer than ``timeout_s``)."""
    out_dir = Path(tempfile.mkdtemp(prefix="flink-out-", dir=workdir))
    spec = {"events": str(events_csv), "out": str(out_dir), "queries": [sql(i, p) for i, p in enumerate(ps)]}
    env = {**os.environ, "JVM_ARGS": os.environ.get("JVM_ARGS", "-Xmx2g")}
    try:
        r = kit.run([flink_python, "-c", FLINK_JOB], input=json.dumps(spec), timeout_s=timeout_s, cwd=workdir,
                    env=env).check().result_line()
    except kit.ChildFailed as exc:
        print(f"Flink: {exc}", file=sys.stderr)
        return None
    n = sum(1 for _ in events_csv.open())
    r.update({"events_per_s": n / r["job_cpu_s"] if r["job_cpu_s"] else 0.0, "load": os.getloadavg()})
    return read_matches(out_dir), r


def write_table(path: Path, params: dict, rows: list[dict]) -> None:
    """The results between ``<!-- bench:flink -->`` markers in ``path``."""
    marker = "bench:flink"
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python -m scripts.bench.flink "
        "--flink-python PATH`: "
        f"{params['events']:,} events over {params['symbols']:,} symbols (seed {params['seed']}), "
        f"{params['rounds']} rounds alternating which side runs first; Flink {params.get('flink', '?')}, "
        "parallelism 1, `JVM_ARGS=-Xmx2g`. Events per CPU second: the engine's matching; Flink's job from "
        "submission to end (its Python driver and JVM, the JVM already up), and in all (JVM start and "
        "planning included). Best round of each; load: 1-minute average after Flink's best round.",
        "",
        "| patterns | engine events/s | Flink events/s (job) | engine/Flink | Flink CPU s in all | matches "
        "(engine = Flink) | load |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r["engine_events_per_s"] / r["flink_events_per_s"] if r["flink_events_per_s"] else 0.0
        lines.append(f"| {r['patterns']:,} | {r['engine_events_per_s']:,.0f} | {r['flink_events_per_s']:,.0f} | "
                     f"{ratio:.1f}x | {r['flink_total_cpu_s']:.1f} | {r['check']['engine_matches']:,} "
                     f"({'equal' if r['check']['equal'] else 'NOT equal'}) | {r['load'][0]:.1f} |")
    kit.write_section(path, "\n".join(lines), f"<!-- {marker} -->", f"<!-- /{marker} -->")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.flink", description=__doc__.split("\n")[0])
    ap.add_argument("--flink-python", default="", help="interpreter of a venv with apache-flink installed")
    ap.add_argument("--quick", action="store_true", help="small sizes, one round")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--symbols", type=int, default=1000)
    ap.add_argument("--patterns", default="1,100", help="comma-separated numbers of patterns")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per Flink job")
    ap.add_argument("--out", default=str(kit.DOCS))
    args = ap.parse_args(argv)
    if not args.flink_python:
        print("flink: skipped (no --flink-python; see docs/cayuga.md for installing PyFlink in its own venv)")
        return 0
    if args.quick:
        args.events, args.rounds, args.patterns = min(args.events, 2000), 1, "10"
    sizes = [int(x) for x in args.patterns.split(",")]
    version = kit.run([args.flink_python, "-c", "from importlib.metadata import version; "
                       "print(version('apache-flink'))"])
    params = {"events": args.events, "symbols": args.symbols, "patterns": sizes, "rounds": args.rounds,
              "seed": args.seed, "flink": version.stdout.strip() or "?", "load_at_start": os.getloadavg()}
    print("workload:", json.dumps(params), flush=True)
    print("pattern 0 in CEL:", cel(thresholds(1)[0]))
    print("pattern 0 in Flink SQL:", sql(0, thresholds(1)[0]))
    events = make_events(args.events, args.symbols, args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="flink-bench-") as tmp:
        work = Path(tmp)
        events_csv = work / "events.csv"
        write_csv(events, events_csv)
        for n in sizes:
            ps = thresholds(n)
            best_e: dict | None = None
            best_f: dict | None = None
            check = None
            for rnd in range(args.rounds):
                for side in ("engine", "flink") if rnd % 2 == 0 else ("flink", "engine"):
                    if side == "engine":
                        mine, e = run_engine(events, ps)
                        print(f"patterns={n} round {rnd} engine {e['events_per_s']:,.0f} events/s "
                              f"({e['cpu_s']:.2f} CPU s) load {e['load'][0]:.1f}", flush=True)
                        if best_e is None or e["events_per_s"] > best_e["events_per_s"]:
                            best_e = e
                        continue
                    got = run_flink(args.flink_python, events_csv, ps, work, args.timeout)
                    if got is None:
                        return 1
                    theirs, f = got
                    print(f"patterns={n} round {rnd} flink {f['events_per_s']:,.0f} events/s (job {f['job_cpu_s']:.1f} "
                          f"CPU s, {f['job_wall_s']:.1f} s wall; {f['total_cpu_s']:.1f} CPU s in all) "
                          f"load {f['load'][0]:.1f}", flush=True)
                    if best_f is None or f["events_per_s"] > best_f["events_per_s"]:
                        best_f = f
                    check = theirs
            assert best_e is not None and best_f is not None and check is not None
            result = compare(mine, check, n)
            print(f"patterns={n} check: {json.dumps(result)}", flush=True)
            rows.append({"patterns": n, "engine_events_per_s": best_e["events_per_s"],
                         "flink_events_per_s": best_f["events_per_s"], "flink_total_cpu_s": best_f["total_cpu_s"],
                         "flink_job_wall_s": best_f["job_wall_s"], "check": result, "load": best_f["load"]})
    out = Path(args.out)
    (out / "bench").mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (out / "bench" / f"flink{suffix}.json").write_text(json.dumps({"params": params, "results": rows}, indent=1))
    if not args.quick:
        write_table(out / "cayuga.md", params, rows)
    print(f"wrote {out / 'bench' / f'flink{suffix}.json'}")
    return 0 if all(r["check"]["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

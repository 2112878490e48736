"""Memory and start-up time of N Python workers holding one index: each its own, or one shared.

``python -m scripts.bench.shared_index [--quick] [--matchers counting kindex] [--n-subs 100000]
[--workers 1 2 4] [--workload fabret-w0]``

A registry with the workload's subscriptions is written to a temporary directory. For
each matcher, mode (``own``: ``match.shared_index = false``, each worker builds its
index; ``shared``: one index per machine) and number of workers N, N spawned processes
stand in for the Python workers of one executor: each loads the kernels on a few
subscriptions (so that JIT and imports are in its baseline), waits for the others, asks
:func:`streaming.executor_cache.index_for` for the registry's version and matches the
workload's events once. Then the parent reads ``/proc/<pid>/smaps_rollup`` of each:
RSS counts shared pages in full in every process that maps them, PSS divides each page
between the processes that map it, so the executor's memory is the sum of the PSS.
``index`` columns are growth over the worker's baseline. Finally one more worker starts
while the shared file is there (a worker that Spark restarted) and maps it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
import uuid
from collections.abc import Sequence

MB = 1 << 20


def smaps(pid: int) -> dict[str, int]:
    """Rss, Pss, Shared and Private bytes of a process (from ``/proc/<pid>/smaps_rollup``)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return {"rss": fields["Rss"], "pss": fields["Pss"],
            "shared": fields["Shared_Clean"] + fields["Shared_Dirty"],
            "private": fields["Private_Clean"] + fields["Private_Dirty"]}


def _worker(spec, warm, events, ready, results, release) -> None:
    """One Python worker: baseline, then the index for ``spec``, then one batch matched."""
    from matchers.base import create
    from streaming.executor_cache import index_for

    small = create(spec.matcher)
    small.add(warm)
    small.match(small.encode(events[:10]))
    base = smaps(os.getpid())
    ready.wait()
    t0 = time.perf_counter()
    entry = index_for(spec)
    seconds = time.perf_counter() - t0
    matcher = entry.matcher
    total = matcher.match(matcher.encode(events)).total
    results.put((os.getpid(), seconds, entry.rebuilds, entry.maps, total, base))
    release.wait()


def run_workers(spec, n: int, warm, events) -> list[dict]:
    """Start ``n`` workers on ``spec`` at once; their timings and memory."""
    ctx = mp.get_context("spawn")
    ready, release, results = ctx.Barrier(n), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(spec, warm, events, ready, results, release)) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        rows = []
        for _ in procs:
            pid, seconds, rebuilds, maps, total, base = results.get(timeout=3600)
            rows.append({"pid": pid, "seconds": seconds, "built": rebuilds > 0, "mapped": maps > 0,
                         "matches": total, "base": base, "now": smaps(pid)})
        return rows
    finally:
        release.set()
        for p in procs:
            p.join(timeout=60)


def summary(matcher: str, mode: str, n: int, rows: list[dict]) -> str:
    rss = sum(r["now"]["rss"] for r in rows) / MB
    pss = sum(r["now"]["pss"] for r in rows) / MB
    index_rss = [(r["now"]["rss"] - r["base"]["rss"]) / MB for r in rows]
    index_pss = sum(r["now"]["pss"] - r["base"]["pss"] for r in rows) / MB
    built = sum(r["built"] for r in rows)
    times = ", ".join(f"{r['seconds']:.2f}{'b' if r['built'] else 'm' if r['mapped'] else ''}"
                      for r in sorted(rows, key=lambda r: -r["built"]))
    return (f"| {matcher} | {mode} | {n} | {rss:.0f} | {pss:.0f} | {max(index_rss):.0f} | {index_pss:.0f} "
            f"| {built} | {times} |")


def main(argv: Sequence[str] | None = None) -> int:
    from scripts.workloads import generate
    from streaming import shared_index
    from streaming.executor_cache import IndexSpec
    from streaming.records import UPSERT, Change
    from streaming.registry import Registry

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 subscriptions, 1 and 2 workers, counting")
    ap.add_argument("--matchers", nargs="+", default=["counting", "kindex"])
    ap.add_argument("--n-subs", type=int, default=100_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--workload", default="fabret-w0")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_subs, args.workers, args.matchers = 10_000, [1, 2], ["counting"]
    workload = generate(args.workload, n_subs=args.n_subs, n_events=1000)
    warm, events = workload.subscriptions[:50], workload.events
    print(f"{args.workload}, {args.n_subs:,} subscriptions, {len(events)} events matched once per worker; "
          "MB; times in s (b: built, m: mapped)")
    print("| matcher | mode | workers | RSS sum | PSS sum (executor) | index RSS per worker (max) "
          "| index PSS sum | builds | time to index |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as registry_dir:
        reg = Registry(registry_dir)
        reg.append(0, [Change(UPSERT, s.id, s) for s in workload.subscriptions], time.time())
        reg.snapshot()
        for matcher in args.matchers:
            for mode in ("own", "shared"):
                for n in args.workers:
                    app_id = f"bench-{uuid.uuid4().hex[:8]}" if mode == "shared" else None
                    spec = IndexSpec(registry_dir, matcher, reg.version, app_id=app_id)
                    try:
                        print(summary(matcher, mode, n, run_workers(spec, n, warm, events)), flush=True)
                        if mode == "shared" and n == args.workers[-1]:
                            print(summary(matcher, "shared, restarted", 1, run_workers(spec, 1, warm, events)),
                                  flush=True)
                    finally:
                        if app_id is not None:
                            shared_index.remove_application(app_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

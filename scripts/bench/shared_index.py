"""Memory and start-up time of N Python workers holding one index: each its own, or one shared.

``python -m scripts.bench.shared_index [--quick] [--matchers counting kindex] [--n-subs 100000]
[--workers 1 2 4] [--workload fabret-w0]``

A columnar registry with the workload's subscriptions (version 1, snapshotted) and a delta
(version 2) is written to a temporary directory. For
each matcher, mode (``own``: ``match.shared_index = false``, each worker builds its
index; ``shared``: one index per machine) and number of workers N, N spawned processes
stand in for the Python workers of one executor: each loads the kernels on a few
subscriptions (so that JIT and imports are in its baseline), waits for the others, asks
:func:`streaming.executor_cache.index_for` for the registry's version and matches the
workload's events once. Then the parent reads ``/proc/<pid>/smaps_rollup`` of each:
RSS counts shared pages in full in every process that maps them, PSS divides each page
between the processes that map it.  A worker's index memory is the growth of its
anonymous memory (its heap, and the pages it copied on write) over its baseline plus
the PSS of its mapping of the shared file; the executor's is their sum.  ``RSS sum`` and
``PSS sum`` are whole processes (interpreter, libraries and kernels included).  Last, one
worker per mode catches up by a delta (deletes and new subscriptions): its time, and its
index memory before and after (the shared one changes private copies of what it writes). Finally one more worker starts
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
from dataclasses import replace

from scripts.bench import kit

MB = 1 << 20


def _worker(spec, then, warm, events, ready, results, release) -> None:
    """One Python worker: baseline, the index for ``spec``, one batch matched; then, if given,
    the index for ``then`` (a catch-up by its deltas) and the batch again."""
    from matchers.catalog import create
    from streaming.executor_cache import index_for

    small = create(spec.matcher)
    small.add(warm)
    small.match(small.encode(events[:10]))
    base = kit.process_memory(os.getpid())
    ready.wait()
    t0 = time.perf_counter()
    entry = index_for(spec)
    seconds = time.perf_counter() - t0
    total = entry.matcher.match(entry.matcher.encode(events)).total
    first, catch_up = kit.process_memory(os.getpid()), None
    if then is not None:
        t0 = time.perf_counter()
        entry = index_for(then)
        catch_up = time.perf_counter() - t0
        entry.matcher.match(entry.matcher.encode(events))
    results.put((os.getpid(), seconds, entry.rebuilds, entry.maps, total, base, first, catch_up))
    release.wait()


def run_workers(spec, n: int, warm, events, then=None) -> list[dict]:
    """Start ``n`` workers on ``spec`` at once (then ``then``); their timings and memory."""
    ctx = mp.get_context("spawn")
    ready, release, results = ctx.Barrier(n), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(spec, then, warm, events, ready, results, release))
             for _ in range(n)]
    for p in procs:
        p.start()
    try:
        rows = []
        for _ in procs:
            pid, seconds, rebuilds, maps, total, base, first, catch_up = results.get(timeout=3600)
            rows.append({"pid": pid, "seconds": seconds, "built": rebuilds > 0, "mapped": maps > 0,
                         "matches": total, "base": base, "first": first, "now": kit.process_memory(pid),
                         "catch_up": catch_up})
        return rows
    finally:
        release.set()
        for p in procs:
            p.join(timeout=60)


def index_mb(row: dict, at: str = "now") -> float:
    """A worker's index memory: anonymous growth over its baseline plus its share of the file."""
    return (row[at]["anon"] - row["base"]["anon"] + row[at]["file_pss"]) / MB


def summary(matcher: str, mode: str, n: int, rows: list[dict]) -> str:
    """A table row: memory once the workers matched their first batch (before any catch-up)."""
    rss = sum(r["first"]["rss"] for r in rows) / MB
    pss = sum(r["first"]["pss"] for r in rows) / MB
    index = [index_mb(r, "first") for r in rows]
    index_rss = [(r["first"]["rss"] - r["base"]["rss"]) / MB for r in rows]
    built = sum(r["built"] for r in rows)
    times = ", ".join(f"{r['seconds']:.2f}{'b' if r['built'] else 'm' if r['mapped'] else ''}"
                      for r in sorted(rows, key=lambda r: -r["built"]))
    return (f"| {matcher} | {mode} | {n} | {max(index_rss):.0f} | {' / '.join(f'{x:.0f}' for x in index)} "
            f"| {sum(index):.0f} | {rss:.0f} | {pss:.0f} | {built} | {times} |")


def main(argv: Sequence[str] | None = None) -> int:
    from scripts.workloads import generate
    from streaming import shared_index
    from streaming.executor_cache import IndexSpec
    from streaming.registry_columns import ChangeBatch, ColumnRegistry
    from streaming.registry_columns.migrate import upserts_of

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
    print("| matcher | mode | workers | index RSS per worker (max) | index memory per worker "
          "| index memory of the executor | RSS sum | PSS sum | builds | time to index |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    catch_ups = []
    with tempfile.TemporaryDirectory() as registry_dir:
        reg = ColumnRegistry(registry_dir)
        subs = workload.subscriptions
        reg.apply(0, upserts_of({s.id: s for s in subs}), time.time())
        reg.snapshot()
        n_change = min(500, len(subs) // 4)  # deletes, and as many new subscriptions (copies under new ids)
        changes = ChangeBatch.concat([ChangeBatch.of([s.id for s in subs[:n_change]], ["delete"] * n_change),
                                      upserts_of({f"new-{s.id}": replace(s, id=f"new-{s.id}") for s in subs[-n_change:]})])
        assert reg.apply(1, changes, time.time()).version == 2
        for matcher in args.matchers:
            for mode in ("own", "shared"):
                for n in args.workers:
                    app_id = f"bench-{uuid.uuid4().hex[:8]}" if mode == "shared" else None
                    spec = IndexSpec(registry_dir, matcher, 1, app_id=app_id)
                    then = replace(spec, version=2)  # a catch-up by delta 2, read from the files
                    try:
                        print(summary(matcher, mode, n, run_workers(spec, n, warm, events)), flush=True)
                        if n == args.workers[-1]:
                            what = "shared, restarted" if mode == "shared" else mode
                            rows = run_workers(spec, 1, warm, events, then)
                            if mode == "shared":
                                print(summary(matcher, what, 1, rows), flush=True)
                            catch_ups.append((matcher, what, rows[0]))
                    finally:
                        if app_id is not None:
                            shared_index.remove_application(app_id)
    print(f"\nOne worker catching up by a delta of {len(changes)} changes ({n_change} deletes, "
          f"{n_change} new subscriptions); MB, s")
    print("| matcher | mode | index memory before | after | catch-up time |")
    print("|---|---|---|---|---|")
    for matcher, what, row in catch_ups:
        print(f"| {matcher} | {what} | {index_mb(row, 'first'):.0f} | {index_mb(row):.0f} | {row['catch_up']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Dense interval workload: the project's matchers next to an external peer (HEM, REIN, TAMA).

The workload (:func:`scripts.workloads.dense_arrays`: ``d`` attributes all assigned per
event, ``k`` intervals of width ``width`` per subscription; variants ``n``, ``width``,
``k``, Zipf values) is written to two text files a C++ peer can read:

* subscriptions: a header ``n d k domain``, then one line per subscription
  ``id k att lo hi att lo hi ...`` (closed intervals, integers);
* events: a header ``m d``, then one line per event with the ``d`` values (attribute
  ``j`` in column ``j``).

A peer is a binary given by path, run as ``PEER SUBS EVENTS [ARGS...] ROUNDS`` (``ARGS``
from ``--peer name=path:arg1,arg2``); it prints ``ms_per_event X`` (its best matching
CPU time per event over its rounds, build excluded) and ``counts c0 c1 ...`` (matches per
event).  Each project matcher lives in one forked, single-threaded child that builds once
and then matches the encoded events (one batch of ``--batch`` events at a time) each time
it is asked.  Rounds are interleaved: every contestant runs once per round, in turn, so
that load changes on this shared machine hit all of them alike; each figure is the best
round, in CPU time, and the ratios compare figures of the same run.  Match counts are
compared per event with the first contestant's.

Build times (CPU, in the child, from the matcher's input in memory up to an index ready to match,
the first match included): ``bitmark`` adds the subscriptions as objects, ``bitmark@columns`` the
workload's arrays as interval columns (no object per subscription); making that input from the
workload's arrays (the objects; the ids' strings and the float interval columns) is timed apart
(``input CPU s``).  ``bitmark@file`` is timed from the peer's subscriptions file, read as columns
(:func:`read_peer_subscriptions`), to a ready index.  A name ending in
``#LABEL`` (``bitmark@columns#main``) runs the code of another checkout (``--checkout
main=/work/main``): its child imports ``matchers`` and ``scripts`` from there, for an A/B of
two versions in one interleaved run.  A peer that prints
``build_s X`` has it reported as its build, and ``initbits_s Y`` as its ready index (HEM5's
scratch driver: ``build_s`` its ``insert`` of the subscriptions, parsed from the file before the
clock starts, into unsorted buckets; ``initbits_s`` that plus ``initBits``, which sorts the
buckets and builds the bitsets: the span of ``bitmark@columns``' build).

Run ``python -m scripts.bench.dense --n-subs 100000 --peer hem5-be4=PATH:4 ...``; results
go to ``docs/bench/dense.json`` (with ``--record``) and a section of ``docs/bench.md``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from matchers.bitmark.layout import Intervals
from scripts.bench import kit
from scripts.bench.text_ints import read_ints
from scripts.workloads import DenseArrays, dense_arrays


def write_peer_files(arrays: DenseArrays, directory: Path) -> tuple[Path, Path]:
    """The workload as the peer's two text files in ``directory``."""
    n, k = arrays.attrs.shape
    m, d = arrays.events.shape
    subs, events = directory / "subs.txt", directory / "events.txt"
    rows = np.empty((n, 2 + 3 * k), dtype=np.int64)
    rows[:, 0] = np.arange(n)
    rows[:, 1] = k
    rows[:, 2::3], rows[:, 3::3], rows[:, 4::3] = arrays.attrs, arrays.lo, arrays.hi
    with subs.open("w") as f:
        f.write(f"{n} {d} {k} {arrays.domain}\n")
        np.savetxt(f, rows, fmt="%d")
    with events.open("w") as f:
        f.write(f"{m} {d}\n")
        np.savetxt(f, arrays.events, fmt="%d")
    return subs, events


def read_peer_subscriptions(path: Path) -> tuple[list[str], Intervals]:
    """The subscriptions file of :func:`write_peer_files` as ids ``s<id>`` and interval columns
    (one read of its integers by a kernel, :func:`~scripts.bench.text_ints.read_ints`; no object
    per subscription)."""
    flat = read_ints(path)
    n, d, k = int(flat[0]), int(flat[1]), int(flat[2])
    rows = flat[4:].reshape(n, 2 + 3 * k)
    if (rows[:, 1] != k).any():
        raise ValueError(f"{path}: every subscription must have the header's k = {k} intervals")
    ids = [f"s{i}" for i in rows[:, 0].tolist()]
    return ids, Intervals.of_rows(rows[:, 2::3], rows[:, 3::3], rows[:, 4::3], tuple(f"a{j}" for j in range(d)))


# -- the project's matchers, one persistent child each ------------------------------------
def _use_checkout(path: str) -> None:
    """Make this (forked) process import ``matchers`` and ``scripts`` from the checkout at ``path``."""
    for module in [m for m in sys.modules if m.split(".")[0] in ("matchers", "scripts")]:
        del sys.modules[module]
    sys.path.insert(0, str(Path(path).resolve()))


def serve(name: str, arrays: DenseArrays, batch: int, params: dict, subs_file: Path | None = None,
          checkouts: dict[str, str] | None = None):
    """Build ``name`` once and yield ``{"build_cpu_s", "input_cpu_s"}``; then answer ``"round"`` with
    ``(cpu_s, counts)`` and ``"stats"`` with its memory (runs in a :class:`~scripts.bench.kit.Child`).

    ``bitmark@columns`` is bitmark built from the arrays (:meth:`~matchers.bitmark.BitMarkMatcher.add_intervals`),
    ``bitmark@file`` from the peer's subscriptions file; otherwise from the subscriptions as
    objects.  The input (the objects, or the ids and columns) is made before the clock starts and
    timed apart (``input_cpu_s``); the build includes the first match (lazy packing).
    ``name#LABEL`` runs the code of the checkout ``checkouts[LABEL]``."""
    name, _, label = name.partition("#")
    if label:
        _use_checkout((checkouts or {})[label])
    # the checkout's, when one is used:
    from matchers.bitmark.layout import Intervals as Local
    from matchers.catalog import create
    from scripts.bench.dense import read_peer_subscriptions as read_local
    from scripts.workloads import dense_events, dense_subscriptions

    base, _, source = name.partition("@")
    warm = create(base, **params)
    warm.add(dense_subscriptions(arrays._replace(attrs=arrays.attrs[:20], lo=arrays.lo[:20], hi=arrays.hi[:20])))
    warm.match(warm.encode(dense_events(arrays)[:4]))
    if source:  # the columnar path's kernels too
        warm.add_intervals(["x"], Local(*_columns(arrays, slice(0, 1))))  # type: ignore[attr-defined]  # a columnar source is bitmark's
    del warm
    matcher = create(base, **params)
    if source not in ("", "columns", "file"):
        raise ValueError(f"unknown source {source!r} (columns, file)")
    c0 = time.process_time()
    made: tuple = ()
    if source == "columns":
        made = ([f"s{i}" for i in range(len(arrays.attrs))], Local(*_columns(arrays, slice(None))))
    elif not source:
        made = (dense_subscriptions(arrays),)
    input_s = time.process_time() - c0 if made else 0.0
    c0 = time.process_time()
    if source == "file":
        ids, columns = read_local(subs_file)  # type: ignore[arg-type]  # written for it
        matcher.add_intervals(ids, Local(*columns))  # type: ignore[attr-defined]  # bitmark
    elif source:
        matcher.add_intervals(*made)  # type: ignore[attr-defined]  # bitmark
    else:
        matcher.add(*made)
    build_s = time.process_time() - c0
    made = ()
    encoded = matcher.encode(dense_events(arrays))
    c0 = time.process_time()
    matcher.match(encoded.slice(0, 1))  # lazy packing, where a matcher packs lazily
    answer: object = dict(build_cpu_s=build_s + time.process_time() - c0, input_cpu_s=input_s)
    while True:
        if (yield answer) == "stats":
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            answer = dict(memory_bytes=matcher.memory_bytes(), peak_rss_bytes=peak)
            continue
        counts = []
        c0 = time.process_time()
        for lo in range(0, encoded.n, batch):
            counts.append(np.diff(matcher.match(encoded.slice(lo, min(encoded.n, lo + batch))).offsets))
        answer = (time.process_time() - c0, np.concatenate(counts).tolist())


def _columns(arrays: DenseArrays, rows: slice) -> Intervals:
    names = tuple(f"a{j}" for j in range(arrays.events.shape[1]))
    return Intervals.of_rows(arrays.attrs[rows], arrays.lo[rows], arrays.hi[rows], names)


def run_peer(path: str, args: Sequence[str], subs: Path, events: Path, rounds: int,
             timeout_s: float) -> tuple[float, list[int], float, float | None, float | None]:
    """One run of a peer binary: ``(ms per event, counts, CPU seconds of the whole process, its
    build and ready-index CPU seconds if it prints ``build_s`` and ``initbits_s``)``."""
    ran = kit.run([path, str(subs), str(events), *args, str(rounds)], timeout_s=timeout_s).check()
    fields = {line.split()[0]: line.split()[1:] for line in ran.stdout.splitlines() if line.strip()}
    build, ready = (float(fields[f][0]) if f in fields else None for f in ("build_s", "initbits_s"))
    return float(fields["ms_per_event"][0]), [int(c) for c in fields["counts"]], ran.cpu_s, build, ready


# -- the run ------------------------------------------------------------------------------------
def bench(arrays: DenseArrays, matchers: Sequence[str], peers: dict[str, tuple[str, list[str]]], rounds: int,
          batch: int, timeout_s: float, params: dict[str, dict], checkouts: dict[str, str] | None = None) -> dict:
    """Interleaved rounds of every contestant on one workload; best ms/event in CPU time."""
    n, m = len(arrays.attrs), len(arrays.events)
    results: dict[str, dict] = {}
    children = {}
    with tempfile.TemporaryDirectory(prefix="dense-") as tmp:
        needs_files = peers or any(name.partition("#")[0].endswith("@file") for name in matchers)
        subs, events = write_peer_files(arrays, Path(tmp)) if needs_files else (None, None)
        for name in matchers:
            try:
                children[name] = kit.Child(serve, name, arrays, batch, params.get(name, {}), subs, checkouts,
                                           timeout_s=timeout_s)
                results[name] = dict(kind="project", **children[name].first, ms=[])
            except kit.ChildFailed as exc:
                results[name] = dict(kind="project", note=str(exc), ms=[])
        counts: dict[str, list[int]] = {}
        for name in peers:
            results[name] = dict(kind="peer", ms=[], process_cpu_s=[], build_cpu_s=[], ready_cpu_s=[])
        for _ in range(rounds):
            for name, child in list(children.items()):
                try:
                    cpu, got = child.ask("round")
                except kit.ChildFailed as exc:
                    results[name]["note"] = str(exc)
                    del children[name]
                    continue
                results[name]["ms"].append(1000 * cpu / m)
                counts[name] = got
            for name, (path, args) in peers.items():
                ms, got, cpu, build, ready = run_peer(path, args, subs, events, 1, timeout_s)  # type: ignore[arg-type]  # with peers the files are written
                results[name]["ms"].append(ms)
                results[name]["process_cpu_s"].append(cpu)
                results[name]["build_cpu_s"] += [] if build is None else [build]
                results[name]["ready_cpu_s"] += [] if ready is None else [ready]
                counts[name] = got
    for name, child in children.items():
        results[name].update(child.ask("stats"))
        child.close()
    reference = next(iter(counts.values()), [])
    for name, r in results.items():
        r["best_ms"] = min(r["ms"]) if r["ms"] else None
        if r["kind"] == "peer":
            for field in ("build_cpu_s", "ready_cpu_s"):
                r[field] = min(r[field]) if r[field] else None
        if name in counts:
            r["matches_per_event"] = sum(counts[name]) / m
            r["count_mismatches"] = int(sum(a != b for a, b in zip(counts[name], reference, strict=True)))
    params_out = dict(n_subs=n, n_events=m, d=arrays.events.shape[1], k=arrays.attrs.shape[1],
                      domain=arrays.domain, rounds=rounds, batch=batch)
    return dict(parameters=params_out, results=results, load_avg=[round(x, 2) for x in os.getloadavg()])


def table(run: dict, baseline: str | None) -> str:
    """Markdown rows: best ms/event, ratio ``baseline / contestant`` (above 1: faster than it)."""
    base = run["results"].get(baseline, {}).get("best_ms") if baseline else None
    lines = [f"| contestant | ms/event (best) | rounds | × {baseline or '-'} | matches/ev | count mismatches "
             "| memory MB | input CPU s | build CPU s | note |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in sorted(run["results"].items(), key=lambda kv: kv[1]["best_ms"] or float("inf")):
        best = r["best_ms"]
        ratio = f"{base / best:.2f}" if base and best else ""
        rounds = ", ".join(f"{x:.3f}" for x in r["ms"])
        memory = f"{r['memory_bytes'] / 1e6:.0f}" if "memory_bytes" in r else ""
        build = f"{r['build_cpu_s']:.2f}" if r.get("build_cpu_s") is not None else ""
        whole = f"whole process {min(r['process_cpu_s']):.2f} CPU s" if r.get("process_cpu_s") else ""
        if r.get("ready_cpu_s") is not None:
            whole += f"; ready index {r['ready_cpu_s']:.2f} CPU s"
        objects = f"{r['input_cpu_s']:.2f}" if r.get("input_cpu_s") else ""
        lines.append(f"| {name} | {best:.4f} | {rounds} | {ratio} | {r.get('matches_per_event', 0):.2f} | "
                     f"{r.get('count_mismatches', '')} | {memory} | {objects} | {build} | {r.get('note', whole)} |"
                     if best is not None else f"| {name} | | | | | | | | | {r.get('note', '')} |")
    return "\n".join(lines)


def render(record: dict) -> str:
    """The dense section of ``docs/bench.md``."""
    out = ["## Dense workload (issue 14)", "", record["command"], "",
           "The dense interval workload of REIN, TAMA and HEM (`python -m scripts.bench.dense`, see its "
           "docstring): every contestant once per round, rounds interleaved, best round in CPU time per event "
           "(single thread); ratios are against the named peer in the same run; match counts are compared per "
           "event with the first contestant's. Peers are public C++ code built outside the repository (HEM5 of "
           "shiwanghua/HEM, `-O3 -march=native`, n a compile-time constant, with a scratch driver reading these "
           "files); `be` is HEM's bit exponent.", ""]
    for run in record["runs"]:
        out += [f"### n = {run['parameters']['n_subs']:,}", "", f"Parameters: `{run['parameters']}`; load average "
                f"at the end {run['load_avg']}.", "", table(run, run.get("baseline")), ""]
    return "\n".join(out) + "\n"


def _peer(text: str) -> tuple[str, tuple[str, list[str]]]:
    name, _, rest = text.partition("=")
    path, _, args = rest.partition(":")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected name=path[:arg,arg], got {text!r}")
    return name, (path, [a for a in args.split(",") if a])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.dense", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-subs", type=int, action="append", help="repeatable (default 100,000)")
    parser.add_argument("--n-events", type=int, default=500)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--width", type=float, default=0.3)
    parser.add_argument("--zipf", type=float, default=0.0, help="Zipf exponent of the values (0: uniform)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--matchers", default="bitmark", help="comma-separated project matchers")
    parser.add_argument("--matchers-for", action="append", default=[], metavar="N:A,B",
                        help="the project matchers at n = N instead (each holds the workload: mind memory)")
    parser.add_argument("--peer", type=_peer, action="append", default=[],
                        help="NAME=PATH[:ARG,ARG] of a peer binary used at every size (repeatable)")
    parser.add_argument("--peer-for", action="append", default=[], metavar="N:NAME=PATH[:ARGS]",
                        help="a peer used only at n = N (for peers compiled for one size)")
    parser.add_argument("--checkout", action="append", default=[], metavar="LABEL=PATH",
                        help="a checkout whose code runs the matchers named NAME#LABEL (repeatable)")
    parser.add_argument("--baseline", default=None, help="contestant the ratios are against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500, help="events per match call")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--record", action="store_true", help="write docs/bench/dense.json and docs/bench.md")
    args = parser.parse_args(argv)
    runs = []
    for n in args.n_subs or [100_000]:
        matchers = dict(spec.split(":", 1) for spec in args.matchers_for).get(str(n), args.matchers).split(",")
        peers = dict(args.peer)
        for spec in args.peer_for:
            size, _, rest = spec.partition(":")
            if int(size) == n:
                peers.update([_peer(rest)])
        arrays = dense_arrays(n, args.n_events, args.d, args.k, args.width, zipf_alpha=args.zipf, seed=args.seed)
        run = bench(arrays, matchers, peers, args.rounds, args.batch, args.timeout, {},
                    dict(spec.split("=", 1) for spec in args.checkout))
        run["parameters"].update(width=args.width, zipf=args.zipf, seed=args.seed)
        run["baseline"] = args.baseline
        print(f"\nn = {n:,}: {run['parameters']}, load {run['load_avg']}\n{table(run, args.baseline)}", flush=True)
        runs.append(run)
    if args.record:
        record = dict(command="`python -m scripts.bench.dense " + " ".join(sys.argv[1:] if argv is None else argv)
                      + "`", date=time.strftime("%Y-%m-%d"), runs=runs)
        kit.save("dense", record)
        kit.write_section(kit.DOCS / "bench.md", render(record), "<!-- bench:dense -->", "<!-- /bench:dense -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

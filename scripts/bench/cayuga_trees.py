"""The Cayuga engine in process over several code trees: events per CPU second, A/B.

Issue 15 asks for 50,000 events/s in process with 100,000 subscriptions, measured next to
the code before the change in the same run. Each round runs the engine of every tree given
(``--tree label=PATH``, checkouts of this project such as a git worktree of ``main``) in its
own process, the order of the trees alternating between rounds; each process imports its
tree's engine and the workload of :mod:`scripts.bench.cayuga` (the stock ticker, the
``indexed+merged`` engine, subscriptions built as algebra), registers the subscriptions,
runs ``--warmup`` events, then times the next events (``time.process_time``). The trees must
report the same number of matches, else the run fails.

``--collector`` is the cyclic garbage collector while the events run: ``on`` as in
:mod:`scripts.bench.cayuga` (a full collection after the registration, then the
interpreter's thresholds), ``paused`` as in the service's tasks (the subscriptions frozen
out of the collector, the collector off while the events run; see
:mod:`streaming.patterns.queries`).

``--batch N`` feeds the events ``N`` at a time through ``Engine.process_batch`` (1: one
``Engine.process`` call per event); ``--engine label=JSON`` gives a tree's ``Engine`` keyword
arguments, so that one tree can run twice, e.g. with and without the flat engine.

Usage::

    python -m scripts.bench.cayuga_trees --tree main=/path/a --tree this=. --rounds 3
    python -m scripts.bench.cayuga_trees --tree flat=. --tree python=. --engine 'flat={"flat": true}' --batch 512

Prints one JSON line per run and a summary; ``--json PATH`` writes the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from scripts.bench import kit

CHILD = r"""
import gc, json, os, sys, time
try:
    from scripts.tickers import expr, make_events, make_subscriptions
except ImportError:  # a tree from before the workload moved out of the bench
    from scripts.bench.cayuga import expr, make_events, make_subscriptions
from matchers.cayuga.engine import Engine

n, n_events, warmup, symbols, seed, collector, batch, kwargs = json.loads(sys.argv[1])
events = make_events(n_events, symbols, seed)
subs = make_subscriptions(n, symbols, seed + n)
eng = Engine(**kwargs)


def feed(chunk):
    if batch > 1:
        return sum(len(eng.process_batch(chunk[i:i + batch])) for i in range(0, len(chunk), batch))
    return sum(len(eng.process(e)) for e in chunk)


t = time.process_time()
for i, sub in enumerate(subs):
    eng.add(f"q{i}", expr(*sub))
gc.collect()
register_s = time.process_time() - t
if collector == "paused":
    gc.freeze()
    gc.disable()
warm = feed(events[:warmup])
young = [s["collections"] for s in gc.get_stats()]
t = time.process_time()
matches = feed(events[warmup:])
cpu = time.process_time() - t
young = [s["collections"] - y for s, y in zip(gc.get_stats(), young)]
print("RESULT " + json.dumps({"events": n_events - warmup, "cpu_s": cpu, "events_per_s": (n_events - warmup) / cpu,
                              "matches": matches, "warmup_matches": warm, "instances": eng.instances,
                              "register_s": register_s, "collections": young}))
"""


def run_tree(tree: Path, spec: list) -> dict:
    """One process over ``tree``'s code; its result with the load average when it ended."""
    ran = kit.run([sys.executable, "-c", CHILD, json.dumps(spec)], cwd=tree, env=kit.tree_env(tree, one_thread=False))
    return {**ran.check().result_line(), "load": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.cayuga_trees", description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="label=PATH of a checkout (repeatable, in order)")
    ap.add_argument("--subscriptions", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=40_000, help="events in all, the warm-up included")
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--symbols", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--collector", choices=("on", "paused"), default="on")
    ap.add_argument("--batch", type=int, default=1,
                    help="events per call: 1 calls Engine.process per event, more Engine.process_batch")
    ap.add_argument("--engine", action="append", default=[],
                    help="label=JSON: keyword arguments of that tree's Engine, e.g. 'flat={\"flat\": true}'")
    ap.add_argument("--json", type=Path, help="write the runs there")
    args = ap.parse_args(argv)
    if len(args.tree) < 1 or any("=" not in t for t in args.tree):
        ap.error("give --tree label=PATH at least once")
    trees = {label: Path(path).resolve() for label, path in (t.split("=", 1) for t in args.tree)}
    kwargs = {label: json.loads(text) for label, text in (e.split("=", 1) for e in args.engine)}
    spec = [args.subscriptions, args.events, args.warmup, args.symbols, args.seed, args.collector, args.batch]
    print(f"load at start {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    runs = []
    for rnd in range(args.rounds):
        for label in kit.interleaved(list(trees), rnd):
            r = {"round": rnd, "tree": label, "path": str(trees[label]), "engine": kwargs.get(label, {}),
                 **run_tree(trees[label], [*spec, kwargs.get(label, {})])}
            runs.append(r)
            print(json.dumps(r), flush=True)
    counts = {(r["matches"], r["warmup_matches"]) for r in runs}
    for label in trees:
        rates = [r["events_per_s"] for r in runs if r["tree"] == label]
        print(f"{label}: best {max(rates):,.0f} events/s, rounds {', '.join(f'{x:,.0f}' for x in rates)}")
    print(f"matches equal: {len(counts) == 1} ({sorted(counts)}); load at end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"spec": spec, "trees": {k: str(v) for k, v in trees.items()}, "runs": runs},
                                        indent=1))
    if len(counts) != 1:
        print("the trees reported different matches", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

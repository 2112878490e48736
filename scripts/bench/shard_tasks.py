"""CPU per event of a match task over a group of shards, in one process: before and after one encoding per task.

``python -m scripts.bench.shard_tasks [--subs 100000] [--events 20000] [--shards 1 2 4 8]
[--rounds 3] [--route-by a0 [--route-spread 1]] [--tree main=/work/main --tree this=.]``

Fabret W1 (``--subs`` subscriptions in all, split into ``--shards`` shards by
:func:`streaming.executor_cache.shard_of`, matcher ``dynamic``), ``--events`` W1 events as
JSON records in Arrow batches of ``--batch``. Two measures, each the best of ``--rounds``
in CPU seconds of this process (``time.process_time``), in µs per event:

* **task**: :func:`streaming.match.executor.match_partition` over the batches for all the
  shards (the shards' indexes put in the worker's cache beforehand; a counting ``produce``, no
  Kafka, no Spark): read, encode, match and notify, whatever the code tree does;
* **encode+match** (only in a tree with :mod:`matchers.translate`), old and new interleaved
  in each round: *per shard*, each batch encoded against each shard's own dictionary
  (:func:`~matchers.events.encode_json`, as before) and matched; *per task*, encoded once against a
  common dictionary, then translated and matched per shard.

With ``--route-by`` (:mod:`streaming.routing`, ``match.route_by``), the task is measured twice
per round, interleaved: **task** with the subscriptions split by id as above, and **routed**
with them split by their route value (``--route-spread``) and each shard matched only on the
events whose value hashes into it; also the CPU of finding the batch's route values
(``routes_us``, per event) and of choosing a shard's events (``choose_us``, per event and
shard). The encode+match measures are left out then.

With ``--tree label=path`` (several), the run is repeated in a process per code tree (this
file run with that tree's library on the path: it calls what both trees have), the trees
interleaved over ``--tree-rounds`` rounds, and the table compares them. Every figure is
printed with the load average.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scripts.bench import kit


def _batches(n_events: int, batch: int, seed: int) -> list:
    import orjson
    import pyarrow as pa

    from scripts.bench.feed import workload_events

    raws = [orjson.dumps({"id": f"e{i}", **e}) for i, e in enumerate(workload_events(n_events, seed))]
    out = []
    for lo in range(0, len(raws), batch):
        part = raws[lo:lo + batch]
        n = len(part)
        out.append(pa.RecordBatch.from_arrays(
            [pa.array(part, pa.binary()), pa.array(["events"] * n, pa.string()), pa.array([0] * n, pa.int32()),
             pa.array(range(lo, lo + n), pa.int64()), pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC"))],
            names=["value", "topic", "partition", "offset", "timestamp"]))
    return out


def _shards(subs: list, k: int, route: Any = None) -> list:
    """``k`` dynamic matchers of ``subs`` split by id, or by route value with ``route`` (each
    then knowing its unrouted ids, as :func:`streaming.routing.track_build` leaves them)."""
    from matchers.catalog import create
    from streaming.executor_cache import shard_of

    matchers = [create("dynamic") for _ in range(k)]
    parts: list[list] = [[] for _ in range(k)]
    if route is None:
        for s in subs:
            parts[shard_of(s.id, k)].append(s)
    else:
        for s, shard in zip(subs, _routed_shards(subs, k, route), strict=True):
            parts[shard].append(s)
    for m, part in zip(matchers, parts, strict=True):
        m.add(part)
    if route is not None:
        from streaming import routing

        for m, part in zip(matchers, parts, strict=True):
            hashes = _hashes(part, route)
            setattr(m, routing.UNROUTED, {s.id for s, h in zip(part, hashes.tolist(), strict=True) if h < 0})
    return matchers


def _hashes(subs: list, route: Any) -> Any:
    import pyarrow as pa

    from matchers.packed import pack
    from streaming import routing

    return routing.required_hashes(pa.array([pack(s) for s in subs], pa.binary()), route.attr)


def _routed_shards(subs: list, k: int, route: Any) -> list[int]:
    import zlib

    import numpy as np

    from streaming import routing

    crcs = np.array([zlib.crc32(s.id.encode()) for s in subs], np.uint32)
    keys = routing.shard_keys(crcs, _hashes(subs, route), route.spread)
    return (keys % np.uint32(k)).astype(np.int64).tolist()


def measure(n_subs: int, n_events: int, shard_counts: Sequence[int], rounds: int, batch: int, seed: int,
            route_by: str = "", route_spread: int = 1) -> dict:
    """The figures of one code tree (see the module docstring)."""
    from streaming import executor_cache
    from streaming.executor_cache import CachedIndex, IndexSpec
    from streaming.match.executor import match_partition
    from streaming.match.tasks import BatchContext
    from streaming.notifications import PAYLOAD_EVENT
    from streaming.records import DEFAULT_LIMITS

    kit.one_thread()
    from scripts.bench.feed import workload_subscriptions

    subs = list(workload_subscriptions(n_subs, seed))
    batches = _batches(n_events, batch, seed + 1)
    try:
        from matchers import translate
    except ImportError:
        translate = None  # type: ignore[assignment]  # a tree from before one encoding per task
    route = None
    if route_by:
        from streaming.routing import Routing

        route = Routing(route_by, route_spread)
    out: dict[str, Any] = {}
    for k in shard_counts:
        executor_cache.clear()
        tasks: dict[str, Any] = {}
        sent: dict[str, list[int]] = {}
        for label, how in (("task_us", None), ("routed_us", route)) if route is not None else (("task_us", None),):
            registry = f"bench-{label}"
            matchers = _shards(subs, k, how)
            spec = IndexSpec(registry, "dynamic", 0, shards=k, routing=how)
            for i, m in enumerate(matchers):
                executor_cache._CACHE[IndexSpec(registry, "dynamic", 0, shard=i, shards=k).key] = CachedIndex(m, 0)
            ctx = BatchContext(0, time.time(), spec, "notifications", "errors", PAYLOAD_EVENT, "id", "valid_until",
                               3600.0, None, DEFAULT_LIMITS)  # type: ignore[arg-type]  # no Kafka: produce is given
            count = sent[label] = [0]

            def produce(rbs, count=count) -> int:
                n = sum(rb.num_rows for rb in rbs)
                count[0] += n
                return n

            def task(ctx=ctx, k=k, produce=produce) -> None:
                for _ in match_partition(iter(batches), ctx, produce, tuple(range(k))):
                    pass

            task()  # warm-up: kernels, translations
            tasks[label] = task
        best = dict.fromkeys(tasks, float("inf"))
        for r in range(rounds):
            for label in kit.interleaved(list(tasks), r):
                best[label] = min(best[label], kit.best_cpu(1, tasks[label]))
        row: dict[str, Any] = {label: 1e6 * v / n_events for label, v in best.items()}
        row.update({label.replace("_us", "_records"): c[0] // (rounds + 1) for label, c in sent.items()})
        if route is not None:
            row.update(_route_costs(batches, route, k, rounds))
        elif translate is not None:
            row.update(_encode_match(matchers, batches, rounds, translate))
        row["load_avg"] = kit.load_avg()
        out[str(k)] = row
        print(f"{k} shard(s): " + ", ".join(f"{key} {v:.2f}" if isinstance(v, float) else f"{key} {v}"
                                           for key, v in row.items()), flush=True)
    return out


def _route_costs(batches: list, route: Any, k: int, rounds: int) -> dict[str, float]:
    """µs per event of the batch's route values, and per event and shard of choosing its events."""
    from functools import partial

    from matchers.events import encode, encode_json
    from streaming import executor_cache
    from streaming.routing import EventRoutes

    common = executor_cache.common()
    flat = partial(encode, dictionary=common, known_only=True)
    encoded = [encode_json([v or b"" for v in rb.column("value").to_pylist()], common, lambda i: None,
                           keys=("id", "valid_until"), encode_flat=flat).batch for rb in batches]
    n = sum(b.n for b in encoded)
    attr = common.attr_ids.get(route.attr, -1)
    found = [EventRoutes.of(b, attr) for b in encoded]
    routes_s = kit.best_cpu(rounds, lambda: [EventRoutes.of(b, attr) for b in encoded])
    choose_s = kit.best_cpu(rounds, lambda: [r.events_of(s, k, route.spread) for r in found for s in range(k)])
    return {"routes_us": 1e6 * routes_s / n, "choose_us": 1e6 * choose_s / n / k}


def _encode_match(matchers: list, batches: list, rounds: int, translate: Any) -> dict[str, float]:
    """µs per event of encode+match: per shard (each its own dictionary) and per task (one
    common encoding, translated), interleaved."""
    from functools import partial

    from matchers.events import encode, encode_json

    raws = [[v or b"" for v in rb.column("value").to_pylist()] for rb in batches]
    n = sum(map(len, raws))
    common = translate.common_dictionary()
    translations = [translate.Translation(common, m.dictionary) for m in matchers]
    for t in translations:
        t.update()
    flat = partial(encode, dictionary=common, known_only=True)

    def per_shard() -> None:
        for part in raws:
            for m in matchers:
                m.match(encode_json(part, m.dictionary, lambda i: None, keys=("id", "valid_until"),
                                    encode_flat=m.encode).batch)

    def per_task() -> None:
        for part in raws:
            batch = encode_json(part, common, lambda i: None, keys=("id", "valid_until"), encode_flat=flat).batch
            for m, t in zip(matchers, translations, strict=True):
                m.match(t.apply(batch))

    def encode_only() -> None:
        for part in raws:
            encode_json(part, common, lambda i: None, keys=("id", "valid_until"), encode_flat=flat)

    def translate_only() -> None:
        for part in batches_common:
            for t in translations:
                t.apply(part)

    per_task()
    per_shard()
    batches_common = [encode_json(part, common, lambda i: None, keys=("id", "valid_until"), encode_flat=flat).batch
                      for part in raws]
    best = {"per_shard_us": float("inf"), "per_task_us": float("inf")}
    for r in range(rounds):
        for name in kit.interleaved(["per_shard_us", "per_task_us"], r):
            best[name] = min(best[name], kit.best_cpu(1, per_shard if name == "per_shard_us" else per_task))
    best["encode_us"] = kit.best_cpu(rounds, encode_only)
    best["translate_us"] = kit.best_cpu(rounds, translate_only)
    return {key: 1e6 * v / n for key, v in best.items()}


def _compare(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Run this module in each ``--tree`` (its library on the path), the trees interleaved, and print the table."""
    import sys
    import tempfile

    trees = dict(spec.partition("=")[::2] for spec in args.tree)
    drop = {i + 1 for i, a in enumerate(argv) if a in ("--tree", "--tree-rounds")}
    rest = [a for i, a in enumerate(argv) if i not in drop and a not in ("--tree", "--tree-rounds")]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.tree_rounds):
            for label in kit.interleaved(list(trees), rnd):
                result = Path(tmp) / f"{label}-{rnd}.json"
                ran = kit.run([sys.executable, str(Path(__file__).resolve()), *rest, "--result", str(result)],
                              cwd=trees[label], env=kit.tree_env(trees[label]))
                if ran.returncode != 0 or not result.exists():
                    raise RuntimeError(f"{label} failed ({ran.returncode}):\n{ran.stderr[-3000:]}")
                runs.append({"tree": label, "round": rnd, "result": json.loads(result.read_text())})
                print(f"round {rnd} {label} ({trees[label]}): {ran.cpu_s:.0f} s CPU, load {kit.load_avg()}\n"
                      f"{ran.stdout.strip()}", flush=True)
    print(f"W1, {args.subs:,} subscriptions in all, {args.events:,} events in batches of {args.batch:,}, "
          f"matcher dynamic, best of {args.rounds} rounds per process, {args.tree_rounds} process rounds per tree")
    head = ["shards", *[f"{label}: task µs/event (load)" for label in trees]]
    rows = []
    for k in args.shards:
        cells = [str(k)]
        for label in trees:
            got = [r["result"][str(k)] for r in runs if r["tree"] == label]
            cells.append(f"{min(g['task_us'] for g in got):.1f} ({max(g['load_avg'][0] for g in got):.1f})")
        rows.append(cells)
    print(kit.table(head, rows, "r" * len(head)))
    for r in runs:
        for k, row in r["result"].items():
            if "per_shard_us" in row:
                print(f"{r['tree']} round {r['round']}, {k} shard(s): encode+match per shard {row['per_shard_us']:.1f}, "
                      f"per task {row['per_task_us']:.1f} µs/event (encode {row['encode_us']:.2f}, translate "
                      f"{row['translate_us']:.2f} for all shards); load {row['load_avg']}")


def main(argv: Sequence[str] | None = None) -> int:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--subs", type=int, default=100_000)
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=5_000)
    p.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--route-by", default="", help="also measure the subscriptions routed by this attribute")
    p.add_argument("--route-spread", type=int, default=1)
    p.add_argument("--tree", action="append", default=[], help="label=path of a code tree to compare (several)")
    p.add_argument("--tree-rounds", type=int, default=2)
    p.add_argument("--result", default=None, help="write the figures as JSON here (for --tree runs)")
    args = p.parse_args(argv)
    if args.tree:
        _compare(args, argv)
        return 0
    print(f"W1, {args.subs:,} subscriptions in all, {args.events:,} events in batches of {args.batch:,}, "
          f"matcher dynamic, shards {args.shards}; load {kit.load_avg()}", flush=True)
    res = measure(args.subs, args.events, args.shards, args.rounds, args.batch, args.seed, args.route_by,
                  args.route_spread)
    if args.result:
        Path(args.result).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

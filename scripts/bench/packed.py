"""What storing each expression packed (:mod:`matchers.packed`) costs and saves: an executor's
shard built from the registry's files, before (each stored record parsed again) and after
(each packed subscription unpacked), the parse-time cost of packing, and the file bytes.

``python -m scripts.bench.packed [--subs 100000] [--rounds 3] [--catch-up N [--batch 1000] [--matcher auto]]``

``--subs`` Fabret W1 subscriptions (as :mod:`scripts.bench.feed` writes their records, the JSON
form) are parsed by :func:`~streaming.registry_columns.parse.parse_records` and stored in a
:class:`~streaming.registry_columns.ColumnRegistry` of one shard, with a snapshot. Then, in
CPU seconds (``time.process_time``, best of ``--rounds``): reading the shard
(:func:`~streaming.registry_columns.read_shard`) and making its subscriptions, by parsing the
records again or by :func:`~streaming.registry_columns.shards.subscriptions`; packing alone
(:func:`matchers.packed.pack` of each parsed subscription); and the snapshot part's bytes per
subscription with and without the ``packed`` column. Figures, not assertions.

``--catch-up N`` times a worker's shard instead (:mod:`streaming.registry_columns.shards`):
:func:`~streaming.registry_columns.shards.build_shard` of the ``--subs`` (``--matcher``, CPU
us per subscription; then its steps apart, :func:`build_parts`, with the publishing for the
machine's other workers), then, per round, ``N`` changes drawn as :func:`scripts.bench.e2e.churn_records`
draws them (a third replace, a third delete, a third new ids) recorded as versions of ``--batch``
records each and applied one version at a time by
:func:`~streaming.registry_columns.shards.catch_up` (CPU us per change, best of ``--rounds``);
then the last round's steps apart on a matcher built again: reading the net changes, unpacking,
removing every changed id, adding.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import orjson
import pyarrow as pa

from scripts.bench import kit

if TYPE_CHECKING:
    from matchers.base import Matcher
    from streaming.registry_columns import ChangeBatch


def main(argv: list[str] | None = None) -> None:
    from matchers.expr import DEFAULT_MAX_TERMS
    from matchers.packed import pack
    from scripts.bench.feed import subscription_records, workload_subscriptions
    from streaming.records import default_parser
    from streaming.registry_columns import ColumnRegistry, read_shard
    from streaming.registry_columns import files as rfiles
    from streaming.registry_columns.parse import parse_records
    from streaming.registry_columns.shards import subscriptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--catch-up", type=int, default=0, help="changes per round (0: the packing figures)")
    ap.add_argument("--batch", type=int, default=1_000, help="change records per version (--catch-up)")
    ap.add_argument("--matcher", default="auto", help="the shard's matcher (--catch-up)")
    args = ap.parse_args(argv)
    if args.catch_up:
        catch_up_figures(args.subs, args.catch_up, args.batch, args.rounds, args.matcher)
        return
    subs = list(workload_subscriptions(args.subs, seed=1))
    batch = _record_batch(list(subscription_records(subs)), 0)
    n = batch.num_rows
    parse = default_parser()
    parsed = parse_records(batch)  # the service's call: the fast path where a record allows
    cpu_parse = kit.best_cpu(args.rounds, lambda: parse_records(batch))
    cpu_pack = kit.best_cpu(args.rounds, lambda: [pack(s) for s in subs])
    with tempfile.TemporaryDirectory() as tmp:
        reg = ColumnRegistry(tmp)
        reg.apply(0, _changes(parsed), 1.0)
        reg.snapshot()
        part = reg.directory.sub(rfiles.SNAPSHOTS).read(rfiles.part_name(1, 0, 1))
        table = read_shard(tmp, 1)

        def reparse() -> list:
            rows = read_shard(tmp, 1)
            out = []
            for sub_id, record in zip(rows.column("id").to_pylist(), rows.column("record").to_pylist(), strict=True):
                obj = {k: v for k, v in orjson.loads(record).items() if k not in ("op", "target")}
                obj["id"] = sub_id
                out.append(parse(obj, DEFAULT_MAX_TERMS))
            return out

        before = kit.best_cpu(args.rounds, reparse)
        after = kit.best_cpu(args.rounds, lambda: list(subscriptions(read_shard(tmp, 1))))
        assert reparse() == list(subscriptions(table))
    without = len(rfiles.to_ipc(table.drop_columns(["packed"])))
    print(f"{n:,} Fabret W1 subscriptions, CPU s best of {args.rounds}:")
    print(f"  shard from storage: parse again {before:.2f} s ({before / n * 1e6:.0f} us/sub), "
          f"unpack {after:.2f} s ({after / n * 1e6:.1f} us/sub): {before / after:.1f}x")
    print(f"  parse_records {cpu_parse / n * 1e6:.0f} us/record (packing included; the common JSON form takes "
          f"fastparse); matchers.packed.pack of a parsed subscription {cpu_pack / n * 1e6:.1f} us (the general path's)")
    print(f"  snapshot part (zstd): {len(part) / n:.0f} B/sub with packed, {without / n:.0f} B/sub without; "
          f"the packed column is {table.column('packed').nbytes / n:.0f} B/sub uncompressed")


def _record_batch(records: list[tuple[bytes, bytes]], start: int) -> pa.RecordBatch:
    """``(key, value)`` records as the Kafka source's columns, at offsets from ``start``."""
    keys, values = zip(*records, strict=True)
    n = len(values)
    return pa.RecordBatch.from_pydict({"key": list(keys), "value": list(values), "topic": ["subs"] * n,
                                       "partition": [0] * n, "offset": list(range(start, start + n))})


def _changes(parsed: pa.RecordBatch) -> ChangeBatch:
    """Parsed rows (:func:`~streaming.registry_columns.parse.parse_records`) as the registry's changes."""
    from streaming.registry_columns import ChangeBatch

    cols = {c: parsed.column(c) for c in ("id", "op", "kind", "record", "expires", "predicates", "packed")}
    return ChangeBatch.of(cols["id"], cols["op"].to_numpy(), cols["kind"].to_numpy(), cols["record"],
                          cols["expires"].to_numpy(zero_copy_only=False), None, cols["predicates"].to_numpy(),
                          cols["packed"])


def _registry_batch(records: list[tuple[bytes, bytes]], start: int) -> ChangeBatch:
    """The records parsed as the service parses them, as a :class:`ChangeBatch`."""
    from streaming.registry_columns.parse import parse_records

    return _changes(parse_records(_record_batch(records, start)))


def catch_up_figures(n_subs: int, n_changes: int, batch: int, rounds: int, name: str = "auto") -> None:
    """Print build_shard's CPU us per subscription and catch_up's per change (see the module docstring)."""
    import gc

    from matchers.catalog import create
    from scripts.bench.e2e import churn_records
    from scripts.bench.feed import subscription_records, workload_subscriptions
    from scripts.bench.kit import load_avg
    from streaming.registry_columns import EXPRESSION, UPSERT, ColumnRegistry
    from streaming.registry_columns.shards import (
        build_shard,
        catch_up,
        changes_after,
        subscriptions,
    )

    records = list(subscription_records(workload_subscriptions(n_subs, seed=1)))
    changes, _ = churn_records(n_subs, n_changes * rounds, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        reg = ColumnRegistry(tmp, snapshot_every=1 << 30)
        batch_ids = iter(range(1, 1 << 30))
        for i in range(0, n_subs, 50_000):
            reg.apply(next(batch_ids), _registry_batch(records[i:i + 50_000], i), 1.0)
        reg.snapshot()
        base = reg.version
        versions = [base]
        for i in range(0, len(changes), batch):
            versions.append(reg.apply(next(batch_ids), _registry_batch(changes[i:i + batch], n_subs + i), 2.0).version)
        t0 = time.process_time()
        matcher = build_shard(tmp, base, 0, 1, lambda: create(name))
        build = time.process_time() - t0
        gc.collect()  # the collection the build put off (the service's workers collect between tasks)
        parts = build_parts(tmp, base, lambda: create(name))
        per_round = len(versions[1:]) // rounds
        totals, steps = [], np.zeros(4)
        for r in range(rounds):
            vs = versions[r * per_round:(r + 1) * per_round + 1]
            twin = build_shard(tmp, vs[0], 0, 1, lambda: create(name)) if r == rounds - 1 else None
            gc.collect()
            t0 = time.process_time()
            for a, b in zip(vs, vs[1:], strict=False):
                catch_up(matcher, tmp, a, b, 0, 1)
            totals.append(time.process_time() - t0)
            if twin is None:
                continue
            for a, b in zip(vs, vs[1:], strict=False):  # the steps apart, on the copy
                t = [time.process_time()]
                net = changes_after(tmp, a, b, 0, 1)
                ups = (net.column("op").to_numpy() == UPSERT) & (net.column("kind").to_numpy() == EXPRESSION)
                t.append(time.process_time())
                subs = list(subscriptions(net))
                t.append(time.process_time())
                twin.remove(net.column("id").to_pylist())  # replaced ids too: apart from their insert
                t.append(time.process_time())
                twin.add(subs)
                t.append(time.process_time())
                steps += np.diff(t)
                assert len(subs) == int(ups.sum())
    load = load_avg()
    us = min(totals) / n_changes * 1e6
    print(f"{n_subs:,} Fabret W1 subscriptions, {name} matcher ({matcher.describe()['matcher']}); load: {load}")
    print(f"  build_shard {build / n_subs * 1e6:.1f} us/sub ({build:.2f} s); apart (us/sub): "
          + ", ".join(f"{step} {v / n_subs * 1e6:.1f}" for step, v in parts.items()))
    print(f"  catch_up {n_changes:,} changes in versions of {batch:,}: {us:.1f} us/change (CPU, best of "
          f"{rounds}: {', '.join(f'{t / n_changes * 1e6:.1f}' for t in totals)})")
    print("  apart (us/change): " + ", ".join(f"{step} {v / n_changes * 1e6:.1f}" for step, v in
                                             zip(("read/net", "unpack", "remove", "add"), steps, strict=True)))


def build_parts(directory: str, version: int, make: Callable[[], Matcher]) -> dict[str, float]:
    """CPU seconds of each step of :func:`~streaming.registry_columns.shards.build_shard` (of shard
    0 of 1 at ``version``) and of sharing the result with the machine's other workers
    (:func:`streaming.shared_index.publish`, then :func:`~streaming.shared_index.load`), as the
    service's workers run them (no cyclic collection meanwhile)."""
    import gc

    from matchers.collector import no_cyclic_gc
    from streaming import shared_index
    from streaming.registry_columns import read_shard
    from streaming.registry_columns.shards import expressions, subscriptions, table_of

    gc.collect()
    key = shared_index.SharedKey(f"bench-packed-{os.getpid()}", directory, "bench")
    with no_cyclic_gc():
        t = [time.process_time()]
        rows = expressions(read_shard(directory, version))
        t.append(time.process_time())
        subs = list(subscriptions(rows))
        t.append(time.process_time())
        matcher = make()
        matcher.add(subs)
        t.append(time.process_time())
        matcher.hold(table_of(matcher, rows))
        t.append(time.process_time())
        try:
            path = shared_index.publish(matcher, key, version)
            t.append(time.process_time())
            shared_index.load(path)
            t.append(time.process_time())
        finally:
            shared_index.remove_application(key.app_id)
    return dict(zip(("read", "unpack", "add", "hold", "publish", "load"), np.diff(t).tolist(), strict=True))


if __name__ == "__main__":
    main()

"""What storing each expression packed (:mod:`matchers.packed`) costs and saves: an executor's
shard built from the registry's files, before (each stored record parsed again) and after
(each packed subscription unpacked), the parse-time cost of packing, and the file bytes.

``python -m scripts.bench.packed [--subs 100000] [--rounds 3] [--catch-up N [--batch 1000] [--matcher auto]]
[--build [--shards 1 4] [--matcher dynamic]] [--remove N [--batch 1000] [--matcher dynamic]]
[--matched N [--events 10000] [--wide 120]]``

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
then the last round's steps apart on a matcher built again, as ``catch_up`` takes them: reading
the net changes, their expression rows as a packed table (:func:`~streaming.registry_columns.shards.packed_rows`),
removing every changed id (the bulk :meth:`Matcher.remove`, by key where the index deletes so;
the replaced ids' removal, which ``add_packed`` does itself in ``catch_up``, counted here),
:meth:`Matcher.add_packed` of the rows.

``--remove N`` times deletes from a matcher that deletes by key (``--matcher``, default
``dynamic``) of the ``--subs`` (added as packed rows, a shard's form): per round, ``N`` random ids
removed in calls of ``--batch`` and added again (untimed), once by the bulk remove and once by
the per-id remove it replaced (:func:`per_id_remove`), and for the dynamic matcher once by the
bulk remove with the ``_unmark`` it replaced (:func:`pairwise_unmark`), interleaved; CPU us per
removed id, best of ``--rounds``, the load printed.

``--matched N`` times :func:`streaming.notifications.matched` of ``--events`` events of ``--wide``
matches each, keys drawn from ``N`` ids held packed (a :class:`~matchers.subtable.SubscriptionTable`,
as a shard built from the registry holds them): each distinct key's id read by
:meth:`~matchers.subtable.SubscriptionTable.id_of` in turn (before) or all at once by
:meth:`~matchers.subtable.SubscriptionTable.ids_at` (after), interleaved; CPU us per
notification, best of ``--rounds``, the load printed.

``--build`` times the build of the ``--subs`` split into each of ``--shards`` shards, every
shard built one after the other in this process, before (:meth:`Matcher.add` of the unpacked
subscriptions) and after (:func:`~streaming.registry_columns.shards.build_shard`:
:meth:`Matcher.add_packed` of the rows) interleaved over ``--rounds`` rounds (CPU seconds, the
load printed with each), the two matchers checked equal on a few W1 events; then the steps
of one shard's build apart, both ways (:func:`build_steps`).
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
    ap.add_argument("--matcher", default="auto", help="the shard's matcher (--catch-up, --build)")
    ap.add_argument("--build", action="store_true", help="shards built before and after add_packed")
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 4], help="shard counts (--build)")
    ap.add_argument("--remove", type=int, default=0, help="ids removed per round, bulk vs per-id remove")
    ap.add_argument("--matched", type=int, default=0, help="ids held (matched(): bulk ids_of vs id_of per key)")
    ap.add_argument("--events", type=int, default=10_000, help="events (--matched)")
    ap.add_argument("--wide", type=int, default=120, help="matches per event (--matched)")
    args = ap.parse_args(argv)
    if args.matched:
        matched_figures(args.matched, args.events, args.wide, args.rounds)
        return
    if args.remove:
        remove_figures(args.subs, args.remove, args.batch, args.rounds,
                       "dynamic" if args.matcher == "auto" else args.matcher)
        return
    if args.build:
        build_figures(args.subs, args.shards, args.rounds, args.matcher)
        return
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
        expressions,
        packed_rows,
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
            for a, b in zip(vs, vs[1:], strict=False):  # catch_up's steps apart, on the copy
                t = [time.process_time()]
                net = changes_after(tmp, a, b, 0, 1)
                ups = (net.column("op").to_numpy() == UPSERT) & (net.column("kind").to_numpy() == EXPRESSION)
                t.append(time.process_time())
                joining = packed_rows(expressions(net))
                t.append(time.process_time())
                twin.remove(net.column("id").to_pylist())  # bulk, _delete_keys; replaced ids too (add_packed's part)
                t.append(time.process_time())
                twin.add_packed(joining)
                t.append(time.process_time())
                steps += np.diff(t)
                assert len(joining) == int(ups.sum())
            assert len(twin) == len(matcher)  # both at the round's last version
    load = load_avg()
    us = min(totals) / n_changes * 1e6
    print(f"{n_subs:,} Fabret W1 subscriptions, {name} matcher ({matcher.describe()['matcher']}); load: {load}")
    print(f"  build_shard {build / n_subs * 1e6:.1f} us/sub ({build:.2f} s); apart (us/sub): "
          + ", ".join(f"{step} {v / n_subs * 1e6:.1f}" for step, v in parts.items()))
    print(f"  catch_up {n_changes:,} changes in versions of {batch:,}: {us:.1f} us/change (CPU, best of "
          f"{rounds}: {', '.join(f'{t / n_changes * 1e6:.1f}' for t in totals)})")
    print("  apart (us/change): " + ", ".join(f"{step} {v / n_changes * 1e6:.1f}" for step, v in
                                             zip(("read/net", "packed rows", "remove", "add_packed"), steps,
                                                 strict=True)))


def _registry(directory: str, n_subs: int) -> int:
    """A registry of ``n_subs`` W1 subscriptions (records parsed as the service parses them) in
    ``directory``, with a snapshot; its version."""
    from scripts.bench.feed import subscription_records, workload_subscriptions
    from streaming.registry_columns import ColumnRegistry

    records = list(subscription_records(workload_subscriptions(n_subs, seed=1)))
    reg = ColumnRegistry(directory, snapshot_every=1 << 30)
    for batch, i in enumerate(range(0, n_subs, 50_000), 1):
        reg.apply(batch, _registry_batch(records[i:i + 50_000], i), 1.0)
    reg.snapshot()
    return reg.version


def build_figures(n_subs: int, shard_counts: list[int], rounds: int, name: str) -> None:
    """Print the CPU seconds of building every shard before and after add_packed (see the module docstring)."""
    import gc

    from matchers.catalog import create
    from scripts.bench.feed import workload_events
    from streaming.registry_columns import read_shard
    from streaming.registry_columns.shards import build_shard, expressions, subscriptions

    def before(directory: str, version: int, k: int) -> list:
        out = []
        for shard in range(k):
            m = create(name)
            m.add(subscriptions(expressions(read_shard(directory, version, shard, k))))
            out.append(m)
        return out

    def after(directory: str, version: int, k: int) -> list:
        return [build_shard(directory, version, shard, k, lambda: create(name)) for shard in range(k)]

    ways = {"before": before, "after": after}
    events = [dict(e) for e in workload_events(200, seed=2)]
    with tempfile.TemporaryDirectory() as tmp:
        version = _registry(tmp, n_subs)
        print(f"{n_subs:,} Fabret W1 subscriptions, matcher {name}, CPU s of building every shard in turn; "
              f"load {kit.load_avg()}", flush=True)
        for k in shard_counts:
            best = {way: float("inf") for way in ways}
            for r in range(rounds):
                for way in kit.interleaved(list(ways), r):
                    gc.collect()
                    t0 = time.process_time()
                    built = ways[way](tmp, version, k)
                    cpu = time.process_time() - t0
                    best[way] = min(best[way], cpu)
                    print(f"  {k} shard(s), round {r}, {way}: {cpu:.2f} s ({n_subs / cpu:,.0f} subscriptions/s); "
                          f"load {kit.load_avg()}", flush=True)
                    if r == 0 and way == "after":
                        twin = before(tmp, version, k)
                        assert [len(m) for m in built] == [len(m) for m in twin]
                        assert all(a.match_events(events) == b.match_events(events) for a, b in zip(built, twin, strict=True))
                    del built
            print(f"{k} shard(s): before {best['before']:.2f} s, after {best['after']:.2f} s "
                  f"({best['before'] / best['after']:.1f}x); best of {rounds}; load {kit.load_avg()}", flush=True)
        steps = build_steps(tmp, version, lambda: create(name))
        print(f"one shard of {n_subs:,}, steps (CPU s): " + ", ".join(f"{step} {v:.2f}" for step, v in steps.items())
              + f"; load {kit.load_avg()}")


def build_steps(directory: str, version: int, make: Callable[[], Matcher]) -> dict[str, float]:
    """CPU seconds of each step of building shard 0 of 1 at ``version``, before (read, unpack,
    add) and after (read, the rows' columns, add_packed; decode, its first step, alone)."""
    import gc

    from matchers.collector import no_cyclic_gc
    from matchers.packed import decode
    from streaming.registry_columns import read_shard
    from streaming.registry_columns.shards import expressions, packed_rows, subscriptions

    gc.collect()
    with no_cyclic_gc():
        t = [time.process_time()]
        rows = expressions(read_shard(directory, version))
        t.append(time.process_time())
        subs = list(subscriptions(rows))
        t.append(time.process_time())
        make().add(subs)
        t.append(time.process_time())
        del subs
        gc.collect()
        t.append(time.process_time())
        rows = expressions(read_shard(directory, version))
        t.append(time.process_time())
        table = packed_rows(rows)
        t.append(time.process_time())
        decode(table.sub_offsets, table.sub_bytes)  # alone: add_packed decodes again
        t.append(time.process_time())
        make().add_packed(table)
        t.append(time.process_time())
    d = np.diff(t).tolist()
    return {"before: read": d[0], "unpack": d[1], "add": d[2], "after: read": d[4], "columns": d[5],
            "add_packed": d[7], "of which decode": d[6]}


def build_parts(directory: str, version: int, make: Callable[[], Matcher]) -> dict[str, float]:
    """CPU seconds of each step of :func:`~streaming.registry_columns.shards.build_shard` (of shard
    0 of 1 at ``version``) and of sharing the result with the machine's other workers
    (:func:`streaming.shared_index.publish`, then :func:`~streaming.shared_index.load`), as the
    service's workers run them (no cyclic collection meanwhile)."""
    import gc

    from matchers.collector import no_cyclic_gc
    from streaming import shared_index
    from streaming.registry_columns import read_shard
    from streaming.registry_columns.shards import expressions, packed_rows, table_of

    gc.collect()
    key = shared_index.SharedKey(f"bench-packed-{os.getpid()}", directory, "bench")
    with no_cyclic_gc():
        t = [time.process_time()]
        rows = expressions(read_shard(directory, version))
        t.append(time.process_time())
        table = packed_rows(rows)
        t.append(time.process_time())
        matcher = make()
        matcher.add_packed(table)
        t.append(time.process_time())
        if matcher.held_table() is None:  # as build_shard(packed=True)
            matcher.hold(table_of(matcher, rows))
        t.append(time.process_time())
        try:
            path = shared_index.publish(matcher, key, version)
            t.append(time.process_time())
            shared_index.load(path)
            t.append(time.process_time())
        finally:
            shared_index.remove_application(key.app_id)
    return dict(zip(("read", "columns", "add_packed", "hold", "publish", "load"), np.diff(t).tolist(), strict=True))


def per_id_remove(matcher, ids, gone=None) -> int:
    """``Matcher._remove`` before the bulk one (a4b14b5): each id looked up, its subscription read
    (unpacked from a held table) and freed in turn, the index given ``(key, subscription)`` pairs."""
    entries: list = []
    residual: list[str] = []
    for sub_id in dict.fromkeys(ids):
        key = matcher._key_of.pop(sub_id, None)
        if key is None:
            continue
        if key in matcher._residual_keys:
            matcher._residual_keys.discard(key)
            residual.append(sub_id)
            if gone is not None:
                gone.append(matcher._subs[key])
        else:
            sub = matcher._subs[key]
            if gone is not None:
                gone.append(sub)
            entries.append((key, matcher._unstate(key, sub)))
        matcher._subs[key] = None
        matcher._free.append(key)
    if residual:
        matcher._residual.remove(residual)
        matcher._residual_outer = None
    if entries:
        matcher._delete(entries)
    return len(entries) + len(residual)


def per_predicate_delete(matcher, entries: list) -> None:
    """The Fabret matchers' delete before the bulk one (``TwoPhaseMatcher._delete`` of
    1a3dcaa): predicate ids entry by entry, each predicate object released in turn."""
    ents = matcher.entries_of([key for key, _ in entries])
    pids = np.concatenate([matcher.store.entry_pids(e) for e in ents.tolist()])
    matcher._removing(ents)
    np.subtract.at(matcher.pid_refs, pids, 1)
    matcher.store.unplace(ents)
    matcher.store.free_entries(ents)
    for key, sub in entries:
        matcher.key_entry[key] = -1
        for conj in sub.conjunctions:
            for p in conj:
                matcher.phase1.release(p)
    matcher._changed(len(entries))


def pairwise_unmark(matcher, entries: np.ndarray) -> None:
    """The dynamic matcher's ``_unmark`` before the int64 keys (56f798e): the (group, width)
    pairs made distinct by ``np.unique(axis=1)`` of a 2-row array."""
    from matchers.arrays import grown

    if len(entries) == 0:
        return
    matcher.mark_width = grown(matcher.mark_width, matcher.store.e_top, 0)
    widths = matcher.mark_width[entries]
    marked = widths > 0
    if not marked.any():
        return
    ents = entries[marked]
    pairs, inverse = np.unique(np.stack([matcher.store.e_group[ents], widths[marked].astype(np.int32) - 1]),
                               axis=1, return_inverse=True)
    amounts = np.bincount(inverse.ravel(), matcher.mark_nu[ents], minlength=pairs.shape[1])
    matcher._credit(pairs[0], -amounts, pairs[1])
    matcher.mark_width[ents] = 0
    matcher.mark_nu[ents] = 0.0


def remove_figures(n_subs: int, n_remove: int, batch: int, rounds: int, name: str) -> None:
    """Print CPU us per removed id, bulk remove vs the per-id remove (see the module docstring)."""
    import gc
    import random

    from matchers.catalog import create
    from matchers.subtable import SubscriptionTable
    from scripts.bench.feed import workload_subscriptions
    from scripts.bench.kit import load_avg

    subs = list(workload_subscriptions(n_subs, seed=1))
    matcher = create(name)
    matcher.add_packed(SubscriptionTable.pack(subs))
    by_id = {s.id: s for s in subs}
    rng = random.Random(1)
    times: dict[str, list[float]] = {"bulk": [], "per-id": []}
    unmark = getattr(type(matcher), "_unmark", None)
    if unmark is not None:  # the dynamic matcher: also with the _unmark it replaced
        times["bulk, pairwise unmark"] = []
    for r in range(rounds):
        for way in kit.interleaved(list(times), r):
            ids = rng.sample(sorted(by_id), n_remove)
            remove = type(matcher)._remove.__get__(matcher) if way != "per-id" else \
                (lambda got: per_id_remove(matcher, got))
            if way == "bulk, pairwise unmark":
                matcher._unmark = pairwise_unmark.__get__(matcher)  # type: ignore[attr-defined]  # on one instance
            gc.collect()
            t = 0.0
            for i in range(0, n_remove, batch):
                t0 = time.process_time()
                remove(ids[i:i + batch])
                t += time.process_time() - t0
            matcher.__dict__.pop("_unmark", None)
            matcher.add_packed(SubscriptionTable.pack([by_id[i] for i in ids]))
            times[way].append(t / n_remove * 1e6)
            print(f"  {way}: {times[way][-1]:.1f} us/id; load: {load_avg()}", flush=True)
    assert len(matcher) == n_subs
    print(f"{n_subs:,} Fabret W1 subscriptions held packed, {name}: remove {n_remove:,} ids in calls of {batch:,}, "
          f"CPU us per id (best of {rounds}): " + ", ".join(f"{way} {min(t):.1f}" for way, t in times.items())
          + f"; load: {load_avg()}")


def matched_figures(n_ids: int, n_events: int, wide: int, rounds: int) -> None:
    """Print CPU us per notification of :func:`streaming.notifications.matched` (see the module docstring)."""
    from matchers.subtable import SubscriptionTable
    from streaming.notifications import matched

    ids = [f"w1-{i}".encode() for i in range(n_ids)]
    sub_offsets = np.arange(n_ids + 1, dtype=np.int64)  # one byte a row: ids are what is read
    table = SubscriptionTable(np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64),
                              np.frombuffer(b"".join(ids), dtype=np.uint8), sub_offsets, np.zeros(n_ids, dtype=np.uint8))
    del ids
    rng = np.random.default_rng(1)
    offsets = np.arange(n_events + 1, dtype=np.int64) * wide
    keys = np.sort(rng.integers(0, n_ids, (n_events, wide)), axis=1).ravel().astype(np.int32)
    ways = {"per-key id_of": lambda unique: list(map(table.id_of, unique.tolist())), "bulk ids_of": table.ids_at}
    matched(offsets[:2], keys[:wide], table.ids_at)  # Arrow's first take
    best = {way: float("inf") for way in ways}
    got = {}
    for r in range(rounds):
        for way in kit.interleaved(list(ways), r):
            t0 = time.process_time()
            got[way] = matched(offsets, keys, ways[way])
            best[way] = min(best[way], (time.process_time() - t0) / len(keys) * 1e6)
            print(f"  round {r}, {way}: {best[way]:.3f} us/notification; load {kit.load_avg()}", flush=True)
    assert all(np.array_equal(a, b) for a, b in zip(got["per-key id_of"], got["bulk ids_of"], strict=True))  # type: ignore[arg-type]  # arrays and a list
    print(f"matched() of {n_events:,} events x {wide} matches among {n_ids:,} ids held packed, CPU us per notification "
          f"(best of {rounds}): " + ", ".join(f"{way} {v:.3f}" for way, v in best.items()) + f"; load {kit.load_avg()}")


if __name__ == "__main__":
    main()

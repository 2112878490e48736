"""What storing each expression packed (:mod:`matchers.packed`) costs and saves: an executor's
shard built from the registry's files, before (each stored record parsed again) and after
(each packed subscription unpacked), the parse-time cost of packing, and the file bytes.

``python -m scripts.bench.packed [--subs 100000] [--rounds 3]``

``--subs`` Fabret W1 subscriptions (as :mod:`scripts.bench.feed` writes their records, the JSON
form) are parsed by :func:`~streaming.registry_columns.parse.parse_records` and stored in a
:class:`~streaming.registry_columns.ColumnRegistry` of one shard, with a snapshot. Then, in
CPU seconds (``time.process_time``, best of ``--rounds``): reading the shard
(:func:`~streaming.registry_columns.read_shard`) and making its subscriptions, by parsing the
records again or by :func:`~streaming.registry_columns.shards.subscriptions`; packing alone
(:func:`matchers.packed.pack` of each parsed subscription); and the snapshot part's bytes per
subscription with and without the ``packed`` column. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import orjson
import pyarrow as pa


def _best(rounds: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    from matchers.expr import DEFAULT_MAX_TERMS
    from matchers.packed import pack
    from scripts.bench.feed import subscription_records, workload_subscriptions
    from streaming.records import default_parser
    from streaming.registry_columns import ChangeBatch, ColumnRegistry, read_shard
    from streaming.registry_columns import files as rfiles
    from streaming.registry_columns.parse import parse_records
    from streaming.registry_columns.shards import subscriptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    subs = list(workload_subscriptions(args.subs, seed=1))
    keys, values = zip(*subscription_records(subs), strict=True)
    n = len(values)
    batch = pa.RecordBatch.from_pydict({"key": list(keys), "value": list(values), "topic": ["subs"] * n,
                                        "partition": [0] * n, "offset": list(range(n))})
    parse = default_parser()
    parsed = parse_records(batch)  # the service's call: the fast path where a record allows
    cpu_parse = _best(args.rounds, lambda: parse_records(batch))
    cpu_pack = _best(args.rounds, lambda: [pack(s) for s in subs])
    with tempfile.TemporaryDirectory() as tmp:
        reg = ColumnRegistry(tmp)
        cols = {c: parsed.column(c) for c in ("id", "op", "kind", "record", "expires", "predicates", "packed")}
        reg.apply(0, ChangeBatch.of(cols["id"], cols["op"].to_numpy(), cols["kind"].to_numpy(), cols["record"],
                                    cols["expires"].to_numpy(zero_copy_only=False), None,
                                    cols["predicates"].to_numpy(), cols["packed"]), 1.0)
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

        before = _best(args.rounds, reparse)
        after = _best(args.rounds, lambda: list(subscriptions(read_shard(tmp, 1))))
        assert reparse() == list(subscriptions(table))
    without = len(rfiles.to_ipc(table.drop_columns(["packed"])))
    print(f"{n:,} Fabret W1 subscriptions, CPU s best of {args.rounds}:")
    print(f"  shard from storage: parse again {before:.2f} s ({before / n * 1e6:.0f} us/sub), "
          f"unpack {after:.2f} s ({after / n * 1e6:.1f} us/sub): {before / after:.1f}x")
    print(f"  parse_records {cpu_parse / n * 1e6:.0f} us/record (packing included; the common JSON form takes "
          f"fastparse); matchers.packed.pack of a parsed subscription {cpu_pack / n * 1e6:.1f} us (the general path's)")
    print(f"  snapshot part (zstd): {len(part) / n:.0f} B/sub with packed, {without / n:.0f} B/sub without; "
          f"the packed column is {table.column('packed').nbytes / n:.0f} B/sub uncompressed")


if __name__ == "__main__":
    main()

"""Driver memory and apply throughput of the columnar registry.

``python -m scripts.bench.registry_columns [--subs 1000000] [--batch 100000]``

The registry (:class:`streaming.registry_columns.ColumnRegistry`, changes as columns with each
record's JSON bytes and the subscription packed) runs in child processes of its own (a clean
heap each), taking ``--subs`` upserts of three-predicate subscriptions in batches of
``--batch``, into a registry in a temporary directory. One child measures the CPU time of the
applies (``time.process_time`` around ``apply`` only: building the batch's input is not
counted) and the growth of its resident memory (``VmRSS``) and its peak (``VmHWM``) over the
baseline taken after imports and a warm-up, then one snapshot write and one shard read back
(:func:`read_shard`, an executor's part); another measures the memory held after the applies
with ``tracemalloc`` (its CPU time would be tracemalloc's). Figures, not assertions.

The pickled registry of the earlier release, which this compared against, is gone; its
figures of 2026-11-28 (1,000,000 upserts in batches of 100,000, the same machine) were 824
bytes of RSS per subscription (952 at the peak) and 33,000 appended subscriptions/s of CPU,
against the columns' 87 bytes and 557,000/s (``docs/service.md``).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import tempfile
import time
import tracemalloc

import numpy as np
import pyarrow as pa


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def _ids(lo: int, hi: int) -> list[str]:
    return [f"sub-{i:09d}" for i in range(lo, hi)]


def _expr_text(i: int) -> str:
    return f"a = {i} AND b < {i % 100} AND c = 'x{i % 50}'"


def _columns_batch(lo: int, hi: int):
    """The same records as Arrow columns built without a Python object each (as a Kafka batch arrives),
    with the subscriptions packed (each built and packed here, as a task's parse does; freed before the apply)."""
    import pyarrow.compute as pc

    from matchers.packed import pack
    from streaming.registry_columns import EXPRESSION, ChangeBatch

    n = hi - lo
    num = pa.array(np.arange(lo, hi))
    text = lambda x: pc.cast(x, pa.string())  # noqa: E731
    mod = lambda k: text(pa.array(np.arange(lo, hi) % k))  # noqa: E731
    ids = pc.binary_join_element_wise("sub-", pc.utf8_lpad(text(num), 9, "0"), "")
    records = pc.binary_join_element_wise('{"op":"upsert","id":"', ids, '","expr":"a = ', text(num), " AND b < ",
                                          mod(100), " AND c = 'x", mod(50), "'\"}", "")
    packed = pa.array([pack(s) for s in _subscriptions(lo, hi)], pa.binary())
    return ChangeBatch.of(ids, np.zeros(n, np.int8), np.full(n, EXPRESSION, np.int8), records.cast(pa.binary()),
                          packed=packed)


def _subscriptions(lo: int, hi: int):
    from matchers.expr import And, Subscription, pred

    return [Subscription.of(s, And((pred("a", "=", float(i)), pred("b", "<", float(i % 100)),
                                    pred("c", "=", f"x{i % 50}"))))
            for s, i in zip(_ids(lo, hi), range(lo, hi), strict=True)]


def _run(kind: str, subs: int, batch: int, trace: bool, out) -> None:
    from streaming.registry_columns import ColumnRegistry, read_shard

    with tempfile.TemporaryDirectory() as tmp:
        warm = ColumnRegistry(f"{tmp}/warm")
        warm.apply(0, _columns_batch(0, 10), 0.0)
        warm.snapshot()
        read_shard(f"{tmp}/warm", 1)
        reg = ColumnRegistry(f"{tmp}/reg", shards=8, snapshot_every=1_000_000)
        gc.collect()
        rss0 = _status("VmRSS")
        if trace:
            tracemalloc.start()
            traced0 = tracemalloc.get_traced_memory()[0]
        cpu = wall = 0.0
        for b, lo in enumerate(range(0, subs, batch)):
            changes = _columns_batch(lo, min(subs, lo + batch))
            c0, w0 = time.process_time(), time.perf_counter()
            reg.apply(b, changes, float(b))
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            del changes
        gc.collect()
        result = {"kind": kind, "trace": trace, "subs": subs, "apply_cpu_s": cpu, "apply_wall_s": wall,
                  "rss_growth": _status("VmRSS") - rss0, "peak_rss_growth": _status("VmHWM") - rss0}
        if trace:
            result["traced"] = tracemalloc.get_traced_memory()[0] - traced0
            tracemalloc.stop()
        else:
            result["columns_nbytes"] = reg.columns.nbytes()
            c0, w0 = time.process_time(), time.perf_counter()
            reg.snapshot()
            result["snapshot_cpu_s"], result["snapshot_wall_s"] = time.process_time() - c0, time.perf_counter() - w0
            c0 = time.process_time()
            table = read_shard(f"{tmp}/reg", reg.version, 0, 8)
            result["read_shard_cpu_s"], result["shard_rows"] = time.process_time() - c0, table.num_rows
        out.put(result)


def _child(kind: str, subs: int, batch: int, trace: bool) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_run, args=(kind, subs, batch, trace, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--kinds", nargs="+", default=["columns"], choices=["columns"],
                        help="the registries to measure (the columnar one only, since the pickled one is gone)")
    args = parser.parse_args(argv)
    for kind in args.kinds:
        for trace in (False, True):
            r = _child(kind, args.subs, args.batch, trace)
            n = r["subs"]
            line: dict = {"registry": kind, "subs": n, "batch": args.batch, "tracemalloc": trace}
            if trace:
                line["traced_B_per_sub"] = round(r["traced"] / n, 1)
            else:
                line.update(apply_subs_per_cpu_s=round(n / r["apply_cpu_s"]),
                            apply_subs_per_wall_s=round(n / r["apply_wall_s"]),
                            rss_B_per_sub=round(r["rss_growth"] / n, 1),
                            peak_rss_B_per_sub=round(r["peak_rss_growth"] / n, 1))
            for key in ("columns_nbytes", "snapshot_cpu_s", "snapshot_wall_s", "read_shard_cpu_s", "shard_rows"):
                if key in r:
                    line[key] = round(r[key], 3) if isinstance(r[key], float) else r[key]
            print(json.dumps(line), flush=True)

if __name__ == "__main__":
    main()

"""Spark's two Python keyed-state operators side by side: ``applyInPandasWithState`` and
``transformWithStateInPandas`` (Spark 4, RocksDB state store), same work, same input.

Input: ``--batches`` Parquet files of ``--rows`` rows each (a key out of ``--keys``, a
100-byte payload), read one file per micro-batch. Per key and batch, both operators read
the key's state (a count and a blob: the JSON list of the payloads of its previous batch,
as the patterns operator keeps its pending events), replace it with this batch's, and emit
one row. Figures: the median ``triggerExecution`` of the batches after the first (the
first one starts the Python workers), and the CPU seconds of the process tree over the
whole run (``scripts.bench.kit.tree_cpu_s``), with the load average. The two
operators alternate within each round.

Run ``python -m scripts.bench.keyed_state [--rows 20000 --keys 64 1000 --rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pandas as pd

from scripts.bench import kit

OUT_DDL = "key string, n long"
STATE_DDL = "n long, blob binary"


def write_input(directory: Path, batches: int, rows: int, keys: int) -> None:
    for b in range(batches):
        pd.DataFrame({"key": [f"k{(b * rows + i) % keys}" for i in range(rows)],
                      "payload": [os.urandom(50).hex() for _ in range(rows)]}).to_parquet(directory / f"b{b:04d}.parquet")


def step(state_row: tuple | None, pdfs: Iterator[pd.DataFrame]) -> tuple[tuple, int]:
    """The work of both operators for one key: read the old blob, keep this batch's payloads."""
    n = 0 if state_row is None else state_row[0] + len(orjson.loads(state_row[1]))
    payloads = [p for pdf in pdfs for p in pdf["payload"].tolist()]
    return (n, orjson.dumps(payloads)), n + len(payloads)


def apply_fn(key, pdfs, state):
    new, n = step(state.get if state.exists else None, pdfs)
    state.update(new)
    yield pd.DataFrame({"key": [key[0]], "n": [n]})


def make_processor():
    from pyspark.sql.streaming import StatefulProcessor

    class Processor(StatefulProcessor):
        def init(self, handle) -> None:
            self.state = handle.getValueState("s", STATE_DDL)

        def handleInputRows(self, key, rows, timerValues=None):  # noqa: N802 - PySpark's name
            new, n = step(self.state.get() if self.state.exists() else None, rows)
            self.state.update(new)
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    return Processor()


def run(spark, operator: str, src: Path, ckpt: Path, schema) -> dict:
    from pyspark.sql.streaming.state import GroupStateTimeout

    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src)).groupBy("key")
    if operator == "applyInPandasWithState":
        out = df.applyInPandasWithState(apply_fn, OUT_DDL, STATE_DDL, "update", GroupStateTimeout.NoTimeout)
    else:
        out = df.transformWithStateInPandas(make_processor(), OUT_DDL, "Update", "None")
    cpu0 = kit.tree_cpu_s()
    t0 = time.perf_counter()
    q = out.writeStream.format("noop").outputMode("update").option("checkpointLocation", str(ckpt)).start()
    q.processAllAvailable()
    wall = time.perf_counter() - t0
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    q.stop()
    later = [p["durationMs"]["triggerExecution"] for p in progress[1:]]
    return {"operator": operator, "batches": len(progress), "first_batch_ms": progress[0]["durationMs"]["triggerExecution"],
            "median_batch_ms": statistics.median(later) if later else None, "wall_s": wall,
            "cpu_s": kit.tree_cpu_s() - cpu0, "load": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.keyed_state", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="rows per micro-batch")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--keys", type=int, nargs="+", default=[64, 1000])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    from pyspark.sql.types import StringType, StructField, StructType

    from streaming.spark import get_session

    spark = get_session(app_name="bench-keyed-state", master="local[2]", conf={
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"})
    schema = StructType([StructField("key", StringType()), StructField("payload", StringType())])
    print("workload:", json.dumps({**vars(args), "load_at_start": os.getloadavg()}), flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for keys in args.keys:
            src = Path(tmp) / f"in{keys}"
            src.mkdir()
            write_input(src, args.batches, args.rows, keys)
            for rnd in range(args.rounds):
                for operator in ("applyInPandasWithState", "transformWithStateInPandas"):
                    r = run(spark, operator, src, Path(tmp) / f"ck-{keys}-{rnd}-{operator}", schema)
                    r.update(keys=keys, rows=args.rows, round=rnd)
                    results.append(r)
                    print(json.dumps(r), flush=True)
    spark.stop()
    print(f"wrote {kit.save('keyed_state', kit.record(vars(args), results))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

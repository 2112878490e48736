"""What the unknown-attribute census costs the patterns' keying (``streaming.patterns.census``).

``keyed_rows`` over the same batches of Stock events (``--symbols`` names, partition attribute
``name``) with no watch and with a watch of one open read (``prcie``): the CPU time of the
process per pass (median of ``--rounds``, the two alternating), with the load average. The
first pass of each is a warm-up (the scan's kernel compiles once per tree).

Run ``python -m scripts.bench.census [--events 50000 --batch 5000 --symbols 1000 --rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import orjson
import pyarrow as pa

from scripts.bench import kit
from scripts.tickers import stock_ticks
from streaming.config import Settings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.schema import ARROW_SCHEMA
from streaming.match.changes import records_of, register_records
from streaming.patterns.census import Watch
from streaming.patterns.keyed import keyed_rows
from streaming.patterns.queries import registry_dir
from streaming.registry_columns import ColumnRegistry

NO_KAFKA = KafkaClientConfig.create("unused.invalid:9092")


def kafka_batch(values: list[bytes | None]) -> pa.RecordBatch:
    """An Arrow batch with the Kafka source's columns, as the patterns query reads it (topic ``events``)."""
    n = len(values)
    return pa.RecordBatch.from_pydict({"key": [None] * n, "value": values, "topic": ["events"] * n,
                                       "partition": [0] * n, "offset": list(range(n)),
                                       "timestamp": [1_700_000_000_000_000] * n}, schema=ARROW_SCHEMA)


PATTERN = "FILTER{prcie > 3}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--symbols", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    settings = Settings().replace(spark={"checkpoint_dir": tempfile.mkdtemp()})
    register_records(ColumnRegistry(registry_dir(settings)), 0,
                     records_of([(b"q", orjson.dumps({"id": "q", "pattern": PATTERN}), "s", 0, 0)]), 0.0)
    events = stock_ticks(args.events, 1, symbols=[f"S{i}" for i in range(args.symbols)])
    values: list[bytes | None] = [orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs}) for e in events]
    batches = [kafka_batch(values[i:i + args.batch]) for i in range(0, len(values), args.batch)]
    watches = {"no watch": None, "watch": Watch(frozenset({"Stock"}), ("name", "prcie", "price"))}

    def run(watch: Watch | None) -> float:
        t = time.process_time()
        for rb in batches:
            list(keyed_rows(iter([rb]), registry_dir(settings), settings, NO_KAFKA, watch))
        return time.process_time() - t

    for w in watches.values():
        run(w)
    got: dict[str, list[float]] = {k: [] for k in watches}
    for _ in range(args.rounds):
        for name, w in watches.items():
            got[name].append(run(w))
    print(f"load average {os.getloadavg()}")
    results = {}
    for name, times in got.items():
        med = statistics.median(times)
        results[name] = {"median_cpu_s": med, "us_per_event": med / args.events * 1e6, "cpu_s": times}
        print(f"{name}: {med * 1e3:.1f} ms CPU per {args.events:,} events ({med / args.events * 1e6:.2f} µs/event; "
              f"all {[round(t * 1e3, 1) for t in times]})")
    print(f"wrote {kit.save('census', kit.record(vars(args), results))}")


if __name__ == "__main__":
    main()

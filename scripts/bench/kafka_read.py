"""Benchmark of Kafka I/O: the fetch loop alone, the produce loop, streaming reads into Spark.

Runs its own embedded broker, fills one topic with ``--records`` records of about
``--size`` bytes over ``--partitions`` partitions, then measures records per second of:

* fetch only, in this process, one partition range after the other:
  ``kafka-python tuples`` (the plain loop: one Python tuple per record, the baseline),
  then :func:`streaming.kafka.fetch.read_range` (what the source runs) with each client,
  ``kafka-python arrow`` and ``confluent-kafka arrow``;
* the sink's produce loop (:func:`streaming.kafka.sink.produce_batches`, flushed and
  checked) with each client, in this process;
* Spark streaming reads (``startingOffsets=earliest``, ``processAllAvailable`` into a
  ``noop`` sink): a baseline source in this module whose ``read()`` yields one tuple per
  record from kafka-python (what a plain kafka-python data source does), then the
  ``kafka-py`` source (Arrow record batches) with each fetch client.

Ratios are against the baseline measured in the same run. Results go to
``docs/bench/kafka_read.json``, a table to ``docs/kafka.md`` (between the bench markers)
and a plot to ``docs/img/kafka_read.png``.

Usage: ``python -m scripts.bench.kafka_read [--quick]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from tqdm import tqdm

from scripts.bench import kit
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import read_range, to_batch
from streaming.kafka.offsets import OffsetRange
from streaming.kafka.source import KafkaDataSource, KafkaStreamReader

DOCS = Path(__file__).resolve().parents[2] / "docs"
BEGIN = "<!-- bench:kafka_read:begin -->"
END = "<!-- bench:kafka_read:end -->"


class TupleStreamReader(KafkaStreamReader):
    """Baseline: the same offsets, but ``read()`` yields one Python tuple per record."""

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        rng = OffsetRange(*partition.value)
        return _tuples(self._config.kafka_python("consumer"), rng)


class TupleKafkaDataSource(KafkaDataSource):
    """Baseline data source ``kafka-py-tuples`` (benchmark only)."""

    @classmethod
    def name(cls) -> str:
        return "kafka-py-tuples"

    def streamReader(self, schema: Any) -> TupleStreamReader:
        return TupleStreamReader(self.options)


def _tuples(kwargs: dict, rng: OffsetRange) -> Iterator[tuple]:
    """Plain kafka-python loop: assign, seek, poll, one tuple per record."""
    import datetime

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**kwargs, group_id=None, enable_auto_commit=False)
    kp = TopicPartition(rng.topic, rng.partition)
    consumer.assign([kp])
    consumer.seek(kp, rng.start)
    utc = datetime.UTC
    try:
        position = rng.start
        while position < rng.end:
            for rec in consumer.poll(timeout_ms=500).get(kp, ()):
                if rec.offset >= rng.end:
                    break
                stamp = datetime.datetime.fromtimestamp(rec.timestamp / 1000, tz=utc)
                yield (rec.key, rec.value, rec.topic, rec.partition, rec.offset, stamp)
            position = consumer.position(kp)
    finally:
        consumer.close()


def _fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        **KafkaClientConfig.create(bootstrap).kafka_python("producer"),
        acks="all",
        linger_ms=20,
        batch_size=256 * 1024,
    )
    pad = "x" * max(0, size - 60)
    for i in tqdm(range(records), desc="produce", unit="rec", mininterval=1.0):
        value = f'{{"id": {i}, "symbol": "S{i % 500}", "price": {i % 997}, "pad": "{pad}"}}'
        producer.send(topic, value=value.encode(), key=f"k{i}".encode(), partition=i % partitions)
    producer.flush()
    producer.close()


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def _over_ranges(loop: Callable[[OffsetRange], int], ranges: list[OffsetRange]) -> int:
    return sum(loop(r) for r in ranges)


def bench_fetch(bootstrap: str, ranges: list[OffsetRange]) -> list[dict]:
    """Fetch-only records/s of the three loops over every range, in this process."""
    configs = {c: KafkaClientConfig.create(bootstrap, data_client=c) for c in ("kafka-python", "confluent")}
    kwargs = configs["kafka-python"].kafka_python("consumer")
    loops: dict[str, Callable[[OffsetRange], int]] = {
        "kafka-python tuples": lambda r: sum(1 for _ in _tuples(kwargs, r)),
        "kafka-python arrow": lambda r: sum(b.num_rows for b in read_range(configs["kafka-python"], r)),
        "confluent-kafka arrow": lambda r: sum(b.num_rows for b in read_range(configs["confluent"], r)),
    }
    # The first pyarrow conversion imports pandas (about a second); Spark's Python workers
    # have it imported already, so keep that one-time cost out of the figures.
    to_batch("warm-up", 0, [b"k"], [b"v"], [0], [0])
    results = []
    for name, loop in tqdm(loops.items(), desc="fetch loops", unit="loop"):
        seconds, n = _timed(partial(_over_ranges, loop, ranges))
        results.append({"case": f"fetch: {name}", "records": n, "seconds": seconds})
    return results


def bench_produce(bootstrap: str, records: int, size: int, partitions: int) -> list[dict]:
    """Sink-side records/s of :func:`streaming.kafka.sink.produce_batches`, per client."""
    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.sink import produce_batches

    pad = "x" * max(0, size - 60)
    values = [
        f'{{"sub": "s{i % 1000}", "event": {i}, "pad": "{pad}"}}'.encode() for i in range(records)
    ]
    batches = [
        pa.RecordBatch.from_pydict({"value": values[i : i + 10_000]})
        for i in range(0, records, 10_000)
    ]
    results = []
    for client in tqdm(("kafka-python", "confluent"), desc="produce loops", unit="client"):
        topic = f"bench-write-{client}"
        config = KafkaClientConfig.create(bootstrap, data_client=client)
        ensure_topics(config, {topic: partitions})
        seconds, n = _timed(partial(produce_batches, config, topic, iter(batches)))
        results.append({"case": f"produce: {client}", "records": n, "seconds": seconds})
    return results


def bench_spark(bootstrap: str, topic: str, records: int) -> list[dict]:
    """Streaming read into Spark: kafka-py (Arrow batches) vs the tuple-yielding baseline."""
    from streaming.spark import get_session

    spark = get_session(app_name="bench-kafka-read")
    spark.dataSource.register(TupleKafkaDataSource)
    results = []
    try:
        cases = [
            ("kafka-py-tuples", "kafka-python", "tuples, kafka-python (baseline)"),
            ("kafka-py", "kafka-python", "kafka-py arrow, kafka-python"),
            ("kafka-py", "confluent", "kafka-py arrow, confluent-kafka (default)"),
        ]
        for fmt, client, label in tqdm(cases, desc="spark reads", unit="source"):
            with tempfile.TemporaryDirectory() as chk:
                df = (
                    spark.readStream.format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .option("kafkaClient", client)
                    .load()
                )
                t0 = time.perf_counter()
                query = df.writeStream.format("noop").option("checkpointLocation", chk).start()
                try:
                    query.processAllAvailable()
                    seconds = time.perf_counter() - t0
                    progress = [p for p in query.recentProgress if p["numInputRows"]]
                    n = sum(p["numInputRows"] for p in progress)
                    in_batches = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1e3
                finally:
                    query.stop()
            assert n == records, f"{label} read {n} of {records} records"
            results.append(
                {
                    "case": f"spark stream: {label}",
                    "records": n,
                    "seconds": seconds,
                    "batch_seconds": in_batches,
                    "batches": len(progress),
                }
            )
    finally:
        spark.stop()
    return results


def _with_ratios(results: list[dict]) -> list[dict]:
    base = {"fetch": None, "spark stream": None, "produce": None}
    for r in results:
        r["records_per_s"] = r["records"] / r["seconds"]
        kind = r["case"].split(":")[0]
        if base[kind] is None:
            base[kind] = r["records_per_s"]
        r["ratio"] = r["records_per_s"] / base[kind]
    return results


def _table(params: dict, results: list[dict]) -> str:
    lines = [
        f"Workload: {params['records']:,} records of ~{params['size']} bytes, "
        f"{params['partitions']} partitions, embedded Apache Kafka broker, Spark {params['master']}; "
        f"{params['date']} on {params['machine']}, load average {params['load']}. Spark "
        "seconds run from query start to the end of processAllAvailable; the last column "
        "is the time inside micro-batches (query start-up excluded). Ratio: records/s "
        "against the first row of its kind.",
        "",
        "| case | records | seconds | records/s | ratio | in micro-batches: s (batches) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        inside = f"{r['batch_seconds']:.2f} ({r['batches']})" if "batches" in r else "-"
        lines.append(
            f"| {r['case']} | {r['records']:,} | {r['seconds']:.2f} | "
            f"{r['records_per_s']:,.0f} | {r['ratio']:.2f} | {inside} |"
        )
    return "\n".join(lines)


def _write(params: dict, results: list[dict], table: str) -> None:
    (DOCS / "bench").mkdir(parents=True, exist_ok=True)
    (DOCS / "img").mkdir(parents=True, exist_ok=True)
    (DOCS / "bench" / "kafka_read.json").write_text(
        json.dumps({"params": params, "results": results}, indent=2) + "\n"
    )
    kit.write_section(DOCS / "kafka.md", table, BEGIN, END)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.barh([r["case"] for r in results], [r["records_per_s"] for r in results], color="#4a7")
    ax.set_xlabel("records/s")
    ax.set_title(
        f"Kafka reads: {params['records']:,} records of ~{params['size']} B, "
        f"{params['partitions']} partitions",
        fontsize=10,
    )
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(DOCS / "img" / "kafka_read.png", dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table; write JSON, Markdown and the plot."""
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.kafka_read", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50,000 records (about a minute)")
    parser.add_argument("--records", type=int, default=None, help="records (default 200,000)")
    parser.add_argument("--size", type=int, default=200, help="approximate bytes per record")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--no-spark", action="store_true", help="fetch loops only")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    records = args.records or (50_000 if args.quick else 200_000)

    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.broker import EmbeddedBroker
    from streaming.kafka.watermarks import Watermarks

    params = {
        "records": records,
        "size": args.size,
        "partitions": args.partitions,
        "master": "local[2]",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    print("workload:", json.dumps(params))
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        topic = "bench-read"
        config = KafkaClientConfig.create(bootstrap)
        ensure_topics(config, {topic: args.partitions})
        _fill(bootstrap, topic, records, args.size, args.partitions)
        watermarks = Watermarks(config.kafka_python("consumer"))
        try:
            tps = watermarks.partitions([topic], refresh=True)
            ends = watermarks.latest(tps)
        finally:
            watermarks.close()
        ranges = [OffsetRange(t, p, 0, ends[(t, p)]) for t, p in tps]
        assert sum(r.end for r in ranges) == records, (ranges, records)
        results = bench_fetch(bootstrap, ranges)
        results += bench_produce(bootstrap, records, args.size, args.partitions)
        if not args.no_spark:
            results += bench_spark(bootstrap, topic, records)
    results = _with_ratios(results)
    table = _table(params, results)
    print(table)
    if not args.no_write:
        _write(params, results, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

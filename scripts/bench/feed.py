"""A benchmark's workload fed to Kafka: Fabret's W1 subscriptions as subscription records and
its events, produced with confluent-kafka (the benchmark's producer must not be the
bottleneck) behind a progress bar. Used by :mod:`scripts.bench.e2e`,
:mod:`scripts.bench.cluster_memory` and :mod:`scripts.bench.stages`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

import orjson
from tqdm import tqdm

from streaming.kafka.client_config import KafkaClientConfig

WORKLOAD = "W1"


#: The benchmarks' producer of events and subscriptions, as a well-configured producer of many
#: small records would be: batches of up to 10,000 records or 1 MB held up to 20 ms, compressed
#: with lz4 (``scripts.bench.e2e_broker``: the broker's CPU for the tasks' fetches 0.5-1.1 µs per
#: event against 0.7-1.7 uncompressed, the tasks' reads no slower; the producer 0.6 µs more).
PRODUCER_SETTINGS = {"linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000,
                     "acks": "all", "compression.type": "lz4"}

#: The benchmarks' readers of notifications: a fetch waits up to 500 ms on the broker for a
#: record and is answered as soon as one is written (``fetch.min.bytes`` 1), so the longer wait
#: delays nothing and an idle reader asks twice a second, not 50 times (the wait was 20 ms).
READER_SETTINGS = {"group.id": "e2e-unused", "enable.auto.commit": False, "fetch.wait.max.ms": 500,
                   "fetch.min.bytes": 1}


def producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({**KafkaClientConfig.create(bootstrap).rdkafka("producer"), **PRODUCER_SETTINGS})


def produce_all(bootstrap: str, topic: str, items: Iterable[tuple[bytes | None, bytes]], desc: str,
                total: int | None = None, progress: bool = True) -> None:
    p = producer(bootstrap)
    bar = tqdm(items, desc=desc, unit="rec", mininterval=2.0, file=sys.stderr, total=total, disable=not progress)
    for i, (key, value) in enumerate(bar):
        while True:
            try:
                p.produce(topic, value=value, key=key)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records to {topic} were not delivered")


# -- the pieces ------------------------------------------------------------------------------
def workload_events(n_events: int, seed: int) -> list[dict]:
    from scripts.workloads import fabret

    return fabret(WORKLOAD, n_subs=0, n_events=n_events, seed=seed).events


def workload_subscriptions(n_subs: int, seed: int) -> Iterator:
    """The workload's subscriptions one at a time (10,000,000 as objects would not fit in memory)."""
    from scripts.workloads import fabret_subscriptions

    return fabret_subscriptions(WORKLOAD, n_subs=n_subs, seed=seed)


def subscription_records(subs: Iterable) -> Iterator[tuple[bytes, bytes]]:
    from matchers.language import to_json

    for s in subs:
        yield s.id.encode(), orjson.dumps({"op": "upsert", "id": s.id, "json": to_json(s.expr)})

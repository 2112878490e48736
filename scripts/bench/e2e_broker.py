"""The embedded broker's CPU per event, by what it serves, under sets of client settings.

What the sustained drain of :mod:`scripts.bench.e2e` asks of the broker, one part at a time
on a broker of its own, each part's CPU read from the broker's ``/proc/<pid>/stat``:

* **events in**: ``--events`` Fabret events (as the bench produces them) by the bench's
  producer (:func:`scripts.bench.feed.producer`);
* **fetch**: the match tasks' reads, :func:`streaming.kafka.fetch.read_range` over each
  partition in ranges of ``--per-trigger`` / partitions, one range after the other;
* **notifications**: 1.17 records per event, each the event in a notification's JSON (about
  the size of the service's), keyed by subscription, by :func:`streaming.kafka.sink.produce_batches`;
* **notifications read**: the bench's notification reader's consumer reading them all.

Each ``--variant`` (``current``, or librdkafka properties ``name=prop=value,prop=value``)
replaces the settings of the three clients for its rounds (the reads' and the sink's
module settings, the bench producer's); variants run interleaved, ``--rounds`` times, each
on topics of their own. The broker's idle CPU per second is measured first and reported,
not subtracted.

``--jvm-option`` adds an option to the broker's JVM (:data:`streaming.kafka.broker.JVM_OPTIONS`),
and the broker's CPU from its start to the end is printed: runs with and without it compare
what its JIT compilers cost.

Usage: ``python -m scripts.bench.e2e_broker --events 200000 --rounds 2 --variant current
--variant 'lz4=compression.type=lz4' [--jvm-option -XX:TieredStopAtLevel=1]``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from scripts.bench import feed, kit
from streaming.kafka import fetch, sink
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.offsets import OffsetRange

PARTITIONS = 2
NOTES_PER_EVENT = 1.17
PARTS = ("events in", "fetch", "notifications", "notifications read")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``name`` or ``name=prop=value,prop=value`` -> (name, librdkafka properties)."""
    name, _, rest = text.partition("=")
    props: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        prop, _, value = item.partition("=")
        props[prop.strip()] = value.strip()
    return name, props


@contextmanager
def settings(props: dict[str, Any]) -> Iterator[None]:
    """The clients' librdkafka settings with ``props`` over them: the fetch properties
    (``fetch.*``, ``queued.*``, ``max.partition.*``) to the reads, ``ev:<prop>`` to the
    bench's producer only, ``sink:<prop>`` to the sink's only, the others to both producers."""
    read0, write0, producer0 = dict(fetch._RDKAFKA_READ_SETTINGS), dict(sink._RDKAFKA_WRITE_SETTINGS), feed.producer
    consumer_props = {k: v for k, v in props.items() if k.startswith(("fetch.", "queued.", "max.partition"))}
    both = {k: v for k, v in props.items() if k not in consumer_props and ":" not in k}
    producer_props = {**both, **{k[3:]: v for k, v in props.items() if k.startswith("ev:")}}
    fetch._RDKAFKA_READ_SETTINGS.update(consumer_props)
    sink._RDKAFKA_WRITE_SETTINGS.update({**both, **{k[5:]: v for k, v in props.items() if k.startswith("sink:")}})

    def producer(bootstrap: str) -> Any:
        from confluent_kafka import Producer

        conf = {**KafkaClientConfig.create(bootstrap).rdkafka("producer"), **feed.PRODUCER_SETTINGS, **producer_props}
        return Producer(conf)

    feed.producer = producer
    try:
        yield
    finally:
        fetch._RDKAFKA_READ_SETTINGS.clear()
        fetch._RDKAFKA_READ_SETTINGS.update(read0)
        sink._RDKAFKA_WRITE_SETTINGS.clear()
        sink._RDKAFKA_WRITE_SETTINGS.update(write0)
        feed.producer = producer0
        sink.close_producers()
        fetch.close_consumers()


def notification_values(raws: Sequence[bytes], n: int) -> tuple[list[bytes], list[bytes]]:
    """``n`` notification-like records (keys, values) over the events ``raws``."""
    keys, values = [], []
    for r in range(n):
        sub = b"w1-%d" % (r * 7919 % 100_000)
        keys.append(sub)
        values.append(b'{"id":"%032x","subscription":"%s","event_id":%d,"topic":"events","partition":0,"offset":%d,'
                      b'"event_time_ms":1764500000000,"matched_ms":1764500000100,"batch":3,"retro":false,"event":%s}'
                      % (r * 2654435761 % 2**128, sub, r, r, raws[r % len(raws)]))
    return keys, values


def measure(bootstrap: str, pid: int, raws: list[bytes], per_trigger: int, props: dict[str, Any], tag: str
            ) -> dict[str, Any]:
    """µs of broker CPU per event of each part (and the client's, this process's) under ``props``."""
    from confluent_kafka import Consumer, TopicPartition

    from streaming.kafka.admin import ensure_topics

    config = KafkaClientConfig.create(bootstrap)
    events, notes = f"{tag}-events", f"{tag}-notes"
    ensure_topics(config, {events: PARTITIONS, notes: 1})
    n = len(raws)
    n_notes = round(n * NOTES_PER_EVENT)
    note_keys, note_values = notification_values(raws, n_notes)
    out: dict[str, Any] = {}

    def part(name: str, fn: Callable[[], object]) -> None:
        time.sleep(0.5)
        b0, c0, t0 = cpu_s(pid), time.process_time(), time.perf_counter()
        fn()
        out[name] = {"broker_us": (cpu_s(pid) - b0) / n * 1e6, "client_us": (time.process_time() - c0) / n * 1e6,
                     "wall_s": time.perf_counter() - t0}

    with settings(props):
        part("events in", lambda: feed.produce_all(bootstrap, events, ((None, v) for v in raws), "events", total=n,
                                                   progress=False))

        def read_all() -> None:
            got = 0
            marks = Consumer({**config.rdkafka("consumer"), "group.id": "e2e-unused"})
            ends = [marks.get_watermark_offsets(TopicPartition(events, p), timeout=10)[1] for p in range(PARTITIONS)]
            marks.close()
            for p, end in enumerate(ends):
                step = max(1, per_trigger // PARTITIONS)
                for lo in range(0, end, step):
                    got += sum(b.num_rows for b in fetch.read_range(config, OffsetRange(events, p, lo, min(end, lo + step))))
            assert got == n, (got, n)
        part("fetch", read_all)

        def write_notes() -> None:
            step = 20_000
            batches = (pa.RecordBatch.from_pydict({"key": note_keys[i:i + step], "value": note_values[i:i + step]})
                       for i in range(0, n_notes, step))
            assert sink.produce_batches(config, notes, batches) == n_notes
        part("notifications", write_notes)

        def read_notes() -> None:
            c = Consumer({**config.rdkafka("consumer"), **feed.READER_SETTINGS})
            c.assign([TopicPartition(notes, 0, 0)])
            got = 0
            while got < n_notes:
                got += sum(m.error() is None for m in c.consume(num_messages=5000, timeout=1.0))
            c.close()
        part("notifications read", read_notes)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--per-trigger", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm", type=int, default=2, help="rounds of the current settings first, not reported")
    ap.add_argument("--variant", action="append", default=[], help="name or name=prop=value,prop=value")
    ap.add_argument("--jvm-option", action="append", default=[],
                    help="one more option of the broker's JVM (e.g. -XX:TieredStopAtLevel=1)")
    args = ap.parse_args(argv)
    variants = dict(map(parse_variant, args.variant or ["current"]))
    raws = [orjson.dumps({"id": i, **e}) for i, e in enumerate(feed.workload_events(args.events, 7))]
    from streaming.kafka import broker as embedded

    embedded.JVM_OPTIONS = (*embedded.JVM_OPTIONS, *args.jvm_option)
    with embedded.EmbeddedBroker() as broker:
        pid = broker.pids["kafka"]
        started = cpu_s(pid)
        for w in range(args.warm):
            warm = measure(broker.bootstrap_servers, pid, raws, args.per_trigger, {}, f"warm{w}")
            print(f"warm-up {w}: " + ", ".join(f"{k} {v['broker_us']:.2f}" for k, v in warm.items()), flush=True)
        b0 = cpu_s(pid)
        time.sleep(5)
        idle = (cpu_s(pid) - b0) / 5
        print(f"broker idle {idle * 1e3:.1f} ms of CPU per s; load {kit.load_avg()}", flush=True)
        for rnd in range(args.rounds):
            for name in kit.interleaved(list(variants), rnd):
                got = measure(broker.bootstrap_servers, pid, raws, args.per_trigger, variants[name], f"{name}-{rnd}")
                print(f"round {rnd} {name}: broker us/event " + ", ".join(f"{k} {v['broker_us']:.2f}" for k, v in got.items())
                      + f" (all {sum(v['broker_us'] for v in got.values()):.2f}); client us/event "
                      + ", ".join(f"{k} {v['client_us']:.2f}" for k, v in got.items())
                      + "; wall s " + ", ".join(f"{v['wall_s']:.1f}" for v in got.values())
                      + f"; load {kit.load_avg()}", flush=True)
        print(f"the broker's CPU from its start (JVM options {list(embedded.JVM_OPTIONS)}): {started:.2f} s to answer, "
              f"{cpu_s(pid) - started:.2f} s since; load {kit.load_avg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Publish events to Kafka from a JSONL file or a workload generator, at a target rate.

Examples::

    python -m scripts.publish --bootstrap 127.0.0.1:9092 --file events.jsonl --rate 5000
    python -m scripts.publish --bootstrap 127.0.0.1:9092 --workload stock --n-events 100000
    python -m scripts.publish ... --valid-for 600   # events valid for ten minutes
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Sequence

import orjson
from kafka import KafkaProducer
from tqdm import tqdm

from scripts.workloads import WORKLOADS
from streaming.cli import exit_with
from streaming.config import ConfigError
from streaming.config_sources import add_arguments, from_arguments
from streaming.kafka.refusals import kafka_python_refusals


def from_file(path: str) -> Iterator[bytes]:
    """Non-empty lines of a JSONL file, each checked to be a JSON object."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{number}: an event must be a JSON object")
            yield line


def from_workload(name: str, n_events: int, seed: int) -> Iterator[bytes]:
    """Events of a named generator of :mod:`scripts.workloads`, with an ``id``."""
    from scripts.workloads import generate

    workload = generate(name, n_subs=1, n_events=n_events, seed=seed)
    for i, event in enumerate(workload.events):
        yield orjson.dumps({"id": f"{name}-{seed}-{i}", **event})


def with_validity(values: Iterator[bytes], field: str, seconds: float) -> Iterator[bytes]:
    for value in values:
        obj = orjson.loads(value)
        obj[field] = time.time() + seconds
        yield orjson.dumps(obj)


def publish(producer: KafkaProducer, topic: str, values: Iterator[bytes], rate: float, total: int | None,
            key_field: str | None = None) -> int:
    """Send ``values`` paced to ``rate`` per second (0: as fast as possible); returns how many."""
    start = time.perf_counter()
    sent = 0
    with tqdm(total=total, unit="ev", desc=f"-> {topic}", file=sys.stderr) as bar:
        for value in values:
            key = None
            if key_field:
                k = orjson.loads(value).get(key_field)
                key = None if k is None else str(k).encode("utf-8")
            producer.send(topic, value=value, key=key)
            sent += 1
            if rate > 0:
                ahead = sent / rate - (time.perf_counter() - start)
                if ahead > 0.002:
                    time.sleep(ahead)
            if sent % 1000 == 0:
                bar.update(1000)
        bar.update(sent % 1000)
        producer.flush()
    elapsed = time.perf_counter() - start
    print(f"sent {sent} events to {topic} in {elapsed:.1f} s ({sent / max(elapsed, 1e-9):,.0f}/s)", file=sys.stderr)
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.publish", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="JSONL file of events (one JSON object per line)")
    source.add_argument("--workload", choices=sorted(WORKLOADS), help="generator name from scripts.workloads")
    parser.add_argument("--n-events", type=int, default=10_000, help="events to generate (--workload)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=0.0, help="events per second (0: as fast as possible)")
    parser.add_argument("--topic", default=None, help="target topic (default: the configured events topic)")
    parser.add_argument("--key-field", default=None, help="event field to use as the record key")
    parser.add_argument("--valid-for", type=float, default=None, metavar="SECONDS",
                        help="set the validity end field to now + SECONDS")
    args = parser.parse_args(argv)
    try:
        settings, client = from_arguments(args)
    except ConfigError as exc:
        parser.error(str(exc))
    if args.file and not os.path.isfile(args.file):
        parser.error(f"--file {args.file}: no such file")
    values = from_file(args.file) if args.file else from_workload(args.workload, args.n_events, args.seed)
    if args.valid_for is not None:
        values = with_validity(values, settings.match.valid_until_field, args.valid_for)
    with kafka_python_refusals(client):
        producer = KafkaProducer(**client.kafka_python("producer"), acks="all", linger_ms=5)
        try:
            publish(producer, args.topic or settings.kafka.events_topic, values, args.rate,
                    None if args.file else args.n_events, args.key_field)
        except ValueError as exc:  # a line of the file that is not an event: the lines before it were sent
            print(f"publish: {exc}; the events before that line were sent", file=sys.stderr)
            return 2
        finally:
            producer.close(timeout=30)
    return 0


if __name__ == "__main__":
    exit_with(main)

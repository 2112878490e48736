"""Follow notifications (or error records) as a consumer group member, pretty or as JSON lines.

Both kinds of notification print: a match (``subscription <- event id``, the event) and a
Cayuga pattern (``pattern subscription <- events [ids]``, its time span and attributes).

Replay duplicates (same notification or error record id) are dropped unless ``--keep-duplicates``.
Without ``--from-beginning`` a group goes on from the offsets it committed (a new group from
the end of the topic); with it, every partition is read from its start whatever the group
committed (:class:`FromBeginning`), so a second ``--from-beginning`` run prints the same
records again. The group consumer uses a short ``max.poll.interval.ms`` so that joining a group on
the embedded broker does not wait for the whole default rebalance timeout.

Examples::

    python -m scripts.follow --bootstrap 127.0.0.1:9092 --group me
    python -m scripts.follow --errors --from-beginning --json
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import orjson
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition

from streaming.cli import exit_with
from streaming.config import ConfigError
from streaming.config_sources import add_arguments, from_arguments
from streaming.notifications import Deduplicator
from streaming.tenants import topic_of

GROUP_SETTINGS = {"max_poll_interval_ms": 5000, "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}


class FromBeginning(ConsumerRebalanceListener):
    """Moves each partition to its earliest offset the first time the group gives it to this
    consumer, whatever the group committed (the consumer's ``auto_offset_reset`` only applies
    to a group without committed offsets); a partition given back after a later rebalance goes
    on from where it was."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.started: set[TopicPartition] = set()

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        new = [tp for tp in assigned if tp not in self.started]
        if new:
            self.consumer.seek_to_beginning(*new)
            self.started.update(new)


def pretty(doc: dict, errors: bool) -> str:
    """One readable line: an error record, a match notification or a pattern notification."""
    if errors:
        where = f"{doc.get('topic')}/{doc.get('partition')}@{doc.get('offset')}"
        return f"[{doc.get('stage')}] {where}: {doc.get('reason')}  raw={doc.get('raw', '')[:120]!r}"
    if doc.get("kind") == "pattern":  # streaming.notifications.pattern
        witness = doc.get("witness") or {}
        events = ", ".join(str(e) for e in witness.get("events", []))
        attrs = orjson.dumps(witness.get("attrs", {})).decode()
        return (f"pattern {doc.get('subscription')} <- events [{events}] "
                f"(t {witness.get('t0')}..{witness.get('t1')}) {attrs}")
    when = time.strftime("%H:%M:%S", time.localtime(doc.get("matched_ms", 0) / 1000))
    lag = ""
    if doc.get("event_time_ms") and doc.get("matched_ms"):
        lag = f" (+{doc['matched_ms'] - doc['event_time_ms']} ms)"
    event = orjson.dumps(doc["event"]).decode() if "event" in doc else ""
    retro = " retro" if doc.get("retro") else ""
    return f"{when}{lag} {doc.get('subscription')} <- {doc.get('event_id')}{retro} {event}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.follow", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--group", default="follow", help="consumer group id")
    parser.add_argument("--errors", action="store_true", help="follow the errors topic instead")
    parser.add_argument("--topic", default=None, help="topic to follow (overrides the configured one)")
    parser.add_argument("--tenant", default=None, help="follow this tenant's topic (<topic>.<tenant>)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="read every partition from its earliest offset, whatever the group committed "
                             "(without it: from the group's committed offsets, a new group from the end)")
    parser.add_argument("--json", action="store_true", help="print the records as JSON lines")
    parser.add_argument("--subscription", action="append", default=[], help="only these subscription ids")
    parser.add_argument("--keep-duplicates", action="store_true")
    parser.add_argument("--max", type=int, default=0, help="stop after this many records (0: never)")
    parser.add_argument("--idle-timeout", type=float, default=0.0, help="stop after this many idle seconds")
    args = parser.parse_args(argv)
    try:
        settings, client = from_arguments(args)
    except ConfigError as exc:
        parser.error(str(exc))
    topic = args.topic or (settings.kafka.errors_topic if args.errors else settings.kafka.notifications_topic)
    if args.tenant:
        topic = topic_of(topic, args.tenant)
    consumer = KafkaConsumer(**client.kafka_python("consumer"), group_id=args.group,
                             auto_offset_reset="earliest" if args.from_beginning else "latest", **GROUP_SETTINGS)
    if args.from_beginning:
        consumer.subscribe([topic], listener=FromBeginning(consumer))
    else:
        consumer.subscribe([topic])
    dedup = None if args.keep_duplicates else Deduplicator()
    wanted = set(args.subscription)
    shown = 0
    idle_since = time.monotonic()
    try:
        while True:
            batch = consumer.poll(timeout_ms=500)
            if not batch:
                if args.idle_timeout and time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            for records in batch.values():
                for record in records:
                    try:
                        doc = orjson.loads(record.value)
                    except orjson.JSONDecodeError:
                        print(f"unreadable record at {record.partition}@{record.offset}", file=sys.stderr)
                        continue
                    if wanted and doc.get("subscription") not in wanted:
                        continue
                    if dedup is not None and not dedup.fresh(doc.get("id", "")):
                        continue
                    print(record.value.decode("utf-8") if args.json else pretty(doc, args.errors), flush=True)
                    shown += 1
                    if args.max and shown >= args.max:
                        return 0
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        if dedup is not None and dedup.duplicates:
            print(f"dropped {dedup.duplicates} replay duplicate(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    exit_with(main)

"""The "patterns" queries: stateful Cayuga subscriptions over the events topic.

Two streaming queries share a checkpoint directory:

* ``pattern-subscriptions`` reads the subscriptions topic and keeps the *pattern
  registry*: records ``{"op": "upsert", "id": ..., "pattern": "<CEL>"}`` register a
  stateful subscription (compiled first: a bad one becomes an error record), ``{"op":
  "delete", "id": ...}`` or a tombstone removes one. Records without ``"pattern"`` are
  the match job's and are left alone. Each micro-batch that changes something writes
  the next registry version (a whole JSON file, written atomically and recorded with
  its batch id so a replayed batch is not applied twice) under the checkpoint location
  (:mod:`streaming.storage`: a local path, or a shared file system such as HDFS or S3 on
  a cluster, where the executors read it; a registry they cannot find stops the query).
* ``patterns`` reads the events topic, parses each event as the match query does
  (:func:`streaming.records.read_event`: the match query reports a refused event, this
  query skips it; its own error records, stages ``pattern-event`` and ``pattern-late``,
  are about the reserved fields and late events), and keys it by the partition attribute of the subscriptions
  (:func:`matchers.cayuga.compiler.partition_attribute`: ``name`` for
  ``$2.name = $1.name``, the values hashed into ``key_buckets`` keys ``name#17``; one key
  ``*`` for subscriptions without one; an event goes to every key it belongs to). ``applyInPandasWithState`` holds each key's automaton
  instances in Spark's keyed state, so they survive a restart from the checkpoint; an
  event-time timeout drops instances whose ``DUR`` bound has passed. Every completed
  pattern is a notification carrying its witness (output attributes and the ids of the
  events that built it) and a deterministic id.

Reserved event fields (:class:`PatternSettings`): the stream name (``stream``), the end
time ``t1`` (``ts``, integer ticks) and optionally the start time ``t0`` (``ts_start``),
the id (``id``; else ``topic/partition/offset``). Events of one key are processed in
order of ``(t1, partition, offset)``; an event ending before one already processed for
its key is late and becomes an error record. Events wait in the key's state until the
event-time watermark passes them (the last events of a stream complete once a later
event, e.g. a heartbeat, moves the watermark).

A subscription registered at registry version ``v`` sees the instances started while
the registry was at ``v`` or later (in-flight instances of shared prefixes are not
reported to it), exactly as if it had its own automaton.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd

from matchers.cayuga.algebra import Event
from matchers.cayuga.compiler import chains, partition_attribute
from matchers.cayuga.engine import Engine
from matchers.cayuga.language import parse
from matchers.errors import PubSubError
from streaming.config import LimitsSettings
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    UPSERT,
    ErrorRecord,
    Position,
    error,
    read_envelope,
    read_event,
)
from streaming.registry import RegistryError
from streaming.storage import Directory, join

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming.patterns")

ALL_KEY = "*"
NO_KEY = ""
OUT_DDL = "key binary, value binary, topic string"
STATE_DDL = "instances binary, clock long, buffer binary"
ROWS_DDL = (
    "gkey string, ts timestamp, t0 long, t1 long, eid string, stream string, attrs binary, "
    "partition int, offset long"
)


@dataclass(frozen=True)
class PatternSettings:
    """Settings of the patterns queries.

    Parameters
    ----------
    stream_field, time_field, start_field, id_field : reserved event fields.
    default_stream : stream of an event without a stream field.
    time_unit_ms : milliseconds per tick of the time fields (event time for Spark).
    watermark_delay : how far (event time) events of one key may arrive out of order;
        an event is processed once the watermark passes it, and Spark drops an event
        that arrives after the watermark has passed it.
    max_keys_per_event : bound on the keys (partition attributes) one event goes to.
    key_buckets : state keys per partition attribute: the values of the attribute are
        hashed into this many buckets, each one engine and one keyed state (fewer calls
        of the stateful function per micro-batch; a bucket holding several values is
        still exact). Changing it orphans the state of a running job.
    """

    stream_field: str = "stream"
    time_field: str = "ts"
    start_field: str = "ts_start"
    id_field: str = "id"
    default_stream: str = "events"
    time_unit_ms: int = 1000
    watermark_delay: str = "5 seconds"
    max_keys_per_event: int = 64
    key_buckets: int = 64


# ---------------------------------------------------------------- pattern registry


class PatternRegistry:
    """Versioned stateful subscriptions: ``v<version>.json`` per version under a URI or path.

    Each file holds the whole set ``{id: [text, since_version]}`` and the batch id that
    made it; version 0 (empty) is written when the registry is created. The directory
    lives under the checkpoint location and survives restarts.
    """

    def __init__(self, directory: str | Path):
        self.dir = Directory(directory)
        self.dir.make()
        if not any(_VERSION_FILE.match(n) for n in self.dir.names()):
            self._write(0, -1, {})

    def _write(self, version: int, batch_id: int, patterns: dict[str, list]) -> None:
        data = orjson.dumps({"version": version, "batch_id": batch_id, "patterns": patterns})
        self.dir.write(f"v{version:012d}.json", data)

    def latest(self) -> tuple[int, int, dict[str, list]]:
        """``(version, batch id, patterns)`` of the newest version."""
        return load_registry(self.dir.uri)

    def apply(self, batch_id: int, changes: list[tuple[str, str, str | None]]) -> int:
        """Write the next version with ``(op, id, text)`` changes; idempotent per batch."""
        version, last_batch, patterns = self.latest()
        if batch_id <= last_batch or not changes:
            return version
        patterns = dict(patterns)
        new_version = version + 1
        for op, sub_id, text in changes:
            if op == DELETE:
                patterns.pop(sub_id, None)
            else:
                patterns[sub_id] = [text, new_version]
        self._write(new_version, batch_id, patterns)
        return new_version


_VERSION_FILE = re.compile(r"^v(\d{12})\.json$")
_registry_cache: dict[str, tuple[int, tuple[int, int, dict[str, list]]]] = {}


def load_registry(directory: str) -> tuple[int, int, dict[str, list]]:
    """Newest registry version in ``directory``, a URI or path (cached per process by version).

    Raises
    ------
    RegistryError
        If there is no registry there (a missing registry is never read as an empty one).
    """
    store = Directory(directory)
    try:
        names = store.names()
    except FileNotFoundError:
        names = []
    versions = [int(m.group(1)) for n in names if (m := _VERSION_FILE.match(n))]
    if not versions:
        raise RegistryError(f"no pattern registry at {store.uri} (is the checkpoint location shared with the executors?)")
    v = max(versions)
    cached = _registry_cache.get(directory)
    if cached is not None and cached[0] == v:
        return cached[1]
    obj = orjson.loads(store.read(f"v{v:012d}.json"))
    value = (v, int(obj["batch_id"]), obj["patterns"])
    _registry_cache[directory] = (v, value)
    return value


def parse_pattern_change(
    key: bytes | None, value: bytes | None, position: Position, known: set[str],
    limits: LimitsSettings = DEFAULT_LIMITS,
) -> tuple[str, str, str | None] | ErrorRecord | None:
    """One subscriptions record as a pattern change, an error, or ``None`` (not a pattern).

    A record whose envelope the match query refuses (:func:`streaming.records.read_envelope`)
    is ``None``: that query reports it.
    """
    stage = "pattern"
    envelope = read_envelope(key, value, position, limits)
    if isinstance(envelope, ErrorRecord):
        return None
    op, sub_id, obj = envelope
    if op == DELETE or obj is None or "pattern" not in obj:
        # a delete, or a boolean subscription (the match job's) replacing a pattern of that id
        return (DELETE, sub_id, None) if sub_id in known else None
    text = obj["pattern"]
    if not isinstance(text, str):
        return error(stage, value, position, '"pattern" must be a string (a CEL expression)', key)
    try:
        chains(parse(text))
    except PubSubError as exc:
        return error(stage, value, position, f"subscription {sub_id!r}: {exc}", key)
    except (ValueError, TypeError, RecursionError, OverflowError, UnicodeError) as exc:
        return error(stage, value, position, f"subscription {sub_id!r}: {type(exc).__name__}: {exc}", key)
    return (UPSERT, sub_id, text)


def apply_pattern_records(registry: PatternRegistry, batch_id: int, rows: Iterable[tuple],
                          limits: LimitsSettings = DEFAULT_LIMITS) -> tuple[int, list[ErrorRecord]]:
    """Apply a batch of subscriptions records ``(key, value, topic, partition, offset)``.

    Returns the registry version after the batch and the error records.
    """
    _, _, patterns = registry.latest()
    known = set(patterns)
    changes: list[tuple[str, str, str | None]] = []
    errors: list[ErrorRecord] = []
    for key, value, topic, partition, offset in rows:
        out = parse_pattern_change(key, value, Position(topic, partition, offset), known, limits)
        if out is None:
            continue
        if isinstance(out, ErrorRecord):
            errors.append(out)
            continue
        changes.append(out)
        if out[0] == DELETE:
            known.discard(out[1])
        else:
            known.add(out[1])
    return registry.apply(batch_id, changes), errors


# ---------------------------------------------------------------- events to keyed rows

_partition_cache: dict[tuple[str, int], tuple[list[str], bool]] = {}


def partition_keys(registry_dir: str) -> tuple[int, list[str], bool]:
    """Registry version, the partition attributes in use, and whether any pattern has none."""
    version, _, patterns = load_registry(registry_dir)
    cached = _partition_cache.get((registry_dir, version))
    if cached is None:
        attrs: set[str] = set()
        unkeyed = False
        for text, _since in patterns.values():
            a = partition_attribute(chains(parse(text)))
            if a is None:
                unkeyed = True
            else:
                attrs.add(a)
        cached = (sorted(attrs), unkeyed)
        _partition_cache[(registry_dir, version)] = cached
    return version, cached[0], cached[1]


def group_key(attr: str, value: Any, buckets: int) -> str:
    """The state key of the events whose ``attr`` is ``value``: ``attr#bucket``, the bucket
    a stable hash (CRC-32 of the value's JSON, numbers as floats) modulo ``buckets``."""
    v = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return f"{attr}#{zlib.crc32(orjson.dumps(v)) % buckets}"


def to_keyed_rows(
    batches: Iterator[pd.DataFrame], registry_dir: str, settings: PatternSettings, errors_topic: str,
    kafka_config: dict, limits: LimitsSettings = DEFAULT_LIMITS,
) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` body: Kafka event records to rows keyed by partition value.

    An event the match query refuses is skipped (that query reports it); one whose
    reserved fields are wrong becomes a ``pattern-event`` error record sent straight to
    the errors topic (at least once: a retried task may send it again, with the same id).
    Neither reaches the keyed state, so neither can move the event-time watermark.
    """
    for pdf in batches:
        _, attrs_in_use, unkeyed = partition_keys(registry_dir)
        out: list[tuple] = []
        errors: list[ErrorRecord] = []
        for value, topic, partition, offset, timestamp in zip(
            pdf["value"], pdf["topic"], pdf["partition"], pdf["offset"], pdf["timestamp"], strict=True
        ):
            pos = Position(topic, int(partition), int(offset))
            row = _event_row(value, pos, timestamp, settings, limits)
            if row is None:
                continue
            if isinstance(row, ErrorRecord):
                errors.append(row)
                continue
            t0, t1, eid, stream, attrs = row
            ts = pd.Timestamp(event_time_ms(t1, settings), unit="ms", tz="UTC")
            blob = orjson.dumps(attrs)
            keys = [group_key(a, attrs[a], settings.key_buckets) for a in attrs_in_use if a in attrs]
            if unkeyed:
                keys.append(ALL_KEY)
            if not keys:
                keys.append(NO_KEY)  # still moves the event-time watermark
            for k in keys[: settings.max_keys_per_event]:
                out.append((k, ts, t0, t1, eid, stream, blob, pos.partition, pos.offset))
        if errors:
            send_errors(kafka_config, errors_topic, [e.to_json() for e in errors])
        yield pd.DataFrame(out, columns=["gkey", "ts", "t0", "t1", "eid", "stream", "attrs", "partition", "offset"])


def event_time_ms(tick: int, settings: PatternSettings) -> int:
    """Spark event time of a tick: ``(tick + 1)`` units, so that tick 0 is not dropped as
    "not after" the initial watermark (0); the watermark ``w`` has passed tick
    ``w // unit - 1``."""
    return (tick + 1) * settings.time_unit_ms


def send_errors(kafka_config: dict, topic: str, values: list[bytes]) -> None:
    """Send error records to ``topic`` and wait for their acknowledgement."""
    import pyarrow as pa

    from streaming.kafka.config import config_client_kwargs
    from streaming.kafka.sink import produce_batches

    batch = pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})
    produce_batches(config_client_kwargs(kafka_config, "producer"), topic, iter([batch]))


PATTERN_EVENT = "pattern-event"
"""Stage of an event whose reserved fields the patterns query cannot use."""
PATTERN_LATE = "pattern-late"
"""Stage of an event that arrived after a later one of its key was processed."""


def _event_row(value, pos: Position, timestamp, settings: PatternSettings, limits: LimitsSettings):
    """``(t0, t1, id, stream, attrs)`` of an event, an error record, or ``None`` (refused: the match query reports it)."""
    read = read_event(value, limits)
    if read.obj is None:
        return None
    attrs = dict(read.flat)
    stream = attrs.pop(settings.stream_field, settings.default_stream)
    if not isinstance(stream, str):
        return error(PATTERN_EVENT, value, pos, f"the stream field {settings.stream_field!r} must be a string")
    t1 = attrs.pop(settings.time_field, None)
    if t1 is None:
        t1 = int(pd.Timestamp(timestamp).value // 1_000_000 // settings.time_unit_ms) if timestamp is not None else 0
    t0 = attrs.pop(settings.start_field, t1)
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and float(t).is_integer() for t in (t0, t1)):
        return error(PATTERN_EVENT, value, pos,
                     f"{settings.time_field!r} and {settings.start_field!r} must be integer ticks")
    t0, t1 = int(t0), int(t1)
    if t0 > t1:
        return error(PATTERN_EVENT, value, pos, f"{settings.start_field!r} ({t0}) is after {settings.time_field!r} ({t1})")
    if t0 < 0:
        return error(PATTERN_EVENT, value, pos, f"{settings.start_field!r} and {settings.time_field!r} must not be negative")
    eid = attrs.pop(settings.id_field, None)
    if not isinstance(eid, (str, int, float)) or isinstance(eid, bool):
        eid = f"{pos.topic}/{pos.partition}/{pos.offset}"
    return t0, t1, str(eid if not isinstance(eid, float) or not eid.is_integer() else int(eid)), stream, _ints(attrs)


def _ints(attrs: dict[str, Any]) -> dict[str, Any]:
    """Flattened numbers are floats; integral ones go back to ints for readable witnesses."""
    return {k: (int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else v) for k, v in attrs.items()}


# ---------------------------------------------------------------- keyed state

_engines: dict[tuple[str, int, str | None], Engine] = {}


def engine_for(registry_dir: str, gkey: str) -> Engine:
    """The worker's compiled automaton of the subscriptions partitioned like ``gkey``."""
    version, _, patterns = load_registry(registry_dir)
    attr = None if gkey == ALL_KEY else gkey.rsplit("#", 1)[0]
    ck = (registry_dir, version, attr)
    eng = _engines.get(ck)
    if eng is None:
        for old in [k for k in _engines if k[0] == registry_dir and k[1] != version]:
            del _engines[old]
        eng = Engine()
        for sub_id, (text, since) in sorted(patterns.items()):
            if partition_attribute(chains(parse(text))) == attr:
                eng.add(sub_id, text, since=since)
        eng.epoch = version
        _engines[ck] = eng
    return eng


def notification(sub_id: str, match, gkey: str) -> bytes:
    """A pattern notification; its id is a hash of the subscription and the witness."""
    text = "\x1f".join((sub_id, *match.witness))
    nid = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    return orjson.dumps({
        "id": nid,
        "subscription": sub_id,
        "kind": "pattern",
        "key": gkey,
        "witness": {"events": list(match.witness), "attrs": match.attrs, "t0": match.t0, "t1": match.t1},
    })


def advance(key: tuple, pdfs: Iterator[pd.DataFrame], state, registry_dir: str, settings: PatternSettings,
            notifications_topic: str, errors_topic: str, events_topic: str = "") -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` body: one key's instances over its events.

    Lifecycle: new events join the key's buffer; the buffered events that the
    event-time watermark has passed are processed in order of ``(t1, partition,
    offset)`` (Kafka partitions interleave freely up to the watermark delay); instances
    whose ``DUR`` bound the watermark has passed are dropped. The state keeps the
    instances and the buffer; the event-time timeout is set to the next buffered event
    or ``DUR`` expiry, so a key that receives no more events still completes and
    expires. A key with neither instances nor buffer has no state.
    """
    gkey = key[0]
    rows: list[tuple[bytes | None, bytes, str]] = []
    if gkey == NO_KEY:
        yield pd.DataFrame(rows, columns=["key", "value", "topic"])
        return
    eng = engine_for(registry_dir, gkey)
    unit = settings.time_unit_ms
    buffer: list = []
    if state.exists:
        blob, clock, buf = state.get
        eng.load_instances(orjson.loads(blob), clock)
        buffer = orjson.loads(buf)
    else:
        eng.load_instances((), None)
    if not state.hasTimedOut:
        for pdf in pdfs:
            for t0, t1, eid, stream, attrs, part, off in zip(
                pdf["t0"], pdf["t1"], pdf["eid"], pdf["stream"], pdf["attrs"], pdf["partition"], pdf["offset"],
                strict=True,
            ):
                buffer.append([int(t1), int(part), int(off), int(t0), eid, stream, bytes(attrs).decode()])
    watermark_ms = state.getCurrentWatermarkMs()
    now = watermark_ms // unit - 1  # the last tick the watermark has passed
    buffer.sort(key=lambda b: (b[0], b[1], b[2]))
    ready = 0
    while ready < len(buffer) and buffer[ready][0] <= now:
        ready += 1
    for t1, part, off, t0, eid, stream, attrs in buffer[:ready]:
        if eng.clock is not None and t1 < eng.clock:
            err = error(PATTERN_LATE, attrs.encode(), Position(events_topic, part, off),
                        f"late event {eid!r} for key {gkey}: ends at {t1}, before the last processed ({eng.clock})")
            rows.append((None, err.to_json(), errors_topic))
            continue
        for m in eng.process(Event(eid, stream, t0, t1, orjson.loads(attrs))):
            rows.append((m.sub_id.encode(), notification(m.sub_id, m, gkey), notifications_topic))
    buffer = buffer[ready:]
    eng.expire(now)
    instances = eng.export_instances()
    if instances or buffer:
        state.update((orjson.dumps(instances), eng.clock, orjson.dumps(buffer)))
        wake = [event_time_ms(b[0], settings) for b in buffer[:1]]
        nxt = eng.next_expiry()
        if nxt is not None:
            wake.append(event_time_ms(nxt + 1, settings))
        wake = [w for w in wake if w > watermark_ms]
        if wake:
            state.setTimeoutTimestamp(min(wake))
    else:
        state.remove()
    eng.clear_instances()
    yield pd.DataFrame(rows, columns=["key", "value", "topic"])


# ---------------------------------------------------------------- queries


def registry_dir(checkpoint_dir: str | Path) -> str:
    return join(checkpoint_dir, "pattern-registry")


def start_subscriptions_query(spark: SparkSession, kafka_config: dict, subscriptions_topic: str,
                              errors_topic: str, checkpoint_dir: str | Path,
                              trigger: str = "1 second", limits: LimitsSettings = DEFAULT_LIMITS) -> StreamingQuery:
    """The query keeping the pattern registry from the subscriptions topic."""
    from streaming import kafka

    kafka.register(spark)
    registry = PatternRegistry(registry_dir(checkpoint_dir))
    config = dict(kafka_config)

    def on_batch(df: DataFrame, batch_id: int) -> None:
        rows = [(r.key, r.value, r.topic, r.partition, r.offset)
                for r in df.select("key", "value", "topic", "partition", "offset").collect()]
        version, errors = apply_pattern_records(registry, batch_id, rows, limits)
        if errors:
            err_df = spark.createDataFrame([(None, e.to_json(), errors_topic) for e in errors], OUT_DDL)
            kafka.write_batch(err_df, config)
        log.info("pattern registry at version %d after batch %d (%d errors)", version, batch_id, len(errors))

    src = kafka.read_stream(spark, config, subscriptions_topic, starting="earliest")
    return (src.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", join(checkpoint_dir, "pattern-subscriptions"))
            .queryName("pattern-subscriptions").trigger(processingTime=trigger).start())


def start_patterns_query(spark: SparkSession, kafka_config: dict, events_topic: str, notifications_topic: str,
                         errors_topic: str, checkpoint_dir: str | Path, settings: PatternSettings | None = None,
                         trigger: str = "1 second", max_per_trigger: int | None = None,
                         limits: LimitsSettings = DEFAULT_LIMITS) -> StreamingQuery:
    """The stateful query: events keyed by partition value, instances in keyed state."""
    from functools import partial

    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming import kafka

    kafka.register(spark)
    settings = settings or PatternSettings()
    rdir = registry_dir(checkpoint_dir)
    PatternRegistry(rdir)  # exists before the executors read it
    src = kafka.read_stream(spark, dict(kafka_config), events_topic, starting="earliest",
                            max_per_trigger=max_per_trigger)
    rows = src.select("value", "topic", "partition", "offset", "timestamp").mapInPandas(
        partial(to_keyed_rows, registry_dir=rdir, settings=settings, errors_topic=errors_topic,
                kafka_config=dict(kafka_config), limits=limits), ROWS_DDL
    )
    out = (rows.withWatermark("ts", settings.watermark_delay).groupBy("gkey").applyInPandasWithState(
        partial(advance, registry_dir=rdir, settings=settings, notifications_topic=notifications_topic,
                errors_topic=errors_topic, events_topic=events_topic),
        OUT_DDL, STATE_DDL, "append", GroupStateTimeout.EventTimeTimeout,
    ))
    return (out.writeStream.format("kafka-py").options(**kafka_options(kafka_config))
            .option("checkpointLocation", join(checkpoint_dir, "patterns"))
            .queryName("patterns").trigger(processingTime=trigger).outputMode("append").start())


def kafka_options(config: dict) -> dict[str, str]:
    from streaming.kafka.config import options_from_config

    return options_from_config(config)


def main(argv: list[str] | None = None) -> int:
    """Run both patterns queries until killed: ``python -m streaming.patterns --bootstrap HOST:PORT ...``."""
    p = argparse.ArgumentParser(prog="python -m streaming.patterns", description=main.__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--events", default="events")
    p.add_argument("--subscriptions", default="subscriptions")
    p.add_argument("--notifications", default="notifications")
    p.add_argument("--errors", default="errors")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--trigger", default="1 second")
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from streaming.spark import get_session

    spark = get_session(app_name="pubsub-patterns", master=args.master)
    config = {"bootstrap_servers": args.bootstrap}
    q1 = start_subscriptions_query(spark, config, args.subscriptions, args.errors, args.checkpoint, args.trigger)
    q2 = start_patterns_query(spark, config, args.events, args.notifications, args.errors, args.checkpoint,
                              trigger=args.trigger)
    print(json.dumps({"started": [q1.name, q2.name]}), flush=True)
    spark.streams.awaitAnyTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())

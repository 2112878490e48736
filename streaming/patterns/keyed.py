"""Event records to rows keyed for the keyed state (the ``mapInArrow`` before the shuffle).

An event goes to the state key of each partition attribute in use that it carries
(:func:`group_key`: ``name#17``, the value hashed into ``patterns.key_buckets``), to
:data:`~streaming.patterns.registry.ALL_KEY` when some pattern has no partition
attribute, and otherwise to none (it still moves the event-time watermark: see
:func:`keyed_rows`). Events are read as the match query reads them
(:func:`streaming.records.read_event`): an event it refuses is its to report and is
skipped here, so a bad event yields one error record across both queries. This query
reports only what only it checks: the reserved fields (stage ``pattern-event``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa

from matchers.collector import long_lived
from matchers.events import Rows
from streaming.config import Settings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.patterns.registry import ALL_KEY, partition_keys
from streaming.records import SCALARS, ErrorRecord, Position, error, read_event

NO_KEY = ""
PATTERN_EVENT = "pattern-event"
"""Stage of an event whose reserved fields the patterns query cannot use."""

ROWS_SCHEMA = pa.schema([
    ("gkey", pa.string()), ("part", pa.int32()), ("t0", pa.int64()), ("t1", pa.int64()),
    ("eid", pa.string()), ("stream", pa.string()), ("attrs", pa.binary()), ("partition", pa.int32()),
    ("offset", pa.int64()),
])
"""A keyed row: the state key ``gkey`` and its state partition ``part``
(:func:`~streaming.patterns.state.partition_of`), the event; or a partition's mark
(:func:`partition_marks`)."""
ROWS_DDL = ("gkey string, part int, t0 long, t1 long, eid string, stream string, attrs binary, "
            "partition int, offset long")


def group_key(attr: str, value: Any, buckets: int) -> str:
    """The state key of the events whose ``attr`` is ``value``: ``attr#bucket``, the bucket
    a stable hash (CRC-32 of the value's JSON, numbers as floats) modulo ``buckets``."""
    v = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return f"{attr}#{zlib.crc32(orjson.dumps(v)) % buckets}"


def event_time_ms(tick: int, unit_ms: int) -> int:
    """Event time of a tick: ``(tick + 1)`` units, so that tick 0 is after the initial
    watermark (0); the watermark ``w`` has passed tick ``w // unit - 1``."""
    return (tick + 1) * unit_ms


def keyed_rows(batches: Iterator[pa.RecordBatch], registry_dir: str, settings: Settings,
               kafka: KafkaClientConfig) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: Kafka event records (``value, topic, partition, offset, timestamp``)
    to :data:`ROWS_SCHEMA` rows, then one :data:`NO_KEY` row per state partition whose ``t1``
    is the latest event end this task read (null: none), so that every partition's task
    learns the batch's latest event time (the watermark) and runs even without events;
    ``pattern-event`` error records are produced to the errors topic here (at least once: a
    retried task sends the same record, with the same id)."""
    from streaming.kafka.sink import produce_batches
    from streaming.patterns.state import partition_of

    p = settings.patterns
    buckets, cap, parts_n = p.key_buckets, p.max_keys_per_event, p.state_partitions
    latest: int | None = None
    with long_lived():  # the docstring of streaming.patterns.queries (the collector)
        for rb in batches:
            _, attrs_in_use, unkeyed = partition_keys(registry_dir)
            cols: tuple[list, ...] = ([], [], [], [], [], [], [], [], [])
            gkeys, states, t0s, t1s, eids, streams, blobs, parts, offs = cols
            errors: list[ErrorRecord] = []
            values = rb.column("value").to_pylist()
            topics = rb.column("topic").to_pylist()
            partitions = rb.column("partition").to_pylist()
            offsets = rb.column("offset").to_pylist()
            kafka_us = rb.column("timestamp").cast(pa.int64()).to_pylist()
            for value, topic, partition, offset, us in zip(values, topics, partitions, offsets, kafka_us, strict=True):
                pos = Position(topic, partition, offset)
                row = read_row(value, pos, us, settings)
                if row is None:
                    continue
                if isinstance(row, ErrorRecord):
                    errors.append(row)
                    continue
                t0, t1, eid, stream, attrs = row
                latest = t1 if latest is None or t1 > latest else latest
                keys = [group_key(a, attrs[a], buckets) for a in attrs_in_use if a in attrs]
                if unkeyed:
                    keys.append(ALL_KEY)
                blob = orjson.dumps(attrs)
                for k in keys[:cap]:
                    gkeys.append(k)
                    states.append(partition_of(k, parts_n))
                    t0s.append(t0)
                    t1s.append(t1)
                    eids.append(eid)
                    streams.append(stream)
                    blobs.append(blob)
                    parts.append(partition)
                    offs.append(offset)
            if errors:
                produce_batches(kafka, settings.kafka.errors_topic, iter([pa.RecordBatch.from_pydict(
                    {"value": pa.array([e.to_json() for e in errors], pa.binary())})]))
            yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, ROWS_SCHEMA, strict=True)],
                                             schema=ROWS_SCHEMA)
        yield partition_marks(parts_n, latest)


def partition_marks(partitions: int, latest: int | None) -> pa.RecordBatch:
    """One :data:`NO_KEY` row per state partition with ``t1`` = ``latest`` (see :func:`keyed_rows`)."""
    return pa.RecordBatch.from_pydict({f.name: pa.nulls(partitions, f.type) for f in ROWS_SCHEMA} | {
        "gkey": pa.array([NO_KEY] * partitions, pa.string()), "part": pa.array(range(partitions), pa.int32()),
        "t1": pa.array([latest] * partitions, pa.int64())}, schema=ROWS_SCHEMA)


def single_valued(rows: Rows) -> dict[str, Any]:
    """The attributes of an event with arrays that patterns read: those with one value in
    every row (outside arrays, or arrays of equal elements); patterns do not match arrays."""
    first, rest = rows[0], rows[1:]
    return {k: v for k, v in first.items() if all(k in r and r[k] == v and type(r[k]) is type(v) for r in rest)}


def read_row(value: bytes | None, pos: Position, kafka_us: int | None, settings: Settings):
    """``(t0, t1, id, stream, attrs)`` of an event, its ``pattern-event`` error record, or
    ``None`` (refused by :func:`streaming.records.read_event`: the match query reports it)."""
    p = settings.patterns
    obj = None
    if value is not None and len(value) <= min(settings.limits.event_bytes, settings.limits.string_length):
        try:  # the common case inline: a small object of scalars
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            obj = None
    if type(obj) is dict and len(obj) <= settings.limits.attributes and SCALARS.issuperset(map(type, obj.values())):
        attrs = obj
    else:
        read = read_event(value, settings.limits)
        if read.obj is None:
            return None
        attrs = single_valued(read.flat) if isinstance(read.flat, Rows) else dict(read.flat)
    stream = attrs.pop(p.stream_field, p.default_stream)
    if not isinstance(stream, str):
        return error(PATTERN_EVENT, value, pos, f"the stream field {p.stream_field!r} must be a string")
    t1 = attrs.pop(p.time_field, None)
    if t1 is None:
        t1 = kafka_us // 1000 // p.time_unit_ms if kafka_us is not None else 0
    t0 = attrs.pop(p.start_field, t1)
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and float(t).is_integer() for t in (t0, t1)):
        return error(PATTERN_EVENT, value, pos, f"{p.time_field!r} and {p.start_field!r} must be integer ticks")
    t0, t1 = int(t0), int(t1)
    if t0 > t1:
        return error(PATTERN_EVENT, value, pos, f"{p.start_field!r} ({t0}) is after {p.time_field!r} ({t1})")
    if t0 < 0:
        return error(PATTERN_EVENT, value, pos, f"{p.start_field!r} and {p.time_field!r} must not be negative")
    eid = attrs.pop(settings.match.event_id_field, None)
    if not isinstance(eid, (str, int, float)) or isinstance(eid, bool):
        eid = f"{pos.topic}/{pos.partition}/{pos.offset}"
    elif isinstance(eid, float) and eid.is_integer():
        eid = int(eid)
    return t0, t1, str(eid), stream, _ints(attrs)


def _ints(attrs: dict[str, Any]) -> dict[str, Any]:
    """Flattened numbers are floats; integral ones go back to ints for readable witnesses."""
    return {k: (int(v) if type(v) is float and v.is_integer() and abs(v) < 2**53 else v) for k, v in attrs.items()}

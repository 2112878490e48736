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

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from matchers.collector import long_lived
from matchers.events import Rows
from streaming.config import Settings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.patterns.census import CENSUS_KEY, SAMPLED_STREAMS, Tally, Watch
from streaming.patterns.registry import ALL_KEY, partition_keys
from streaming.records import ErrorRecord, Position, error, read_event_fast

NO_KEY = ""
PATTERN_EVENT = "pattern-event"
"""Stage of an event whose reserved fields the patterns query cannot use."""
MAX_TICK = 2**53
"""Event times are ticks below this (exact as JSON numbers; a 64-bit column holds them in ms)."""

ROWS_SCHEMA = pa.schema([
    ("gkey", pa.string()), ("part", pa.int32()), ("t0", pa.int64()), ("t1", pa.int64()),
    ("eid", pa.string()), ("stream", pa.string()), ("attrs", pa.binary()), ("partition", pa.int32()),
    ("offset", pa.int64()),
])
"""A keyed row: the state key ``gkey`` and its state partition ``part``
(:func:`partition_of`), the event; or a partition's mark
(:func:`partition_marks`)."""
ROWS_DDL = ("gkey string, part int, t0 long, t1 long, eid string, stream string, attrs binary, "
            "partition int, offset long")


def value_key(value: Any) -> bytes:
    """A partition value as the state knows it: its JSON, numbers as floats (``1`` and ``1.0``
    are one value, as the engine's equality has them)."""
    v = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return orjson.dumps(v)


def group_key(attr: str, value: Any, buckets: int) -> str:
    """The state key of the events whose ``attr`` is ``value``: ``attr#bucket``, the bucket
    a stable hash (CRC-32 of :func:`value_key`) modulo ``buckets``."""
    return f"{attr}#{zlib.crc32(value_key(value)) % buckets}"


def partition_of(gkey: str, partitions: int) -> int:
    """The partition of state key ``gkey`` (CRC-32 of its UTF-8, modulo ``partitions``)."""
    return zlib.crc32(gkey.encode("utf-8")) % partitions


def event_time_ms(tick: int, unit_ms: int) -> int:
    """Event time of a tick: ``(tick + 1)`` units, so that tick 0 is after the initial
    watermark (0); the watermark ``w`` has passed tick ``w // unit - 1``."""
    return (tick + 1) * unit_ms


def keyed_rows(batches: Iterator[pa.RecordBatch], registry_dir: str, settings: Settings,
               kafka: KafkaClientConfig, watch: Watch | None = None) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: Kafka event records (``value, topic, partition, offset, timestamp``)
    to :data:`ROWS_SCHEMA` rows, then one :data:`NO_KEY` row per state partition whose ``t1``
    is the latest event end this task read (null: none), so that events without a key move
    Spark's event-time watermark too (the stateful processor drops the marks);
    ``pattern-event`` error records are produced to the errors topic here (at least once: a
    retried task sends the same record, with the same id). With a ``watch``, one
    :data:`~streaming.patterns.census.CENSUS_KEY` row (partition 0) holds the task's tally of
    the watched streams' attributes (:mod:`streaming.patterns.census`).

    A batch is read in one pass of the match side's JSON scan (:func:`scan_rows`); the events
    it does not take go through :func:`read_row` one by one, which also gives the reasons.
    """
    from streaming.kafka.sink import produce_batches

    parts_n = settings.patterns.state_partitions
    latest: int | None = None
    tally = Tally(watch, settings.patterns.stream_attribute_names) if watch is not None else None
    with long_lived():  # the docstring of streaming.patterns.queries (the collector)
        for rb in batches:
            _, attrs_in_use, unkeyed = partition_keys(registry_dir)
            fast, slow, fast_latest = scan_rows(rb, attrs_in_use, unkeyed, settings, tally)
            rows, errors, slow_latest = _read_rows(rb, slow, attrs_in_use, unkeyed, settings, tally)
            latest = max((t for t in (latest, fast_latest, slow_latest) if t is not None), default=None)
            if errors:
                produce_batches(kafka, settings.kafka.errors_topic, iter([pa.RecordBatch.from_pydict(
                    {"value": pa.array([e.to_json() for e in errors], pa.binary())})]))
            if fast is not None:
                yield fast
            yield rows
        if tally is not None and tally.events:
            yield census_row(tally.to_json())
        yield partition_marks(parts_n, latest)


def census_row(blob: bytes) -> pa.RecordBatch:
    """The :data:`~streaming.patterns.census.CENSUS_KEY` row holding a tally (in partition 0)."""
    return pa.RecordBatch.from_pydict({f.name: pa.nulls(1, f.type) for f in ROWS_SCHEMA} | {
        "gkey": pa.array([CENSUS_KEY], pa.string()), "part": pa.array([0], pa.int32()),
        "attrs": pa.array([blob], pa.binary())}, schema=ROWS_SCHEMA)


def _read_rows(rb: pa.RecordBatch, which: np.ndarray, attrs_in_use: list[str], unkeyed: bool,
               settings: Settings, tally: Tally | None = None) -> tuple[pa.RecordBatch, list[ErrorRecord], int | None]:
    """The keyed rows of events ``which`` of ``rb`` read one by one (:func:`read_row`), their
    error records and their latest event end; their streams and names go to ``tally``."""
    p = settings.patterns
    buckets, cap, parts_n = p.key_buckets, p.max_keys_per_event, p.state_partitions
    cols: tuple[list, ...] = ([], [], [], [], [], [], [], [], [])
    gkeys, states, t0s, t1s, eids, streams, blobs, parts, offs = cols
    errors: list[ErrorRecord] = []
    latest: int | None = None
    sub = rb.take(pa.array(which, pa.int64()))
    values = sub.column("value").to_pylist()
    topics = sub.column("topic").to_pylist()
    partitions = sub.column("partition").to_pylist()
    offsets = sub.column("offset").to_pylist()
    kafka_us = sub.column("timestamp").cast(pa.int64()).to_pylist()
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
        if tally is not None:
            tally.add(stream, 1, attrs)
        keys = [group_key(a, attrs[a], buckets) for a in attrs_in_use if a in attrs]
        if unkeyed:
            keys.append(ALL_KEY)
        for k in keys[:cap]:
            gkeys.append(k)
            states.append(partition_of(k, parts_n))
            t0s.append(t0)
            t1s.append(t1)
            eids.append(eid)
            streams.append(stream)
            blobs.append(value)
            parts.append(partition)
            offs.append(offset)
    return (pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, ROWS_SCHEMA, strict=True)],
                                       schema=ROWS_SCHEMA), errors, latest)


def event_attributes(value: bytes, settings: Settings) -> dict[str, Any]:
    """The attributes patterns read of an event record that :func:`keyed_rows` keyed (its
    ``attrs`` column); the attributes of a pending event in a state written when that column
    held them as JSON read the same."""
    row = read_row(value, Position("", 0, 0), None, settings)
    if row is None or isinstance(row, ErrorRecord):
        raise ValueError(f"not a keyed event record: {value[:200]!r}")
    return row[4]


def scan_rows(rb: pa.RecordBatch, attrs_in_use: list[str], unkeyed: bool, settings: Settings,
              tally: Tally | None = None) -> tuple[pa.RecordBatch | None, np.ndarray, int | None]:
    """The keyed rows of the events of ``rb`` that one scan of the batch's bytes reads
    (:func:`matchers.scan.scan_records`, with the limits of ``settings.limits``), the indexes of the
    others, and the latest event end of those read.

    Read here: an event the scan takes as one row whose reserved fields are plain (the stream
    a string or absent; the times numbers with integral values below :data:`MAX_TICK`, or absent; the id
    a string or absent, and a top-level key) and whose partition attributes are strings or
    absent. Their rows equal :func:`read_row`'s: :func:`group_key` of a plain string is the
    CRC-32 of its bytes in quotes, as they stand in the record. The ``attrs`` column holds
    the record's value (the operator reads its attributes, :func:`event_attributes`).
    Everything else (another shape, a number as key, any refusal or error) is left to
    :func:`read_row`; a configuration the scan cannot follow (a dotted id field, a name
    used twice) leaves it the whole batch.

    With a ``tally``, the scan also looks up the watched names (:class:`~streaming.patterns.census.Watch`):
    the events read here are counted per stream with the names among those they carry (numpy
    over the scan's output), and the first event of each watched stream is sampled whole
    (:func:`_tally_scanned`).
    """
    from matchers import scan
    p = settings.patterns
    n = rb.num_rows
    id_field = settings.match.event_id_field
    names = (p.time_field, p.start_field, p.stream_field, *attrs_in_use)
    if tally is not None:
        names += tuple(a for a in tally.watch.names if a not in {*names, id_field})
    if n == 0 or "." in id_field or len({*names, id_field}) != len(names) + 1:
        return None, np.arange(n), None
    values = rb.column("value").cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset:values.offset + n + 1]
    if values.buffers()[2] is None or offsets[-1] == offsets[0]:
        return None, np.arange(n), None
    buf = np.frombuffer(values.buffers()[2], np.uint8)
    starts, ends = offsets[:-1].copy(), offsets[1:].copy()  # writable, as encode_json's (one compilation)
    if values.null_count:
        null = values.is_null().to_numpy(zero_copy_only=False)
        ends[null] = starts[null]  # empty: not taken by the scan
    out = scan.scan_records(buf, starts, ends, scan.name_table(names), settings.limits.scan(), (id_field, ""))
    status, row_event, row_offsets, attrs, kinds, nums, texts, text_spans, spans = (
        out.status, out.row_event, out.offsets, out.attrs, out.kinds, out.nums, out.texts, out.text_spans, out.key_spans)
    k = len(names)
    entry_event = np.repeat(row_event, np.diff(row_offsets))
    kind = np.full((n, k), -1, np.int8)
    kind[entry_event, attrs] = kinds
    num = np.zeros((n, k))
    num[entry_event, attrs] = nums
    text = np.zeros((n, k), np.int64)
    text[entry_event, attrs] = texts
    ok = (status == scan.OK) & (np.bincount(row_event, minlength=n) == 1)

    def tick(j: int) -> np.ndarray:  # a plain integral number
        v = num[:, j]
        return (kind[:, j] == scan.NUM) & (v == np.floor(v)) & (np.abs(v) < MAX_TICK)

    kafka = rb.column("timestamp").cast(pa.int64())
    kafka_ticks = np.where(kafka.is_null().to_numpy(zero_copy_only=False), 0,
                           kafka.fill_null(0).to_numpy() // 1000 // p.time_unit_ms)
    no_ts = (kind[:, 0] == -1) | (kind[:, 0] == scan.NULL)
    t1 = np.where(no_ts, kafka_ticks, np.where(tick(0), num[:, 0], -1).astype(np.int64))
    t0 = np.where(kind[:, 1] == -1, t1, np.where(tick(1), num[:, 1], -1).astype(np.int64))
    is_id = spans[:, 0] >= 0
    id_lo = starts + spans[:, 0] + 1
    id_hi = starts + spans[:, 1] - 1
    ok &= (t0 >= 0) & (t0 <= t1) & ((kind[:, 2] == -1) | (kind[:, 2] == scan.STR))
    ok &= ~is_id | (buf[np.where(is_id, id_lo - 1, 0)] == ord('"'))
    for j in range(3, 3 + len(attrs_in_use)):
        ok &= (kind[:, j] == -1) | (kind[:, j] == scan.STR)
    fast = np.flatnonzero(ok)
    if not len(fast):
        return None, np.flatnonzero(~ok), None
    data = buf.tobytes()
    crcs = np.array([zlib.crc32(data[a - 1:b + 1]) for a, b in text_spans.tolist()], np.int64)
    strings = [data[a:b].decode() for a, b in text_spans.tolist()]
    if tally is not None:
        _tally_scanned(tally, rb, fast, np.where(kind[fast, 2] == scan.STR, text[fast, 2], len(strings)),
                       [*strings, p.default_stream], kind[fast, 3:] != -1, names[3:], settings)
    # the state keys of each read event: per partition attribute in use, then ALL_KEY
    width = len(attrs_in_use) + (1 if unkeyed else 0)
    code = np.full((len(fast), width), -1, np.int64)
    for j in range(len(attrs_in_use)):
        present = kind[fast, 3 + j] == scan.STR
        code[present, j] = j * p.key_buckets + crcs[text[fast, 3 + j][present]] % p.key_buckets
    if unkeyed:
        code[:, -1] = len(attrs_in_use) * p.key_buckets
    keep = (code >= 0) & (np.cumsum(code >= 0, axis=1) <= p.max_keys_per_event)
    row, col = np.nonzero(keep)
    codes, inverse = np.unique(code[row, col], return_inverse=True)
    gkeys = [ALL_KEY if c == len(attrs_in_use) * p.key_buckets else
             f"{attrs_in_use[c // p.key_buckets]}#{c % p.key_buckets}" for c in codes.tolist()]
    ev = fast[row]
    # ids: the string at the id's span, else the record's position
    lengths = np.where(is_id[ev], id_hi[ev] - id_lo[ev], 0)
    id_offsets = np.zeros(len(ev) + 1, np.int64)
    np.cumsum(lengths, out=id_offsets[1:])
    gather = np.repeat(id_lo[ev] - id_offsets[:-1], lengths) + np.arange(id_offsets[-1])
    ids = pa.Array.from_buffers(pa.large_string(), len(ev), [None, pa.py_buffer(id_offsets), pa.py_buffer(buf[gather])])
    take = pa.array(ev, pa.int64())
    topic, partition, offset = (rb.column(c).take(take) for c in ("topic", "partition", "offset"))
    position = pc.binary_join_element_wise(topic.cast(pa.string()), partition.cast(pa.string()),
                                           offset.cast(pa.string()), "/")
    stream = np.where(kind[ev, 2] == scan.STR, text[ev, 2], len(strings))
    out = pa.RecordBatch.from_arrays([
        pa.array(gkeys, pa.string()).take(pa.array(inverse.ravel())),
        pa.array(np.array([partition_of(g, p.state_partitions) for g in gkeys], np.int32)[inverse.ravel()]),
        pa.array(t0[ev]), pa.array(t1[ev]),
        pc.if_else(pa.array(is_id[ev]), ids.cast(pa.string()), position),
        pa.array([*strings, p.default_stream], pa.string()).take(pa.array(stream)),
        values.take(take).cast(pa.binary()), partition.cast(pa.int32()), offset.cast(pa.int64()),
    ], schema=ROWS_SCHEMA)
    return out, np.flatnonzero(~ok), int(t1[fast].max())


def _tally_scanned(tally: Tally, rb: pa.RecordBatch, fast: np.ndarray, stream_code: np.ndarray,
                   strings: list[str], present: np.ndarray, names: tuple[str, ...], settings: Settings) -> None:
    """Add the scanned events ``fast`` of ``rb`` to ``tally``: per stream (``strings[stream_code]``)
    the events, the ``names`` that some of them carry (``present``: event by name), and the
    names of its first event (for at most :data:`~streaming.patterns.census.SAMPLED_STREAMS` streams)."""
    codes, first, inverse = np.unique(stream_code, return_index=True, return_inverse=True)
    counts = np.bincount(inverse, minlength=len(codes))
    hits = np.zeros((len(codes), len(names)), np.int64)
    for j in range(len(names)):
        hits[:, j] = np.bincount(inverse, weights=present[:, j], minlength=len(codes))
    sampled = 0
    values = rb.column("value")
    for i, code in enumerate(codes.tolist()):
        stream = strings[code]
        if stream not in tally.watch.streams:
            continue
        tally.add(stream, int(counts[i]), [names[j] for j in np.flatnonzero(hits[i])])
        if sampled < SAMPLED_STREAMS:
            sampled += 1
            row = read_row(values[int(fast[first[i]])].as_py(), Position("", 0, 0), None, settings)
            if isinstance(row, tuple):
                tally.add(stream, 0, row[4])


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
    read = read_event_fast(value, settings.limits)
    if read.obj is None:
        return None
    if read.flat is read.obj:  # a small object of scalars, parsed for this call alone
        attrs = read.obj
    else:
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
    if t1 >= MAX_TICK:
        return error(PATTERN_EVENT, value, pos, f"{p.time_field!r} ({t1}) is past the last tick ({MAX_TICK - 1})")
    eid = attrs.pop(settings.match.event_id_field, None)
    if not isinstance(eid, (str, int, float)) or isinstance(eid, bool):
        eid = pos.event_id()
    elif isinstance(eid, float) and eid.is_integer():
        eid = int(eid)
    return t0, t1, str(eid), stream, _ints(attrs)


def _ints(attrs: dict[str, Any]) -> dict[str, Any]:
    """Flattened numbers are floats; integral ones go back to ints for readable witnesses."""
    return {k: (int(v) if type(v) is float and v.is_integer() and abs(v) < 2**53 else v) for k, v in attrs.items()}

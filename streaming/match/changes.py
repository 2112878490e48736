"""A batch's subscription changes, on the driver: read, parsed, admitted, and matched retroactively.

Everything here is columns (Arrow), never a Python object per subscription kept past the batch:

* :func:`read_records`: the subscription records of the batch's offset ranges (:data:`RECORD_SCHEMA`);
* :func:`parse_subscription_records`: each record judged in offset order
  (:func:`~streaming.registry_columns.parse.parse_records`), one row per record, with the
  interim rule for patterns applied (:func:`without_patterns`);
* :func:`admit_untenanted`: the parsed rows of the single-tenant layout as the
  :class:`~streaming.registry_columns.ChangeBatch` the registry applies (plus the deletes of
  expired subscriptions) and the error records;
* :func:`new_subscriptions` and :func:`retro_notifications`: the expressions a version adds or
  changes (read back from its delta) matched against the still-valid events of earlier
  batches (:mod:`streaming.validity`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from matchers.catalog import create
from matchers.expr import DEFAULT_MAX_TERMS, Subscription
from streaming import notifications
from streaming.config import LimitsSettings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetRange
from streaming.records import (
    DEFAULT_LIMITS,
    EVENT,
    ErrorRecord,
    Position,
    SubscriptionParser,
    error,
    flat_event,
)
from streaming.registry_columns import DELETE, PATTERN, UPSERT, ChangeBatch, ColumnRegistry, files
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA, parse_records
from streaming.registry_columns.shards import subscriptions
from streaming.storage import Directory
from streaming.tenants import Tenants
from streaming.validity import ValidEvent

RECORD_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                           ("partition", pa.int32()), ("offset", pa.int64())])
"""Subscription records as the driver reads them (the Kafka source's columns it needs)."""

ERRORS_SCHEMA = pa.schema([("error", pa.binary()), ("topic", pa.string())])
"""Error records (the errors topic's JSON) and the topic of the record each is about."""

_POSITION = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]


class Admitted(NamedTuple):
    """A batch's parsed subscription records judged: the changes to apply (expiry deletes
    included), the error records (:data:`ERRORS_SCHEMA`), and how many changes were accepted
    and how many subscriptions expired."""

    changes: ChangeBatch
    errors: pa.Table
    accepted: int
    expired: int


def records_table(data: pa.Table | pa.RecordBatch) -> pa.Table:
    """The :data:`RECORD_SCHEMA` columns of Kafka source rows (a collected micro-batch, a fetch)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    return table.select(RECORD_SCHEMA.names).cast(RECORD_SCHEMA)


def read_records(kafka: KafkaClientConfig, ranges: Iterable[OffsetRange]) -> pa.Table:
    """The records in ``ranges`` (:data:`RECORD_SCHEMA`)."""
    parts = [records_table(rb) for rng in ranges for rb in read_range(kafka, rng)]
    return pa.concat_tables(parts) if parts else RECORD_SCHEMA.empty_table()


def parse_subscription_records(records: pa.Table, parse: SubscriptionParser | None = None,
                               max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
                               targets: bool = False) -> pa.Table:
    """The :data:`~streaming.registry_columns.parse.PARSED_SCHEMA` rows of a batch's records,
    in offset order per partition (so that the latest record of an id wins), patterns
    turned into deletes (:func:`without_patterns`)."""
    ordered = records.sort_by(_POSITION).combine_chunks()
    parsed = [parse_records(rb, parse, max_terms, limits, targets) for rb in ordered.to_batches() if rb.num_rows]
    return without_patterns(pa.Table.from_batches(parsed, schema=PARSED_SCHEMA))


def without_patterns(parsed: pa.Table) -> pa.Table:
    """The interim rule for patterns (until the patterns query reads this registry): the match
    query stores none and reports none of their errors (the patterns query does); a pattern
    record, accepted or not, deletes the expression of its id, as one id names one kind of
    subscription at a time (what :func:`streaming.records.parse_change` does)."""
    pattern = pc.equal(parsed.column("kind"), PATTERN)
    if not pc.any(pattern).as_py():
        return parsed
    columns = []
    for field in PARSED_SCHEMA:
        column = parsed.column(field.name)
        if field.name == "op":
            column = pc.if_else(pattern, pa.scalar(DELETE, pa.int8()), column)
        elif field.name in ("kind", "predicates"):
            column = pc.if_else(pattern, pa.scalar(0, field.type), column)
        elif field.name in ("record", "expires", "target", "error"):
            column = pc.if_else(pattern, pa.scalar(None, field.type), column)
        columns.append(column)
    return pa.table(columns, schema=PARSED_SCHEMA)


def error_rows(parsed: pa.Table) -> pa.Table:
    """The error records among parsed rows (:data:`ERRORS_SCHEMA`)."""
    return parsed.filter(pc.equal(parsed.column("op"), ERROR)).select(ERRORS_SCHEMA.names)


def admit_untenanted(parsed: pa.Table, registry: ColumnRegistry, now: float) -> Admitted:
    """The changes of a batch's parsed rows in the single-tenant layout (every change is
    accepted; within the batch the last change of an id wins, in
    :meth:`~streaming.registry_columns.ColumnRegistry.apply`), followed by a delete for each
    subscription whose expiry time is at or before ``now``: those of the registry the batch
    does not change, and the batch's own upserts that are already expired."""
    ok = parsed.filter(pc.not_equal(parsed.column("op"), ERROR))
    ids = ok.column("id").combine_chunks()
    ops = ok.column("op").to_numpy()
    expires = pc.fill_null(ok.column("expires"), np.nan).to_numpy()
    last = np.zeros(len(ids), np.bool_)
    if len(ids):
        rows = pa.table({"id": ids, "row": np.arange(len(ids))}).group_by("id", use_threads=False)
        last[rows.aggregate([("row", "max")]).column("row_max").to_numpy()] = True
    born_expired = np.flatnonzero(last & (ops == UPSERT) & (expires <= now))
    due = registry.expired(now)
    due = due.filter(pc.invert(pc.is_in(due, value_set=ids))) if len(ids) else due
    gone = pa.concat_arrays([ids.take(pa.array(born_expired, pa.int64())), due.cast(pa.string())])
    n = len(gone)
    changes = ChangeBatch.of(
        pa.concat_arrays([ids, gone]),
        np.concatenate([ops, np.full(n, DELETE, np.int8)]),
        np.concatenate([ok.column("kind").to_numpy(), np.zeros(n, np.int8)]),
        pa.concat_arrays([ok.column("record").combine_chunks(), pa.nulls(n, pa.binary())]),
        np.concatenate([expires, np.full(n, np.nan)]),
        predicates=np.concatenate([ok.column("predicates").to_numpy(), np.zeros(n, np.int32)]))
    return Admitted(changes, error_rows(parsed), len(ids), n)


def batch_time(registry: ColumnRegistry, batch_id: int, replay: bool, now: float) -> float:
    """The time batch ``batch_id`` runs at: ``now``, or for a replay the time its first run
    recorded (a replayed batch that recorded no version runs at ``now``)."""
    if not replay:
        return now
    stamp = registry.version_of_batch(batch_id)
    return stamp.time if stamp.batch_id == batch_id else now


def new_subscriptions(directory: str | Directory, version: int, parse: SubscriptionParser | None = None,
                      max_terms: int = DEFAULT_MAX_TERMS) -> list[Subscription]:
    """The expressions registry ``version`` adds or changes (its delta's upserts, parsed again)."""
    if version <= 0:
        return []
    location = directory if isinstance(directory, Directory) else Directory(directory)
    table, _ = files.read_delta(location, version)
    return list(subscriptions(table.filter(pc.equal(table.column("op"), UPSERT)), parse, max_terms))


def retro_notifications(
    matcher_name: str,
    subscriptions: Sequence[Subscription],
    events: Sequence[ValidEvent],
    batch_id: int,
    payload: str,
    message_bytes: int = DEFAULT_LIMITS.message_bytes,
    tenants: Tenants | None = None,
    params: tuple[tuple[str, Any], ...] = (),
) -> tuple[list[tuple[str, bytes]], list[ErrorRecord]]:
    """Notifications ``(subscription id, value)`` of new subscriptions for still-valid events
    (matched by a new ``matcher_name`` index with ``params``).

    With ``tenants`` the id is the service's (:meth:`Tenants.route` gives the topic) and
    the value names the tenant's own id.

    Records are built as the tasks build theirs (:meth:`~streaming.notifications.EventNotes.add_records`):
    one past ``message_bytes`` goes in the id-only form with a note; an event whose id alone
    is too large gets one error record and no notification.
    """
    if not subscriptions or not events:
        return [], []
    matcher = create(matcher_name, **dict(params))
    matcher.add(subscriptions)
    flat = [flat_event(orjson.loads(e.raw)) for e in events]
    result = matcher.match(matcher.encode(flat))
    now_ms = int(time.time() * 1000)
    room = message_bytes - notifications.RECORD_OVERHEAD
    out: list[tuple[str, bytes]] = []
    errors: list[ErrorRecord] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    for i, e in enumerate(events):
        lo, hi = result.offsets[i], result.offsets[i + 1]
        if lo == hi:
            continue
        notes = notifications.EventNotes(e.topic, e.partition, e.offset, e.event_id,
                                         e.raw if payload == notifications.PAYLOAD_EVENT else None, e.timestamp_ms,
                                         now_ms, batch_id, retro=True)
        ids = [matcher.id_of(key) for key in result.keys[lo:hi].tolist()]
        try:
            notes.add_records(ids if tenants is None else [tenants.route(s)[1] for s in ids], room, keys, values)
        except notifications.NotificationTooLarge as exc:
            errors.append(error(EVENT, e.raw, Position(e.topic, e.partition, e.offset), str(exc)))
            continue
        out.extend(zip(ids, values, strict=True))
        keys.clear()
        values.clear()
    return out, errors

"""A batch's subscription records, on the driver: read and parsed as columns, and the new
subscriptions matched retroactively.

Everything here is columns (Arrow), never a Python object per subscription kept past the batch:

* :func:`read_records`: the subscription records of the batch's offset ranges (:data:`RECORD_SCHEMA`);
* :func:`parse_subscription_records`: one row per record
  (:func:`~streaming.registry_columns.parse.parse_records`), with the interim rule for
  patterns applied (:func:`without_patterns`); the rows go to
  :func:`streaming.registry_columns.admit.admit` (tenants' ids, targets, quotas, expiry), whose
  changes the registry applies;
* :func:`new_subscriptions` and :func:`retro_notifications`: the expressions a version adds or
  changes (read back from its delta) matched against the still-valid events of earlier
  batches (:mod:`streaming.validity`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

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
from streaming.registry_columns import DELETE, PATTERN, UPSERT, files
from streaming.registry_columns.parse import PARSED_SCHEMA, parse_records
from streaming.registry_columns.shards import subscriptions
from streaming.storage import Directory
from streaming.tenants import Tenants
from streaming.validity import ValidEvent

RECORD_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                           ("partition", pa.int32()), ("offset", pa.int64())])
"""Subscription records as the driver reads them (the Kafka source's columns it needs)."""


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
    """The :data:`~streaming.registry_columns.parse.PARSED_SCHEMA` rows of a batch's records (in
    their order: :func:`~streaming.registry_columns.admit.admit` judges them in offset order),
    patterns turned into deletes (:func:`without_patterns`)."""
    parsed = [parse_records(rb, parse, max_terms, limits, targets) for rb in records.to_batches() if rb.num_rows]
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


def new_subscriptions(directory: str | Directory, version: int) -> list[Subscription]:
    """The expressions registry ``version`` adds or changes (its delta's upserts, unpacked)."""
    if version <= 0:
        return []
    location = directory if isinstance(directory, Directory) else Directory(directory)
    table, _ = files.read_delta(location, version)
    return list(subscriptions(table.filter(pc.equal(table.column("op"), UPSERT))))


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

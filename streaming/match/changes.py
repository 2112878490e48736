"""A batch's subscription changes, on the driver: read, validated, recorded, and matched retroactively.

* :func:`read_records`: the subscription records of the batch's offset ranges;
* :func:`apply_changes`: parse them, append the accepted ones plus the deletes of expired
  subscriptions to the registry as the next version (idempotent per batch id), and reject
  bad ones as error records;
* :func:`retro_notifications`: match new or changed subscriptions (:func:`new_subscriptions`)
  against the still-valid events of earlier batches (:mod:`streaming.validity`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from matchers.catalog import create
from matchers.expr import Subscription
from streaming import notifications
from streaming.config import LimitsSettings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetRange
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    EVENT,
    UPSERT,
    Change,
    ErrorRecord,
    Position,
    SubscriptionParser,
    error,
    flat_event,
    parse_changes,
)
from streaming.registry import Delta, Registry
from streaming.tenants import Admission, Tenants
from streaming.validity import ValidEvent

Row = tuple[bytes | None, bytes | None, str, int, int]
"""A subscription record: ``(key, value, topic, partition, offset)``."""


class ChangeOutcome(NamedTuple):
    """What a batch's subscription records did to the registry."""

    delta: Delta | None
    errors: list[ErrorRecord]
    now: float
    replay: bool
    accepted: int
    expired: int


def read_records(kafka: KafkaClientConfig, ranges: Iterable[OffsetRange]) -> list[Row]:
    """``(key, value, topic, partition, offset)`` of the records in ``ranges``."""
    rows: list[Row] = []
    for rng in ranges:
        for rb in read_range(kafka, rng):
            cols = [rb.column(name).to_pylist() for name in ("key", "value", "topic", "partition", "offset")]
            rows.extend(zip(*cols, strict=True))
    return rows


def apply_changes(
    registry: Registry,
    batch_id: int,
    rows: Iterable[Row],
    parse: SubscriptionParser,
    max_terms: int,
    now: float,
    limits: LimitsSettings = DEFAULT_LIMITS,
    admission: Admission | None = None,
) -> ChangeOutcome:
    """Validate a batch's subscription records and record them as the next registry version.

    With tenants, ``admission`` gives the changes their tenant's ids and refuses those past
    a quota (:mod:`streaming.tenants`). A replayed batch (its id at or below the last one
    recorded) gets the version and the time it recorded the first time, so the same
    subscriptions match its events. Subscriptions whose expiry time is at or before ``now``
    are deleted in the same version.
    """
    ordered = sorted(rows, key=lambda r: (r[2], r[3], r[4]))
    changes, errors = parse_changes(ordered, parse, max_terms, limits, targets=admission is not None)
    if admission is not None:
        changes, refused = admission.admit(registry, batch_id, changes, ordered)
        errors += refused
    if registry.is_replay(batch_id):
        delta = registry.delta_of_batch(batch_id)
        return ChangeOutcome(delta, errors, delta.time if delta else now, True, len(changes), 0)
    final: dict[str, Change] = {}
    for c in changes:
        final.pop(c.id, None)
        final[c.id] = c
    expired = [Change(DELETE, i, None) for i in registry.expired(now) if i not in final]
    expired += [Change(DELETE, c.id, None) for c in final.values()
                if c.op == UPSERT and c.subscription.expires is not None and c.subscription.expires <= now]  # type: ignore[union-attr]  # an upsert carries its subscription
    if admission is not None:
        admission.account(registry, [*changes, *expired])
    delta = registry.append(batch_id, [*changes, *expired], now)
    return ChangeOutcome(delta, errors, now, False, len(changes), len(expired))


def new_subscriptions(delta: Delta | None) -> list[Subscription]:
    """Subscriptions a delta adds or changes (and does not delete again)."""
    if delta is None:
        return []
    last: dict[str, Change] = {}
    for c in delta.changes:
        last.pop(c.id, None)
        last[c.id] = c
    return [c.subscription for c in last.values() if c.op == UPSERT]  # type: ignore[misc]  # an upsert carries its subscription


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

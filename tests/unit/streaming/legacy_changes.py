"""The match query's gate of subscription records before issue 29, on the pickled registry
(:mod:`streaming.registry`, :class:`streaming.tenants.Admission`): kept as the oracle of the
differential test of :func:`streaming.registry_columns.admit.admit` (``test_registry_admit``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from streaming.config import LimitsSettings
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    UPSERT,
    Change,
    ErrorRecord,
    SubscriptionParser,
    parse_changes,
)
from streaming.registry import Delta, Registry
from streaming.tenants import Admission

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
    a quota. A replayed batch (its id at or below the last one recorded) gets the version and
    the time it recorded the first time. Subscriptions whose expiry time is at or before
    ``now`` are deleted in the same version.
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

"""A reference model of the match query's gate of subscription records, the rules
:mod:`streaming.registry_columns.admit` states, on a plain dict ``{internal id: Subscription}``:
the oracle of its differential test (``test_registry_admit``).

Per batch: the records in offset order (topic, partition, offset), parsed by
:func:`streaming.records.parse_changes`; then, one change at a time against the subscriptions
as the changes before it in the batch left them:

* the change's tenant is its topic's; its id becomes the tenant's internal id
  (:meth:`Tenants.internal`, with the target topic an upsert names); the id the tenant's id has
  now is the one it is held under (with or without a target), else the plain one;
* a target topic the tenant may not name, or that does not exist, refuses the change;
* a tenant's upsert that would make it hold more ``subscriptions`` or ``predicates`` than its
  quota (counting the replaced subscription out) is refused; deletes and the operator's
  changes never are; a refused change is an error record on its tenant's errors topic and
  changes nothing;
* an accepted upsert under another internal id than the one held deletes that one first (two
  accepted changes);

then every subscription whose expiry time is at or before the batch's time is deleted (counted
once each). A batch that records nothing (no change, nothing expired) leaves no version. A batch
at or before the last one that recorded is a replay: judged again against the subscriptions
before the version it recorded, with that version's time, it changes nothing and counts no expiry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import NamedTuple

from matchers.expr import DEFAULT_MAX_TERMS, Subscription
from streaming.records import (
    DEFAULT_LIMITS,
    SUBSCRIPTION,
    UPSERT,
    ErrorRecord,
    SubscriptionParser,
    count_predicates,
    error,
    parse_changes,
)
from streaming.tenants import Tenants, parts

Row = tuple[bytes | None, bytes | None, str, int, int]
"""A subscription record: ``(key, value, topic, partition, offset)``."""


class Outcome(NamedTuple):
    """What a batch did: its error records, its time, whether it was a replay, the changes
    accepted (a move counts its delete) and the subscriptions expired."""

    errors: list[ErrorRecord]
    now: float
    replay: bool
    accepted: int
    expired: int


class GateModel:
    """The subscriptions the gate keeps, and the state before each batch that recorded a version."""

    def __init__(self, parse: SubscriptionParser, tenants: Tenants | None, topic_exists: Callable[[str], bool]):
        self.parse, self.tenants, self.topic_exists = parse, tenants, topic_exists
        self.subscriptions: dict[str, Subscription] = {}
        self.batch_id = -1
        self.recorded: dict[int, tuple[dict[str, Subscription], float]] = {}

    def batch(self, batch_id: int, rows: Iterable[Row], now: float) -> Outcome:
        ordered = sorted(rows, key=lambda r: (r[2], r[3], r[4]))
        changes, errors = parse_changes(ordered, self.parse, DEFAULT_MAX_TERMS, DEFAULT_LIMITS,
                                        targets=self.tenants is not None)
        replay = batch_id <= self.batch_id
        before, now = self.recorded.get(batch_id, (self.subscriptions, now)) if replay else (self.subscriptions, now)
        subs = dict(before)
        raw = {(r[2], r[3], r[4]): r for r in ordered}
        accepted = 0
        for change in changes:
            sub = change.subscription
            if self.tenants is None:
                internal = change.id
            else:
                assert change.position is not None
                tenant = self.tenants.tenant_of_topic(change.position.topic)
                held = [i for i in subs if parts(i)[0] == tenant and parts(i)[2] == change.id]
                assert len(held) <= 1
                old = held[0] if held else Tenants.internal(tenant, change.id)
                internal = Tenants.internal(tenant, change.id, change.target) if change.op == UPSERT else old
                reason = self.refusal(tenant, change.id, change.target, sub, old, subs)
                if reason is not None:
                    key, value = raw[change.position][:2]
                    errors.append(error(SUBSCRIPTION, value, change.position, reason, key))
                    continue
                if internal != old and old in subs:
                    del subs[old]
                    accepted += 1
            if change.op == UPSERT:
                assert sub is not None
                subs[internal] = dataclasses.replace(sub, id=internal)
            else:
                subs.pop(internal, None)
            accepted += 1
        if replay:
            return Outcome(errors, now, True, accepted, 0)
        expired = {i for i, s in subs.items() if s.expires is not None and s.expires <= now}
        if accepted or expired:
            self.recorded[batch_id] = (before, now)
            self.batch_id = batch_id
            self.subscriptions = {i: s for i, s in subs.items() if i not in expired}
        return Outcome(errors, now, False, accepted, len(expired))

    def refusal(self, tenant: str, sub_id: str, target: str | None, sub: Subscription | None, old: str,
                subs: dict[str, Subscription]) -> str | None:
        """Why a tenant's change is refused: a target first, then the subscriptions quota, then the
        predicates quota (``None``: accepted)."""
        assert self.tenants is not None
        if target is not None:
            reason = self.tenants.refuse_target(tenant, sub_id, target, self.topic_exists)
            if reason is not None:
                return reason
        if not tenant or sub is None:
            return None
        others = [s for i, s in subs.items() if i != old and parts(i)[0] == tenant]
        return (self.tenants.refusal(tenant, sub_id, "subscriptions", len(others) + 1)
                or self.tenants.refusal(tenant, sub_id, "predicates",
                                        sum(map(count_predicates, others)) + count_predicates(sub)))

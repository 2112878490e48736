"""Tenants: whose a subscription is, where its notifications and errors go, and quotas.

A subscription belongs to the tenant whose topic its record was written to, never to
what the record claims: tenant ``t`` writes to ``<subscriptions>.t`` and reads
``<notifications>.t`` and ``<errors>.t`` (the configured topic names plus the tenant's),
so Kafka's per-topic ACLs are all it takes to keep tenants apart. The un-suffixed topics
stay the operator's. Inside the service a tenant's subscription id ``x`` is ``t:x``
(:func:`Tenants.internal`): tenant names hold no ``:``, so tenant A's upsert or delete of
``x`` never touches B's ``x``, and the operator's ids stay as they are unless they hold a
``:`` or start with one (then ``:`` + id), so that no operator id reads as a tenant's.

Quotas (:class:`Admission`) bound each tenant's subscriptions and predicates; a change
past one is refused with an error record on the tenant's errors topic, and nothing
changes for the others. Stateful (Cayuga) patterns are the operator's only: a pattern
record on a tenant's topic is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from matchers.expr import Subscription
from streaming.records import (
    DELETE,
    SUBSCRIPTION,
    UPSERT,
    Change,
    ErrorRecord,
    count_predicates,
    error,
    load_json,
)
from streaming.registry import Registry, load_state

if TYPE_CHECKING:
    from streaming.config import Settings

SEP = ":"
OPERATOR = ""
"""The operator's tenant name: the un-suffixed topics."""

Row = tuple[bytes | None, bytes | None, str, int, int]


def topic_of(base: str, tenant: str) -> str:
    """A tenant's topic of an operator topic ``base`` (the operator's is ``base`` itself)."""
    return f"{base}.{tenant}" if tenant else base


@dataclass(frozen=True)
class Tenants:
    """The tenants' topics and quotas (picklable: it travels to the executors with the batch).

    Parameters
    ----------
    names : the tenants (without the operator).
    subscriptions_topic, notifications_topic, errors_topic : the operator's topics; a
        tenant's add ``.<tenant>``.
    quotas : ``{tenant: {"subscriptions": n, "predicates": n}}`` (0: no bound).
    """

    names: tuple[str, ...]
    subscriptions_topic: str
    notifications_topic: str
    errors_topic: str
    quotas: Mapping[str, Mapping[str, int]]

    @classmethod
    def of(cls, settings: Settings) -> Tenants | None:
        """The tenants of ``settings``; ``None`` in the single-tenant layout."""
        names = settings.tenants.tenants
        if not names:
            return None
        k = settings.kafka
        return cls(names, k.subscriptions_topic, k.notifications_topic, k.errors_topic,
                   settings.tenants.quota_table())

    def topic_partitions(self, settings: Settings) -> dict[str, int]:
        """Every tenant's topics and their partition counts (the operator's are the settings')."""
        k = settings.kafka
        out: dict[str, int] = {}
        for t in self.names:
            out[topic_of(k.subscriptions_topic, t)] = k.subscriptions_partitions
            out[topic_of(k.notifications_topic, t)] = k.notifications_partitions
            out[topic_of(k.errors_topic, t)] = k.errors_partitions
        return out

    @property
    def subscription_topics(self) -> tuple[str, ...]:
        """The operator's subscriptions topic and every tenant's."""
        return (self.subscriptions_topic, *(topic_of(self.subscriptions_topic, t) for t in self.names))

    def tenant_of_topic(self, topic: str) -> str:
        """The tenant a subscriptions (or errors) topic belongs to (the operator's for any other)."""
        for base in (self.subscriptions_topic, self.errors_topic):
            if topic.startswith(base + "."):
                name = topic[len(base) + 1:]
                if name in self.names:
                    return name
        return OPERATOR

    @staticmethod
    def internal(tenant: str, sub_id: str) -> str:
        """The service's id of a tenant's subscription ``sub_id``."""
        if tenant:
            return f"{tenant}{SEP}{sub_id}"
        return SEP + sub_id if SEP in sub_id else sub_id

    @staticmethod
    def split(internal: str) -> tuple[str, str]:
        """``(tenant, subscription id)`` of an internal id (the inverse of :meth:`internal`)."""
        tenant, sep, sub_id = internal.partition(SEP)
        return (tenant, sub_id) if sep else (OPERATOR, internal)

    def route(self, internal: str) -> tuple[str, str]:
        """``(notifications topic, the tenant's subscription id)`` of an internal id."""
        tenant, sub_id = self.split(internal)
        return topic_of(self.notifications_topic, tenant), sub_id

    def errors_topic_of(self, record_topic: str) -> str:
        """Where the error record of a record read from ``record_topic`` goes."""
        return topic_of(self.errors_topic, self.tenant_of_topic(record_topic))


def _cost(sub: Subscription | None) -> tuple[int, int]:
    return (0, 0) if sub is None else (1, count_predicates(sub))


def usage_of(subscriptions: Iterable[tuple[str, Subscription]]) -> dict[str, list[int]]:
    """``{tenant: [subscriptions, predicates]}`` of ``(internal id, subscription)`` pairs."""
    usage: dict[str, list[int]] = {}
    for internal, sub in subscriptions:
        used = usage.setdefault(Tenants.split(internal)[0], [0, 0])
        used[0] += 1
        used[1] += count_predicates(sub)
    return usage


class Admission:
    """The driver's gate of subscription changes in the tenant layout (see the module docstring).

    It keeps each tenant's usage at one registry version, brought up to date by
    :meth:`account` before each append and recounted from the registry when it is at
    another version (a restart).
    """

    def __init__(self, tenants: Tenants):
        self.tenants = tenants
        self.version = -1
        self.usage: dict[str, list[int]] = {}

    def admit(self, registry: Registry, batch_id: int, changes: Sequence[Change],
              rows: Sequence[Row]) -> tuple[list[Change], list[ErrorRecord]]:
        """A batch's parsed changes with tenant ids, less the refused ones; their error records.

        A replayed batch is judged against the registry before its version, so it
        refuses what it refused the first time.
        """
        raw = {(r[2], int(r[3]), int(r[4])): r for r in rows}
        if registry.is_replay(batch_id):
            delta = registry.delta_of_batch(batch_id)
            before = load_state(registry.directory, delta.version - 1).subscriptions if delta else registry.subscriptions
            usage = usage_of(before.items())
        else:
            before, usage = registry.subscriptions, {t: list(u) for t, u in self._usage(registry).items()}
        pending: dict[str, Subscription | None] = {}
        accepted: list[Change] = []
        refused: list[ErrorRecord] = []
        for change in changes:
            assert change.position is not None
            tenant = self.tenants.tenant_of_topic(change.position.topic)
            reason = self._refusal(tenant, change, raw, before, pending, usage)
            if reason is not None:
                key, value = raw[change.position][:2]
                refused.append(error(SUBSCRIPTION, value, change.position, reason, key))
                continue
            internal = self.tenants.internal(tenant, change.id)
            sub = dataclasses.replace(change.subscription, id=internal) if change.subscription is not None else None
            _step(usage, pending, before, internal, sub)
            accepted.append(change._replace(id=internal, subscription=sub))
        return accepted, refused

    def _refusal(self, tenant: str, change: Change, raw: Mapping[tuple, Row], before: Mapping[str, Subscription],
                 pending: dict[str, Subscription | None], usage: dict[str, list[int]]) -> str | None:
        """Why a tenant's change is refused (a pattern, a quota), or ``None``."""
        if not tenant:
            return None
        if change.op == DELETE:
            value = raw[change.position][1]  # type: ignore[index]  # a change read from the log has its position
            obj = load_json(value)[0] if value is not None else None
            if isinstance(obj, dict) and "pattern" in obj:
                return (f"subscription {change.id!r}: stateful patterns are served to the operator only, "
                        f"not to tenant {tenant!r}")
            return None
        internal = self.tenants.internal(tenant, change.id)
        old = pending[internal] if internal in pending else before.get(internal)
        (old_n, old_p), (new_n, new_p) = _cost(old), _cost(change.subscription)
        used = usage.get(tenant, [0, 0])
        quota = self.tenants.quotas.get(tenant, {})
        for what, now, bound in (("subscriptions", used[0] - old_n + new_n, quota.get("subscriptions", 0)),
                                 ("predicates", used[1] - old_p + new_p, quota.get("predicates", 0))):
            if bound and now > bound:
                return (f"subscription {change.id!r} refused: tenant {tenant!r} would hold {now} {what}, past its "
                        f"quota of {bound} (tenants.quotas)")
        return None

    def _usage(self, registry: Registry) -> dict[str, list[int]]:
        if self.version != registry.version:
            self.usage, self.version = usage_of(registry.subscriptions.items()), registry.version
        return self.usage

    def account(self, registry: Registry, changes: Sequence[Change]) -> None:
        """Count the changes about to be appended to ``registry`` as its next version."""
        if not changes:
            return
        usage = self._usage(registry)
        pending: dict[str, Subscription | None] = {}
        for c in changes:
            _step(usage, pending, registry.subscriptions, c.id, c.subscription if c.op == UPSERT else None)
        self.version = registry.version + 1

    def describe(self, registry: Registry) -> dict[str, Any]:
        """Each tenant's usage of ``registry`` and its quotas (for ``status``)."""
        usage = self._usage(registry)
        return {t: {"subscriptions": usage.get(t, [0, 0])[0], "predicates": usage.get(t, [0, 0])[1],
                    "quotas": dict(self.tenants.quotas.get(t, {}))} for t in self.tenants.names}


def _step(usage: dict[str, list[int]], pending: dict[str, Subscription | None], before: Mapping[str, Subscription],
          internal: str, sub: Subscription | None) -> None:
    """Count one change of ``internal`` to ``sub`` (``None``: deleted) into ``usage``."""
    old = pending[internal] if internal in pending else before.get(internal)
    (old_n, old_p), (new_n, new_p) = _cost(old), _cost(sub)
    used = usage.setdefault(Tenants.split(internal)[0], [0, 0])
    used[0] += new_n - old_n
    used[1] += new_p - old_p
    pending[internal] = sub

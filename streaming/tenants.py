"""Tenants: whose a subscription is, where its notifications and errors go, and quotas.

A subscription belongs to the tenant whose topic its record was written to, never to
what the record claims: tenant ``t`` writes to ``<subscriptions>.t`` and reads
``<notifications>.t`` and ``<errors>.t`` (the configured topic names plus the tenant's),
so Kafka's per-topic ACLs are all it takes to keep tenants apart. The un-suffixed topics
stay the operator's. Inside the service a tenant's subscription id ``x`` is ``t:x``
(:func:`Tenants.internal`): tenant names hold no ``:``, so tenant A's upsert or delete of
``x`` never touches B's ``x``, and the operator's ids stay as they are unless they hold a
``:`` or start with one (then ``:`` + id), so that no operator id reads as a tenant's.
A tenant's subscription may name a target topic within the tenant's prefix
(``tenants.targets``, default ``<notifications>.t.``); its id is then ``t>topic:x``
(topic names hold neither ``>`` nor ``:``), so the id alone routes its notifications,
on the driver and on the executors alike, and a tenant's ``x`` is one subscription
whatever its target (an upsert naming another target replaces the old id).

Quotas bound each tenant's subscriptions and predicates (judged on the driver by
:func:`streaming.registry_columns.admit.admit`); a change past one is refused with an error
record on the tenant's errors topic, and nothing changes for the others. A tenant's Cayuga patterns are namespaced the same way (the
registry holds ``t:x`` as a pattern, :mod:`streaming.patterns.registry`), bounded by the
``patterns`` quota (judged with the others by ``admit``); their live instances (each tenant's patterns run in engines of
their own) by the ``pattern_instances`` quota (:meth:`Tenants.at_instance_quota`, applied
by :mod:`streaming.patterns.queries`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import TOPIC_NAME

if TYPE_CHECKING:
    from streaming.config import Settings

SEP = ":"
TARGET = ">"
"""Between a tenant's name and its subscription's target topic in an internal id."""
OPERATOR = ""
"""The operator's tenant name: the un-suffixed topics."""


def topic_of(base: str, tenant: str) -> str:
    """A tenant's topic of an operator topic ``base`` (the operator's is ``base`` itself)."""
    return f"{base}.{tenant}" if tenant else base


def parts(internal: str) -> tuple[str, str | None, str]:
    """``(tenant, target topic or None, the tenant's subscription id)`` of an internal id."""
    head, sep, sub_id = internal.partition(SEP)
    if not sep:
        return OPERATOR, None, internal
    tenant, _, target = head.partition(TARGET)
    return tenant, target or None, sub_id


def targets_of(internal: pa.Array) -> pa.Array:
    """The target topic of each internal id (``""``: none), as :func:`parts` finds it, vectorised."""
    found = pc.extract_regex(internal, r"^[^:>]*>(?P<target>[^:]*):")
    return pc.fill_null(pc.struct_field(found, [0]), "")


@dataclass(frozen=True)
class Tenants:
    """The tenants' topics and quotas (picklable: it travels to the executors with the batch).

    Parameters
    ----------
    names : the tenants (without the operator).
    subscriptions_topic, notifications_topic, errors_topic : the operator's topics; a
        tenant's add ``.<tenant>``.
    quotas : ``{tenant: {quota: n}}`` of :data:`~streaming.config.QUOTAS` (0: no bound).
    targets : ``{tenant: prefix}`` of the target topics its subscriptions may name.
    reserved : the service's own topics, never a target.
    """

    names: tuple[str, ...]
    subscriptions_topic: str
    notifications_topic: str
    errors_topic: str
    quotas: Mapping[str, Mapping[str, int]]
    targets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    reserved: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings) -> Tenants | None:
        """The tenants of ``settings``; ``None`` in the single-tenant layout."""
        names = settings.tenants.tenants
        if not names:
            return None
        k = settings.kafka
        reserved = frozenset((k.events_topic, *(topic_of(base, t) for base in (
            k.subscriptions_topic, k.notifications_topic, k.errors_topic) for t in (OPERATOR, *names))))
        return cls(names, k.subscriptions_topic, k.notifications_topic, k.errors_topic,
                   settings.tenants.quota_table(), settings.tenants.target_prefixes(k.notifications_topic), reserved)

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
    def internal(tenant: str, sub_id: str, target: str | None = None) -> str:
        """The service's id of a tenant's subscription ``sub_id`` (notifying ``target``, if given)."""
        if tenant:
            return f"{tenant}{TARGET}{target}{SEP}{sub_id}" if target else f"{tenant}{SEP}{sub_id}"
        return SEP + sub_id if SEP in sub_id else sub_id

    @staticmethod
    def split(internal: str) -> tuple[str, str]:
        """``(tenant, subscription id)`` of an internal id (the inverse of :meth:`internal`)."""
        tenant, _, sub_id = parts(internal)
        return tenant, sub_id

    def route(self, internal: str) -> tuple[str, str]:
        """``(notifications topic, the tenant's subscription id)`` of an internal id."""
        tenant, target, sub_id = parts(internal)
        return target or topic_of(self.notifications_topic, tenant), sub_id

    def errors_topic_of(self, record_topic: str) -> str:
        """Where the error record of a record read from ``record_topic`` goes."""
        return topic_of(self.errors_topic, self.tenant_of_topic(record_topic))

    def target_refusal(self, tenant: str, sub_id: str, target: str) -> str | None:
        """Why ``tenant``'s subscription ``sub_id`` may not notify ``target`` (``None``: it may)."""
        if not tenant:
            return f"subscription {sub_id!r}: the operator's subscriptions name no target topic"
        prefix = self.targets[tenant]
        if not target.startswith(prefix) or len(target) == len(prefix) or not re.fullmatch(TOPIC_NAME, target) \
                or target in self.reserved:
            return (f"subscription {sub_id!r}: target topic {target!r} is not allowed to tenant {tenant!r}: a "
                    f"target is a topic name starting with {prefix!r} (tenants.targets), none of the service's own")
        return None

    def refuse_target(self, tenant: str, sub_id: str, target: str, topic_exists: Callable[[str], bool]) -> str | None:
        """Why ``tenant``'s upsert of ``sub_id`` naming ``target`` is refused (not allowed, or a
        missing topic), or ``None``."""
        reason = self.target_refusal(tenant, sub_id, target)
        if reason is None and not topic_exists(target):
            reason = f"subscription {sub_id!r}: target topic {target!r} does not exist (the operator creates it)"
        return reason

    def refusal(self, tenant: str, sub_id: str, quota: str, held: int) -> str | None:
        """The reason refusing ``tenant``'s upsert of ``sub_id`` that makes it hold ``held`` of
        ``quota`` (``None``: within it)."""
        reason = self.over_quota(tenant, quota, held)
        return None if reason is None else f"subscription {sub_id!r} refused: {reason}"

    def at_instance_quota(self, live: Mapping[str, int]) -> frozenset[str]:
        """The tenants whose live pattern instances (``live``, summed over the state partitions
        after a batch) are at or past their ``pattern_instances`` quota: in the next batch
        their patterns start no new instances."""
        return frozenset(t for t in self.names if 0 < self.quotas.get(t, {}).get("pattern_instances", 0) <= live.get(t, 0))

    def instance_quota_reason(self, tenant: str, live: int) -> str:
        """The reason of the error record of ``tenant`` reaching its ``pattern_instances`` quota."""
        return (f"tenant {tenant!r} holds {live} live pattern instances, at or past its quota of "
                f"{self.quotas[tenant]['pattern_instances']} (tenants.quotas pattern_instances): its patterns "
                "start no new instances until some of those complete or expire")

    def over_quota(self, tenant: str, quota: str, held: int) -> str | None:
        """The refusal of a change that makes ``tenant`` hold ``held`` of ``quota`` (``None``: within it)."""
        bound = self.quotas.get(tenant, {}).get(quota, 0)
        if bound and held > bound:
            return f"tenant {tenant!r} would hold {held} {quota}, past its quota of {bound} (tenants.quotas)"
        return None

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
whatever its target (:class:`Admission` replaces the old id).

Quotas (:class:`Admission`) bound each tenant's subscriptions and predicates; a change
past one is refused with an error record on the tenant's errors topic, and nothing
changes for the others. A tenant's Cayuga patterns are namespaced the same way (the
pattern registry, :mod:`streaming.patterns.registry`, holds ``t:x``), bounded by the
``patterns`` quota there; their live instances (each tenant's patterns run in engines of
their own) by the ``pattern_instances`` quota (:meth:`Tenants.at_instance_quota`, applied
by :mod:`streaming.patterns.queries`).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from matchers.expr import Subscription
from streaming.config import TOPIC_NAME
from streaming.records import (
    DELETE,
    SUBSCRIPTION,
    UPSERT,
    Change,
    ErrorRecord,
    count_predicates,
    error,
)
from streaming.registry import Registry, load_state

if TYPE_CHECKING:
    from streaming.config import Settings

SEP = ":"
TARGET = ">"
"""Between a tenant's name and its subscription's target topic in an internal id."""
OPERATOR = ""
"""The operator's tenant name: the un-suffixed topics."""

Row = tuple[bytes | None, bytes | None, str, int, int]


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


def targeted_of(ids: Iterable[str]) -> dict[str, str]:
    """``{t:x: t>topic:x}`` of the internal ids that name a target topic."""
    out = {}
    for internal in ids:
        tenant, target, sub_id = parts(internal)
        if target:
            out[Tenants.internal(tenant, sub_id)] = internal
    return out


class Books:
    """Each tenant's usage and targeted ids over a registry's subscriptions, as changes go in."""

    def __init__(self, subscriptions: Mapping[str, Subscription]):
        self.subscriptions = subscriptions
        self.usage = usage_of(subscriptions.items())
        self.targeted = targeted_of(subscriptions)
        self.pending: dict[str, Subscription | None] = {}

    def fork(self) -> Books:
        """A copy to judge a batch on (sharing the subscriptions; the usage and ids are copied)."""
        other = object.__new__(Books)
        other.subscriptions, other.pending = self.subscriptions, dict(self.pending)
        other.usage = {t: list(u) for t, u in self.usage.items()}
        other.targeted = dict(self.targeted)
        return other

    def held(self, internal: str) -> Subscription | None:
        return self.pending[internal] if internal in self.pending else self.subscriptions.get(internal)

    def current_id(self, tenant: str, sub_id: str) -> str:
        """The internal id the tenant's ``sub_id`` has now (or would have without a target)."""
        plain = Tenants.internal(tenant, sub_id)
        return self.targeted.get(plain, plain)

    def step(self, internal: str, sub: Subscription | None) -> None:
        """Count one change of ``internal`` to ``sub`` (``None``: deleted)."""
        (old_n, old_p), (new_n, new_p) = _cost(self.held(internal)), _cost(sub)
        tenant, target, sub_id = parts(internal)
        used = self.usage.setdefault(tenant, [0, 0])
        used[0] += new_n - old_n
        used[1] += new_p - old_p
        self.pending[internal] = sub
        if target:
            plain = Tenants.internal(tenant, sub_id)
            if sub is not None:
                self.targeted[plain] = internal
            elif self.targeted.get(plain) == internal:
                del self.targeted[plain]


class Admission:
    """The driver's gate of subscription changes in the tenant layout (see the module docstring).

    It keeps each tenant's usage at one registry version, brought up to date by
    :meth:`account` before each append and recounted from the registry when it is at
    another version (a restart).

    Parameters
    ----------
    tenants : the tenants.
    topic_exists : whether a target topic exists (a change naming a missing one is refused,
        so that no notification waits on a topic that is not there).
    """

    def __init__(self, tenants: Tenants, topic_exists: Callable[[str], bool]):
        self.tenants = tenants
        self.topic_exists = topic_exists
        self.version = -1
        self.books = Books({})

    def admit(self, registry: Registry, batch_id: int, changes: Sequence[Change],
              rows: Sequence[Row]) -> tuple[list[Change], list[ErrorRecord]]:
        """A batch's parsed changes with tenant ids, less the refused ones; their error records.

        A tenant's upsert naming another target than its subscription has deletes the old id
        first. A replayed batch is judged against the registry before its version, so it
        refuses what it refused the first time.
        """
        raw = {(r[2], int(r[3]), int(r[4])): r for r in rows}
        if registry.is_replay(batch_id):
            delta = registry.delta_of_batch(batch_id)
            books = Books(load_state(registry.directory, delta.version - 1).subscriptions) if delta else \
                Books(registry.subscriptions)
        else:
            books = self._books(registry).fork()
        accepted: list[Change] = []
        refused: list[ErrorRecord] = []
        for change in changes:
            assert change.position is not None
            tenant = self.tenants.tenant_of_topic(change.position.topic)
            old = books.current_id(tenant, change.id)
            new = self.tenants.internal(tenant, change.id, change.target) if change.op == UPSERT else old
            reason = self._refusal(tenant, change, books, old, new)
            if reason is not None:
                key, value = raw[change.position][:2]
                refused.append(error(SUBSCRIPTION, value, change.position, reason, key))
                continue
            if new != old and books.held(old) is not None:
                books.step(old, None)
                accepted.append(Change(DELETE, old, None, change.position))
            sub = dataclasses.replace(change.subscription, id=new) if change.subscription is not None else None
            books.step(new, sub)
            accepted.append(change._replace(id=new, subscription=sub, target=None))
        return accepted, refused

    def _refusal(self, tenant: str, change: Change, books: Books, old: str, new: str) -> str | None:
        """Why a change is refused (a target, a quota), or ``None``."""
        if change.target is not None:
            reason = self.tenants.refuse_target(tenant, change.id, change.target, self.topic_exists)
            if reason is not None:
                return reason
        if not tenant or change.op == DELETE:
            return None
        used = books.usage.get(tenant, [0, 0])
        (old_n, old_p), (new_n, new_p) = _cost(books.held(old)), _cost(change.subscription)
        for quota, held in (("subscriptions", used[0] - old_n + new_n), ("predicates", used[1] - old_p + new_p)):
            reason = self.tenants.refusal(tenant, change.id, quota, held)
            if reason is not None:
                return reason
        return None

    def _books(self, registry: Registry) -> Books:
        if self.version != registry.version:
            self.books, self.version = Books(registry.subscriptions), registry.version
        return self.books

    def account(self, registry: Registry, changes: Sequence[Change]) -> None:
        """Count the changes about to be appended to ``registry`` as its next version."""
        if not changes:
            return
        books = self._books(registry)
        for c in changes:
            books.step(c.id, c.subscription if c.op == UPSERT else None)
        books.pending.clear()  # the registry holds them once appended
        self.version = registry.version + 1

    def describe(self, registry: Registry, patterns: Iterable[str] = (),
                 instances: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Each tenant's usage of ``registry`` (and of the pattern registry's ids ``patterns``,
        and its live pattern instances ``instances`` after the last patterns batch) and its
        quotas (for ``status``)."""
        usage = self._books(registry).usage
        held = Counter(Tenants.split(p)[0] for p in patterns)
        live = instances or {}
        return {t: {"subscriptions": usage.get(t, [0, 0])[0], "predicates": usage.get(t, [0, 0])[1],
                    "patterns": held[t], "pattern_instances": live.get(t, 0),
                    "quotas": dict(self.tenants.quotas.get(t, {}))} for t in self.tenants.names}

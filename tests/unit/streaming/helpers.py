"""Helpers of the service's unit tests: Kafka rows, a batch context without Kafka, a columnar
registry with the subscriptions of each of its versions, the driver's handling of a batch's
subscription records.

Random subscriptions and events come from :mod:`tests.strategies`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from matchers.expr import Subscription
from matchers.packed import pack
from streaming.executor_cache import IndexSpec
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match.changes import parse_subscription_records
from streaming.records import count_predicates
from streaming.registry_columns import (
    DELETE,
    EXPRESSION,
    UPSERT,
    Applied,
    ChangeBatch,
    ColumnRegistry,
)
from streaming.registry_columns.admit import admit
from streaming.registry_columns.migrate import record_of
from streaming.tenants import Tenants, parts

NO_KAFKA = KafkaClientConfig.create("unused.invalid:9092")
"""The client configuration of a batch context whose tests pass their own ``produce``."""


def kafka_batch(values: list[bytes | None], topic: str = "events", partition: int = 0, first_offset: int = 0,
                timestamp_us: int = 1_700_000_000_000_000) -> pa.RecordBatch:
    """Arrow batch with the Kafka source's columns."""
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(first_offset, first_offset + n), pa.int64()),
            pa.array([timestamp_us] * n, pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )


def dumps(obj) -> bytes:
    return orjson.dumps(obj)


Change = Subscription | str
"""A change of a test: an upsert of a parsed subscription, or the delete of an id."""


def changes_of(changes: Iterable[Change]) -> ChangeBatch:
    """The columns of upserts (their records written back, :func:`record_of`, and packed) and deletes, in order."""
    items = list(changes)
    subs = [c if isinstance(c, Subscription) else None for c in items]
    return ChangeBatch.of(
        [c if isinstance(c, str) else c.id for c in items],
        [DELETE if s is None else UPSERT for s in subs],
        [0 if s is None else EXPRESSION for s in subs],
        [None if s is None else record_of(s.id, s) for s in subs],
        [math.nan if s is None or s.expires is None else s.expires for s in subs],
        ["" if s is None else parts(s.id)[0] for s in subs],
        [0 if s is None else count_predicates(s) for s in subs], [None if s is None else pack(s) for s in subs])


class ModelRegistry:
    """A columnar registry and the subscriptions of each version it recorded (the oracle's side).

    Parameters
    ----------
    directory : the registry's location.
    options : :class:`ColumnRegistry`'s (``shards``, ``snapshot_every``, ``snapshots_kept``).
    """

    def __init__(self, directory: str | Path, **options: Any):
        self.registry = ColumnRegistry(directory, **options)
        self.uri = str(directory)
        self.versions: dict[int, dict[str, Subscription]] = {0: {}}

    @property
    def version(self) -> int:
        return self.registry.version

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        """The subscriptions at the latest version."""
        return self.versions[self.version]

    def apply(self, batch_id: int, changes: Iterable[Change], time: float = 0.0) -> Applied:
        """Record ``changes`` as batch ``batch_id``."""
        items = list(changes)
        before = self.version
        applied = self.registry.apply(batch_id, changes_of(items), time)
        if applied.version != before:
            subs = dict(self.versions[before])
            for c in items:
                if isinstance(c, str):
                    subs.pop(c, None)
                else:
                    subs[c.id] = c
            self.versions[applied.version] = subs
        return applied

    def spec(self, matcher: str = "counting", version: int | None = None, max_catchup: int = 20,
             **fields: Any) -> IndexSpec:
        """The index spec of a batch at ``version`` (the latest by default)."""
        return IndexSpec(self.uri, matcher, self.version if version is None else version, max_catchup, **fields)


def record_batch(registry: ColumnRegistry, batch_id: int, records: pa.Table, now: float,
                 tenants: Tenants | None = None, topic_exists: Any = lambda topic: True) -> tuple:
    """What the driver does with a batch's subscription records (:meth:`MatchJob._process`):
    ``(applied, the batch's time, admitted)``."""
    parsed = parse_subscription_records(records, targets=tenants is not None,
                                        route_by=registry.routing.attr if registry.routing else "")
    admitted = admit(parsed, registry, batch_id, tenants, topic_exists, now)
    return registry.apply(batch_id, admitted.changes, admitted.now), admitted.now, admitted

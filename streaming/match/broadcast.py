"""The registry as the executors receive it: a broadcast snapshot per shard plus the shipped deltas.

:class:`RegistryBroadcast` (driver) makes the :class:`~streaming.executor_cache.IndexSpec` of
each batch; :func:`~streaming.executor_cache.index_for` (executors) brings a worker's cached
index to the batch's version from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from matchers.expr import Subscription
from streaming.executor_cache import IndexSpec, shard_of
from streaming.registry import Delta, Registry, Snapshot, load_state

log = logging.getLogger("streaming.match")

SHIPPED_CHANGES = 20_000
"""Most changes sent along with a batch's tasks; workers further behind rebuild from the broadcast snapshot."""


def shipped_deltas(registry: Registry, version: int, max_catchup: int) -> tuple[Delta, ...]:
    """The newest deltas up to ``version`` (at most ``max_catchup`` of them and :data:`SHIPPED_CHANGES` changes)."""
    recent = registry.deltas_since(max(0, version - max_catchup)) or []
    out: list[Delta] = []
    total = 0
    for delta in reversed([d for d in recent if d.version <= version]):
        total += len(delta.changes)
        if total > SHIPPED_CHANGES:
            break
        out.append(delta)
    return tuple(reversed(out))


class RegistryBroadcast:
    """The registry state the executors build their indexes from (:meth:`spec`).

    One Spark broadcast of the registry's :class:`Snapshot` per shard at some version (the *base*,
    a tuple: a worker building a shard's index loads that shard's subscriptions only),
    made when a batch needs it and reused by later batches while the deltas shipped with
    their tasks (:func:`shipped_deltas`) still reach back to it; a new one replaces it when
    they no longer do (or for a replayed batch older than the base), and the old one is
    destroyed. Each shipped delta is a broadcast of its own too, made once and destroyed
    when no batch ships it any more: a task's function carries only their handles, and a
    Python worker loads each delta once (inline, the deltas were pickled with every batch
    and unpickled by every task: 0.5 s of driver CPU per batch for 20,000 changes).

    Parameters
    ----------
    broadcast : makes a broadcast of a snapshot or a delta (``SparkContext.broadcast``); the
        result has ``.value`` and ``.destroy()``.
    """

    def __init__(self, broadcast: Callable[[Snapshot | Delta], Any]):
        self.broadcast = broadcast
        self.base: tuple[Any, ...] | None = None
        self.base_version = -1
        self.made = 0
        self.deltas: dict[int, Any] = {}
        """The broadcasts of the deltas shipped with the last batch, by version."""

    def spec(self, registry: Registry, matcher: str, version: int, max_catchup: int, shards: int = 1) -> IndexSpec:
        """What the tasks of a batch at registry ``version`` need to reach that version (shard 0 of ``shards``)."""
        shipped = shipped_deltas(registry, version, max_catchup)
        oldest = shipped[0].version - 1 if shipped else version  # the oldest base the shipped deltas complete
        if self.base is None or not oldest <= self.base_version <= version or len(self.base) != shards:
            if version == registry.version:
                state = Snapshot(version, registry.batch_id, 0.0, registry.subscriptions)
            else:  # a replayed batch: its version from the stored snapshot and deltas
                state = load_state(registry.directory, version)
            self._destroy_base()
            self.base, self.base_version = tuple(self.broadcast(part) for part in split_snapshot(state, shards)), version
            self.made += 1
            log.info("registry broadcast at version %d (%d subscriptions in %d shards)", version,
                     len(state.subscriptions), shards)
        wanted = {d.version for d in shipped}
        for v in [v for v in self.deltas if v not in wanted]:
            self.deltas.pop(v).destroy()
        for d in shipped:
            if d.version not in self.deltas:
                self.deltas[d.version] = self.broadcast(d)
        return IndexSpec(registry.directory.uri, matcher, version, tuple(self.deltas[d.version] for d in shipped),
                         max_catchup, self.base, 0, shards)

    def _destroy_base(self) -> None:
        """Destroy the snapshot's broadcasts (executors and driver drop their copies)."""
        for part in self.base or ():
            part.destroy()
        self.base, self.base_version = None, -1


def split_snapshot(state: Snapshot, shards: int) -> list[Snapshot]:
    """``state`` as one snapshot per shard, each of that shard's subscriptions (:func:`shard_of`)."""
    if shards == 1:
        return [state]
    parts: list[dict[str, Subscription]] = [{} for _ in range(shards)]
    for sid, sub in state.subscriptions.items():
        parts[shard_of(sid, shards)][sid] = sub
    return [state._replace(subscriptions=part) for part in parts]

"""The "match" query: subscription changes on the driver, then events matched on the executors.

Where a micro-batch goes, module by module:

* :mod:`~streaming.match.job`: :class:`MatchJob`, the foreachBatch function, hands off to
* :mod:`~streaming.match.changes`: the batch's subscription records applied to the registry,
  and new subscriptions matched against still-valid events (retro notifications);
* :mod:`~streaming.match.broadcast`: the registry as the executors receive it;
* :mod:`~streaming.match.tasks`: the batch's match tasks, what each is given and returns;
* :mod:`~streaming.match.executor`: what runs in a task (read, match, notify, report).
"""

from streaming.match.broadcast import (
    SHIPPED_CHANGES,
    RegistryBroadcast,
    shipped_deltas,
    split_snapshot,
)
from streaming.match.changes import (
    ChangeOutcome,
    apply_changes,
    new_subscriptions,
    read_records,
    retro_notifications,
)
from streaming.match.executor import match_all_shards, match_partition, match_pinned, match_ranges
from streaming.match.job import MatchJob, logged_ranges
from streaming.match.tasks import (
    METRICS,
    TASK_DDL,
    TASK_EVENTS,
    TASK_SCHEMA,
    BatchContext,
    Task,
    TaskMetrics,
    TaskResult,
    pinned_tasks,
    plan_tasks,
    shard_groups,
)

__all__ = [
    "METRICS",
    "SHIPPED_CHANGES",
    "TASK_DDL",
    "TASK_EVENTS",
    "TASK_SCHEMA",
    "BatchContext",
    "ChangeOutcome",
    "MatchJob",
    "RegistryBroadcast",
    "Task",
    "TaskMetrics",
    "TaskResult",
    "apply_changes",
    "logged_ranges",
    "match_all_shards",
    "match_partition",
    "match_pinned",
    "match_ranges",
    "new_subscriptions",
    "pinned_tasks",
    "plan_tasks",
    "read_records",
    "retro_notifications",
    "shard_groups",
    "shipped_deltas",
    "split_snapshot",
]

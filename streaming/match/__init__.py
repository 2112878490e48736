"""The "match" query: subscription records parsed in tasks and applied on the driver, then
events matched on the executors.

Where a micro-batch goes, module by module:

* :mod:`~streaming.match.job`: :class:`MatchJob`, the foreachBatch function, hands off to
* :mod:`~streaming.match.changes`: the batch's subscription records, parsed in tasks into columns, applied to
  the columnar registry, and new subscriptions matched against still-valid events (retro
  notifications);
* :mod:`~streaming.match.tasks`: the batch's match tasks, what each is given and returns;
* :mod:`~streaming.match.executor`: what runs in a task (read, match, notify, report).
"""

from streaming.match.changes import (
    new_subscriptions,
    parse_in_tasks,
    parse_subscription_records,
    read_records,
    retro_notifications,
)
from streaming.match.executor import match_partition, match_pinned, match_ranges
from streaming.match.job import MatchJob, logged_ranges
from streaming.match.tasks import (
    METRICS,
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
    "TASK_EVENTS",
    "TASK_SCHEMA",
    "BatchContext",
    "MatchJob",
    "Task",
    "TaskMetrics",
    "TaskResult",
    "logged_ranges",
    "match_partition",
    "match_pinned",
    "match_ranges",
    "new_subscriptions",
    "parse_in_tasks",
    "parse_subscription_records",
    "pinned_tasks",
    "plan_tasks",
    "read_records",
    "retro_notifications",
    "shard_groups",
]

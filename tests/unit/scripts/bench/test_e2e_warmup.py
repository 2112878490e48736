"""The warm-up batch of ``scripts.bench.e2e`` makes two tasks (both Python workers build or map
their indexes before the measurements), which a limit of exactly two tasks' worth did not."""

from scripts.bench.e2e import warm_up_events
from streaming.kafka.offsets import OffsetRange
from streaming.match.tasks import TASK_EVENTS, plan_tasks


def _halves(n: int, lost: int = 0) -> list[OffsetRange]:
    """``n`` events over the benchmark's 2 event partitions, ``lost`` of them left to a later batch."""
    return [OffsetRange("events", 0, 0, n // 2 - lost), OffsetRange("events", 1, 0, n - n // 2)]


def test_the_warm_up_batch_makes_two_tasks_of_every_shard():
    n = warm_up_events(TASK_EVENTS)
    for shards in (1, 4, 8):
        for lost in (0, 1):  # one record short, as a binding rate limit rounds a partition's share down
            tasks = plan_tasks(_halves(n, lost), shards, slots=2)
            assert len(tasks) == 2
            assert all(group == tuple(range(shards)) for _, group in tasks)


def test_a_limit_of_two_tasks_worth_rounded_down_made_one_task():
    assert len(plan_tasks(_halves(2 * TASK_EVENTS, lost=1), 8, slots=2)) == 1

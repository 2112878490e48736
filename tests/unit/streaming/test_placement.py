"""Shard groups pinned to executors: the pure planning of groups, bins and tasks."""

from __future__ import annotations

import os

from streaming.kafka.offsets import OffsetRange
from streaming.match import pinned_tasks
from streaming.placement import event_bins, executor_name, pinned_bins, pinned_groups, spread


def test_one_group_per_executor_at_most_one_per_shard_shard_0_in_the_first():
    assert pinned_groups(4, 2) == [(0, 2), (1, 3)]
    assert pinned_groups(3, 2) == [(0, 2), (1,)]
    assert pinned_groups(2, 5) == [(0,), (1,)]
    assert pinned_groups(3, 0) == [(0, 1, 2)]  # no executor registered yet: one group
    for shards in range(1, 9):
        for executors in range(0, 10):
            groups = pinned_groups(shards, executors)
            assert sorted(s for g in groups for s in g) == list(range(shards)) and 0 in groups[0]
            assert len(groups) == max(1, min(shards, executors))


def test_bins_fill_a_groups_executor_with_whole_ranges():
    a, b, c = OffsetRange("e", 0, 0, 30_000), OffsetRange("e", 1, 5, 10_005), OffsetRange("e", 2, 0, 12_000)
    assert event_bins([a, b, c], 2) == [(a,), (c, b)]  # largest first onto the bin with the fewest
    assert event_bins([b], 3) == [(b,)]  # at most one bin per range
    assert pinned_bins([], 2, 2, 10_000) == []
    assert pinned_bins([a, b, c], 2, 2, 10_000) == [(a, c, b)]  # one slot per group: one bin
    assert pinned_bins([a, b, c], 2, 8, 10_000) == [(a,), (c,), (b,)]  # four slots per group, three ranges
    assert pinned_bins([a, b, c], 1, 8, 20_000) == [(a,), (c, b)]  # 52,000 events: two bins of 20,000
    assert pinned_bins([b, c], 2, 8, 10_000) == [(c,), (b,)]
    assert pinned_bins([b, c], 2, 8, 50_000) == [(c, b)]  # a small batch: one bin


def test_pinned_tasks_are_in_the_cartesian_partitions_order():
    a, b = OffsetRange("e", 0, 0, 10), OffsetRange("e", 1, 0, 10)
    groups = pinned_groups(3, 2)
    todo = pinned_tasks([(a,), (b,)], groups)
    # partition k of anchors.cartesian(bins) pairs anchor k // 2 with bin k % 2
    assert todo == [((a,), (0, 2)), ((b,), (0, 2)), ((a,), (1,)), ((b,), (1,))]
    # each bin is matched against every shard once, and shard 0 (the events' errors) once per bin
    for bin_ in ((a,), (b,)):
        shards = [s for ranges, g in todo if ranges == bin_ for s in g]
        assert sorted(shards) == [0, 1, 2]


def test_an_executor_is_named_by_its_block_manager_directory(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/tmp/spark-1/executor-a/blockmgr-1")
    one = executor_name()
    assert one == executor_name()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/tmp/spark-2/executor-b/blockmgr-2")
    assert executor_name() != one and executor_name().split("/")[0] == one.split("/")[0]
    monkeypatch.delenv("SPARK_LOCAL_DIRS")
    assert executor_name().endswith(f"/pid{os.getppid()}")


def test_anchors_are_spread_when_on_as_many_executors_as_they_can_be():
    assert spread({0: "a", 1: "b"}, 2) and spread({0: "a", 1: "b", 2: "a"}, 2)
    assert not spread({0: "a", 1: "a"}, 2)  # one executor busy when they were made
    assert spread({0: "a", 1: "a"}, 1) and spread({0: "a"}, 3)  # one executor, one group
    assert not spread({0: "a", 1: "b", 2: "a"}, 3)

"""Shard groups pinned to executors: each executor matches (and keeps the indexes of) its own shards.

With ``match.shards`` > 1 on a cluster the driver splits the shards into groups, one per
live executor at most (:func:`pinned_groups`; shard 0, which reports the events' own
errors, counts and valid events, in group 0), and keeps a persisted *anchor* RDD of one
tiny partition per group (:class:`ShardAnchors`). Spark's block manager records which
executor caches each anchor; every batch's match job is the anchors' ``cartesian`` with
the batch's bins of event ranges, so a task of group ``g`` depends on anchor ``g`` and Spark
prefers the executor that caches it (``PROCESS_LOCAL``, waiting up to
``spark.locality.wait`` for it). That executor's Python workers hold the indexes of its
groups' shards only. A lost executor loses its anchors: the next batch's tasks of those
groups compute them again wherever they run, and the group moves there. When the number
of live executors changes the driver makes new anchors (and groups) for them, and again
(up to :data:`REPLACEMENTS` times in a row) when Spark cached two anchors on one executor
while another had none (:func:`spread`; an executor busy with other tasks, such as the
Cayuga queries', when they were made).

Local masters are not pinned: there the tasks match every shard they are given.
"""

from __future__ import annotations

import logging
import os
import socket
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streaming.kafka.offsets import OffsetRange

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

log = logging.getLogger("streaming.placement")


def executor_name() -> str:
    """A name of the executor this Python process works for, the same in all its Python workers.

    The host and a checksum of the executor's block manager directory (``SPARK_LOCAL_DIRS``,
    which Spark gives the Python workers of one executor, and no other), or the worker
    daemon's process id where Spark does not set it.
    """
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS")
    tag = f"{zlib.crc32(local_dirs.encode('utf-8')):08x}" if local_dirs else f"pid{os.getppid()}"
    return f"{socket.gethostname()}/{tag}"


def pinned_groups(shards: int, executors: int) -> list[tuple[int, ...]]:
    """The shard groups for ``executors`` live executors: one per executor, at most one per shard.

    Group ``g`` holds shards ``g, g + G, g + 2G, ...`` (``G`` groups), so group 0 holds shard 0.
    """
    groups = max(1, min(shards, executors))
    return [tuple(range(g, shards, groups)) for g in range(groups)]


def event_bins(ranges: Sequence[OffsetRange], n: int) -> list[tuple[OffsetRange, ...]]:
    """``ranges`` in ``n`` bins of about equal events (largest first onto the bin with the fewest; none empty)."""
    n = max(1, min(n, len(ranges)))
    bins: list[list[OffsetRange]] = [[] for _ in range(n)]
    sizes = [0] * n
    for r in sorted(ranges, key=lambda r: r.start - r.end):
        i = sizes.index(min(sizes))
        bins[i].append(r)
        sizes[i] += r.end - r.start
    return [tuple(b) for b in bins]


def pinned_bins(ranges: Sequence[OffsetRange], groups: int, slots: int, task_events: int) -> list[tuple[OffsetRange, ...]]:
    """The bins of event ranges each group's tasks match (a task per bin and group).

    As many as have ``task_events`` events each and as fill the slots of a group's executor
    (``slots`` / ``groups``, rounded up), at least one, at most one per range; none without ranges.
    """
    if not ranges:
        return []
    full = sum(r.end - r.start for r in ranges) // task_events
    return event_bins(ranges, max(1, min(full, -(-slots // max(1, groups)))))


REPLACEMENTS = 3
"""Batches in a row that make the anchors again while Spark placed them on too few executors."""


def spread(placed: dict[int, str], executors: int) -> bool:
    """Whether the anchors ``placed`` (group -> executor) are on as many executors as they can be."""
    return len(set(placed.values())) >= min(len(placed), executors)


def _anchor(group: int) -> tuple[int, str]:
    """An anchor partition's one row: its group and the executor that computed (and caches) it."""
    return group, executor_name()


def live_executors(sc: SparkContext) -> int:
    """Executors registered with the driver now (the driver's own entry not counted)."""
    return max(0, len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1)


class ShardAnchors:
    """The persisted anchor RDD of the shard groups and where its partitions are cached.

    Parameters
    ----------
    shards : ``match.shards``.
    """

    def __init__(self, shards: int):
        self.shards = shards
        self.rdd: Any = None
        self.groups: list[tuple[int, ...]] = []
        self.executors = -1
        """The live executors the anchors were made for."""
        self.made = 0
        self.placed: dict[int, str] = {}
        """The executor that computed each group's anchor when it was made."""
        self.retries = 0
        """Makings in a row for the same executors because the last one was not :func:`spread`."""

    def current(self, sc: SparkContext) -> tuple[RDD[tuple[int, str]], list[tuple[int, ...]]]:
        """The anchors and their groups, made anew when the number of live executors changed
        (or they were not :func:`spread`, :data:`REPLACEMENTS` times at most)."""
        executors = live_executors(sc)
        if self.rdd is None or executors != self.executors:
            self.retries = 0
            self._make(sc, executors)
        elif not spread(self.placed, executors) and self.retries < REPLACEMENTS:
            self.retries += 1
            self._make(sc, executors)
        return self.rdd, self.groups

    def _make(self, sc: SparkContext, executors: int) -> None:
        from pyspark import StorageLevel

        self.unpersist()
        groups = pinned_groups(self.shards, executors)
        rdd = sc.parallelize(range(len(groups)), len(groups)).map(_anchor).persist(StorageLevel.MEMORY_ONLY)
        rdd.setName(f"shard anchors ({len(groups)} groups of {self.shards} shards)")
        self.placed = dict(rdd.collect())  # computed and cached where Spark ran each partition
        self.rdd, self.groups, self.executors = rdd, groups, executors
        self.made += 1
        log.info("shard groups for %d executor(s): %s", executors,
                 "; ".join(f"{list(groups[g])} on {where}" for g, where in sorted(self.placed.items())))

    def unpersist(self) -> None:
        """Drop the anchors (their executors' cached blocks)."""
        if self.rdd is not None:
            self.rdd.unpersist(blocking=False)
        self.rdd, self.groups, self.executors, self.placed = None, [], -1, {}

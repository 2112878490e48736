"""The pattern operator's state: ``patterns.state_partitions`` partitions, snapshotted per micro-batch.

A state key goes to partition :func:`partition_of`. After micro-batch ``b``, the task of
partition ``p`` writes its whole state (:data:`~streaming.patterns.operator.PartitionState`,
a pickle, so that a NaN or an infinity in an instance's record stays one) to
``<dir>/p<p>/b<b>``, atomically (:class:`streaming.storage.Directory`), and keeps it in the
worker's cache; batch ``b`` starts from batch ``b - 1``'s state: the cache when it holds
exactly that, else its snapshot. A replayed batch therefore starts from the state it started
from the first time. Batch 0 starts empty; any later batch whose previous snapshot cannot be
read fails (:class:`StateError`), never starting empty. The driver writes the watermark and
each tenant's live instances (summed over the partitions) after each batch
(``<dir>/watermark/b<b>``), so a replayed batch makes the same ``pattern_instances`` quota
decision, and the partition count once (``<dir>/partitions``): a checkpoint's state cannot
be read with another count.
"""

from __future__ import annotations

import pickle
import re
import zlib

import orjson

from matchers.errors import PubSubError
from streaming.patterns.operator import PartitionState
from streaming.storage import Directory

KEPT = 3
"""Snapshots kept per partition (the newest ones); older ones are deleted."""
_SNAPSHOT = re.compile(r"^b(\d{12})$")
_cache: dict[tuple[str, int], tuple[int, PartitionState]] = {}


class StateError(PubSubError, RuntimeError):
    """The pattern state a batch needs cannot be read, or does not fit the settings."""


def partition_of(gkey: str, partitions: int) -> int:
    """The state partition of state key ``gkey`` (CRC-32 of its UTF-8, modulo ``partitions``)."""
    return zlib.crc32(gkey.encode("utf-8")) % partitions


def _name(batch_id: int) -> str:
    return f"b{batch_id:012d}"


class StateStore:
    """The snapshots of the state partitions under a URI or path (see the module docstring)."""

    def __init__(self, location: str):
        self.dir = Directory(location)

    def check(self, partitions: int) -> None:
        """Record the partition count on first use; raise :class:`StateError` if it changed since."""
        try:
            written = int(self.dir.read("partitions"))
        except FileNotFoundError:
            self.dir.make()
            self.dir.write("partitions", str(partitions).encode())
            return
        if written != partitions:
            raise StateError(f"the pattern state at {self.dir.uri} has {written} partitions, the settings "
                             f"{partitions} (patterns.state_partitions must not change for a checkpoint)")

    def load(self, part: int, batch_id: int) -> PartitionState:
        """The state of partition ``part`` before batch ``batch_id``."""
        cached = _cache.get((self.dir.uri, part))
        if cached is not None and cached[0] == batch_id - 1:
            return cached[1]
        if batch_id == 0:
            return {}
        try:
            blob = self.dir.sub(f"p{part:04d}").read(_name(batch_id - 1))
        except FileNotFoundError:
            raise StateError(f"no snapshot of pattern state partition {part} after batch {batch_id - 1} "
                             f"at {self.dir.uri}: the state is lost, not empty") from None
        state: PartitionState = pickle.loads(blob)
        return state

    def save(self, part: int, batch_id: int, state: PartitionState) -> None:
        """Write partition ``part``'s state after batch ``batch_id`` and delete its older snapshots."""
        d = self.dir.sub(f"p{part:04d}")
        d.write(_name(batch_id), pickle.dumps(state, protocol=5))
        _cache[(self.dir.uri, part)] = (batch_id, state)
        for n in d.names():
            m = _SNAPSHOT.match(n)
            if m and int(m.group(1)) <= batch_id - KEPT:
                d.remove(n)

    def before(self, batch_id: int) -> tuple[int, dict[str, int]]:
        """The event-time watermark (ms) after batch ``batch_id - 1`` and each tenant's live
        instances then (``(0, {})`` before batch 0; ``{}`` from a record written without them)."""
        if batch_id == 0:
            return 0, {}
        try:
            return _record(self.dir.sub("watermark").read(_name(batch_id - 1)))
        except FileNotFoundError:
            raise StateError(f"no watermark after batch {batch_id - 1} at {self.dir.uri}") from None

    def latest(self) -> dict[str, int]:
        """Each tenant's live instances after the newest batch recorded (``{}``: none yet)."""
        try:
            names = sorted(n for n in self.dir.sub("watermark").names() if _SNAPSHOT.match(n))
            return _record(self.dir.sub("watermark").read(names[-1]))[1] if names else {}
        except FileNotFoundError:
            return {}

    def write_batch(self, batch_id: int, watermark_ms: int, live: dict[str, int]) -> None:
        """Record the watermark and each tenant's live instances after batch ``batch_id`` (and
        delete older records)."""
        d = self.dir.sub("watermark")
        d.write(_name(batch_id), orjson.dumps({"watermark": watermark_ms, "instances": live}))
        d.remove(_name(batch_id - KEPT))


def _record(blob: bytes) -> tuple[int, dict[str, int]]:
    obj = orjson.loads(blob)
    if isinstance(obj, int):  # written before the live instances were recorded
        return obj, {}
    return int(obj["watermark"]), {str(t): int(n) for t, n in obj["instances"].items()}

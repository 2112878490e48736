"""Events with a validity end (Fabret et al., Section 1): kept until then, matched by new subscriptions.

An event whose reserved field (``valid_until`` by default, seconds since the epoch)
lies in the future is written by the task that matched it to a file of the store,
one file per (batch, input partition), named so that a replayed task overwrites its
own file and expired files are found without reading them::

    validity/b<batch:012d>-p<partition:05d>-u<last validity end, ms>.jsonl

When a batch brings new or changed subscriptions, the driver matches them against the
events of earlier batches that are still valid (:meth:`ValidityStore.valid_events`) and
notifies them (the notification says ``"retro": true``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from streaming.registry import write_atomic


class ValidEvent(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    valid_until: float
    event_id: Any
    raw: bytes


def validity_end(event: dict[str, Any], field: str, now: float, max_validity_s: float) -> float | None:
    """The event's validity end if it is still valid after ``now`` (capped at ``now + max_validity_s``)."""
    value = event.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    end = float(value)
    if not math.isfinite(end) or end <= now:
        return None
    return min(end, now + max_validity_s)


def _file_name(batch_id: int, partition: int, until: float) -> str:
    return f"b{batch_id:012d}-p{partition:05d}-u{int(math.ceil(until * 1000))}.jsonl"


def _parse_name(name: str) -> tuple[int, int, float] | None:
    if not (name.startswith("b") and name.endswith(".jsonl")):
        return None
    try:
        b, p, u = name[1:-6].split("-")
        return int(b), int(p[1:]), int(u[1:]) / 1000.0
    except ValueError:
        return None


class ValidityStore:
    """Files of still-valid events under ``directory``."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

    def write(self, batch_id: int, partition: int, events: Iterable[ValidEvent]) -> int:
        """Store a task's valid events (replacing what a previous attempt of the task wrote)."""
        events = list(events)
        self.directory.mkdir(parents=True, exist_ok=True)
        prefix = f"b{batch_id:012d}-p{partition:05d}-"
        for old in os.listdir(self.directory):
            if old.startswith(prefix):
                (self.directory / old).unlink(missing_ok=True)
        if not events:
            return 0
        lines = b"".join(
            orjson.dumps({"topic": e.topic, "partition": e.partition, "offset": e.offset, "ts": e.timestamp_ms,
                          "until": e.valid_until, "id": e.event_id, "raw": e.raw.decode("utf-8")}) + b"\n"
            for e in events
        )
        until = max(e.valid_until for e in events)
        write_atomic(self.directory / _file_name(batch_id, partition, until), lines)
        return len(events)

    def _files(self) -> list[tuple[int, int, float, Path]]:
        if not self.directory.is_dir():
            return []
        out = []
        for name in os.listdir(self.directory):
            parsed = _parse_name(name)
            if parsed is not None:
                out.append((*parsed, self.directory / name))
        return sorted(out)

    def valid_events(self, before_batch: int, now: float) -> list[ValidEvent]:
        """Events stored by batches before ``before_batch`` that are still valid after ``now``."""
        out = []
        for batch_id, _partition, until, path in self._files():
            if batch_id >= before_batch or until <= now:
                continue
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            for line in data.splitlines():
                r = orjson.loads(line)
                if r["until"] > now:
                    out.append(ValidEvent(r["topic"], r["partition"], r["offset"], r["ts"], r["until"], r["id"],
                                          r["raw"].encode("utf-8")))
        return out

    def prune(self, now: float) -> int:
        """Remove the files whose every event expired at ``now``; returns how many."""
        removed = 0
        for _b, _p, until, path in self._files():
            if until <= now:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def count_files(self) -> int:
        return len(self._files())

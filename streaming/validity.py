"""Events with a validity end (Fabret et al., Section 1): kept until then, matched by new subscriptions.

An event whose reserved field (``valid_until`` by default, seconds since the epoch)
lies in the future goes back to the driver in the result row of the task that matched
it (:func:`encode`), and the driver stores the batch's valid events in one file of the
store under the checkpoint location (any file system :mod:`streaming.storage` reaches),
named so that a replayed batch overwrites its own file and expired files are found
without reading them::

    validity/b<batch:012d>-u<last validity end, ms>.jsonl

When a batch brings new or changed subscriptions, the driver matches them against the
events of earlier batches that are still valid (:meth:`ValidityStore.valid_events`) and
notifies them (the notification says ``"retro": true``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from streaming.storage import Directory


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


def encode(events: Iterable[ValidEvent]) -> bytes:
    """Valid events as JSON lines (a task's result column, a file of the store)."""
    return b"".join(
        orjson.dumps({"topic": e.topic, "partition": e.partition, "offset": e.offset, "ts": e.timestamp_ms,
                      "until": e.valid_until, "id": e.event_id, "raw": e.raw.decode("utf-8")}) + b"\n"
        for e in events
    )


def decode(data: bytes) -> list[ValidEvent]:
    """The inverse of :func:`encode`."""
    out = []
    for line in data.splitlines():
        r = orjson.loads(line)
        out.append(ValidEvent(r["topic"], r["partition"], r["offset"], r["ts"], r["until"], r["id"],
                              r["raw"].encode("utf-8")))
    return out


def _file_name(batch_id: int, until: float) -> str:
    return f"b{batch_id:012d}-u{int(math.ceil(until * 1000))}.jsonl"


def _parse_name(name: str) -> tuple[int, float] | None:
    if not (name.startswith("b") and name.endswith(".jsonl")):
        return None
    try:
        b, u = name[1:-6].split("-")
        return int(b), int(u[1:]) / 1000.0
    except ValueError:
        return None


class ValidityStore:
    """Files of still-valid events under ``location`` (a URI or path; created here, by the driver).

    A store whose directory disappears is an error (``FileNotFoundError``), never an empty store.
    """

    def __init__(self, location: str | Path):
        self.directory = Directory(location)
        self.directory.make()

    def write(self, batch_id: int, events: Iterable[ValidEvent]) -> int:
        """Store a batch's valid events (replacing what a previous run of the batch wrote)."""
        events = list(events)
        for _b, _until, name in self._files(batch_id):
            self.directory.remove(name)
        if not events:
            return 0
        until = max(e.valid_until for e in events)
        self.directory.write(_file_name(batch_id, until), encode(events))
        return len(events)

    def _files(self, batch_id: int | None = None) -> list[tuple[int, float, str]]:
        out = []
        for name in self.directory.names():
            parsed = _parse_name(name)
            if parsed is not None and (batch_id is None or parsed[0] == batch_id):
                out.append((*parsed, name))
        return sorted(out)

    def valid_events(self, before_batch: int, now: float) -> list[ValidEvent]:
        """Events stored by batches before ``before_batch`` that are still valid after ``now``."""
        out: list[ValidEvent] = []
        for batch_id, until, name in self._files():
            if batch_id >= before_batch or until <= now:
                continue
            out.extend(e for e in decode(self.directory.read(name)) if e.valid_until > now)
        return out

    def prune(self, now: float) -> int:
        """Remove the files whose every event expired at ``now``; returns how many."""
        removed = 0
        for _b, until, name in self._files():
            if until <= now:
                self.directory.remove(name)
                removed += 1
        return removed

    def count_files(self) -> int:
        return len(self._files())

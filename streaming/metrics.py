"""Per-batch metrics: one log line per micro-batch and the status file ``status`` reads.

The status file names the process that writes it (``pid`` and ``pid_started``, its start
time as the kernel reports it), so that a reader can tell a job that is gone (killed,
crashed) from one that is still running: :func:`process_alive`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.instance import start_time
from streaming.storage import write_file


@dataclass
class BatchMetrics:
    """What one micro-batch did. Times in milliseconds; ``match_ms``, ``index_ms``, ``read_ms``
    (waiting for event records) and ``task_ms`` (whole tasks, producing included) sum over the tasks."""

    batch_id: int
    input_rows: int = 0
    events: int = 0
    subscription_records: int = 0
    subscription_changes: int = 0
    expired: int = 0
    rejected: int = 0
    event_errors: int = 0
    matches: int = 0
    retro_matches: int = 0
    valid_events_kept: int = 0
    match_ms: float = 0.0
    index_ms: float = 0.0
    read_ms: float = 0.0
    task_ms: float = 0.0
    batch_ms: float = 0.0
    changes_ms: float = 0.0
    """Reading and parsing the subscription records, admitting them and applying the changes
    to the registry (the sum of ``parse_ms``, ``admit_ms`` and ``apply_ms``)."""
    parse_ms: float = 0.0
    """Reading and parsing the subscription records (Spark tasks, or the driver for a few)."""
    admit_ms: float = 0.0
    """Admitting the parsed rows (:func:`~streaming.registry_columns.admit.admit`)."""
    apply_ms: float = 0.0
    """Applying the changes to the registry (its delta file and the driver's columns)."""
    snapshot_ms: float = 0.0
    """Writing the registry's snapshot when one is due (beside the retro matching and the match
    job, so not part of ``changes_ms``; wall time)."""
    retro_ms: float = 0.0
    write_ms: float = 0.0
    registry_version: int = 0
    subscriptions: int = 0
    index_bytes: int = 0
    replay: bool = False
    finished_at: float = field(default_factory=time.time)

    def log_line(self) -> str:
        """The batch as one log line."""
        return (
            f"batch={self.batch_id} rows={self.input_rows} events={self.events} "
            f"sub_changes={self.subscription_changes} rejected={self.rejected + self.event_errors} "
            f"expired={self.expired} matches={self.matches} retro={self.retro_matches} "
            f"match_ms={self.match_ms:.1f} index_ms={self.index_ms:.1f} read_ms={self.read_ms:.0f} "
            f"task_ms={self.task_ms:.0f} batch_ms={self.batch_ms:.0f} "
            f"(changes {self.changes_ms:.0f}: parse {self.parse_ms:.0f} admit {self.admit_ms:.0f} "
            f"apply {self.apply_ms:.0f}, match+write {self.write_ms:.0f}, snapshot beside {self.snapshot_ms:.0f}) "
            f"version={self.registry_version} subs={self.subscriptions} "
            f"index_mb={self.index_bytes / 2**20:.1f}{' replay' if self.replay else ''}"
        )


class StatusFile:
    """The running job's status: state, totals and the last ``history`` batches, as JSON."""

    def __init__(self, path: str | Path, history: int = 20):
        self.path = Path(path)
        self.history = history
        self.started_at = time.time()
        self.batches: list[dict[str, Any]] = []
        self.totals: dict[str, float] = {}

    def write(self, state: str, metrics: BatchMetrics | None = None, **extra: Any) -> None:
        """Record ``state`` (and a finished batch) atomically; not flushed to disk (rewritten every
        batch, and a crash leaves a ``dead`` process whatever the file says)."""
        if metrics is not None:
            row = dataclasses.asdict(metrics)
            self.batches = (self.batches + [row])[-self.history:]
            for key in ("input_rows", "events", "subscription_changes", "rejected", "event_errors", "matches",
                        "retro_matches"):
                self.totals[key] = self.totals.get(key, 0) + row[key]
            self.totals["batches"] = self.totals.get("batches", 0) + 1
        doc = {
            "state": state,
            "pid": os.getpid(),
            "pid_started": start_time(os.getpid()),
            "started_at": self.started_at,
            "updated_at": time.time(),
            "totals": self.totals,
            "last_batch": self.batches[-1] if self.batches else None,
            "batches": self.batches,
            **extra,
        }
        write_file(self.path, json.dumps(doc, indent=1).encode("utf-8"), durable=False)


def read_status(path: str | Path) -> dict[str, Any] | None:
    """The status document, or ``None`` when no job wrote one."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def checked(doc: dict[str, Any]) -> dict[str, Any]:
    """The status document as it stands: a ``starting`` or ``running`` job whose process is
    gone is ``dead`` (``last_state`` keeps what the file says)."""
    if doc["state"] in ("starting", "running") and not process_alive(doc["pid"], doc.get("pid_started")):
        return {**doc, "state": "dead", "last_state": doc["state"]}
    return doc


def process_alive(pid: int, started: int | None = None) -> bool:
    """Whether process ``pid`` runs and, if ``started`` is given, is the one that started then."""
    if started is not None and Path("/proc").is_dir():
        return start_time(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True

"""The versioned subscription registry: deltas plus periodic snapshots on disk.

Layout under the registry directory (inside the query's checkpoint location, any
file system :mod:`streaming.storage` reaches)::

    deltas/<version:012d>.pkl      Delta: version, batch id, batch time, changes
    snapshots/<version:012d>.pkl   Snapshot: version, batch id, time, {id: Subscription}

Version 0 is the empty registry. The driver appends each micro-batch's accepted
changes as the next version, recording the batch id, so that a batch replayed after a
crash finds its version instead of appending it twice. Every file is written whole or
not at all (:meth:`streaming.storage.Directory.write`). Only the driver reads and writes
these files; executors get the registry from Spark (a broadcast snapshot and the deltas
shipped with the task, :mod:`streaming.executor_cache`).

The files are pickles written by this service for itself; the checkpoint directory
must be as trusted as the code.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from matchers.expr import Subscription
from matchers.packed import from_tuples, to_tuples
from streaming.errors import RegistryError
from streaming.records import DELETE, UPSERT, Change
from streaming.storage import Directory

DELTAS = "deltas"
SNAPSHOTS = "snapshots"
SUFFIX = ".pkl"


def pack_subscription(sub: Subscription) -> tuple:
    """A subscription as nested tuples of plain values: its id, then :func:`matchers.packed.to_tuples`."""
    return (sub.id, *to_tuples(sub))


def unpack_subscription(packed: tuple) -> Subscription:
    """The inverse of :func:`pack_subscription`."""
    return from_tuples(packed[1:], packed[0])


def _pack_changes(changes) -> tuple:
    return tuple((c.op, c.id, None if c.subscription is None else pack_subscription(c.subscription))
                 for c in changes)


def _unpack_changes(packed) -> tuple[Change, ...]:
    return tuple(Change(op, i, None if p is None else unpack_subscription(p)) for op, i, p in packed)


def _delta(version: int, batch_id: int, time: float, packed: tuple) -> Delta:
    return Delta(version, batch_id, time, _unpack_changes(packed))


def _snapshot(version: int, batch_id: int, time: float, packed: tuple) -> Snapshot:
    return Snapshot(version, batch_id, time, {p[0]: unpack_subscription(p) for p in packed})


class Delta(NamedTuple):
    """The changes that make ``version`` out of ``version - 1`` (pickles in packed form)."""

    version: int
    batch_id: int
    time: float
    changes: tuple[Change, ...]

    def __reduce__(self):
        return (_delta, (self.version, self.batch_id, self.time, _pack_changes(self.changes)))


class Snapshot(NamedTuple):
    """The whole registry at ``version`` (pickles in packed form)."""

    version: int
    batch_id: int
    time: float
    subscriptions: dict[str, Subscription]

    def __reduce__(self):
        packed = tuple(pack_subscription(s) for s in self.subscriptions.values())
        return (_snapshot, (self.version, self.batch_id, self.time, packed))


def _name(version: int) -> str:
    return f"{version:012d}{SUFFIX}"


def _versions(directory: Directory) -> list[int]:
    """Sorted versions of the complete files in ``directory``.

    Raises
    ------
    RegistryError
        If the directory does not exist.
    """
    try:
        entries = directory.names()
    except FileNotFoundError:
        raise RegistryError(f"no registry directory {directory.uri}") from None
    out = []
    for entry in entries:
        if entry.endswith(SUFFIX) and not entry.startswith("."):
            try:
                out.append(int(entry[: -len(SUFFIX)]))
            except ValueError:
                continue
    return sorted(out)


def _read(directory: Directory, version: int):
    data = directory.read(_name(version))
    try:
        return pickle.loads(data)
    except Exception as exc:
        raise RegistryError(f"cannot read registry file {directory.uri}/{_name(version)}: {exc}") from exc


def net_changes(deltas: Iterable[Delta]) -> tuple[list[str], list[Subscription]]:
    """What a run of consecutive deltas does, net: ``(ids to delete, subscriptions to upsert)``.

    The latest change of an id wins; an upsert replaces a present subscription.
    """
    last: dict[str, Change] = {}
    for delta in deltas:
        for change in delta.changes:
            last.pop(change.id, None)
            last[change.id] = change
    deletes = [c.id for c in last.values() if c.op == DELETE]
    upserts = [c.subscription for c in last.values() if c.op == UPSERT]
    return deletes, upserts  # type: ignore[return-value]  # an upsert carries its subscription


def apply_deltas(subscriptions: dict[str, Subscription], deltas: Iterable[Delta]) -> dict[str, Subscription]:
    """Apply deltas in order to ``{id: Subscription}`` (in place) and return it."""
    for delta in deltas:
        for change in delta.changes:
            if change.op == UPSERT:
                subscriptions[change.id] = change.subscription  # type: ignore[assignment]  # an upsert carries its subscription
            else:
                subscriptions.pop(change.id, None)
    return subscriptions


def read_deltas(directory: str | Path | Directory, after: int, upto: int) -> list[Delta]:
    """Deltas ``after + 1 .. upto`` from disk, in order.

    Raises
    ------
    RegistryError
        If one of them is missing (pruned after a newer snapshot, or never written).
    """
    base = _directory(directory).sub(DELTAS)
    out = []
    for version in range(after + 1, upto + 1):
        try:
            delta = _read(base, version)
        except FileNotFoundError:
            raise RegistryError(f"registry delta {version} is missing in {base.uri}") from None
        out.append(delta)
    return out


def _directory(location: str | Path | Directory) -> Directory:
    return location if isinstance(location, Directory) else Directory(location)


def load_state(directory: str | Path | Directory, version: int | None = None) -> Snapshot:
    """The registry at ``version`` (the latest when ``None``): latest snapshot at or below it plus deltas."""
    directory = _directory(directory)
    for _attempt in range(3):  # a concurrent prune may remove a file between listing and reading
        try:
            return _load_state(directory, version)
        except FileNotFoundError:
            continue
    return _load_state(directory, version)


def _load_state(directory: Directory, version: int | None) -> Snapshot:
    deltas = _versions(directory.sub(DELTAS))
    latest = max(deltas[-1] if deltas else 0, *(_versions(directory.sub(SNAPSHOTS)) or [0]))
    target = latest if version is None else version
    if target > latest:
        raise RegistryError(f"registry version {target} is not stored (latest is {latest}) in {directory.uri}")
    snaps = [v for v in _versions(directory.sub(SNAPSHOTS)) if v <= target]
    if snaps:
        snap: Snapshot = _read(directory.sub(SNAPSHOTS), snaps[-1])
        subs = snap.subscriptions
        base_version, batch_id, time = snap.version, snap.batch_id, snap.time
    else:
        subs, base_version, batch_id, time = {}, 0, -1, 0.0
    later = read_deltas(directory, base_version, target)
    apply_deltas(subs, later)
    if later:
        batch_id, time = later[-1].batch_id, later[-1].time
    return Snapshot(target, batch_id, time, subs)


class Registry:
    """The driver's registry: current subscriptions, appends, snapshots, pruning.

    Parameters
    ----------
    directory : where the deltas and snapshots live, a URI or path (created if missing).
    snapshot_every : write a snapshot when this many versions passed since the last one.
    snapshots_kept : snapshots to keep; deltas at or below the oldest kept one are removed.
    recent : how many recent deltas to keep in memory for executors to catch up with.
    """

    def __init__(self, directory: str | Path, snapshot_every: int = 50, snapshots_kept: int = 2,
                 recent: int = 20):
        self.directory = Directory(directory)
        self.deltas, self.snapshots = self.directory.sub(DELTAS), self.directory.sub(SNAPSHOTS)
        self.snapshot_every = snapshot_every
        self.snapshots_kept = snapshots_kept
        self.recent_limit = recent
        self.deltas.make()
        self.snapshots.make()
        state = load_state(self.directory)
        self.version = state.version
        self.batch_id = state.batch_id
        self.subscriptions: dict[str, Subscription] = state.subscriptions
        snaps = _versions(self.snapshots)
        self.snapshot_version = snaps[-1] if snaps else 0
        first = max(self.snapshot_version, self.version - recent)
        self.recent: list[Delta] = read_deltas(self.directory, first, self.version)
        self._batches = {d.batch_id: d for d in self.recent}
        self._expiry: list[tuple[float, str]] = [
            (s.expires, s.id) for s in self.subscriptions.values() if s.expires is not None
        ]
        heapq.heapify(self._expiry)

    def __len__(self) -> int:
        return len(self.subscriptions)

    def delta_of_batch(self, batch_id: int) -> Delta | None:
        """The delta a batch already recorded (``None`` if it recorded none)."""
        delta = self._batches.get(batch_id)
        if delta is None and batch_id <= self.batch_id:
            found = [d for d in read_deltas(self.directory, self.snapshot_version, self.version)
                     if d.batch_id == batch_id]
            delta = found[0] if found else None
        return delta

    def is_replay(self, batch_id: int) -> bool:
        """Whether ``batch_id`` is at or before the last batch that recorded a version."""
        return batch_id <= self.batch_id

    def expired(self, now: float) -> list[str]:
        """Ids of present subscriptions whose expiry time is at or before ``now``."""
        out = []
        while self._expiry and self._expiry[0][0] <= now:
            expires, sub_id = heapq.heappop(self._expiry)
            sub = self.subscriptions.get(sub_id)
            if sub is not None and sub.expires == expires:
                out.append(sub_id)
        return out

    def append(self, batch_id: int, changes: Iterable[Change], time: float) -> Delta | None:
        """Record a batch's changes as the next version (idempotent per batch id).

        Returns the new delta, the delta the batch recorded before (a replay), or
        ``None`` when there is nothing to record.
        """
        if self.is_replay(batch_id):
            return self.delta_of_batch(batch_id)
        changes = tuple(c._replace(position=None, target=None) for c in changes)
        if not changes:
            return None
        delta = Delta(self.version + 1, batch_id, time, changes)
        self.deltas.write(_name(delta.version), pickle.dumps(delta, protocol=5))
        apply_deltas(self.subscriptions, [delta])
        for c in changes:
            if c.op == UPSERT and c.subscription.expires is not None:  # type: ignore[union-attr]  # an upsert carries its subscription
                heapq.heappush(self._expiry, (c.subscription.expires, c.id))  # type: ignore[union-attr]  # as above
        self.version, self.batch_id = delta.version, batch_id
        self.recent.append(delta)
        self._batches[batch_id] = delta
        if len(self.recent) > self.recent_limit:
            dropped = self.recent.pop(0)
            self._batches.pop(dropped.batch_id, None)
        if self.version - self.snapshot_version >= self.snapshot_every:
            self.snapshot()
        return delta

    def deltas_since(self, version: int) -> list[Delta] | None:
        """The in-memory deltas after ``version`` up to the current one (``None`` if not all in memory)."""
        if version >= self.version:
            return []
        if not self.recent or self.recent[0].version > version + 1:
            return None
        return [d for d in self.recent if d.version > version]

    def snapshot(self) -> None:
        """Write a snapshot of the current version and prune old files."""
        snap = Snapshot(self.version, self.batch_id, self.recent[-1].time if self.recent else 0.0,
                        self.subscriptions)
        self.snapshots.write(_name(self.version), pickle.dumps(snap, protocol=5))
        self.snapshot_version = self.version
        self.prune()

    def prune(self) -> None:
        """Remove snapshots beyond ``snapshots_kept`` and the deltas at or below the oldest kept one."""
        snaps = _versions(self.snapshots)
        keep = snaps[-self.snapshots_kept:]
        for v in snaps[: -self.snapshots_kept]:
            self.snapshots.remove(_name(v))
        if keep:
            for v in _versions(self.deltas):
                if v <= keep[0]:
                    self.deltas.remove(_name(v))

    def describe(self) -> Mapping[str, object]:
        """Version, size and files, for ``status`` and ``scripts/show.py``."""
        return {
            "directory": self.directory.uri,
            "version": self.version,
            "last_batch_id": self.batch_id,
            "subscriptions": len(self.subscriptions),
            "snapshots": _versions(self.snapshots),
            "deltas_on_disk": len(_versions(self.deltas)),
        }

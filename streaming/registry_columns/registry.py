"""The driver's columnar registry: expressions and patterns, versioned, replay-safe per batch.

:meth:`ColumnRegistry.apply` takes a micro-batch's changes as columns
(:class:`~streaming.registry_columns.columns.ChangeBatch`): within the batch the last change
of an id wins; the net changes go to ``deltas/<version>.arrow`` as the next version, with the
batch id and time, and into the driver's columns (:class:`IdColumns`: no record bytes, no
Python object per subscription). A batch whose id is at or below the last recorded one is a
replay: it gets the version it recorded (or saw) the first time and changes nothing. Every
``snapshot_every`` versions the live set is written per shard
(:func:`~streaming.registry_columns.files.shard_table` of the previous snapshot and the
deltas, one shard in memory at a time); old files are pruned when the next batch comes (Spark
runs it once the batch before is committed), so that a replay of the batch that wrote the
snapshot still finds the version before it (:meth:`columns_at`).

With a routing (``match.route_by``, :mod:`streaming.routing`) an expression's shard key (the
``crc`` column) is its route hash, which the parse tasks found (computed here for changes parsed
without it), plus its id's part; an upsert that changes a live id's key
(its route value changed, or it became routed or unrouted) is written after a delete of the id
under its old key in the same delta, so that its old shard drops it and its new one takes it
(a reader keeps the last row of each id). The routing is recorded in ``routing.json`` when the
first version is written with one, and a registry is not opened with another (its keys would
be wrong).

Patterns are rows of kind :data:`PATTERN` like the expressions (their ``packed`` column: the
CEL text and partition attribute, :func:`.view.packed`); the driver also keeps the live ones
(few, bounded by the tenants' quota) and a version that changes any writes the whole set as
the pattern view (:mod:`.view`), which the ``patterns`` query's executors read. A view that a
crash kept from being written is written when the registry is loaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa

from streaming import routing as routes
from streaming.errors import RegistryError
from streaming.registry_columns import files, kernels, view
from streaming.registry_columns.columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    IdColumns,
    as_array,
)
from streaming.registry_columns.files import Stamp
from streaming.storage import Directory


def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_TRIM = _malloc_trim()


def release_memory() -> None:
    """Give memory freed by a batch back to the system: Arrow's pool and, on glibc, the C heap
    (NumPy's; glibc keeps freed arrays of a few MB once its mmap threshold grew). A few ms."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


class Applied(NamedTuple):
    """What :meth:`ColumnRegistry.apply` did: the version the batch matches against, its time,
    whether it was a replay, and (first run only) the ids it added, replaced and deleted."""

    version: int
    time: float
    replay: bool
    added: int = 0
    replaced: int = 0
    deleted: int = 0


class ColumnRegistry:
    """The registry at its latest version, loaded from ``directory`` (created if missing).

    Parameters
    ----------
    directory : URI or path of the registry's files.
    shards : parts of each snapshot (``key % shards``, the key ``crc32(id)`` unless routed).
    snapshot_every : write a snapshot when this many versions passed since the last one.
    snapshots_kept : snapshots to keep; deltas at or below the oldest kept one are removed.
    routing : the attribute expressions are routed by, and its spread (``None``: none).

    Raises
    ------
    RegistryError
        If the registry holds versions written with another routing.
    """

    def __init__(self, directory: str | Path | Directory, shards: int = 1, snapshot_every: int = 50,
                 snapshots_kept: int = 2, routing: routes.Routing | None = None):
        if shards < 1 or snapshot_every < 1 or snapshots_kept < 1:
            raise ValueError("shards, snapshot_every and snapshots_kept must be at least 1")
        self.directory = directory if isinstance(directory, Directory) else Directory(directory)
        self.shards, self.snapshot_every, self.snapshots_kept = shards, snapshot_every, snapshots_kept
        self.directory.sub(files.DELTAS).make()
        self.directory.sub(files.SNAPSHOTS).make()
        self.directory.sub(view.VIEWS).make()
        self.routing = routing
        self._check_routing()
        self.columns = IdColumns()
        self.patterns: dict[str, tuple[bytes, int]] = {}
        """The live patterns: ``{id: (packed column, version of its last upsert)}``."""
        self.base = 0
        """The pattern view's ``base`` (:mod:`.view`)."""
        self.stamps: list[Stamp] = []
        """Stamps from the newest snapshot's on (or version 0's), one per version, in order."""
        self._next_expiry = np.inf
        self._prune_due = True
        self._load()

    def _check_routing(self) -> None:
        """Record the routing in a registry without versions; refuse another than the one its
        versions were written with."""
        if files.latest_version(self.directory) == 0:
            if self.routing is None:
                if ROUTING_FILE in self.directory.names():  # recorded before any version: not binding
                    self.directory.remove(ROUTING_FILE)
            else:
                self.directory.write(ROUTING_FILE, orjson.dumps(
                    {"route_by": self.routing.attr, "route_spread": self.routing.spread}))
            return
        try:
            stored = orjson.loads(self.directory.read(ROUTING_FILE))
            was = routes.routing_of(str(stored["route_by"]), int(stored["route_spread"]))
        except FileNotFoundError:
            was = None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RegistryError(f"cannot read {self.directory.uri}/{ROUTING_FILE}: {exc}") from None
        if was != self.routing:
            raise RegistryError(f"the registry at {self.directory.uri} was written with {_said(was)}; this "
                                f"configuration has {_said(self.routing)}: the routing cannot change on an "
                                f"existing checkpoint (set it back, or start from a new checkpoint location)")

    # -- reading -------------------------------------------------------------------------
    def _load(self) -> None:
        snaps = files.snapshot_versions(self.directory)
        deltas = files.delta_versions(self.directory)
        base = Stamp(0, -1, 0.0)
        if snaps:
            manifest = files.read_manifest(self.directory, snaps[-1])
            base = manifest.stamp
            for shard in range(manifest.shards):
                part = files.read_part(self.directory, manifest, shard)
                self._put(part, part.column("kind").to_numpy(), part.column("version").to_numpy())
        self.stamps = [base]
        for v in range(base.version + 1, (deltas[-1] if deltas else 0) + 1):
            table, stamp = files.read_delta(self.directory, v)
            self._apply_table(table, v)
            self.stamps.append(stamp)
        newest = view.newest(self.directory)
        self.base = max([newest.base, *(view.base_of(blob) for blob, _ in self.patterns.values())])
        if newest.patterns != self.pattern_view() or newest.base != self.base:  # a crash came before its write
            stamp = self.stamps[-1]
            view.write(self.directory, view.View(stamp.version, stamp.batch_id, self.base, self.pattern_view()),
                       stamp.time)
        release_memory()

    @property
    def version(self) -> int:
        return self.stamps[-1].version

    @property
    def batch_id(self) -> int:
        """The id of the last batch that recorded a version (``-1``: none)."""
        return self.stamps[-1].batch_id

    @property
    def snapshot_version(self) -> int:
        return self.stamps[0].version

    def __len__(self) -> int:
        return self.columns.live

    def lookup(self, ids: pa.Array | Sequence[str]) -> np.ndarray:
        """The kind of each id now (``0``: none), for quotas and new-or-replaced decisions."""
        rows = self.columns.find(as_array(ids))
        out = np.zeros(len(rows), np.int8)
        out[rows >= 0] = self.columns.kind[rows[rows >= 0]]
        return out

    def live(self) -> pa.Table:
        """The live subscriptions' columns (id, kind, version, tenant, expires, crc, predicates), rows in no order."""
        c = self.columns
        rows = c.live_rows()
        names = pa.array(c.tenant_names, pa.string())
        return pa.table({
            "id": c.ids_at(rows), "kind": c.kind[rows], "version": c.version[rows],
            "tenant": names.take(pa.array(c.tenant[rows])), "expires": c.expires[rows], "crc": c.crc[rows],
            "predicates": c.predicates[rows],
        })

    def pattern_view(self) -> view.Patterns:
        """The live patterns as the view holds them (``{id: [text, since, attribute]}``)."""
        return {sub_id: view.entry(blob, v, self.base) for sub_id, (blob, v) in sorted(self.patterns.items())}

    def counts(self) -> dict[tuple[str, int], int]:
        """Live subscriptions per ``(tenant, kind)``."""
        return {key: n for key, (n, _) in self.held().items()}

    def held(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(tenant, kind): (live subscriptions, their predicates)}``: what the quotas bound
        (kept as ids change, not counted per call)."""
        return self.columns.held_by_tenant()

    def expired(self, now: float) -> pa.Array:
        """Ids of live subscriptions whose expiry time is at or before ``now``."""
        if now < self._next_expiry:
            return pa.array([], pa.string())
        c = self.columns
        exp = c.expires[: c.n]
        live = c.kind[: c.n] != 0
        later = exp[live & (exp > now)]
        self._next_expiry = float(later.min()) if later.size else np.inf
        return c.expired(now)

    def columns_at(self, version: int) -> IdColumns:
        """The driver's columns at ``version`` (the live ones at the latest; else read from the
        files, as a replay of an older batch needs them)."""
        if version == self.version:
            return self.columns
        table, _ = files.shard_table(self.directory, version, 0, 1)
        out = IdColumns()
        out.put(table.column("id").combine_chunks(), table.column("kind").to_numpy(),
                table.column("version").to_numpy(), out.owner_codes(table.column("tenant").combine_chunks(),
                                                                    table.column("id").combine_chunks()),
                table.column("expires").to_numpy(), table.column("predicates").to_numpy(),
                table.column("crc").to_numpy())
        return out

    def version_of_batch(self, batch_id: int) -> Stamp:
        """The stamp of the version batch ``batch_id`` matched against (a replay's)."""
        if batch_id < self.stamps[0].batch_id:
            raise RegistryError(f"batch {batch_id} is older than the registry's oldest kept version "
                                f"{self.stamps[0].version} (batch {self.stamps[0].batch_id})")
        ids = np.fromiter((s.batch_id for s in self.stamps), np.int64, len(self.stamps))
        at = int(np.searchsorted(ids, batch_id, side="right")) - 1
        return self.stamps[int(np.searchsorted(ids, ids[at], side="left"))]  # the first of its batch (:meth:`append`)

    # -- writing -------------------------------------------------------------------------
    @property
    def snapshot_due(self) -> bool:
        """Whether ``snapshot_every`` versions were recorded since the last snapshot."""
        return self.version - self.snapshot_version >= self.snapshot_every

    def apply(self, batch_id: int, changes: ChangeBatch, time: float, snapshot: bool = True) -> Applied:
        """Record a batch's changes as the next version (nothing when they change nothing), and
        a snapshot when one is due (``snapshot=False``: the caller writes it, :meth:`snapshot`,
        as the match query does beside its match job).

        Idempotent per batch id: a replay returns the version it recorded or saw the first time.
        """
        if batch_id <= self.batch_id:
            stamp = self.version_of_batch(batch_id)
            return Applied(stamp.version, stamp.time, True)
        if self._prune_due:  # no batch before this one runs again
            self.prune()
        return self._record(batch_id, changes, time, snapshot)

    def append(self, changes: ChangeBatch) -> Applied:
        """Record changes that no batch made (an import at start, :mod:`.migrate`) as the next version,
        under the last batch's id and time: a replay of that batch still gets the version it recorded
        (:meth:`version_of_batch` takes a batch's first)."""
        return self._record(self.batch_id, changes, self.stamps[-1].time, False)

    def _record(self, batch_id: int, changes: ChangeBatch, time: float, snapshot: bool) -> Applied:
        if not len(changes):
            return Applied(self.version, time, False)
        off, data = kernels.string_buffers(changes.ids)
        h, crcs = kernels.hash_ids(off, data, kernels.CRC_TABLE)
        last = np.flatnonzero(kernels.last_occurrences(h, off, data, kernels.table_size(len(h))))
        net = changes.take(last) if len(last) != len(changes) else changes
        crcs = crcs[last]
        before = self.lookup(net.ids)
        effective = (net.ops == UPSERT) | (before != 0)
        if not effective.any():
            return Applied(self.version, time, False)
        if not effective.all():
            net, before, crcs = net.take(np.flatnonzero(effective)), before[effective], crcs[effective]
        version = self.version + 1
        table = self._delta(net, before, crcs)
        stamp = Stamp(version, batch_id, float(time))
        files.write_delta(self.directory, stamp, table)
        if self._apply_table(table, version):
            view.write(self.directory, view.View(version, batch_id, self.base, self.pattern_view()), stamp.time)
        self.stamps.append(stamp)
        if snapshot and self.snapshot_due:
            self.snapshot()
        release_memory()
        up = net.ops == UPSERT
        return Applied(version, stamp.time, False, int(np.count_nonzero(up & (before == 0))),
                       int(np.count_nonzero(up & (before != 0))), int(np.count_nonzero(~up)))

    def _delta(self, net: ChangeBatch, before: np.ndarray, crcs: np.ndarray) -> pa.Table:
        """The delta of the net changes (``before``: each id's kind now): with a routing, each
        row under its shard key (a delete under the id's current one), and a delete under the old
        key before each upsert that changes a live id's key."""
        keys = crcs
        moved = np.zeros(len(net), np.bool_)
        if self.routing is not None:
            expr = (net.ops == UPSERT) & (net.kinds == EXPRESSION)
            hashes = np.where(expr, net.routes, routes.NO_ROUTE)
            unset = hashes == routes.UNSET  # parsed without the routing: computed here
            if unset.any():
                hashes[unset] = routes.expression_routes(net.packed, unset, self.routing.attr)[unset]
            keys = routes.shard_keys(crcs, hashes, self.routing.spread)
            rows = self.columns.find(net.ids)
            live = before != 0
            old = keys.copy()
            old[live] = self.columns.crc[rows[live]]
            keys = np.where(net.ops == DELETE, old, keys)
            moved = live & (old != keys)
        table = pa.table([net.ids, pa.array(net.ops), pa.array(net.kinds), net.records, pa.array(net.expires),
                          net.tenants, pa.array(keys, pa.uint32()), pa.array(net.predicates, pa.int32()), net.packed],
                         schema=files.DELTA_SCHEMA)
        if not moved.any():
            return table
        at = pa.array(np.flatnonzero(moved))
        gone = pa.table([net.ids.take(at), pa.array(np.full(len(at), DELETE, np.int8)), pa.array(np.zeros(len(at), np.int8)),
                         pa.nulls(len(at), pa.binary()), pa.array(np.full(len(at), np.nan)), net.tenants.take(at),
                         pa.array(old[moved], pa.uint32()), pa.array(np.zeros(len(at), np.int32)),
                         pa.nulls(len(at), pa.binary())], schema=files.DELTA_SCHEMA)
        return pa.concat_tables([gone, table]).combine_chunks()

    def _put(self, table: pa.Table, kinds: np.ndarray, versions: np.ndarray) -> bool:
        """Set the columns of a delta's or snapshot part's ids (``kinds``: ``0`` deletes); whether a
        pattern changed."""
        c = self.columns
        ids = table.column("id").combine_chunks()
        expires = table.column("expires").to_numpy()
        _, before, _ = c.put(ids, np.asarray(kinds, np.int8), versions,
                             c.owner_codes(table.column("tenant").combine_chunks(), ids), expires,
                             table.column("predicates").to_numpy(), table.column("crc").to_numpy())
        changed = self._put_patterns(table, kinds, versions, before)
        new_min = np.nanmin(expires, initial=np.inf) if len(expires) else np.inf
        self._next_expiry = min(self._next_expiry, float(new_min))
        if c.should_compact():
            c.compact()
        return changed

    def _put_patterns(self, table: pa.Table, kinds: np.ndarray, versions: np.ndarray, before: np.ndarray) -> bool:
        """Keep :attr:`patterns` with the rows (``before``: each id's kind before them; Python only
        for rows of patterns and of ids that were patterns); whether one changed."""
        rows = np.flatnonzero((kinds == PATTERN) | (before == PATTERN))
        if not len(rows):
            return False
        picked = table.select(["id", "packed"]).take(pa.array(rows, pa.int64())).to_pydict()
        for sub_id, blob, kind, v in zip(picked["id"], picked["packed"], kinds[rows].tolist(), versions[rows].tolist(),
                                         strict=True):
            if kind == PATTERN:
                self.patterns[sub_id] = (blob, int(v))
            else:
                self.patterns.pop(sub_id, None)
        return True

    def _apply_table(self, table: pa.Table, version: int) -> bool:
        if self.routing is not None:  # a moved id's delete under its old key comes before its upsert
            table = _last_rows(table)
        kinds = np.where(table.column("op").to_numpy() == DELETE, 0, table.column("kind").to_numpy())
        return self._put(table, kinds, np.full(table.num_rows, version, np.int64))

    def snapshot(self) -> None:
        """Write the current version per shard (from the files, one shard at a time); the next
        batch prunes."""
        stamp = self.stamps[-1]
        c = self.columns
        live = c.live_rows()
        expected = np.bincount(c.crc[live] % np.uint32(self.shards), minlength=self.shards)
        rows = []
        for shard in range(self.shards):
            table, _ = files.shard_table(self.directory, stamp.version, shard, self.shards)
            if table.num_rows != expected[shard]:
                raise RegistryError(f"registry files at version {stamp.version} hold {table.num_rows} "
                                    f"subscriptions in shard {shard}, the driver {expected[shard]}")
            files.write_part(self.directory, stamp, shard, self.shards, table)
            rows.append(table.num_rows)
        files.write_manifest(self.directory, files.Manifest(stamp, self.shards, rows))
        self.stamps = [stamp]
        self._prune_due = True

    def prune(self) -> None:
        """Remove snapshots beyond ``snapshots_kept`` (and incomplete ones below the newest) and the
        deltas at or below the oldest kept one."""
        snaps = files.snapshot_versions(self.directory)
        keep = snaps[-self.snapshots_kept:]
        store = self.directory.sub(files.SNAPSHOTS)
        for v in snaps[: -self.snapshots_kept]:
            store.remove(files.manifest_name(v))
        for v, name in files.part_files(self.directory):
            if v not in keep and (not snaps or v < snaps[-1]):
                store.remove(name)
        if keep:
            deltas = self.directory.sub(files.DELTAS)
            for v in files.delta_versions(self.directory):
                if v <= keep[0]:
                    deltas.remove(files.delta_name(v))
            views = view.versions(self.directory)
            floor = max([v for v in views if v <= keep[0]], default=0)  # the view of the oldest kept version
            for v in views:
                if v < floor:
                    self.directory.sub(view.VIEWS).remove(view.view_name(v))
        self._prune_due = False

    def describe(self) -> Mapping[str, object]:
        """Version, size, files and the driver's bytes, for ``status``."""
        return {
            "directory": self.directory.uri,
            "version": self.version,
            "last_batch_id": self.batch_id,
            "subscriptions": len(self),
            "counts": {f"{t}/{k}": n for (t, k), n in self.counts().items()},
            "snapshots": files.snapshot_versions(self.directory),
            "deltas_on_disk": len(files.delta_versions(self.directory)),
            "driver_bytes": self.columns.nbytes(),
        }


ROUTING_FILE = "routing.json"
"""The routing a registry's versions were written with (none: no routing)."""


def _said(routing: routes.Routing | None) -> str:
    if routing is None:
        return "no match.route_by"
    return f"match.route_by = {routing.attr!r}, match.route_spread = {routing.spread}"


def _last_rows(table: pa.Table) -> pa.Table:
    """The last row of each id of a delta."""
    if table.num_rows < 2:
        return table
    off, data = kernels.string_buffers(table.column("id").combine_chunks())
    h, _ = kernels.hash_ids(off, data, kernels.CRC_TABLE)
    keep = kernels.last_occurrences(h, off, data, kernels.table_size(len(h)))
    return table if keep.all() else table.filter(pa.array(keep))


def read_shard(directory: str | Path | Directory, version: int, shard: int = 0, shards: int = 1) -> pa.Table:
    """Shard ``shard`` of ``shards``'s live subscriptions at ``version`` as an Arrow table
    (:data:`~streaming.registry_columns.files.SNAPSHOT_SCHEMA`, one chunk), built from the files without a Python
    object per subscription (what an executor building a shard reads).

    Raises
    ------
    RegistryError
        If the version is not stored, or a file it needs is missing or unreadable.
    """
    location = directory if isinstance(directory, Directory) else Directory(directory)
    for _attempt in range(2):  # the driver may prune a file between listing and reading
        try:
            return files.shard_table(location, version, shard, shards)[0].combine_chunks()
        except files.MissingFile:
            continue
    return files.shard_table(location, version, shard, shards)[0].combine_chunks()

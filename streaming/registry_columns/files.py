"""The registry's files: Arrow IPC deltas and per-shard snapshots, and a shard's live set.

Layout under the registry directory (any location :class:`streaming.storage.Directory` reaches)::

    deltas/<version:012d>.arrow                    a version's net changes (DELTA_SCHEMA)
    snapshots/<version:012d>-<s:05d>-of-<n:05d>.arrow   shard s of n at the version (SNAPSHOT_SCHEMA)
    snapshots/<version:012d>.json                  the snapshot's manifest, written last

Each file is written whole (:meth:`Directory.write`); a snapshot counts only once its
manifest is there. Every file carries its version, batch id and batch time in its schema's
metadata, checked against its name when read. Version 0 is the empty registry.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from streaming.errors import RegistryError
from streaming.registry_columns import kernels
from streaming.storage import Directory

DELTAS = "deltas"
SNAPSHOTS = "snapshots"
FORMAT = 3

DELTA_SCHEMA = pa.schema([
    ("id", pa.string()), ("op", pa.int8()), ("kind", pa.int8()), ("record", pa.binary()),
    ("expires", pa.float64()), ("tenant", pa.string()), ("crc", pa.uint32()), ("predicates", pa.int32()),
    ("packed", pa.binary()),
])
"""A delta's rows: one per id the version changed (a delete has kind 0 and no record; ``predicates``:
an expression's count, for the tenants' quota; ``packed``: an expression's subscription without
its id, :func:`matchers.packed.pack`, what executors load, or a pattern's text and partition
attribute, :func:`~streaming.registry_columns.view.packed`)."""
SNAPSHOT_SCHEMA = pa.schema([
    ("id", pa.string()), ("kind", pa.int8()), ("version", pa.int64()), ("record", pa.binary()),
    ("expires", pa.float64()), ("tenant", pa.string()), ("crc", pa.uint32()), ("predicates", pa.int32()),
    ("packed", pa.binary()),
])
"""A shard's live subscriptions: the version column is that of each one's last upsert."""

_DELTA = re.compile(r"^(\d{12})\.arrow$")
_MANIFEST = re.compile(r"^(\d{12})\.json$")
_PART = re.compile(r"^(\d{12})-(\d{5})-of-(\d{5})\.arrow$")


class MissingFile(RegistryError):
    """A registry file that is not there (never written, or pruned after it was listed)."""


class Stamp(NamedTuple):
    """What a file records about its version."""

    version: int
    batch_id: int
    time: float


def delta_name(version: int) -> str:
    return f"{version:012d}.arrow"


def part_name(version: int, shard: int, shards: int) -> str:
    return f"{version:012d}-{shard:05d}-of-{shards:05d}.arrow"


def manifest_name(version: int) -> str:
    return f"{version:012d}.json"


def _metadata(stamp: Stamp, **extra: int) -> dict[bytes, bytes]:
    meta = {"format": FORMAT, "version": stamp.version, "batch_id": stamp.batch_id, **extra}
    out = {f"registry.{k}".encode(): str(v).encode() for k, v in meta.items()}
    out[b"registry.time"] = repr(float(stamp.time)).encode()
    return out


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC file, its buffers compressed with zstd (a snapshot of W1
    subscriptions: 31 bytes per row instead of 277; readers decompress as they read)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(directory: Directory, name: str, schema: pa.Schema, version: int) -> tuple[pa.Table, Stamp]:
    where = f"{directory.uri}/{name}"
    try:
        data = directory.read(name)
    except FileNotFoundError:
        raise MissingFile(f"registry file {where} is missing") from None
    try:
        table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        table.validate(full=True)
        meta = table.schema.metadata or {}
        stamp = Stamp(int(meta[b"registry.version"]), int(meta[b"registry.batch_id"]),
                      float(meta[b"registry.time"]))
        fmt = int(meta[b"registry.format"])
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise RegistryError(f"cannot read registry file {where}: {type(exc).__name__}: {exc}") from None
    if fmt != FORMAT or not table.schema.remove_metadata().equals(schema):
        raise RegistryError(f"registry file {where} has format {fmt} and schema {table.schema.remove_metadata()}, "
                            f"not format {FORMAT} and {schema}")
    if stamp.version != version:
        raise RegistryError(f"registry file {where} holds version {stamp.version}")
    return table, stamp


def write_delta(directory: Directory, stamp: Stamp, table: pa.Table) -> None:
    directory.sub(DELTAS).write(delta_name(stamp.version), to_ipc(table.replace_schema_metadata(_metadata(stamp))))


def read_delta(directory: Directory, version: int) -> tuple[pa.Table, Stamp]:
    """Delta ``version`` and its stamp (:class:`RegistryError` if missing or unreadable)."""
    return _from_ipc(directory.sub(DELTAS), delta_name(version), DELTA_SCHEMA, version)


def _listed(directory: Directory, pattern: re.Pattern) -> list[re.Match]:
    try:
        names = directory.names()
    except FileNotFoundError:
        raise RegistryError(f"no registry directory {directory.uri}") from None
    return [m for n in names if (m := pattern.match(n))]


def delta_versions(directory: Directory) -> list[int]:
    return sorted(int(m.group(1)) for m in _listed(directory.sub(DELTAS), _DELTA))


def snapshot_versions(directory: Directory) -> list[int]:
    """Versions of complete snapshots (those with a manifest)."""
    return sorted(int(m.group(1)) for m in _listed(directory.sub(SNAPSHOTS), _MANIFEST))


def part_files(directory: Directory) -> list[tuple[int, str]]:
    """``(version, name)`` of every snapshot part, complete or not."""
    return [(int(m.group(1)), m.group(0)) for m in _listed(directory.sub(SNAPSHOTS), _PART)]


class Manifest(NamedTuple):
    stamp: Stamp
    shards: int
    rows: list[int]


def write_manifest(directory: Directory, manifest: Manifest) -> None:
    obj = {"format": FORMAT, **manifest.stamp._asdict(), "shards": manifest.shards, "rows": manifest.rows}
    directory.sub(SNAPSHOTS).write(manifest_name(manifest.stamp.version), orjson.dumps(obj))


def read_manifest(directory: Directory, version: int) -> Manifest:
    snaps = directory.sub(SNAPSHOTS)
    where = f"{snaps.uri}/{manifest_name(version)}"
    try:
        obj = orjson.loads(snaps.read(manifest_name(version)))
        manifest = Manifest(Stamp(int(obj["version"]), int(obj["batch_id"]), float(obj["time"])),
                            int(obj["shards"]), [int(r) for r in obj["rows"]])
        fmt = int(obj["format"])
    except FileNotFoundError:
        raise MissingFile(f"registry file {where} is missing") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RegistryError(f"cannot read registry file {where}: {type(exc).__name__}: {exc}") from None
    if fmt != FORMAT or manifest.stamp.version != version or len(manifest.rows) != manifest.shards:
        raise RegistryError(f"registry manifest {where} does not describe version {version} in format {FORMAT}")
    return manifest


def write_part(directory: Directory, stamp: Stamp, shard: int, shards: int, table: pa.Table) -> None:
    meta = _metadata(stamp, shard=shard, shards=shards)
    directory.sub(SNAPSHOTS).write(part_name(stamp.version, shard, shards), to_ipc(table.replace_schema_metadata(meta)))


def read_part(directory: Directory, manifest: Manifest, shard: int) -> pa.Table:
    """Part ``shard`` of a snapshot, checked against its manifest."""
    v, n = manifest.stamp.version, manifest.shards
    table, _ = _from_ipc(directory.sub(SNAPSHOTS), part_name(v, shard, n), SNAPSHOT_SCHEMA, v)
    if table.num_rows != manifest.rows[shard]:
        raise RegistryError(f"registry snapshot {v} part {shard}: {table.num_rows} rows, its manifest says "
                            f"{manifest.rows[shard]}")
    return table.replace_schema_metadata(None)


def in_shard(table: pa.Table, shard: int, shards: int) -> pa.Table:
    """The rows of ``table`` in shard ``shard`` of ``shards`` (``crc % shards``)."""
    if shards == 1:
        return table
    crc = table.column("crc").to_numpy()
    return table.filter(pa.array(crc % np.uint32(shards) == shard))


def snapshot_rows(directory: Directory, manifest: Manifest, shard: int, shards: int) -> pa.Table:
    """Shard ``shard`` of ``shards`` of a snapshot written in ``manifest.shards`` parts."""
    if manifest.shards == shards:
        return read_part(directory, manifest, shard)
    parts = [in_shard(read_part(directory, manifest, s), shard, shards) for s in range(manifest.shards)]
    return pa.concat_tables(parts) if parts else SNAPSHOT_SCHEMA.empty_table()


def net_deltas(tables: list[tuple[int, pa.Table]]) -> pa.Table:
    """Consecutive deltas ``(version, table)`` as one: the last change of each id, with a
    ``version`` column."""
    if not tables:
        return DELTA_SCHEMA.append(pa.field("version", pa.int64())).empty_table()
    parts = [t.append_column("version", pa.array(np.full(t.num_rows, v, np.int64))) for v, t in tables]
    joined = pa.concat_tables(parts).combine_chunks()
    ids = joined.column("id").chunk(0) if joined.num_rows else pa.array([], pa.string())
    off, data = kernels.string_buffers(ids)
    h, _ = kernels.hash_ids(off, data, kernels.CRC_TABLE)
    keep = kernels.last_occurrences(h, off, data, kernels.table_size(len(h)))
    return joined.filter(pa.array(keep))


def merge(base: pa.Table, net: pa.Table) -> pa.Table:
    """The live rows of ``base`` (SNAPSHOT_SCHEMA) after the net changes ``net`` (:func:`net_deltas`),
    in chunks (``base``'s kept rows, then the upserts): a snapshot is written from them without
    a copy into one chunk (a third of its CPU at 1,000,000 subscriptions, ``scripts.bench.churn_steps``)."""
    if net.num_rows:
        touched = pc.is_in(base.column("id"), value_set=net.column("id"))
        base = base.filter(pc.invert(touched))
        ups = net.filter(pc.equal(net.column("op"), 0))
        ups = pa.table([ups.column(f.name) for f in SNAPSHOT_SCHEMA], schema=SNAPSHOT_SCHEMA)
        base = pa.concat_tables([base, ups])
    return base


def shard_table(directory: Directory, version: int, shard: int, shards: int) -> tuple[pa.Table, Stamp]:
    """Shard ``shard`` of ``shards``'s live subscriptions at ``version``: the newest snapshot at or
    below it plus the deltas after it (SNAPSHOT_SCHEMA, in chunks: :func:`merge`), and the version's stamp.

    Raises
    ------
    RegistryError
        If the version is not stored, or a file it needs is missing or unreadable.
    """
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not one of {shards}")
    deltas = delta_versions(directory)
    snaps = snapshot_versions(directory)
    latest = max(deltas[-1] if deltas else 0, snaps[-1] if snaps else 0)
    if not 0 <= version <= latest:
        raise RegistryError(f"registry version {version} is not stored (latest is {latest}) in {directory.uri}")
    below = [v for v in snaps if v <= version]
    oldest = 0 if deltas and deltas[0] == 1 else snaps[0] if snaps else (deltas[0] - 1 if deltas else 0)
    if version == 0:  # the empty registry, always
        return SNAPSHOT_SCHEMA.empty_table(), Stamp(0, -1, 0.0)
    if version < oldest or (not below and deltas and deltas[0] != 1):
        raise RegistryError(f"registry version {version} was pruned (the oldest stored is {oldest}) in {directory.uri}")
    if below:
        manifest = read_manifest(directory, below[-1])
        base, stamp = snapshot_rows(directory, manifest, shard, shards), manifest.stamp
    else:
        base, stamp = SNAPSHOT_SCHEMA.empty_table(), Stamp(0, -1, 0.0)
    tables = []
    for v in range(stamp.version + 1, version + 1):
        table, stamp = read_delta(directory, v)
        tables.append((v, in_shard(table, shard, shards)))
    return merge(base, net_deltas(tables)), stamp


def latest_version(directory: Directory) -> int:
    """The newest version stored (``0``: none)."""
    return max([0, *delta_versions(directory), *snapshot_versions(directory)])

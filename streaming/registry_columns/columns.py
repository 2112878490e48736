"""The driver's registry state as columns: one row per id, found through a hash table.

Per id the driver keeps its 64-bit hash, its bytes, CRC-32 (its shard is ``crc % shards``, as
:func:`streaming.executor_cache.shard_of`), kind (``0`` once deleted), version of its last
change, tenant code and expiry time: about 45 bytes plus the id's own, never a Python
object. The record bytes live in the registry's files only. A deleted id keeps its row
until :meth:`IdColumns.compact` (run when a quarter of the rows are dead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from matchers.errors import PubSubError
from streaming.registry_columns import kernels

UPSERT, DELETE = 0, 1
"""Op codes of a change."""
EXPRESSION, PATTERN = 1, 2
"""Kinds of subscription (``0``: no subscription)."""
KINDS = (EXPRESSION, PATTERN)
_OP_NAMES = {"upsert": UPSERT, "delete": DELETE}
_GROWTH = 1.25


class ChangeBatchError(PubSubError, ValueError):
    """A batch of changes that is not well formed (the caller's bug, not a bad record)."""


class ChangeBatch(NamedTuple):
    """A micro-batch's changes, in order, as columns (see :meth:`of`)."""

    ids: pa.Array
    ops: np.ndarray
    kinds: np.ndarray
    records: pa.Array
    expires: np.ndarray
    tenants: pa.Array

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, ids, ops, kinds=None, records=None, expires=None, tenants=None) -> ChangeBatch:
        """Checked columns of changes.

        Parameters
        ----------
        ids : strings, none null or empty.
        ops : ``"upsert"``/``"delete"`` or :data:`UPSERT`/:data:`DELETE` codes.
        kinds : :data:`EXPRESSION` or :data:`PATTERN` for each upsert (ignored for a delete).
        records : the canonical record's bytes of each upsert (ignored for a delete).
        expires : expiry time (seconds) or NaN for none; all NaN when omitted.
        tenants : tenant names (the operator's, ``""``, when omitted).

        Raises
        ------
        ChangeBatchError
            If a column has another length, or a value is missing or out of range.
        """
        ids = _strings(ids, "ids", pa.string())
        n = len(ids)
        if ids.null_count or (n and not np.all(np.diff(kernels.string_buffers(ids)[0]) > 0)):
            raise ChangeBatchError("ids must be non-empty strings")
        op_codes = _codes(ops, n)
        upsert = op_codes == UPSERT
        kind_codes = np.zeros(n, np.int8) if kinds is None else np.asarray(kinds, np.int64)
        if kind_codes.shape != (n,):
            raise ChangeBatchError(f"kinds: {kind_codes.shape[0] if kind_codes.ndim else 1} values for {n} ids")
        if not np.isin(kind_codes[upsert], KINDS).all():
            raise ChangeBatchError(f"every upsert needs a kind in {KINDS}")
        kind_codes = np.where(upsert, kind_codes, 0).astype(np.int8)
        recs = _strings([None] * n if records is None else records, "records", pa.binary())
        if np.asarray(recs.is_null().to_numpy(zero_copy_only=False))[upsert].any():
            raise ChangeBatchError("every upsert needs its record's bytes")
        recs = _where_null(recs, ~upsert)
        exp = np.full(n, np.nan) if expires is None else np.asarray(expires, np.float64)
        if exp.shape != (n,):
            raise ChangeBatchError(f"expires: {exp.size} values for {n} ids")
        if np.isinf(exp).any():
            raise ChangeBatchError("expires must be finite or NaN (none)")
        exp = np.where(upsert, exp, np.nan)
        ten = pa.array([""] * n, pa.string()) if tenants is None else _strings(tenants, "tenants", pa.string())
        if ten.null_count:
            raise ChangeBatchError("tenants must not be null (the operator's is \"\")")
        return cls(ids, op_codes, kind_codes, recs, exp, ten)

    def take(self, rows: np.ndarray) -> ChangeBatch:
        """The changes at ``rows``."""
        idx = pa.array(rows, pa.int64())
        return ChangeBatch(self.ids.take(idx), self.ops[rows], self.kinds[rows], self.records.take(idx),
                           self.expires[rows], self.tenants.take(idx))


def _strings(values, name: str, kind: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    try:
        arr = values if isinstance(values, pa.Array) else pa.array(values, kind)
        return arr.cast(kind) if arr.type != kind else arr
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise ChangeBatchError(f"{name} must be {kind} values: {exc}") from None


def _codes(ops, n: int) -> np.ndarray:
    if isinstance(ops, np.ndarray) and ops.dtype.kind in "iu":
        codes = ops.astype(np.int8)
    else:
        try:
            codes = np.array([_OP_NAMES[o] if isinstance(o, str) else int(o) for o in ops], np.int8)
        except (KeyError, TypeError, ValueError) as exc:
            raise ChangeBatchError(f"ops must be 'upsert' or 'delete': {exc}") from None
    if codes.shape != (n,):
        raise ChangeBatchError(f"ops: {codes.size} values for {n} ids")
    if not np.isin(codes, (UPSERT, DELETE)).all():
        raise ChangeBatchError("ops must be 'upsert' or 'delete'")
    return codes


def _where_null(arr: pa.Array, null: np.ndarray) -> pa.Array:
    if not null.any():
        return arr
    import pyarrow.compute as pc

    return pc.if_else(pa.array(null), pa.scalar(None, arr.type), arr)


class IdColumns:
    """Rows of ids with their columns, grown in place (by a quarter) and compacted."""

    def __init__(self) -> None:
        self.n = 0
        self.live = 0
        self.hash = np.zeros(0, np.uint64)
        self.off = np.zeros(1, np.int64)
        self.data = np.zeros(0, np.uint8)
        self.crc = np.zeros(0, np.uint32)
        self.kind = np.zeros(0, np.int8)
        self.version = np.zeros(0, np.int64)
        self.tenant = np.zeros(0, np.int32)
        self.expires = np.zeros(0, np.float64)
        self.slots = np.full(kernels.table_size(0), kernels.EMPTY, np.int32)
        self.tenant_names: list[str] = []
        self._tenant_codes: dict[str, int] = {}

    def nbytes(self) -> int:
        """Bytes of the arrays held (capacity included)."""
        arrays = (self.hash, self.off, self.data, self.crc, self.kind, self.version, self.tenant, self.expires,
                  self.slots)
        return sum(a.nbytes for a in arrays)

    def _reserve(self, rows: int, nbytes: int) -> None:
        need = self.n + rows
        if need > len(self.hash):
            cap = max(need, int(len(self.hash) * _GROWTH), 1024)
            for name in ("hash", "crc", "kind", "version", "tenant", "expires"):
                old = getattr(self, name)
                new = np.zeros(cap, old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
            off = np.zeros(cap + 1, np.int64)
            off[: self.n + 1] = self.off[: self.n + 1]
            self.off = off
        used = int(self.off[self.n])
        if used + nbytes > len(self.data):
            data = np.zeros(max(used + nbytes, int(len(self.data) * _GROWTH), 16_384), np.uint8)
            data[:used] = self.data[:used]
            self.data = data
        if 2 * need > len(self.slots):
            self._rehash(kernels.table_size(int(need * _GROWTH)))

    def _rehash(self, size: int) -> None:
        self.slots = np.full(size, kernels.EMPTY, np.int32)
        kernels.fill_slots(self.slots, self.hash, self.n)

    def tenant_codes(self, names: pa.Array) -> np.ndarray:
        """Codes of tenant names (new names get new codes)."""
        enc = names.dictionary_encode()
        lookup = np.empty(len(enc.dictionary), np.int32)
        for i, name in enumerate(enc.dictionary.to_pylist()):  # one per distinct tenant
            code = self._tenant_codes.get(name)
            if code is None:
                code = self._tenant_codes[name] = len(self.tenant_names)
                self.tenant_names.append(name)
            lookup[i] = code
        return lookup[enc.indices.to_numpy(zero_copy_only=False)] if len(enc) else np.zeros(0, np.int32)

    def find(self, ids: pa.Array) -> np.ndarray:
        """Rows of ``ids`` (``-1`` when never seen since the last compaction)."""
        off, data = kernels.string_buffers(ids)
        h, _ = kernels.hash_ids(off, data, kernels.CRC_TABLE)
        rows, _ = kernels.find_or_add(self.slots, self.hash, self.off, self.data, self.n, h, off, data,
                                      np.zeros(len(h), np.bool_))
        return rows

    def put(self, ids: pa.Array, kinds: np.ndarray, versions: np.ndarray, tenants: np.ndarray,
            expires: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Set distinct ids' columns (kind ``0`` deletes); ``(rows, kinds before, CRC-32s)``.

        A delete of an absent id adds no row (its row is ``-1``).
        """
        off, data = kernels.string_buffers(ids)
        h, crcs = kernels.hash_ids(off, data, kernels.CRC_TABLE)
        add = kinds != 0
        self._reserve(int(add.sum()), int(off[-1] - off[0]))
        rows, self.n = kernels.find_or_add(self.slots, self.hash, self.off, self.data, self.n, h, off, data, add)
        present = rows >= 0
        r = rows[present]
        before = np.zeros(len(rows), np.int8)
        before[present] = self.kind[r]
        self.kind[r] = kinds[present]
        self.version[r] = versions[present]
        self.tenant[r] = tenants[present]
        self.expires[r] = expires[present]
        self.crc[r] = crcs[present]
        self.live += int(np.count_nonzero(kinds[present])) - int(np.count_nonzero(before[present]))
        return rows, before, crcs

    def ids_at(self, rows: np.ndarray) -> pa.Array:
        """The ids of ``rows`` as a string array."""
        off, data = kernels.gather_strings(self.off, self.data, np.asarray(rows, np.int64))
        arr = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(off), pa.py_buffer(data))
        return arr.cast(pa.string())

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.kind[: self.n])

    def compact(self) -> None:
        """Drop the rows of deleted ids (a new id table; row numbers change)."""
        keep = self.live_rows()
        off, data = kernels.gather_strings(self.off, self.data, keep)
        for name in ("hash", "crc", "kind", "version", "tenant", "expires"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[keep]))
        self.off, self.data, self.n = off, data, len(keep)
        self._rehash(kernels.table_size(self.n))

    def should_compact(self) -> bool:
        return self.n - self.live > max(self.live // 4, 4096)


def as_array(values: pa.Array | Sequence[str]) -> pa.Array:
    """``values`` as a string array (for lookups)."""
    return _strings(values, "ids", pa.string())

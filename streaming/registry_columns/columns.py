"""The driver's registry state as columns: one row per id, found through a hash table.

Per id the driver keeps its 64-bit hash, its bytes, shard key (``crc``: its shard is ``crc %
shards``; the id's CRC-32, as :func:`streaming.executor_cache.shard_of`, unless routed,
:mod:`streaming.routing`), kind (``0`` once deleted), version of its last change, owner code
(its tenant and the target topic its id names), expiry time and predicate count: about 49 bytes plus the id's own, never a Python object. What each owner holds (live
subscriptions and predicates per kind) is kept up to date as ids change, for the quotas. The record bytes live in the registry's files only. A deleted id keeps its row
until :meth:`IdColumns.compact` (run when a quarter of the rows are dead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchers.errors import PubSubError
from streaming.registry_columns import kernels
from streaming.routing import UNSET
from streaming.tenants import targets_of

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
    predicates: np.ndarray
    packed: pa.Array
    routes: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, ids, ops, kinds=None, records=None, expires=None, tenants=None, predicates=None,
           packed=None, routes=None) -> ChangeBatch:
        """Checked columns of changes.

        Parameters
        ----------
        ids : strings, none null or empty.
        ops : ``"upsert"``/``"delete"`` or :data:`UPSERT`/:data:`DELETE` codes.
        kinds : :data:`EXPRESSION` or :data:`PATTERN` for each upsert (ignored for a delete).
        records : the canonical record's bytes of each upsert (ignored for a delete).
        expires : expiry time (seconds) or NaN for none; all NaN when omitted.
        tenants : tenant names (the operator's, ``""``, when omitted).
        predicates : each expression upsert's predicate count (the tenants' quota; 0 when omitted).
        packed : each expression upsert's subscription packed (:func:`matchers.packed.pack`),
            each pattern upsert's text and partition attribute (:func:`.view.packed`); ignored for a delete.
        routes : each expression upsert's route hash by the registry's routing, as the parse tasks
            find it (:func:`streaming.routing.expression_routes`); :data:`~streaming.routing.UNSET`
            (all when omitted): the registry computes it.

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
        preds = np.zeros(n, np.int32) if predicates is None else np.asarray(predicates, np.int64)
        if preds.shape != (n,) or (preds < 0).any() or (preds > np.iinfo(np.int32).max).any():
            raise ChangeBatchError(f"predicates: {n} counts of at least 0 needed")
        pk = _strings([None] * n if packed is None else packed, "packed", pa.binary())
        if np.asarray(pk.is_null().to_numpy(zero_copy_only=False))[upsert].any():
            raise ChangeBatchError("every upsert needs its packed subscription or pattern")
        pk = _where_null(pk, ~upsert)
        rts = np.full(n, UNSET, np.int64) if routes is None else np.asarray(routes, np.int64)
        if rts.shape != (n,) or (rts < UNSET).any() or (rts >= 2**31).any():
            raise ChangeBatchError(f"routes: {n} route hashes in [{UNSET}, 2**31) needed")
        return cls(ids, op_codes, kind_codes, recs, exp, ten, np.where(upsert, preds, 0).astype(np.int32), pk,
                   np.where(upsert & (kind_codes == EXPRESSION), rts, UNSET))

    def take(self, rows: np.ndarray) -> ChangeBatch:
        """The changes at ``rows``."""
        idx = pa.array(rows, pa.int64())
        return ChangeBatch(self.ids.take(idx), self.ops[rows], self.kinds[rows], self.records.take(idx),
                           self.expires[rows], self.tenants.take(idx), self.predicates[rows], self.packed.take(idx),
                           self.routes[rows])

    @classmethod
    def concat(cls, parts: Sequence[ChangeBatch]) -> ChangeBatch:
        """The changes of ``parts``, one after the other."""
        arrays = [pa.concat_arrays([getattr(p, f) for p in parts]) if isinstance(getattr(parts[0], f), pa.Array)
                  else np.concatenate([getattr(p, f) for p in parts]) for f in cls._fields]
        return cls(*arrays)


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
    return pc.if_else(pa.array(null), pa.scalar(None, arr.type), arr)


_COLUMNS = ("hash", "crc", "kind", "version", "tenant", "expires", "predicates")


class IdColumns:
    """Rows of ids with their columns, grown in place (by a quarter) and compacted.

    ``tenant`` holds owner codes: ``tenant_names[code]`` and ``target_names[code]`` (``""``:
    none) are the owner's tenant and the target topic its ids name; ``held[code, kind]`` its
    live subscriptions and their predicates.
    """

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
        self.predicates = np.zeros(0, np.int32)
        self.slots = np.full(kernels.table_size(0), kernels.EMPTY, np.int32)
        self.tenant_names: list[str] = []
        self.target_names: list[str] = []
        self.held = np.zeros((0, len(KINDS) + 1, 2), np.int64)
        self._owner_codes: dict[tuple[str, str], int] = {}

    def nbytes(self) -> int:
        """Bytes of the arrays held (capacity included)."""
        return sum(getattr(self, name).nbytes for name in (*_COLUMNS, "off", "data", "slots"))

    def _reserve(self, rows: int, nbytes: int) -> None:
        need = self.n + rows
        if need > len(self.hash):
            cap = max(need, int(len(self.hash) * _GROWTH), 1024)
            for name in _COLUMNS:
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

    def owner_codes(self, tenants: pa.Array, ids: pa.Array) -> np.ndarray:
        """Owner codes of ids of ``tenants`` (the target topic read from a tenant's id; new owners
        get new codes)."""
        if not len(ids):
            return np.zeros(0, np.int32)
        targets = pc.if_else(pc.equal(tenants, ""), "", targets_of(ids))
        t_enc, g_enc = tenants.dictionary_encode(), targets.dictionary_encode()
        t_idx = t_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        g_idx = g_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        pairs, inverse = np.unique(t_idx * len(g_enc.dictionary) + g_idx, return_inverse=True)
        t_names, g_names = t_enc.dictionary.to_pylist(), g_enc.dictionary.to_pylist()
        lookup = np.empty(len(pairs), np.int32)
        for i, pair in enumerate(pairs.tolist()):  # one per distinct owner
            owner = (t_names[pair // len(g_names)], g_names[pair % len(g_names)])
            code = self._owner_codes.get(owner)
            if code is None:
                code = self._owner_codes[owner] = len(self.tenant_names)
                self.tenant_names.append(owner[0])
                self.target_names.append(owner[1])
                self.held = np.concatenate([self.held, np.zeros((1, *self.held.shape[1:]), np.int64)])
            lookup[i] = code
        return lookup[inverse.reshape(-1)]

    def find(self, ids: pa.Array) -> np.ndarray:
        """Rows of ``ids`` (``-1`` when never seen since the last compaction)."""
        off, data = kernels.string_buffers(ids)
        h, _ = kernels.hash_ids(off, data, kernels.CRC_TABLE)
        rows, _ = kernels.find_or_add(self.slots, self.hash, self.off, self.data, self.n, h, off, data,
                                      np.zeros(len(h), np.bool_))
        return rows

    def put(self, ids: pa.Array, kinds: np.ndarray, versions: np.ndarray, owners: np.ndarray,
            expires: np.ndarray, predicates: np.ndarray,
            keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Set distinct ids' columns (kind ``0`` deletes); ``(rows, kinds before, CRC-32s)``.

        ``keys``: the ids' shard keys (default: their CRC-32s). A delete of an absent id adds no
        row (its row is ``-1``).
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
        was = before[present] != 0
        self._count(self.tenant[r][was], self.kind[r][was], self.predicates[r][was], -1)
        new_kinds = kinds[present]
        self.kind[r] = new_kinds
        self.version[r] = versions[present]
        self.tenant[r] = owners[present]
        self.expires[r] = expires[present]
        self.predicates[r] = np.where(new_kinds != 0, predicates[present], 0)
        self.crc[r] = (crcs if keys is None else np.asarray(keys, np.uint32))[present]
        now = new_kinds != 0
        self._count(owners[present][now], new_kinds[now], predicates[present][now], 1)
        self.live += int(np.count_nonzero(new_kinds)) - int(np.count_nonzero(before[present]))
        return rows, before, crcs

    def _count(self, owners: np.ndarray, kinds: np.ndarray, predicates: np.ndarray, sign: int) -> None:
        flat = self.held.reshape(-1)  # a view: [owner, kind, (subscriptions, predicates)]
        at = (owners.astype(np.int64) * self.held.shape[1] + kinds) * 2
        np.add.at(flat, at, sign)
        np.add.at(flat, at + 1, sign * predicates.astype(np.int64))

    def held_by_tenant(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(tenant, kind): (live subscriptions, their predicates)}`` (none held: left out)."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for code, kind in zip(*np.nonzero(self.held[:, :, 0]), strict=True):  # one per owner and kind
            key = (self.tenant_names[code], int(kind))
            n, p = out.get(key, (0, 0))
            out[key] = (n + int(self.held[code, kind, 0]), p + int(self.held[code, kind, 1]))
        return out

    def live_targets(self) -> dict[str, list[str]]:
        """``{tenant: target topics some live id of it names}``."""
        out: dict[str, list[str]] = {}
        for code in np.flatnonzero(self.held[:, :, 0].sum(axis=1)).tolist():
            if self.target_names[code]:
                out.setdefault(self.tenant_names[code], []).append(self.target_names[code])
        return out

    def ids_at(self, rows: np.ndarray) -> pa.Array:
        """The ids of ``rows`` as a string array."""
        off, data = kernels.gather_strings(self.off, self.data, np.asarray(rows, np.int64))
        arr = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(off), pa.py_buffer(data))
        return arr.cast(pa.string())

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.kind[: self.n])

    def expired(self, now: float) -> pa.Array:
        """Ids of live rows whose expiry time is at or before ``now``."""
        return self.ids_at(np.flatnonzero((self.kind[: self.n] != 0) & (self.expires[: self.n] <= now)))

    def compact(self) -> None:
        """Drop the rows of deleted ids (a new id table; row numbers change)."""
        keep = self.live_rows()
        off, data = kernels.gather_strings(self.off, self.data, keep)
        for name in _COLUMNS:
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[keep]))
        self.off, self.data, self.n = off, data, len(keep)
        self._rehash(kernels.table_size(self.n))

    def should_compact(self) -> bool:
        return self.n - self.live > max(self.live // 4, 4096)


def as_array(values: pa.Array | Sequence[str]) -> pa.Array:
    """``values`` as a string array (for lookups)."""
    return _strings(values, "ids", pa.string())

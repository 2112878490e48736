"""Subscriptions packed as bytes, read back without parsing: the canonical expression tree, its
conjunctions (DNF) and expiry time, not the id (the caller's to give, as it stores it).

:func:`pack` writes :func:`to_tuples`' nested tuples of plain values (strings, floats, ints,
booleans, ``None``) with :mod:`marshal`, which reads them back faster than :mod:`pickle` and
builds nothing but those values. Bytes read with :func:`unpack` must come from :func:`pack`
(the registry's files are as trusted as the code). :func:`decode` reads many at once into
columns, for an index that takes them so (:meth:`matchers.base.Matcher.add_packed`).
"""

from __future__ import annotations

import marshal
from typing import Any, NamedTuple

import numpy as np

from matchers import packed_kernels as kernels
from matchers.expr import And, Expr, Kind, Not, Op, Or, Pred, Subscription

_OPS = tuple(Op)
_KINDS = tuple(Kind)
AND, OR, NOT = 0, 1, 2
"""The tags of a packed tree's inner nodes."""
_BUT = int(Op.ANYTHING_BUT)
MARSHAL_VERSION = 2
"""marshal's version 2: no back-references (version 3 added them, flagged by each object's
identity and reference count), so equal tuples always give the same bytes
(:mod:`streaming.registry_columns.fastparse` writes them without building the subscription)."""


def to_tuples(sub: Subscription) -> tuple:
    """``(expires, predicates, tree, conjunctions)`` of ``sub``: ``predicates`` lists each distinct
    predicate once as ``(attr, op, operand, kind)`` (an ``ANYTHING BUT``'s operand is the index of
    its predicate, listed before it); ``tree`` is a predicate's index or ``(AND|OR, child, ...)`` /
    ``(NOT, child)``; ``conjunctions`` are tuples of indices."""
    index: dict[Pred, int] = {}
    preds: list[tuple] = []

    def pid(p: Pred) -> int:
        i = index.get(p)
        if i is None:
            operand = pid(p.operand) if p.op is Op.ANYTHING_BUT else p.operand
            i = index[p] = len(preds)
            preds.append((p.attr, int(p.op), operand, int(p.kind)))
        return i

    def tree(e: Expr) -> Any:
        if isinstance(e, Pred):
            return pid(e)
        if isinstance(e, Not):
            return (NOT, tree(e.child))
        return (AND if isinstance(e, And) else OR, *(tree(c) for c in e.children))

    packed_tree = tree(sub.expr)
    conjunctions = tuple(tuple(pid(p) for p in conj) for conj in sub.conjunctions)
    return (sub.expires, tuple(preds), packed_tree, conjunctions)


def _tree(t: Any, table: list[Pred]) -> Expr:
    if type(t) is int:
        return table[t]
    if t[0] == NOT:
        return Not(_tree(t[1], table))
    children = tuple(table[c] if type(c) is int else _tree(c, table) for c in t[1:])
    return And(children) if t[0] == AND else Or(children)


def _exact(value: Any) -> Any:
    """``value`` as a key equal only to the same value of the same type (``True``, ``1`` and
    ``1.0``, or ``0.0`` and ``-0.0``, are equal in Python, not in a predicate's operand)."""
    kind = type(value)
    if kind is str:
        return value
    return (float, value) if kind is float and value else (kind, repr(value))


def from_tuples(packed: tuple, sub_id: str, cache: dict | None = None) -> Subscription:
    """The subscription ``sub_id`` of :func:`to_tuples`' form (predicates rebuilt as they were,
    already canonical; equal ones are one object, also across the calls given the same
    ``cache``, a dictionary the caller keeps for a bulk read: records repeat predicates)."""
    expires, preds, packed_tree, conjunctions = packed
    table: list[Pred] = []
    keys: list[Any] = []  # each predicate's in the cache
    for fields in preds:
        attr, op, operand, kind = fields
        if op != _BUT:
            of = type(operand)  # a string or a non-zero float is its own exact key: the fields themselves
            key = fields if of is str or of is float and operand else (attr, op, kind, _exact(operand))
        elif isinstance(operand, Pred):  # the pickled registry held the Pred
            key = None
        else:
            key = None if keys[operand] is None else (attr, op, kind, keys[operand])
            operand = table[operand]
        p = None if cache is None or key is None else cache.get(key)
        if p is None:
            p = Pred(attr, _OPS[op], operand, _KINDS[kind])
            if cache is not None and key is not None:
                cache[key] = p
        table.append(p)
        keys.append(key)
    conj = tuple(tuple(map(table.__getitem__, c)) for c in conjunctions)
    return Subscription(sub_id, _tree(packed_tree, table), conj, expires)


def pack(sub: Subscription) -> bytes:
    """``sub`` without its id, as bytes (:func:`to_tuples` marshalled)."""
    return marshal.dumps(to_tuples(sub), MARSHAL_VERSION)


def unpack(data: bytes | memoryview, sub_id: str, cache: dict | None = None) -> Subscription:
    """The subscription :func:`pack` packed, under ``sub_id`` (``cache``: :func:`from_tuples`')."""
    return from_tuples(marshal.loads(data), sub_id, cache)


class Decoded(NamedTuple):
    """Packed subscriptions read in bulk (:func:`decode`): their distinct predicates once each,
    and each row's conjunctions as indices into them (no object per row or predicate)."""

    preds: list[Pred]
    """The distinct predicates (equal fields: one predicate), in order of first use."""
    entries: np.ndarray
    """int64[rows + 1]: row ``i``'s conjunctions are ``entries[i]:entries[i + 1]``."""
    sizes: np.ndarray
    """int64: each conjunction's number of predicates."""
    flat: np.ndarray
    """int64: each conjunction's predicates (indices into ``preds``), conjunction after conjunction."""
    skipped: np.ndarray
    """int64: the rows left out (no conjunctions here): those with an ``ANYTHING BUT``, whose
    operand refers to another predicate of its row (:func:`unpack` them)."""


def _read_only(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a read-only view: the kernels see one type of array whoever calls (a registry
    file's Arrow buffers are read-only, warm-up's and the tests' arrays are not), so they are
    compiled, and cached, once."""
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


def decode(offsets: np.ndarray, data: np.ndarray) -> Decoded:
    """The conjunctions of the rows ``data[offsets[i]:offsets[i + 1]]`` (:func:`pack`'s bytes,
    ``data`` uint8) as :class:`Decoded` columns, read by :mod:`matchers.packed_kernels` without
    a Python object per row or predicate: predicates of the same bytes are one (one
    :class:`Pred` made per distinct one; equal ones of other bytes, as ``1`` and ``1.0``, are
    merged by the index), and the expression trees and expiry times are skipped.

    Raises
    ------
    ValueError
        If a row is not :func:`pack`'s (nothing is returned).
    """
    offsets, data = _read_only(np.ascontiguousarray(offsets, dtype=np.int64)), \
        _read_only(np.ascontiguousarray(data, dtype=np.uint8))
    n = len(offsets) - 1
    bad, starts, ends, ops, n_fields, n_conj, sizes, local = kernels.read_rows(offsets, data)
    if bad >= 0:
        raise ValueError(f"row {bad} is not a packed subscription")
    skipped = np.unique(np.repeat(np.arange(n, dtype=np.int64), n_fields)[ops == _BUT])
    kept_row = np.ones(n, dtype=bool)
    kept_row[skipped] = False
    elem_row = np.repeat(np.repeat(np.arange(n, dtype=np.int64), n_conj), sizes)
    kept_elem = kept_row[elem_row]
    field_at = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_fields, out=field_at[1:])
    at = kernels.first_equal(data, starts, ends)[field_at[elem_row[kept_elem]] + local[kept_elem]]
    chosen = np.zeros(len(starts), dtype=bool)
    chosen[at] = True
    used = np.flatnonzero(chosen)  # the predicates the kept rows use, in order of first use
    flat = (np.cumsum(chosen) - 1)[at]
    raw = data.data
    preds = [Pred(a, _OPS[o], v, _KINDS[k]) for a, o, v, k in
             (marshal.loads(raw[lo:hi]) for lo, hi in zip(starts[used].tolist(), ends[used].tolist(), strict=True))]
    entries = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(kept_row, n_conj, 0), out=entries[1:])
    return Decoded(preds, entries, sizes[np.repeat(kept_row, n_conj)], flat, skipped)

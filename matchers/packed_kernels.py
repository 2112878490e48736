"""Kernels of :func:`matchers.packed.decode`: packed subscriptions (marshal's version 2 of
:func:`matchers.packed.to_tuples`' tuples) read in bulk, without a Python object.

Version 2 writes a tuple as ``(`` and an int32 count, an int as ``i`` and an int32, a larger one
as ``l``, an int32 count of 15-bit digits (its sign the number's) and two bytes a digit, a float as
``g`` and 8 bytes, a string as ``u`` and an int32 length and UTF-8, ``None`` / ``True`` /
``False`` as ``N`` / ``T`` / ``F``, and no back-references (all little-endian).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TUPLE, INT, LONG, FLOAT, TEXT, INTERNED, BYTES = 0x28, 0x69, 0x6C, 0x67, 0x75, 0x74, 0x73
NONE, TRUE, FALSE = 0x4E, 0x54, 0x46


@njit(cache=True, nogil=True)
def _i32(data, pos):
    v = np.int64(data[pos]) | np.int64(data[pos + 1]) << 8 | np.int64(data[pos + 2]) << 16 \
        | np.int64(data[pos + 3]) << 24
    return v - (np.int64(1) << 32) if v >= np.int64(1) << 31 else v


@njit(cache=True, nogil=True)
def _skip(data, pos, end):
    """The position after the value at ``pos`` (-1 if it is not one of the types above or
    runs past ``end``)."""
    todo = 1
    while todo > 0:
        if pos >= end:
            return -1
        t = data[pos]
        pos += 1
        todo -= 1
        if t == NONE or t == TRUE or t == FALSE:
            continue
        if t == FLOAT:
            pos += 8
            continue
        if pos + 4 > end:
            return -1
        n = _i32(data, pos)
        pos += 4
        if t == INT:
            continue
        if t == TUPLE:
            if n < 0:
                return -1
            todo += n
        elif t == TEXT or t == INTERNED or t == BYTES:
            if n < 0:
                return -1
            pos += n
        elif t == LONG:
            pos += 2 * (n if n >= 0 else -n)
        else:
            return -1
    return pos if pos <= end else -1


@njit(cache=True, nogil=True)
def _header(data, pos, end, tag):
    """The count of a ``tag`` value (tuple or int) at ``pos`` (-1 if there is none)."""
    if pos < 0 or pos + 5 > end or data[pos] != tag:
        return -1
    return _i32(data, pos + 1)


@njit(cache=True, nogil=True)
def read_rows(offsets, data):
    """Row ``r`` is ``data[offsets[r]:offsets[r + 1]]``. Returns ``(bad, starts, ends, ops,
    n_fields, n_conj, sizes, local)``: each predicate's span (its fields tuple) and operator,
    each row's predicates and conjunctions, each conjunction's size and its predicates'
    positions in its row; ``bad`` is the first row that is not a packed subscription, or -1."""
    n = len(offsets) - 1
    size = len(data)
    starts = np.empty(size // 21 + 1, np.int64)  # a predicate takes 21 bytes at least
    ends = np.empty(size // 21 + 1, np.int64)
    ops = np.empty(size // 21 + 1, np.int64)
    sizes = np.empty(size // 5 + 1, np.int64)
    local = np.empty(size // 5 + 1, np.int64)
    n_fields = np.zeros(n, np.int64)
    n_conj = np.zeros(n, np.int64)
    nf = nc = ne = 0
    for r in range(n):
        pos, end = offsets[r], offsets[r + 1]
        if _header(data, pos, end, TUPLE) != 4:
            return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
        pos = _skip(data, pos + 5, end)  # the expiry time
        k = _header(data, pos, end, TUPLE)
        if k < 0:
            return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
        pos += 5
        for _ in range(k):
            start = pos
            if _header(data, pos, end, TUPLE) != 4 or pos + 5 >= end or (data[pos + 5] != TEXT and data[pos + 5] != INTERNED):
                return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
            pos = _skip(data, pos + 5, end)  # the attribute
            op = _header(data, pos, end, INT)
            pos = _skip(data, pos + 5, end) if pos >= 0 else -1  # the operand
            if op < 0 or _header(data, pos, end, INT) < 0:  # the kind
                return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
            pos += 5
            starts[nf], ends[nf], ops[nf] = start, pos, op
            nf += 1
        n_fields[r] = k
        pos = _skip(data, pos, end)  # the tree
        c = _header(data, pos, end, TUPLE)
        if c < 0:
            return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
        pos += 5
        for _ in range(c):
            m = _header(data, pos, end, TUPLE)
            if m < 0:
                return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
            pos += 5
            for _ in range(m):
                i = _header(data, pos, end, INT)
                if i < 0 or i >= k:
                    return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
                local[ne] = i
                ne += 1
                pos += 5
            sizes[nc] = m
            nc += 1
        n_conj[r] = c
        if pos != end:
            return r, starts[:0], ends[:0], ops[:0], n_fields, n_conj, sizes[:0], local[:0]
    return -1, starts[:nf], ends[:nf], ops[:nf], n_fields, n_conj, sizes[:nc], local[:ne]


@njit(cache=True, nogil=True)
def _rehash(table, hashes, cap):
    """A table of ``cap`` slots holding the spans of ``table`` at their hashes' slots."""
    out = np.full(cap, -1, np.int64)
    mask = np.uint64(cap - 1)
    for j in table:
        if j >= 0:
            slot = np.int64(hashes[j] & mask)
            while out[slot] >= 0:
                slot = (slot + 1) & (cap - 1)
            out[slot] = j
    return out


@njit(cache=True, nogil=True)
def first_equal(data, starts, ends):
    """For each span ``data[starts[i]:ends[i]]``, the first ``j <= i`` whose bytes are the same
    (an open-addressing table of the distinct spans, grown with them: a shard repeats few)."""
    n = len(starts)
    cap = 1024
    table = np.full(cap, -1, np.int64)
    hashes = np.empty(n, np.uint64)
    out = np.empty(n, np.int64)
    distinct = 0
    for i in range(n):
        h = np.uint64(14695981039346656037)
        for p in range(starts[i], ends[i]):
            h = (h ^ np.uint64(data[p])) * np.uint64(1099511628211)
        hashes[i] = h
        slot = np.int64(h & np.uint64(cap - 1))
        length = ends[i] - starts[i]
        while True:
            j = table[slot]
            if j < 0:
                table[slot] = i
                out[i] = i
                distinct += 1
                if 2 * distinct > cap:
                    cap *= 2
                    table = _rehash(table, hashes, cap)
                break
            if hashes[j] == h and ends[j] - starts[j] == length:
                same = True
                for q in range(length):
                    if data[starts[j] + q] != data[starts[i] + q]:
                        same = False
                        break
                if same:
                    out[i] = j
                    break
            slot = (slot + 1) & (cap - 1)
    return out

"""The flat store's tables in numba (:mod:`.flat_layout`): views of the arrays, growth,
the hash tables, allocation of instances, records and buckets, the expiry heap.

Two open-addressing hash tables (linear probing, backward-shift deletion) map four key
ids to a row: ``HB`` from ``(node, k0, k1, k2)`` to its bucket, ``HA`` from ``(group,
k0, k1, k2)`` to the first bucket of the nodes holding instances under those key ids
(the active-node index). Nothing here grows an array but :func:`grow`, :func:`rehash`
and :func:`grow_for`.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .flat_layout import (
    ABSENT,
    AFF,
    B_COUNT,
    B_GNEXT,
    B_GPREV,
    B_HEAD,
    B_K0,
    B_NNEXT,
    B_NODE,
    B_NPREV,
    BFREE,
    BKT,
    E_SLOTS,
    EMPTY,
    FREEKEY,
    FREEREC,
    HA,
    HB,
    HEAP,
    HEAPT,
    I_BKT,
    I_BORN,
    I_CUR,
    I_FIRST,
    I_GEN,
    I_NEXT,
    I_NODE,
    I_PREV,
    I_SEQ,
    I_T0,
    I_T1,
    IFREE,
    INST,
    KREF,
    M_BFREE,
    M_BUSED,
    M_CALL,
    M_FREEKEY,
    M_FREEREC,
    M_GROWN,
    M_HAN,
    M_HBN,
    M_HEAP,
    M_IFREE,
    M_IUSED,
    M_LIVE,
    M_MATCH,
    M_NEWR,
    M_NEWREC,
    M_RFREE,
    M_RUSED,
    MATCH,
    META,
    N_BKT,
    N_E0,
    N_GROUP,
    NDEAD,
    NEWR,
    NEWREC,
    NO_KEY,
    NODE,
    PEND,
    REC,
    RFREE,
    UNUSED,
)


def _pointer(dtype):
    @intrinsic
    def pointer(typingctx, addr):
        sig = types.CPointer(dtype)(types.intp)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(dtype)))

        return sig, codegen

    return pointer


_int_pointer = _pointer(types.int64)
_float_pointer = _pointer(types.float64)


@njit(cache=True, inline="always")
def _iv(a):
    """A view of ``a`` without its reference count (the kernels' arrays are held by the
    caller's lists; a view's references cost nothing, an array's are atomic operations)."""
    return numba.carray(_int_pointer(a.ctypes.data), a.shape)


@njit(cache=True, inline="always")
def _fv(a):
    return numba.carray(_float_pointer(a.ctypes.data), a.shape)


@njit(cache=True)
def fetch(ints):
    """Views of the int arrays (valid until one of them is replaced)."""
    return (_iv(ints[0]), _iv(ints[1]), _iv(ints[2]), _iv(ints[3]), _iv(ints[4]), _iv(ints[5]), _iv(ints[6]),
            _iv(ints[7]), _iv(ints[8]), _iv(ints[9]), _iv(ints[10]), _iv(ints[11]), _iv(ints[12]), _iv(ints[13]),
            _iv(ints[14]), _iv(ints[15]), _iv(ints[16]), _iv(ints[17]), _iv(ints[18]), _iv(ints[19]),
            _iv(ints[20]), _iv(ints[21]), _iv(ints[22]), _iv(ints[23]), _iv(ints[24]), _iv(ints[25]),
            _iv(ints[26]))


@njit(cache=True)
def fetchf(flts):
    return _fv(flts[0]), _fv(flts[1]), _fv(flts[2]), _fv(flts[3])


@njit(cache=True)
def grow(a, n):
    """``a`` with at least ``n`` rows (the same array when it has them)."""
    rows = a.shape[0]
    if n <= rows:
        return a
    b = np.empty((max(n, 2 * rows, 16), a.shape[1]), a.dtype)
    b[:rows] = a
    return b


@njit(cache=True, inline="always")
def _hash(a, b, c, d, mask):
    h = (a + 3) * -7046029254386353131
    h ^= h >> 32
    h = (h + b + 3) * -4658895280553007687
    h ^= h >> 29
    h = (h + c + 3) * -7046029254386353131
    h ^= h >> 32
    h = (h + d + 3) * -4658895280553007687
    h ^= h >> 29
    return h & mask


@njit(cache=True, inline="always")
def hslot(h, a, b, c, d):
    """The slot of key ``(a, b, c, d)`` in table ``h``, or the empty slot where it would go."""
    mask = h.shape[0] - 1
    i = _hash(a, b, c, d, mask)
    while h[i, 0] != EMPTY and not (h[i, 0] == a and h[i, 1] == b and h[i, 2] == c and h[i, 3] == d):
        i = (i + 1) & mask
    return i


@njit(cache=True, inline="always")
def hdel(h, i):
    """Empty slot ``i``, shifting back the entries probed past it."""
    mask = h.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if h[j, 0] == EMPTY:
            break
        k = _hash(h[j, 0], h[j, 1], h[j, 2], h[j, 3], mask)
        if (i < k <= j) if i <= j else (i < k or k <= j):
            continue  # its probe starts after the hole: it stays
        for c in range(5):
            h[i, c] = h[j, c]
        i = j
    h[i, 0] = EMPTY


@njit(cache=True)
def rehash(h, n):
    """``h`` in a table of at least ``2 n`` slots (a power of two)."""
    cap = h.shape[0]
    if 2 * n <= cap:
        return h
    while 2 * n > cap:
        cap *= 2
    out = np.full((cap, 5), EMPTY, dtype=np.int64)
    for i in range(h.shape[0]):
        if h[i, 0] != EMPTY:
            j = hslot(out, h[i, 0], h[i, 1], h[i, 2], h[i, 3])
            for c in range(5):
                out[j, c] = h[i, c]
    return out


@njit(cache=True)
def grow_for(ints, flts, ni, na, nm):
    """Grow the tables for ``ni`` new instances (and buckets), ``na`` new records and ``nm``
    new matches."""
    meta = ints[META]
    meta[0, M_GROWN] += 1
    rows = meta[0, M_IUSED] + max(0, ni - meta[0, M_IFREE])
    ints[INST] = grow(ints[INST], rows)
    ints[IFREE] = grow(ints[IFREE], ints[INST].shape[0])
    ints[AFF] = grow(ints[AFF], ints[INST].shape[0])
    rows = meta[0, M_RUSED] + max(0, na - meta[0, M_RFREE])
    ints[REC] = grow(ints[REC], rows)
    ints[RFREE] = grow(ints[RFREE], ints[REC].shape[0])
    ints[FREEREC] = grow(ints[FREEREC], ints[REC].shape[0])
    rows = meta[0, M_BUSED] + max(0, ni - meta[0, M_BFREE])
    ints[BKT] = grow(ints[BKT], rows)
    ints[BFREE] = grow(ints[BFREE], ints[BKT].shape[0])
    ints[HEAP] = grow(ints[HEAP], meta[0, M_HEAP] + ni)
    flts[HEAPT] = grow(flts[HEAPT], ints[HEAP].shape[0])
    ints[PEND] = grow(ints[PEND], ni)
    ints[NEWR] = grow(ints[NEWR], na)
    ints[MATCH] = grow(ints[MATCH], meta[0, M_MATCH] + nm)
    ints[NEWREC] = grow(ints[NEWREC], meta[0, M_NEWREC] + na)
    ints[FREEKEY] = grow(ints[FREEKEY], ints[KREF].shape[0])
    ints[HB] = rehash(ints[HB], meta[0, M_HBN] + ni)
    ints[HA] = rehash(ints[HA], meta[0, M_HAN] + ni)




@njit(cache=True, inline="always")
def room(T, F, ni, na, nm):
    """Whether the tables hold ``ni`` new instances, ``na`` new records, ``nm`` new matches."""
    meta = T[META]
    return (T[INST].shape[0] - meta[0, M_IUSED] + meta[0, M_IFREE] >= ni
            and T[REC].shape[0] - meta[0, M_RUSED] + meta[0, M_RFREE] >= na
            and T[BKT].shape[0] - meta[0, M_BUSED] + meta[0, M_BFREE] >= ni
            and T[HEAP].shape[0] >= meta[0, M_HEAP] + ni
            and T[PEND].shape[0] >= ni and T[NEWR].shape[0] >= na
            and T[MATCH].shape[0] >= meta[0, M_MATCH] + nm
            and T[NEWREC].shape[0] >= meta[0, M_NEWREC] + na
            and 2 * (meta[0, M_HBN] + ni) <= T[HB].shape[0]
            and 2 * (meta[0, M_HAN] + ni) <= T[HA].shape[0])


@njit(cache=True, inline="always")
def alloc(T, table, free, used_col, free_col):
    """A free row of ``table`` (its free stack ``free``; the room was checked)."""
    meta = T[META]
    nf = meta[0, free_col]
    if nf > 0:
        meta[0, free_col] = nf - 1
        return T[free][nf - 1, 0]
    used = meta[0, used_col]
    meta[0, used_col] = used + 1
    return used


# ---------------------------------------------------------------- records


@njit(cache=True, inline="always")
def _release_key(T, k):
    kref, meta = T[KREF], T[META]
    kref[k, 0] -= 1
    if kref[k, 0] == 0 and kref[k, 1] != meta[0, M_CALL]:  # listed once per call
        kref[k, 1] = meta[0, M_CALL]
        T[FREEKEY][meta[0, M_FREEKEY], 0] = k
        meta[0, M_FREEKEY] += 1


@njit(cache=True, inline="always")
def free_rec(T, r):
    rec, meta = T[REC], T[META]
    rec[r, 0] = -1
    for s in range(1, rec.shape[1]):
        if rec[r, s] >= 0:
            _release_key(T, rec[r, s])
    T[FREEREC][meta[0, M_FREEREC], 0] = r
    meta[0, M_FREEREC] += 1


@njit(cache=True, inline="always")
def release(T, r):
    rec = T[REC]
    rec[r, 0] -= 1
    if rec[r, 0] == 0:
        free_rec(T, r)


@njit(cache=True, inline="always")
def new_rec(T, parent, ev, ei):
    """A record of event ``ei`` (merged over record ``parent`` when >= 0): its key ids per slot."""
    r = alloc(T, REC, RFREE, M_RUSED, M_RFREE)
    rec, kref, meta = T[REC], T[KREF], T[META]
    rec[r, 0] = 0
    for s in range(1, rec.shape[1]):
        c = ev[E_SLOTS + s - 1, ei]
        if c == ABSENT:
            c = rec[parent, s] if parent >= 0 else NO_KEY
        rec[r, s] = c
        if c >= 0:
            kref[c, 0] += 1
    j = meta[0, M_NEWREC]
    meta[0, M_NEWREC] = j + 1
    out = T[NEWREC]
    out[j, 0] = r
    out[j, 1] = parent
    out[j, 2] = ei
    j = meta[0, M_NEWR]
    meta[0, M_NEWR] = j + 1
    T[NEWR][j, 0] = r
    return r


# ---------------------------------------------------------------- expiry heap


@njit(cache=True, inline="always")
def _heap_push(T, F, t, i, gen):
    meta, heap, ht = T[META], T[HEAP], F[HEAPT]
    n = meta[0, M_HEAP]
    while n > 0:
        p = (n - 1) // 2
        if ht[p, 0] <= t:
            break
        ht[n, 0] = ht[p, 0]
        heap[n, 0] = heap[p, 0]
        heap[n, 1] = heap[p, 1]
        n = p
    ht[n, 0] = t
    heap[n, 0] = i
    heap[n, 1] = gen
    meta[0, M_HEAP] += 1


@njit(cache=True, inline="always")
def heap_pop(T, F):
    """Remove the top entry (the caller read it)."""
    meta, heap, ht = T[META], T[HEAP], F[HEAPT]
    n = meta[0, M_HEAP] - 1
    meta[0, M_HEAP] = n
    t, i, gen = ht[n, 0], heap[n, 0], heap[n, 1]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and ht[c + 1, 0] < ht[c, 0]:
            c += 1
        if ht[c, 0] >= t:
            break
        ht[k, 0] = ht[c, 0]
        heap[k, 0] = heap[c, 0]
        heap[k, 1] = heap[c, 1]
        k = c
    ht[k, 0] = t
    heap[k, 0] = i
    heap[k, 1] = gen


# ---------------------------------------------------------------- instances


@njit(cache=True, inline="always")
def _free_bucket(T, b):
    bk, node, meta = T[BKT], T[NODE], T[META]
    n = bk[b, B_NODE]
    k0, k1, k2 = bk[b, B_K0], bk[b, B_K0 + 1], bk[b, B_K0 + 2]
    gn, gp = bk[b, B_GNEXT], bk[b, B_GPREV]
    if gp >= 0:
        bk[gp, B_GNEXT] = gn
    else:
        ha = T[HA]
        j = hslot(ha, node[n, N_GROUP], k0, k1, k2)
        if gn >= 0:
            ha[j, 4] = gn
        else:
            hdel(ha, j)
            meta[0, M_HAN] -= 1
    if gn >= 0:
        bk[gn, B_GPREV] = gp
    nn, np_ = bk[b, B_NNEXT], bk[b, B_NPREV]
    if np_ >= 0:
        bk[np_, B_NNEXT] = nn
    else:
        node[n, N_BKT] = nn
    if nn >= 0:
        bk[nn, B_NPREV] = np_
    hb = T[HB]
    hdel(hb, hslot(hb, n, k0, k1, k2))
    meta[0, M_HBN] -= 1
    T[BFREE][meta[0, M_BFREE], 0] = b
    meta[0, M_BFREE] += 1


@njit(cache=True, inline="always")
def unlink(T, i):
    inst, bk, meta = T[INST], T[BKT], T[META]
    b = inst[i, I_BKT]
    nx, pv = inst[i, I_NEXT], inst[i, I_PREV]
    if pv >= 0:
        inst[pv, I_NEXT] = nx
    else:
        bk[b, B_HEAD] = nx
    if nx >= 0:
        inst[nx, I_PREV] = pv
    bk[b, B_COUNT] -= 1
    if bk[b, B_COUNT] == 0:
        _free_bucket(T, b)
    inst[i, I_NODE] = -1
    inst[i, I_GEN] += 1
    T[IFREE][meta[0, M_IFREE], 0] = i
    meta[0, M_IFREE] += 1
    meta[0, M_LIVE] -= 1
    release(T, inst[i, I_FIRST])
    release(T, inst[i, I_CUR])


@njit(cache=True, inline="always")
def insert(T, F, n, first, cur, t0, t1, born, seq):
    """Insert an instance of node ``n`` (nothing when a key attribute of ``cur`` has no id:
    the equality could never hold). The room was checked."""
    node, rec, meta = T[NODE], T[REC], T[META]
    k0 = k1 = k2 = UNUSED
    s = node[n, N_E0]
    if s >= 0:
        k0 = rec[cur, 1 + s]
        if k0 < 0:
            return
        s = node[n, N_E0 + 1]
        if s >= 0:
            k1 = rec[cur, 1 + s]
            if k1 < 0:
                return
            s = node[n, N_E0 + 2]
            if s >= 0:
                k2 = rec[cur, 1 + s]
                if k2 < 0:
                    return
    hb, bk = T[HB], T[BKT]
    j = hslot(hb, n, k0, k1, k2)
    if hb[j, 0] != EMPTY:
        b = hb[j, 4]
    else:
        b = alloc(T, BKT, BFREE, M_BUSED, M_BFREE)
        hb[j, 0], hb[j, 1], hb[j, 2], hb[j, 3], hb[j, 4] = n, k0, k1, k2, b
        meta[0, M_HBN] += 1
        bk[b, B_NODE] = n
        bk[b, B_K0] = k0
        bk[b, B_K0 + 1] = k1
        bk[b, B_K0 + 2] = k2
        bk[b, B_HEAD] = -1
        bk[b, B_COUNT] = 0
        ha = T[HA]
        g = node[n, N_GROUP]
        j = hslot(ha, g, k0, k1, k2)
        if ha[j, 0] != EMPTY:
            h = ha[j, 4]
            bk[h, B_GPREV] = b
        else:
            h = -1
            ha[j, 0], ha[j, 1], ha[j, 2], ha[j, 3] = g, k0, k1, k2
            meta[0, M_HAN] += 1
        ha[j, 4] = b
        bk[b, B_GNEXT] = h
        bk[b, B_GPREV] = -1
        h = node[n, N_BKT]
        bk[b, B_NNEXT] = h
        bk[b, B_NPREV] = -1
        if h >= 0:
            bk[h, B_NPREV] = b
        node[n, N_BKT] = b
    i = alloc(T, INST, IFREE, M_IUSED, M_IFREE)
    inst = T[INST]
    inst[i, I_NODE] = n
    inst[i, I_T0] = t0
    inst[i, I_T1] = t1
    inst[i, I_BORN] = born
    inst[i, I_SEQ] = seq
    inst[i, I_FIRST] = first
    inst[i, I_CUR] = cur
    inst[i, I_BKT] = b
    h = bk[b, B_HEAD]
    inst[i, I_NEXT] = h
    inst[i, I_PREV] = -1
    if h >= 0:
        inst[h, I_PREV] = i
    bk[b, B_HEAD] = i
    bk[b, B_COUNT] += 1
    rec[first, 0] += 1
    rec[cur, 0] += 1
    meta[0, M_LIVE] += 1
    d = F[NDEAD][n, 0]
    if d == d and d < np.inf:
        _heap_push(T, F, t0 + d - 1, i, inst[i, I_GEN])


@njit(cache=True)
def drop_expired(T, F, now):
    """Drop the instances whose last possible firing time is before ``now`` (the heap never
    grows here: an entry is popped before it is pushed again)."""
    meta, heap, ht = T[META], T[HEAP], F[HEAPT]
    while meta[0, M_HEAP] > 0 and ht[0, 0] < now:
        i, gen = heap[0, 0], heap[0, 1]
        heap_pop(T, F)
        inst = T[INST]
        n = inst[i, I_NODE]
        if n < 0 or inst[i, I_GEN] != gen:
            continue
        d = F[NDEAD][n, 0]  # may have changed with the subscriptions since
        if not (d == d and d < np.inf):
            continue
        last = inst[i, I_T0] + d - 1
        if last < now:
            unlink(T, i)
        else:
            _heap_push(T, F, last, i, gen)

"""numba kernels of the flat store (:mod:`.flat`): instances, records and buckets as rows.

The layout is two typed lists of 2-D arrays, ``ints`` (int64) and ``flts`` (float64),
indexed by the slot constants below. An entry point reads them once into tuples ``T``
and ``F`` and the step never grows an array: before an event's transitions it bounds
what they can create; when a table lacks the room, the step stops before that event, the
entry point grows the tables (:func:`_reserve`) and runs the event again (what the event
did before stopping, expiry and collecting its affected instances, is done or pure).

Two open-addressing hash tables (linear probing, backward-shift deletion) map four key
ids to a row: ``HB`` from ``(node, k0, k1, k2)`` to its bucket, ``HA`` from ``(group,
k0, k1, k2)`` to the first bucket of the nodes holding instances under those key ids
(the active-node index).

Rows:

* instance: node (-1: free), t0, t1, born (epoch), seq (start event), first and current
  record, bucket, next and previous instance of the bucket, generation (heap entries of
  a freed row are stale);
* record: reference count (-1: freed), then one key id per slot (-1: none);
* bucket: node, key ids, first instance, count, links in the active list of its key
  and in its node's list;
* node: group, FOLD flag, static-check flag, the record slots of its key, first forward
  edge, first bucket, first static atom; forward edge: next edge of the node, first
  target, accept flag, number of ``DUR`` tests, their operators (constants in
  ``flts[OUTK]``), number of targets; target: node, next; group: stream, event slots of
  its key; static atom: next, static slot, operator, kind, constant id (a number
  constant in ``flts[ATOMK]``).

Every entry point clears the output lists (matches, new records, freed records and key
ids) and ends by returning the freed records to the free list: a record id freed by a
call is not reused before the caller has read the outputs.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from . import rules

# ints slots
(INST, IFREE, REC, RFREE, BKT, BFREE, HEAP, META, NODE, OUT, TGT, GROUP, KREF, MATCH, NEWREC, FREEREC,
 FREEKEY, AFF, PEND, NEWR, NOK, ATOM, HB, HA, START, HS, FIRE) = range(27)
N_INTS = 27
# flts slots
HEAPT, NDEAD, OUTK, ATOMK = range(4)
N_FLTS = 4

I_NODE, I_T0, I_T1, I_BORN, I_SEQ, I_FIRST, I_CUR, I_BKT, I_NEXT, I_PREV, I_GEN = range(11)
I_COLS = 11
B_NODE, B_K0, B_HEAD, B_COUNT, B_GNEXT, B_GPREV, B_NNEXT, B_NPREV = 0, 1, 4, 5, 6, 7, 8, 9
B_COLS = 10
N_GROUP, N_FOLD, N_STATIC, N_E0, N_OUT, N_BKT, N_ATOM = 0, 1, 2, 3, 6, 7, 8
N_COLS = 9
MAX_DUR_TESTS = 4
O_NEXT, O_TGT, O_ACCEPT, O_ND, O_OP0 = 0, 1, 2, 3, 4
O_NT = O_OP0 + MAX_DUR_TESTS
O_COLS = O_NT + 1
G_STREAM, G_A0 = 0, 1
G_COLS = 4
S_OUT, S_ATOM, S_NEXT, S_PREV = range(4)
S_COLS = 4
SCAN = -1  # index key of a stream's start edges without an equality atom: (stream, SCAN, SCAN, SCAN)
A_NEXT, A_SLOT, A_OP, A_KIND, A_CONST = range(5)
A_COLS = 5
NUMBER, STRING, BOOLEAN = 0, 1, 2  # atom kinds: a number constant, a string or boolean one (an id)
T_NONE, T_NUMBER, T_STRING, T_BOOLEAN, T_OTHER = range(5)  # the type of an event's value
MAX_KEY = 3  # equality attributes of a node's key
(M_IUSED, M_IFREE, M_RUSED, M_RFREE, M_BUSED, M_BFREE, M_HEAP, M_LIVE, M_MATCH, M_NEWREC, M_FREEREC,
 M_FREEKEY, M_AFF, M_PEND, M_NEWR, M_MARK, M_CALL, M_HBN, M_HAN, M_NI, M_NA, M_NM, M_HSN, M_GROWN) = range(24)
M_COLS = 24  # M_GROWN: counts the calls that replaced arrays (the caller's own references are then stale)
# an event's column: stream, t0, t1, seq, exact flag, a key code per slot, per static slot its type and constant id
E_STREAM, E_T0, E_T1, E_SEQ, E_EXACT, E_SLOTS = range(6)
ABSENT = -3  # event slot code: the event has no such attribute (a combined record keeps the instance's)
NO_KEY = -1  # no key id: missing, None or NaN (an equality with it cannot hold)
UNUSED = -2  # key part of a node with fewer than MAX_KEY equalities
EMPTY = -1  # hash table slot
OPS = rules.OPS
MATCH_COLS = 6  # event index, forward edge, record, t0, t1, born
NEWREC_COLS = 3  # record, parent record (-1: the event's own), event index
PEND_COLS = 6  # node, first record, current record, t0, born, seq
COLS = {INST: I_COLS, REC: 1, BKT: B_COLS, HEAP: 2, META: M_COLS, NODE: N_COLS, OUT: O_COLS, TGT: 2,
        GROUP: G_COLS, KREF: 2, MATCH: MATCH_COLS, NEWREC: NEWREC_COLS, PEND: PEND_COLS, ATOM: A_COLS,
        HB: 5, HA: 5, START: S_COLS, HS: 5}
FCOLS = {HEAPT: 1, NDEAD: 1, OUTK: MAX_DUR_TESTS, ATOMK: 1}


def empty_layout(rows: int = 16) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Arrays of an engine without subscriptions or instances (``rows`` rows each; the hash
    tables all empty, the tables Python fills with no row)."""
    ints = [np.zeros((rows, COLS.get(slot, 1)), dtype=np.int64) for slot in range(N_INTS)]
    for slot in (NODE, OUT, TGT, GROUP, ATOM, START):
        ints[slot] = ints[slot][:0]
    ints[META] = np.zeros((1, M_COLS), dtype=np.int64)
    for slot in (HB, HA, HS):
        ints[slot][:] = EMPTY
    flts = [np.zeros((rows, FCOLS[slot])) for slot in range(N_FLTS)]
    flts[NDEAD][:] = np.inf
    return ints, flts


# ---------------------------------------------------------------- tables


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
def _fetch(ints):
    """Views of the int arrays (valid until one of them is replaced)."""
    return (_iv(ints[0]), _iv(ints[1]), _iv(ints[2]), _iv(ints[3]), _iv(ints[4]), _iv(ints[5]), _iv(ints[6]),
            _iv(ints[7]), _iv(ints[8]), _iv(ints[9]), _iv(ints[10]), _iv(ints[11]), _iv(ints[12]), _iv(ints[13]),
            _iv(ints[14]), _iv(ints[15]), _iv(ints[16]), _iv(ints[17]), _iv(ints[18]), _iv(ints[19]),
            _iv(ints[20]), _iv(ints[21]), _iv(ints[22]), _iv(ints[23]), _iv(ints[24]), _iv(ints[25]),
            _iv(ints[26]))


@njit(cache=True)
def _fetchf(flts):
    return _fv(flts[0]), _fv(flts[1]), _fv(flts[2]), _fv(flts[3])


@njit(cache=True)
def _grow(a, n):
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
def _hslot(h, a, b, c, d):
    """The slot of key ``(a, b, c, d)`` in table ``h``, or the empty slot where it would go."""
    mask = h.shape[0] - 1
    i = _hash(a, b, c, d, mask)
    while h[i, 0] != EMPTY and not (h[i, 0] == a and h[i, 1] == b and h[i, 2] == c and h[i, 3] == d):
        i = (i + 1) & mask
    return i


@njit(cache=True, inline="always")
def _hdel(h, i):
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
def _rehash(h, n):
    """``h`` in a table of at least ``2 n`` slots (a power of two)."""
    cap = h.shape[0]
    if 2 * n <= cap:
        return h
    while 2 * n > cap:
        cap *= 2
    out = np.full((cap, 5), EMPTY, dtype=np.int64)
    for i in range(h.shape[0]):
        if h[i, 0] != EMPTY:
            j = _hslot(out, h[i, 0], h[i, 1], h[i, 2], h[i, 3])
            for c in range(5):
                out[j, c] = h[i, c]
    return out


@njit(cache=True)
def _reserve(ints, flts, ni, na, nm):
    """Grow the tables for ``ni`` new instances (and buckets), ``na`` new records and ``nm``
    new matches."""
    meta = ints[META]
    meta[0, M_GROWN] += 1
    rows = meta[0, M_IUSED] + max(0, ni - meta[0, M_IFREE])
    ints[INST] = _grow(ints[INST], rows)
    ints[IFREE] = _grow(ints[IFREE], ints[INST].shape[0])
    ints[AFF] = _grow(ints[AFF], ints[INST].shape[0])
    rows = meta[0, M_RUSED] + max(0, na - meta[0, M_RFREE])
    ints[REC] = _grow(ints[REC], rows)
    ints[RFREE] = _grow(ints[RFREE], ints[REC].shape[0])
    ints[FREEREC] = _grow(ints[FREEREC], ints[REC].shape[0])
    rows = meta[0, M_BUSED] + max(0, ni - meta[0, M_BFREE])
    ints[BKT] = _grow(ints[BKT], rows)
    ints[BFREE] = _grow(ints[BFREE], ints[BKT].shape[0])
    ints[HEAP] = _grow(ints[HEAP], meta[0, M_HEAP] + ni)
    flts[HEAPT] = _grow(flts[HEAPT], ints[HEAP].shape[0])
    ints[PEND] = _grow(ints[PEND], ni)
    ints[NEWR] = _grow(ints[NEWR], na)
    ints[MATCH] = _grow(ints[MATCH], meta[0, M_MATCH] + nm)
    ints[NEWREC] = _grow(ints[NEWREC], meta[0, M_NEWREC] + na)
    ints[FREEKEY] = _grow(ints[FREEKEY], ints[KREF].shape[0])
    ints[HB] = _rehash(ints[HB], meta[0, M_HBN] + ni)
    ints[HA] = _rehash(ints[HA], meta[0, M_HAN] + ni)


@njit(cache=True)
def reserve(ints, flts, ni, na):
    """Room for ``ni`` instances and ``na`` records (before :func:`load`)."""
    _reserve(ints, flts, ni, na, 0)


@njit(cache=True, inline="always")
def _room(T, F, ni, na, nm):
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
def _alloc(T, table, free, used_col, free_col):
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
def _free_rec(T, r):
    rec, meta = T[REC], T[META]
    rec[r, 0] = -1
    for s in range(1, rec.shape[1]):
        if rec[r, s] >= 0:
            _release_key(T, rec[r, s])
    T[FREEREC][meta[0, M_FREEREC], 0] = r
    meta[0, M_FREEREC] += 1


@njit(cache=True, inline="always")
def _release(T, r):
    rec = T[REC]
    rec[r, 0] -= 1
    if rec[r, 0] == 0:
        _free_rec(T, r)


@njit(cache=True, inline="always")
def _new_rec(T, parent, ev, ei):
    """A record of event ``ei`` (merged over record ``parent`` when >= 0): its key ids per slot."""
    r = _alloc(T, REC, RFREE, M_RUSED, M_RFREE)
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
def _heap_pop(T, F):
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
        j = _hslot(ha, node[n, N_GROUP], k0, k1, k2)
        if gn >= 0:
            ha[j, 4] = gn
        else:
            _hdel(ha, j)
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
    _hdel(hb, _hslot(hb, n, k0, k1, k2))
    meta[0, M_HBN] -= 1
    T[BFREE][meta[0, M_BFREE], 0] = b
    meta[0, M_BFREE] += 1


@njit(cache=True, inline="always")
def _unlink(T, i):
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
    _release(T, inst[i, I_FIRST])
    _release(T, inst[i, I_CUR])


@njit(cache=True, inline="always")
def _insert(T, F, n, first, cur, t0, t1, born, seq):
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
    j = _hslot(hb, n, k0, k1, k2)
    if hb[j, 0] != EMPTY:
        b = hb[j, 4]
    else:
        b = _alloc(T, BKT, BFREE, M_BUSED, M_BFREE)
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
        j = _hslot(ha, g, k0, k1, k2)
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
    i = _alloc(T, INST, IFREE, M_IUSED, M_IFREE)
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
def _expire(T, F, now):
    """Drop the instances whose last possible firing time is before ``now`` (the heap never
    grows here: an entry is popped before it is pushed again)."""
    meta, heap, ht = T[META], T[HEAP], F[HEAPT]
    while meta[0, M_HEAP] > 0 and ht[0, 0] < now:
        i, gen = heap[0, 0], heap[0, 1]
        _heap_pop(T, F)
        inst = T[INST]
        n = inst[i, I_NODE]
        if n < 0 or inst[i, I_GEN] != gen:
            continue
        d = F[NDEAD][n, 0]  # may have changed with the subscriptions since
        if not (d == d and d < np.inf):
            continue
        last = inst[i, I_T0] + d - 1
        if last < now:
            _unlink(T, i)
        else:
            _heap_push(T, F, last, i, gen)


# ---------------------------------------------------------------- the step


_cmp = njit(cache=True, inline="always")(rules.compare)  # ``x OPS[op] k``: the Python store's own function


@njit(cache=True, inline="always")
def _dur_ok(out, outk, o, dur):
    for j in range(out[o, O_ND]):
        if not _cmp(out[o, O_OP0 + j], dur, outk[o, j]):
            return False
    return True


@njit(cache=True, inline="always")
def _atoms_ok(T, F, ev, evn, ei, a, sbase):
    """Whether event ``ei`` passes the static atoms listed from ``a`` (the algebra's rules: a
    number constant needs a number, a string or boolean one a value of its type)."""
    atom, ak = T[ATOM], F[ATOMK]
    while a >= 0:
        s, op, kind = atom[a, A_SLOT], atom[a, A_OP], atom[a, A_KIND]
        t = ev[sbase + 2 * s, ei]
        if kind == NUMBER:
            if t != T_NUMBER or not _cmp(op, evn[s, ei], ak[a, 0]):
                return False
        else:
            if t != (T_STRING if kind == STRING else T_BOOLEAN):
                return False
            if (ev[sbase + 2 * s + 1, ei] == atom[a, A_CONST]) != (op == 0):
                return False
        a = atom[a, A_NEXT]
    return True


@njit(cache=True, inline="always")
def _pend(T, n, first, cur, t0, born, seq):
    meta, p, rec = T[META], T[PEND], T[REC]
    j = meta[0, M_PEND]
    meta[0, M_PEND] = j + 1
    p[j, 0] = n
    p[j, 1] = first
    p[j, 2] = cur
    p[j, 3] = t0
    p[j, 4] = born
    p[j, 5] = seq
    rec[first, 0] += 1
    rec[cur, 0] += 1


@njit(cache=True, inline="always")
def _event(T, F, B, ei, epoch, starting):
    """Event ``ei`` of the :class:`~.flat_layout.Steps` ``B`` through the automaton (see
    :meth:`.pystore.PythonStore._step`); False when the tables lack the room for its
    transitions (``META`` holds what it needs; nothing of the transitions is done)."""
    ev, evn, sout, snode = B.ev, B.evn, B.sout, B.snode
    s0, s1, n0, n1 = B.soff[ei], B.soff[ei + 1], B.noff[ei], B.noff[ei + 1]
    stream, t0, t1, seq = ev[E_STREAM, ei], ev[E_T0, ei], ev[E_T1, ei], ev[E_SEQ, ei]
    meta = T[META]
    if meta[0, M_HEAP] > 0 and F[HEAPT][0, 0] < t1:
        _expire(T, F, t1)
    exact = ev[E_EXACT, ei] != 0  # the caller checked the nodes' static atoms (``snode``)
    sbase = E_SLOTS + T[REC].shape[1] - 1
    mark = meta[0, M_MARK] + 1
    meta[0, M_MARK] = mark
    nok = T[NOK]
    if exact:
        for j in range(n0, n1):
            nok[snode[j], 0] = mark
    # affected instances
    groups, node, bk, inst, aff, ha = T[GROUP], T[NODE], T[BKT], T[INST], T[AFF], T[HA]
    naff = 0
    for g in range(groups.shape[0]):
        if groups[g, G_STREAM] != stream:
            continue
        k0 = k1 = k2 = UNUSED
        s = groups[g, G_A0]
        if s >= 0:
            k0 = ev[E_SLOTS + s, ei]
            if k0 < 0:
                continue
            s = groups[g, G_A0 + 1]
            if s >= 0:
                k1 = ev[E_SLOTS + s, ei]
                if k1 < 0:
                    continue
                s = groups[g, G_A0 + 2]
                if s >= 0:
                    k2 = ev[E_SLOTS + s, ei]
                    if k2 < 0:
                        continue
        j = _hslot(ha, g, k0, k1, k2)
        b = ha[j, 4] if ha[j, 0] != EMPTY else -1
        while b >= 0:
            n = bk[b, B_NODE]
            if node[n, N_STATIC] == 0 or (nok[n, 0] == mark if exact else _atoms_ok(T, F, ev, evn, ei, node[n, N_ATOM],
                                                                                     sbase)):
                i = bk[b, B_HEAD]
                while i >= 0:
                    if inst[i, I_T1] < t0:
                        aff[naff, 0] = i  # AFF has a row per instance row
                        naff += 1
                    i = inst[i, I_NEXT]
            b = bk[b, B_GNEXT]
    # start edges that fire: from the caller for an exact event, else through the index
    out, outk, tgt, fire = T[OUT], F[OUTK], T[TGT], T[FIRE]
    nf = 0
    if starting:
        if exact:
            for j in range(s0, s1):
                fire[nf, 0] = sout[j]
                nf += 1
        else:
            hs, st = T[HS], T[START]
            for ss in range(-1, (ev.shape[0] - sbase) // 2):
                if ss < 0:
                    j = _hslot(hs, stream, SCAN, SCAN, SCAN)
                else:
                    c = ev[sbase + 2 * ss + 1, ei]
                    if c < 0:
                        continue
                    j = _hslot(hs, stream, ss, c, SCAN)
                s = hs[j, 4] if hs[j, 0] != EMPTY else -1
                while s >= 0:
                    if _atoms_ok(T, F, ev, evn, ei, st[s, S_ATOM], sbase):
                        fire[nf, 0] = st[s, S_OUT]
                        nf += 1
                    s = st[s, S_NEXT]
    # the room the transitions need
    ni = nm = 0
    for j in range(naff):
        n = inst[aff[j, 0], I_NODE]
        ni += node[n, N_FOLD]
        o = node[n, N_OUT]
        while o >= 0:
            ni += out[o, O_NT]
            nm += 1
            o = out[o, O_NEXT]
    for j in range(nf):
        ni += out[fire[j, 0], O_NT]
    if not _room(T, F, ni, naff + 1, nm):
        meta[0, M_NI], meta[0, M_NA], meta[0, M_NM] = ni, naff + 1, nm
        return False
    meta[0, M_PEND] = 0
    meta[0, M_NEWR] = 0
    # transitions
    mt = T[MATCH]
    for j in range(naff):
        i = aff[j, 0]
        n = inst[i, I_NODE]
        it0, born, iseq, first, cur = inst[i, I_T0], inst[i, I_BORN], inst[i, I_SEQ], inst[i, I_FIRST], inst[i, I_CUR]
        dur = t1 - it0 + 1
        r = -1
        if node[n, N_FOLD]:
            r = _new_rec(T, cur, ev, ei)
            _pend(T, n, first, r, it0, born, iseq)
        o = node[n, N_OUT]
        while o >= 0:
            if _dur_ok(out, outk, o, dur):
                if r < 0:
                    r = _new_rec(T, cur, ev, ei)
                t = out[o, O_TGT]
                while t >= 0:
                    _pend(T, tgt[t, 0], r, r, it0, born, iseq)
                    t = tgt[t, 1]
                if out[o, O_ACCEPT]:
                    m = meta[0, M_MATCH]
                    meta[0, M_MATCH] = m + 1
                    mt[m, 0] = ei
                    mt[m, 1] = o
                    mt[m, 2] = r
                    mt[m, 3] = it0
                    mt[m, 4] = t1
                    mt[m, 5] = born
            o = out[o, O_NEXT]
        _unlink(T, i)
    # start edges
    er = -1
    for j in range(nf):
        t = out[fire[j, 0], O_TGT]
        while t >= 0:
            if er < 0:
                er = _new_rec(T, -1, ev, ei)
            _pend(T, tgt[t, 0], er, er, t0, epoch, seq)
            t = tgt[t, 1]
    p = T[PEND]
    for j in range(meta[0, M_PEND]):
        first, cur = p[j, 1], p[j, 2]
        _insert(T, F, p[j, 0], first, cur, p[j, 3], t1, p[j, 4], p[j, 5])
        _release(T, first)
        _release(T, cur)
    rec, newr = T[REC], T[NEWR]
    for j in range(meta[0, M_NEWR]):
        r = newr[j, 0]
        if rec[r, 0] == 0:  # only a match (or nothing) holds it
            _free_rec(T, r)
    return True


@njit(cache=True)
def _run(T, F, B, epoch, starting, ei):
    """Events from ``ei`` on; the index of the first one that found no room (or their number)."""
    while ei < B.ev.shape[1]:
        if not _event(T, F, B, ei, epoch, starting):
            return ei
        ei += 1
    return ei


@njit(cache=True)
def _begin(ints):
    meta = ints[META]
    meta[0, M_MATCH] = 0
    meta[0, M_NEWREC] = 0
    meta[0, M_FREEREC] = 0
    meta[0, M_FREEKEY] = 0
    meta[0, M_CALL] += 1
    # what a call can free at most: every record, every key id
    if ints[FREEREC].shape[0] < ints[REC].shape[0] or ints[FREEKEY].shape[0] < ints[KREF].shape[0]:
        ints[FREEREC] = _grow(ints[FREEREC], ints[REC].shape[0])
        ints[FREEKEY] = _grow(ints[FREEKEY], ints[KREF].shape[0])
        meta[0, M_GROWN] += 1


@njit(cache=True, inline="always")
def _end(T):
    """Return the records freed by this call to the free list (it has a row per record)."""
    meta = T[META]
    n = meta[0, M_FREEREC]
    used = meta[0, M_RFREE]
    free, freed = T[RFREE], T[FREEREC]
    for j in range(n):
        free[used + j, 0] = freed[j, 0]
    meta[0, M_RFREE] = used + n


@njit(cache=True)
def step(ints, flts, B, epoch, starting):
    """The events of ``B`` (:class:`~.flat_layout.Steps`) in order."""
    _begin(ints)
    ei = 0
    T, F = _fetch(ints), _fetchf(flts)
    while True:
        ei = _run(T, F, B, epoch, starting, ei)
        if ei == B.ev.shape[1]:
            break
        meta = T[META]
        _reserve(ints, flts, meta[0, M_NI], meta[0, M_NA], meta[0, M_NM])
        T, F = _fetch(ints), _fetchf(flts)
    _end(T)


@njit(cache=True)
def expire(ints, flts, now):
    """Drop the instances that can no longer fire at ``now`` or later."""
    _begin(ints)
    T = _fetch(ints)
    _expire(T, _fetchf(flts), now)
    _end(T)


@njit(cache=True)
def next_expiry(ints, flts):
    """The earliest time after which :func:`expire` has something to do (NaN: none)."""
    T, F = _fetch(ints), _fetchf(flts)
    meta = T[META]
    while meta[0, M_HEAP] > 0:
        i, gen = T[HEAP][0, 0], T[HEAP][0, 1]
        if T[INST][i, I_NODE] >= 0 and T[INST][i, I_GEN] == gen:
            return F[HEAPT][0, 0]
        _heap_pop(T, F)
    return np.nan


@njit(cache=True)
def drop_node(ints, n):
    """Unlink every instance of node ``n``."""
    _begin(ints)
    T = _fetch(ints)
    bk = T[BKT]
    b = T[NODE][n, N_BKT]
    while b >= 0:
        nb = bk[b, B_NNEXT]
        i = bk[b, B_HEAD]
        while i >= 0:
            ni = T[INST][i, I_NEXT]
            _unlink(T, i)
            i = ni
        b = nb
    _end(T)


@njit(cache=True)
def load(ints, flts, rows, keys):
    """Insert instances ``rows`` (node, first slot row, current slot row, t0, t1, born, seq)
    whose records' key ids are the rows of ``keys`` (:func:`reserve` made the room); the
    records made, per row ``(first, current)`` (the same id when the slot rows are)."""
    _begin(ints)
    T, F = _fetch(ints), _fetchf(flts)
    made = np.empty((rows.shape[0], 2), np.int64)
    for j in range(rows.shape[0]):
        for side in range(2):
            kr = rows[j, 1 + side]
            if side == 1 and kr == rows[j, 1]:
                made[j, 1] = made[j, 0]
                break
            r = _alloc(T, REC, RFREE, M_RUSED, M_RFREE)
            rec, kref = T[REC], T[KREF]
            rec[r, 0] = 0
            for s in range(1, rec.shape[1]):
                c = keys[kr, s - 1]
                rec[r, s] = c
                if c >= 0:
                    kref[c, 0] += 1
            made[j, side] = r
        first, cur = made[j, 0], made[j, 1]
        rec = T[REC]
        rec[first, 0] += 1
        rec[cur, 0] += 1
        _insert(T, F, rows[j, 0], first, cur, rows[j, 3], rows[j, 4], rows[j, 5], rows[j, 6])
        _release(T, first)
        _release(T, cur)
    _end(T)
    return made


@njit(cache=True)
def index_start(ints, a, b, c, s):
    """Put start edge ``s`` first in the index list of key ``(a, b, c, SCAN)`` (``FIRE`` keeps
    a row per start edge)."""
    meta = ints[META]
    meta[0, M_GROWN] += 1
    ints[HS] = _rehash(ints[HS], meta[0, M_HSN] + 1)
    ints[FIRE] = _grow(ints[FIRE], ints[START].shape[0])
    hs, st = ints[HS], ints[START]
    j = _hslot(hs, a, b, c, SCAN)
    if hs[j, 0] == EMPTY:
        hs[j, 0], hs[j, 1], hs[j, 2], hs[j, 3], hs[j, 4] = a, b, c, SCAN, -1
        meta[0, M_HSN] += 1
    h = hs[j, 4]
    st[s, S_NEXT] = h
    st[s, S_PREV] = -1
    if h >= 0:
        st[h, S_PREV] = s
    hs[j, 4] = s


@njit(cache=True)
def unindex_start(ints, a, b, c, s):
    """Take start edge ``s`` out of the index list of key ``(a, b, c, SCAN)``."""
    hs, st, meta = ints[HS], ints[START], ints[META]
    nx, pv = st[s, S_NEXT], st[s, S_PREV]
    if nx >= 0:
        st[nx, S_PREV] = pv
    if pv >= 0:
        st[pv, S_NEXT] = nx
        return
    j = _hslot(hs, a, b, c, SCAN)
    if nx >= 0:
        hs[j, 4] = nx
    else:
        _hdel(hs, j)
        meta[0, M_HSN] -= 1

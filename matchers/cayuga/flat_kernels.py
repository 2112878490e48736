"""numba kernels of the flat engine (:mod:`.flat`): instances, records and buckets as rows.

The layout is two typed lists of 2-D arrays, ``ints`` (int64) and ``flts`` (float64),
indexed by the slot constants below; a kernel that needs more rows grows an array and
puts the new one back in its list. Hash lookups go through two typed dicts: ``bd`` from
``(node, k0, k1, k2)`` to a bucket, ``ad`` from ``(group, k0, k1, k2)`` to the first
bucket of the nodes holding instances under those key ids (the active-node index).

Rows:

* instance: node (-1: free), t0, t1, born (epoch), seq (start event), first and current
  record, bucket, next and previous instance of the bucket, generation (heap entries of
  a freed row are stale);
* record: reference count (-1: freed), then one key id per slot (-1: none);
* bucket: node, key ids, first instance, count, links in the active list of its key
  and in its node's list;
* node: group, FOLD flag, static-check flag, the record slots of its key, first forward
  edge, first bucket; forward edge: next edge of the node, first target, accept flag,
  number of ``DUR`` tests and their operators (constants in ``flts[OUTK]``);
  target: node, next; group: stream, event slots of its key.

Every entry point starts by clearing the output lists (matches, new records, freed
records and key ids) and ends by returning the freed records to the free list: a record
id freed by a call is not reused before the caller has read the outputs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ints slots
INST, IFREE, REC, RFREE, BKT, BFREE, HEAP, META, NODE, OUT, TGT, GROUP, KREF = range(13)
MATCH, NEWREC, FREEREC, FREEKEY, AFF, PEND, NEWR, NOK, ATOM = range(13, 22)
N_INTS = 22
# flts slots
HEAPT, NDEAD, OUTK, ATOMK = range(4)

I_NODE, I_T0, I_T1, I_BORN, I_SEQ, I_FIRST, I_CUR, I_BKT, I_NEXT, I_PREV, I_GEN = range(11)
I_COLS = 11
B_NODE, B_K0, B_HEAD, B_COUNT, B_GNEXT, B_GPREV, B_NNEXT, B_NPREV = 0, 1, 4, 5, 6, 7, 8, 9
B_COLS = 10
N_GROUP, N_FOLD, N_STATIC, N_E0, N_OUT, N_BKT, N_ATOM = 0, 1, 2, 3, 6, 7, 8
N_COLS = 9
A_NEXT, A_SLOT, A_OP, A_KIND, A_CONST = range(5)
A_COLS = 5
NUMBER, STRING, BOOLEAN = 0, 1, 2  # atom kinds: a number constant (in ``flts[ATOMK]``), a string or boolean one (an id)
T_NONE, T_NUMBER, T_STRING, T_BOOLEAN, T_OTHER = range(5)  # the type of an event's value
O_NEXT, O_TGT, O_ACCEPT, O_ND, O_OP0 = 0, 1, 2, 3, 4
MAX_DUR_TESTS = 4
O_COLS = O_OP0 + MAX_DUR_TESTS
G_STREAM, G_A0 = 0, 1
G_COLS = 4
MAX_KEY = 3  # equality attributes of a node's key
(M_IUSED, M_IFREE, M_RUSED, M_RFREE, M_BUSED, M_BFREE, M_HEAP, M_LIVE, M_MATCH, M_NEWREC, M_FREEREC,
 M_FREEKEY, M_AFF, M_PEND, M_NEWR, M_MARK) = range(16)
M_COLS = 16
E_STREAM, E_T0, E_T1, E_SEQ, E_EXACT, E_SLOTS = range(6)  # then per static slot: value type, constant id
ABSENT = -3  # event slot code: the event has no such attribute (a combined record keeps the instance's)
NO_KEY = -1  # no key id: missing, None or NaN (an equality with it cannot hold)
UNUSED = -2  # key part of a node with fewer than MAX_KEY equalities
OPS = ("=", "!=", "<", "<=", ">", ">=")
MATCH_COLS = 6  # event index, forward edge, record, t0, t1, born
NEWREC_COLS = 3  # record, parent record (-1: the event's own), event index


@njit(cache=True)
def _grow(a, n):
    """``a`` with at least ``n`` rows (the same array when it has them)."""
    rows = a.shape[0]
    if n <= rows:
        return a
    b = np.empty((max(n, 2 * rows, 16), a.shape[1]), a.dtype)
    b[:rows] = a
    return b


@njit(cache=True)
def _get(d, key):
    """``d[key]``, -1 when absent."""
    if key in d:
        return d[key]
    return -1


@njit(cache=True)
def _append(ints, slot, col, n_cols):
    """Index of a new row at the end of output list ``slot`` (its count in META column ``col``)."""
    meta = ints[META]
    n = meta[0, col]
    if n == ints[slot].shape[0]:
        ints[slot] = _grow(ints[slot], n + 1)
    meta[0, col] = n + 1
    return n


@njit(cache=True)
def _alloc(ints, table, free, used_col, free_col):
    """A free row of ``table`` (its free stack ``free``), grown when none is left."""
    meta = ints[META]
    nf = meta[0, free_col]
    if nf > 0:
        meta[0, free_col] = nf - 1
        return ints[free][nf - 1, 0]
    used = meta[0, used_col]
    if used == ints[table].shape[0]:
        ints[table] = _grow(ints[table], used + 1)
        ints[free] = _grow(ints[free], used + 1)
    meta[0, used_col] = used + 1
    return used


@njit(cache=True)
def _release_key(ints, k):
    kref = ints[KREF]
    kref[k, 0] -= 1
    if kref[k, 0] == 0:
        j = _append(ints, FREEKEY, M_FREEKEY, 1)
        ints[FREEKEY][j, 0] = k


@njit(cache=True)
def _free_rec(ints, r):
    rec = ints[REC]
    rec[r, 0] = -1
    for s in range(1, rec.shape[1]):
        if rec[r, s] >= 0:
            _release_key(ints, rec[r, s])
    j = _append(ints, FREEREC, M_FREEREC, 1)
    ints[FREEREC][j, 0] = r


@njit(cache=True)
def _release(ints, r):
    rec = ints[REC]
    rec[r, 0] -= 1
    if rec[r, 0] == 0:
        _free_rec(ints, r)


@njit(cache=True)
def _new_rec(ints, parent, ev, ei):
    """A record of event ``ei`` (merged over record ``parent`` when >= 0): its key ids per slot."""
    r = _alloc(ints, REC, RFREE, M_RUSED, M_RFREE)
    rec = ints[REC]
    kref = ints[KREF]
    rec[r, 0] = 0
    for s in range(1, rec.shape[1]):
        c = ev[ei, E_SLOTS + s - 1]
        if c == ABSENT:
            c = rec[parent, s] if parent >= 0 else NO_KEY
        rec[r, s] = c
        if c >= 0:
            kref[c, 0] += 1
    j = _append(ints, NEWREC, M_NEWREC, NEWREC_COLS)
    out = ints[NEWREC]
    out[j, 0] = r
    out[j, 1] = parent
    out[j, 2] = ei
    j = _append(ints, NEWR, M_NEWR, 1)
    ints[NEWR][j, 0] = r
    return r


@njit(cache=True)
def _heap_push(ints, flts, t, i, gen):
    meta = ints[META]
    n = meta[0, M_HEAP]
    if n == ints[HEAP].shape[0]:
        ints[HEAP] = _grow(ints[HEAP], n + 1)
        flts[HEAPT] = _grow(flts[HEAPT], n + 1)
    heap, ht = ints[HEAP], flts[HEAPT]
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


@njit(cache=True)
def _heap_pop(ints, flts):
    """Remove the top entry (the caller read it)."""
    meta = ints[META]
    heap, ht = ints[HEAP], flts[HEAPT]
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


@njit(cache=True)
def _free_bucket(ints, bd, ad, b):
    bk, node = ints[BKT], ints[NODE]
    n = bk[b, B_NODE]
    k0, k1, k2 = bk[b, B_K0], bk[b, B_K0 + 1], bk[b, B_K0 + 2]
    gn, gp = bk[b, B_GNEXT], bk[b, B_GPREV]
    if gp >= 0:
        bk[gp, B_GNEXT] = gn
    else:
        akey = (node[n, N_GROUP], k0, k1, k2)
        if gn >= 0:
            ad[akey] = gn
        else:
            del ad[akey]
    if gn >= 0:
        bk[gn, B_GPREV] = gp
    nn, np_ = bk[b, B_NNEXT], bk[b, B_NPREV]
    if np_ >= 0:
        bk[np_, B_NNEXT] = nn
    else:
        node[n, N_BKT] = nn
    if nn >= 0:
        bk[nn, B_NPREV] = np_
    del bd[(n, k0, k1, k2)]
    meta = ints[META]
    ints[BFREE][meta[0, M_BFREE], 0] = b
    meta[0, M_BFREE] += 1


@njit(cache=True)
def _unlink(ints, bd, ad, i):
    inst, bk = ints[INST], ints[BKT]
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
        _free_bucket(ints, bd, ad, b)
    inst[i, I_NODE] = -1
    inst[i, I_GEN] += 1
    meta = ints[META]
    ints[IFREE][meta[0, M_IFREE], 0] = i
    meta[0, M_IFREE] += 1
    meta[0, M_LIVE] -= 1
    _release(ints, inst[i, I_FIRST])
    _release(ints, inst[i, I_CUR])


@njit(cache=True)
def _insert(ints, flts, bd, ad, n, first, cur, t0, t1, born, seq):
    """Insert an instance of node ``n`` (nothing when a key attribute of ``cur`` has no id:
    the equality could never hold)."""
    node, rec = ints[NODE], ints[REC]
    k = [UNUSED, UNUSED, UNUSED]
    for a in range(MAX_KEY):
        s = node[n, N_E0 + a]
        if s < 0:
            break
        kk = rec[cur, 1 + s]
        if kk < 0:
            return
        k[a] = kk
    key = (n, k[0], k[1], k[2])
    b = _get(bd, key)
    if b < 0:
        b = _alloc(ints, BKT, BFREE, M_BUSED, M_BFREE)
        bk = ints[BKT]
        bk[b, B_NODE] = n
        bk[b, B_K0] = k[0]
        bk[b, B_K0 + 1] = k[1]
        bk[b, B_K0 + 2] = k[2]
        bk[b, B_HEAD] = -1
        bk[b, B_COUNT] = 0
        akey = (node[n, N_GROUP], k[0], k[1], k[2])
        h = _get(ad, akey)
        bk[b, B_GNEXT] = h
        bk[b, B_GPREV] = -1
        if h >= 0:
            bk[h, B_GPREV] = b
        ad[akey] = b
        h = node[n, N_BKT]
        bk[b, B_NNEXT] = h
        bk[b, B_NPREV] = -1
        if h >= 0:
            bk[h, B_NPREV] = b
        node[n, N_BKT] = b
        bd[key] = b
    i = _alloc(ints, INST, IFREE, M_IUSED, M_IFREE)
    inst, bk, rec = ints[INST], ints[BKT], ints[REC]
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
    ints[META][0, M_LIVE] += 1
    d = flts[NDEAD][n, 0]
    if d == d and d < np.inf:
        _heap_push(ints, flts, t0 + d - 1, i, inst[i, I_GEN])


@njit(cache=True)
def _expire(ints, flts, bd, ad, now):
    """Drop the instances whose last possible firing time is before ``now``."""
    meta = ints[META]
    while meta[0, M_HEAP] > 0 and flts[HEAPT][0, 0] < now:
        i, gen = ints[HEAP][0, 0], ints[HEAP][0, 1]
        _heap_pop(ints, flts)
        inst = ints[INST]
        n = inst[i, I_NODE]
        if n < 0 or inst[i, I_GEN] != gen:
            continue
        d = flts[NDEAD][n, 0]  # may have changed with the subscriptions since
        if not (d == d and d < np.inf):
            continue
        last = inst[i, I_T0] + d - 1
        if last < now:
            _unlink(ints, bd, ad, i)
        else:
            _heap_push(ints, flts, last, i, gen)


@njit(cache=True)
def _cmp(op, x, k):
    """``x OPS[op] k``."""
    if op == 0:
        return x == k
    if op == 1:
        return x != k
    if op == 2:
        return x < k
    if op == 3:
        return x <= k
    if op == 4:
        return x > k
    return x >= k


@njit(cache=True)
def _dur_ok(out, outk, o, dur):
    for j in range(out[o, O_ND]):
        if not _cmp(out[o, O_OP0 + j], dur, outk[o, j]):
            return False
    return True


@njit(cache=True)
def _static_ok(ints, flts, ev, evn, ei, n, sbase):
    """Whether event ``ei`` passes the static atoms of node ``n`` (the algebra's rules: a
    number constant needs a number, a string or boolean one a value of its type)."""
    atom, ak = ints[ATOM], flts[ATOMK]
    a = ints[NODE][n, N_ATOM]
    while a >= 0:
        s, op, kind = atom[a, A_SLOT], atom[a, A_OP], atom[a, A_KIND]
        t = ev[ei, sbase + 2 * s]
        if kind == NUMBER:
            if t != T_NUMBER or not _cmp(op, evn[ei, s], ak[a, 0]):
                return False
        else:
            if t != (T_STRING if kind == STRING else T_BOOLEAN):
                return False
            if (ev[ei, sbase + 2 * s + 1] == atom[a, A_CONST]) != (op == 0):
                return False
        a = atom[a, A_NEXT]
    return True


@njit(cache=True)
def _pend(ints, n, first, cur, t0, born, seq):
    j = _append(ints, PEND, M_PEND, 6)
    p = ints[PEND]
    p[j, 0] = n
    p[j, 1] = first
    p[j, 2] = cur
    p[j, 3] = t0
    p[j, 4] = born
    p[j, 5] = seq
    rec = ints[REC]
    rec[first, 0] += 1
    rec[cur, 0] += 1


@njit(cache=True)
def _event(ints, flts, bd, ad, ev, evn, ei, sout, s0, s1, snode, n0, n1, epoch, starting):
    """One event through the automaton (see :meth:`.engine.Engine._step`)."""
    stream, t0, t1, seq = ev[ei, E_STREAM], ev[ei, E_T0], ev[ei, E_T1], ev[ei, E_SEQ]
    meta = ints[META]
    if meta[0, M_HEAP] > 0 and flts[HEAPT][0, 0] < t1:
        _expire(ints, flts, bd, ad, t1)
    exact = ev[ei, E_EXACT] != 0  # the caller checked the nodes' static atoms (``snode``)
    sbase = E_SLOTS + ints[REC].shape[1] - 1
    mark = meta[0, M_MARK] + 1
    meta[0, M_MARK] = mark
    nok = ints[NOK]
    for j in range(n0, n1):
        nok[snode[j], 0] = mark
    meta[0, M_AFF] = 0
    meta[0, M_PEND] = 0
    meta[0, M_NEWR] = 0
    # affected instances
    groups, node, bk, inst = ints[GROUP], ints[NODE], ints[BKT], ints[INST]
    for g in range(groups.shape[0]):
        if groups[g, G_STREAM] != stream:
            continue
        k = [UNUSED, UNUSED, UNUSED]
        ok = True
        for a in range(MAX_KEY):
            s = groups[g, G_A0 + a]
            if s < 0:
                break
            c = ev[ei, E_SLOTS + s]
            if c < 0:
                ok = False
                break
            k[a] = c
        if not ok:
            continue
        b = _get(ad, (g, k[0], k[1], k[2]))
        while b >= 0:
            n = bk[b, B_NODE]
            if node[n, N_STATIC] == 0 or (nok[n, 0] == mark if exact else _static_ok(ints, flts, ev, evn, ei, n, sbase)):
                i = bk[b, B_HEAD]
                while i >= 0:
                    if inst[i, I_T1] < t0:
                        j = _append(ints, AFF, M_AFF, 1)
                        ints[AFF][j, 0] = i
                    i = inst[i, I_NEXT]
            b = bk[b, B_GNEXT]
    # transitions
    out, outk, tgt = ints[OUT], flts[OUTK], ints[TGT]
    for j in range(meta[0, M_AFF]):
        i = ints[AFF][j, 0]
        inst = ints[INST]
        n = inst[i, I_NODE]
        it0, born, iseq, first, cur = inst[i, I_T0], inst[i, I_BORN], inst[i, I_SEQ], inst[i, I_FIRST], inst[i, I_CUR]
        dur = t1 - it0 + 1
        r = -1
        if node[n, N_FOLD]:
            r = _new_rec(ints, cur, ev, ei)
            _pend(ints, n, first, r, it0, born, iseq)
        o = node[n, N_OUT]
        while o >= 0:
            if _dur_ok(out, outk, o, dur):
                if r < 0:
                    r = _new_rec(ints, cur, ev, ei)
                t = out[o, O_TGT]
                while t >= 0:
                    _pend(ints, tgt[t, 0], r, r, it0, born, iseq)
                    t = tgt[t, 1]
                if out[o, O_ACCEPT]:
                    m = _append(ints, MATCH, M_MATCH, MATCH_COLS)
                    mt = ints[MATCH]
                    mt[m, 0] = ei
                    mt[m, 1] = o
                    mt[m, 2] = r
                    mt[m, 3] = it0
                    mt[m, 4] = t1
                    mt[m, 5] = born
            o = out[o, O_NEXT]
        _unlink(ints, bd, ad, i)
    # start edges
    if starting:
        er = -1
        for j in range(s0, s1):
            t = out[sout[j], O_TGT]
            while t >= 0:
                if er < 0:
                    er = _new_rec(ints, -1, ev, ei)
                _pend(ints, tgt[t, 0], er, er, t0, epoch, seq)
                t = tgt[t, 1]
    for j in range(meta[0, M_PEND]):
        p = ints[PEND]
        n, first, cur = p[j, 0], p[j, 1], p[j, 2]
        _insert(ints, flts, bd, ad, n, first, cur, p[j, 3], t1, p[j, 4], p[j, 5])
        _release(ints, first)
        _release(ints, cur)
    rec = ints[REC]
    for j in range(meta[0, M_NEWR]):
        r = ints[NEWR][j, 0]
        if rec[r, 0] == 0:  # only a match (or nothing) holds it
            _free_rec(ints, r)


@njit(cache=True)
def _begin(ints):
    meta = ints[META]
    meta[0, M_MATCH] = 0
    meta[0, M_NEWREC] = 0
    meta[0, M_FREEREC] = 0
    meta[0, M_FREEKEY] = 0


@njit(cache=True)
def _end(ints):
    """Return the records freed by this call to the free list."""
    meta = ints[META]
    n = meta[0, M_FREEREC]
    used = meta[0, M_RFREE]
    if used + n > ints[RFREE].shape[0]:
        ints[RFREE] = _grow(ints[RFREE], used + n)
    free, freed = ints[RFREE], ints[FREEREC]
    for j in range(n):
        free[used + j, 0] = freed[j, 0]
    meta[0, M_RFREE] = used + n


@njit(cache=True)
def step(ints, flts, bd, ad, ev, evn, sout, soff, snode, noff, epoch, starting):
    """Events ``ev`` in order (rows: stream, t0, t1, seq, exact flag, a key code per slot, a
    value type and constant id per static slot; ``evn``: the static slots' values as numbers);
    ``sout[soff[i]:soff[i+1]]`` are the forward edges of the start edges event ``i`` fires;
    for an event with the exact flag, ``snode[noff[i]:noff[i+1]]`` are the nodes whose static
    atoms it passes (checked by the caller: an integer too large for a float)."""
    _begin(ints)
    for ei in range(ev.shape[0]):
        _event(ints, flts, bd, ad, ev, evn, ei, sout, soff[ei], soff[ei + 1], snode, noff[ei], noff[ei + 1], epoch,
               starting)
    _end(ints)


@njit(cache=True)
def expire(ints, flts, bd, ad, now):
    """Drop the instances that can no longer fire at ``now`` or later."""
    _begin(ints)
    _expire(ints, flts, bd, ad, now)
    _end(ints)


@njit(cache=True)
def next_expiry(ints, flts):
    """The earliest time after which :func:`expire` has something to do (NaN: none)."""
    meta = ints[META]
    while meta[0, M_HEAP] > 0:
        i, gen = ints[HEAP][0, 0], ints[HEAP][0, 1]
        if ints[INST][i, I_NODE] >= 0 and ints[INST][i, I_GEN] == gen:
            return flts[HEAPT][0, 0]
        _heap_pop(ints, flts)
    return np.nan


@njit(cache=True)
def drop_node(ints, bd, ad, n):
    """Unlink every instance of node ``n``."""
    _begin(ints)
    bk = ints[BKT]
    b = ints[NODE][n, N_BKT]
    while b >= 0:
        nb = bk[b, B_NNEXT]
        i = bk[b, B_HEAD]
        while i >= 0:
            ni = ints[INST][i, I_NEXT]
            _unlink(ints, bd, ad, i)
            i = ni
        b = nb
    _end(ints)


@njit(cache=True)
def load(ints, flts, bd, ad, rows, keys):
    """Insert instances ``rows`` (node, first slot row, current slot row, t0, t1, born, seq)
    whose records' key ids are the rows of ``keys``; the records made, per row ``(first,
    current)`` (the same id when the rows are equal)."""
    _begin(ints)
    made = np.empty((rows.shape[0], 2), np.int64)
    for j in range(rows.shape[0]):
        recs = [-1, -1]
        for side in range(2):
            kr = rows[j, 1 + side]
            if side == 1 and kr == rows[j, 1]:
                recs[1] = recs[0]
                break
            r = _alloc(ints, REC, RFREE, M_RUSED, M_RFREE)
            rec, kref = ints[REC], ints[KREF]
            rec[r, 0] = 0
            for s in range(1, rec.shape[1]):
                c = keys[kr, s - 1]
                rec[r, s] = c
                if c >= 0:
                    kref[c, 0] += 1
            recs[side] = r
        first, cur = recs[0], recs[1]
        made[j, 0] = first
        made[j, 1] = cur
        rec = ints[REC]
        rec[first, 0] += 1
        rec[cur, 0] += 1
        _insert(ints, flts, bd, ad, rows[j, 0], first, cur, rows[j, 3], rows[j, 4], rows[j, 5], rows[j, 6])
        _release(ints, first)
        _release(ints, cur)
    _end(ints)
    return made

"""numba kernels of the flat store (:mod:`.flat`): the step over an event batch and the
other entry points, on the layout of :mod:`.flat_layout` and the tables of :mod:`.flat_tables`.

An entry point reads the arrays once into tuples ``T`` and ``F`` and the step never grows
an array: before an event's transitions it bounds what they can create; when a table
lacks the room, the step stops before that event, the entry point grows the tables
(:func:`~.flat_tables.grow_for`) and runs the event again (what the event did before
stopping, expiry and collecting its affected instances, is done or pure).

Every entry point clears the output lists (matches, new records, freed records and key
ids) and ends by returning the freed records to the free list: a record id freed by a
call is not reused before the caller has read the outputs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import rules
from .flat_layout import (
    A_CONST,
    A_KIND,
    A_NEXT,
    A_OP,
    A_SLOT,
    AFF,
    ATOM,
    ATOMK,
    B_GNEXT,
    B_HEAD,
    B_NNEXT,
    B_NODE,
    BKT,
    E_EXACT,
    E_SEQ,
    E_SLOTS,
    E_STREAM,
    E_T0,
    E_T1,
    EMPTY,
    FIRE,
    FREEKEY,
    FREEREC,
    G_A0,
    G_STREAM,
    GROUP,
    HA,
    HEAP,
    HEAPT,
    HS,
    I_BORN,
    I_CUR,
    I_FIRST,
    I_GEN,
    I_NEXT,
    I_NODE,
    I_SEQ,
    I_T0,
    I_T1,
    INST,
    KREF,
    M_CALL,
    M_FREEKEY,
    M_FREEREC,
    M_GROWN,
    M_HEAP,
    M_HSN,
    M_MARK,
    M_MATCH,
    M_NA,
    M_NEWR,
    M_NEWREC,
    M_NI,
    M_NM,
    M_PEND,
    M_RFREE,
    M_RUSED,
    MATCH,
    META,
    N_ATOM,
    N_BKT,
    N_FOLD,
    N_OUT,
    N_STATIC,
    NEWR,
    NODE,
    NOK,
    NUMBER,
    O_ACCEPT,
    O_ND,
    O_NEXT,
    O_NT,
    O_OP0,
    O_TGT,
    OUT,
    OUTK,
    PEND,
    REC,
    RFREE,
    S_ATOM,
    S_NEXT,
    S_OUT,
    S_PREV,
    SCAN,
    START,
    STRING,
    T_BOOLEAN,
    T_NUMBER,
    T_STRING,
    TGT,
    UNUSED,
)
from .flat_tables import (
    alloc,
    drop_expired,
    fetch,
    fetchf,
    free_rec,
    grow,
    grow_for,
    hdel,
    heap_pop,
    hslot,
    insert,
    new_rec,
    rehash,
    release,
    room,
    unlink,
)

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
        drop_expired(T, F, t1)
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
        j = hslot(ha, g, k0, k1, k2)
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
                    j = hslot(hs, stream, SCAN, SCAN, SCAN)
                else:
                    c = ev[sbase + 2 * ss + 1, ei]
                    if c < 0:
                        continue
                    j = hslot(hs, stream, ss, c, SCAN)
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
    if not room(T, F, ni, naff + 1, nm):
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
            r = new_rec(T, cur, ev, ei)
            _pend(T, n, first, r, it0, born, iseq)
        o = node[n, N_OUT]
        while o >= 0:
            if _dur_ok(out, outk, o, dur):
                if r < 0:
                    r = new_rec(T, cur, ev, ei)
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
        unlink(T, i)
    # start edges
    er = -1
    for j in range(nf):
        t = out[fire[j, 0], O_TGT]
        while t >= 0:
            if er < 0:
                er = new_rec(T, -1, ev, ei)
            _pend(T, tgt[t, 0], er, er, t0, epoch, seq)
            t = tgt[t, 1]
    p = T[PEND]
    for j in range(meta[0, M_PEND]):
        first, cur = p[j, 1], p[j, 2]
        insert(T, F, p[j, 0], first, cur, p[j, 3], t1, p[j, 4], p[j, 5])
        release(T, first)
        release(T, cur)
    rec, newr = T[REC], T[NEWR]
    for j in range(meta[0, M_NEWR]):
        r = newr[j, 0]
        if rec[r, 0] == 0:  # only a match (or nothing) holds it
            free_rec(T, r)
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
        ints[FREEREC] = grow(ints[FREEREC], ints[REC].shape[0])
        ints[FREEKEY] = grow(ints[FREEKEY], ints[KREF].shape[0])
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
    T, F = fetch(ints), fetchf(flts)
    while True:
        ei = _run(T, F, B, epoch, starting, ei)
        if ei == B.ev.shape[1]:
            break
        meta = T[META]
        grow_for(ints, flts, meta[0, M_NI], meta[0, M_NA], meta[0, M_NM])
        T, F = fetch(ints), fetchf(flts)
    _end(T)


@njit(cache=True)
def reserve(ints, flts, ni, na):
    """Room for ``ni`` instances and ``na`` records (before :func:`load`)."""
    grow_for(ints, flts, ni, na, 0)


@njit(cache=True)
def expire(ints, flts, now):
    """Drop the instances that can no longer fire at ``now`` or later."""
    _begin(ints)
    T = fetch(ints)
    drop_expired(T, fetchf(flts), now)
    _end(T)


@njit(cache=True)
def next_expiry(ints, flts):
    """The earliest time after which :func:`expire` has something to do (NaN: none)."""
    T, F = fetch(ints), fetchf(flts)
    meta = T[META]
    while meta[0, M_HEAP] > 0:
        i, gen = T[HEAP][0, 0], T[HEAP][0, 1]
        if T[INST][i, I_NODE] >= 0 and T[INST][i, I_GEN] == gen:
            return F[HEAPT][0, 0]
        heap_pop(T, F)
    return np.nan


@njit(cache=True)
def drop_node(ints, n):
    """Unlink every instance of node ``n``."""
    _begin(ints)
    T = fetch(ints)
    bk = T[BKT]
    b = T[NODE][n, N_BKT]
    while b >= 0:
        nb = bk[b, B_NNEXT]
        i = bk[b, B_HEAD]
        while i >= 0:
            ni = T[INST][i, I_NEXT]
            unlink(T, i)
            i = ni
        b = nb
    _end(T)


@njit(cache=True)
def load(ints, flts, rows, keys):
    """Insert instances ``rows`` (node, first slot row, current slot row, t0, t1, born, seq)
    whose records' key ids are the rows of ``keys`` (:func:`reserve` made the room); the
    records made, per row ``(first, current)`` (the same id when the slot rows are)."""
    _begin(ints)
    T, F = fetch(ints), fetchf(flts)
    made = np.empty((rows.shape[0], 2), np.int64)
    for j in range(rows.shape[0]):
        for side in range(2):
            kr = rows[j, 1 + side]
            if side == 1 and kr == rows[j, 1]:
                made[j, 1] = made[j, 0]
                break
            r = alloc(T, REC, RFREE, M_RUSED, M_RFREE)
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
        insert(T, F, rows[j, 0], first, cur, rows[j, 3], rows[j, 4], rows[j, 5], rows[j, 6])
        release(T, first)
        release(T, cur)
    _end(T)
    return made


@njit(cache=True)
def index_start(ints, a, b, c, s):
    """Put start edge ``s`` first in the index list of key ``(a, b, c, SCAN)`` (``FIRE`` keeps
    a row per start edge)."""
    meta = ints[META]
    meta[0, M_GROWN] += 1
    ints[HS] = rehash(ints[HS], meta[0, M_HSN] + 1)
    ints[FIRE] = grow(ints[FIRE], ints[START].shape[0])
    hs, st = ints[HS], ints[START]
    j = hslot(hs, a, b, c, SCAN)
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
    j = hslot(hs, a, b, c, SCAN)
    if nx >= 0:
        hs[j, 4] = nx
    else:
        hdel(hs, j)
        meta[0, M_HSN] -= 1

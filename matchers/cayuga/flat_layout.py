"""The flat store's layout (:mod:`.flat_tables`, :mod:`.flat_kernels`) and the event batch
its kernels take. Numpy only.

The layout is two typed lists of 2-D arrays, ``ints`` (int64) and ``flts`` (float64),
indexed by the slot constants below. Rows:

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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

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


class Steps(NamedTuple):
    """Events in order, one per column of ``ev`` and of ``evn``.

    ``sout[soff[i]:soff[i+1]]`` are the forward edges of the start edges event ``i`` fires;
    for an event with the exact flag, ``snode[noff[i]:noff[i+1]]`` are the nodes whose static
    atoms it passes (checked by the caller: an integer too large for a float).
    """

    ev: np.ndarray  # int64[rows, events]: stream, t0, t1, seq, exact flag, a key code per slot,
    #                 a value type and constant id per static slot
    evn: np.ndarray  # float64[static slots, events]: the static slots' values as numbers
    sout: np.ndarray  # int64
    soff: np.ndarray  # int64[events + 1]
    snode: np.ndarray  # int64
    noff: np.ndarray  # int64[events + 1]

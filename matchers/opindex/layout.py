"""Array layout of the OpIndex: operator families, dtypes and the item encoding.

Level 1 partitions entries (DNF conjunctions, or CNF subscriptions) by pivot
attribute; level 2 splits each pivot's predicates into *families*, one sorted
predicate list per family, each cut into ``b`` segments (buckets) by attribute with a
``w``-bit signature per segment (Section 4.2 of Zhang, Chan, Tan, VLDB 2014).

Every predicate becomes one or more *items* ``(family, typed attribute, value,
weight)``; the weights are chosen so that the items of one predicate add up to 1 when
it holds and to 0 when it does not (negations are ``presence - positive``), which
lets DNF counters and CNF clause tests share one exact accumulation:

=============  ==========================================================
family         an item ``(ta, o)`` fires for an event value ``v`` of type ta
=============  ==========================================================
``F_EQ``       ``v == o`` (numbers, booleans as 1/0, strings by code)
``F_LE``       ``v <= o`` (``<`` is ``<=`` the next float below)
``F_GE``       ``v >= o`` (``>`` is ``>=`` the next float above)
``F_PRES``     always (the attribute is present with this type)
``F_STR``      string predicate ``o`` (an id of :mod:`.strings`) holds on ``v``
=============  ==========================================================

``ta = attribute * 3 + kind`` (the typed attribute) makes a value of another type
than the operand's fire nothing, as the semantics require.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from matchers.events import STR, EventBatch

F_EQ, F_LE, F_GE, F_PRES, F_STR = 0, 1, 2, 3, 4
N_FAMILIES = 5
FAMILY_NAMES = ("eq", "le", "ge", "presence", "string")
VALUE_SIGNED = (True, False, False, False, True)
"""Families whose signature bit hashes the operand too (equality-like), per Section 4.2."""

N_KINDS = 3

TA_DTYPE = np.int32
VAL_DTYPE = np.float64
SLOT_DTYPE = np.int32
WEIGHT_DTYPE = np.int8
BUCKET_DTYPE = np.int64

DEFAULT_SEGMENTS = 32
"""``b``: segments per predicate list (the paper's default)."""
DEFAULT_SIGNATURE_BITS = 64
"""``w``: bits per segment signature (the paper's default; at most 64)."""


def typed_attr(attr: int, kind: int) -> int:
    """The typed attribute ``attr * 3 + kind`` used as the first sort key."""
    return attr * N_KINDS + kind


def event_values(batch: EventBatch) -> np.ndarray:
    """The value of each entry of a batch as the kernels compare it: the number, or a
    string's dictionary code."""
    values = batch.nums.astype(VAL_DTYPE, copy=True)
    is_str = batch.kinds == STR
    values[is_str] = batch.codes[is_str]
    return values


class Events(NamedTuple):
    """A batch as the matching kernels read it: values in CSR by event, sorted by attribute."""

    off: np.ndarray  # int64[n_events + 1]: the values of event i are off[i]:off[i + 1]
    attr: np.ndarray  # int32[n_values]: attribute id of each value
    kind: np.ndarray  # int8[n_values]: kind of each value (matchers.events NUM, STR, BOOL)
    val: np.ndarray  # float64[n_values]: the number, 1/0 for booleans, a string's dictionary code
    soff: np.ndarray  # int64[n_values + 1]: string predicates holding on value j are spid[soff[j]:soff[j + 1]]
    spid: np.ndarray  # int32: ids of satisfied string predicates (matchers.strings)


def events(batch: EventBatch, soff: np.ndarray, spid: np.ndarray) -> Events:
    """The kernels' view of ``batch`` with its satisfied string predicates."""
    return Events(batch.offsets, batch.attrs, batch.kinds, event_values(batch), soff, spid)


class EntryStore(NamedTuple):
    """The entry store of ``opindex``: a block of entry records per pivot slot, each entry's
    items in clause order (see :mod:`matchers.opindex.store_kernels`)."""

    hdr: np.ndarray  # int64[slots * HS] on 64-byte lines: per pivot slot, group starts, end, capacity
    r_key: np.ndarray  # float64[pool]: each record's sort key (its pivot predicate's operand), sorted per group
    r_x: np.ndarray  # int64[pool]: key << 2 | kind + 1 (single-predicate entry) or record_word(sig, second)
    r_y: np.ndarray  # int64[pool]: each record's entry
    used: np.ndarray  # int64[1]: used length of the record pools (holes included)
    e_item: np.ndarray  # int64[entries]: first item of each entry (index into the items' pairs)
    e_key: np.ndarray  # int32[entries]: subscription key of each entry
    q_meta: np.ndarray  # int64[2 * items]: item i at 2i is item_meta, at 2i + 1 the operand's bits
    q_val: np.ndarray  # float64 view of q_meta (the operand of item i at 2i + 1)


class Lists(NamedTuple):
    """The paper's level 2 (``opindex-paper``): per (pivot slot, family) a predicate list
    sorted by (typed attribute, value), cut into ``b`` segments, in one item pool."""

    list_of: np.ndarray  # int64[slots * N_FAMILIES]: list of (slot, family), -1: none
    start: np.ndarray  # int64[lists]: first pool position of each list
    length: np.ndarray  # int64[lists]: items in each list (length <= cap)
    cap: np.ndarray  # int64[lists]: pool positions reserved for each list
    sig: np.ndarray  # uint64[lists]: list signature, the union of its segments'
    family: np.ndarray  # int8[lists]: operator family of each list
    seg_off: np.ndarray  # int32[lists * (b + 1)]: segment s of list k is start[k] + seg_off[k(b+1) + s : +1]
    seg_sig: np.ndarray  # uint64[lists * b]: w-bit signature of each segment
    ta: np.ndarray  # int32[pool]: typed attribute of each item
    val: np.ndarray  # float64[pool]: operand of each item
    slot: np.ndarray  # int32[pool]: clause slot each item counts for
    weight: np.ndarray  # int8[pool]: +1 or -1
    used: np.ndarray  # int64[1]: used length of the pool (holes included)


class Pool(NamedTuple):
    """The item pool of :class:`Lists`, as the list searches read it."""

    ta: np.ndarray  # int32[pool]
    val: np.ndarray  # float64[pool]
    slot: np.ndarray  # int32[pool]
    weight: np.ndarray  # int8[pool]


class Slots(NamedTuple):
    """Counters of ``opindex-paper``: a slot per clause, stamped with the event's epoch."""

    meta: np.ndarray  # int64[slots]: entry << 16 | need (DNF: the conjunction's size, CNF: 1)
    word: np.ndarray  # int64[slots]: epoch << 16 | count + BIAS
    e_nslots: np.ndarray  # int32[entries]: clause slots of each entry
    e_word: np.ndarray  # int64[entries]: epoch << 16 | slots still to hold
    e_key: np.ndarray  # int32[entries]: subscription key of each entry


class Items(NamedTuple):
    """Items to insert into (or delete from) the lists, one row each, sorted for an insert."""

    lst: np.ndarray  # int64: the list of each item
    seg: np.ndarray  # int64: its segment in that list
    ta: np.ndarray  # int32: typed attribute
    val: np.ndarray  # float64: operand
    slot: np.ndarray  # int32: clause slot
    weight: np.ndarray  # int8: +1 or -1
    bit: np.ndarray  # int64: its bit in a segment signature


class Search(NamedTuple):
    """How ``opindex-paper`` searches its lists (fixed at construction)."""

    n_families: int  # lists per pivot slot (N_FAMILIES)
    segments: int  # b, segments per list
    width: int  # w, bits per segment signature (0: none)
    sweep_factor: float  # a list of at most this many items per event value is walked once


class Scratch(NamedTuple):
    """Per-batch scratch arrays of the ``opindex-paper`` kernel."""

    ev_pos: np.ndarray  # int32[typed attributes]: position of the event's value, -1 when absent
    touched: np.ndarray  # int32[clause slots]: slots counted for the current event
    touched_e: np.ndarray  # int32[entries]: entries reached by the current event


class Postings(NamedTuple):
    """The k-index's posting lists (``kindex``): per token, its (conjunction, ∈/∉) postings,
    sorted by conjunction size."""

    off: np.ndarray  # int64[tokens + 1]: the postings of token t are off[t]:off[t + 1]
    entry: np.ndarray  # int32[postings]: the conjunction of each posting
    is_in: np.ndarray  # bool[postings]: ∈ (True) or ∉ (False)
    size: np.ndarray  # int32[postings]: the size (distinct attributes) of its conjunction


class KEntries(NamedTuple):
    """The k-index's conjunctions and their per-event counters."""

    need: np.ndarray  # int32[entries]: ∈ postings to hit (its predicates)
    key: np.ndarray  # int32[entries]: subscription key
    acc: np.ndarray  # int32[entries]: ∈ postings hit by the current event
    stamp: np.ndarray  # int64[entries]: epoch of the last event that reached it
    bad: np.ndarray  # bool[entries]: a ∉ posting was hit by the current event

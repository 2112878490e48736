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

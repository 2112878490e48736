"""Array layout the counting kernel takes (built from the matcher's columns at each call), and
which predicates a conjunction checks last."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from matchers.expr import Op, Pred
from matchers.presence import ABSENT, STATE_PREFIX

NEGATED_OPS = frozenset({Op.NE, Op.NOT_IN, Op.NOT_BETWEEN, Op.NOT_PREFIX, Op.NOT_SUFFIX, Op.NOT_CONTAINS,
                         Op.NOT_LIKE, Op.NOT_MATCHES, Op.NE_ICASE, Op.NOT_IN_ICASE, Op.NOT_CIDR,
                         Op.NOT_PREFIX_ICASE, Op.NOT_SUFFIX_ICASE})
"""Negated tests (``anything-but`` becomes one of them on a view): true on most values."""


class Conjunctions(NamedTuple):
    """The predicate -> conjunction lists and the per-slot counters of phase 2."""

    main_off: np.ndarray  # int32[pids + 1]: the values of pid are main_val[main_off[pid]:main_off[pid + 1]]
    main_val: np.ndarray  # int32: a slot (>= 0), or encode_single of a one-predicate conjunction's key (< -1), or TOMBSTONE
    pend_off: np.ndarray  # int32[pids + 1]: CSR of the slots added since the last fold
    pend_slot: np.ndarray  # int32: those slots
    left: np.ndarray  # uint16[slots]: its triggers (0: deleted); counts down while matching, restored after
    slot_key: np.ndarray  # int32[slots]: its key
    flat: np.ndarray  # int32: the pids of each slot, its deferred ones first
    slot_start: np.ndarray  # int32[slots]: where a slot's pids start in flat
    n_def: np.ndarray  # uint16[slots]: its deferred pids (checked once its triggers are all satisfied)
    pid_seen: np.ndarray  # int32[pids]: the stamp of the last event satisfying the pid (empty: nothing deferred)


def near_always(p: Pred) -> bool:
    """Whether ``p`` holds on nearly every event, so that a conjunction should check it last
    rather than be counted through it: a negated test, or ``NOT EXISTS`` (a state ``= ABSENT``)."""
    if p.op in NEGATED_OPS:
        return True
    return p.op is Op.EQ and p.operand == ABSENT and p.attr.startswith(STATE_PREFIX)

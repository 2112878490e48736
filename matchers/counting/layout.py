"""Array layout the counting kernel takes (built from the matcher's columns at each call)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Conjunctions(NamedTuple):
    """The predicate -> conjunction lists and the per-slot counters of phase 2."""

    main_off: np.ndarray  # int32[pids + 1]: the values of pid are main_val[main_off[pid]:main_off[pid + 1]]
    main_val: np.ndarray  # int32: a slot (>= 0), or encode_single of a one-predicate conjunction's key (< -1), or TOMBSTONE
    pend_off: np.ndarray  # int32[pids + 1]: CSR of the slots added since the last fold
    pend_slot: np.ndarray  # int32: those slots
    left: np.ndarray  # uint16[slots]: the slot's size (0: deleted); counts down while matching, restored after
    slot_key: np.ndarray  # int32[slots]: its key, ~key if the key has several conjunctions

"""Array layouts the AMKH kernels take (built from the matcher's columns at each call)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Predicates(NamedTuple):
    """Per phase-1 predicate id."""

    attr: np.ndarray  # int64[pids]: position of its attribute in Config.hashed, -1 if not hashed
    eq: np.ndarray  # bool[pids]: whether it is an equality (preferred as a coordinate)
    hash: np.ndarray  # int64[pids]: h_i(C_i), its contribution to a coordinate hash (hashed attributes)


class Conjunctions(NamedTuple):
    """Per conjunction slot (a free slot has size 0)."""

    key: np.ndarray  # int32[slots]: subscription key
    size: np.ndarray  # int32[slots]: number of predicates, at most pids.shape[1]
    pids: np.ndarray  # int32[slots, width]: its predicate ids, the first ``size`` used
    hash: np.ndarray  # int64[slots]: its coordinate hash, sum of h_i(C_i) over its hashed attributes


class Buckets(NamedTuple):
    """Collision lists of conjunction slots by coordinate hash (the lists of a Slabs pool)."""

    start: np.ndarray  # int32[2 ** (64 - shift)]: first pool position of each bucket's list
    length: np.ndarray  # int32[buckets]: slots in each list
    pool: np.ndarray  # int32[pool]: conjunction slots
    shift: int  # 64 - log2 of the number of buckets (see kernels.bucket_of)


class Satisfied(NamedTuple):
    """Satisfied phase-1 predicate ids of each event of a chunk, as CSR."""

    off: np.ndarray  # int64[events + 1]
    pid: np.ndarray  # int32: the ids of event e are pid[off[e]:off[e + 1]]


class Marks(NamedTuple):
    """Per-event stamps: a predicate or key holds the stamp of the last event that hit it."""

    pid: np.ndarray  # int64[pids]: stamp of the last event satisfying each predicate
    key: np.ndarray  # int64[keys]: stamp of the last event that matched each key
    stamp: np.ndarray  # int64[1]: the current event's stamp

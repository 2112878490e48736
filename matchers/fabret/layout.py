"""Array layout the phase-2 kernel of Fabret et al. takes (built from a ClusterStore at each call)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Phase2(NamedTuple):
    """What :func:`~matchers.fabret.kernels.match_batch` reads of a ClusterStore."""

    pid_eq_attr: np.ndarray  # int32[pids]: attribute id of an equality predicate, -1 for other operators
    pid_access: np.ndarray  # int32[pids]: access entry of a single-predicate access key, -1 if none
    acc: np.ndarray  # int32[access entries, KEY + MAX_SCHEMA]: rows (first cluster, table, key pids...)
    cl: np.ndarray  # int64[clusters, 5]: rows (start, cap, len, size, next) into pool
    pool: np.ndarray  # int32[pool]: cluster slabs, rows of entry ids and predicate ids
    e_key: np.ndarray  # int32[entries]: subscription key of each entry, -1 if free
    tables: np.ndarray  # int32[live tables]: ids of the live multi-attribute hash tables, ascending
    t_attrs: np.ndarray  # int32[tables, MAX_SCHEMA]: attribute ids of each table's schema, -1 padded
    t_k: np.ndarray  # int32[tables]: attributes in each table's schema
    slots: np.ndarray  # int32[size]: the open-addressing slots of the tables (EMPTY, TOMBSTONE or an access entry)

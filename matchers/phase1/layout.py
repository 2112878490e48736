"""Array layouts the phase-1 kernels take, one ``NamedTuple`` per evaluator.

Every layout is rebuilt from the evaluator's columns when they changed (``_build``) and
passed whole to its kernel; the event side is the batch's own CSR arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class EqualityTable(NamedTuple):
    """Hashed ``=``/``IN``/``!=``/``NOT IN`` predicates (:func:`~matchers.phase1.kernels.equality_pairs`)."""

    t1: np.ndarray  # int32[size]: typed attribute (attr * 3 + kind) of each hash slot; size a power of two
    t2: np.ndarray  # int64[size]: hashed value of each slot (kernels.value_bits)
    tg: np.ndarray  # int32[size]: group of each slot, EMPTY (-1) for a free slot
    g_off: np.ndarray  # int64[groups + 1]: the pids of group g are g_pids[g_off[g]:g_off[g + 1]]
    g_pids: np.ndarray  # int32: pid >= 0 holds on the value; -pid - 1 is a negated pid it vetoes
    neg_off: np.ndarray  # int64[keys + 1]: over attr * 3 + kind, the negated pids of that typed attribute
    neg_pids: np.ndarray  # int32: negated pids (each holds unless vetoed by the value)


class Bound(NamedTuple):
    """One-sided predicates of one operator (``<``, ``<=``, ``>`` or ``>=``)."""

    off: np.ndarray  # int64[n_attrs + 1]: the predicates on attribute a are off[a]:off[a + 1]
    val: np.ndarray  # float64: operands, ascending within an attribute
    pid: np.ndarray  # int32: predicate id of each operand


class Between(NamedTuple):
    """``BETWEEN`` predicates, by low bound, with the largest high bound per block."""

    off: np.ndarray  # int64[n_attrs + 1]: CSR over attribute ids
    lo: np.ndarray  # float64: low bounds, ascending within an attribute
    hi: np.ndarray  # float64: high bound of each predicate
    pid: np.ndarray  # int32: predicate id
    block_max: np.ndarray  # float64[ceil(n / BLOCK)]: largest hi of each block of BLOCK rows (at least one)


class NotBetween(NamedTuple):
    """``NOT BETWEEN`` predicates, sorted twice: by low bound and by high bound."""

    off: np.ndarray  # int64[n_attrs + 1]: CSR over attribute ids (the same for both sorts)
    lo: np.ndarray  # float64: low bounds, ascending within an attribute
    lo_pid: np.ndarray  # int32: predicate id of each low bound
    hi: np.ndarray  # float64: high bounds, ascending within an attribute
    hi_pid: np.ndarray  # int32: predicate id of each high bound


class Ranges(NamedTuple):
    """Numeric range predicates by operator (:func:`~matchers.phase1.kernels.range_pairs`)."""

    lt: Bound
    le: Bound
    gt: Bound
    ge: Bound
    bt: Between
    nb: NotBetween


BLOCK = 32
"""Rows per block of :attr:`Between.block_max` (the kernel shifts by 5)."""


class Scratch:
    """Output buffers kept from call to call (freshly allocated ones cost page faults each
    batch: about 0.9 µs per event on the EventBridge-like rules): what a caller builds on
    :meth:`take` is overwritten by the owner's next call, which is why it is only ever handed
    to code that is done with it by then."""

    def __init__(self, n_arrays: int) -> None:
        self.arrays = tuple(np.zeros(0, dtype=np.int32) for _ in range(n_arrays))

    def take(self, n: int) -> tuple[np.ndarray, ...]:
        """The int32 buffers, each of at least ``n`` entries (regrown, unfilled, when shorter)."""
        if n > len(self.arrays[0]):
            size = max(n, len(self.arrays[0]) * 5 // 4, 1024)
            self.arrays = tuple(np.empty(size, dtype=np.int32) for _ in self.arrays)
        return self.arrays

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def __reduce__(self) -> tuple:
        return Scratch, (len(self.arrays),)  # pickled empty: a matcher shipped to a worker carries no scratch

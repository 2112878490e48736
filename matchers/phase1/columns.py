"""Growable per-predicate columns shared by the phase-1 evaluators."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class PredColumns(NamedTuple):
    """Fields of a list of predicates, read from the predicate objects in one pass.

    ``ops`` and ``kinds`` hold the :class:`~matchers.expr.Op` and
    :class:`~matchers.expr.Kind` values.
    """

    attr_ids: np.ndarray
    ops: np.ndarray
    kinds: np.ndarray
    operands: list

    def take(self, idx: np.ndarray) -> PredColumns:
        """The rows ``idx``."""
        operands = self.operands
        return PredColumns(self.attr_ids[idx], self.ops[idx], self.kinds[idx], [operands[i] for i in idx.tolist()])

    def first_numbers(self) -> np.ndarray:
        """The numeric operand (or low bound) of each row, 0.0 for others (a sort key)."""
        try:  # all numbers (the common case): one conversion
            values = np.array(self.operands, dtype=np.float64)
            if values.ndim == 1:
                return values
        except (TypeError, ValueError):
            pass
        return np.array([_first_number(o) for o in self.operands], dtype=np.float64)


def _first_number(operand: object) -> float:
    if type(operand) is float:
        return operand
    if type(operand) is tuple and type(operand[0]) is float:
        return operand[0]
    return 0.0


def renumbered(new_of_old: np.ndarray, key: np.ndarray, absent: int, *others: np.ndarray) -> list[np.ndarray]:
    """Columns indexed by predicate id, with predicate ``i`` moved to ``new_of_old[i]``.

    ``key`` marks absent ids with ``absent`` (the value its fresh slots get); the
    ``others`` are moved alongside it, their fresh slots zero.
    """
    old = np.flatnonzero(key[:len(new_of_old)] != absent)
    new = new_of_old[old]
    out = [np.full_like(key, absent), *(np.zeros_like(c) for c in others)]
    for moved, column in zip(out, (key, *others), strict=True):
        moved[new] = column[old]
    return out


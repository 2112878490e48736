"""The draws the workload generators share (:mod:`scripts.workloads`, :mod:`scripts.domains`):
the :class:`Workload` record, independent seeded streams, Zipf ranks, rows of distinct values
and subscriptions built from predicates without parsing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from matchers.expr import And, Expr, Op, Pred, Subscription


class Workload(NamedTuple):
    """Subscriptions and flat events of a generated workload."""

    subscriptions: list[Subscription]
    events: list[dict]


def rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent generators for subscriptions and for events."""
    return np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])


def zipf_probabilities(n: int, alpha: float) -> np.ndarray:
    """Probabilities of ranks ``1..n`` under a finite Zipf law ``p(k) ~ 1 / k**alpha``.

    ``alpha = 0`` is the uniform distribution.
    """
    if n < 1:
        raise ValueError(f"Zipf support must be non-empty, got n={n}")
    if alpha < 0:
        raise ValueError(f"Zipf exponent must be >= 0, got {alpha}")
    weights = np.arange(1, n + 1, dtype=np.float64) ** -float(alpha)
    return weights / weights.sum()


def sampler(rng: np.random.Generator, n: int, probs: np.ndarray | None) -> Callable[[tuple], np.ndarray]:
    """A function drawing int64 arrays of a shape from ``0..n-1`` (uniform, or by ``probs``)."""
    if probs is None:
        return lambda shape: rng.integers(0, n, size=shape, dtype=np.int64)
    cumulative = np.cumsum(probs)
    cumulative[-1] = 1.0

    def draw(shape: tuple) -> np.ndarray:
        u = rng.random(size=shape)
        return np.minimum(np.searchsorted(cumulative, u, side="right"), n - 1).astype(np.int64)

    return draw


def distinct_rows(rng: np.random.Generator, draw: Callable[[tuple], np.ndarray], n_rows: int, k: int,
                  support: int) -> np.ndarray:
    """``(n_rows, k)`` draws with distinct values within each row, in random order.

    A repeated value is redrawn until the row is distinct (for a skewed ``draw`` this is
    sampling without replacement by rejection).  ``k`` must not exceed ``support``.
    """
    if k > support:
        raise ValueError(f"cannot draw {k} distinct values out of {support}")
    out = np.sort(draw((n_rows, k)), axis=1)
    rows = np.arange(n_rows)
    while len(rows):
        block = out[rows]
        dup = np.zeros(block.shape, dtype=bool)
        dup[:, 1:] = block[:, 1:] == block[:, :-1]
        bad = dup.any(axis=1)
        rows, block, dup = rows[bad], block[bad], dup[bad]
        if not len(rows):
            break
        block[dup] = draw((int(dup.sum()),))
        out[rows] = np.sort(block, axis=1)
    return rng.permuted(out, axis=1)


def subscriptions_of(exprs: Iterator[Expr], prefix: str = "s") -> list[Subscription]:
    return [Subscription.of(f"{prefix}{i}", e) for i, e in enumerate(exprs)]


def conjunctions(rows: Iterator[list[Pred]], prefix: str = "s") -> list[Subscription]:
    """Subscriptions that are plain conjunctions of predicates on distinct attributes.

    Their DNF is the one conjunction of the sorted predicates, so it is built directly
    (what :meth:`Subscription.of` would compute, several times faster; the tests check
    that both agree).
    """
    return list(lazy_conjunctions(rows, prefix))


def lazy_conjunctions(rows: Iterator[list[Pred]], prefix: str = "s") -> Iterator[Subscription]:
    """:func:`conjunctions` one subscription at a time."""
    key = Pred.sort_key
    for i, preds in enumerate(rows):
        expr = preds[0] if len(preds) == 1 else And(tuple(preds))
        yield Subscription(f"{prefix}{i}", expr, (tuple(sorted(preds, key=key)),))


BLOCK = 100_000
"""Rows turned into Python objects at a time by the large generators."""

OPS = {"=": Op.EQ, "!=": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}

"""Seeded workload generators reproducing the papers' set-ups, and a CLI writing JSONL.

Every generator returns a :class:`Workload` ``(subscriptions, events)``: a list of
:class:`~matchers.expr.Subscription` built with :func:`~matchers.expr.pred` (never by
parsing text) and a list of flat event dicts.  Subscriptions and events come from two
independent random streams of the same seed, so changing ``n_events`` leaves the
subscriptions unchanged and vice versa.  The structural draws (attributes, operators,
operands) are vectorised with numpy; only the final ``pred``/``Subscription.of`` calls
are per predicate.

Generators (see ``docs/workloads.md`` for the figures they reproduce):

* :func:`fabret` -- Fabret et al., SIGMOD 2001, Table 1 and workloads W0-W6;
* :func:`opindex` -- Zhang et al., VLDB 2014, Table 3 (uniform and Zipf);
* :func:`vci` -- Wu et al., VCI, Section 5.2 (single-attribute intervals);
* :func:`amkh` -- Wu & Yu, AMKH, Section 3 (Fig. 1);
* :func:`dense` -- the dense interval workload of REIN, TAMA and HEM;
* :func:`stock_ticker` and :func:`ecommerce` -- realistic workloads with strings that
  between them use every operator of the language.

CLI::

    python -m scripts.workloads NAME --subs S.jsonl --events E.jsonl \\
        --n-subs N --n-events M --seed K [--param key=value ...]
"""

from __future__ import annotations

import argparse
import ast
import bisect
import functools
import inspect
import itertools
import math
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from matchers.expr import And, Expr, Not, Op, Or, Pred, Subscription, pred, to_text
from streaming.cli import exit_with


class Workload(NamedTuple):
    """Subscriptions and flat events of a generated workload."""

    subscriptions: list[Subscription]
    events: list[dict]


# -- shared helpers -------------------------------------------------------------------
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


def _sampler(rng: np.random.Generator, n: int, probs: np.ndarray | None) -> Callable[[tuple], np.ndarray]:
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


def _subscriptions(exprs: Iterator[Expr], prefix: str = "s") -> list[Subscription]:
    return [Subscription.of(f"{prefix}{i}", e) for i, e in enumerate(exprs)]


def _conjunctions(rows: Iterator[list[Pred]], prefix: str = "s") -> list[Subscription]:
    """Subscriptions that are plain conjunctions of predicates on distinct attributes.

    Their DNF is the one conjunction of the sorted predicates, so it is built directly
    (what :meth:`Subscription.of` would compute, several times faster; the tests check
    that both agree).
    """
    return list(_lazy_conjunctions(rows, prefix))


def _lazy_conjunctions(rows: Iterator[list[Pred]], prefix: str = "s") -> Iterator[Subscription]:
    """:func:`_conjunctions` one subscription at a time."""
    key = Pred.sort_key
    for i, preds in enumerate(rows):
        expr = preds[0] if len(preds) == 1 else And(tuple(preds))
        yield Subscription(f"{prefix}{i}", expr, (tuple(sorted(preds, key=key)),))


_BLOCK = 100_000
"""Rows turned into Python objects at a time by the large generators."""

_OPS = {"=": Op.EQ, "!=": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}


# -- Fabret et al. ------------------------------------------------------------------------
FABRET_WORKLOADS: dict[str, dict] = {
    # Fig. 3(a), 3(c), 3(d): 5 predicates, 2 fixed, all equality; 32 names, values 1..35.
    "W0": dict(n_t=32, attr_offset=0, fixed=("=", "="), n_free=3, lo=1, hi=35, n_a=32, skew_values=None),
    # Fig. 3(b): 2 fixed '=', 1 fixed '<=', one free '='.
    "W1": dict(n_t=32, attr_offset=0, fixed=("=", "=", "<="), n_free=1, lo=1, hi=35, n_a=32, skew_values=None),
    # Fig. 3(b): 2 fixed '=', 5 fixed '<=', 1 fixed '!=', one free '='.
    "W2": dict(n_t=32, attr_offset=0, fixed=("=", "=", "<=", "<=", "<=", "<=", "<=", "!="), n_free=1,
               lo=1, hi=35, n_a=32, skew_values=None),
    # Fig. 4(a): subscriptions on 16 of the 32 names (W3: the first 16, W4: the other 16).
    "W3": dict(n_t=16, attr_offset=0, fixed=("=",), n_free=4, lo=1, hi=35, n_a=32, skew_values=None),
    "W4": dict(n_t=16, attr_offset=16, fixed=("=",), n_free=4, lo=1, hi=35, n_a=32, skew_values=None),
    # Fig. 4(b): W5 as W0; W6 skews the first fixed attribute to 2 values (events and predicates).
    "W5": dict(n_t=32, attr_offset=0, fixed=("=", "="), n_free=3, lo=1, hi=35, n_a=32, skew_values=None),
    "W6": dict(n_t=32, attr_offset=0, fixed=("=", "="), n_free=3, lo=1, hi=35, n_a=32, skew_values=2),
}
"""Specifications of Fabret et al.'s workloads (Section 6.1, Table 1, Section 6.2).

``n_t``: names the subscriptions draw from (``a{attr_offset}`` ..), ``fixed``: operators of
the predicates on the common attributes (the first ``len(fixed)`` names of the pool),
``n_free``: further equality predicates on distinct names drawn from the rest of the pool,
``lo``/``hi``: value domain of predicates and event values, ``n_a``: attributes per event
(``a0 .. a{n_a-1}``), ``skew_values``: if set, the first fixed attribute takes only that
many values (``lo ..``) in predicates and events.
"""


def fabret(workload: str = "W0", n_subs: int = 100_000, n_events: int = 1111, seed: int = 0,
           **params) -> Workload:
    """Fabret et al. workloads W0-W6 (Table 1); ``params`` override fields of the spec.

    See :data:`FABRET_WORKLOADS` for the fields.  Defaults: ``n_S = 100,000`` (Table 1's
    low end; the paper goes to 6,000,000), ``n_E = 1111`` as in Table 1.
    """
    subs = list(fabret_subscriptions(workload, n_subs, seed, **params))
    spec = _fabret_spec(workload, params)
    lo, hi, n_a, offset, skew = spec["lo"], spec["hi"], spec["n_a"], spec["attr_offset"], spec["skew_values"]
    _, event_rng = rngs(seed)
    values = event_rng.integers(lo, hi + 1, size=(n_events, n_a))
    if skew and spec["fixed"]:
        values[:, offset] = event_rng.integers(lo, lo + skew, size=n_events)
    event_names = [f"a{i}" for i in range(n_a)]
    return Workload(subs, [dict(zip(event_names, row, strict=True)) for row in values.tolist()])


def _fabret_spec(workload: str, params: dict) -> dict:
    """The checked specification of a Fabret workload with ``params`` applied."""
    if workload not in FABRET_WORKLOADS:
        raise ValueError(f"unknown Fabret workload {workload!r}; known: {', '.join(FABRET_WORKLOADS)}")
    spec = dict(FABRET_WORKLOADS[workload])
    unknown = set(params) - set(spec)
    if unknown:
        raise ValueError(f"unknown Fabret parameters {sorted(unknown)}; known: {sorted(spec)}")
    spec.update(params)
    n_t, offset, n_fixed, n_free = spec["n_t"], spec["attr_offset"], len(spec["fixed"]), spec["n_free"]
    if n_fixed + n_free < 1:
        raise ValueError("a subscription needs at least one predicate (fixed or free)")
    if n_fixed + n_free > n_t:
        raise ValueError(f"{n_fixed} fixed + {n_free} free predicates exceed the {n_t} names")
    if not spec["lo"] <= spec["hi"]:
        raise ValueError(f"empty value domain [{spec['lo']}, {spec['hi']}]")
    if offset + n_t > spec["n_a"]:
        raise ValueError(f"subscription names a{offset}..a{offset + n_t - 1} exceed the {spec['n_a']} event attributes")
    return spec


def fabret_subscriptions(workload: str = "W0", n_subs: int = 100_000, seed: int = 0,
                         **params) -> Iterator[Subscription]:
    """The subscriptions of :func:`fabret` (the same ones), made one at a time as they are taken.

    For sets too large to hold as Python objects (10,000,000 take tens of GB): only the
    drawn values are held (numpy arrays, under 100 bytes per subscription).
    """
    spec = _fabret_spec(workload, params)
    n_t, offset, fixed, n_free = spec["n_t"], spec["attr_offset"], tuple(spec["fixed"]), spec["n_free"]
    lo, hi, n_a, skew = spec["lo"], spec["hi"], spec["n_a"], spec["skew_values"]
    sub_rng, _ = rngs(seed)
    names = [f"a{i}" for i in range(max(n_a, offset + n_t))]
    ops = [_OPS[o] for o in fixed]
    n_fixed = len(fixed)

    fixed_vals = sub_rng.integers(lo, hi + 1, size=(n_subs, n_fixed))
    if skew and n_fixed:
        fixed_vals[:, 0] = sub_rng.integers(lo, lo + skew, size=n_subs)
    free_pool = n_t - n_fixed
    free_attrs = (distinct_rows(sub_rng, _sampler(sub_rng, free_pool, None), n_subs, n_free, free_pool)
                  + offset + n_fixed)
    free_vals = sub_rng.integers(lo, hi + 1, size=(n_subs, n_free))
    fixed_names = names[offset:offset + n_fixed]

    def rows() -> Iterator[list[Pred]]:
        for i in range(0, n_subs, _BLOCK):  # Python lists of one block at a time
            block = zip(fixed_vals[i:i + _BLOCK].tolist(), free_attrs[i:i + _BLOCK].tolist(),
                        free_vals[i:i + _BLOCK].tolist(), strict=True)
            for fv, fa, fr in block:
                preds = [pred(fixed_names[j], ops[j], fv[j]) for j in range(n_fixed)]
                preds += [pred(names[a], Op.EQ, v) for a, v in zip(fa, fr, strict=True)]
                yield preds

    return _lazy_conjunctions(rows())


# -- OpIndex ------------------------------------------------------------------------------
def opindex(n_subs: int = 1_000_000, n_events: int = 1000, d: int = 20_000, gamma_max: int = 4,
            m: int = 20, theta1: float = 0.4, sigma: int = 50, dist: str = "uniform",
            zipf_alpha: float = 1.0, event_size: str = "fixed", seed: int = 0) -> Workload:
    """OpIndex synthetic data (Zhang et al., Section 7.1, Table 3; defaults in bold there).

    A subscription has ``Γ`` predicates, ``Γ`` uniform in ``[1, gamma_max]``, on distinct
    attributes out of ``d`` (``a0 .. a{d-1}``); the operator is ``=`` with probability
    ``theta1``, else ``<=`` or ``>=`` with equal probability; operands are integers in
    ``[1, sigma]``.  An event has ``m`` distinct attributes (``event_size="fixed"``, the
    size of Section 5's analysis) or a size uniform in ``[1, m]`` (``"uniform"``), with
    values in ``[1, sigma]``.  ``dist="zipf"`` draws attributes and values (of both
    subscriptions and events) from a Zipf law of exponent ``zipf_alpha`` instead (rank 1 is
    ``a0`` and value 1; Table 3 varies it from 0 to 1.0).
    """
    if dist not in ("uniform", "zipf"):
        raise ValueError(f"dist must be 'uniform' or 'zipf', not {dist!r}")
    if event_size not in ("fixed", "uniform"):
        raise ValueError(f"event_size must be 'fixed' or 'uniform', not {event_size!r}")
    if not 0.0 <= theta1 <= 1.0:
        raise ValueError(f"theta1 must be in [0, 1], got {theta1}")
    if gamma_max < 1 or m < 1 or sigma < 1:
        raise ValueError("gamma_max, m and sigma must be >= 1")
    sub_rng, event_rng = rngs(seed)
    attr_p = zipf_probabilities(d, zipf_alpha) if dist == "zipf" else None
    value_p = zipf_probabilities(sigma, zipf_alpha) if dist == "zipf" else None
    names = [f"a{i}" for i in range(d)]

    sizes = sub_rng.integers(1, gamma_max + 1, size=n_subs)
    attrs = distinct_rows(sub_rng, _sampler(sub_rng, d, attr_p), n_subs, gamma_max, d)
    operands = _sampler(sub_rng, sigma, value_p)((n_subs, gamma_max)) + 1
    u = sub_rng.random(size=(n_subs, gamma_max))
    op_codes = np.where(u < theta1, 0, np.where(u < theta1 + (1.0 - theta1) / 2.0, 1, 2))
    op_table = (Op.EQ, Op.LE, Op.GE)

    interned: dict[tuple[int, int, int], Pred] = {}

    def rows() -> Iterator[list[Pred]]:
        # Equal predicates are one (immutable) object and the arrays become Python lists a
        # block at a time: 10M subscriptions fit in memory (about 350 bytes each).
        for lo in range(0, n_subs, _BLOCK):
            hi = lo + _BLOCK
            for k, row_a, row_v, row_o in zip(sizes[lo:hi].tolist(), attrs[lo:hi].tolist(),
                                              operands[lo:hi].tolist(), op_codes[lo:hi].tolist(), strict=True):
                row = []
                for j in range(k):
                    key = (row_a[j], row_o[j], row_v[j])
                    p = interned.get(key)
                    if p is None:
                        p = interned[key] = pred(names[row_a[j]], op_table[row_o[j]], row_v[j])
                    row.append(p)
                yield row

    event_attrs = distinct_rows(event_rng, _sampler(event_rng, d, attr_p), n_events, m, d)
    event_vals = _sampler(event_rng, sigma, value_p)((n_events, m)) + 1
    if event_size == "fixed":
        event_sizes = [m] * n_events
    else:
        event_sizes = event_rng.integers(1, m + 1, size=n_events).tolist()
    events = [{names[a]: v for a, v in zip(ra[:k], rv[:k], strict=True)}
              for k, ra, rv in zip(event_sizes, event_attrs.tolist(), event_vals.tolist(), strict=True)]
    return Workload(_conjunctions(rows()), events)


# -- VCI ----------------------------------------------------------------------------------
def vci(n_subs: int = 10_000, n_events: int = 10_000, R: int = 5000, W: int = 200,  # noqa: N803
        attr: str = "x", seed: int = 0) -> Workload:
    """VCI interval predicates (Wu et al., Section 5.2).

    Each subscription is ``attr BETWEEN x AND y``: the start ``x`` is uniform in
    ``[1, R-1]``, the length ``w`` uniform in ``[1, W]`` (mean ``W/2``), ``y = x + w``
    reduced to ``R`` when it exceeds it.  Events are integer values uniform in ``[1, R]``
    (the paper's 10,000 random searches).  Paper settings: ``R = 5000`` (moderate) or
    ``250,000`` (large); ``W = 500`` for Fig. 5, ``200`` for Fig. 6(a)/7(a); ``n`` from
    1,000 to 1,024,000.
    """
    if R < 2 or W < 1:
        raise ValueError("VCI needs R >= 2 and W >= 1")
    sub_rng, event_rng = rngs(seed)
    starts = sub_rng.integers(1, R, size=n_subs)
    ends = np.minimum(starts + sub_rng.integers(1, W + 1, size=n_subs), R)
    subs = _conjunctions([pred(attr, Op.BETWEEN, (x, y))] for x, y in zip(starts.tolist(), ends.tolist(), strict=True))
    events = [{attr: v} for v in event_rng.integers(1, R + 1, size=n_events).tolist()]
    return Workload(subs, events)


# -- dense intervals (REIN, TAMA, HEM) ----------------------------------------------------
class DenseArrays(NamedTuple):
    """The dense interval workload as arrays: subscription ``i`` is ``lo[i, j] <= a{attrs[i, j]} <= hi[i, j]``
    for every ``j``; event ``e`` assigns ``a{j} = events[e, j]`` for every attribute."""

    attrs: np.ndarray  # int64[n_subs, k]
    lo: np.ndarray  # int64[n_subs, k]
    hi: np.ndarray  # int64[n_subs, k]
    events: np.ndarray  # int64[n_events, d]
    domain: int


def dense_arrays(n_subs: int = 1_000_000, n_events: int = 500, d: int = 20, k: int = 10, width: float = 0.3,
                 domain: int = 1_000_000, zipf_alpha: float = 0.0, seed: int = 0) -> DenseArrays:
    """The dense interval workload of REIN, TAMA and HEM (their default set-up), as arrays.

    Every event assigns all ``d`` attributes a value in ``[0, domain)``; every
    subscription has ``k`` interval predicates on ``k`` distinct attributes, each of width
    ``width * domain``, its low end uniform in ``[0, domain - width * domain)``.  With
    ``zipf_alpha > 0`` event values and low ends follow a Zipf law over the values (rank
    1 the smallest).
    """
    if not 1 <= k <= d or not 0 < width < 1:
        raise ValueError(f"dense needs 1 <= k <= d and 0 < width < 1, got k={k}, d={d}, width={width}")
    sub_rng, event_rng = rngs(seed)
    span = int(width * domain)
    attrs = np.argsort(sub_rng.random((n_subs, d)), axis=1)[:, :k].astype(np.int64)
    probs_lo = zipf_probabilities(domain - span, zipf_alpha) if zipf_alpha > 0 else None
    probs_ev = zipf_probabilities(domain, zipf_alpha) if zipf_alpha > 0 else None
    lo = _sampler(sub_rng, domain - span, probs_lo)((n_subs, k))
    events = _sampler(event_rng, domain, probs_ev)((n_events, d))
    return DenseArrays(attrs, lo, lo + span, events, domain)


def dense(n_subs: int = 100_000, n_events: int = 500, d: int = 20, k: int = 10, width: float = 0.3,
          domain: int = 1_000_000, zipf_alpha: float = 0.0, seed: int = 0) -> Workload:
    """The dense interval workload (see :func:`dense_arrays`) as subscriptions and events."""
    arrays = dense_arrays(n_subs, n_events, d, k, width, domain, zipf_alpha, seed)
    return Workload(dense_subscriptions(arrays), dense_events(arrays))


def dense_subscriptions(arrays: DenseArrays) -> list[Subscription]:
    """The subscriptions of a dense workload (ids ``s<i>``)."""
    names = [f"a{j}" for j in range(arrays.events.shape[1])]
    rows = zip(arrays.attrs.tolist(), arrays.lo.tolist(), arrays.hi.tolist(), strict=True)
    return _conjunctions([pred(names[a], Op.BETWEEN, (x, y)) for a, x, y in zip(*row, strict=True)] for row in rows)


def dense_events(arrays: DenseArrays) -> list[dict]:
    """The events of a dense workload as flat dicts."""
    names = [f"a{j}" for j in range(arrays.events.shape[1])]
    return [dict(zip(names, row, strict=True)) for row in arrays.events.tolist()]


# -- AMKH ---------------------------------------------------------------------------------
def amkh(n_subs: int = 100_000, n_events: int = 1000, x: int = 95, n_equality: int = 10,
         n_general: int = 10, p_equal: float = 0.5, event_hi: int = 95, seed: int = 0) -> Workload:
    """AMKH simulation (Wu & Yu, Section 3, Fig. 1).

    ``n_equality`` equality-only attributes ``e0..`` and ``n_general`` general attributes
    ``g0..``.  Each subscription has 3 clauses: ``e0 = v``, ``ej = v`` for ``j`` uniform in
    the other equality-only attributes, and a clause on the fixed general attribute ``g0``
    whose operator is ``=`` with probability ``p_equal``, else ``>`` or ``<`` equally.
    Predicate values are uniform integers in ``[6, x]`` (Fig. 1 varies ``x`` from 15 to
    95); event values are uniform in ``[6, event_hi]`` on every attribute (95 in the paper).
    """
    if n_equality < 2 or n_general < 1:
        raise ValueError("AMKH needs at least 2 equality-only and 1 general attribute")
    if x < 6 or event_hi < 6:
        raise ValueError(f"the value ranges [6, x] and [6, event_hi] need x, event_hi >= 6, got {x}, {event_hi}")
    sub_rng, event_rng = rngs(seed)
    eq_names = [f"e{i}" for i in range(n_equality)]
    gen_names = [f"g{i}" for i in range(n_general)]
    vals = sub_rng.integers(6, x + 1, size=(n_subs, 3))
    second = sub_rng.integers(1, n_equality, size=n_subs)
    u = sub_rng.random(size=n_subs)
    ops = np.where(u < p_equal, 0, np.where(u < p_equal + (1.0 - p_equal) / 2.0, 1, 2))
    op_table = (Op.EQ, Op.GT, Op.LT)
    subs = _conjunctions(
        [pred(eq_names[0], Op.EQ, v[0]), pred(eq_names[j], Op.EQ, v[1]), pred(gen_names[0], op_table[o], v[2])]
        for v, j, o in zip(vals.tolist(), second.tolist(), ops.tolist(), strict=True)
    )
    names = eq_names + gen_names
    values = event_rng.integers(6, event_hi + 1, size=(n_events, len(names)))
    events = [dict(zip(names, row, strict=True)) for row in values.tolist()]
    return Workload(subs, events)


# -- stock ticker -------------------------------------------------------------------------
EXCHANGES = ("NYSE", "NASDAQ", "LSE", "XETRA", "TSE", "HKEX")
SECTORS = ("Technology", "Financials", "Health Care", "Energy", "Utilities", "Industrials",
           "Consumer Staples", "Consumer Discretionary", "Materials", "Real Estate", "Communication")
CURRENCIES = {"NYSE": "USD", "NASDAQ": "USD", "LSE": "GBP", "XETRA": "EUR", "TSE": "JPY", "HKEX": "HKD"}


def _tickers(rnd: random.Random, n: int) -> list[str]:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out: dict[str, None] = {}
    while len(out) < n:
        size = rnd.choice((1, 2, 3, 3, 3, 4, 4, 4, 4))
        out.setdefault("".join(rnd.choice(letters) for _ in range(size)))
    return list(out)


def stock_ticker(n_subs: int = 10_000, n_events: int = 10_000, n_symbols: int = 500,
                 zipf_alpha: float = 1.0, seed: int = 0) -> Workload:
    """Stock quotes and alert subscriptions.

    ``n_symbols`` tickers with Zipf(``zipf_alpha``) popularity (for events and for the
    symbols subscriptions name), each with a fixed exchange, sector, currency and base
    price.  Events: ``symbol``, ``price``, ``volume``, ``exchange``, ``sector``,
    ``currency``, ``change_pct``, ``halted`` (boolean) and, for 60% of them,
    ``dividend_yield``.  Subscriptions mix ``=``, ``!=``, ``IN``, ``NOT IN``, ``<``,
    ``<=``, ``>``, ``>=``, ``BETWEEN``, ``NOT BETWEEN``, ``LIKE`` prefixes and patterns
    with ``_``, their negations, booleans and ``OR``.
    """
    srnd = random.Random(f"stock-subs-{seed}")
    ernd = random.Random(f"stock-events-{seed}")
    meta = random.Random(f"stock-meta-{seed}")
    symbols = _tickers(meta, n_symbols)
    info = {}
    for s in symbols:
        exchange = meta.choice(EXCHANGES)
        info[s] = (exchange, meta.choice(SECTORS), CURRENCIES[exchange], round(math.exp(meta.uniform(1.5, 6.5)), 2))
    cum = list(itertools.accumulate(zipf_probabilities(n_symbols, zipf_alpha).tolist()))

    def pick(rnd: random.Random) -> str:
        return symbols[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), n_symbols - 1)]

    def price_near(rnd: random.Random, s: str, spread: float = 0.05) -> float:
        return round(info[s][3] * (1.0 + rnd.uniform(-spread, spread)), 2)

    def template(rnd: random.Random) -> Expr:
        s = pick(rnd)
        exchange, sector, currency, base = info[s]
        t = rnd.randrange(15)
        if t == 0:
            return And((pred("symbol", "=", s), pred("price", "<", price_near(rnd, s))))
        if t == 1:
            group = sorted({s, pick(rnd), pick(rnd)})
            return And((pred("symbol", "in", group), pred("volume", ">", int(math.exp(rnd.uniform(6, 10))))))
        if t == 2:
            a, b = sorted((price_near(rnd, s, 0.08), price_near(rnd, s, 0.08)))
            return And((pred("symbol", "=", s), pred("price", "between", (a, b))))
        if t == 3:
            return And((pred("sector", "=", sector), pred("change_pct", "<=", -round(rnd.uniform(0.5, 6), 1))))
        if t == 4:
            return And((pred("symbol", "like", s[: rnd.randint(1, 2)] + "%"), pred("exchange", "=", exchange)))
        if t == 5:
            a, b = sorted((price_near(rnd, s, 0.04), price_near(rnd, s, 0.04)))
            return And((pred("symbol", "=", s), Not(pred("price", "between", (a, b)))))
        if t == 6:
            s2 = pick(rnd)
            return Or((And((pred("symbol", "=", s), pred("price", ">=", price_near(rnd, s)))),
                       And((pred("symbol", "=", s2), pred("price", "<=", price_near(rnd, s2))))))
        if t == 7:
            others = sorted({sector, rnd.choice(SECTORS), rnd.choice(SECTORS)})
            return And((pred("exchange", "=", exchange), Not(pred("sector", "in", others)),
                        pred("volume", ">=", int(math.exp(rnd.uniform(5, 9))))))
        if t == 8:
            return And((pred("symbol", "=", s), pred("halted", "=", True)))
        if t == 9:
            return And((pred("sector", "=", sector), Not(pred("symbol", "like", s[0] + "%")),
                        pred("change_pct", ">", round(rnd.uniform(0.5, 5), 1))))
        if t == 10:
            pattern = "_" + s[1] + "%" if len(s) > 1 else s + "_%"
            return And((pred("symbol", "like", pattern), pred("price", "<", price_near(rnd, s, 0.5))))
        if t == 11:
            return And((pred("symbol", "=", s), pred("exchange", "!=", rnd.choice(EXCHANGES))))
        if t == 12:
            return And((pred("sector", "=", sector), Not(pred("symbol", "like", s[0] + "_%"))))
        if t == 13:
            return And((pred("dividend_yield", ">=", round(rnd.uniform(0.5, 6), 2)),
                        pred("sector", "in", sorted({sector, rnd.choice(SECTORS)}))))
        return And((pred("symbol", "=", s), Not(pred("halted", "=", True)),
                    pred("currency", "=", currency)))

    subs = _subscriptions(template(srnd) for _ in range(n_subs))
    events = []
    for _ in range(n_events):
        s = pick(ernd)
        exchange, sector, currency, base = info[s]
        price = round(base * math.exp(ernd.gauss(0.0, 0.03)), 2)
        event = {
            "symbol": s, "price": price, "volume": int(math.exp(ernd.uniform(4, 11))),
            "exchange": exchange, "sector": sector, "currency": currency,
            "change_pct": round((price / base - 1.0) * 100.0, 3), "halted": ernd.random() < 0.05,
        }
        if ernd.random() < 0.6:
            event["dividend_yield"] = round(ernd.uniform(0.0, 7.0), 2)
        events.append(event)
    return Workload(subs, events)


# -- e-commerce catalogue ---------------------------------------------------------------
CATEGORIES = (
    "Electronics > Phones > Smartphones", "Electronics > Phones > Cases", "Electronics > Audio > Headphones",
    "Electronics > Audio > Speakers", "Electronics > Computers > Laptops", "Electronics > Computers > Monitors",
    "Home > Kitchen > Coffee Makers", "Home > Kitchen > Blenders", "Home > Furniture > Chairs",
    "Books > Fiction", "Books > Science", "Sports > Cycling > Bikes", "Sports > Running > Shoes",
    "Toys > Building Sets", "Fashion > Women > Dresses", "Fashion > Men > Jackets",
)
NOUNS = {
    "Smartphones": ("Smartphone", "Phone"), "Cases": ("Case", "Case Cover", "Folio Case"),
    "Headphones": ("Headphones", "Earbuds"), "Speakers": ("Speaker", "Soundbar"),
    "Laptops": ("Laptop", "Notebook", "Ultrabook"), "Monitors": ("Monitor", "Display"),
    "Coffee Makers": ("Coffee Maker", "Espresso Machine"), "Blenders": ("Blender",),
    "Chairs": ("Office Chair", "Gaming Chair"), "Fiction": ("Novel", "Paperback"),
    "Science": ("Textbook", "Guide"), "Bikes": ("Road Bike", "Mountain Bike"),
    "Shoes": ("Running Shoes", "Trail Shoes"), "Building Sets": ("Building Set", "Brick Kit"),
    "Dresses": ("Dress", "Maxi Dress"), "Jackets": ("Jacket", "Rain Jacket"),
}
ADJECTIVES = ("Wireless", "Pro", "Ultra", "Compact", "Portable", "Smart", "Classic", "Premium", "Lightweight",
              "Noise-Cancelling", "Waterproof", "Ergonomic", "Max", "Mini", "Deluxe")
COLORS = ("Black", "White", "Silver", "Red", "Blue", "Green", "Gold", "Grey")
SYLLABLES = ("ze", "ka", "lo", "tri", "vo", "nex", "ar", "mi", "qu", "sol", "ra", "tek", "on", "lu", "fy")
REGEXES = (r"(?i)wireless.*(headphones|earbuds)", r"\b[A-Z]-[0-9]{3}\b", r"(?i)\bpro\b.*\bmax\b",
           r"[0-9]{2,}(GB|TB)", r"^(Ultra|Premium) ", r"(?i)refurbished|renewed")


def _brands(rnd: random.Random, n: int) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        out.setdefault("".join(rnd.choice(SYLLABLES) for _ in range(rnd.randint(2, 3))).capitalize())
    return list(out)


def ecommerce(n_subs: int = 10_000, n_events: int = 10_000, n_brands: int = 200, zipf_alpha: float = 0.8,
              seed: int = 0) -> Workload:
    """Product catalogue events and shopper subscriptions with strings.

    Events are products: ``title`` (brand, adjectives, product noun, model code such as
    ``X-200``, sometimes a storage size, ``(Refurbished)``), ``brand`` (Zipf popularity),
    ``category`` (``"Electronics > Audio > Headphones"``), ``sku`` (``SKU-000123-EL``),
    ``price``, ``rating`` (absent for new products), ``reviews``, ``in_stock`` and
    ``prime`` (booleans), ``color`` (absent for some).  Subscriptions use ``CONTAINS``,
    ``LIKE`` prefixes and suffixes, general ``LIKE``, ``MATCHES`` (RE2), their negations,
    ``IN``, ``NOT IN``, ranges, ``BETWEEN``, ``NOT BETWEEN``, string ordering, ``OR``.
    """
    srnd = random.Random(f"shop-subs-{seed}")
    ernd = random.Random(f"shop-events-{seed}")
    meta = random.Random(f"shop-meta-{seed}")
    brands = _brands(meta, n_brands)
    cum = list(itertools.accumulate(zipf_probabilities(n_brands, zipf_alpha).tolist()))

    def brand(rnd: random.Random) -> str:
        return brands[min(bisect.bisect_right(cum, rnd.random() * cum[-1]), n_brands - 1)]

    def words(rnd: random.Random) -> str:
        return rnd.choice(ADJECTIVES + tuple(n for ns in NOUNS.values() for n in ns) + ("Edition", "Case"))

    def template(rnd: random.Random) -> Expr:
        t = rnd.randrange(16)
        category = rnd.choice(CATEGORIES)
        price = round(math.exp(rnd.uniform(2.5, 7.5)), 2)
        if t == 0:
            return And((pred("title", "contains", rnd.choice(ADJECTIVES)), pred("price", "<=", price)))
        if t == 1:
            return And((pred("category", "like", category.split(" > ")[0] + "%"),
                        pred("rating", ">=", round(rnd.uniform(3.0, 4.8), 1))))
        if t == 2:
            return And((pred("sku", "like", "%-" + category[:2].upper()), pred("in_stock", "=", True)))
        if t == 3:
            return And((pred("title", "matches", rnd.choice(REGEXES)),
                        pred("brand", "in", sorted({brand(rnd) for _ in range(3)} | {brand(rnd)}))))
        if t == 4:
            lo = round(price / 2, 2)
            return And((pred("brand", "not in", sorted({brand(rnd), brand(rnd), brand(rnd)})),
                        pred("category", "=", category), pred("price", "between", (lo, price))))
        if t == 5:
            return And((pred("title", "not like", "%Refurbished%"), pred("brand", "=", brand(rnd)),
                        pred("price", "<", price)))
        if t == 6:
            return And((pred("category", "=", category), Not(pred("title", "matches", rnd.choice(REGEXES)))))
        if t == 7:
            return And((Not(pred("sku", "like", "%-" + rnd.choice(CATEGORIES)[:2].upper())),
                        pred("title", "contains", words(rnd))))
        if t == 8:
            return And((pred("title", "not like", "%Case%Cover%"),
                        pred("category", "like", "Electronics > Phones%")))
        if t == 9:
            return And((pred("color", "!=", rnd.choice(COLORS)), pred("rating", ">", round(rnd.uniform(2, 4.5), 1)),
                        pred("price", "<", price)))
        if t == 10:
            return And((Not(pred("category", "like", "Books%")), pred("price", ">=", price),
                        pred("prime", "=", True)))
        if t == 11:
            return And((pred("title", "like", "%Pro_Max%"), pred("in_stock", "!=", False)))
        if t == 12:
            return And((pred("reviews", ">", int(math.exp(rnd.uniform(1, 8)))),
                        Not(pred("rating", "between", (2.0, round(rnd.uniform(2.5, 4.0), 1))))))
        if t == 13:
            b = brand(rnd)
            return Or((pred("brand", "like", b[:2] + "%"), And((pred("title", "contains", words(rnd)),
                                                                   pred("price", "<", price)))))
        if t == 14:
            return And((pred("color", "in", sorted({rnd.choice(COLORS), rnd.choice(COLORS), "Red"})),
                        pred("title", "like", "%" + rnd.choice(("Edition", "Case", "Max", "Kit")))))
        return And((pred("brand", ">=", rnd.choice("ABCDEFGHKLMNQRSTVZ")), pred("category", "=", category),
                    Not(pred("title", "contains", "Refurbished"))))

    subs = _subscriptions(template(srnd) for _ in range(n_subs))
    events = []
    for i in range(n_events):
        category = ernd.choice(CATEGORIES)
        leaf = category.split(" > ")[-1]
        b = brand(ernd)
        parts = [b] + ernd.sample(ADJECTIVES, ernd.randint(0, 3)) + [ernd.choice(NOUNS[leaf])]
        parts.append(f"{ernd.choice('ABCDEFGHKLMNPRSTXZ')}-{ernd.randint(1, 999):03d}")
        if category.startswith("Electronics") and ernd.random() < 0.4:
            parts.append(f"{ernd.choice((32, 64, 128, 256, 512, 1))}{ernd.choice(('GB', 'TB'))}")
        if ernd.random() < 0.1:
            parts.append("Edition")
        if ernd.random() < 0.08:
            parts.append("(Refurbished)")
        event = {
            "title": " ".join(parts), "brand": b, "category": category,
            "sku": f"SKU-{i:06d}-{category[:2].upper()}", "price": round(math.exp(ernd.uniform(2.5, 7.5)), 2),
            "reviews": int(math.exp(ernd.uniform(0, 9))), "in_stock": ernd.random() < 0.85,
            "prime": ernd.random() < 0.5,
        }
        if ernd.random() < 0.8:
            event["rating"] = round(ernd.uniform(1.0, 5.0), 1)
        if ernd.random() < 0.7:
            event["color"] = ernd.choice(COLORS)
        events.append(event)
    return Workload(subs, events)


WORKLOADS: dict[str, Callable[..., Workload]] = {
    **{f"fabret-{w.lower()}": functools.partial(fabret, w) for w in FABRET_WORKLOADS},
    "opindex": opindex,
    "opindex-zipf": functools.partial(opindex, dist="zipf"),
    "vci": vci,
    "amkh": amkh,
    "stock": stock_ticker,
    "ecommerce": ecommerce,
    "dense": dense,
}
"""Generators by name; each takes keyword arguments ``n_subs``, ``n_events``, ``seed`` and its own."""


def parameters(name: str) -> dict[str, object]:
    """Default keyword parameters of a named workload (for printing next to results)."""
    if name.startswith("fabret-"):
        spec = dict(FABRET_WORKLOADS[name.split("-", 1)[1].upper()])
        spec["fixed"] = list(spec["fixed"])
        return {"workload": name.split("-", 1)[1].upper(), "n_subs": 100_000, "n_events": 1111, "seed": 0, **spec}
    func = opindex if name.startswith("opindex") else WORKLOADS[name]
    out = {k: p.default for k, p in inspect.signature(func).parameters.items() if p.default is not p.empty}
    if name == "opindex-zipf":
        out["dist"] = "zipf"
    return out


def generate(name: str, **params) -> Workload:
    """Run a named generator."""
    try:
        func = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None
    return func(**params)


# -- CLI ------------------------------------------------------------------------------------
def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key.strip(), ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    import orjson
    from tqdm import tqdm

    parser = argparse.ArgumentParser(prog="python -m scripts.workloads", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(WORKLOADS))
    parser.add_argument("--subs", required=True, help="output JSONL of subscriptions")
    parser.add_argument("--events", required=True, help="output JSONL of events")
    parser.add_argument("--n-subs", type=int, default=None)
    parser.add_argument("--n-events", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE",
                        help="a generator parameter (Python literal), repeatable")
    args = parser.parse_args(argv)
    params: dict[str, object] = dict(args.param)
    params["seed"] = args.seed
    if args.n_subs is not None:
        params["n_subs"] = args.n_subs
    if args.n_events is not None:
        params["n_events"] = args.n_events
    try:
        workload = generate(args.name, **params)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    big = len(workload.subscriptions) + len(workload.events) > 20_000
    with open(args.subs, "wb") as out:
        for sub in tqdm(workload.subscriptions, desc="subscriptions", unit="sub", disable=not big, file=sys.stderr):
            out.write(orjson.dumps({"id": sub.id, "expr": to_text(sub.expr)}) + b"\n")
    with open(args.events, "wb") as out:
        for i, event in enumerate(tqdm(workload.events, desc="events", unit="ev", disable=not big, file=sys.stderr)):
            out.write(orjson.dumps({"id": i, **event}) + b"\n")
    print(f"{args.name}: {len(workload.subscriptions)} subscriptions -> {args.subs}, "
          f"{len(workload.events)} events -> {args.events}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    exit_with(main)

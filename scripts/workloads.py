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
* :func:`~scripts.domains.stock_ticker` and :func:`~scripts.domains.ecommerce` -- realistic workloads with strings that
  between them use every operator of the language.

CLI::

    python -m scripts.workloads NAME --subs S.jsonl --events E.jsonl \\
        --n-subs N --n-events M --seed K [--param key=value ...]
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from matchers.expr import Op, Pred, Subscription, pred, to_text
from scripts.domains import ecommerce, stock_ticker
from scripts.draws import (
    BLOCK,
    OPS,
    Workload,
    conjunctions,
    distinct_rows,
    lazy_conjunctions,
    rngs,
    sampler,
    zipf_probabilities,
)
from streaming.cli import exit_with

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
    ops = [OPS[o] for o in fixed]
    n_fixed = len(fixed)

    fixed_vals = sub_rng.integers(lo, hi + 1, size=(n_subs, n_fixed))
    if skew and n_fixed:
        fixed_vals[:, 0] = sub_rng.integers(lo, lo + skew, size=n_subs)
    free_pool = n_t - n_fixed
    free_attrs = (distinct_rows(sub_rng, sampler(sub_rng, free_pool, None), n_subs, n_free, free_pool)
                  + offset + n_fixed)
    free_vals = sub_rng.integers(lo, hi + 1, size=(n_subs, n_free))
    fixed_names = names[offset:offset + n_fixed]

    def rows() -> Iterator[list[Pred]]:
        for i in range(0, n_subs, BLOCK):  # Python lists of one block at a time
            block = zip(fixed_vals[i:i + BLOCK].tolist(), free_attrs[i:i + BLOCK].tolist(),
                        free_vals[i:i + BLOCK].tolist(), strict=True)
            for fv, fa, fr in block:
                preds = [pred(fixed_names[j], ops[j], fv[j]) for j in range(n_fixed)]
                preds += [pred(names[a], Op.EQ, v) for a, v in zip(fa, fr, strict=True)]
                yield preds

    return lazy_conjunctions(rows())


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
    attrs = distinct_rows(sub_rng, sampler(sub_rng, d, attr_p), n_subs, gamma_max, d)
    operands = sampler(sub_rng, sigma, value_p)((n_subs, gamma_max)) + 1
    u = sub_rng.random(size=(n_subs, gamma_max))
    op_codes = np.where(u < theta1, 0, np.where(u < theta1 + (1.0 - theta1) / 2.0, 1, 2))
    op_table = (Op.EQ, Op.LE, Op.GE)

    interned: dict[tuple[int, int, int], Pred] = {}

    def rows() -> Iterator[list[Pred]]:
        # Equal predicates are one (immutable) object and the arrays become Python lists a
        # block at a time: 10M subscriptions fit in memory (about 350 bytes each).
        for lo in range(0, n_subs, BLOCK):
            hi = lo + BLOCK
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

    event_attrs = distinct_rows(event_rng, sampler(event_rng, d, attr_p), n_events, m, d)
    event_vals = sampler(event_rng, sigma, value_p)((n_events, m)) + 1
    if event_size == "fixed":
        event_sizes = [m] * n_events
    else:
        event_sizes = event_rng.integers(1, m + 1, size=n_events).tolist()
    events = [{names[a]: v for a, v in zip(ra[:k], rv[:k], strict=True)}
              for k, ra, rv in zip(event_sizes, event_attrs.tolist(), event_vals.tolist(), strict=True)]
    return Workload(conjunctions(rows()), events)


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
    subs = conjunctions([pred(attr, Op.BETWEEN, (x, y))] for x, y in zip(starts.tolist(), ends.tolist(), strict=True))
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
    lo = sampler(sub_rng, domain - span, probs_lo)((n_subs, k))
    events = sampler(event_rng, domain, probs_ev)((n_events, d))
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
    return conjunctions([pred(names[a], Op.BETWEEN, (x, y)) for a, x, y in zip(*row, strict=True)] for row in rows)


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
    subs = conjunctions(
        [pred(eq_names[0], Op.EQ, v[0]), pred(eq_names[j], Op.EQ, v[1]), pred(gen_names[0], op_table[o], v[2])]
        for v, j, o in zip(vals.tolist(), second.tolist(), ops.tolist(), strict=True)
    )
    names = eq_names + gen_names
    values = event_rng.integers(6, event_hi + 1, size=(n_events, len(names)))
    events = [dict(zip(names, row, strict=True)) for row in values.tolist()]
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

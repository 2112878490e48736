"""Compile algebra terms to Python closures with the meaning of :mod:`.algebra`'s evaluators.

A compiled predicate or value is called as ``f(first, last, second, dur)``: the
attribute dicts of the ``$1``, ``$`` (and bare) and ``$2`` scopes, and the duration
``DUR`` stands for. The tests check closures against the interpretive evaluators.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from . import algebra as A

ValueFn = Callable[[dict, dict, dict, Any], Any]
PredFn = Callable[[dict, dict, dict, Any], Any]

_arith = A.arith
_compare = A.compare
_extreme = A.extreme


@lru_cache(maxsize=65536)
def value_fn(term: A.Value) -> ValueFn:
    """Closure computing ``term``."""
    if isinstance(term, A.Const):
        v = term.value
        return lambda f, c, s, d: v
    if isinstance(term, A.Attr):
        name = term.name
        if term.scope == A.SECOND:
            return lambda f, c, s, d: s.get(name)
        if term.scope == A.FIRST:
            return lambda f, c, s, d: f.get(name)
        return lambda f, c, s, d: c.get(name)
    if isinstance(term, A.Dur):
        return lambda f, c, s, d: d
    if isinstance(term, A.Neg):
        inner = value_fn(term.operand)

        def neg(f, c, s, d):
            x = inner(f, c, s, d)
            return -x if isinstance(x, (int, float)) and not isinstance(x, bool) else None

        return neg
    if isinstance(term, A.Arith):
        a, b, op = value_fn(term.left), value_fn(term.right), term.op
        return lambda f, c, s, d: _arith(op, a(f, c, s, d), b(f, c, s, d))
    if isinstance(term, A.Func):
        fns, name = tuple(value_fn(t) for t in term.args), term.name
        return lambda f, c, s, d: _extreme(name, [fn(f, c, s, d) for fn in fns])
    raise TypeError(f"not a value term: {term!r}")


_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_FAST = (int, float, str)  # exact types compared directly when both sides have the same one


def _cmp_fn(pred: A.Cmp) -> PredFn:
    """A comparison: the operator applied directly when both values have the same exact
    type among int, float and str (or a number meets a numeric constant), else
    :func:`.algebra.compare` decides (unknowns, mixed or odd types)."""
    op, left, right = pred.op, pred.left, pred.right
    if isinstance(left, A.Const) and not isinstance(right, A.Const):
        left, right, op = right, left, A.FLIP[op]
    a, cmp = value_fn(left), _OPS[op]
    if isinstance(right, A.Const):
        k = right.value
        if type(k) in (int, float):
            num = (int, float)

            def cmp_num(f, c, s, d):
                x = a(f, c, s, d)
                return cmp(x, k) if type(x) in num else _compare(op, x, k)

            return cmp_num
        return lambda f, c, s, d: _compare(op, a(f, c, s, d), k)
    b = value_fn(right)

    def cmp_values(f, c, s, d):
        x, y = a(f, c, s, d), b(f, c, s, d)
        t = type(x)
        return cmp(x, y) if t is type(y) and t in _FAST else _compare(op, x, y)

    return cmp_values


@lru_cache(maxsize=65536)
def pred_fn(pred: A.Pred) -> PredFn:
    """Closure giving the three-valued truth of ``pred``."""
    if isinstance(pred, A.Truth):
        t = pred.value
        return lambda f, c, s, d: t
    if isinstance(pred, A.Cmp):
        return _cmp_fn(pred)
    if isinstance(pred, A.Contains):
        a, b = value_fn(pred.text), value_fn(pred.pattern)

        def contains(f, c, s, d):
            t, p = a(f, c, s, d), b(f, c, s, d)
            return (p in t) if isinstance(t, str) and isinstance(p, str) else None

        return contains
    if isinstance(pred, A.Not):
        inner = pred_fn(pred.operand)

        def not_(f, c, s, d):
            v = inner(f, c, s, d)
            return None if v is None else not v

        return not_
    if isinstance(pred, (A.And, A.Or)):
        return _junction(tuple(pred_fn(p) for p in pred.parts), isinstance(pred, A.Or))
    raise TypeError(f"not a predicate: {pred!r}")


def _junction(parts: tuple[PredFn, ...], decisive: bool) -> PredFn:
    """Closure of an AND (``decisive`` false: a false part decides) or an OR (true: a true
    part does) of the closures ``parts``, in three-valued logic: undecided with an unknown
    (``None``) part, it is unknown."""

    def junction(f, c, s, d):
        out: bool | None = not decisive
        for p in parts:
            v = p(f, c, s, d)
            if v is decisive:
                return decisive
            if v is None:
                out = None
        return out

    return junction


def items_fn(items: tuple[A.SelectItem, ...], overlay: bool = False) -> Callable[[dict, dict, dict, Any, dict], dict]:
    """Closure applying a SELECT list to ``base`` (see ``algebra.select_attrs``), or with
    ``overlay`` the aggregates of a FOLD, which replace attributes of ``base``."""
    star = overlay or any(i.expr is None for i in items)
    named = tuple((i.name, value_fn(i.expr)) for i in items if i.expr is not None)

    def apply(f, c, s, d, base):
        return A.assign(dict(base) if star else {}, [(name, fn(f, c, s, d)) for name, fn in named])

    return apply

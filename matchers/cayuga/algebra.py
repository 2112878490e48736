"""The Cayuga event algebra: events, records, value and predicate terms, stream operators.

The data model follows Demers et al. (EDBT 2006), Section 2.1: an event is a tuple of
attribute values with an interval timestamp ``(t0, t1)``; events arrive in temporal
order of ``t1`` (ties in arrival order); the duration of a (complex) event is
``t1 - t0 + 1``.

Operators (Section 2.2), written here as an immutable syntax tree:

* ``Stream(name)`` - the events of one input stream (the event's stream-name field);
* ``Filter(pred, src)`` - selection sigma, ``pred`` over bare attributes and ``DUR``;
* ``Select(items, src)`` - projection and renaming (and the initialiser / finaliser of an
  aggregate): ``*`` keeps every attribute, ``expr AS name`` adds or replaces one;
* ``Union(left, right)``;
* ``Next(left, pred, right)`` - the conditional sequence ``left ;pred right``: each record
  of ``left`` followed by the first record of ``right`` that starts after it ends and
  satisfies ``pred`` (``$1.x`` or ``$.x`` the left record, ``$2.x`` the right one);
* ``Fold(left, pred, cont, aggs, right)`` - the iteration ``mu_{F,pred}(left, right)``:
  ``pred`` chooses the next event of the iteration (like ``Next``), ``cont`` (the
  selection of ``F``) must hold for the iteration to go on, ``aggs`` (the projection of
  ``F``, the accumulator) computes new attributes; ``$1.x`` is the record that started
  the iteration, ``$.x`` the record after the most recent iteration (the paper's
  ``x.last``), ``$2.x`` the new event. Every iteration emits a record.

The attributes of a combined record are those of the left record, overwritten by those of
the right one, then (``Fold``) by the aggregates; its interval is ``(left.t0, right.t1)``
and its witness the ids of the events that built it, in order.

Predicates use three-valued logic: a missing attribute, a type mismatch or a division by
zero makes a value unknown (``None``); ``NOT`` of unknown is unknown and a record passes
only when the predicate is true (the project's SQL NULL rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- events and records

Scalar = int | float | str | bool


@dataclass(frozen=True)
class Event:
    """One input event.

    Parameters
    ----------
    id : unique id of the event (kept in witnesses).
    stream : name of the stream it belongs to.
    t0, t1 : start and end timestamps (integers, ``t0 <= t1``).
    attrs : attribute name to value.
    """

    id: str
    stream: str
    t0: int
    t1: int
    attrs: dict[str, Any]


@dataclass(frozen=True)
class Record:
    """One (possibly complex) event produced by an operator.

    ``witness`` holds the ids of the events that built it, in arrival order.
    """

    attrs: dict[str, Any]
    t0: int
    t1: int
    witness: tuple[str, ...]

    def key(self) -> tuple:
        """Hashable identity: attributes, interval and witness (values of one type: ``1``,
        ``1.0`` and ``TRUE`` are three records; a NaN is the same as a NaN)."""
        attrs = tuple(sorted(((k, type(v), _NAN if v != v else v) for k, v in self.attrs.items()), key=lambda kv: kv[0]))
        return (attrs, self.t0, self.t1, self.witness)


_NAN = ("\x00nan",)


def same_attrs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two records' attributes are the same (as :meth:`Record.key`)."""
    return a.keys() == b.keys() and all(type(x) is type(y) and (x == y or (x != x and y != y))
                                        for x, y in ((a[k], b[k]) for k in a))


# ---------------------------------------------------------------- value terms

# Scopes of an attribute reference.
BARE = ""  # the record a FILTER/SELECT looks at
FIRST = "1"  # $1: the left record of NEXT, the record that started a FOLD
LAST = "$"  # $: the left record of NEXT, the record after the latest FOLD iteration
SECOND = "2"  # $2: the incoming right event


@dataclass(frozen=True, eq=False)
class Const:
    """A constant; equal to another only with the same type and sign (``TRUE`` is not
    ``1``, ``-0.0`` is not ``0.0``: caches keyed by terms, and by their text, never mix them)."""

    value: Scalar

    def _key(self) -> tuple:
        v = self.value
        return (type(v), v, math.copysign(1.0, v)) if type(v) is float else (type(v), v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Attr:
    scope: str
    name: str


@dataclass(frozen=True)
class Dur:
    """The duration ``t1 - t0 + 1`` of the record (or the would-be combined record)."""


@dataclass(frozen=True)
class Arith:
    op: str  # + - * / %
    left: Value
    right: Value


@dataclass(frozen=True)
class Neg:
    operand: Value


@dataclass(frozen=True)
class Func:
    """``min(a, b, ...)`` or ``max(a, b, ...)`` (``name`` is ``"min"`` or ``"max"``)."""

    name: str
    args: tuple[Value, ...]


FUNCTIONS = ("min", "max")

Value = Const | Attr | Dur | Arith | Neg | Func

# ---------------------------------------------------------------- predicates

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Cmp:
    op: str  # one of COMPARISONS
    left: Value
    right: Value


@dataclass(frozen=True)
class Contains:
    """``contains(text, pattern)``: substring test on two strings."""

    text: Value
    pattern: Value


@dataclass(frozen=True)
class And:
    parts: tuple[Pred, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Pred, ...]


@dataclass(frozen=True)
class Not:
    operand: Pred


@dataclass(frozen=True)
class Truth:
    value: bool


Pred = Cmp | Contains | And | Or | Not | Truth

TRUE = Truth(True)

# ---------------------------------------------------------------- stream expressions


@dataclass(frozen=True)
class SelectItem:
    """``expr AS name``; ``expr is None`` stands for ``*``."""

    expr: Value | None
    name: str | None


@dataclass(frozen=True)
class Stream:
    name: str


@dataclass(frozen=True)
class Filter:
    pred: Pred
    src: Expr


@dataclass(frozen=True)
class Select:
    items: tuple[SelectItem, ...]
    src: Expr


@dataclass(frozen=True)
class Union:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Next:
    left: Expr
    pred: Pred
    right: Expr


@dataclass(frozen=True)
class Fold:
    left: Expr
    pred: Pred
    cont: Pred
    aggs: tuple[SelectItem, ...]
    right: Expr


@dataclass(frozen=True)
class Unless:
    """Absence with a deadline ``left UNLESS{pred, window} right``: each record ``r`` of
    ``left`` for which no record ``s`` of ``right`` with ``r.t1 < s.t0`` and ``s.t1 <=
    r.t1 + window`` satisfies ``pred`` (scopes as in ``Next``; ``DUR`` is that of
    ``(r.t0, s.t1)``). The result has ``r``'s attributes and witness and the interval
    ``(r.t0, r.t1 + window)``: it is known when time passes its deadline ``r.t1 + window``."""

    left: Expr
    pred: Pred
    window: int | float
    right: Expr


@dataclass(frozen=True)
class Skip:
    """After-match skip of a whole subscription (its top): ``mode`` is ``"past_last"``
    (once a match is reported, the runs that started at or before the event that
    reported it report nothing more) or ``"to_next"`` (once a run's start event has
    reported a match, the other runs from that start event report nothing more).
    Without it every run reports (all runs)."""

    mode: str
    src: Expr


SKIP_MODES = ("past_last", "to_next")


@dataclass(frozen=True)
class Publish:
    """``... PUBLISH name``: the subscription's records also form the stream ``name``."""

    name: str
    src: Expr


Expr = Stream | Filter | Select | Union | Next | Fold | Unless | Skip | Publish

# ---------------------------------------------------------------- evaluation of terms
#
# A context maps each scope to a record's attributes; ``dur`` is the duration DUR stands
# for. These interpretive evaluators are the definition; the compiler emits closures
# with the same meaning and the tests compare the two.


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def eval_value(term: Value, ctx: dict[str, dict[str, Any]], dur: int | None) -> Any:
    """Value of ``term``; ``None`` when unknown."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Attr):
        rec = ctx.get(term.scope)
        return None if rec is None else rec.get(term.name)
    if isinstance(term, Dur):
        return dur
    if isinstance(term, Neg):
        v = eval_value(term.operand, ctx, dur)
        return -v if _is_num(v) else None
    if isinstance(term, Arith):
        a = eval_value(term.left, ctx, dur)
        b = eval_value(term.right, ctx, dur)
        return arith(term.op, a, b)
    if isinstance(term, Func):
        return extreme(term.name, [eval_value(a, ctx, dur) for a in term.args])
    raise TypeError(f"not a value term: {term!r}")


def extreme(name: str, values: list[Any]) -> Any:
    """``min``/``max`` of numbers, or of strings (by code point): the first of the
    smallest (largest); a NaN among the numbers makes it NaN; an unknown value or a
    type mismatch makes it unknown (``None``)."""
    if all(_is_num(v) for v in values):
        for v in values:
            if v != v:
                return v
    elif not all(isinstance(v, str) for v in values):
        return None
    out = values[0]
    for v in values[1:]:
        if (v < out) if name == "min" else (v > out):
            out = v
    return out


def arith(op: str, a: Any, b: Any) -> Any:
    """Arithmetic on numbers; ``+`` also concatenates two strings; else ``None``."""
    if isinstance(a, str) and isinstance(b, str) and op == "+":
        return a + b
    if not (_is_num(a) and _is_num(b)):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if op == "/":
        return a / b
    return a % b


def compare(op: str, a: Any, b: Any) -> bool | None:
    """Compare two values: numbers numerically, strings by code point, booleans for
    (in)equality only; ``None`` (unknown) on a missing value or a type mismatch."""
    if a is None or b is None:
        return None
    if _is_num(a) and _is_num(b):
        pass
    elif isinstance(a, str) and isinstance(b, str):
        pass
    elif isinstance(a, bool) and isinstance(b, bool):
        if op not in ("=", "!="):
            return None
    else:
        return None
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def eval_pred(pred: Pred, ctx: dict[str, dict[str, Any]], dur: int | None) -> bool | None:
    """Three-valued truth of ``pred``."""
    if isinstance(pred, Truth):
        return pred.value
    if isinstance(pred, Cmp):
        return compare(pred.op, eval_value(pred.left, ctx, dur), eval_value(pred.right, ctx, dur))
    if isinstance(pred, Contains):
        t = eval_value(pred.text, ctx, dur)
        p = eval_value(pred.pattern, ctx, dur)
        if isinstance(t, str) and isinstance(p, str):
            return p in t
        return None
    if isinstance(pred, Not):
        v = eval_pred(pred.operand, ctx, dur)
        return None if v is None else not v
    if isinstance(pred, And):
        out: bool | None = True
        for p in pred.parts:
            v = eval_pred(p, ctx, dur)
            if v is False:
                return False
            if v is None:
                out = None
        return out
    if isinstance(pred, Or):
        out = False
        for p in pred.parts:
            v = eval_pred(p, ctx, dur)
            if v is True:
                return True
            if v is None:
                out = None
        return out
    raise TypeError(f"not a predicate: {pred!r}")


def select_attrs(items: tuple[SelectItem, ...], ctx: dict[str, dict[str, Any]], base: dict[str, Any], dur: int | None) -> dict[str, Any]:
    """Attributes produced by a SELECT list (or a FOLD aggregate list) over ``base``.

    ``*`` copies ``base``; ``expr AS name`` sets ``name`` (an unknown value leaves the
    attribute missing). All expressions see the input, never each other's outputs.
    """
    out: dict[str, Any] = {}
    values = []
    for item in items:
        if item.expr is None:
            out.update(base)
        else:
            values.append((str(item.name), eval_value(item.expr, ctx, dur)))
    return assign(out, values)


def assign(attrs: dict[str, Any], values: list[tuple[str, Any]]) -> dict[str, Any]:
    """Set each name of ``values`` in ``attrs`` (an unknown value, None, removes it); ``attrs``."""
    for name, v in values:
        if v is None:
            attrs.pop(name, None)
        else:
            attrs[name] = v
    return attrs


def duration(t0: int, t1: int) -> int:
    """The duration of an interval: the number of clock ticks it spans."""
    return t1 - t0 + 1


def within(expr: Expr, ticks: int | float) -> Expr:
    """``expr WITHIN ticks``: the records of ``expr`` spanning at most ``ticks`` (``t1 - t0
    <= ticks``, i.e. ``DUR <= ticks + 1``).

    The bound also goes into the predicate of every ``NEXT`` and ``FOLD`` on the left-deep
    spine of ``expr``: durations only grow along it, so a record over the bound cannot
    lead to one within it, and the result is that of the outer ``FILTER`` alone; the
    inner bounds let the engine drop instances as soon as they are too old.
    """
    bound = Cmp("<=", Dur(), Const(ticks + 1))
    return Filter(bound, _bound_spine(expr, bound))


def _bound_spine(expr: Expr, bound: Pred) -> Expr:
    if isinstance(expr, Next):
        return Next(_bound_spine(expr.left, bound), conj(split_and(expr.pred) + [bound]), expr.right)
    if isinstance(expr, Fold):
        return Fold(_bound_spine(expr.left, bound), conj(split_and(expr.pred) + [bound]), expr.cont, expr.aggs, expr.right)
    if isinstance(expr, Unless):  # its records end at their deadline: only the left side is bounded
        return Unless(_bound_spine(expr.left, bound), expr.pred, expr.window, expr.right)
    if isinstance(expr, Filter):
        return Filter(expr.pred, _bound_spine(expr.src, bound))
    if isinstance(expr, Select):
        return Select(expr.items, _bound_spine(expr.src, bound))
    if isinstance(expr, Union):
        return Union(_bound_spine(expr.left, bound), _bound_spine(expr.right, bound))
    return expr


def is_view(expr: Expr) -> bool:
    """Whether ``expr`` is one stream inside ``FILTER``/``SELECT`` (a right operand of a
    left-deep automaton)."""
    while isinstance(expr, (Filter, Select)):
        expr = expr.src
    return isinstance(expr, Stream)


def split_and(pred: Pred) -> list[Pred]:
    """The conjuncts of ``pred`` (flattening nested ``And``)."""
    if isinstance(pred, And):
        out: list[Pred] = []
        for p in pred.parts:
            out.extend(split_and(p))
        return out
    if isinstance(pred, Truth) and pred.value:
        return []
    return [pred]


def conj(parts: list[Pred]) -> Pred:
    """The conjunction of ``parts`` (``TRUE`` when empty)."""
    if not parts:
        return TRUE
    if len(parts) == 1:
        return parts[0]
    return And(tuple(parts))

"""Compile algebra expressions to left-deep automata (Demers et al., Section 2.3).

A left-deep expression is a *chain*: a start view (a stream with filters and
projections, the automaton's start edge) followed by binary operators ``NEXT`` or
``FOLD``, each with a right view (the events its node waits for) and the unary
operators applied to its output (folded into its forward edge). ``UNION`` of left-deep
operands distributes into several chains of one subscription.

Every operator becomes an automaton node holding instances (records built so far):

* filter edge: an event of the right view that fails the operator's predicate
  ``theta`` (or overlaps the instance) leaves the instance unchanged;
* rebind edge (``FOLD`` only): ``theta`` and the iteration condition hold, the
  instance's record is replaced by the new iteration's;
* forward edges: ``theta`` (and for ``FOLD`` the iteration condition) and the
  unary operators after the operator hold, a new instance enters the next node (or the
  subscription accepts).

An event that makes an instance traverse no edge drops it. Edge predicates split into a
*static* part (event attribute against constant: evaluated for all edges in one pass per
event by :mod:`.static`), a *dynamic* part (event attribute against a value bound in the
instance: ``=`` through a hash on bound values, ``< <= > >=`` through bound values kept
sorted) and a residual evaluated per candidate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from matchers.errors import SubscriptionError

from . import algebra as A
from .language import right_operand_hint

Step = tuple  # ("filter", Pred) | ("select", tuple[SelectItem, ...])

RANGE_OPS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class View:
    """Events of ``stream`` passed through ``steps`` (filters and projections in order)."""

    stream: str
    steps: tuple[Step, ...]


@dataclass(frozen=True, repr=False)
class OpSpec:
    """A binary operator of a chain: ``kind`` is ``"next"``, ``"fold"`` or ``"unless"``
    (with its ``window``)."""

    kind: str
    pred: A.Pred
    cont: A.Pred
    aggs: tuple[A.SelectItem, ...]
    right: View
    window: int | float | None = None

    def __repr__(self) -> str:  # node ids hash it: without a window, the same text as before windows
        window = "" if self.window is None else f", window={self.window!r}"
        return (f"OpSpec(kind={self.kind!r}, pred={self.pred!r}, cont={self.cont!r}, aggs={self.aggs!r}, "
                f"right={self.right!r}{window})")


@dataclass(frozen=True)
class Chain:
    """A left-deep expression: the start view, then ``(operator, steps after it)`` pairs."""

    start: View
    ops: tuple[tuple[OpSpec, tuple[Step, ...]], ...]


# ---------------------------------------------------------------- linearisation


def top(expr: A.Expr) -> tuple[A.Expr, str | None, str | None]:
    """A whole subscription split into its expression, its after-match skip mode and the
    name of the stream it publishes (``None`` when absent)."""
    publish = skip = None
    if isinstance(expr, A.Publish):
        publish, expr = expr.name, expr.src
    if isinstance(expr, A.Skip):
        skip, expr = expr.mode, expr.src
    return expr, skip, publish


def chains(expr: A.Expr) -> list[Chain]:
    """The chains of a left-deep subscription (``UNION`` distributes over its operands;
    the after-match skip and ``PUBLISH`` of its top do not change them).

    Raises
    ------
    SubscriptionError
        When the right operand of ``NEXT`` or ``FOLD`` is not a single stream (with
        ``FILTER``/``SELECT`` around it): the automaton would not be left-deep; or when
        a skip or ``PUBLISH`` is not at the top.
    """
    return _chains(top(expr)[0])


def _chains(expr: A.Expr) -> list[Chain]:
    if isinstance(expr, (A.Skip, A.Publish)):
        raise SubscriptionError("SKIP and PUBLISH apply to a whole subscription", expected="them at its end")
    if isinstance(expr, A.Stream):
        return [Chain(View(expr.name, ()), ())]
    if isinstance(expr, (A.Filter, A.Select)):
        step = ("filter", expr.pred) if isinstance(expr, A.Filter) else ("select", expr.items)
        return [_append_step(c, step) for c in _chains(expr.src)]
    if isinstance(expr, A.Union):
        out = _chains(expr.left)
        for c in _chains(expr.right):
            if c not in out:
                out.append(c)
        return out
    if isinstance(expr, (A.Next, A.Fold, A.Unless)):
        name = type(expr).__name__.upper()
        rights = _chains(expr.right)
        if len(rights) != 1 or rights[0].ops:
            # algebra built in code has no positions: the operand is named instead (from text,
            # the parser refuses it first, with its position: language.parse)
            raise SubscriptionError(
                f"the right operand of {name} must be one stream, possibly inside FILTER or SELECT "
                f"(automata are left-deep), not {_short(expr.right)}; {right_operand_hint(name, expr.right)}",
                expected="a stream name on the right",
            )
        right = rights[0].start
        if isinstance(expr, A.Next):
            spec = OpSpec("next", expr.pred, A.TRUE, (), right)
        elif isinstance(expr, A.Unless):
            spec = OpSpec("unless", expr.pred, A.TRUE, (), right, expr.window)
        else:
            spec = OpSpec("fold", expr.pred, expr.cont, expr.aggs, right)
        return [Chain(c.start, c.ops + ((spec, ()),)) for c in _chains(expr.left)]
    raise TypeError(f"not a stream expression: {expr!r}")


def _short(expr: A.Expr, limit: int = 120) -> str:
    """``repr(expr)``, cut to ``limit`` characters (for messages)."""
    text = repr(expr)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _append_step(c: Chain, step: Step) -> Chain:
    if not c.ops:
        return Chain(View(c.start.stream, c.start.steps + (step,)), ())
    spec, post = c.ops[-1]
    return Chain(c.start, c.ops[:-1] + ((spec, post + (step,)),))


def node_key(c: Chain, k: int, owner: str | None) -> str:
    """Stable id of the node of operator ``k`` of chain ``c``.

    Equal prefixes give equal ids (state merging) unless ``owner`` (a subscription id)
    is given, which makes the node private.
    """
    text = _repr((c.start, c.ops[:k], c.ops[k][0], owner))
    return "n" + hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def start_key(view: View, owner: str | None) -> str:
    """Stable id of a start edge (a view), private to ``owner`` when given."""
    return "s" + hashlib.blake2b(_repr((view, owner)).encode(), digest_size=10).hexdigest()


def _repr(x) -> str:
    """``repr(x)`` of plain tuples of algebra objects, the objects' reprs cached (equal
    objects have equal reprs; registering many subscriptions repeats them)."""
    if type(x) is tuple:
        parts = [_repr(i) for i in x]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if x is None or type(x) is str:
        return repr(x)
    return _cached_repr(x)


@lru_cache(maxsize=65536)
def _cached_repr(x) -> str:
    return repr(x)


# ---------------------------------------------------------------- predicate analysis

_ABSENT = object()


class _Names:
    """Where an attribute of a view comes from: a raw event attribute, a computed value
    (``None``) or nowhere (``_ABSENT``)."""

    def __init__(self, explicit: dict | None = None, passthrough: bool = True, parent=None):
        self.explicit = explicit or {}
        self.passthrough = passthrough
        self.parent = parent

    def resolve(self, name: str):
        if name in self.explicit:
            return self.explicit[name]
        if not self.passthrough:
            return _ABSENT
        return self.parent.resolve(name) if self.parent is not None else name


def view_names(view: View) -> _Names:
    """The attribute map of ``view`` (after all its steps)."""
    names = _Names()
    for kind, arg in view.steps:
        if kind == "select":
            names = _select_names(arg, names)
    return names


def view_is_static(view: View) -> bool:
    """Whether ``view`` only filters, by conjunctions of static atoms: then an event
    satisfying its static atoms is the view's record, unchanged."""
    return all(kind == "filter" and all(_static_atom(p, A.BARE, _Names()) is not None for p in A.split_and(arg))
               for kind, arg in view.steps)


def view_static_atoms(view: View) -> list[tuple[str, str, object]]:
    """Static atoms ``(raw attribute, operator, constant)`` that every event of ``view``
    satisfies (a necessary condition; the view's steps remain the definition)."""
    names = _Names()
    atoms: list[tuple[str, str, object]] = []
    for kind, arg in view.steps:
        if kind == "select":
            names = _select_names(arg, names)
            continue
        for part in A.split_and(arg):
            atom = _static_atom(part, A.BARE, names)
            if atom is not None:
                atoms.append(atom)
    return atoms


def _select_names(items, names) -> _Names:
    explicit: dict = {}
    for item in items:
        if item.expr is None:
            continue
        if isinstance(item.expr, A.Attr) and item.expr.scope == A.BARE:
            explicit[item.name] = names.resolve(item.expr.name)
        else:
            explicit[item.name] = None
    return _Names(explicit, any(i.expr is None for i in items), names)


def _raw(term, scope: str, names: _Names):
    if isinstance(term, A.Attr) and term.scope == scope:
        r = names.resolve(term.name)
        if isinstance(r, str):
            return r
    return None


def _static_atom(part: A.Pred, scope: str, names: _Names):
    if isinstance(part, A.Cmp):
        left, right, op = part.left, part.right, part.op
        if isinstance(left, A.Const) and not isinstance(right, A.Const):
            left, right, op = right, left, A.FLIP[op]
        raw = _raw(left, scope, names)
        if raw is not None and isinstance(right, A.Const):
            return (raw, op, right.value)
    if isinstance(part, A.Contains):
        raw = _raw(part.text, scope, names)
        if raw is not None and isinstance(part.pattern, A.Const) and isinstance(part.pattern.value, str):
            return (raw, "contains", part.pattern.value)
    return None


def _uses(term, scopes: set[str]) -> bool:
    """Whether ``term`` refers to any of ``scopes`` (``"DUR"`` for the duration)."""
    if isinstance(term, A.Attr):
        return term.scope in scopes
    if isinstance(term, A.Dur):
        return "DUR" in scopes
    if isinstance(term, A.Arith):
        return _uses(term.left, scopes) or _uses(term.right, scopes)
    if isinstance(term, A.Neg):
        return _uses(term.operand, scopes)
    if isinstance(term, A.Func):
        return any(_uses(a, scopes) for a in term.args)
    return False


@dataclass(frozen=True)
class NodePreds:
    """The parts of a node's input predicate (right view and ``theta``).

    ``static``: atoms on the raw event; ``eq``: ``(raw attribute, bound term)``;
    ``rng``: ``(raw attribute, operator with the event on the left, bound term)`` or
    ``None``; ``rest``: the conjuncts of ``theta`` that are neither static atoms nor
    equalities (the range one included). Bound terms refer to ``$1``/``$`` only.
    """

    static: tuple[tuple[str, str, object], ...]
    eq: tuple[tuple[str, A.Value], ...]
    rng: tuple[str, str, A.Value] | None
    rest: tuple[A.Pred, ...]


def node_preds(spec: OpSpec) -> NodePreds:
    """Split the input predicate of an operator's node."""
    names = view_names(spec.right)
    static = list(view_static_atoms(spec.right))
    eq: list[tuple[str, A.Value]] = []
    rng = None
    rest: list[A.Pred] = []
    for part in A.split_and(spec.pred):
        atom = _static_atom(part, A.SECOND, names)
        if atom is not None:
            static.append(atom)
            continue
        rest.append(part)
        if not isinstance(part, A.Cmp):
            continue
        left, right, op = part.left, part.right, part.op
        if _raw(left, A.SECOND, names) is None:
            left, right, op = right, left, A.FLIP[op]
        raw = _raw(left, A.SECOND, names)
        if raw is None or _uses(right, {A.SECOND, A.BARE, "DUR"}):
            continue
        if op == "=":
            eq.append((raw, right))
            rest.pop()
        elif op in RANGE_OPS and rng is None:
            rng = (raw, op, right)
    eq.sort(key=lambda e: e[0])
    return NodePreds(tuple(static), tuple(eq), rng, tuple(rest))


def dur_bound(parts: list[A.Pred]) -> float | None:
    """The largest duration the conjunction of ``parts`` allows (``None``: unbounded)."""
    bound = None
    for part in parts:
        if not isinstance(part, A.Cmp):
            continue
        left, right, op = part.left, part.right, part.op
        if isinstance(right, A.Dur) and isinstance(left, A.Const):
            left, right, op = right, left, A.FLIP[op]
        if isinstance(left, A.Dur) and isinstance(right, A.Const) and op in ("<", "<=", "="):
            c = right.value
            if isinstance(c, (int, float)) and not isinstance(c, bool):
                bound = c if bound is None else min(bound, c)
    return bound


def leading_filters(steps: tuple[Step, ...]) -> list[A.Pred]:
    """Conjuncts of the filter steps before the first projection (they see the
    operator's own output, so their ``DUR`` is the output's)."""
    out: list[A.Pred] = []
    for kind, arg in steps:
        if kind != "filter":
            break
        out.extend(A.split_and(arg))
    return out


# ---------------------------------------------------------------- partitioning


class _Combined:
    """Provenance of a combined record: the right view's attribute where the event has
    it, else the left record's (an aggregate's name comes from neither)."""

    def __init__(self, left: _Names | _Combined, right: _Names, aggs: tuple[A.SelectItem, ...]):
        self.left, self.right = left, right
        self.aggs = {i.name for i in aggs}

    def resolve(self, name: str):
        if name in self.aggs:
            return None
        r, lft = self.right.resolve(name), self.left.resolve(name)
        if r is _ABSENT:
            return lft
        return r if r == lft else None


def partition_attribute(chs: list[Chain]) -> str | None:
    """The raw event attribute every instance of the subscription agrees on, if any.

    An attribute ``a`` partitions a subscription when every operator's predicate has a
    conjunct ``$2.a' = $.a''`` (or ``$1.a''``) where both sides carry the raw ``a`` of the
    events that built them: all events of an instance then share the value of ``a``, and
    the subscription can run on each value's events separately. ``None`` when there is
    no such attribute (or the subscription has no operator).
    """
    found: set[str] | None = None
    for c in chs:
        if not c.ops:
            return None
        left: _Names | _Combined = view_names(c.start)
        chain_cands: set[str] | None = None
        for spec, post in c.ops:
            right = view_names(spec.right)
            comb = _Combined(left, right, spec.aggs)
            cands = set()
            for raw, term in node_preds(spec).eq:
                if not isinstance(term, A.Attr):
                    continue
                if term.scope == A.FIRST and left.resolve(term.name) == raw:
                    cands.add(raw)
                elif term.scope == A.LAST and left.resolve(term.name) == raw and (
                    spec.kind != "fold" or comb.resolve(term.name) == raw
                ):
                    cands.add(raw)
            if spec.kind == "unless":
                # a record that no event can kill (it lacks the attribute) is reported all the
                # same: only records a partitioning operator before built carry it for sure
                cands &= chain_cands or set()
            else:  # an absence's record is the left one
                left = comb
            chain_cands = cands if chain_cands is None else chain_cands & cands
            for kind, arg in post:
                if kind == "select":
                    left = _select_names(arg, left)
        found = chain_cands if found is None else found & (chain_cands or set())
        if not found:
            return None
    return min(found) if found else None

"""Subscription expressions: predicates, boolean trees, and their normal forms.

A predicate is ``(attribute, operator, operand)``; its operand is checked and put in a
canonical form when it is built (:func:`pred`), so that type errors surface at
registration and equal predicates compare equal (``10`` and ``10.0`` are one
predicate).  ``NOT`` is pushed down to the predicates (every operator has a
complement), so the normal forms (:func:`dnf`, :func:`cnf`) are NOT-free.

Semantics (shared by every matcher, defined by :mod:`matchers.oracle`): a predicate on
an attribute the event lacks is false, negated ones too, except ``NOT EXISTS`` (the
only operator true on a missing attribute); a value whose type differs from the
operand's makes the predicate false; ``null`` is a value (of its own type), distinct
from absent; numbers compare as float64; strings order by code point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from matchers.errors import SubscriptionError
from matchers.operands import (
    check_regex,
    cidr_network,
    like_escape,
    like_parse,
    literal,
    wildcard_to_like,
)

DEFAULT_MAX_TERMS = 256
"""Default bound on the number of conjunctions (DNF) or clauses (CNF) of a subscription."""


class Kind(IntEnum):
    """Type of a value: what an operand or an event value is."""

    NUM = 0
    STR = 1
    BOOL = 2
    NULL = 3
    """JSON ``null`` in an event; the kind of the operand-less operators (``EXISTS``, ``IS NULL``)."""


class Op(IntEnum):
    """Operators. Each has a complement (see :data:`COMPLEMENT`)."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5
    IN = 6
    NOT_IN = 7
    BETWEEN = 8
    NOT_BETWEEN = 9
    PREFIX = 10
    NOT_PREFIX = 11
    SUFFIX = 12
    NOT_SUFFIX = 13
    CONTAINS = 14
    NOT_CONTAINS = 15
    LIKE = 16
    NOT_LIKE = 17
    MATCHES = 18
    NOT_MATCHES = 19
    EXISTS = 20
    NOT_EXISTS = 21
    IS_NULL = 22
    IS_NOT_NULL = 23
    EQ_ICASE = 24
    NE_ICASE = 25
    IN_ICASE = 26
    NOT_IN_ICASE = 27
    CIDR = 28
    NOT_CIDR = 29
    PREFIX_ICASE = 30
    NOT_PREFIX_ICASE = 31
    SUFFIX_ICASE = 32
    NOT_SUFFIX_ICASE = 33
    ANYTHING_BUT = 34
    """EventBridge's ``anything-but``: the operand is a positive predicate on the same attribute
    (see :func:`anything_but`); true on a present value that it does not hold on (a value of
    another kind, ``null`` included), false on a missing attribute.  Its complement is that
    predicate (false on a missing attribute too)."""


COMPLEMENT: dict[Op, Op] = {
    Op.EQ: Op.NE, Op.NE: Op.EQ,
    Op.LT: Op.GE, Op.GE: Op.LT,
    Op.LE: Op.GT, Op.GT: Op.LE,
    Op.IN: Op.NOT_IN, Op.NOT_IN: Op.IN,
    Op.BETWEEN: Op.NOT_BETWEEN, Op.NOT_BETWEEN: Op.BETWEEN,
    Op.PREFIX: Op.NOT_PREFIX, Op.NOT_PREFIX: Op.PREFIX,
    Op.SUFFIX: Op.NOT_SUFFIX, Op.NOT_SUFFIX: Op.SUFFIX,
    Op.CONTAINS: Op.NOT_CONTAINS, Op.NOT_CONTAINS: Op.CONTAINS,
    Op.LIKE: Op.NOT_LIKE, Op.NOT_LIKE: Op.LIKE,
    Op.MATCHES: Op.NOT_MATCHES, Op.NOT_MATCHES: Op.MATCHES,
    Op.EXISTS: Op.NOT_EXISTS, Op.NOT_EXISTS: Op.EXISTS,
    Op.IS_NULL: Op.IS_NOT_NULL, Op.IS_NOT_NULL: Op.IS_NULL,
    Op.EQ_ICASE: Op.NE_ICASE, Op.NE_ICASE: Op.EQ_ICASE,
    Op.IN_ICASE: Op.NOT_IN_ICASE, Op.NOT_IN_ICASE: Op.IN_ICASE,
    Op.CIDR: Op.NOT_CIDR, Op.NOT_CIDR: Op.CIDR,
    Op.PREFIX_ICASE: Op.NOT_PREFIX_ICASE, Op.NOT_PREFIX_ICASE: Op.PREFIX_ICASE,
    Op.SUFFIX_ICASE: Op.NOT_SUFFIX_ICASE, Op.NOT_SUFFIX_ICASE: Op.SUFFIX_ICASE,
}
"""The complement of every operator but :attr:`Op.ANYTHING_BUT` (whose complement is its operand)."""

ORDER_OPS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE})
SET_OPS = frozenset({Op.IN, Op.NOT_IN, Op.IN_ICASE, Op.NOT_IN_ICASE})
RANGE_OPS = frozenset({Op.BETWEEN, Op.NOT_BETWEEN})
ICASE_OPS = frozenset({Op.EQ_ICASE, Op.NE_ICASE, Op.IN_ICASE, Op.NOT_IN_ICASE})
"""Equality and membership after Unicode case folding (``str.casefold``); operands are kept folded."""
AFFIX_ICASE_OPS = frozenset({Op.PREFIX_ICASE, Op.NOT_PREFIX_ICASE, Op.SUFFIX_ICASE, Op.NOT_SUFFIX_ICASE})
"""Prefix and suffix of the case-folded value (``str.casefold``); operands are kept folded."""
STRING_OPS = frozenset({
    Op.PREFIX, Op.NOT_PREFIX, Op.SUFFIX, Op.NOT_SUFFIX, Op.CONTAINS, Op.NOT_CONTAINS,
    Op.LIKE, Op.NOT_LIKE, Op.MATCHES, Op.NOT_MATCHES, Op.CIDR, Op.NOT_CIDR,
} | ICASE_OPS | AFFIX_ICASE_OPS)
PRESENCE_OPS = frozenset({Op.EXISTS, Op.NOT_EXISTS, Op.IS_NULL, Op.IS_NOT_NULL})
"""Operators without an operand: they test whether the attribute is present, and whether it is null."""
NEGATIVE_OPS = frozenset({
    Op.NE, Op.NOT_IN, Op.NOT_BETWEEN, Op.NOT_PREFIX, Op.NOT_SUFFIX, Op.NOT_CONTAINS,
    Op.NOT_LIKE, Op.NOT_MATCHES, Op.NOT_EXISTS, Op.IS_NOT_NULL, Op.NE_ICASE, Op.NOT_IN_ICASE, Op.NOT_CIDR,
    Op.NOT_PREFIX_ICASE, Op.NOT_SUFFIX_ICASE, Op.ANYTHING_BUT,
})
INDEXED_OPS = frozenset(Op(i) for i in range(20)) | ICASE_OPS | AFFIX_ICASE_OPS | {Op.CIDR, Op.NOT_CIDR}
"""The operators every index evaluates itself (false on a missing attribute and on a
value of another type; the string ones beyond ``=``, ``!=``, ``IN``, ``NOT IN`` through
:class:`matchers.strings.StringEvaluator`); the others, those of :data:`PRESENCE_OPS`, every
index evaluates as equality tests of presence states (:mod:`matchers.presence`), and
:attr:`Op.ANYTHING_BUT` as a negated string test of a *view* of the value (:mod:`matchers.views`)."""
BUT_OPS = frozenset({Op.EQ, Op.IN, Op.PREFIX, Op.SUFFIX, Op.CONTAINS, Op.LIKE, Op.EQ_ICASE, Op.IN_ICASE,
                     Op.PREFIX_ICASE, Op.SUFFIX_ICASE})
"""The operators of the predicate an :attr:`Op.ANYTHING_BUT` negates."""

OP_SYMBOL: dict[Op, str] = {
    Op.EQ: "=", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=",
    Op.IN: "IN", Op.NOT_IN: "NOT IN", Op.BETWEEN: "BETWEEN", Op.NOT_BETWEEN: "NOT BETWEEN",
    Op.PREFIX: "PREFIX", Op.NOT_PREFIX: "NOT PREFIX", Op.SUFFIX: "SUFFIX",
    Op.NOT_SUFFIX: "NOT SUFFIX", Op.CONTAINS: "CONTAINS", Op.NOT_CONTAINS: "NOT CONTAINS",
    Op.LIKE: "LIKE", Op.NOT_LIKE: "NOT LIKE", Op.MATCHES: "MATCHES", Op.NOT_MATCHES: "NOT MATCHES",
    Op.EXISTS: "EXISTS", Op.NOT_EXISTS: "NOT EXISTS", Op.IS_NULL: "IS NULL", Op.IS_NOT_NULL: "IS NOT NULL",
    Op.EQ_ICASE: "= IGNORE CASE", Op.NE_ICASE: "!= IGNORE CASE", Op.IN_ICASE: "IN IGNORE CASE",
    Op.NOT_IN_ICASE: "NOT IN IGNORE CASE", Op.CIDR: "IN CIDR", Op.NOT_CIDR: "NOT IN CIDR",
    Op.PREFIX_ICASE: "PREFIX IGNORE CASE", Op.NOT_PREFIX_ICASE: "NOT PREFIX IGNORE CASE",
    Op.SUFFIX_ICASE: "SUFFIX IGNORE CASE", Op.NOT_SUFFIX_ICASE: "NOT SUFFIX IGNORE CASE",
    Op.ANYTHING_BUT: "ANYTHING BUT",
}

OP_BY_NAME: dict[str, Op] = {
    "=": Op.EQ, "==": Op.EQ, "!=": Op.NE, "<>": Op.NE,
    "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE,
    "in": Op.IN, "not in": Op.NOT_IN, "between": Op.BETWEEN, "not between": Op.NOT_BETWEEN,
    "prefix": Op.PREFIX, "not prefix": Op.NOT_PREFIX, "suffix": Op.SUFFIX,
    "not suffix": Op.NOT_SUFFIX, "contains": Op.CONTAINS, "not contains": Op.NOT_CONTAINS,
    "like": Op.LIKE, "not like": Op.NOT_LIKE, "matches": Op.MATCHES, "not matches": Op.NOT_MATCHES,
    "exists": Op.EXISTS, "not exists": Op.NOT_EXISTS, "is null": Op.IS_NULL, "is not null": Op.IS_NOT_NULL,
    "= ignore case": Op.EQ_ICASE, "!= ignore case": Op.NE_ICASE, "in ignore case": Op.IN_ICASE,
    "not in ignore case": Op.NOT_IN_ICASE, "in cidr": Op.CIDR, "not in cidr": Op.NOT_CIDR,
    "prefix ignore case": Op.PREFIX_ICASE, "not prefix ignore case": Op.NOT_PREFIX_ICASE,
    "suffix ignore case": Op.SUFFIX_ICASE, "not suffix ignore case": Op.NOT_SUFFIX_ICASE,
}
"""Operator names accepted by the JSON form (lower case, single spaces)."""

Scalar = float | str | bool
Value = Scalar | None
"""A value of a flat event: a scalar, or ``None`` for JSON ``null``."""

KEYWORDS = frozenset({"and", "or", "not", "in", "between", "like", "matches", "true", "false",
                      "exists", "is", "null", "wildcard"})
"""Keywords of the text form (any letter case): an attribute spelt like one is back-quoted."""

_KIND_WORDS = {Kind.NUM: "numbers", Kind.STR: "strings", Kind.BOOL: "booleans"}


def kind_of(value: object) -> Kind | None:
    """The :class:`Kind` of a Python value (``None`` is null), or ``None`` for an unsupported one."""
    if value is None:
        return Kind.NULL
    if isinstance(value, bool):
        return Kind.BOOL
    if isinstance(value, (int, float)):
        return Kind.NUM
    if isinstance(value, str):
        return Kind.STR
    return None


def _scalar(value: object, what: str) -> tuple[Scalar, Kind]:
    kind = kind_of(value)
    if kind is None or kind is Kind.NULL:
        shown = "null; test for null with IS NULL" if value is None else repr(value)
        raise SubscriptionError(f"{what} must be a number, a string or a boolean, not {shown}")
    if kind is Kind.NUM:
        try:
            number = float(value)  # type: ignore[arg-type]  # kind NUM: an int or a float
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise SubscriptionError(f"{what} must be a finite number, not {value!r}")
        return number, kind
    return value, kind  # type: ignore[return-value]  # kind_of found a scalar


@dataclass(frozen=True, slots=True)
class Pred:
    """One predicate in canonical form; build it with :func:`pred`.

    ``operand`` is ``None`` (the operators of :data:`PRESENCE_OPS`, of kind ``NULL``),
    a scalar, a sorted tuple of distinct scalars (``IN``, ``NOT IN``),
    a ``(low, high)`` pair (``BETWEEN``, ``NOT BETWEEN``) or the pattern string of a
    string operator (``LIKE`` keeps the SQL pattern; ``PREFIX``, ``SUFFIX`` and
    ``CONTAINS`` hold the plain text).  ``kind`` is the operand's type.
    Typed ``Any``: which of these it is follows ``op``, which a type checker cannot narrow on.
    """

    attr: str
    op: Op
    operand: Any
    kind: Kind

    def __hash__(self) -> int:
        # ints, not the enums: Enum.__hash__ is Python code, and predicates are hashed a lot
        return hash((self.attr, int(self.op), self.operand, int(self.kind)))

    def __reduce__(self) -> tuple:
        # the enums as ints: unpickling a member calls its enum class (Python code), twice a
        # predicate; a pickled matcher's subscriptions are unpickled one by one as they change
        return _pred_of, (self.attr, int(self.op), self.operand, int(self.kind))

    def negate(self) -> Pred:
        """The complementary predicate (false on a missing attribute, like this one, except
        that ``EXISTS`` and ``NOT EXISTS`` are each other's complement; that of ``ANYTHING BUT``
        is its operand)."""
        if self.op is Op.ANYTHING_BUT:
            return self.operand
        return Pred(self.attr, COMPLEMENT[self.op], self.operand, self.kind)

    def sort_key(self) -> tuple:
        return (self.attr, int(self.op), int(self.kind), repr(self.operand))

    def __str__(self) -> str:
        attr = self.attr if _is_plain_name(self.attr) else "`" + self.attr.replace("`", "``") + "`"
        if self.op in (Op.EXISTS, Op.NOT_EXISTS):
            return f"{OP_SYMBOL[self.op]} {attr}"
        if self.op is Op.ANYTHING_BUT:
            return f"ANYTHING BUT ({self.operand})"
        if self.op in AFFIX_ICASE_OPS:
            text = like_escape(self.operand)
            pattern = text + "%" if self.op in (Op.PREFIX_ICASE, Op.NOT_PREFIX_ICASE) else "%" + text
            neg = "NOT " if self.op in NEGATIVE_OPS else ""
            return f"{attr} {neg}LIKE {literal(pattern)} IGNORE CASE"
        if self.op in PRESENCE_OPS:
            return f"{attr} {OP_SYMBOL[self.op]}"
        if self.op in ICASE_OPS:
            symbol = OP_SYMBOL[self.op].removesuffix(" IGNORE CASE")
            if isinstance(self.operand, tuple):
                return f"{attr} {symbol} (" + ", ".join(literal(v) for v in self.operand) + ") IGNORE CASE"
            return f"{attr} {symbol} {literal(self.operand)} IGNORE CASE"
        if self.op in SET_OPS:
            body = "(" + ", ".join(literal(v) for v in self.operand) + ")"
            return f"{attr} {OP_SYMBOL[self.op]} {body}"
        if self.op in RANGE_OPS:
            lo, hi = self.operand
            return f"{attr} {OP_SYMBOL[self.op]} {literal(lo)} AND {literal(hi)}"
        if self.op in (Op.PREFIX, Op.NOT_PREFIX, Op.SUFFIX, Op.NOT_SUFFIX, Op.CONTAINS, Op.NOT_CONTAINS):
            text = like_escape(self.operand)
            pattern = {
                Op.PREFIX: text + "%", Op.SUFFIX: "%" + text, Op.CONTAINS: "%" + text + "%" if text else "%",
            }[COMPLEMENT[self.op] if self.op in NEGATIVE_OPS else self.op]
            neg = "NOT " if self.op in NEGATIVE_OPS else ""
            return f"{attr} {neg}LIKE {literal(pattern)}"
        return f"{attr} {OP_SYMBOL[self.op]} {literal(self.operand)}"


_OP_OF, _KIND_OF = tuple(Op), tuple(Kind)


def _pred_of(attr: str, op: int, operand: Any, kind: int) -> Pred:
    """The predicate :meth:`Pred.__reduce__` pickled."""
    return Pred(attr, _OP_OF[op], operand, _KIND_OF[kind])


def _is_plain_name(name: str) -> bool:
    if name.lower() in KEYWORDS:
        return False
    parts = name.split(".")
    return all(p and (p[0].isalpha() or p[0] == "_") and all(c.isalnum() or c == "_" for c in p) and p.isascii()
               for p in parts)


def _classify_like(attr: str, negated: bool, pattern: str) -> Pred:
    tokens = like_parse(pattern)
    kinds = [k for k, _ in tokens]
    lits = [t for k, t in tokens if k == "lit"]
    op: Op | None = None
    text = ""
    if "one" not in kinds:
        if kinds == [] or kinds == ["lit"]:
            op, text = Op.EQ, (lits[0] if lits else "")
        elif kinds == ["lit", "any"]:
            op, text = Op.PREFIX, lits[0]
        elif kinds == ["any", "lit"]:
            op, text = Op.SUFFIX, lits[0]
        elif kinds in (["any", "lit", "any"], ["any"]):
            op, text = Op.CONTAINS, (lits[0] if lits else "")
    if op is None:
        return Pred(attr, Op.NOT_LIKE if negated else Op.LIKE, pattern, Kind.STR)
    return Pred(attr, COMPLEMENT[op] if negated else op, text, Kind.STR)


def pred(attr: str, op: Op | str, operand: object) -> Pred:
    """Build a checked, canonical predicate.

    Raises :class:`SubscriptionError` for a type error: an ordering operator on a
    boolean, mixed types in ``IN`` or ``BETWEEN``, an empty ``IN`` list, an inverted
    ``BETWEEN``, a string operator on a non-string, an invalid regular expression.
    ``IN`` of one value becomes ``=``; ``LIKE`` without ``_`` that is a pure prefix,
    suffix or contains pattern becomes ``PREFIX``, ``SUFFIX`` or ``CONTAINS`` (and
    ``=`` without wildcards).
    """
    if isinstance(op, str):
        try:
            spelt = " ".join(op.lower().split())
            if spelt in ("wildcard", "not wildcard"):
                if not isinstance(operand, str):
                    raise SubscriptionError(f"{spelt.upper()} needs a string operand, not {operand!r}")
                op, operand = (Op.LIKE if spelt == "wildcard" else Op.NOT_LIKE), wildcard_to_like(operand)
            else:
                op = OP_BY_NAME[spelt]
        except KeyError:
            raise SubscriptionError(f"unknown operator {op!r}", expected="one of " + ", ".join(sorted(OP_BY_NAME))) from None
    if not isinstance(attr, str) or not attr:
        raise SubscriptionError(f"attribute name must be a non-empty string, not {attr!r}")
    if "\x00" in attr:  # the names of presence states (matchers.presence) hold one
        raise SubscriptionError(f"attribute name must not hold a NUL character: {attr!r}")
    name = OP_SYMBOL[op]
    if op is Op.ANYTHING_BUT:
        return anything_but(operand)  # type: ignore[arg-type]  # checked there
    if op in PRESENCE_OPS:
        if operand is not None:
            raise SubscriptionError(f"{name} takes no operand, not {operand!r}")
        return Pred(attr, op, None, Kind.NULL)
    if op in SET_OPS:
        if isinstance(operand, (str, bytes)) or not hasattr(operand, "__iter__"):
            raise SubscriptionError(f"{name} needs a list of values, not {operand!r}")
        values = [_scalar(v, f"a value of {name}") for v in operand]
        if not values:
            raise SubscriptionError(f"{name} needs at least one value: the list is empty")
        kinds = {k for _, k in values}
        if len(kinds) > 1:
            raise SubscriptionError(f"{name} list mixes types: " + " and ".join(sorted(_KIND_WORDS[k] for k in kinds)))
        kind = kinds.pop()
        if op in ICASE_OPS and kind is not Kind.STR:
            raise SubscriptionError(f"{name} needs strings, not {_KIND_WORDS[kind]}")
        distinct = tuple(sorted({v.casefold() if op in ICASE_OPS else v for v, _ in values}))  # type: ignore[union-attr]  # case folding: all strings (checked above)
        if len(distinct) == 1:
            return Pred(attr, _SINGLE[op], distinct[0], kind)
        return Pred(attr, op, distinct, kind)
    if op in RANGE_OPS:
        if isinstance(operand, (str, bytes)) or not hasattr(operand, "__len__") or len(operand) != 2:
            raise SubscriptionError(f"{name} needs two bounds, not {operand!r}")
        (lo, klo), (hi, khi) = (_scalar(v, f"a bound of {name}") for v in operand)  # type: ignore[attr-defined]  # a sized pair
        if klo is not khi:
            raise SubscriptionError(f"{name} bounds have different types: {_KIND_WORDS[klo]} and {_KIND_WORDS[khi]}")
        if klo is Kind.BOOL:
            raise SubscriptionError(f"{name} cannot order booleans")
        if lo > hi:  # type: ignore[operator]  # bounds of one kind, not booleans
            raise SubscriptionError(f"{name} bounds are inverted: {literal(lo)} > {literal(hi)}")
        return Pred(attr, op, (lo, hi), klo)
    value, kind = _scalar(operand, f"the operand of {name}")
    if op in ORDER_OPS and kind is Kind.BOOL:
        raise SubscriptionError(f"{name} cannot order booleans: compare them with = or !=")
    if op in STRING_OPS:
        if not isinstance(value, str):  # kind STR
            raise SubscriptionError(f"{name} needs a string operand, not {literal(value)}")
        if op in (Op.LIKE, Op.NOT_LIKE):
            return _classify_like(attr, op is Op.NOT_LIKE, value)
        if op in (Op.MATCHES, Op.NOT_MATCHES):
            check_regex(value)
        if op in ICASE_OPS or op in AFFIX_ICASE_OPS:
            value = value.casefold()
        if op in (Op.CIDR, Op.NOT_CIDR):
            value = cidr_network(value)
        if value == "" and op in _AFFIX_OPS:
            op = Op.NOT_CONTAINS if op in NEGATIVE_OPS else Op.CONTAINS  # one form of "any string"
    return Pred(attr, op, value, kind)


def anything_but(inner: Pred) -> Pred:
    """EventBridge's ``anything-but`` of a positive predicate (one of :data:`BUT_OPS`): true on a
    present value that ``inner`` does not hold on, whatever its kind (``null`` included)."""
    if not isinstance(inner, Pred) or inner.op not in BUT_OPS:
        shown = OP_SYMBOL[inner.op] if isinstance(inner, Pred) else repr(inner)
        raise SubscriptionError(f"ANYTHING BUT negates one predicate of =, IN, a prefix, a suffix, LIKE or "
                                f"their IGNORE CASE forms, not {shown}",
                                expected="e.g. ANYTHING BUT (state IN ('pending', 'stopped'))")
    return Pred(inner.attr, Op.ANYTHING_BUT, inner, inner.kind)


def like_ignore_case(attr: str, pattern: str, negated: bool = False) -> Pred:
    """``attr LIKE pattern IGNORE CASE``: the pattern is a prefix (``'ab%'``), a suffix (``'%ab'``),
    a whole value (``'ab'``) or any string (``'%'``), compared after case folding."""
    tokens = like_parse(pattern)
    kinds = [k for k, _ in tokens]
    text = "".join(t for k, t in tokens if k == "lit")
    shapes: dict[tuple[str, ...], Op] = {(): Op.EQ_ICASE, ("lit",): Op.EQ_ICASE, ("lit", "any"): Op.PREFIX_ICASE,
                                         ("any", "lit"): Op.SUFFIX_ICASE, ("any",): Op.PREFIX_ICASE}
    op = shapes.get(tuple(kinds))
    if op is None:
        raise SubscriptionError(f"LIKE ... IGNORE CASE takes a prefix, a suffix or a whole value, not {literal(pattern)}",
                                expected="a pattern such as 'ab%', '%ab' or 'ab'")
    return pred(attr, COMPLEMENT[op] if negated else op, text)


_AFFIX_OPS = frozenset({Op.PREFIX, Op.SUFFIX, Op.NOT_PREFIX, Op.NOT_SUFFIX}) | AFFIX_ICASE_OPS
_SINGLE = {Op.IN: Op.EQ, Op.NOT_IN: Op.NE, Op.IN_ICASE: Op.EQ_ICASE, Op.NOT_IN_ICASE: Op.NE_ICASE}


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: Expr


Expr = Pred | And | Or | Not
Conjunction = tuple[Pred, ...]
Clause = tuple[Pred, ...]


def nnf(expr: Expr, negate: bool = False) -> Expr:
    """Push ``NOT`` down to the predicates (De Morgan, operator complements)."""
    if isinstance(expr, Pred):
        return expr.negate() if negate else expr
    if isinstance(expr, Not):
        return nnf(expr.child, not negate)
    children = tuple(nnf(c, negate) for c in expr.children)
    is_and = isinstance(expr, And) != negate
    return And(children) if is_and else Or(children)


def _normal_form(expr: Expr, outer_is_or: bool, max_terms: int, what: str) -> tuple[tuple[Pred, ...], ...]:
    """DNF (outer OR of ANDs) or CNF (outer AND of ORs) as sorted, absorbed term sets."""

    def walk(e: Expr) -> list[frozenset[Pred]]:
        if isinstance(e, Pred):
            return [frozenset((e,))]
        parts = [walk(c) for c in e.children]  # type: ignore[union-attr]  # an And or an Or: NOT is pushed to the predicates before
        if isinstance(e, Or) == outer_is_or:
            terms = [t for p in parts for t in p]
        else:
            terms = [frozenset()]
            for p in parts:
                if len(terms) * len(p) > max_terms:
                    raise SubscriptionError(
                        f"the expression expands to more than {max_terms} {what}; simplify it or raise the bound"
                    )
                terms = [a | b for a in terms for b in p]
        terms = _absorb(terms)
        if len(terms) > max_terms:
            raise SubscriptionError(
                f"the expression expands to more than {max_terms} {what}; simplify it or raise the bound"
            )
        return terms

    terms = walk(nnf(expr))
    return tuple(sorted((tuple(sorted(t, key=Pred.sort_key)) for t in terms),
                        key=lambda t: [p.sort_key() for p in t]))


def _absorb(terms: list[frozenset[Pred]]) -> list[frozenset[Pred]]:
    """Drop duplicate terms and terms that contain another term (absorption law)."""
    unique = sorted(set(terms), key=len)
    kept: list[frozenset[Pred]] = []
    for t in unique:
        if not any(k <= t for k in kept):
            kept.append(t)
    return kept


def dnf(expr: Expr, max_terms: int = DEFAULT_MAX_TERMS) -> tuple[Conjunction, ...]:
    """Disjunctive normal form: a tuple of conjunctions, each a sorted tuple of distinct predicates.

    Raises :class:`SubscriptionError` when it would have more than ``max_terms`` conjunctions.
    """
    return _normal_form(expr, True, max_terms, "conjunctions in DNF")


def cnf(expr: Expr, max_terms: int = DEFAULT_MAX_TERMS) -> tuple[Clause, ...]:
    """Conjunctive normal form: a tuple of disjunctive clauses, each a sorted tuple of distinct predicates.

    Raises :class:`SubscriptionError` when it would have more than ``max_terms`` clauses.
    """
    return _normal_form(expr, False, max_terms, "clauses in CNF")


def predicates(expr: Expr) -> list[Pred]:
    """Every predicate of the tree, in order, with repeats."""
    if isinstance(expr, Pred):
        return [expr]
    if isinstance(expr, Not):
        return predicates(expr.child)
    return [p for c in expr.children for p in predicates(c)]


def to_text(expr: Expr) -> str:
    """Text form of an expression (parses back to an equal expression)."""
    if isinstance(expr, Pred):
        return str(expr)
    if isinstance(expr, Not):
        return f"NOT ({to_text(expr.child)})"
    sep = " AND " if isinstance(expr, And) else " OR "
    return sep.join(f"({to_text(c)})" if not isinstance(c, Pred) else to_text(c) for c in expr.children)


@dataclass(frozen=True, slots=True)
class Subscription:
    """A registered boolean subscription.

    ``conjunctions`` is the DNF used by the matchers; ``expires`` an optional expiry
    time (seconds since the epoch).
    """

    id: str
    expr: Expr
    conjunctions: tuple[Conjunction, ...] = field(compare=False)
    expires: float | None = None

    @classmethod
    def of(cls, sub_id: str, expr: Expr, max_terms: int = DEFAULT_MAX_TERMS,
           expires: float | None = None) -> Subscription:
        """Normalise ``expr`` and build the subscription (errors name ``sub_id``)."""
        try:
            conjunctions = dnf(expr, max_terms)
        except SubscriptionError as exc:
            raise exc.with_id(sub_id) from None
        if not conjunctions or any(not c for c in conjunctions):
            raise SubscriptionError("the expression has no predicate to test", sub_id)
        return cls(sub_id, expr, conjunctions, expires)

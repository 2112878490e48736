"""The reference semantics, in plain Python: the definition every index is tested against.

Written for clarity, not speed.  It evaluates the expression tree itself (not a
normal form), over the flat event (see :func:`matchers.events.flatten`).  An event
with arrays is :class:`~matchers.events.Rows` of flat events, one per choice of one
element of each array: it satisfies an expression when one of its rows does (every
predicate, negated ones too, looks at one element: ``tags != 'a'`` holds when some
element differs, as EventBridge's ``anything-but`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from matchers.events import Rows
from matchers.expr import And, Expr, Kind, Not, Op, Pred, Subscription, Value, kind_of
from matchers.operands import like_parse


def holds(p: Pred, event: Mapping[str, Value]) -> bool:
    """Whether predicate ``p`` holds on ``event`` (``None`` values are JSON ``null``).

    ``EXISTS``: the attribute is present (null included); ``NOT EXISTS``: it is not;
    ``IS NULL`` / ``IS NOT NULL``: it is present and null / not null.  Every other
    predicate is false when the attribute is missing or its value's type (null
    included) differs from the operand's, for negated operators too (SQL's NULL rule).
    ``ANYTHING BUT`` (EventBridge's ``anything-but``) holds on a present value its operand, a
    predicate, does not hold on: a value of another kind, null included, satisfies it.
    """
    if p.op is Op.NOT_EXISTS:
        return p.attr not in event
    if p.attr not in event:
        return False
    # Any, as the operand: its type follows p.kind, checked at run time just below
    value: Any = event[p.attr]
    if p.op is Op.EXISTS:
        return True
    if p.op is Op.ANYTHING_BUT:  # a present value the inner predicate does not hold on, of any kind
        return not holds(p.operand, event)
    if p.op is Op.IS_NULL:
        return value is None
    if p.op is Op.IS_NOT_NULL:
        return value is not None
    if kind_of(value) is not p.kind:
        return False
    if p.kind is Kind.NUM:
        value = float(value)
    op, x = p.op, p.operand
    if op is Op.EQ:
        return value == x
    if op is Op.NE:
        return value != x
    if op is Op.LT:
        return value < x
    if op is Op.LE:
        return value <= x
    if op is Op.GT:
        return value > x
    if op is Op.GE:
        return value >= x
    if op is Op.IN:
        return value in x
    if op is Op.NOT_IN:
        return value not in x
    if op is Op.BETWEEN:
        return x[0] <= value <= x[1]
    if op is Op.NOT_BETWEEN:
        return not (x[0] <= value <= x[1])
    if op is Op.PREFIX:
        return value.startswith(x)
    if op is Op.NOT_PREFIX:
        return not value.startswith(x)
    if op is Op.SUFFIX:
        return value.endswith(x)
    if op is Op.NOT_SUFFIX:
        return not value.endswith(x)
    if op is Op.CONTAINS:
        return x in value
    if op is Op.NOT_CONTAINS:
        return x not in value
    if op is Op.LIKE:
        return like_matches(x, value)
    if op is Op.NOT_LIKE:
        return not like_matches(x, value)
    if op is Op.MATCHES:
        return regex_search(x, value)
    if op is Op.NOT_MATCHES:
        return not regex_search(x, value)
    if op is Op.EQ_ICASE:
        return value.casefold() == x
    if op is Op.NE_ICASE:
        return value.casefold() != x
    if op is Op.IN_ICASE:
        return value.casefold() in x
    if op is Op.NOT_IN_ICASE:
        return value.casefold() not in x
    if op is Op.PREFIX_ICASE:
        return value.casefold().startswith(x)
    if op is Op.NOT_PREFIX_ICASE:
        return not value.casefold().startswith(x)
    if op is Op.SUFFIX_ICASE:
        return value.casefold().endswith(x)
    if op is Op.NOT_SUFFIX_ICASE:
        return not value.casefold().endswith(x)
    if op is Op.CIDR:
        return in_network(value, x)
    if op is Op.NOT_CIDR:
        return not in_network(value, x)
    raise AssertionError(f"unknown operator {op!r}")


def like_matches(pattern: str, value: str) -> bool:
    """SQL LIKE over the whole value, case-sensitive, by dynamic programming."""
    tokens = like_parse(pattern)
    # reachable[i]: positions in value reachable after consuming the first i tokens
    reachable = {0}
    for kind, text in tokens:
        nxt: set[int] = set()
        for pos in reachable:
            if kind == "lit":
                if value.startswith(text, pos):
                    nxt.add(pos + len(text))
            elif kind == "one":
                if pos < len(value):
                    nxt.add(pos + 1)
            else:
                nxt.update(range(pos, len(value) + 1))
        reachable = nxt
    return len(value) in reachable


def in_network(value: str, network: str) -> bool:
    """Whether the string is an IP address (IPv4 or IPv6, of the network's version) inside the network."""
    import ipaddress

    try:
        return ipaddress.ip_address(value) in ipaddress.ip_network(network)
    except ValueError:
        return False


def regex_search(pattern: str, value: str) -> bool:
    """Unanchored RE2 search."""
    import re2

    return re2.search(pattern, value) is not None


def evaluate(expr: Expr, event: Mapping[str, Value]) -> bool:
    """Truth of an expression tree on a flat event (``NOT`` by pushing it down)."""
    if isinstance(expr, Pred):
        return holds(expr, event)
    if isinstance(expr, Not):
        return evaluate(_push_not(expr.child), event)
    if isinstance(expr, And):
        return all(evaluate(c, event) for c in expr.children)
    return any(evaluate(c, event) for c in expr.children)


def _push_not(expr: Expr) -> Expr:
    """``NOT expr`` with the negation moved one level down (De Morgan, complements)."""
    from matchers.expr import Or

    if isinstance(expr, Pred):
        return expr.negate()
    if isinstance(expr, Not):
        return expr.child
    children = tuple(Not(c) for c in expr.children)
    return Or(children) if isinstance(expr, And) else And(children)


def satisfies(expr: Expr, event: Mapping[str, Value] | Rows) -> bool:
    """Whether an event (a flat dict or :class:`~matchers.events.Rows`) satisfies ``expr``."""
    rows = event if isinstance(event, Rows) else (event,)
    return any(evaluate(expr, row) for row in rows)


def match(subscriptions: Iterable[Subscription], event: Mapping[str, Value] | Rows) -> list[str]:
    """Sorted ids of the subscriptions that ``event`` (a flat dict or rows) satisfies."""
    return sorted(s.id for s in subscriptions if satisfies(s.expr, event))

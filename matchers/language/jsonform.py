"""The JSON form of a subscription, for programs.

An expression is one of::

    ["price", "<", 100]                      a predicate [attribute, operator, operand]
    ["price", "exists"]                      EXISTS, NOT EXISTS, IS NULL, IS NOT NULL: no operand
    ["state", "anything but", ["in", [..]]]  ANYTHING BUT a predicate [operator, operand] on the attribute
    {"all": [e1, e2, ...]}                   AND of one or more expressions
    {"any": [e1, e2, ...]}                   OR of one or more expressions
    {"not": e}                               NOT

Operator names are those of :data:`matchers.expr.OP_BY_NAME` in any letter case
(``"="``, ``"<>"``, ``"in"``, ``"NOT BETWEEN"``, ``"prefix"``, ``"matches"``, ...);
``IN``/``NOT IN`` take an array of values, ``BETWEEN``/``NOT BETWEEN`` an array
``[low, high]``, every other operator one number, string or boolean.  Errors carry a
JSON path to the offending part, e.g. ``$.all[1][2]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from matchers.errors import SubscriptionError
from matchers.expr import (
    OP_BY_NAME,
    OP_SYMBOL,
    PRESENCE_OPS,
    RANGE_OPS,
    SET_OPS,
    And,
    Expr,
    Kind,
    Not,
    Op,
    Or,
    Pred,
    Scalar,
    anything_but,
    kind_of,
    pred,
)
from matchers.operands import wildcard_to_like

from .limits import MAX_DEPTH

__all__ = ["parse_json", "to_json"]

_KEYS = ("all", "any", "not")
_EXPRESSION_TEXT = 'an expression: [attribute, operator, operand], {"all": [...]}, {"any": [...]} or {"not": ...}'
_WILDCARD = {"wildcard": Op.LIKE, "not wildcard": Op.NOT_LIKE}
"""EventBridge's wildcard patterns (``*`` only), read as the LIKE patterns they are."""
_OPERATOR_NAMES = ", ".join([*sorted(OP_BY_NAME, key=lambda name: (OP_BY_NAME[name], name)), *_WILDCARD,
                             "anything but"])
_NAME_OF_OP: dict[Op, str] = {}
for _name, _op in OP_BY_NAME.items():
    _NAME_OF_OP.setdefault(_op, _name)  # the first spelling: "=", "!=", "<", ..., "not in", ...
_LARGEST_FLOAT = 1.7976931348623157e308
_ANYTHING_BUT = "anything but"
"""``[attribute, "anything but", [operator, operand]]``: EventBridge's ``anything-but``."""


def parse_json(obj: Any, sub_id: str | None = None, path: str = "$") -> Expr:
    """Parse the JSON form (already decoded: dicts, lists, scalars) into an expression tree.

    Parameters
    ----------
    obj : the decoded JSON value, e.g. ``{"all": [["price", "<", 100], ["symbol", "=", "IBM"]]}``.
    sub_id : the subscription's id, named in errors.
    path : JSON path of ``obj`` itself, prefixed to error positions (``"$.json"`` in a record).

    Raises
    ------
    SubscriptionError
        With ``position`` the JSON path of the offending part.
    """
    return _parse(obj, sub_id, path, 1)


def _parse(obj: Any, sub_id: str | None, path: str, depth: int) -> Expr:
    if depth > MAX_DEPTH:
        raise SubscriptionError(f"the expression nests all/any/not more than {MAX_DEPTH} levels deep",
                                sub_id, path, "a flatter expression")
    if isinstance(obj, list):
        return _predicate(obj, sub_id, path)
    if not isinstance(obj, Mapping):
        raise SubscriptionError(f"{describe(obj)} is not an expression", sub_id, path, _EXPRESSION_TEXT)
    if len(obj) != 1:
        what = "an empty object" if not obj else f"an object with {len(obj)} keys ({', '.join(map(repr, obj))})"
        raise SubscriptionError(f"an expression object has exactly one key, this is {what}", sub_id, path,
                                'one of "all", "any", "not" (nest objects to combine them)')
    ((key, value),) = obj.items()
    inner = member_path(path, key)
    if key not in _KEYS:
        raise SubscriptionError(f"unknown key {key!r}", sub_id, path, 'one of "all", "any", "not"')
    if key == "not":
        return Not(_parse(value, sub_id, inner, depth + 1))
    if not isinstance(value, list):
        raise SubscriptionError(f'"{key}" needs an array of expressions, not {describe(value)}', sub_id, inner,
                                "an array of expressions")
    if not value:
        raise SubscriptionError(f'"{key}" needs at least one expression: the array is empty', sub_id, inner,
                                "an array of expressions")
    children = tuple(_parse(child, sub_id, f"{inner}[{i}]", depth + 1) for i, child in enumerate(value))
    return And(children) if key == "all" else Or(children)


def _predicate(items: list, sub_id: str | None, path: str) -> Pred:
    unary = len(items) == 2 and isinstance(items[1], str) and OP_BY_NAME.get(" ".join(items[1].lower().split())) in PRESENCE_OPS
    if len(items) != 3 and not unary:
        raise SubscriptionError(f"a predicate is [attribute, operator, operand], this array has {len(items)} "
                                f"item{'s' if len(items) != 1 else ''}", sub_id, path,
                                'three items, e.g. ["price", "<", 100], or two for an operator without '
                                'operand, e.g. ["price", "exists"]')
    attr, name, operand = items if not unary else (*items, None)
    if not isinstance(attr, str) or not attr:
        raise SubscriptionError(f"the attribute must be a non-empty string, not {describe(attr)}", sub_id,
                                f"{path}[0]", "an attribute name")
    spelt = " ".join(name.lower().split()) if isinstance(name, str) else None
    if spelt == _ANYTHING_BUT:
        return _anything_but(attr, operand, sub_id, path)
    op = OP_BY_NAME.get(spelt, _WILDCARD.get(spelt))  # type: ignore[arg-type]  # a None name finds nothing
    if op is None:
        raise SubscriptionError(f"unknown operator {describe(name)}", sub_id, f"{path}[1]",
                                f"one of {_OPERATOR_NAMES}")
    where = f"{path}[2]"
    if op in PRESENCE_OPS:
        if not unary:
            raise SubscriptionError(f"{OP_SYMBOL[op]} takes no operand", sub_id, where,
                                    f'two items: ["{attr}", "{name}"]')
    elif op in SET_OPS:
        if not isinstance(operand, list):
            raise SubscriptionError(f"{OP_SYMBOL[op]} needs an array of values, not {describe(operand)}",
                                    sub_id, where, "an array of values")
        for i, value in enumerate(operand):
            _check_scalar(value, sub_id, f"{where}[{i}]")
    elif op in RANGE_OPS:
        if not isinstance(operand, list) or len(operand) != 2:
            raise SubscriptionError(f"{OP_SYMBOL[op]} needs an array [low, high], not {describe(operand)}",
                                    sub_id, where, "an array [low, high]")
        for i, value in enumerate(operand):
            _check_scalar(value, sub_id, f"{where}[{i}]")
    else:
        _check_scalar(operand, sub_id, where)
    try:
        if spelt in _WILDCARD:
            if not isinstance(operand, str):
                raise SubscriptionError(f"{spelt.upper()} needs a string operand, not {describe(operand)}")
            operand = wildcard_to_like(operand)
        return pred(attr, op, operand)
    except SubscriptionError as exc:
        raise SubscriptionError(exc.reason, sub_id, where, exc.expected) from None


def _anything_but(attr: str, operand: Any, sub_id: str | None, path: str) -> Pred:
    """``[attribute, "anything but", [operator, operand]]``: ANYTHING BUT the inner predicate."""
    where = f"{path}[2]"
    if not isinstance(operand, list) or len(operand) != 2:
        raise SubscriptionError(f"ANYTHING BUT takes [operator, operand], not {describe(operand)}", sub_id, where,
                                'e.g. ["in", ["pending", "stopped"]]')
    inner = _predicate([attr, *operand], sub_id, where)
    try:
        return anything_but(inner)
    except SubscriptionError as exc:
        raise SubscriptionError(exc.reason, sub_id, f"{where}[0]", exc.expected) from None


def _check_scalar(value: Any, sub_id: str | None, path: str) -> None:
    kind = kind_of(value)
    if kind is None or kind is Kind.NULL:
        raise SubscriptionError(f"{describe(value)} is not a value", sub_id, path,
                                "a number, a string or a boolean")
    if kind is Kind.NUM and not (isinstance(value, float) or abs(value) <= _LARGEST_FLOAT):
        raise SubscriptionError(f"the number {describe(value)} is too large for a 64-bit float", sub_id, path,
                                "a number between -1.7976931348623157e308 and 1.7976931348623157e308")
    if kind is Kind.NUM and not math.isfinite(value):
        raise SubscriptionError(f"{value} is not a finite number", sub_id, path, "a finite number")


def member_path(path: str, key: Any) -> str:
    """The JSON path of member ``key`` of the object at ``path``: ``$.all``, ``$['detail-type']``."""
    return f"{path}.{key}" if isinstance(key, str) and key.isidentifier() else f"{path}[{key!r}]"


def describe(value: Any) -> str:
    """A value as error messages show it: null, an object, an array, or its repr (cut)."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def to_json(expr: Expr) -> Any:
    """The JSON form of an expression (plain dicts, lists and scalars; ``parse_json`` gives it back).

    Whole numbers that a double holds exactly are written as integers.
    """
    if isinstance(expr, Pred):
        operand = expr.operand
        if expr.op in PRESENCE_OPS:
            return [expr.attr, _NAME_OF_OP[expr.op]]
        if expr.op is Op.ANYTHING_BUT:
            return [expr.attr, _ANYTHING_BUT, to_json(operand)[1:]]
        if isinstance(operand, tuple):
            return [expr.attr, _NAME_OF_OP[expr.op], [_scalar(v) for v in operand]]
        return [expr.attr, _NAME_OF_OP[expr.op], _scalar(operand)]
    if isinstance(expr, Not):
        return {"not": to_json(expr.child)}
    if isinstance(expr, And):
        return {"all": [to_json(c) for c in expr.children]}
    if isinstance(expr, Or):
        return {"any": [to_json(c) for c in expr.children]}
    raise TypeError(f"not an expression: {expr!r}")


def _scalar(value: Scalar) -> Scalar | int:
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2.0**53:
        return int(value)
    return value

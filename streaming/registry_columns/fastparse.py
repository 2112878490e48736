"""The common subscription record parsed without building the expression: an upsert whose JSON
form is a conjunction of plain comparisons, ``{"op": "upsert", "id": "s0", "json": {"all":
[["a0", "=", 17], ["a2", "<=", 27.5], ["name", "!=", "x"], ...]}}`` (or one such comparison alone),
and a delete that holds only its op and id, ``{"op": "delete", "id": "s0"}`` (a third of the
churn's records).

:func:`fast_row` gives the row :func:`streaming.registry_columns.parse.parse_records` would give
such a record (its ``packed`` the same bytes as :func:`matchers.packed.pack`), or ``None`` for any
other record, which then takes the general path. It takes only what it can prove the general
path reads the same way: the record decoded by orjson (as :func:`streaming.records.load_json`),
the keys ``op`` (``"upsert"``), ``id`` (the key's, if any) and ``json`` alone, attributes that are
non-empty strings without NUL, the operators ``= == != <> < <= > >=`` spelt so, operands that
are integers (within 2**53), finite floats or strings (never booleans or null), no more
comparisons than ``limits.predicates``.

What it reproduces of the general path: operands as :func:`matchers.expr.pred` makes them (numbers
as floats, strings as they are), repeated predicates listed once (equal as :class:`~matchers.expr.Pred`
compares them: ``0.0`` and ``-0.0`` are one), the tree keeping every occurrence and the one
conjunction sorted by :meth:`~matchers.expr.Pred.sort_key`, marshalled in the version
:func:`matchers.packed.pack` writes (one without back-references: equal tuples, equal bytes).
"""

from __future__ import annotations

import marshal
from math import isfinite

import orjson

from matchers.expr import OP_BY_NAME, Kind, Op
from matchers.packed import AND, MARSHAL_VERSION
from streaming.config import LimitsSettings
from streaming.records import MAX_ID_LENGTH
from streaming.registry_columns.columns import DELETE as DELETE_CODE
from streaming.registry_columns.columns import EXPRESSION
from streaming.registry_columns.columns import UPSERT as UPSERT_CODE

_OPS = {name: int(op) for name, op in OP_BY_NAME.items() if op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE)}
"""Operator names the fast path takes (the comparisons' names, spelt exactly so), with the
operator :func:`matchers.expr.pred` makes of each."""
_KEYS = frozenset(("op", "id", "json"))
_NUM, _STR = int(Kind.NUM), int(Kind.STR)
_EXACT_INT = 2**53


def fast_row(key: bytes | None, value: bytes | None, max_terms: int, limits: LimitsSettings) -> tuple | None:
    """``(id, op, kind, record, packed, expires, target, predicates, error)`` of a record of the
    common shape (the module's docstring), as :func:`~streaming.registry_columns.parse._row` gives
    it (whatever ``targets``: the record names none), or ``None``: the general path judges the record."""
    if type(value) is not bytes or len(value) > limits.subscription_bytes or max_terms < 1:
        return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    sub_id = obj.get("id")
    if obj.get("op") == "delete" and len(obj) == 2:
        return _delete(key, sub_id)
    if not _KEYS.issuperset(obj) or obj.get("op", "upsert") != "upsert":
        return None
    form = obj.get("json")
    if type(sub_id) is not str or not 0 < len(sub_id) <= MAX_ID_LENGTH or form is None:
        return None
    if key is not None and key != sub_id.encode():
        return None
    if type(form) is dict:
        if len(form) != 1:
            return None
        items = form.get("all")
        if type(items) is not list or not items:
            return None
        single = False
    elif type(form) is list:
        items, single = [form], True
    else:
        return None
    if len(items) > limits.predicates:
        return None
    index: dict[tuple, int] = {}
    preds: list[tuple] = []
    order: list[tuple] = []  # Pred.sort_key of each of preds, and its index
    tree: list[int] = [AND]
    for item in items:
        if type(item) is not list or len(item) != 3:
            return None
        attr, name, operand = item
        if type(attr) is not str or not attr or "\x00" in attr or type(name) is not str:
            return None
        op = _OPS.get(name)
        if op is None:
            return None
        typ = type(operand)
        if typ is int:
            if not -_EXACT_INT <= operand <= _EXACT_INT:
                return None
            operand = float(operand)
            kind = _NUM
        elif typ is float:
            if not isfinite(operand):
                return None
            kind = _NUM
        elif typ is str:
            kind = _STR
        else:
            return None
        pred = (attr, op, operand, kind)
        i = index.get(pred)
        if i is None:
            i = index[pred] = len(preds)
            preds.append(pred)
            order.append((attr, op, kind, repr(operand), i))
        tree.append(i)
    order.sort()  # no two distinct predicates have one sort key: the indices never decide
    packed = marshal.dumps((None, tuple(preds), 0 if single else tuple(tree), (tuple([o[4] for o in order]),)),
                           MARSHAL_VERSION)
    return sub_id, UPSERT_CODE, EXPRESSION, value, packed, None, None, len(items), None


def _delete(key: bytes | None, sub_id: object) -> tuple | None:
    """The row of a delete ``{"op": "delete", "id": ...}`` (nothing else in it), or ``None``."""
    if type(sub_id) is not str or not 0 < len(sub_id) <= MAX_ID_LENGTH:
        return None
    if key is not None and key != sub_id.encode():
        return None
    return sub_id, DELETE_CODE, 0, None, None, None, None, 0, None


"""EventBridge-style event patterns (also Quamina's and SNS payload filter policies), compiled
to the language's expressions.

A pattern is an object whose leaves are arrays; nested objects name nested fields (their
keys joined by dots, as events are flattened)::

    {"source": ["aws.ec2"], "detail": {"state": [{"anything-but": ["pending", "stopped"]}],
                                       "cpu": [{"numeric": [">", 0, "<=", 90]}]}}

Every field must match (AND); a field matches when one item of its array does (OR); a
``"$or"`` member holds an array of patterns of which one must match.  An item is a value
(a string, number or boolean: equal to it; ``null``: the value is null) or an object of
one matcher: ``prefix``, ``suffix`` (a string, or ``{"equals-ignore-case": string}`` to
compare after case folding), ``equals-ignore-case``, ``wildcard``, ``cidr`` (strings only,
like EventBridge), ``numeric`` (numbers only; one or two comparisons), ``exists``
(``true``: present, ``false``: absent) and ``anything-but`` (a value or array of values, or
an object with ``prefix``, ``suffix``, ``equals-ignore-case`` or ``wildcard`` holding a
string or an array of strings, as Event Ruler takes them): it matches a present value that
no inner test matches, a value of another type than the tests' included (``null`` too), as
EventBridge does.  An ``anything-but`` is one ``ANYTHING BUT`` predicate per kind of value
or per pattern, all of which must hold (:func:`matchers.expr.anything_but`): it adds no
conjunction to the normal form.  Anything else is an error whose position is the JSON path
of the construct.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matchers.errors import SubscriptionError
from matchers.expr import And, Expr, Kind, Op, Or, anything_but, kind_of, pred

from .jsonform import describe, member_path
from .limits import MAX_DEPTH

__all__ = ["parse_pattern"]

_STRING_MATCHERS: dict[str, Op | str] = {"prefix": Op.PREFIX, "suffix": Op.SUFFIX, "equals-ignore-case": Op.EQ_ICASE,
                                          "wildcard": "wildcard", "cidr": Op.CIDR}
_ICASE_AFFIX: dict[str, Op] = {"prefix": Op.PREFIX_ICASE, "suffix": Op.SUFFIX_ICASE}
"""``{"prefix": {"equals-ignore-case": "abc"}}``: the prefix (suffix) of the case-folded value."""
_NEGATED: dict[str, Op | str] = {"prefix": Op.PREFIX, "suffix": Op.SUFFIX, "equals-ignore-case": Op.IN_ICASE,
                                 "wildcard": "wildcard"}
"""The tests an ``anything-but`` object negates (each takes a string or an array of them)."""
_MATCHERS_TEXT = "one of " + ", ".join([*_STRING_MATCHERS, "numeric", "exists", "anything-but"])
_LOWER, _UPPER = (">", ">="), ("<", "<=")
_NUMERIC_OPS = ("<", "<=", "=", ">", ">=")
_ANY_NUMBER = -1.7976931348623157e308
"""Every number of an event is at least this (events hold finite doubles)."""


def parse_pattern(obj: Any, sub_id: str | None = None, path: str = "$") -> Expr:
    """Compile an event pattern (decoded JSON) into an expression tree.

    Raises
    ------
    SubscriptionError
        With ``position`` the JSON path of the offending part (``$.rule.detail.state[0]``).
    """
    return _object(obj, "", sub_id, path, 1)


def _fail(message: str, sub_id: str | None, path: str, expected: str | None = None) -> SubscriptionError:
    return SubscriptionError(message, sub_id, path, expected)


def _object(obj: Any, prefix: str, sub_id: str | None, path: str, depth: int) -> Expr:
    if depth > MAX_DEPTH:
        raise _fail(f"the pattern nests objects more than {MAX_DEPTH} levels deep", sub_id, path,
                    "a flatter pattern")
    if not isinstance(obj, Mapping):
        raise _fail(f"{describe(obj)} is not a pattern", sub_id, path, 'an object such as {"source": ["aws.ec2"]}')
    if not obj:
        raise _fail("the pattern is an empty object", sub_id, path, "at least one field")
    parts: list[Expr] = []
    for key, value in obj.items():
        where = member_path(path, key)
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise _fail(f'"$or" needs an array of at least two patterns, not {describe(value)}', sub_id, where,
                            "an array of two or more objects")
            parts.append(Or(tuple(_object(o, prefix, sub_id, f"{where}[{i}]", depth + 1)
                                  for i, o in enumerate(value))))
        elif isinstance(value, Mapping):
            parts.append(_object(value, f"{prefix}{key}.", sub_id, where, depth + 1))
        elif isinstance(value, list):
            parts.append(_field(f"{prefix}{key}", value, sub_id, where))
        else:
            raise _fail(f"the value of field {key!r} is {describe(value)}", sub_id, where,
                        "an array of values or matchers, or an object of fields")
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _field(name: str, items: list, sub_id: str | None, path: str) -> Expr:
    if not items:
        raise _fail("the array is empty: it would match nothing", sub_id, path, "at least one value or matcher")
    values: dict[Kind, list] = {}
    parts: list[Expr] = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]"
        if isinstance(item, Mapping):
            parts.append(_matcher(name, item, sub_id, where))
        elif item is None:
            parts.append(pred(name, Op.IS_NULL, None))
        else:
            values.setdefault(_scalar_kind(item, sub_id, where), []).append(item)
    exact = [pred(name, Op.IN, vs) for vs in values.values()]
    children = (*exact, *parts)
    return children[0] if len(children) == 1 else Or(children)


def _scalar_kind(value: Any, sub_id: str | None, path: str, what: str = "a value") -> Kind:
    kind = kind_of(value)
    if kind is None or kind is Kind.NULL:
        raise _fail(f"{describe(value)} is not {what}", sub_id, path, "a string, a number, a boolean or null")
    if kind is Kind.NUM and not -_ANY_NUMBER >= value >= _ANY_NUMBER:
        raise _fail(f"{describe(value)} is not a finite number", sub_id, path, "a finite number")
    return kind


def _matcher(name: str, item: Mapping, sub_id: str | None, path: str) -> Expr:
    if len(item) != 1:
        raise _fail(f"a matcher is an object of one key, this one has {len(item)}", sub_id, path, _MATCHERS_TEXT)
    ((key, arg),) = item.items()
    where = member_path(path, key)
    if key in _STRING_MATCHERS:
        return _string_test(name, _STRING_MATCHERS[key], key, arg, sub_id, where)
    if key == "exists":
        if not isinstance(arg, bool):
            raise _fail(f'"exists" takes true or false, not {describe(arg)}', sub_id, where, "true or false")
        return pred(name, Op.EXISTS if arg else Op.NOT_EXISTS, None)
    if key == "numeric":
        return _numeric(name, arg, sub_id, where)
    if key == "anything-but":
        return _anything_but(name, arg, sub_id, where)
    raise _fail(f"unsupported matcher {key!r}", sub_id, where, _MATCHERS_TEXT)


def _string_test(name: str, op: Op | str, key: str, arg: Any, sub_id: str | None, path: str) -> Expr:
    if key in _ICASE_AFFIX and isinstance(arg, Mapping):
        if list(arg) != ["equals-ignore-case"]:
            keys = ", ".join(repr(k) for k in arg) or "nothing"
            raise _fail(f'"{key}" takes a string or {{"equals-ignore-case": string}}; this object has {keys}',
                        sub_id, path, f'e.g. {{"{key}": {{"equals-ignore-case": "abc"}}}}')
        where = member_path(path, "equals-ignore-case")
        inner = arg["equals-ignore-case"]
        if not isinstance(inner, str):
            raise _fail(f'"{key}" with "equals-ignore-case" takes a string, not {describe(inner)}', sub_id, where,
                        "a string")
        return _checked(name, _ICASE_AFFIX[key], inner, sub_id, where)
    if not isinstance(arg, str):
        also = ' or {"equals-ignore-case": string}' if key in _ICASE_AFFIX else ""
        raise _fail(f'"{key}" takes a string{also}, not {describe(arg)}', sub_id, path, "a string")
    return _checked(name, op, arg, sub_id, path)


def _checked(name: str, op: Op | str, operand: Any, sub_id: str | None, path: str) -> Expr:
    try:
        return pred(name, op, operand)
    except SubscriptionError as exc:
        raise _fail(exc.reason, sub_id, path, exc.expected) from None


def _numeric(name: str, arg: Any, sub_id: str | None, path: str) -> Expr:
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        raise _fail(f'"numeric" takes [operator, number] or [operator, number, operator, number], '
                    f"not {describe(arg)}", sub_id, path, 'e.g. [">", 0, "<=", 5]')
    tests = []
    for i in range(0, len(arg), 2):
        op, number = arg[i], arg[i + 1]
        if op not in _NUMERIC_OPS:
            raise _fail(f"unknown numeric operator {describe(op)}", sub_id, f"{path}[{i}]",
                        "one of " + ", ".join(_NUMERIC_OPS))
        if _scalar_kind(number, sub_id, f"{path}[{i + 1}]", "a number") is not Kind.NUM:
            raise _fail(f"{describe(number)} is not a number", sub_id, f"{path}[{i + 1}]", "a number")
        tests.append((op, number))
    if len(tests) == 2:
        (a, x), (b, y) = tests
        if not ((a in _LOWER and b in _UPPER) or (a in _UPPER and b in _LOWER)):
            raise _fail(f'two numeric bounds are a lower one (">", ">=") and an upper one ("<", "<="), not '
                        f"{a!r} and {b!r}", sub_id, f"{path}[2]", "one lower and one upper bound")
    return And(tuple(pred(name, op, x) for op, x in tests)) if len(tests) == 2 else pred(name, *tests[0])


def _anything_but(name: str, arg: Any, sub_id: str | None, path: str) -> Expr:
    """A present value the inner test does not match; a value of a kind the test cannot
    match (null included) matches.  One ``ANYTHING BUT`` predicate per kind of value (per
    pattern under ``prefix``, ``suffix`` or ``wildcard``), all of which must hold: no
    disjunction, so that a pattern's conjunctions do not multiply."""
    if isinstance(arg, Mapping):
        if len(arg) != 1 or next(iter(arg)) not in _NEGATED:
            keys = ", ".join(repr(k) for k in arg) or "nothing"
            raise _fail(f'"anything-but" takes a value, an array of values or one of {", ".join(_NEGATED)}; '
                        f"this object has {keys}", sub_id, path, "one of " + ", ".join(_NEGATED))
        ((key, inner),) = arg.items()
        where = member_path(path, key)
        values = inner if isinstance(inner, list) else [inner]
        if not values:
            raise _fail(f'"{key}" under "anything-but" needs at least one string: the array is empty', sub_id, where,
                        "a string or an array of strings")
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise _fail(f'"{key}" under "anything-but" takes a string or an array of strings, not '
                            f"{describe(value)}", sub_id, f"{where}[{i}]" if isinstance(inner, list) else where,
                            "a string")
        if _NEGATED[key] is Op.IN_ICASE:
            tests = [_checked(name, Op.IN_ICASE, values, sub_id, where)]
        else:
            tests = [_checked(name, _NEGATED[key], v, sub_id, f"{where}[{i}]" if isinstance(inner, list) else where)
                     for i, v in enumerate(values)]
        return _all_but(tests)
    values = arg if isinstance(arg, list) else [arg]
    if not values:
        raise _fail('"anything-but" needs at least one value: the array is empty', sub_id, path, "a value")
    by_kind: dict[Kind, list] = {}
    for i, value in enumerate(values):
        where = f"{path}[{i}]" if isinstance(arg, list) else path
        if isinstance(value, (Mapping, list)):
            raise _fail(f'"anything-but" takes values, not {describe(value)}', sub_id, where, "a string or a number")
        kind = _scalar_kind(value, sub_id, where)
        if kind is Kind.BOOL:
            raise _fail(f'"anything-but" compares strings and numbers, not {describe(value)}', sub_id, where,
                        "a string or a number")
        by_kind.setdefault(kind, []).append(value)
    return _all_but([pred(name, Op.IN, vs) for vs in by_kind.values()])


def _all_but(tests: list) -> Expr:
    """``ANYTHING BUT`` each of ``tests`` (positive predicates), all of them."""
    parts = tuple(dict.fromkeys(anything_but(t) for t in tests))
    return parts[0] if len(parts) == 1 else And(parts)

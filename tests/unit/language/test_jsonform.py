"""The JSON form: structure, every operator name, errors with their JSON paths, ``to_json``."""

from __future__ import annotations

import json

import pytest

from matchers.errors import SubscriptionError
from matchers.expr import OP_BY_NAME, PRESENCE_OPS, SET_OPS, And, Not, Op, Or, pred
from matchers.language import MAX_DEPTH, parse_json, parse_text, to_json
from tests.unit.language.errors import check_error


def error_of(obj, sub_id=None, path="$") -> SubscriptionError:
    with pytest.raises(SubscriptionError) as info:
        parse_json(obj, sub_id, path)
    return info.value


def test_structure_matches_the_text_form():
    obj = {"all": [["price", "<", 100], {"any": [["symbol", "=", "IBM"], ["symbol", "like", "MS%"]]},
                   {"not": ["volume", "between", [1, 10]]}]}
    text = "price < 100 AND (symbol = 'IBM' OR symbol LIKE 'MS%') AND NOT volume BETWEEN 1 AND 10"
    assert parse_json(obj) == parse_text(text)


def test_single_child_all_and_any_keep_their_node():
    p = pred("a", "=", 1)
    assert parse_json({"all": [["a", "=", 1]]}) == And((p,))
    assert parse_json({"any": [["a", "=", 1]]}) == Or((p,))
    assert parse_json({"not": {"not": ["a", "=", 1]}}) == Not(Not(p))


@pytest.mark.parametrize("name", sorted(OP_BY_NAME))
def test_every_operator_name(name):
    op = OP_BY_NAME[name]
    if op in PRESENCE_OPS:
        expected = pred("s", op, None)
        assert parse_json(["s", name]) == parse_json(["s", name.upper()]) == expected
        assert to_json(expected) == ["s", name]
        return
    if op in SET_OPS:
        operand = ["x", "y"]
    elif op in (Op.CIDR, Op.NOT_CIDR):
        operand = "10.0.0.0/8"
    elif op in (Op.BETWEEN, Op.NOT_BETWEEN):
        operand = ["x", "y"]
    elif op in (Op.MATCHES, Op.NOT_MATCHES):
        operand = "^x.*y$"
    elif op in (Op.LIKE, Op.NOT_LIKE):
        operand = "x_y%"
    else:
        operand = "x"
    expected = pred("s", op, operand)
    assert parse_json(["s", name, operand]) == expected
    assert parse_json(["s", name.upper(), operand]) == expected
    assert parse_json(["s", "  " + name.title().replace(" ", "   ") + " ", operand]) == expected


def test_numbers_booleans_and_canonical_forms():
    assert parse_json(["a", "=", 10]) == parse_json(["a", "==", 10.0]) == pred("a", "=", 10)
    assert parse_json(["f", "=", True]).operand is True
    assert parse_json(["a", "in", [3, 1, 1]]).operand == (1.0, 3.0)
    assert parse_json(["a", "in", [2]]) == pred("a", "=", 2)
    assert parse_json(["s", "like", "ab%"]).op is Op.PREFIX


@pytest.mark.parametrize("obj,position,message,expected", [
    ({"all": []}, "$.all", "at least one expression", "an array of expressions"),
    ({"any": []}, "$.any", "at least one expression", "an array of expressions"),
    ({"all": ["x"]}, "$.all[0]", "'x' is not an expression", "an expression"),
    ({"all": ["a", "=", 1]}, "$.all[0]", "is not an expression", "an expression"),
    ({"all": {"any": []}}, "$.all", "needs an array of expressions, not an object", "an array of expressions"),
    ({}, "$", "this is an empty object", 'one of "all", "any", "not"'),
    ({"all": [["a", "=", 1]], "any": [["b", "=", 1]]}, "$", "an object with 2 keys", 'one of "all"'),
    ({"and": [["a", "=", 1]]}, "$", "unknown key 'and'", 'one of "all", "any", "not"'),
    ({"ALL": [["a", "=", 1]]}, "$", "unknown key 'ALL'", 'one of "all"'),
    ({"not": None}, "$.not", "null is not an expression", "an expression"),
    (None, "$", "null is not an expression", "an expression"),
    (42, "$", "42 is not an expression", "an expression"),
    ([], "$", "this array has 0 items", "three items"),
    (["a", "="], "$", "this array has 2 items", "three items"),
    (["a", "=", 1, 2], "$", "this array has 4 items", "three items"),
    ([1, "=", 2], "$[0]", "attribute must be a non-empty string, not 1", "an attribute name"),
    (["", "=", 2], "$[0]", "attribute must be a non-empty string", "an attribute name"),
    (["a", "~", 2], "$[1]", "unknown operator '~'", "one of =, ==, !=, <>"),
    (["a", None, 2], "$[1]", "unknown operator null", "one of"),
    (["a", "=", None], "$[2]", "null is not a value", "a number, a string or a boolean"),
    (["a", "=", [1]], "$[2]", "an array is not a value", "a number, a string or a boolean"),
    (["a", "=", {"x": 1}], "$[2]", "an object is not a value", "a number, a string or a boolean"),
    (["a", "=", float("nan")], "$[2]", "not a finite number", "a finite number"),
    (["a", "<", float("inf")], "$[2]", "not a finite number", "a finite number"),
    (["a", "=", 10**400], "$[2]", "too large for a 64-bit float", "a number between"),
    (["a", "in", 1], "$[2]", "IN needs an array of values, not 1", "an array of values"),
    (["a", "not in", {"a": 1}], "$[2]", "NOT IN needs an array of values, not an object", "an array of values"),
    (["a", "in", []], "$[2]", "the list is empty", None),
    (["a", "in", [1, "x"]], "$[2]", "mixes types", None),
    (["a", "in", [1, None]], "$[2][1]", "null is not a value", "a number"),
    (["a", "between", [1]], "$[2]", "BETWEEN needs an array [low, high]", "an array [low, high]"),
    (["a", "between", 1], "$[2]", "BETWEEN needs an array [low, high]", "an array [low, high]"),
    (["a", "between", [5, 1]], "$[2]", "inverted", None),
    (["a", "between", [1, [2]]], "$[2][1]", "an array is not a value", "a number"),
    (["a", "<", True], "$[2]", "cannot order booleans", None),
    (["a", "like", 3], "$[2]", "LIKE needs a string operand", None),
    (["a", "matches", "(x"], "$[2]", "invalid regular expression", None),
    ({"all": [["a", "=", 1], {"any": [["b", "<", True]]}]}, "$.all[1].any[0][2]", "cannot order booleans", None),
    ({"not": {"all": [["a", "=", 1], ["b", "in", []]]}}, "$.not.all[1][2]", "the list is empty", None),
])
def test_error(obj, position, message, expected):
    check_error(error_of(obj, "j-1"), "j-1", position, message, expected)


def test_error_paths_start_at_the_given_root():
    assert error_of({"all": [["a", "in", []]]}, "s", "$.json").position == "$.json.all[0][2]"


def test_nesting_is_bounded():
    obj = ["a", "=", 1]
    for _ in range(MAX_DEPTH - 1):
        obj = {"not": obj}
    assert parse_json(obj) is not None
    deep = {"all": [obj]}
    for _ in range(10):
        deep = {"any": [deep, ["b", "=", 2]]}
    err = error_of(deep)
    assert "levels deep" in err.reason and err.expected == "a flatter expression"


def test_to_json_shape():
    tree = parse_text("a = 1.0 AND (b IN (2, 1.5) OR NOT s LIKE 'x%') AND c BETWEEN -1 AND 1e300 AND f != true")
    assert to_json(tree) == {"all": [
        ["a", "=", 1],
        {"any": [["b", "in", [1.5, 2]], {"not": ["s", "prefix", "x"]}]},
        ["c", "between", [-1, 1e300]],
        ["f", "!=", True],
    ]}
    assert isinstance(to_json(tree)["all"][0][2], int)
    assert json.loads(json.dumps(to_json(tree))) == to_json(tree)


@pytest.mark.parametrize("op", list(Op))
def test_to_json_names_every_operator(op):
    operand = {Op.IN: ["a", "b"], Op.NOT_IN: ["a", "b"], Op.BETWEEN: ["a", "b"], Op.NOT_BETWEEN: ["a", "b"],
               Op.IN_ICASE: ["a", "b"], Op.NOT_IN_ICASE: ["a", "b"], Op.CIDR: "::1/128", Op.NOT_CIDR: "::1/128",
               Op.LIKE: "a_b", Op.NOT_LIKE: "a_b", Op.ANYTHING_BUT: pred("s", Op.IN, ["a", "b"]),
               }.get(op, None if op in PRESENCE_OPS else "a")
    p = pred("s", op, operand)
    assert p.op is op
    assert parse_json(to_json(p)) == p


def test_to_json_rejects_what_is_not_an_expression() -> None:
    with pytest.raises(TypeError):
        to_json("price < 100")  # type: ignore[arg-type]  # the wrong type on purpose

"""null values, EXISTS / NOT EXISTS / IS NULL / IS NOT NULL, and the residual matcher of the indexes."""

from __future__ import annotations

import pickle

import pytest

from matchers import oracle
from matchers.base import create, names
from matchers.expr import Kind, Op, Subscription, pred
from matchers.language import parse_json, parse_text
from tests import differential

EVENTS = [{}, {"x": None}, {"x": 0.0}, {"x": ""}, {"x": False}, {"y": 1.0}, {"x": None, "y": 1.0}]


@pytest.mark.parametrize(("text", "expected"), [
    ("EXISTS x", [False, True, True, True, True, False, True]),
    ("NOT EXISTS x", [True, False, False, False, False, True, False]),
    ("x IS NULL", [False, True, False, False, False, False, True]),
    ("x IS NOT NULL", [False, False, True, True, True, False, False]),
    ("NOT x IS NULL", [False, False, True, True, True, False, False]),  # false on a missing x, like any NOT
    ("x != 1", [False, False, True, False, False, False, False]),  # null is of no operand's type
    ("NOT x = ''", [False, False, False, False, False, False, False]),
    ("y = 1 AND NOT EXISTS x", [False, False, False, False, False, True, False]),
])
def test_oracle_semantics(text, expected):
    expr = parse_text(text)
    assert [oracle.evaluate(expr, e) for e in EVENTS] == expected


def test_text_and_json_forms():
    assert parse_text("NOT EXISTS `a b`") == pred("a b", Op.NOT_EXISTS, None)
    assert parse_text("exists x") == parse_json(["x", "exists"]) == pred("x", "exists", None)
    assert parse_text("x is not null") == parse_json(["x", "IS NOT NULL"])
    p = pred("x", Op.IS_NULL, None)
    assert p.kind is Kind.NULL and p.negate().op is Op.IS_NOT_NULL and str(p) == "x IS NULL"
    assert str(pred("x", Op.NOT_EXISTS, None)) == "NOT EXISTS x"


@pytest.mark.parametrize(("bad", "message"), [
    ("x = null", "test it with IS NULL"),
    ("x IS 5", "unexpected number 5"),
    ("EXISTS 'x'", "unexpected string"),
])
def test_text_errors(bad, message):
    with pytest.raises(Exception, match=message):
        parse_text(bad)


def test_json_errors():
    with pytest.raises(Exception, match="EXISTS takes no operand"):
        parse_json(["x", "exists", True])
    with pytest.raises(Exception, match="null is not a value"):
        parse_json(["x", "=", None])


@pytest.mark.parametrize("name", names())
def test_residual_path_moves_and_pickles(name):
    """A subscription changes path on upsert; keys stay one space; a pickled matcher keeps both paths."""
    matcher = create(name)
    native = Subscription.of("n", parse_text("y = 1"))
    residual = Subscription.of("r", parse_text("y = 1 AND NOT EXISTS x"))
    matcher.add([native, residual])
    live = {"n": native, "r": residual}

    def check(m):
        differential.check(m, live, EVENTS)

    check(matcher)
    check(pickle.loads(pickle.dumps(matcher)))
    live["n"] = Subscription.of("n", parse_text("x IS NULL OR y = 1"))  # native -> residual
    live["r"] = Subscription.of("r", parse_text("x = 0"))  # residual -> native
    matcher.add(live.values())
    check(matcher)
    assert matcher.remove(["n", "r"]) == 2 and len(matcher) == 0
    check_empty = matcher.match_events(EVENTS)
    assert check_empty == [[] for _ in EVENTS]

"""Predicates, type checks and normal forms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from matchers import oracle
from matchers.errors import SubscriptionError
from matchers.expr import And, Kind, Not, Op, Or, Subscription, cnf, dnf, nnf, pred
from tests.strategies import events, exprs


def test_canonical_forms():
    assert pred("a", "=", 10) == pred("a", "==", 10.0)
    assert pred("a", "in", [3, 1, 3]).operand == (1.0, 3.0)
    assert pred("a", "in", [2]) == pred("a", "=", 2)
    assert pred("a", "not in", ["x"]) == pred("a", "!=", "x")
    assert pred("a", "<>", 1).op is Op.NE
    assert pred("a", "=", True).kind is Kind.BOOL and pred("a", "=", True) != pred("a", "=", 1)


@pytest.mark.parametrize("pattern,op,text", [
    ("abc%", Op.PREFIX, "abc"), ("%abc", Op.SUFFIX, "abc"), ("%abc%", Op.CONTAINS, "abc"),
    ("abc", Op.EQ, "abc"), ("%", Op.CONTAINS, ""), ("a\\%%", Op.PREFIX, "a%"), ("a_c%", Op.LIKE, "a_c%"),
    ("%a%b%", Op.LIKE, "%a%b%"),
])
def test_like_classification(pattern, op, text):
    p = pred("s", "like", pattern)
    assert (p.op, p.operand) == (op, text)
    assert pred("s", "not like", pattern).op is (Op.NE if op is Op.EQ else
                                                 {Op.PREFIX: Op.NOT_PREFIX, Op.SUFFIX: Op.NOT_SUFFIX,
                                                  Op.CONTAINS: Op.NOT_CONTAINS, Op.LIKE: Op.NOT_LIKE}[op])


@pytest.mark.parametrize("args,fragment", [
    (("a", "in", []), "empty"),
    (("a", "between", (5, 1)), "inverted"),
    (("a", "between", (1, "z")), "different types"),
    (("a", "in", [1, "x"]), "mixes types"),
    (("a", "<", True), "cannot order booleans"),
    (("a", "like", 5), "string operand"),
    (("a", "matches", "(unclosed"), "invalid regular expression"),
    (("a", "=", None), "number, a string or a boolean"),
    (("a", "=", float("inf")), "finite"),
    (("a", "~", 1), "unknown operator"),
])
def test_type_errors_at_registration(args, fragment):
    with pytest.raises(SubscriptionError, match=fragment):
        pred(*args)


def test_not_is_pushed_down():
    tree = Not(And((pred("a", "<", 5), Or((pred("b", "=", 1), Not(pred("c", "in", [1, 2])))))))
    assert nnf(tree) == Or((pred("a", ">=", 5), And((pred("b", "!=", 1), pred("c", "in", [1, 2])))))


def test_dnf_bound_rejects_instead_of_truncating():
    tree = And(tuple(Or((pred(f"a{i}", "=", 1), pred(f"b{i}", "=", 2))) for i in range(10)))
    with pytest.raises(SubscriptionError, match="more than 256"):
        dnf(tree)
    with pytest.raises(SubscriptionError) as err:
        Subscription.of("wide", tree, max_terms=100)
    assert err.value.sub_id == "wide"
    assert len(cnf(tree)) == 10


def test_absorption():
    p, q = pred("a", "=", 1), pred("b", "=", 2)
    assert dnf(Or((p, And((p, q))))) == ((p,),)


@settings(max_examples=300, deadline=None)
@given(tree=exprs, event=events)
def test_normal_forms_agree_with_the_tree(tree, event):
    truth = oracle.evaluate(tree, event)
    assert truth == any(all(oracle.holds(p, event) for p in conj) for conj in dnf(tree, 4096))
    assert truth == all(any(oracle.holds(p, event) for p in clause) for clause in cnf(tree, 4096))

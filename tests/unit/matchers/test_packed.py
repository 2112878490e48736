"""Packed subscriptions (:mod:`matchers.packed`) read back exactly: the same tree, conjunctions
and expiry time under the id given, over the whole expression language."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.errors import SubscriptionError
from matchers.expr import Op, Pred, Subscription, anything_but, pred
from matchers.packed import from_tuples, pack, to_tuples, unpack
from tests.strategies import exprs, extended_exprs
from tests.unit.language.strategies import small_exprs, wide_exprs

expirations = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))


def _same(back: Subscription, sub: Subscription) -> None:
    assert back == sub  # id, tree and expiry time
    assert back.conjunctions == sub.conjunctions
    assert type(back.expires) is type(sub.expires)
    operands = [(p.operand, type(p.operand), p.op, type(p.op), type(p.kind)) for c in sub.conjunctions for p in c]
    assert [(p.operand, type(p.operand), p.op, type(p.op), type(p.kind)) for c in back.conjunctions
            for p in c] == operands  # 1.0 stays a float, True a bool, enums enums


@settings(max_examples=400, deadline=None)
@given(st.one_of(wide_exprs, small_exprs, exprs, extended_exprs), expirations, st.text(min_size=1, max_size=6))
def test_unpack_of_pack_is_the_subscription(expr, expires, sub_id):
    try:
        sub = Subscription.of("x", expr, 64, expires)
    except SubscriptionError:  # over the DNF bound
        return
    _same(unpack(pack(sub), sub_id), Subscription(sub_id, sub.expr, sub.conjunctions, sub.expires))


def test_anything_but_and_shared_predicates():
    inner = pred("s", "in", ["a", "b"])
    sub = Subscription.of("x", anything_but(inner), expires=12.5)
    back = unpack(pack(sub), "y")
    _same(back, Subscription("y", sub.expr, sub.conjunctions, 12.5))
    assert isinstance(back.expr, Pred) and back.expr.op is Op.ANYTHING_BUT and back.expr.operand == inner
    assert back.conjunctions[0][0] is back.expr  # one object per distinct predicate


def test_the_pickled_registry_form_with_the_predicate_itself_still_reads():
    """The pickled registry of earlier releases held an ``ANYTHING BUT``'s operand as the predicate."""
    sub = Subscription.of("x", anything_but(pred("a", "=", 1)))
    expires, preds, tree, conjunctions = to_tuples(sub)
    old = ((preds[1][0], preds[1][1], sub.expr.operand, preds[1][3]),)  # the Pred itself
    assert from_tuples((expires, old, 0, ((0,),)), "x") == sub

"""Packed subscriptions (:mod:`matchers.packed`) read back exactly: the same tree, conjunctions
and expiry time under the id given, over the whole expression language."""

from __future__ import annotations

import pickle

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


_TWINS = [pred("a", "=", 1.0), pred("a", "=", True), pred("a", "=", 0.0), pred("a", "=", -0.0),
          pred("a", "in", [0.0, 2.0]), pred("a", "in", [-0.0, 2.0]), anything_but(pred("a", "=", 1.0)),
          anything_but(pred("a", "=", True))]
"""Predicates equal in Python (``1.0 == True``, ``0.0 == -0.0``) but not as operands."""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(small_exprs, exprs, extended_exprs, st.sampled_from(_TWINS)), min_size=1, max_size=12))
def test_unpacked_with_one_cache_each_is_its_subscription(exprs_):
    """Subscriptions read with one predicate cache (a bulk read): each exactly as packed, and
    each distinct predicate one object across them."""
    subs = []
    for i, expr in enumerate(exprs_ + _TWINS):
        try:
            subs.append(Subscription.of(f"s{i}", expr, 64))
        except SubscriptionError:
            continue
    cache: dict = {}
    back = [unpack(pack(s), s.id, cache) for s in subs]
    for b, s in zip(back, subs, strict=True):
        _same(b, s)
        assert [repr(p.operand) for c in b.conjunctions for p in c] == \
            [repr(p.operand) for c in s.conjunctions for p in c]  # -0.0 stays -0.0
    seen: dict = {}
    for p in (p for b in back for c in b.conjunctions for p in c):
        key = (p.attr, p.op, p.kind, repr(p.operand))
        assert seen.setdefault(key, p) is p


@settings(max_examples=200, deadline=None)
@given(st.one_of(small_exprs, exprs, extended_exprs), expirations)
def test_a_pickled_subscription_reads_back_exactly(expr, expires):
    """Predicates pickle their enums as ints (:meth:`Pred.__reduce__`): read back as enums."""
    try:
        sub = Subscription.of("x", expr, 64, expires)
    except SubscriptionError:
        return
    _same(pickle.loads(pickle.dumps(sub, protocol=5)), sub)


def test_a_subscription_pickled_before_predicates_reduced_still_reads():
    old = (b'\x80\x05\x95\x96\x00\x00\x00\x00\x00\x00\x00\x8c\rmatchers.expr\x94\x8c\x0cSubscription\x94\x93\x94)'
           b'\x81\x94]\x94(\x8c\x01x\x94h\x00\x8c\x04Pred\x94\x93\x94)\x81\x94]\x94(\x8c\x01a\x94h\x00\x8c\x02Op\x94'
           b'\x93\x94K"\x85\x94R\x94h\x07)\x81\x94]\x94(h\nh\x0cK\x06\x85\x94R\x94G?\xf0\x00\x00\x00\x00\x00\x00G@'
           b'\x00\x00\x00\x00\x00\x00\x00\x86\x94h\x00\x8c\x04Kind\x94\x93\x94K\x00\x85\x94R\x94ebh\x17ebh\x08\x85'
           b'\x94\x85\x94Neb.')
    sub = Subscription.of("x", anything_but(pred("a", "in", [1, 2])))
    _same(pickle.loads(old), sub)

"""``ANYTHING BUT`` and the case-folded affixes on every index: the typed views of values
(:mod:`matchers.views`) against the oracle, with nulls, other types, arrays, updates and pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create, names
from matchers.errors import SubscriptionError
from matchers.expr import And, Kind, Op, Subscription, anything_but, pred
from matchers.views import tag, view_name, view_pred, with_views
from tests.strategies import extended_array_events, trees

MATCHERS = names()
EVENTS = [{}, {"x": None}, {"x": "a"}, {"x": "A"}, {"x": "ab"}, {"x": "sab"}, {"x": "ba"}, {"x": 1.0},
          {"x": -0.0}, {"x": True}, {"x": False}, {"x": "1.0"}, {"x": "n1.0"}, {"x": "s"}, {"x": ""}]


@pytest.mark.parametrize(("inner", "holds_on"), [
    (pred("x", Op.IN, ["a", "ab"]), ["null", "A", "sab", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.EQ, 0), ["null", "a", "A", "ab", "sab", "ba", "1", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.PREFIX, "a"), ["null", "A", "sab", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.SUFFIX, "a"), ["null", "A", "ab", "sab", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.LIKE, "%b"), ["null", "a", "A", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.PREFIX_ICASE, "A"), ["null", "sab", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.SUFFIX_ICASE, "A"), ["null", "ab", "sab", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]),
    (pred("x", Op.IN_ICASE, ["A", "s"]), ["null", "ab", "sab", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "''"]),
    (pred("x", Op.CONTAINS, ""), ["null", "1", "-0", "T", "F"]),  # anything-but {"prefix": ""}: not a string
])
def test_anything_but_on_each_kind_of_value(inner, holds_on):
    names_of = ["missing", "null", "a", "A", "ab", "sab", "ba", "1", "-0", "T", "F", "'1.0'", "'n1.0'", "'s'", "''"]
    sub = Subscription.of("b", anything_but(inner))
    want = [["b"] if n in holds_on else [] for n in names_of]
    assert [oracle.match([sub], e) for e in EVENTS] == want
    for name in MATCHERS:
        m = create(name)
        m.add([sub])
        assert m.match_events(EVENTS) == want, name


def test_views_and_their_tests():
    assert tag("ab", Kind.STR, False) == "sab" and tag("ab", Kind.STR, True) == "abs"
    assert tag(-0.0, Kind.NUM, False) == "n0.0" and tag(2, Kind.NUM, True) == "2.0n"
    assert tag(True, Kind.BOOL, False) == "t" and tag(None, Kind.NULL, True) == "z"
    p = view_pred(anything_but(pred("x", Op.SUFFIX, "ab")))
    assert p.attr == view_name("x", tail=True) and p.op is Op.NOT_SUFFIX and p.operand == "abs"
    p = view_pred(anything_but(pred("x", Op.IN, [1, 2])))
    assert p.attr == view_name("x", tail=False) and p.op is Op.NOT_IN and p.operand == ("n1.0", "n2.0")


def test_negation_and_errors():
    inner = pred("x", Op.IN, ["a", "b"])
    assert anything_but(inner).negate() == inner
    with pytest.raises(SubscriptionError, match="ANYTHING BUT negates one predicate"):
        anything_but(pred("x", Op.LT, 3))
    with pytest.raises(SubscriptionError, match="ANYTHING BUT negates one predicate"):
        anything_but(anything_but(inner))


def test_an_event_value_under_a_view_name_is_ignored():
    sub = Subscription.of("b", anything_but(pred("x", Op.EQ, "a")))
    events = [{"x": "a", view_name("x", False): "sb"}, {view_name("x", False): "sb"}]
    for name in MATCHERS:
        m = create(name)
        m.add([sub])
        assert m.match_events(events) == [[], []], name


def test_updates_and_pickling_keep_the_views():
    subs = [Subscription.of("p", anything_but(pred("x", Op.PREFIX, "a"))),
            Subscription.of("s", anything_but(pred("x", Op.SUFFIX, "a"))),
            Subscription.of("both", And((anything_but(pred("x", Op.IN, ["ab"])), pred("y", Op.EXISTS, None))))]
    events = [{"x": "ab", "y": 1.0}, {"x": "ba"}, {"x": 3.0, "y": None}, {"y": 2.0}]
    for name in MATCHERS:
        m = create(name)
        m.add(subs)
        m.remove(["s"])
        m = pickle.loads(pickle.dumps(m))
        assert m.match_events(events) == [oracle.match([subs[0], subs[2]], e) for e in events], name
        m.add([subs[1]])
        m.remove(["p", "both"])
        assert m.match_events(events) == [oracle.match([subs[1]], e) for e in events], name


@st.composite
def _but_or_affix(draw):
    attr = draw(st.sampled_from(("s", "t.u", "a")))
    if draw(st.booleans()):
        op = draw(st.sampled_from(("prefix ignore case", "not prefix ignore case", "suffix ignore case",
                                   "not suffix ignore case")))
        return pred(attr, op, draw(st.sampled_from(("", "a", "AB", "ss", "SS", "ß", "B"))))
    inner = draw(st.sampled_from(("=", "in", "like", "prefix", "suffix", "= ignore case", "in ignore case",
                                  "prefix ignore case", "suffix ignore case")))
    strings = st.sampled_from(("", "a", "ab", "b", "AB", "ß", "SS", "%b", "a_"))
    if inner in ("=", "in") and draw(st.booleans()):
        values = draw(st.lists(st.sampled_from((0.0, 1.0, 2.5, -1.0)), min_size=1, max_size=3))
    else:
        values = draw(st.lists(strings, min_size=1, max_size=3))
    return anything_but(pred(attr, inner, values if "in" in inner.split() else values[0]))


def _subscriptions(exprs) -> list[Subscription]:
    """A subscription ``h<i>`` of each expression its normal form allows (at most 64 terms)."""
    subs = []
    for i, e in enumerate(exprs):
        try:
            subs.append(Subscription.of(f"h{i}", e, max_terms=64))
        except SubscriptionError:
            continue
    return subs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs=st.lists(trees(_but_or_affix(), max_leaves=4), min_size=1, max_size=6),
       evs=st.lists(extended_array_events, min_size=1, max_size=8))
def test_hypothesis_every_matcher_agrees(exprs, evs):
    subs = _subscriptions(exprs)
    want = [oracle.match(subs, e) for e in evs]
    for name in MATCHERS:
        m = create(name)
        m.add(subs)
        assert m.match_ids(m.encode(evs)) == want, name


def _view_rows(batch, sources, views, tails, dictionary) -> list[tuple[int, int, str, int]]:
    """``(row, view, text, code)`` of every view entry :func:`with_views` should add, one value at a time."""
    kinds = {int(k): k for k in Kind}
    out = []
    for row in range(batch.n):
        for j in range(batch.offsets[row], batch.offsets[row + 1]):
            for source, view, tail in zip(sources.tolist(), views.tolist(), tails.tolist(), strict=True):
                if batch.attrs[j] != source:
                    continue
                kind = kinds[int(batch.kinds[j])]
                value = batch.strings[batch.texts[j]] if kind is Kind.STR else batch.nums[j]
                text = tag(value, kind, tail)
                out.append((row, view, text, dictionary.strings[view].get(text, -1)))
    return sorted(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs=st.lists(trees(_but_or_affix(), max_leaves=4), min_size=1, max_size=6),
       evs=st.lists(extended_array_events, min_size=1, max_size=12))
def test_with_views_gives_each_value_its_view(exprs, evs):
    """Values repeated across rows and attributes get their view once per batch, each row its own entry."""
    subs = _subscriptions(exprs)
    m = create("counting")
    m.add(subs)
    batch = m.encode(evs)._replace(rows=None)
    if not m._presence:
        return
    m._presence.arrays(m.dictionary)
    sources, views, tails = m._presence.views
    got = with_views(batch, sources, views, tails, m.dictionary)
    rows = np.repeat(np.arange(got.n), np.diff(got.offsets))
    added = sorted((int(rows[j]), int(got.attrs[j]), got.strings[got.texts[j]], int(got.codes[j]))
                   for j in range(len(got.attrs)) if got.attrs[j] in set(views.tolist()))
    assert added == _view_rows(batch, sources, views, tails, m.dictionary)
    for row in range(got.n):  # entries stay sorted by attribute
        assert (np.diff(got.attrs[got.offsets[row]:got.offsets[row + 1]]) >= 0).all()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 6), n_attrs=st.integers(1, 8))
def test_insert_entries_as_a_sort_by_row_and_attribute(data, n, n_attrs):
    """``insert_entries`` gives what dropping the entries and a stable sort by (row, attribute) of
    the rows' entries then the added ones give."""
    from matchers.events import EventArrays
    from matchers.views import insert_entries

    row_attrs = [sorted(data.draw(st.sets(st.integers(0, n_attrs - 1)))) for _ in range(n)]
    attrs = np.array([a for r in row_attrs for a in r], np.int32)
    rows = np.repeat(np.arange(n), [len(r) for r in row_attrs])
    offsets = np.r_[0, np.cumsum([len(r) for r in row_attrs])].astype(np.int64)
    m = len(attrs)
    batch = EventArrays(offsets, attrs, np.arange(m, dtype=np.int8) % 5, np.arange(m, dtype=np.float64),
                        np.arange(m, dtype=np.int32), -np.arange(m, dtype=np.int32))
    drop = np.zeros(n_attrs + 2, np.bool_)
    views = data.draw(st.sets(st.integers(0, n_attrs + 1), max_size=3))
    drop[list(views)] = True
    pairs = sorted({(data.draw(st.integers(0, n - 1)), v) for v in views for _ in range(data.draw(st.integers(0, 3)))})
    k = len(pairs)
    added = EventArrays(np.array([r for r, _ in pairs], np.int64), np.array([v for _, v in pairs], np.int32),
                        np.full(k, 3, np.int8), np.full(k, np.nan), 100 + np.arange(k, dtype=np.int32),
                        200 + np.arange(k, dtype=np.int32))
    got = insert_entries(batch, drop, added)
    keep = ~drop[attrs]
    all_rows = np.r_[rows[keep], added.offsets]
    order = np.lexsort((np.r_[attrs[keep], added.attrs], all_rows))
    assert got[0].tolist() == np.r_[0, np.cumsum(np.bincount(all_rows, minlength=n))].tolist()
    for i, field in enumerate(EventArrays._fields[1:], 1):
        want = np.r_[batch[i][keep], added[i]][order]
        np.testing.assert_array_equal(got[i], want, err_msg=field)
        assert got[i].dtype == batch[i].dtype

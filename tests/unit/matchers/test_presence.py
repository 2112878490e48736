"""null values, EXISTS / NOT EXISTS / IS NULL / IS NOT NULL (and anything-but) evaluated by
every index through presence states, and the residual matcher of an index."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create, names
from matchers.errors import SubscriptionError
from matchers.expr import Kind, Op, Subscription, pred
from matchers.language import parse_json, parse_text
from matchers.language.eventbridge import parse_pattern
from matchers.presence import state_name
from tests import differential
from tests.strategies import event_patterns, extended_array_events

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


def test_attribute_names_hold_no_nul():
    with pytest.raises(SubscriptionError, match="NUL"):
        parse_json([state_name("x"), "=", 1])


def _index(matcher):
    """The matcher that holds the subscriptions (``auto``'s inner one)."""
    return getattr(matcher, "_inner", matcher)


@pytest.mark.parametrize("name", names())
def test_presence_tests_stay_in_the_index(name):
    """A subscription that tests presence is held by the index (no residual matcher) and
    changes form on upsert; keys stay one space; a pickled matcher keeps both forms; the
    states go with the last subscription that tests presence."""
    matcher = create(name)
    native = Subscription.of("n", parse_text("y = 1"))
    stated = Subscription.of("r", parse_text("y = 1 AND NOT EXISTS x"))
    matcher.add([native, stated])
    live = {"n": native, "r": stated}
    assert not _index(matcher)._residual_keys
    assert matcher.subscription(matcher.key_of("r")) == stated  # as given, not rewritten

    def check(m):
        differential.check(m, live, EVENTS)

    check(matcher)
    check(pickle.loads(pickle.dumps(matcher)))
    live["n"] = Subscription.of("n", parse_text("x IS NULL OR y = 1"))  # native -> presence
    live["r"] = Subscription.of("r", parse_text("x = 0"))  # presence -> native
    matcher.add(live.values())
    check(matcher)
    check(pickle.loads(pickle.dumps(matcher)))
    assert matcher.remove(["n"]) == 1
    del live["n"]
    check(matcher)
    assert not _index(matcher)._presence  # no state added any more
    assert matcher.remove(["r"]) == 1 and len(matcher) == 0
    assert matcher.match_events(EVENTS) == [[] for _ in EVENTS]


@pytest.mark.parametrize("name", names())
def test_an_events_own_value_under_a_state_name_is_left_out(name):
    matcher = create(name)
    matcher.add([Subscription.of("e", parse_text("NOT EXISTS x")), Subscription.of("n", parse_text("x IS NULL"))])
    evs = [{}, {"x": 1.0}, {state_name("x"): 2.0}, {state_name("x"): 0.0, "x": None}]
    assert matcher.match_events(evs) == [["e"], [], ["e"], ["n"]]


@pytest.mark.parametrize("name", [n for n in names() if n not in ("brute", "auto")])
def test_residual_path_for_operators_an_index_leaves_out(name):
    """An index that does not evaluate an operator (here MATCHES) sends the subscriptions using
    it whole to its residual matcher, presence tests included; a subscription moves on upsert."""
    cls = type(create(name))
    narrow = type(f"{cls.__name__}NoRegex", (cls,), {"indexed_ops": cls.indexed_ops - {Op.MATCHES, Op.NOT_MATCHES}})
    matcher = narrow()
    live = {"n": Subscription.of("n", parse_text("y = 1 AND NOT EXISTS x")),
            "m": Subscription.of("m", parse_text("y = 1 AND s MATCHES '^a' OR x IS NULL"))}
    matcher.add(live.values())
    assert matcher._residual_keys == {matcher.key_of("m")}
    evs = [*EVENTS, {"y": 1.0, "s": "ab"}, {"y": 1.0, "s": "b", "x": None}]
    differential.check(matcher, live, evs)
    live["m"] = Subscription.of("m", parse_text("s = 'ab'"))  # residual -> index
    live["n"] = Subscription.of("n", parse_text("s NOT MATCHES 'b' AND EXISTS x"))  # index -> residual
    matcher.add(live.values())
    assert matcher._residual_keys == {matcher.key_of("n")}
    differential.check(matcher, live, evs)
    assert matcher.remove(["n", "m"]) == 2 and len(matcher) == 0


@pytest.mark.parametrize("name", names())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns=st.lists(event_patterns(), min_size=1, max_size=10),
       evs=st.lists(extended_array_events, min_size=1, max_size=8), data=st.data())
def test_hypothesis_event_patterns_with_updates(name, patterns, evs, data):
    """EventBridge patterns (exists, null, anything-but beside exact values, $or) on events with
    nulls and arrays, through an insert, a delete and an upsert, against the oracle."""
    subs = differential.subscriptions_of(parse_pattern(p) for p in patterns)
    differential.check_updates(create(name), subs, evs, data, event_patterns().map(parse_pattern))


def test_a_full_dictionary_leaves_the_matcher_unchanged():
    from matchers.events import Dictionary

    matcher = create("counting", Dictionary(max_attributes=2))
    first = Subscription.of("x", parse_text("NOT EXISTS x"))
    matcher.add([first])  # x and its state
    with pytest.raises(MemoryError, match="dictionary is full"):
        matcher.add([Subscription.of("y", parse_text("NOT EXISTS y"))])
    assert "y" not in matcher and len(matcher) == 1
    differential.check(matcher, [first], EVENTS)

"""Case-insensitive equality and IN, CIDR, and EventBridge wildcards: oracle, forms, every matcher."""

from __future__ import annotations

import random

import pytest

from matchers import oracle
from matchers.catalog import create, names
from matchers.errors import SubscriptionError
from matchers.expr import ICASE_OPS, INDEXED_OPS, Op, Subscription, pred
from matchers.language import parse_json, parse_text, to_json
from matchers.operands import wildcard_to_like
from tests.strategies import random_event, random_subscriptions


@pytest.mark.parametrize(("text", "value", "expected"), [
    ("x = 'STRASSE' IGNORE CASE", "straße", True),  # full Unicode folding, not lower()
    ("x = 'ǅ' IGNORE CASE", "ǆ", True),
    ("x = 'É' IGNORE CASE", "é", True),
    ("x = 'E' IGNORE CASE", "é", False),
    ("x != 'ab' IGNORE CASE", "AB", False),
    ("x != 'ab' IGNORE CASE", "abc", True),
    ("x != 'ab' IGNORE CASE", 1.0, False),  # another type: false, negated too
    ("x IN ('a', 'SS') IGNORE CASE", "ß", True),
    ("x NOT IN ('a', 'SS') IGNORE CASE", "A", False),
    ("x IN CIDR '10.0.0.0/8'", "10.0.0.0", True),
    ("x IN CIDR '10.0.0.0/8'", "10.255.255.255", True),
    ("x IN CIDR '10.0.0.0/8'", "11.0.0.0", False),
    ("x IN CIDR '10.0.0.0/8'", "9.255.255.255", False),
    ("x IN CIDR '10.1.2.3'", "10.1.2.3", True),  # an address alone: /32
    ("x IN CIDR '10.0.0.0/8'", "::ffff:10.0.0.1", False),  # versions never mix
    ("x IN CIDR '2001:DB8::/32'", "2001:db8:ffff::1", True),
    ("x IN CIDR '2001:db8::/32'", "2001:db9::", False),
    ("x IN CIDR '::/0'", "10.0.0.1", False),
    ("x NOT IN CIDR '10.0.0.0/8'", "not-an-ip", True),  # a string that is not an address inside
    ("x NOT IN CIDR '10.0.0.0/8'", 10.0, False),
    ("x WILDCARD '*.png'", "a.png", True),
    ("x WILDCARD 'a*b*c'", "abc", True),
    ("x WILDCARD 'a*b*c'", "acb", False),
    ("x WILDCARD 'a_%'", "a_%", True),  # LIKE's wildcards are plain characters here
    ("x WILDCARD 'a_%'", "ab%", False),
    ("x WILDCARD 'a\\\\*'", "a*", True),
    ("x WILDCARD 'a\\\\*'", "ab", False),
])
def test_semantics_on_every_matcher(text, value, expected):
    expr = parse_text(text)
    assert oracle.evaluate(expr, {"x": value}) is expected
    assert oracle.evaluate(expr, {}) is False
    sub = Subscription.of("s", expr)
    for name in names():
        matcher = create(name)
        matcher.add([sub])
        assert matcher.match_events([{"x": value}, {}, {"x": None}]) == [["s"] if expected else [], [], []], name


def test_canonical_operands():
    assert pred("x", Op.EQ_ICASE, "ABC") == pred("x", "= ignore case", "abc")
    assert pred("x", Op.IN_ICASE, ["A", "a"]) == pred("x", Op.EQ_ICASE, "a")
    assert pred("x", Op.CIDR, "10.1.2.3/8").operand == "10.0.0.0/8"
    assert pred("x", Op.CIDR, "2001:DB8::/32").operand == "2001:db8::/32"
    assert pred("x", "wildcard", "*.png") == pred("x", Op.SUFFIX, ".png")
    assert wildcard_to_like("a%_\\*\\\\*") == "a\\%\\_*\\\\%"


@pytest.mark.parametrize("text", [
    "x = 'Ab' IGNORE CASE", "x NOT IN ('a', 'B') IGNORE CASE", "x IN CIDR '::1/128'", "x NOT IN CIDR '10.0.0.0/8'",
])
def test_round_trips(text):
    expr = parse_text(text)
    assert parse_text(str(expr)) == expr and parse_json(to_json(expr)) == expr


@pytest.mark.parametrize(("bad", "message"), [
    ("x < 'a' IGNORE CASE", "IGNORE CASE applies to = and !="),
    ("x = 1 IGNORE CASE", "needs a string operand"),
    ("x IN (1, 2) IGNORE CASE", "needs strings"),
    ("x IN CIDR '10.0.0.0/33'", "CIDR needs an IPv4 or IPv6 network"),
    ("x IN CIDR 10", "needs a string operand"),
    ("x WILDCARD 'a\\\\b'", "a backslash escapes \\* or a backslash"),
])
def test_errors(bad, message):
    with pytest.raises(SubscriptionError, match=message):
        parse_text(bad)


def test_new_words_stay_attribute_names():
    assert parse_text("case = 1 AND cidr = 2 AND ignore = 3") is not None
    with pytest.raises(SubscriptionError, match="back-quote it"):
        parse_text("wildcard = 1")


@pytest.mark.parametrize("name", names())
def test_indexes_evaluate_every_operator_themselves(name):
    """Every subscription stays in the index (no residual matcher), existence and null tests included."""
    rng = random.Random(7)
    subs = random_subscriptions(rng, 600, extended=True)
    assert sum(any(p.op not in INDEXED_OPS for c in s.conjunctions for p in c) for s in subs) > 20
    assert sum(any(p.op in ICASE_OPS or p.op is Op.CIDR for c in s.conjunctions for p in c) for s in subs) > 20
    evs = [random_event(rng, extended=True) for _ in range(100)]
    matcher = create(name)
    matcher.add(subs)
    assert not getattr(matcher, "_inner", matcher)._residual_keys  # auto: its inner index
    assert matcher.match_events(evs) == [oracle.match(subs, e) for e in evs]

"""The language's constructs beyond the EDBT 2006 algebra, each against the reference evaluator."""

from __future__ import annotations

import math

import pytest

from matchers.cayuga.algebra import Event
from matchers.cayuga.engine import Engine
from matchers.cayuga.language import parse
from matchers.cayuga.static import StaticFilters
from matchers.errors import SubscriptionError

from .helpers import engine_matches, reference_matches, restarted_matches, same


def _stock(*ticks) -> list[Event]:
    return [Event(f"e{i}", "Stock", t, t, {"price": p}) for i, (t, p) in enumerate(ticks)]


def _pairs(matches) -> list[tuple]:
    return sorted(m[5] for m in matches)


def test_nan_bound_keeps_the_sorted_instances_usable():
    events = _stock((0, 7), (0, math.nan), (0, 5), (1, 10))
    subs = {"q": "Stock NEXT{$2.price > $1.price} Stock"}
    assert _pairs(reference_matches(subs, events)) == [("e0", "e3"), ("e2", "e3")]
    for kw in ({}, {"indexed": False}):
        assert same(engine_matches(subs, events, **kw)) == same(reference_matches(subs, events))


def test_nan_from_arithmetic_overflow():
    events = _stock((0, math.inf), (1, 3), (1, 1), (2, 4))
    subs = {"q": "Stock NEXT{$2.price > $1.price - $1.price} Stock"}  # inf - inf is NaN
    assert same(engine_matches(subs, events)) == same(reference_matches(subs, events))
    assert _pairs(reference_matches(subs, events)) == [("e1", "e3"), ("e2", "e3")]


def test_nan_event_satisfies_no_static_range():
    sf = StaticFilters()
    sf.add(0, "Stock", (("price", ">=", 5),))
    sf.add(1, "Stock", (("price", "<=", 5),))
    sf.add(2, "Stock", (("price", "!=", 5),))
    assert sf.match("Stock", {"price": math.nan}) == {2}
    assert sf.match("Stock", {"price": 5}) == {0, 1}


def test_three_rising_prices_within_10_ticks():
    text = ("FILTER{name = 'IBM'}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
            " NEXT{$2.name = $1.name AND $2.price > $1.price} Stock WITHIN 10")
    events = [Event(f"e{i}", "Stock", t, t, {"name": "IBM", "price": p})
              for i, (t, p) in enumerate([(0, 1), (4, 2), (10, 3), (11, 4), (30, 5)])]
    assert _pairs(reference_matches({"q": text}, events)) == [("e0", "e1", "e2"), ("e1", "e2", "e3")]
    assert same(engine_matches({"q": text}, events)) == same(reference_matches({"q": text}, events))


def test_three_rising_prices_within_10_seconds():
    """``WITHIN 10 s`` is ``WITHIN 10`` at 1 s ticks, ``WITHIN 10000`` at 1 ms ticks."""
    rising = ("FILTER{name = 'IBM'}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
              " NEXT{$2.name = $1.name AND $2.price > $1.price} Stock WITHIN ")
    assert parse(rising + "10 s") == parse(rising + "10") == parse(rising + "10000 ms")
    assert parse(rising + "10 s", tick_ms=1) == parse(rising + "10000")
    assert parse(rising + "0.5 MIN") == parse(rising + "30") and parse(rising + "1 h", 60_000) == parse(rising + "60")
    assert parse(rising + "1.5 s") == parse(rising + "1")  # whole ticks: at most 1.5 s apart is at most 1 tick


def test_failed_login_not_followed_by_a_success_within_5_min():
    assert parse(FAILED_NOT_FOLLOWED.replace("300}", "5 min}")) == parse(FAILED_NOT_FOLLOWED)
    # with minute ticks a window shorter than a tick is 0 ticks: no later event can kill the record
    short = "A UNLESS{TRUE, 30 s} B"
    assert (parse(short).window, parse(short, tick_ms=60_000).window) == (30, 0)
    events = [Event("a", "A", 0, 0, {}), Event("b", "B", 1, 1, {}), Event("a2", "A", 2, 2, {})]
    got = reference_matches({"q": short}, events, until=5, tick_ms=60_000)
    assert [(m[3], m[4], m[5]) for m in got] == [(0, 0, ("a",)), (2, 2, ("a2",))]
    assert same(engine_matches({"q": short}, events, until=5, tick_ms=60_000)) == same(got)
    with pytest.raises(SubscriptionError, match="more than 0") as exc:
        parse("A UNLESS{TRUE, 0 s} B")
    assert exc.value.position == 16


def test_within_bounds_every_node_of_the_chain():
    eng = Engine()
    eng.add("q", "A NEXT{TRUE} B NEXT{TRUE} C WITHIN 5")
    assert all(node.deadline == 6 for node in eng.nodes.values())
    for t in range(100):
        eng.process(Event(f"a{t}", "A", t, t, {}))
    assert eng.instances <= 7


@pytest.mark.parametrize(("text", "position", "message"), [
    ("S NEXT{TRUE} SELECT a FROM T", 14, "needs parentheses"),
    ("S UNION select * FROM T", 9, "needs parentheses"),
    ("S FOLD{TRUE, TRUE} (A NEXT{TRUE} B)", 21, "left-deep"),
    ("S NEXT{TRUE}\n  (A UNION B)", "line 2, column 4", "left-deep"),
])
def test_positioned_errors(text, position, message):
    with pytest.raises(SubscriptionError) as exc:
        parse(text)
    assert exc.value.position == position and message in exc.value.reason


@pytest.mark.parametrize(("text", "position", "fix"), [
    ("S NEXT{TRUE} SELECT a FROM T", 14, "write 'S NEXT{TRUE} (SELECT a FROM T)'"),
    ("S NEXT{TRUE} SELECT a FROM T NEXT{TRUE} U", 14, "write 'S NEXT{TRUE} (SELECT a FROM T) NEXT{TRUE} U'"),
    ("SELECT a FROM SELECT b AS a FROM S", 15, "write 'SELECT a FROM (SELECT b AS a FROM S)'"),
    ("S FOLD{TRUE, TRUE}\n  SELECT a FROM FILTER{x > 1}(T)", "line 2, column 3",
     "write 'S FOLD{TRUE, TRUE}\\n  (SELECT a FROM FILTER{x > 1}(T))'"),
    ("SELECT * FROM S UNION select * FROM T PUBLISH X", 23, "write 'SELECT * FROM S UNION (select * FROM T) PUBLISH X'"),
])
def test_select_operand_error_shows_where_the_parentheses_go(text, position, fix):
    with pytest.raises(SubscriptionError) as exc:
        parse(text)
    assert exc.value.position == position and fix in exc.value.reason
    fixed = eval(fix.removeprefix("write "))  # the suggestion parses
    assert parse(fixed) is not None


def test_select_operand_error_without_a_fix_that_parses():
    with pytest.raises(SubscriptionError) as exc:  # another mistake follows: no suggestion
        parse("S NEXT{TRUE} SELECT a FROM T NEXT{")
    assert exc.value.position == 14 and exc.value.reason == "a SELECT used as an operand needs parentheses of its own"


def test_a_long_text_gets_no_suggestion():  # each try parses the whole text
    with pytest.raises(SubscriptionError) as exc:
        parse("S NEXT{TRUE} SELECT a FROM T" + " " * 5000)
    assert exc.value.position == 14 and exc.value.reason == "a SELECT used as an operand needs parentheses of its own"


@pytest.mark.parametrize(("text", "position", "hint"), [
    ("S FOLD{TRUE, TRUE} (A NEXT{TRUE} B)", 21, "left to right: L FOLD{...} A NEXT{...} B"),
    ("S NEXT{TRUE} FILTER{x > 1}(A FOLD{TRUE, TRUE} B)", 14, "left to right: L NEXT{...} A FOLD{...} B"),
    ("S NEXT{TRUE}\n  (A UNION B)", "line 2, column 4", "FILTER{p OR q}(S)"),
    ("S UNLESS{TRUE, 3} (A NEXT{TRUE} B)", 20, "absence of one stream's events"),
])
def test_right_operand_error_says_what_to_write(text, position, hint):
    with pytest.raises(SubscriptionError) as exc:
        parse(text)
    assert exc.value.position == position and "left-deep" in exc.value.reason and hint in exc.value.reason


def test_right_operand_error_of_algebra_built_in_code_names_the_operand():
    from matchers.cayuga import algebra as A
    from matchers.cayuga.compiler import chains

    expr = A.Next(A.Stream("S"), A.TRUE, A.Union(A.Stream("A"), A.Stream("B")))
    with pytest.raises(SubscriptionError) as exc:
        chains(expr)
    assert "not Union(left=Stream(name='A')" in exc.value.reason and "FILTER{p OR q}(S)" in exc.value.reason


def test_where_is_explained():
    with pytest.raises(SubscriptionError) as exc:
        parse("SELECT * FROM Stock WHERE price > 100")
    assert exc.value.position == 21 and "CEL has no WHERE" in exc.value.reason


def test_select_inside_filter_needs_no_double_parentheses():
    assert parse("FILTER{x > 1}(SELECT * FROM S)") == parse("FILTER{x > 1}((SELECT * FROM S))")


def test_min_max_values():
    from matchers.cayuga import algebra as A
    from matchers.cayuga.closures import value_fn

    # the first of the smallest (1, not 1.0); NaN propagates; a mismatch or a missing value is unknown
    cases = [([3, 1, 2], 1, 3), ([1, 1.0], 1, 1), ([1.0, 1], 1.0, 1.0), (["b", "a"], "a", "b"), ([1, "a"], None, None),
             ([1, None], None, None), ([True, 1], None, None), ([2, math.nan], math.nan, math.nan), ([math.inf, 1], 1, math.inf)]
    for values, lo, hi in cases:
        ctx = {A.LAST: {f"v{i}": v for i, v in enumerate(values) if v is not None}}
        args = tuple(A.Attr(A.LAST, f"v{i}") for i in range(len(values)))
        for name, want in (("min", lo), ("max", hi)):
            term = A.Func(name, args)
            got = A.eval_value(term, ctx, None)
            assert (repr(got), type(got)) == (repr(want), type(want)), (name, values)
            assert repr(value_fn(term)({}, ctx[A.LAST], {}, None)) == repr(got)


def test_fold_keeps_running_min_and_max():
    text = ("SELECT name, lo, hi FROM FILTER{DUR >= 3}((SELECT name, price AS lo, price AS hi FROM Stock)"
            " FOLD{$2.name = $.name, TRUE, min($.lo, $2.price) AS lo, max($.hi, $2.price) AS hi} Stock)")
    events = [Event(f"e{i}", "Stock", i, i, {"name": "A", "price": p}) for i, p in enumerate([5, 3, 8, 4])]
    got = reference_matches({"q": text}, events)
    assert [(m[2], m[5]) for m in got if m[5][0] == "e0"] == [
        ((("hi", 8), ("lo", 3), ("name", "A")), ("e0", "e1", "e2")),
        ((("hi", 8), ("lo", 3), ("name", "A")), ("e0", "e1", "e2", "e3")),
    ]
    assert same(engine_matches({"q": text}, events)) == same(got)


RISE = "Stock FOLD{$2.price > $.price, TRUE} Stock"


@pytest.mark.parametrize(("skip", "pairs"), [
    ("", [("e0", "e1"), ("e0", "e1", "e2"), ("e1", "e2"), ("e0", "e1", "e2", "e3"), ("e1", "e2", "e3"), ("e2", "e3"),
          ("e4", "e5")]),
    # the next match starts after the last event of the previous one
    ("SKIP PAST LAST", [("e0", "e1"), ("e2", "e3"), ("e4", "e5")]),
    # one match per start event: the first
    ("SKIP TO NEXT", [("e0", "e1"), ("e1", "e2"), ("e2", "e3"), ("e4", "e5")]),
])
def test_after_match_skip(skip, pairs):
    events = _stock((0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (5, 1))
    subs = {"q": f"{RISE} {skip}"}
    got = reference_matches(subs, events)
    assert sorted(m[5] for m in got) == sorted(pairs)
    assert same(engine_matches(subs, events)) == same(got)


def test_skip_marks_are_per_subscription_on_shared_nodes():
    events = _stock((0, 1), (1, 2), (2, 3), (3, 4))
    subs = {"all": RISE, "past": f"{RISE} SKIP PAST LAST", "next": f"{RISE} SKIP TO NEXT"}
    eng = Engine()
    for k, v in subs.items():
        eng.add(k, v)
    assert len(eng.nodes) == 1
    assert same(engine_matches(subs, events)) == same(reference_matches(subs, events))


def test_skip_must_end_the_subscription():
    with pytest.raises(SubscriptionError):
        parse("(S SKIP TO NEXT) NEXT{TRUE} S")


FAILED_NOT_FOLLOWED = "FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 300} Login"


def _logins(*rows) -> list[Event]:
    return [Event(f"l{i}", "Login", t, t, {"user": u, "ok": ok}) for i, (t, u, ok) in enumerate(rows)]


def test_failed_login_not_followed_by_a_success_within_5_minutes():
    events = _logins((0, "ann", False), (10, "bob", False), (100, "ann", True), (200, "bob", False),
                     (320, "eve", True), (600, "ann", False))
    subs = {"q": FAILED_NOT_FOLLOWED}
    # bob's failure at 10 has no success until 310: reported by the event at 320; bob's at 200 when
    # time passes 500 (the event at 600); ann's at 600 only when time is advanced to 900
    got = reference_matches(subs, events, until=900)
    assert [(m[0], m[3], m[4], m[5]) for m in got] == [(4, 10, 310, ("l1",)), (5, 200, 500, ("l3",)), (6, 600, 900, ("l5",))]
    assert same(engine_matches(subs, events, until=900)) == same(got)
    assert [m[5] for m in reference_matches(subs, events, until=899)] == [("l1",), ("l3",)]
    for cut in range(len(events) + 1):
        assert same(restarted_matches(subs, events, cut, until=900)) == same(got)


def test_advance_fires_deadlines_and_next_expiry_names_them():
    eng = Engine()
    eng.add("q", FAILED_NOT_FOLLOWED)
    assert eng.process(Event("a", "Login", 5, 5, {"user": "ann", "ok": False})) == []
    assert eng.next_expiry() == 305
    assert eng.advance(304) == []
    [m] = eng.advance(305)
    assert (m.sub_id, m.t0, m.t1, m.witness) == ("q", 5, 305, ("a",))
    assert eng.instances == 0 and eng.next_expiry() is None


def test_an_absence_nothing_can_kill_still_fires():
    # no user attribute: the equality with $1.user can never hold
    events = [Event("a", "Login", 0, 0, {"ok": False}), Event("b", "Login", 1, 1, {"user": "x", "ok": True})]
    subs = {"q": FAILED_NOT_FOLLOWED}
    assert [m[5] for m in reference_matches(subs, events, until=300)] == [("a",)]
    assert same(engine_matches(subs, events, until=300)) == same(reference_matches(subs, events, until=300))


def test_absence_feeds_a_sequence():
    subs = {"q": "(A UNLESS{$2.k = $1.k, 2} B) NEXT{$2.k = $1.k} C"}
    events = [Event("a1", "A", 0, 0, {"k": 1}), Event("a2", "A", 1, 1, {"k": 2}), Event("b", "B", 2, 2, {"k": 2}),
              Event("c1", "C", 3, 3, {"k": 1}), Event("c2", "C", 3, 3, {"k": 2})]
    got = reference_matches(subs, events)
    assert [(m[0], m[5]) for m in got] == [(3, ("a1", "c1"))]
    assert same(engine_matches(subs, events)) == same(got)


@pytest.mark.parametrize(("text", "attr"), [
    (FAILED_NOT_FOLLOWED, None),  # a failure without a user can be killed by nothing: reported all the same
    ("(Login NEXT{$2.user = $1.user} Login) UNLESS{$2.user = $1.user, 5} Login", "user"),
    ("(Login NEXT{$2.user = $1.user} Login) UNLESS{TRUE, 5} Login", None),
])
def test_partition_attribute_of_an_absence(text, attr):
    from matchers.cayuga.compiler import chains, partition_attribute

    assert partition_attribute(chains(parse(text))) == attr


RISES = "SELECT name, price FROM Stock NEXT{$2.name = $1.name AND $2.price > $1.price} Stock PUBLISH Rise"


def test_published_records_are_events_of_their_stream():
    subs = {"rise": RISES, "two": "Rise NEXT{$2.name = $1.name} Rise"}
    events = [Event(f"e{i}", "Stock", i, i, {"name": "A", "price": p}) for i, p in enumerate([1, 2, 3, 1, 2])]
    got = reference_matches(subs, events)
    # rises (e0,e1), (e1,e2), (e3,e4); a rise after a rise (the next starts after the first ends): at e4
    assert [(m[0], m[1], m[5]) for m in got] == [
        (1, "rise", ("e0", "e1")), (2, "rise", ("e1", "e2")), (4, "rise", ("e3", "e4")),
        (4, "two", ("e0", "e1", "e3", "e4")), (4, "two", ("e1", "e2", "e3", "e4"))]
    for kw in ({}, {"merge": False}, {"indexed": False}):
        assert same(engine_matches(subs, events, **kw)) == same(got)


def test_published_absence_feeds_another_subscription():
    subs = {"quiet": "SELECT * FROM FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 5} Login"
                     " PUBLISH Quiet",
            "twice": "Quiet NEXT{$2.user = $1.user} Quiet SKIP PAST LAST"}
    events = _logins((0, "a", False), (10, "a", False), (20, "b", False), (21, "a", False), (22, "a", True))
    got = reference_matches(subs, events, until=40)
    # a's failures at 0 and 10 are quiet (known at 10 and 20), the one at 21 is followed by a success; b's at 20
    # is known when time is advanced
    assert [(m[0], m[1], m[5]) for m in got] == [
        (1, "quiet", ("l0",)), (2, "quiet", ("l1",)), (2, "twice", ("l0", "l1")), (5, "quiet", ("l2",))]
    assert same(engine_matches(subs, events, until=40)) == same(got)
    for cut in range(len(events) + 1):
        assert same(restarted_matches(subs, events, cut, until=40)) == same(got)


SWAP = "SELECT y AS x, x AS y, c FROM"
BOTH = f"((({SWAP} {{s}})) UNION (({SWAP} (SELECT *, 1 AS c FROM {{s}})))) WITHIN 0"


@pytest.mark.parametrize(("subs", "events", "until", "expected"), [
    # hypothesis' example: P gets {x, c} and {x} (witness e0); both give q2 {y, c} (one record), and {y}
    ({"q0": f"SELECT * FROM ({BOTH.format(s='A')}) PUBLISH P", "q1": f"SELECT * FROM ({SWAP} A) PUBLISH Q",
      "q2": BOTH.format(s="P")},
     [Event("e0", "A", 0, 0, {"y": "s"})], None,
     [(0, "q0", (("c", 1), ("x", "s")), 0, 0, ("e0",)), (0, "q0", (("x", "s"),), 0, 0, ("e0",)),
      (0, "q1", (("x", "s"),), 0, 0, ("e0",)),
      (0, "q2", (("c", 1), ("y", "s")), 0, 0, ("e0",)), (0, "q2", (("y", "s"),), 0, 0, ("e0",))]),
    # the event itself and what it publishes give one record
    ({"q0": "SELECT * FROM A PUBLISH P", "q2": "(SELECT y FROM A) UNION (SELECT y FROM P)"},
     [Event("e0", "A", 0, 0, {"y": 1})], None,
     [(0, "q0", (("y", 1),), 0, 0, ("e0",)), (0, "q2", (("y", 1),), 0, 0, ("e0",))]),
    # two absences of one deadline publish two records that give one
    ({"q0": "SELECT * FROM (A UNLESS{TRUE, 2} B) PUBLISH P",
      "q1": "SELECT *, 1 AS c FROM (A UNLESS{TRUE, 2} B) PUBLISH P", "q2": "SELECT y FROM P"},
     [Event("e0", "A", 0, 0, {"y": 1}), Event("e1", "B", 5, 5, {})], 10,
     [(1, "q0", (("y", 1),), 0, 2, ("e0",)), (1, "q1", (("c", 1), ("y", 1)), 0, 2, ("e0",)),
      (1, "q2", (("y", 1),), 0, 2, ("e0",))]),
    # hypothesis' next example: q2 gets {c: 1} once (from P's {c: 1}) and {c: 1.0} once (from both)
    ({"q0": f"SELECT * FROM ({BOTH.format(s='A')}) PUBLISH P",
      "q2": "((P) UNION ((SELECT *, y AS c FROM FILTER{y <= 3}(P)))) WITHIN 0"},
     [Event("e0", "A", 0, 0, {"x": 1.0, "y": "s"})], None,
     [(0, "q0", (("c", 1), ("x", "s"), ("y", 1.0)), 0, 0, ("e0",)), (0, "q0", (("x", "s"), ("y", 1.0)), 0, 0, ("e0",)),
      (0, "q2", (("c", 1), ("x", "s"), ("y", 1.0)), 0, 0, ("e0",)),
      (0, "q2", (("c", 1.0), ("x", "s"), ("y", 1.0)), 0, 0, ("e0",)), (0, "q2", (("x", "s"), ("y", 1.0)), 0, 0, ("e0",))]),
])
def test_a_record_derived_through_several_publications_of_a_step_is_reported_once(subs, events, until, expected):
    got = reference_matches(subs, events, until)
    assert same(got) == same(sorted(expected, key=repr))
    for kw in ({}, {"merge": False}, {"indexed": False}):
        assert same(engine_matches(subs, events, until, **kw)) == same(got)
    for cut in range(len(events) + 1):
        assert same(restarted_matches(subs, events, cut, until)) == same(got)


@pytest.mark.parametrize(("text", "attrs", "expected"), [
    # 1 = 1.0 holds, but {c: 1} and {c: 1.0} are two records whichever operand comes first
    ("(A) UNION (SELECT *, y AS c FROM FILTER{y <= 3}(A))", {"c": 1, "y": 1.0}, [{"c": 1, "y": 1.0}, {"c": 1.0, "y": 1.0}]),
    ("(SELECT *, y AS c FROM FILTER{y <= 3}(A)) UNION (A)", {"c": 1.0, "y": 1}, [{"c": 1.0, "y": 1}, {"c": 1, "y": 1}]),
    # TRUE is not 1
    ("(A) UNION (SELECT *, 1 AS c FROM FILTER{y <= 3}(A))", {"c": True, "y": 1}, [{"c": True, "y": 1}, {"c": 1, "y": 1}]),
    ("(A) UNION (SELECT *, 1.0 AS c FROM FILTER{y <= 3}(A))", {"c": 1.0, "y": 1}, [{"c": 1.0, "y": 1}]),
])
def test_records_with_values_of_different_types_are_different(text, attrs, expected):
    events = [Event("e0", "A", 0, 0, attrs)]
    got = reference_matches({"q": text}, events)
    assert same(got) == same(sorted(((0, "q", tuple(sorted(a.items())), 0, 0, ("e0",)) for a in expected), key=repr))
    for kw in ({}, {"merge": False}, {"indexed": False}):
        assert same(engine_matches({"q": text}, events, **kw)) == same(got)


@pytest.mark.parametrize("subs", [
    {"a": "SELECT * FROM X NEXT{TRUE} X PUBLISH X"},
    {"a": "SELECT * FROM X NEXT{TRUE} Y PUBLISH Z", "b": "SELECT * FROM Z PUBLISH X"},
])
def test_a_cycle_of_publications_is_refused(subs):
    eng = Engine()
    with pytest.raises(SubscriptionError) as exc:
        for k, v in subs.items():
            eng.add(k, v)
    assert "own records" in exc.value.reason


def test_skip_to_next_forgets_only_start_events_without_runs():
    from .streams import stock_ticks

    events = stock_ticks(400, 9, symbols=("IBM",))
    subs = {"q": f"{RISE} SKIP TO NEXT", "p": "SELECT * FROM FILTER{DUR <= 3}(Stock NEXT{TRUE} Stock) PUBLISH Pair",
            "r": "Pair FOLD{$2.price > $.price, TRUE} Pair SKIP TO NEXT"}
    got = reference_matches(subs, events)
    assert len({m[5][0] for m in got if m[1] == "q"}) > 100  # the marks are pruned along the way
    assert same(engine_matches(subs, events)) == same(got)

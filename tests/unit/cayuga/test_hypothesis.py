"""Hypothesis-generated left-deep subscriptions and streams: engine equals reference."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.cayuga.algebra import Event

from .helpers import engine_matches, reference_matches, restarted_matches, same

STATIC = ["x = 1", "x != 2", "y > 2", "y <= 3", "x = 1 OR y = 0", "NOT y < 2", "TRUE", "DUR <= 2"]
THETA = [
    "TRUE",
    "$2.x = $1.x",
    "$2.x = $.x",
    "$2.y > $.y",
    "$2.y <= $1.y + 1",
    "$2.x = 1",
    "$2.y >= 2",
    "$2.x = $1.x AND $2.y > $.y",
    "$2.x = $.x AND $2.y < $.y * 2",
    "$2.x != $1.x OR $2.y = 0",
    "NOT $2.y = $.y",
    "DUR <= 6",
    "$2.c = $.c",
    "$2.y > $.y - $1.y",  # inf - inf: a NaN range bound
    "$2.y <= $1.y * 0",
    "$2.y > max($.y, 1)",
    "$2.y <= min($.y, $1.y, 3)",
]
CONT = ["TRUE", "$2.y >= $.y", "$2.y != $1.y", "DUR <= 8", "$2.x = $.x"]
AGGS = ["", ", $.c + 1 AS c", ", $.y + $2.y AS s", ", $1.y AS y0", ", min($.y, $2.y) AS y", ", max($.c, $2.y) AS c"]
SKIPS = ["", "SKIP PAST LAST", "SKIP TO NEXT"]
POST = ["", "FILTER{DUR >= 3}", "FILTER{DUR <= 5}", "FILTER{y > 1}", "FILTER{c > 2}", "SELECT x, y, c FROM"]


@st.composite
def views(draw, names=("A", "B")):
    stream = draw(st.sampled_from(names))
    text = stream
    if draw(st.booleans()):
        text = f"FILTER{{{draw(st.sampled_from(STATIC))}}}({text})"
    if draw(st.booleans()):
        text = f"(SELECT *, {draw(st.sampled_from(['1', 'y', 'x + y']))} AS c FROM {text})"
    if draw(st.integers(0, 4)) == 0:
        text = f"(SELECT y AS x, x AS y, c FROM {text})"
    return text


@st.composite
def subscriptions(draw, absence: bool = True, names=("A", "B")):
    text = draw(views(names))
    for _ in range(draw(st.integers(0, 3))):
        right = draw(views(names))
        kind = draw(st.sampled_from(["next", "fold", "unless"] if absence else ["next", "fold"]))
        if kind == "next":
            text = f"({text}) NEXT{{{draw(st.sampled_from(THETA))}}} {right}"
        elif kind == "unless":
            text = f"({text}) UNLESS{{{draw(st.sampled_from(THETA))}, {draw(st.integers(1, 4))}}} {right}"
        else:
            theta, cont, aggs = draw(st.sampled_from(THETA)), draw(st.sampled_from(CONT)), draw(st.sampled_from(AGGS))
            text = f"({text}) FOLD{{{theta}, {cont}{aggs}}} {right}"
        post = draw(st.sampled_from(POST))
        if post.startswith("FILTER"):
            text = f"{post}({text})"
        elif post:
            text = f"({post} {text})"
    if draw(st.integers(0, 5)) == 0:
        text = f"({text}) UNION ({draw(views(names))})"
    if draw(st.integers(0, 3)) == 0:
        text = f"({text}) WITHIN {draw(st.integers(0, 6))}"
    return text


TICKS_MS = [1, 250, 1000, 60_000]
"""Milliseconds per tick the durations with a unit are drawn for."""


@st.composite
def durations(draw, tick_ms: int, positive: bool) -> str:
    """A duration with a unit, about 0 to 6 ticks of ``tick_ms`` (sometimes half a tick more)."""
    ms = draw(st.integers(0, 6)) * tick_ms + draw(st.sampled_from([0, 0, tick_ms // 2, tick_ms - 1]))
    if positive and ms == 0:
        ms = 1
    unit, per = draw(st.sampled_from([("ms", 1), ("s", 1000), ("min", 60_000), ("h", 3_600_000)]))
    return f"{Fraction(ms, per).numerator / Fraction(ms, per).denominator!r} {unit}" if ms % per else f"{ms // per} {unit}"


@st.composite
def timed_subscriptions(draw, tick_ms: int) -> str:
    """A subscription with an ``UNLESS`` window or a ``WITHIN`` bound written with a unit."""
    left, right = draw(views()), draw(views())
    theta = draw(st.sampled_from(THETA))
    if draw(st.booleans()):
        text = f"({left}) UNLESS{{{theta}, {draw(durations(tick_ms, positive=True))}}} {right}"
    else:
        text = f"({left}) NEXT{{{theta}}} {right}"
    if draw(st.booleans()):
        text = f"({text}) WITHIN {draw(durations(tick_ms, positive=False))}"
    return text


@st.composite
def streams(draw):
    n = draw(st.integers(0, 30))
    t = 0
    out = []
    for i in range(n):
        t += draw(st.integers(0, 2))
        length = draw(st.sampled_from([0, 0, 0, 1, 2]))
        # 1.0 meets 1 and TRUE does not: the typed comparisons and the bucket keys must agree
        attrs = {"x": draw(st.sampled_from([0, 1, 2, 0, 1, 2, 1.0, True])), "y": draw(st.integers(0, 4))}
        if draw(st.integers(0, 6)) == 0:
            del attrs["x"]
        if draw(st.integers(0, 6)) == 0:
            attrs["y"] = "s"
        if draw(st.integers(0, 6)) == 0:  # NaN and infinities from valid JSON through arithmetic overflow
            attrs["y"] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        out.append(Event(f"e{i}", draw(st.sampled_from(["A", "B"])), max(0, t - length), t, attrs))
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tick_ms=st.sampled_from(TICKS_MS), events=streams(),
       after=st.none() | st.integers(0, 6))
def test_durations_with_units_engine_equals_reference(data, tick_ms, events, after):
    """``WITHIN 1.5 s``, ``UNLESS{θ, 250 ms}``: the engine and the reference agree for each tick
    length, and a duration is the ticks it holds, rounded down."""
    from matchers.cayuga.language import UNIT_MS, parse

    named = {f"q{i}": data.draw(timed_subscriptions(tick_ms)) for i in range(data.draw(st.integers(1, 2)))}
    until = None if after is None else (events[-1].t1 if events else 0) + after
    expected = same(reference_matches(named, events, until, tick_ms=tick_ms))
    assert same(engine_matches(named, events, until, tick_ms=tick_ms)) == expected
    text = data.draw(durations(tick_ms, positive=False))
    number, unit = text.split()
    ticks = int(Fraction(number) * UNIT_MS[unit] // tick_ms)
    assert parse(f"A WITHIN {text}", tick_ms) == parse(f"A WITHIN {ticks}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(subscriptions(), min_size=1, max_size=3), events=streams(), after=st.none() | st.integers(0, 6))
def test_engine_equals_reference(subs, events, after):
    named = {f"q{i}": text for i, text in enumerate(subs)}
    until = None if after is None else (events[-1].t1 if events else 0) + after
    expected = same(reference_matches(named, events, until))
    assert same(engine_matches(named, events, until)) == expected
    assert same(engine_matches(named, events, until, merge=False)) == expected
    assert same(engine_matches(named, events, until, indexed=False)) == expected
    assert same(engine_matches(named, events, until, flat=True)) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=subscriptions(), events=streams())
def test_shared_prefixes_with_identical_copies(text, events):
    named = {"a": text, "b": text, "c": f"FILTER{{DUR >= 2}}({text})"}
    assert same(engine_matches(named, events)) == same(reference_matches(named, events))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=subscriptions(absence=False), events=streams())
def test_partitioned_runs_equal_one_run(text, events):
    from matchers.cayuga.compiler import chains, partition_attribute
    from matchers.cayuga.language import parse
    from matchers.cayuga.static import tag

    attr = partition_attribute(chains(parse(text)))
    if attr is None:
        return
    positions = {e.id: i for i, e in enumerate(events)}
    groups: dict = {}
    for e in events:
        if attr in e.attrs:
            groups.setdefault(tag(e.attrs[attr]), []).append(e)
    got = []
    for part in groups.values():
        for k in engine_matches({"q": text}, part):
            got.append((positions[k[5][-1]],) + k[1:])
    assert same(sorted(got, key=repr)) == same(reference_matches({"q": text}, events))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=subscriptions(), ticks=st.integers(0, 6), events=streams())
def test_within_is_the_outer_duration_filter(text, ticks, events):
    within = {"q": f"({text}) WITHIN {ticks}"}
    expected = same(reference_matches({"q": f"FILTER{{DUR <= {ticks + 1}}}({text})"}, events))
    assert same(reference_matches(within, events)) == expected
    assert same(engine_matches(within, events)) == expected


def assert_engine_equals_reference(named, events, cut, until):
    """Merged, private and unindexed engines, and one restarted at event ``cut``, all give
    the reference's matches (instances, absence deadlines and skip marks are the exported
    state: a restart at any event changes nothing)."""
    expected = same(reference_matches(named, events, until))
    assert same(engine_matches(named, events, until)) == expected
    assert same(engine_matches(named, events, until, merge=False)) == expected
    assert same(engine_matches(named, events, until, indexed=False)) == expected
    assert same(restarted_matches(named, events, cut, until)) == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(subscriptions(), min_size=1, max_size=3), modes=st.lists(st.sampled_from(SKIPS), min_size=3, max_size=3),
       events=streams(), cut=st.integers(0, 30), after=st.none() | st.integers(0, 6))
def test_after_match_skip_and_restarts_equal_reference(subs, modes, events, cut, after):
    named = {f"q{i}": f"{text} {mode}" for i, (text, mode) in enumerate(zip(subs, modes, strict=False))}
    until = None if after is None else (events[-1].t1 if events else 0) + after
    assert_engine_equals_reference(named, events, cut, until)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=subscriptions(), events=streams(), after=st.integers(0, 6))
def test_partitioned_absence_equals_one_run(text, events, after):
    """Run per partition value (as the service does), an absence is reported later (by
    the partition's next event or the final advance) but the same records are."""
    from matchers.cayuga.compiler import chains, partition_attribute
    from matchers.cayuga.language import parse
    from matchers.cayuga.static import tag

    attr = partition_attribute(chains(parse(text)))
    if attr is None:
        return
    until = (events[-1].t1 if events else 0) + after
    groups: dict = {}
    for e in events:
        if attr in e.attrs:
            groups.setdefault(tag(e.attrs[attr]), []).append(e)
    got = [k[1:] for part in groups.values() for k in engine_matches({"q": text}, part, until)]
    assert sorted(same(got)) == sorted(same(k[1:] for k in reference_matches({"q": text}, events, until)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=subscriptions(), second=subscriptions(names=("A", "P")), third=subscriptions(names=("P", "Q")),
       modes=st.lists(st.sampled_from(SKIPS), min_size=3, max_size=3), events=streams(), cut=st.integers(0, 30),
       after=st.none() | st.integers(0, 6))
def test_published_streams_equal_reference(first, second, third, modes, events, cut, after):
    named = {"q0": f"SELECT * FROM ({first}) {modes[0]} PUBLISH P", "q1": f"SELECT * FROM ({second}) {modes[1]} PUBLISH Q",
             "q2": f"{third} {modes[2]}"}
    until = None if after is None else (events[-1].t1 if events else 0) + after
    assert_engine_equals_reference(named, events, cut, until)
